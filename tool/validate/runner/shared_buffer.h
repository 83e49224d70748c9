// Device memory the judge allocates and the candidate process maps: CUDA virtual memory management
// allocations exportable as POSIX file descriptors (they cross the sandbox's namespaces as plain
// fds). The judge keeps the only other handle; the candidate process never sees judge memory it
// was not handed (expected outputs, the reference's results).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace kevo_runner {

// The driver API, looked up through the runtime at first use: the runner links no libcuda, so it
// starts (and load-checks candidates) on machines without a GPU driver.
#define KEVO_CU_FUNCTIONS(X)                                                                            \
    X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) \
    X(cuMemMap) X(cuMemSetAccess) X(cuMemCreate) X(cuMemExportToShareableHandle)                          \
    X(cuMemImportFromShareableHandle) X(cuMemUnmap) X(cuMemAddressFree) X(cuMemRelease) X(cuStreamWaitValue32)
struct DriverApi {
#define KEVO_CU_MEMBER_(f) decltype(&::f) f = nullptr;
    KEVO_CU_FUNCTIONS(KEVO_CU_MEMBER_)
#undef KEVO_CU_MEMBER_
    bool ok = false;
};
inline const DriverApi& cu() {
    static DriverApi api = [] {
        DriverApi a;
        a.ok = true;
        cudaDriverEntryPointQueryResult q;
#define KEVO_CU_LOAD_(f)                                                                                     \
    if (cudaGetDriverEntryPointByVersion(#f, reinterpret_cast<void**>(&a.f), 12000, cudaEnableDefault, &q) != \
            cudaSuccess || q != cudaDriverEntryPointSuccess)                                                 \
        a.ok = false;
        KEVO_CU_FUNCTIONS(KEVO_CU_LOAD_)
#undef KEVO_CU_LOAD_
        if (a.ok) a.cuInit(0);
        return a;
    }();
    return api;
}

inline std::string cu_error(CUresult r) {
    if (!cu().ok) return "the CUDA driver API is unavailable";
    const char* n = nullptr;
    const char* s = nullptr;
    cu().cuGetErrorName(r, &n);
    cu().cuGetErrorString(r, &s);
    return std::string(n ? n : "CUDA_ERROR") + " (" + (s ? s : "?") + ")";
}

inline CUmemAllocationProp shareable_prop(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

inline size_t shareable_granularity(int device) {
    static size_t g = 0;
    if (!g) {
        CUmemAllocationProp prop = shareable_prop(device);
        if (cu().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0) g = 2u << 20;
    }
    return g;
}

// What a shareable allocation of `bytes` takes: rounded up to the granularity (at least one unit).
inline size_t shareable_size(size_t bytes, int device) {
    const size_t g = shareable_granularity(device);
    return ((bytes ? bytes : 1) + g - 1) / g * g;
}

// One mapping of a shareable allocation in this process.
struct Mapping {
    CUdeviceptr ptr = 0;
    size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    void* data() const { return reinterpret_cast<void*>(ptr); }
};

// Maps `h` (size bytes) read-write for `device`. Returns an error text, empty on success.
inline std::string map_handle(Mapping& m, int device) {
    CUresult r = cu().cuMemAddressReserve(&m.ptr, m.size, 0, 0, 0);
    if (r != CUDA_SUCCESS) return "cuMemAddressReserve: " + cu_error(r);
    r = cu().cuMemMap(m.ptr, m.size, 0, m.handle, 0);
    if (r != CUDA_SUCCESS) return "cuMemMap: " + cu_error(r);
    CUmemAccessDesc acc{};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = device;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = cu().cuMemSetAccess(m.ptr, m.size, &acc, 1);
    if (r != CUDA_SUCCESS) return "cuMemSetAccess: " + cu_error(r);
    return "";
}

// Judge side: a new exportable allocation of at least `bytes`.
inline std::string create_shared(Mapping& m, size_t bytes, int device) {
    if (!cu().ok) return "the CUDA driver API is unavailable";
    m.size = shareable_size(bytes, device);
    CUmemAllocationProp prop = shareable_prop(device);
    CUresult r = cu().cuMemCreate(&m.handle, m.size, &prop, 0);
    if (r != CUDA_SUCCESS) return "cannot allocate " + std::to_string(bytes) + " bytes of device memory: " + cu_error(r);
    return map_handle(m, device);
}

// Judge side: a new file descriptor for `m`'s allocation, to pass to a candidate process (the caller
// closes it once sent). Exported on demand, so the judge holds no descriptor per buffer however many
// buffers it keeps. Returns an error text, empty on success.
inline std::string export_shared(const Mapping& m, int& fd) {
    fd = -1;
    CUresult r = cu().cuMemExportToShareableHandle(&fd, m.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) return "cuMemExportToShareableHandle: " + cu_error(r);
    return "";
}

// Candidate side: maps an allocation received as `fd`.
inline std::string import_shared(Mapping& m, int fd, size_t size, int device) {
    if (!cu().ok) return "the CUDA driver API is unavailable";
    m.size = size;
    CUresult r = cu().cuMemImportFromShareableHandle(&m.handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (r != CUDA_SUCCESS) return "cuMemImportFromShareableHandle: " + cu_error(r);
    return map_handle(m, device);
}

inline void release(Mapping& m) {
    if (m.ptr) {
        cu().cuMemUnmap(m.ptr, m.size);
        cu().cuMemAddressFree(m.ptr, m.size);
    }
    if (m.handle) cu().cuMemRelease(m.handle);
    m = Mapping{};
}

}  // namespace kevo_runner
