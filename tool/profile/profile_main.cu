// kernelevo-profile: runs one compiled candidate (a kernel ABI .so) on inputs drawn as the task says,
// so that a profiler (ncu --profile-from-start off) sees exactly the candidate's own launches: the
// inputs are filled and `--warmup` calls made first, then `--calls` calls between
// cudaProfilerStart and cudaProfilerStop. Torch-free; no outputs are checked (the validator did).
//
//   kernelevo-profile --kernel K.so [--warmup 3] [--calls 1] [--seed 42] [--confine] [--dump-inputs DIR]
//                   [--turns DIR] --in DTYPE:D0,D1,...:INIT:A:B ... --out DTYPE:D0,D1,... ...
// Input k is drawn by the validator's filler (tool/device/fill.cuh) with tensor_seed(seed, k), so
// with the seed of a validation (its details' "seed", a correctness trial's) the program sees the
// values that trial checked. --dump-inputs: write input k's bytes to DIR/in<k>.bin after filling and
// exit before loading the kernel (tests/device compares them with the host filler).
// --turns DIR: the calls wait for the GPU alone, asked for in DIR (common/turn_files.h, validate/turns.h);
// starting, loading and filling share it.
// --confine: after CUDA starts and before the candidate is loaded (so its static constructors
// already run confined), Landlock (writes only to the current directory, /tmp and /dev; reads
// only system paths and the kernel) and seccomp (no exec, no fork, no access to other processes;
// sockets stay allowed for the profiler's injected library, which is why the profiler runs the
// program only inside the sandbox's network namespace: tool/profile/profile.cpp).
// DTYPE is a kevo_dtype value (kernelevo/abi.h), INIT a kevo_init_kind value (task/init_kind.h).
// Exit 0 ok; 2 bad usage; 3 the kernel could not be loaded; 4 a CUDA error or a failing kevo_forward.
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
#include <kernelevo/cublas_host.h>

#include "common/turn_files.h"
#include "device/fill.cuh"
#include "sandbox/confine.h"
#include "task/init_kind.h"

namespace {

typedef int (*forward_fn)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t);

