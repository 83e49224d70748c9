// fused_ops: calls two evolvable functions through their generated KernelEvo dispatch, checks
// them against the references, and prints which implementation ran and the measured speedup.
// Exit code: 0 ok, 1 a result did not match its reference.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <kernelevo/gelu_bias.h>    // generated: kernelevo::gelu_bias (torch-free header)
#include <kernelevo/row_softmax.h>  // generated: kernelevo::row_softmax
#include <kernelevo/runtime.h>      // kevo_last_impl(), kevo_last_reason()

namespace ref {  // the references (src/*_ref.cpp)
at::Tensor gelu_bias(const at::Tensor& x, const at::Tensor& bias);
at::Tensor row_softmax(const at::Tensor& x);
}  // namespace ref

namespace {

int cuda_devices() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void sync(bool gpu) {
    if (gpu) cudaDeviceSynchronize();
}

// Median over `reps` batches of the mean time per call, in microseconds.
double time_us(const std::function<void()>& f, bool gpu, int iters, int reps = 7) {
    for (int i = 0; i < 3; ++i) f();
    sync(gpu);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) f();
        sync(gpu);
        t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int failures = 0;

void check(const char* name, const std::string& shape, const at::Tensor& got, const at::Tensor& want, double atol, double rtol) {
    const double diff = (got - want).abs().max().item<double>();
    const bool ok = at::allclose(got, want, rtol, atol);
    if (!ok) ++failures;
    std::printf("  %-12s %-11s %-10s max |diff| %.2e %s\n", name, shape.c_str(), kevo_last_impl(name), diff,
                ok ? "ok" : "MISMATCH");
}

void report(const char* name, const std::string& shape, double evolved_us, double reference_us, bool gpu) {
    const std::string impl = kevo_last_impl(name);
    if (impl == "reference") {
        std::printf("%-12s %-11s ran the reference: %s  (%.1f us)\n", name, shape.c_str(), kevo_last_reason(name), reference_us);
    } else {
        std::printf("%-12s %-11s ran the evolved %s kernel: %.1f us vs reference %.1f us -> %.2fx speedup\n", name, shape.c_str(),
                    impl.c_str(), evolved_us, reference_us, reference_us / evolved_us);
    }
    (void)gpu;
}

}  // namespace

int main() {
    const bool gpu = at::hasCUDA() && cuda_devices() > 0;
    const at::Device dev = gpu ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    if (gpu) {
        cudaDeviceProp p{};
        cudaGetDeviceProperties(&p, 0);
        std::printf("GPU: %s (sm_%d%d); kernels compiled in: gelu_bias [%s], row_softmax [%s]\n", p.name, p.major, p.minor,
                    kevo_function_arches("gelu_bias"), kevo_function_arches("row_softmax"));
    } else {
        std::printf("%s: every call runs the LibTorch reference on the CPU.\n"
                    "Kernels compiled in: gelu_bias [%s], row_softmax [%s]\n",
                    cuda_devices() > 0 ? "This LibTorch has no CUDA support" : "No CUDA GPU here", kevo_function_arches("gelu_bias"), kevo_function_arches("row_softmax"));
    }
    if (kevo_disabled()) std::printf("KERNELEVO_DISABLE is set: references forced.\n");
    at::manual_seed(0);
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(dev);
    const int iters = gpu ? 50 : 1, reps = gpu ? 7 : 1;  // on the CPU the timing is only indicative

    std::printf("\nCorrectness (evolved dispatch vs reference):\n");
    for (auto [m, n] : std::vector<std::pair<int, int>>{{4096, 4096}, {33, 1001}, {8, 4}}) {
        at::Tensor x = at::randn({m, n}, opts), b = at::randn({n}, opts);
        check("gelu_bias", std::to_string(m) + "x" + std::to_string(n), kernelevo::gelu_bias(x, b), ref::gelu_bias(x, b), 1e-4, 1e-4);
    }
    for (auto [m, n] : std::vector<std::pair<int, int>>{{4096, 4096}, {1000, 33}, {64, 20000}, {3, 1}}) {
        at::Tensor x = at::randn({m, n}, opts);
        check("row_softmax", std::to_string(m) + "x" + std::to_string(n), kernelevo::row_softmax(x), ref::row_softmax(x), 1e-5, 1e-4);
    }

    std::printf("\nTiming (median of %d batch(es) of %d call(s)):\n", reps, iters);
    {
        const int m = 4096, n = 4096;
        at::Tensor x = at::randn({m, n}, opts), b = at::randn({n}, opts);
        double evolved = time_us([&] { kernelevo::gelu_bias(x, b); }, gpu, iters, reps);
        double reference = time_us([&] { ref::gelu_bias(x, b); }, gpu, iters, reps);
        kernelevo::gelu_bias(x, b);
        report("gelu_bias", "4096x4096", evolved, reference, gpu);
    }
    {
        const int m = 4096, n = 4096;
        at::Tensor x = at::randn({m, n}, opts);
        double evolved = time_us([&] { kernelevo::row_softmax(x); }, gpu, iters, reps);
        double reference = time_us([&] { ref::row_softmax(x); }, gpu, iters, reps);
        kernelevo::row_softmax(x);
        report("row_softmax", "4096x4096", evolved, reference, gpu);
    }
    if (failures) std::printf("\n%d result(s) did not match the reference\n", failures);
    return failures ? 1 : 0;
}
