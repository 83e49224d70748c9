// Dispatch overhead: kevo_select() + the launch through the chosen pointer, versus calling the
// kernel's launcher directly with the same kevo_tensor arguments. The "kernel" is an empty host
// function (kernel time excluded); the device architecture is injected, so no GPU is needed.
// Target: at most 50 ns per call over the direct call.
//   ./kevo_dispatch_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include "kernelevo/runtime.h"

namespace {

extern "C" __attribute__((noinline)) int launcher(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t) {
    benchmark::DoNotOptimize(in);
    benchmark::DoNotOptimize(out);
    return 0;
}

// gelu_bias-shaped: x[M,N], bias[N] -> y[M,N]; two architectures compiled in.
const kevo_tensor_spec kIn[] = {{"x", KEVO_FLOAT32, 2, {-1, -2}}, {"bias", KEVO_FLOAT32, 1, {-2}}};
const kevo_tensor_spec kOut[] = {{"y", KEVO_FLOAT32, 2, {-1, -2}}};
const char* const kSym[] = {"M", "N"};
const kevo_kernel_entry kKernels[] = {{"sm_80", 80, &launcher}, {"sm_90", 90, &launcher}};
kevo_function g_fn = {"bench_fn", 2, 1, 2, 2, kIn, kOut, kSym, kKernels, "sm_80,sm_90", 0, 0, 0};

alignas(16) float g_buf[16];

void fill(kevo_tensor* in, kevo_tensor* out) {
    in[0] = kevo_tensor{};
    in[0].data = g_buf, in[0].ndim = 2, in[0].dtype = KEVO_FLOAT32;
    in[0].sizes[0] = 4096, in[0].sizes[1] = 4096, in[0].strides[0] = 4096, in[0].strides[1] = 1;
    in[1] = kevo_tensor{};
    in[1].data = g_buf, in[1].ndim = 1, in[1].dtype = KEVO_FLOAT32, in[1].sizes[0] = 4096, in[1].strides[0] = 1;
    out[0] = in[0];
}

void BM_DirectLauncher(benchmark::State& state) {
    kevo_tensor in[2], out[1];
    fill(in, out);
    for (auto _ : state) {
        int rc = launcher(in, 2, out, 1, nullptr);
        benchmark::DoNotOptimize(rc);
    }
}
BENCHMARK(BM_DirectLauncher);

void BM_DispatchThenLaunch(benchmark::State& state) {
    kevo_set_device_cc(90);
    kevo_set_disabled(0);
    kevo_tensor in[2], out[1];
    fill(in, out);
    for (auto _ : state) {
        kevo_forward_fn fn = kevo_select(&g_fn, 0, in, 2, out, 1);
        out[0].data = g_buf;
        int rc = fn(in, 2, out, 1, nullptr);
        benchmark::DoNotOptimize(rc);
    }
    kevo_set_device_cc(-1);
}
BENCHMARK(BM_DispatchThenLaunch);

void BM_DecideReference(benchmark::State& state) {  // no kernel for this arch: the fallback decision
    kevo_set_device_cc(86);
    kevo_tensor in[2], out[1];
    fill(in, out);
    for (auto _ : state) {
        kevo_forward_fn fn = kevo_select(&g_fn, 0, in, 2, out, 1);
        benchmark::DoNotOptimize(fn);
    }
    kevo_set_device_cc(-1);
}
BENCHMARK(BM_DecideReference);

}  // namespace

BENCHMARK_MAIN();
