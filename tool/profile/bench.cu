// kernelevo-bench: runs one compiled candidate (a kernel ABI .so) on inputs drawn as the task says,
// so that a profiler (ncu --profile-from-start off) sees exactly the candidate's own launches: the
// inputs are filled and `--warmup` calls made first, then `--calls` calls between
// cudaProfilerStart and cudaProfilerStop. Torch-free; no outputs are checked (the validator did).
//
//   kernelevo-bench --kernel K.so [--warmup 3] [--calls 1] [--confine]
//                   --in DTYPE:D0,D1,...:INIT:A:B ... --out DTYPE:D0,D1,... ...
// --confine: after CUDA starts and before the candidate is loaded (so its static constructors
// already run confined), Landlock (writes only to the current directory, /tmp and /dev; reads
// only system paths and the kernel) and seccomp (no exec, no fork, no access to other processes;
// sockets stay allowed for the profiler's injected library, which is why the profiler runs the
// bench only inside the sandbox's network namespace: tool/profile/profile.cpp).
// DTYPE is a kevo_dtype value (kernelevo/abi.h), INIT a kevo_init_kind value (task/init_kind.h).
// Exit 0 ok; 2 bad usage; 3 the kernel could not be loaded; 4 a CUDA error or a failing kevo_forward.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <kernelevo/abi.h>

#include "sandbox/confine.h"
#include "task/init_kind.h"

namespace {

typedef int (*forward_fn)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t);

struct Spec {
    kevo_tensor t{};
    int init = KEVO_INIT_ZEROS;
    double a = 0, b = 1;
};

__device__ unsigned long long mix(unsigned long long z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ double value_at(long long i, int init, double a, double b, unsigned long long seed) {
    double u = ((mix(seed * 0x100000001b3ULL + i) >> 11) + 0.5) * 0x1.0p-53;
    switch (init) {
        case KEVO_INIT_RANDN: {
            double u2 = ((mix(seed * 0x100000001b3ULL + i + 0x51ed27ULL) >> 11) + 0.5) * 0x1.0p-53;
            return a + b * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * u2);
        }
        case KEVO_INIT_RAND: return a + (b - a) * u;
        case KEVO_INIT_RANDINT: return floor(a + (b - a) * u);
        case KEVO_INIT_ONES: return 1;
        case KEVO_INIT_FULL: return a;
        case KEVO_INIT_ARANGE: return (double)i;
        default: return 0;  // zeros (and kinds the bench does not draw, such as file)
    }
}

__global__ void kevo_bench_fill(void* data, long long n, int dtype, int init, double a, double b, unsigned long long seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        double v = value_at(i, init, a, b, seed);
        switch (dtype) {
            case KEVO_FLOAT32: ((float*)data)[i] = (float)v; break;
            case KEVO_FLOAT16: ((__half*)data)[i] = __double2half(v); break;
            case KEVO_BFLOAT16: ((__nv_bfloat16*)data)[i] = __float2bfloat16((float)v); break;
            case KEVO_FLOAT64: ((double*)data)[i] = v; break;
            case KEVO_INT32: ((int*)data)[i] = (int)v; break;
            case KEVO_INT64: ((long long*)data)[i] = (long long)v; break;
            case KEVO_INT8: ((signed char*)data)[i] = (signed char)v; break;
            case KEVO_UINT8: ((unsigned char*)data)[i] = (unsigned char)v; break;
            case KEVO_BOOL: ((unsigned char*)data)[i] = v != 0; break;
        }
    }
}

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "kernelevo-bench: %s\nusage: kernelevo-bench --kernel K.so [--warmup N] [--calls N] "
                         "--in DTYPE:D0,D1:INIT:A:B ... --out DTYPE:D0,D1 ...\n", why.c_str());
    std::exit(2);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t from = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) out.push_back(s.substr(from, i - from)), from = i + 1;
    return out;
}

