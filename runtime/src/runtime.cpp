// KernelEvo runtime: device detection (cached per device), the KERNELEVO_DISABLE switch, the
// per-call kernel selection and the record of what ran. See kernelevo/runtime.h.
#include "kernelevo/runtime.h"

#include "kernelevo/arch.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {
const char* dtype_label(int32_t dtype) {
    const char* n = kevo_dtype_name(dtype);
    return n ? n : "an unsupported dtype";
}

// ---- devices --------------------------------------------------------------------------------
// cc + 1 per device (0: not queried yet), so zero-initialized storage means "unknown".
std::atomic<int> g_cc_cache[KEVO_MAX_DEVICES];
// Override: -2 not read from the environment yet, -1 none, 0 no GPU, > 0 the cc.
std::atomic<int> g_cc_override{-2};

int override_from_env() {
    const char* v = std::getenv("KERNELEVO_DEVICE_CC");
    if (!v || !*v) return -1;
    if (std::strcmp(v, "none") == 0 || std::strcmp(v, "0") == 0) return 0;
    int cc = kevo_parse_arch(v);
    return cc > 0 ? cc : -1;
}

int current_override() {
    int o = g_cc_override.load(std::memory_order_relaxed);
    if (o == -2) {
        int e = override_from_env();
        int expected = -2;
        g_cc_override.compare_exchange_strong(expected, e, std::memory_order_relaxed);
        o = g_cc_override.load(std::memory_order_relaxed);
    }
    return o;
}

int query_cc(int device) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error for later callers
        return 0;
    }
    if (device < 0 || device >= count) return 0;
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return 10 * major + minor;
}

// ---- the switch ----------------------------------------------------------------------------
std::atomic<int> g_disabled{-1};  // -1: read the environment on next use

int disabled_from_env() {
    const char* v = std::getenv("KERNELEVO_DISABLE");
    if (!v) return 0;
    std::string s(v);
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return !(s.empty() || s == "0" || s == "false" || s == "off" || s == "no");
}

// ---- what ran -------------------------------------------------------------------------------
// last = [63:56] kernel index (0xFF: reference) | [55:48] reason | [47:32] arg | [31:0] detail
constexpr uint64_t kReference = 0xFF;

inline uint64_t pack(uint64_t kernel, int reason, int arg, int detail) {
    return (kernel << 56) | (uint64_t(uint8_t(reason)) << 48) | (uint64_t(uint16_t(arg)) << 32) |
           uint64_t(uint32_t(detail));
}

inline void record(kevo_function* f, uint64_t kernel, int reason, int arg, int detail) {
    __atomic_store_n(&f->last, pack(kernel, reason, arg, detail), __ATOMIC_RELAXED);
    // A plain (unlocked) increment: a locked read-modify-write would cost more than the rest of the
    // dispatch. The counts are statistics; concurrent calls may lose an increment.
    uint64_t* counter = kernel == kReference ? &f->calls_reference : &f->calls_kernel;
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

inline kevo_forward_fn refuse(kevo_function* f, int reason, int arg = -1, int detail = 0) {
    record(f, kReference, reason, arg, detail);
    return nullptr;
}

// The kernel for a device of compute capability cc: its own architecture's, else the closest
// binary-compatible one (same major, the highest minor not above the device's); -1 when none.
int pick_kernel(const kevo_function* f, int cc) {
    int best = -1, best_cc = 0;
    for (int k = 0; k < f->n_kernels; ++k) {
        kevo_arch a{};
        if (!kevo_arch_parse(f->kernels[k].arch, &a)) a.cc = f->kernels[k].cc, a.suffix = 0;
        if (a.cc == cc) return k;
        if (kevo_arch_runs_on(a, cc) && a.cc > best_cc) best = k, best_cc = a.cc;
    }
    return best;
}

struct Registry {
    std::mutex mutex;
    std::vector<kevo_function*> functions;
};
Registry& registry() {
    static Registry* r = new Registry;  // never destroyed: usable from static destructors too
    return *r;
}

}  // namespace