struct Spec {
    kevo_tensor t{};
    int init = KEVO_INIT_ZEROS;
    double a = 0, b = 1;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "kernelevo-profile: %s\nusage: kernelevo-profile --kernel K.so [--warmup N] [--calls N] [--seed S] "
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
    std::fprintf(stderr, "kernelevo-profile: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

// Allocates every tensor; input k gets the validator's values for `seed` (tensor_seed(seed, k)),
// outputs zeros.
bool allocate_and_fill(std::vector<Spec>& in, std::vector<Spec>& out, unsigned long long seed) {
    for (auto* list : {&in, &out})
        for (size_t k = 0; k < list->size(); ++k) {
            Spec& s = (*list)[k];
            long long n = kevo_numel(&s.t);
            if (!check(cudaMalloc(&s.t.data, (size_t)(n > 0 ? n : 1) * kevo_dtype_size(s.t.dtype)), "cudaMalloc")) return false;
            if (list == &in) {
                kevo_device::fill_kernel<<<256, 256>>>(s.t.data, s.t.dtype, n, s.init, s.a, s.b, kevo_device::tensor_seed(seed, k));
                if (!check(cudaGetLastError(), "launching the filler")) return false;  // a launch error is not sticky: only here
            } else if (!check(cudaMemset(s.t.data, 0, (size_t)n * kevo_dtype_size(s.t.dtype)), "cudaMemset"))
                return false;
        }
    return check(cudaDeviceSynchronize(), "filling the inputs");
}

// --dump-inputs: input k's bytes as DIR/in<k>.bin.
bool dump_inputs(const std::vector<Spec>& in, const std::string& dir) {
    for (size_t k = 0; k < in.size(); ++k) {
        size_t bytes = (size_t)kevo_numel(&in[k].t) * kevo_dtype_size(in[k].t.dtype);
        std::vector<char> host(bytes);
        if (!check(cudaMemcpy(host.data(), in[k].t.data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy")) return false;
        std::string path = dir + "/in" + std::to_string(k) + ".bin";
        FILE* f = std::fopen(path.c_str(), "wb");
        bool ok = f && std::fwrite(host.data(), 1, bytes, f) == bytes;
        if (f) ok = std::fclose(f) == 0 && ok;
        if (!ok) return std::fprintf(stderr, "kernelevo-profile: cannot write %s\n", path.c_str()), false;
    }
    return true;
}

}  // namespace

// The ABI's cuBLAS entry points for the kernel (prepared in main before the confinement).
KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(kevo_cublas::Host::instance().api())

int main(int argc, char** argv) {
    std::string kernel, dump, turns;
    int warmup = 3, calls = 1;
    unsigned long long seed = 42;  // the validator's default seed (kevo::Job)
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
        else if (a == "--seed") seed = std::strtoull(next().c_str(), nullptr, 10);
        else if (a == "--dump-inputs") dump = next();
        else if (a == "--confine") confine = true;
        else if (a == "--turns") turns = next();
        else usage("unknown argument " + a);
    }
    if ((kernel.empty() && dump.empty()) || out.empty() || calls < 1 || warmup < 0) usage("--kernel, at least one --out and --calls >= 1 are required");
    // CUDA first: it opens the device files and may start helpers, which the confinement forbids.
    // Without a device this fails here and the first allocation below says so.
    cudaFree(nullptr);
    // The stream, and cuBLAS for a kernel of ABI version 2, before the confinement (cublas_host.h);
    // a stream that could not be made is reported where it is first used.
    cudaStream_t stream = nullptr;
    const cudaError_t stream_made = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (!kernel.empty() && stream_made == cudaSuccess) {
        int device = 0;
        cudaGetDevice(&device);
        const std::string blas = kevo_cublas::prepare_for_kernel(kernel.c_str(), KEVO_CUBLAS_LIBRARY, KEVO_CUBLASLT_LIBRARY, device, stream);
        if (!blas.empty()) return std::fprintf(stderr, "kernelevo-profile: %s\n", blas.c_str()), 4;
    }
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
        if (!cr.notes.empty()) std::fprintf(stderr, "kernelevo-profile: confinement incomplete:\n%s", cr.notes.c_str());
    }
    if (!dump.empty()) return allocate_and_fill(in, out, seed) && dump_inputs(in, dump) ? 0 : 4;
    void* lib = dlopen(kernel.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return std::fprintf(stderr, "kernelevo-profile: cannot load %s: %s\n", kernel.c_str(), dlerror()), 3;
    auto forward = (forward_fn)dlsym(lib, "kevo_forward");
    if (!forward) return std::fprintf(stderr, "kernelevo-profile: %s has no kevo_forward\n", kernel.c_str()), 3;
    if (!allocate_and_fill(in, out, seed)) return 4;
    std::vector<kevo_tensor> tin, tout;
    for (const Spec& s : in) tin.push_back(s.t);
    for (const Spec& s : out) tout.push_back(s.t);
    if (!check(stream_made, "cudaStreamCreate")) return 4;
    // The GPU alone for the calls (common/turn_files.h): ncu replays the profiled ones there.
    kevo::take_turn(turns, 0);
    for (int c = 0; c < warmup + calls; ++c) {
        if (c == warmup) cudaProfilerStart();
        int rc = forward(tin.data(), (int)tin.size(), tout.data(), (int)tout.size(), stream);
        if (rc != 0) return std::fprintf(stderr, "kernelevo-profile: kevo_forward returned %d\n", rc), 4;
    }
    bool ok = check(cudaStreamSynchronize(stream), "running the kernel");
    cudaProfilerStop();
    kevo::end_turn(turns, 0);
    return ok ? 0 : 4;
}
