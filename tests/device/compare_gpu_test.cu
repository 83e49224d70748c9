// The judge's compare kernels (tool/device/compare.cuh) against the same rule run on the host
// (tolerance.h): the device's scale, counts, first and worst element, sums and verdict are the host
// loop's, over outputs that pass and outputs that game an absolute tolerance. Skips without a CUDA
// device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "device/compare.cuh"

namespace {
using namespace kevo_device;

struct Host {
    OutputTolerance t;
    DiffSums s;
    unsigned long long nonconstant = 0, finite = 0, worst = ~0ull;
    double sum_sq = 0;
};

Host host_compare(const std::vector<float>& got, const std::vector<float>& want, double atol, double rtol) {
    Host h;
    for (float y : want) {
        if (std::isfinite(y)) h.sum_sq += double(y) * y, ++h.finite;
        h.nonconstant += y != want[0];
    }
    h.t = output_tolerance(atol, rtol, h.sum_sq, h.finite);
    h.s = no_diffs();
    for (size_t i = 0; i < got.size(); ++i) add_element(h.s, i, check_element(got[i], want[i], false, h.t));
    for (size_t i = 0; i < got.size() && h.s.mismatches; ++i)
        if (check_element(got[i], want[i], false, h.t).diff == h.s.max_diff) {
            h.worst = i;
            break;
        }
    return h;
}

CompareStats device_compare(const std::vector<float>& got, const std::vector<float>& want, double atol, double rtol, OutputTolerance* t) {
    const size_t bytes = got.size() * sizeof(float);
    void *g = nullptr, *e = nullptr;
    CompareStats* st = nullptr;
    EXPECT_EQ(cudaMalloc(&g, bytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&e, bytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&st, sizeof *st), cudaSuccess);
    cudaMemcpy(g, got.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(e, want.data(), bytes, cudaMemcpyHostToDevice);
    CompareStats s = compare_stats_init();
    cudaMemcpy(st, &s, sizeof s, cudaMemcpyHostToDevice);
    const int64_t n = static_cast<int64_t>(got.size());
    scale_kernel<<<528, 256>>>(e, KEVO_FLOAT32, n, st);
    cudaMemcpy(&s, st, sizeof s, cudaMemcpyDeviceToHost);
    *t = output_tolerance(atol, rtol, s.sum_sq, s.finite);
    compare_kernel<<<528, 256>>>(g, e, KEVO_FLOAT32, n, false, *t, st);
    cudaMemcpy(&s, st, sizeof s, cudaMemcpyDeviceToHost);
    if (s.mismatches) worst_kernel<<<528, 256>>>(g, e, KEVO_FLOAT32, n, false, *t, st);
    EXPECT_EQ(cudaMemcpy(&s, st, sizeof s, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(g);
    cudaFree(e);
    cudaFree(st);
    return s;
}

// Outputs of about 1.2e-4 (a softmax over 8192 columns) and what candidates write for them.
TEST(DeviceCompare, DeviceAndHostGiveTheSameVerdict) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
    const size_t n = (size_t{1} << 20) + 37;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> want(n), honest(n), constant(n, 1.f / 8192), zeros(n, 0.f), rows(n), nan_one(n);
    for (size_t i = 0; i < n; ++i) {
        want[i] = 1.2207e-4f * std::exp(0.1f * normal(rng));
        honest[i] = want[i] * (1 + 1e-6f * normal(rng));
        rows[i] = i / 8192 == 7 ? 1.f / 8192 : want[i];
        nan_one[i] = i == 1000 ? NAN : want[i];
    }
    const std::vector<std::pair<std::string, const std::vector<float>*>> cases = {
        {"honest", &honest}, {"constant", &constant}, {"zeros", &zeros}, {"one wrong row", &rows}, {"one NaN", &nan_one}};
    for (const auto& [name, got] : cases) {
        SCOPED_TRACE(name);
        Host h = host_compare(*got, want, 1e-4, 1e-4);
        OutputTolerance t;
        CompareStats d = device_compare(*got, want, 1e-4, 1e-4, &t);
        EXPECT_EQ(d.finite, h.finite);
        EXPECT_EQ(d.nonconstant, h.nonconstant);
        EXPECT_NEAR(t.scale, h.t.scale, 1e-12 * h.t.scale);
        EXPECT_EQ(d.mismatches, h.s.mismatches);
        EXPECT_EQ(d.kernelbench_mismatches, h.s.kernelbench_mismatches);
        EXPECT_EQ(d.first_bad, h.s.first_bad);
        EXPECT_EQ(d.worst, h.worst);
        EXPECT_EQ(bits_float(d.max_diff_bits), h.s.max_diff);
        EXPECT_EQ(bits_float(d.max_finite_bits), h.s.max_finite);
        if (std::isinf(h.s.max_ratio)) EXPECT_EQ(bits_float(d.max_ratio_bits), h.s.max_ratio);
        else EXPECT_NEAR(bits_float(d.max_ratio_bits), h.s.max_ratio, 1e-5 * h.s.max_ratio);
        EXPECT_NEAR(d.sum_d2, h.s.sum_d2, 1e-9 * h.s.sum_d2);
        const OutputVerdict vd = output_verdict(diff_sums(d), n, false, t), vh = output_verdict(h.s, n, false, h.t);
        EXPECT_EQ(vd.pass, vh.pass);
        EXPECT_EQ(vd.pass, name == "honest");
        EXPECT_EQ(vd.kernelbench_pass, vh.kernelbench_pass);
    }
}
}  // namespace
