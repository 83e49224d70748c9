/* KernelEvo: the caller's side of kernel ABI version 2 (kernelevo/abi.h): the cuBLAS and cuBLASLt
 * handles and the workspace a kernel gets from kevo_cublas_handle(), kevo_cublaslt_handle() and
 * kevo_cublas_workspace(). The one implementation of them, shared by every caller: the validator's
 * runner (handles prepared before the sandbox closes, then frozen), the runtime of
 * kernelevo_optimize() libraries (KernelEvo::cublas) and kernelevo.load_op's glue.
 *
 * C++, header-only. Exactly one source of a program defines the C entry points:
 *     #include "kernelevo/cublas_host.h"
 *     KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(kevo_cublas::linked_api())
 * (linked_api() calls the cuBLAS the program links; the runner passes a table it fills with dlsym).
 *
 * Handles: one pair per (host thread, device), as PyTorch keeps them (a handle is not to be shared
 * by threads). Workspaces: one per (device, stream), so work on one stream never races another's.
 * Every lookup re-binds the handle to the asked stream and its workspace, and resets the state a
 * previous kernel may have changed (pointer mode, math mode). */
#ifndef KERNELEVO_CUBLAS_HOST_H
#define KERNELEVO_CUBLAS_HOST_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <mutex>
#include <utility>

#include "kernelevo/abi.h"

namespace kevo_cublas {

/* The cuBLAS calls the host side makes, as a table: linked directly, or looked up at run time. */
struct Api {
    cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
    cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
    cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t) = nullptr;
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
    cublasStatus_t (*lt_create)(cublasLtHandle_t*) = nullptr;
    bool complete() const { return create && set_stream && set_workspace && set_pointer_mode && set_math_mode && lt_create; }
};

/* The table of the cuBLAS this program links (the runtime's and load_op's glue). */
inline Api linked_api() {
    Api a;
    a.create = &cublasCreate_v2;
    a.set_stream = &cublasSetStream_v2;
    a.set_workspace = &cublasSetWorkspace_v2;
    a.set_pointer_mode = &cublasSetPointerMode_v2;
    a.set_math_mode = &cublasSetMathMode;
    a.lt_create = &cublasLtCreate;
    return a;
}

/* The table of the cuBLAS opened at run time from these files (a caller that links no cuBLAS: the
 * validator's runner, kernelevo-profile); incomplete when they cannot be opened. RTLD_GLOBAL: a
 * kernel that needs the same library (the same soname) then gets this copy, the handles' own. */