extern "C" {

int kevo_parse_arch(const char* arch) {
    kevo_arch a{};
    return kevo_arch_parse(arch, &a) ? a.cc : 0;
}

int kevo_device_cc(int device) {
    int o = current_override();
    if (o >= 0) return o;
    if (device < 0 || device >= KEVO_MAX_DEVICES) return device < 0 ? 0 : query_cc(device);
    int c = g_cc_cache[device].load(std::memory_order_relaxed);
    if (c) return c - 1;
    int cc = query_cc(device);
    g_cc_cache[device].store(cc + 1, std::memory_order_relaxed);
    return cc;
}

void kevo_set_device_cc(int cc) { g_cc_override.store(cc < 0 ? -1 : cc, std::memory_order_relaxed); }

int kevo_disabled(void) {
    int d = g_disabled.load(std::memory_order_relaxed);
    if (d < 0) {
        d = disabled_from_env();
        g_disabled.store(d, std::memory_order_relaxed);
    }
    return d;
}

void kevo_set_disabled(int disabled) { g_disabled.store(disabled < 0 ? -1 : (disabled ? 1 : 0), std::memory_order_relaxed); }

kevo_forward_fn kevo_select(kevo_function* f, int device, const kevo_tensor* in, int n_in, kevo_tensor* out,
                            int n_out) {
    if (kevo_disabled()) return refuse(f, KEVO_REASON_DISABLED);
    if (device == -2) return refuse(f, KEVO_REASON_MIXED_DEVICES);
    if (device < 0) return refuse(f, KEVO_REASON_NOT_CUDA);
    const int cc = kevo_device_cc(device);
    if (cc <= 0) return refuse(f, KEVO_REASON_NO_DEVICE, -1, device);
    const int k = pick_kernel(f, cc);
    if (k < 0) return refuse(f, KEVO_REASON_NO_KERNEL, -1, cc);
    if (n_in != f->n_in || n_out != f->n_out) return refuse(f, KEVO_REASON_ARG_COUNT, -1, n_in);

    int64_t sym[KEVO_MAX_SYMBOLS];
    const int n_sym = f->n_symbols < KEVO_MAX_SYMBOLS ? f->n_symbols : KEVO_MAX_SYMBOLS;
    for (int s = 0; s < n_sym; ++s) sym[s] = -1;

    for (int i = 0; i < n_in; ++i) {
        const kevo_tensor& t = in[i];
        const kevo_tensor_spec& spec = f->inputs[i];
        if (t.dtype != spec.dtype) return refuse(f, KEVO_REASON_DTYPE, i, t.dtype);
        if (t.ndim != spec.ndim) return refuse(f, KEVO_REASON_RANK, i, t.ndim);
        int64_t expected_stride = 1;
        for (int d = t.ndim - 1; d >= 0; --d) {
            const int64_t size = t.sizes[d];
            const int64_t want = spec.dims[d];
            if (want >= 0) {
                if (size != want) return refuse(f, KEVO_REASON_SHAPE, i, d);
            } else {
                const int s = static_cast<int>(-want - 1);
                if (s >= n_sym) return refuse(f, KEVO_REASON_UNSUPPORTED, i, d);
                if (sym[s] < 0) sym[s] = size;
                else if (sym[s] != size) return refuse(f, KEVO_REASON_SHAPE, i, d);
            }
            if (size == 0) return refuse(f, KEVO_REASON_EMPTY, i, d);
            if (size != 1 && t.strides[d] != expected_stride) return refuse(f, KEVO_REASON_NOT_CONTIGUOUS, i, d);
            expected_stride *= size;
        }
        if (reinterpret_cast<uintptr_t>(t.data) & 15u) return refuse(f, KEVO_REASON_MISALIGNED, i, 0);
    }
    for (int o = 0; o < n_out; ++o) {
        const kevo_tensor_spec& spec = f->outputs[o];
        kevo_tensor& t = out[o];
        t.data = nullptr;
        t.dtype = spec.dtype;
        t.ndim = spec.ndim;
        int64_t stride = 1;
        for (int d = spec.ndim - 1; d >= 0; --d) {
            int64_t size = spec.dims[d];
            if (size < 0) {
                const int s = static_cast<int>(-size - 1);
                size = s < n_sym ? sym[s] : -1;
                if (size < 0) return refuse(f, KEVO_REASON_UNSUPPORTED, n_in + o, d);
            }
            t.sizes[d] = size;
            t.strides[d] = stride;
            stride *= size;
        }
    }
    record(f, static_cast<uint64_t>(k), KEVO_RAN_KERNEL, 0, cc);
    return f->kernels[k].forward;
}

void kevo_record_reference(kevo_function* f, int reason, int arg, int detail) { record(f, kReference, reason, arg, detail); }

int kevo_register_function(kevo_function* f) {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto*& g : r.functions)
        if (std::strcmp(g->name, f->name) == 0) {
            g = f;  // the same function registered twice (e.g. two copies of a static library)
            return 1;
        }
    r.functions.push_back(f);
    return 1;
}