Spec parse_spec(const std::string& text, bool input) {
    std::vector<std::string> f = split(text, ':');
    if (f.size() != (input ? 5u : 2u)) usage("bad tensor spec '" + text + "'");
    Spec s;
    s.t.dtype = std::atoi(f[0].c_str());
    if (s.t.dtype < 0 || s.t.dtype >= KEVO_DTYPE_COUNT) usage("unknown dtype in '" + text + "'");
    if (!f[1].empty())
        for (const std::string& d : split(f[1], ',')) {
            if (s.t.ndim >= KEVO_MAX_DIMS) usage("too many dimensions in '" + text + "'");
            s.t.sizes[s.t.ndim++] = std::atoll(d.c_str());
        }
    long long stride = 1;
    for (int i = s.t.ndim - 1; i >= 0; --i) s.t.strides[i] = stride, stride *= s.t.sizes[i];
    if (input) {
        s.init = std::atoi(f[2].c_str());
        if (!kevo_init_kind_name(s.init)) usage("unknown init kind in '" + text + "'");
        s.a = std::atof(f[3].c_str());
        s.b = std::atof(f[4].c_str());
    }
    return s;
}

bool check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    std::fprintf(stderr, "kernelevo-bench: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    std::string kernel;
    int warmup = 3, calls = 1;
    bool confine = false;
    std::vector<Spec> in, out;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--kernel") kernel = next();
        else if (a == "--warmup") warmup = std::atoi(next().c_str());
        else if (a == "--calls") calls = std::atoi(next().c_str());
        else if (a == "--in") in.push_back(parse_spec(next(), true));
        else if (a == "--out") out.push_back(parse_spec(next(), false));
        else if (a == "--confine") confine = true;
        else usage("unknown argument " + a);
    }
    if (kernel.empty() || out.empty() || calls < 1 || warmup < 0) usage("--kernel, at least one --out and --calls >= 1 are required");
    // CUDA first: it opens the device files and may start helpers, which the confinement forbids.
    // Without a device this fails here and the first allocation below says so.
    cudaFree(nullptr);
    if (confine) {
        kevo::ConfineOptions co;
        char cwd[4096];
        if (getcwd(cwd, sizeof cwd)) co.writable.push_back(cwd);
        co.writable.insert(co.writable.end(), {"/tmp", "/dev"});
        co.readable = kevo::system_readable_paths();
        co.readable.push_back(kernel);
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) co.readable.push_back(std::string(self, (size_t)n));
        co.sockets = true;
        kevo::ConfineReport cr = kevo::confine_current_process(co);
        if (!cr.notes.empty()) std::fprintf(stderr, "kernelevo-bench: confinement incomplete:\n%s", cr.notes.c_str());
    }
    void* lib = dlopen(kernel.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return std::fprintf(stderr, "kernelevo-bench: cannot load %s: %s\n", kernel.c_str(), dlerror()), 3;
    auto forward = (forward_fn)dlsym(lib, "kevo_forward");
    if (!forward) return std::fprintf(stderr, "kernelevo-bench: %s has no kevo_forward\n", kernel.c_str()), 3;

    std::vector<kevo_tensor> tin, tout;
    unsigned long long seed = 1;
    for (auto* list : {&in, &out})
        for (Spec& s : *list) {
            long long n = kevo_numel(&s.t);
            if (!check(cudaMalloc(&s.t.data, (size_t)(n > 0 ? n : 1) * kevo_dtype_size(s.t.dtype)), "cudaMalloc")) return 4;
            kevo_bench_fill<<<256, 256>>>(s.t.data, n, s.t.dtype, list == &in ? s.init : KEVO_INIT_ZEROS, s.a, s.b, seed++);
            (list == &in ? tin : tout).push_back(s.t);
        }
    cudaStream_t stream;
    if (!check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
        !check(cudaDeviceSynchronize(), "filling the inputs"))
        return 4;
    for (int c = 0; c < warmup + calls; ++c) {
        if (c == warmup) cudaProfilerStart();
        int rc = forward(tin.data(), (int)tin.size(), tout.data(), (int)tout.size(), stream);
        if (rc != 0) return std::fprintf(stderr, "kernelevo-bench: kevo_forward returned %d\n", rc), 4;
    }
    bool ok = check(cudaStreamSynchronize(stream), "running the kernel");
    cudaProfilerStop();
    return ok ? 0 : 4;
}