inline Api opened_api(const char* blas_path, const char* lt_path) {
    Api a;
    void* blas = dlopen(blas_path, RTLD_NOW | RTLD_GLOBAL);
    void* lt = dlopen(lt_path, RTLD_NOW | RTLD_GLOBAL);
    if (!blas || !lt) return a;
    a.create = reinterpret_cast<decltype(a.create)>(dlsym(blas, "cublasCreate_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(dlsym(blas, "cublasSetStream_v2"));
    a.set_workspace = reinterpret_cast<decltype(a.set_workspace)>(dlsym(blas, "cublasSetWorkspace_v2"));
    a.set_pointer_mode = reinterpret_cast<decltype(a.set_pointer_mode)>(dlsym(blas, "cublasSetPointerMode_v2"));
    a.set_math_mode = reinterpret_cast<decltype(a.set_math_mode)>(dlsym(blas, "cublasSetMathMode"));
    a.lt_create = reinterpret_cast<decltype(a.lt_create)>(dlsym(lt, "cublasLtCreate"));
    return a;
}

/* Whether the compiled kernel at `path` refers to the ABI's cuBLAS entry points (their names, all
 * starting with KEVO_CUBLAS_SYMBOL_PREFIX, are in its dynamic symbol table). */
inline bool kernel_uses_cublas(const char* path) {
    std::ifstream f(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return bytes.find(KEVO_CUBLAS_SYMBOL_PREFIX) != std::string::npos;
}

/* The workspace of each (device, stream): 32 MiB, as PyTorch gives cuBLASLt on Hopper. */
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct Handles {
    cublasHandle_t blas = nullptr;  // null where cublasCreate failed
    cublasLtHandle_t lt = nullptr;  // null where cublasLtCreate failed
    bool tried = false;             // made (or failed) once: never again on this thread and device
};

class Host {
public:
    static Host& instance() {
        static Host* h = new Host();  // never destroyed: kernels may run during static destruction
        return *h;
    }

    void set_api(const Api& api) {
        std::lock_guard<std::mutex> lock(mu_);
        api_ = api;
    }

    /* Makes this thread's handles on `device` and the workspace of (device, stream) now, so that a
     * later lookup allocates nothing; with freeze, nothing else is ever made (the runner: a kernel
     * asking for another stream gets NULL). Returns an empty string or why it failed. */
    const char* prepare(int device, cudaStream_t stream, bool freeze) {
        if (cudaSetDevice(device) != cudaSuccess) return "cudaSetDevice failed";
        const Handles& h = handles(device);
        if (!h.blas || !h.lt) return "cublasCreate or cublasLtCreate failed";
        size_t bytes = 0;
        if (!workspace(device, stream, &bytes)) return "the cuBLAS workspace could not be allocated";
        std::lock_guard<std::mutex> lock(mu_);
        frozen_ = freeze;
        return "";
    }

    Api api() {
        std::lock_guard<std::mutex> lock(mu_);
        return api_;
    }

    void freeze() {
        std::lock_guard<std::mutex> lock(mu_);
        frozen_ = true;
    }

    cublasHandle_t blas(cudaStream_t stream) {
        int device = 0;
        size_t bytes = 0;
        if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
        Handles& h = handles(device);
        void* ws = workspace(device, stream, &bytes);
        if (!h.blas || !ws) return nullptr;
        if (api_.set_stream(h.blas, stream) != CUBLAS_STATUS_SUCCESS) return nullptr;
        if (api_.set_workspace(h.blas, ws, bytes) != CUBLAS_STATUS_SUCCESS) return nullptr;
        api_.set_pointer_mode(h.blas, CUBLAS_POINTER_MODE_HOST);
        api_.set_math_mode(h.blas, CUBLAS_DEFAULT_MATH);
        return h.blas;
    }

    cublasLtHandle_t lt(cudaStream_t stream) {
        int device = 0;
        size_t bytes = 0;
        if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
        if (!workspace(device, stream, &bytes)) return nullptr;  // refuses a stream the runner did not prepare
        return handles(device).lt;
    }

    void* workspace(cudaStream_t stream, size_t* bytes) {
        int device = 0;
        if (bytes) *bytes = 0;
        if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
        size_t n = 0;
        void* p = workspace(device, stream, &n);
        if (p && bytes) *bytes = n;
        return p;
    }

private:
    Handles& handles(int device) {
        thread_local std::map<int, Handles> mine;
        Handles& h = mine[device];
        if (h.tried) return h;
        std::lock_guard<std::mutex> lock(mu_);
        if (frozen_ || !api_.complete()) return h;  // nothing made (the runner once frozen)
        h.tried = true;
        if (api_.create(&h.blas) != CUBLAS_STATUS_SUCCESS) h.blas = nullptr;
        if (api_.lt_create(&h.lt) != CUBLAS_STATUS_SUCCESS) h.lt = nullptr;
        return h;
    }

    void* workspace(int device, cudaStream_t stream, size_t* bytes) {
        std::lock_guard<std::mutex> lock(mu_);
        auto key = std::make_pair(device, reinterpret_cast<uintptr_t>(stream));
        auto it = workspaces_.find(key);
        if (it != workspaces_.end()) {
            *bytes = kWorkspaceBytes;
            return it->second;
        }
        if (frozen_) return nullptr;
        void* p = nullptr;
        if (cudaMalloc(&p, kWorkspaceBytes) != cudaSuccess) {
            (void)cudaGetLastError();
            return nullptr;
        }
        workspaces_[key] = p;
        *bytes = kWorkspaceBytes;
        return p;
    }

    std::mutex mu_;
    Api api_;
    bool frozen_ = false;
    std::map<std::pair<int, uintptr_t>, void*> workspaces_;
};

/* For a program that opens compiled kernels (the validator's runner, kernelevo-profile), before the
 * sandbox closes and before the kernel is opened: when the kernel at `kernel` uses the ABI's cuBLAS,
 * opens cuBLAS (blas_path, lt_path), makes this thread's handles on `device` and the workspace of
 * `stream`. Either way, freezes: nothing is made later and no other stream is served. Its entry
 * points: KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(kevo_cublas::Host::instance().api()), exported by
 * the program (LINKER:--export-dynamic-symbol=kevo_cublas*). Returns "" or why it failed. */
inline std::string prepare_for_kernel(const char* kernel, const char* blas_path, const char* lt_path, int device,
                                      cudaStream_t stream) {
    Host& host = Host::instance();
    std::string why;
    if (kernel_uses_cublas(kernel)) {
        const Api api = opened_api(blas_path, lt_path);
        if (!api.complete()) {
            const char* e = dlerror();
            why = std::string("cannot open cuBLAS (") + blas_path + ", " + lt_path + ")" + (e ? std::string(": ") + e : "");
        } else {
            host.set_api(api);
            why = host.prepare(device, stream, true);
        }
    }
    host.freeze();
    return why;
}

}  // namespace kevo_cublas

/* Defines the C entry points of ABI version 2 over Host::instance(), the table `api` installed on
 * first use. Once per program (per shared object loaded with its own symbols). */
#define KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(api)                                                  \
    static kevo_cublas::Host& kevo_cublas_host_() {                                                \
        static kevo_cublas::Host& h = (kevo_cublas::Host::instance().set_api(api), kevo_cublas::Host::instance()); \
        return h;                                                                                  \
    }                                                                                              \
    extern "C" struct cublasContext* kevo_cublas_handle(cudaStream_t stream) {                     \
        return kevo_cublas_host_().blas(stream);                                                   \
    }                                                                                              \
    extern "C" struct cublasLtContext* kevo_cublaslt_handle(cudaStream_t stream) {                 \
        return kevo_cublas_host_().lt(stream);                                                     \
    }                                                                                              \
    extern "C" void* kevo_cublas_workspace(cudaStream_t stream, size_t* bytes) {                   \
        return kevo_cublas_host_().workspace(stream, bytes);                                       \
    }

#endif /* KERNELEVO_CUBLAS_HOST_H */