kevo_function* kevo_find_function(const char* name) {
    if (!name) return nullptr;
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto* g : r.functions)
        if (std::strcmp(g->name, name) == 0) return g;
    return nullptr;
}

const char* kevo_last_impl(const char* function) {
    kevo_function* f = kevo_find_function(function);
    if (!f) return nullptr;
    uint64_t last = __atomic_load_n(&f->last, __ATOMIC_RELAXED);
    int reason = static_cast<int>((last >> 48) & 0xFF);
    if (reason == KEVO_NOT_CALLED) return "none";
    uint64_t k = last >> 56;
    if (k == kReference || static_cast<int>(k) >= f->n_kernels) return "reference";
    return f->kernels[k].arch;
}

const char* kevo_last_reason(const char* function) {
    thread_local char buf[512];
    kevo_function* f = kevo_find_function(function);
    if (!f) {
        std::snprintf(buf, sizeof buf, "no function named '%s' is registered", function ? function : "(null)");
        return buf;
    }
    const uint64_t last = __atomic_load_n(&f->last, __ATOMIC_RELAXED);
    const uint64_t k = last >> 56;
    const int reason = static_cast<int>((last >> 48) & 0xFF);
    const int arg = static_cast<int16_t>((last >> 32) & 0xFFFF);
    const int detail = static_cast<int32_t>(last & 0xFFFFFFFFu);
    auto tensor_name = [&](int i) -> const char* {
        if (i >= 0 && i < f->n_in) return f->inputs[i].name;
        if (i >= f->n_in && i < f->n_in + f->n_out) return f->outputs[i - f->n_in].name;
        return "?";
    };
    auto dim_name = [&](int i, int d) -> std::string {
        const kevo_tensor_spec* spec = i < f->n_in ? &f->inputs[i] : (i < f->n_in + f->n_out ? &f->outputs[i - f->n_in] : nullptr);
        if (!spec || d < 0 || d >= spec->ndim) return "?";
        int64_t v = spec->dims[d];
        if (v >= 0) return std::to_string(v);
        int s = static_cast<int>(-v - 1);
        return s < f->n_symbols ? f->symbols[s] : "?";
    };
    const std::string available = f->arches && *f->arches ? f->arches : "none";
    switch (reason) {
        case KEVO_NOT_CALLED: std::snprintf(buf, sizeof buf, "not called yet"); break;
        case KEVO_RAN_KERNEL:
            if (k < uint64_t(f->n_kernels) && f->kernels[k].cc != detail)
                std::snprintf(buf, sizeof buf,
                              "ran the evolved %s kernel on a device of compute capability %d.%d: no sm_%d kernel is "
                              "compiled in, and %s machine code runs on it (binary compatible)",
                              f->kernels[k].arch, detail / 10, detail % 10, detail, f->kernels[k].arch);
            else
                std::snprintf(buf, sizeof buf, "ran the evolved %s kernel (device compute capability %d.%d)",
                              k < uint64_t(f->n_kernels) ? f->kernels[k].arch : "?", detail / 10, detail % 10);
            break;
        case KEVO_REASON_DISABLED: std::snprintf(buf, sizeof buf, "KERNELEVO_DISABLE is set: reference forced"); break;
        case KEVO_REASON_NOT_CUDA: std::snprintf(buf, sizeof buf, "the tensors are not on a CUDA device"); break;
        case KEVO_REASON_MIXED_DEVICES: std::snprintf(buf, sizeof buf, "the tensors are on different CUDA devices"); break;
        case KEVO_REASON_NO_DEVICE: std::snprintf(buf, sizeof buf, "CUDA device %d is not usable (no GPU or driver)", detail); break;
        case KEVO_REASON_NO_KERNEL:
            std::snprintf(buf, sizeof buf, "no kernel for this GPU (sm_%d) nor a binary-compatible one; kernels compiled in: %s",
                          detail, available.c_str());
            break;
        case KEVO_REASON_ARG_COUNT: std::snprintf(buf, sizeof buf, "wrong number of arguments"); break;
        case KEVO_REASON_DTYPE:
            std::snprintf(buf, sizeof buf, "'%s' is %s, the kernel takes %s", tensor_name(arg), dtype_label(detail),
                          arg >= 0 && arg < f->n_in ? dtype_label(f->inputs[arg].dtype) : "?");
            break;
        case KEVO_REASON_RANK:
            std::snprintf(buf, sizeof buf, "'%s' has %d dimensions, the kernel takes %d", tensor_name(arg), detail,
                          arg >= 0 && arg < f->n_in ? f->inputs[arg].ndim : -1);
            break;
        case KEVO_REASON_SHAPE:
            std::snprintf(buf, sizeof buf, "'%s': size of dimension %d does not match %s", tensor_name(arg), detail,
                          dim_name(arg, detail).c_str());
            break;
        case KEVO_REASON_NOT_CONTIGUOUS: std::snprintf(buf, sizeof buf, "'%s' is not contiguous", tensor_name(arg)); break;
        case KEVO_REASON_MISALIGNED: std::snprintf(buf, sizeof buf, "'%s' is not 16-byte aligned", tensor_name(arg)); break;
        case KEVO_REASON_EMPTY: std::snprintf(buf, sizeof buf, "'%s' has no elements", tensor_name(arg)); break;
        case KEVO_REASON_KERNEL_FAILED:
            std::snprintf(buf, sizeof buf, "the %s kernel failed (return code %d); the reference ran instead",
                          available.c_str(), detail);
            break;
        case KEVO_REASON_AUTOGRAD: std::snprintf(buf, sizeof buf, "'%s' requires grad: the reference keeps autograd", tensor_name(arg)); break;
        case KEVO_REASON_UNSUPPORTED:
            std::snprintf(buf, sizeof buf, "the size %s of '%s' is not determined by the inputs", dim_name(arg, detail).c_str(),
                          tensor_name(arg));
            break;
        default: std::snprintf(buf, sizeof buf, "unknown reason %d", reason);
    }
    return buf;
}

const char* kevo_function_arches(const char* function) {
    kevo_function* f = kevo_find_function(function);
    return f && f->arches ? f->arches : "";
}

uint64_t kevo_kernel_calls(const char* function) {
    kevo_function* f = kevo_find_function(function);
    return f ? __atomic_load_n(&f->calls_kernel, __ATOMIC_RELAXED) : 0;
}
uint64_t kevo_reference_calls(const char* function) {
    kevo_function* f = kevo_find_function(function);
    return f ? __atomic_load_n(&f->calls_reference, __ATOMIC_RELAXED) : 0;
}

}  // extern "C"
