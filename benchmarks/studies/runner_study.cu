// A study of the validator's two costs that issue 15 measures (a diagnostic, not a test; it prints
// numbers and asserts nothing). Build and run on a GPU machine with benchmarks/studies/runner_study.sh.
//
// 1. The gated correctness check. The candidate holds its stream behind a gate while the judge,
//    in another process (another CUDA context), reads the outputs. Does the judge's read wait for
//    the GPU to switch contexts when the gate is a spinning kernel, and not when it is a
//    stream-memory wait (cuStreamWaitValue32), or when the judge reads with a copy instead of a
//    kernel?
// 2. Where a launch-bound kernel's per-process timing shift comes from: the buffers' placement,
//    the stream (hardware channel) or the code's placement (the module loaded several times).
//    Each call picks a buffer group, a stream and a module copy at random; the interquartile
//    means per group / stream / module show which of them moves the time.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                     \
    do {                                                                                          \
        auto e_ = (x);                                                                            \
        if (e_ != 0) {                                                                            \
            std::fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #x, (int)e_);    \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void gelu_bias_scalar(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, long long n, long long row) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = gelu(x[i] + b[i % row]);
}

__global__ void flush_kernel(const uint4* buf, size_t n, unsigned long long* sink) {
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc += buf[i].x ^ buf[i].w;
    if (acc == 0x12345) *sink = acc;
}

__global__ void gate_kernel(volatile int* open, long long cycles) {
    long long t0 = clock64();
    while (!*open && clock64() - t0 < cycles) {
    }
}

__global__ void checksum_kernel(const unsigned long long* p, size_t n, unsigned long long* out) {
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc += p[i] * (i | 1);
    atomicAdd(out, acc);
}

static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static double iqm(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t a = v.size() / 4, b = v.size() - a;
    double s = 0;
    for (size_t i = a; i < b; ++i) s += v[i];
    return s / (b - a);
}

// Part 1: the candidate (child) gates its stream; the judge (parent) reads 64 MB meanwhile.
static void gate_study() {
    int to_child[2], to_parent[2];
    CK(pipe(to_child));
    CK(pipe(to_parent));
    pid_t pid = fork();
    if (pid == 0) {  // the candidate's side
        CK(cudaSetDevice(0));
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        int* gate = nullptr;
        CK(cudaHostAlloc(reinterpret_cast<void**>(&gate), sizeof(int), cudaHostAllocMapped));
        int* gate_dev = nullptr;
        CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_dev), gate, 0));
        float* y = nullptr;
        CK(cudaMalloc(&y, 33 * 1001 * 4));
        char mode;
        while (read(to_child[0], &mode, 1) == 1 && mode != 'q') {
            *reinterpret_cast<volatile int*>(gate) = 0;
            if (mode == 'k') gate_kernel<<<1, 1, 0, s>>>(gate_dev, 2000000000ll);
            else CK(cuStreamWaitValue32(s, reinterpret_cast<CUdeviceptr>(gate_dev), 1, CU_STREAM_WAIT_VALUE_GEQ));
            CK(cudaMemsetAsync(y, 0, 33 * 1001 * 4, s));  // the "kernel" queued behind the gate
            char c = 'g';
            CK(write(to_parent[1], &c, 1) != 1);
            CK(read(to_child[0], &c, 1) != 1);  // 'o': open
            *reinterpret_cast<volatile int*>(gate) = 1;
            double t0 = now_ms();
            CK(cudaStreamSynchronize(s));
            double t1 = now_ms();
            char msg[64];
            int len = std::snprintf(msg, sizeof msg, "%8.3f", t1 - t0);
            CK(write(to_parent[1], msg, len) != len);
        }
        _exit(0);
    }
    CK(cudaSetDevice(0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const size_t bytes = 64u << 20;
    unsigned long long *buf = nullptr, *sum = nullptr;
    CK(cudaMalloc(&buf, bytes));
    CK(cudaMemset(buf, 1, bytes));
    CK(cudaMalloc(&sum, 8));
    void* host = nullptr;
    CK(cudaHostAlloc(&host, bytes, 0));
    CK(cudaDeviceSynchronize());
    for (char mode : {'k', 'w', 'k', 'w'}) {
        for (int rep = 0; rep < 4; ++rep) {
            CK(write(to_child[1], &mode, 1) != 1);
            char c;
            CK(read(to_parent[0], &c, 1) != 1);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            double t0 = now_ms();
            CK(cudaMemsetAsync(sum, 0, 8, s));
            checksum_kernel<<<132 * 16, 256, 0, s>>>(buf, bytes / 8, sum);
            unsigned long long v = 0;
            CK(cudaMemcpyAsync(&v, sum, 8, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            double t1 = now_ms();
            CK(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            double t2 = now_ms();
            CK(cudaMemcpyAsync(host, buf, 33 * 1001 * 4, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            double t3 = now_ms();
            c = 'o';
            CK(write(to_child[1], &c, 1) != 1);
            char msg[65] = {0};
            ssize_t got = read(to_parent[0], msg, 64);
            msg[got > 0 ? got : 0] = 0;
            std::printf("gate %-11s judge: checksum kernel (64 MB) %7.3f ms, D2H copy 64 MB %7.3f ms, D2H copy 132 KB %7.3f ms; candidate sync after opening %s ms\n",
                        mode == 'k' ? "kernel" : "wait-value", t1 - t0, t2 - t1, t3 - t2, msg);
        }
    }
    char q = 'q';
    CK(write(to_child[1], &q, 1) != 1);
    waitpid(pid, nullptr, 0);
}

// Part 2: where a launch-bound kernel's time moves (in this process, as the runner times it).
static void placement_study(const char* cubin) {
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));
    const int G = 8, S = 8, M = 8;
    const long long rows = 33, cols = 1001, n = rows * cols;
    std::vector<CUmodule> mods(M);
    std::vector<CUfunction> fns(M);
    for (int m = 0; m < M; ++m) {
        CK(cuModuleLoad(&mods[m], cubin));
        CK(cuModuleGetFunction(&fns[m], mods[m], "gelu_bias_scalar"));
    }
    CUfunction empty_fn;
    CK(cuModuleGetFunction(&empty_fn, mods[0], "empty_kernel"));
    std::vector<cudaStream_t> streams(S);
    for (auto& s : streams) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::vector<float*> xs(G), bs(G), ys(G);
    std::vector<void*> pads;
    for (int g = 0; g < G; ++g) {
        CK(cudaMalloc(&xs[g], n * 4));
        CK(cudaMalloc(&bs[g], cols * 4));
        CK(cudaMalloc(&ys[g], n * 4));
        CK(cudaMemset(xs[g], 0, n * 4));
        CK(cudaMemset(bs[g], 0, cols * 4));
        void* pad = nullptr;  // spread the groups over memory
        CK(cudaMalloc(&pad, (size_t(g) + 1) * (3u << 20)));
        pads.push_back(pad);
    }
    const size_t flush_bytes = 256u << 20;
    uint4* flush = nullptr;
    unsigned long long* sink = nullptr;
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 3, flush_bytes));
    CK(cudaMalloc(&sink, 8));
    const int batch = 64, batches = 126;
    std::vector<cudaEvent_t> e0(batch), e1(batch);
    for (int j = 0; j < batch; ++j) {
        CK(cudaEventCreate(&e0[j]));
        CK(cudaEventCreate(&e1[j]));
    }
    std::mt19937 rng(12345);
    std::vector<std::vector<double>> by_g(G), by_s(S), by_m(M), one_stream_one_module(G), empty_by_s(S);
    std::vector<double> all;
    for (int b = 0; b < batches; ++b) {
        // Batches in threes. 1: stream 0 and module copy 0 (as the runner does today), groups
        // rotating. 0: the streams in turn, one per batch; groups and module copies at random.
        // 2: an empty kernel, the streams in turn (what a call costs that does nothing).
        const bool fixed = b % 3 == 1, empty = b % 3 == 2;
        const int batch_stream = (b / 3) % S;
        std::vector<int> gg(batch), ss(batch), mm(batch);
        for (int j = 0; j < batch; ++j) {
            gg[j] = rng() % G;
            ss[j] = fixed ? 0 : batch_stream;
            if (empty) {
                cudaStream_t st = streams[ss[j]];
                flush_kernel<<<132 * 4, 512, 0, st>>>(flush, flush_bytes / 16, sink);
                CK(cudaEventRecord(e0[j], st));
                CK(cuLaunchKernel(empty_fn, 1, 1, 1, 32, 1, 1, 0, st, nullptr, nullptr));
                CK(cudaEventRecord(e1[j], st));
                continue;
            }
            mm[j] = fixed ? 0 : rng() % M;
            cudaStream_t st = streams[ss[j]];
            flush_kernel<<<132 * 4, 512, 0, st>>>(flush, flush_bytes / 16, sink);
            CK(cudaEventRecord(e0[j], st));
            long long nn = n, rr = cols;
            const float* x = xs[gg[j]];
            const float* bias = bs[gg[j]];
            float* y = ys[gg[j]];
            void* args[] = {&x, &bias, &y, &nn, &rr};
            CK(cuLaunchKernel(fns[mm[j]], (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, st, args, nullptr));
            CK(cudaEventRecord(e1[j], st));
        }
        CK(cudaDeviceSynchronize());
        if (b < 3) continue;  // warm-up
        for (int j = 0; j < batch; ++j) {
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0[j], e1[j]));
            double us = ms * 1000.0;
            if (fixed) {
                one_stream_one_module[gg[j]].push_back(us);
                continue;
            }
            if (empty) {
                empty_by_s[ss[j]].push_back(us);
                continue;
            }
            all.push_back(us);
            by_g[gg[j]].push_back(us);
            by_s[ss[j]].push_back(us);
            by_m[mm[j]].push_back(us);
        }
    }
    auto line = [](const char* what, const std::vector<std::vector<double>>& v) {
        std::printf("  %-36s", what);
        double lo = 1e30, hi = 0;
        for (const auto& x : v) {
            double q = iqm(x);
            lo = std::min(lo, q), hi = std::max(hi, q);
            std::printf(" %6.3f", q);
        }
        std::printf("   spread %.1f%%\n", (hi - lo) / lo * 100);
    };
    std::printf("placement study (gelu_bias 33x1001, L2 flushed before each call): IQM %.3f us over %zu calls\n", iqm(all), all.size());
    line("IQM per buffer group", by_g);
    line("IQM per stream", by_s);
    line("IQM per module copy", by_m);
    line("IQM per group, stream 0 + module 0", one_stream_one_module);
    line("IQM of an empty kernel per stream", empty_by_s);
    std::vector<double> s0;
    for (const auto& x : one_stream_one_module) s0.insert(s0.end(), x.begin(), x.end());
    std::vector<double> all_empty;
    for (const auto& x : empty_by_s) all_empty.insert(all_empty.end(), x.begin(), x.end());
    std::printf("  SUMMARY all streams %.3f us, stream 0 only %.3f us, empty kernel all streams %.3f us\n", iqm(all), iqm(s0), iqm(all_empty));
}

int main(int argc, char** argv) {
    std::string what = argc > 1 ? argv[1] : "all";
    if (what == "gate" || what == "all") gate_study();
    if (what == "placement" || what == "all") {
        if (argc < 3) {
            std::fprintf(stderr, "usage: runner_study gate | placement CUBIN\n");
            return 2;
        }
        CK(cuInit(0));
        placement_study(argv[2]);
    }
    return 0;
}
