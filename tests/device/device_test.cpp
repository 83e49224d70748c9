// The one input filler on the host (tool/device/fill.h): its distributions, its determinism, its
// float conversions against CUDA's own, and that the KernelBench importer's Python (refcheck_values,
// in torch) draws the same bits as refcheck's C++ (fill_host). The device's bits: device_gpu_test.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "device/fill.h"
#include "python_fill.h"

namespace {

using kevo_device::fill_host;
using kevo_device::value;

std::vector<double> draws(int kind, double a, double b, uint64_t seed, int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    fill_host(v.data(), KEVO_FLOAT64, n, kind, a, b, seed);
    return v;
}

TEST(Filler, RandnIsAStandardNormalScaled) {
    const int64_t n = 1 << 20;
    std::vector<double> v = draws(KEVO_INIT_RANDN, 2.0, 3.0, 7, n);
    double mean = 0, m2 = 0, beyond3 = 0;
    for (double x : v) mean += x;
    mean /= n;
    for (double x : v) {
        m2 += (x - mean) * (x - mean);
        beyond3 += std::fabs(x - 2.0) > 9.0;
    }
    const double var = m2 / (n - 1);
    // Standard errors: mean 3/1024, variance 9 * sqrt(2/n) = 0.0124; 5 of them.
    EXPECT_NEAR(mean, 2.0, 5 * 3.0 / 1024);
    EXPECT_NEAR(var, 9.0, 5 * 0.0125);
    // P(|z| > 3) = 0.0027: a normal law's tails, not a scaled uniform's (none beyond 1.74 sigma).
    EXPECT_NEAR(beyond3 / n, 0.0027, 0.0005);
}

TEST(Filler, LogAndCosAreAccurate) {
    std::mt19937_64 rng(3);
    double worst_ln = 0, worst_cos = 0;
    for (int k = 0; k < 200000; ++k) {
        const double u = static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53;
        const double ln = kevo_device::ln_unit(u), ref = std::log(u);
        if (ref != 0) worst_ln = std::max(worst_ln, std::fabs(ln - ref) / std::fabs(ref));
        worst_cos = std::max(worst_cos, std::fabs(kevo_device::cos_2pi(u) - std::cos(2 * M_PI * u)));
    }
    EXPECT_LT(worst_ln, 1e-15);
    EXPECT_LT(worst_cos, 1e-15);
    EXPECT_EQ(kevo_device::ln_unit(1.0), 0.0);
    EXPECT_EQ(kevo_device::cos_2pi(1.0), 1.0);
    EXPECT_EQ(kevo_device::cos_2pi(0.5), -1.0);
}

TEST(Filler, RandintStaysInItsBoundsAndReachesBoth) {
    for (auto [a, b] : {std::pair<double, double>{-3, 4}, {0, 2}, {5, 6}}) {
        std::vector<double> v = draws(KEVO_INIT_RANDINT, a, b, 11, 1 << 20);
        double lo = 1e300, hi = -1e300;
        for (double x : v) {
            ASSERT_EQ(x, std::floor(x));
            lo = std::min(lo, x), hi = std::max(hi, x);
        }
        EXPECT_EQ(lo, a);
        EXPECT_EQ(hi, b - 1);
    }
    std::vector<double> u = draws(KEVO_INIT_RAND, -1, 1, 5, 1 << 20);
    for (double x : u) ASSERT_TRUE(x >= -1 && x < 1) << x;
}

TEST(Filler, AValueDependsOnlyOnSeedAndIndex) {
    EXPECT_EQ(value(9, 123456, KEVO_INIT_RANDN, 0, 1), value(9, 123456, KEVO_INIT_RANDN, 0, 1));
    EXPECT_NE(value(9, 123456, KEVO_INIT_RANDN, 0, 1), value(10, 123456, KEVO_INIT_RANDN, 0, 1));
    EXPECT_NE(value(9, 123456, KEVO_INIT_RANDN, 0, 1), value(9, 123457, KEVO_INIT_RANDN, 0, 1));
    const int64_t n = (1 << 20) + 5;
    std::vector<float> one(n), many(n);
    fill_host(one.data(), KEVO_FLOAT32, n, KEVO_INIT_RANDN, 0, 1, 77, 1);
    fill_host(many.data(), KEVO_FLOAT32, n, KEVO_INIT_RANDN, 0, 1, 77, 7);
    EXPECT_EQ(0, std::memcmp(one.data(), many.data(), n * sizeof(float)));
    for (int64_t i : {int64_t{0}, int64_t{1}, n - 1})
        EXPECT_EQ(one[i], static_cast<float>(value(77, i, KEVO_INIT_RANDN, 0, 1)));
    EXPECT_EQ(value(1, 41, KEVO_INIT_ARANGE, 0, 0), 41.0);
    EXPECT_EQ(value(1, 41, KEVO_INIT_FULL, 2.5, 0), 2.5);
    EXPECT_EQ(value(1, 41, KEVO_INIT_ONES, 0, 0), 1.0);
    EXPECT_EQ(value(1, 41, KEVO_INIT_ZEROS, 3, 4), 0.0);
    // Beyond a narrow integer's range the low bits are kept (host and device alike): arange 200 as int8.
    std::vector<int8_t> bytes(300);
    fill_host(bytes.data(), KEVO_INT8, 300, KEVO_INIT_ARANGE, 0, 0, 1);
    EXPECT_EQ(bytes[200], -56);
}

// half and bfloat16 as CUDA's own host conversions round (NaN payloads aside).
TEST(Dtype, SixteenBitFloatsRoundAsCudaDoes) {
    std::mt19937 rng(1);
    std::vector<float> xs;
    for (uint32_t h = 0; h < 0x10000; ++h) {  // every half, and the points halfway to its neighbours
        float f = kevo_device::half_to_float(static_cast<uint16_t>(h));
        xs.push_back(f);
        xs.push_back(std::nextafter(f, 1e30f));
        xs.push_back(std::nextafter(f, -1e30f));
        xs.push_back(kevo_device::bits_float(kevo_device::float_bits(f) + 0x1000u));
    }
    for (int k = 0; k < 2000000; ++k) xs.push_back(kevo_device::bits_float(static_cast<uint32_t>(rng())));
    for (float f : xs) {
        if (std::isnan(f)) continue;
        __half h = __float2half_rn(f);
        uint16_t hb;
        std::memcpy(&hb, &h, 2);
        ASSERT_EQ(kevo_device::half_from_float(f), hb) << f;
        __nv_bfloat16 bh = __float2bfloat16_rn(f);
        uint16_t bb;
        std::memcpy(&bb, &bh, 2);
        ASSERT_EQ(kevo_device::bf16_from_float(f), bb) << f;
    }
    for (uint32_t h = 0; h < 0x10000; ++h) {
        __half x;
        const uint16_t hb = static_cast<uint16_t>(h);
        std::memcpy(&x, &hb, 2);
        const float want = __half2float(x), got = kevo_device::half_to_float(hb);
        if (!std::isnan(want)) ASSERT_EQ(kevo_device::float_bits(got), kevo_device::float_bits(want)) << h;
    }
}

// refcheck compares the C++ reference with the Python model on inputs each side makes itself:
// refcheck.cpp with fill_host, kernelevo.kernelbench.fill with refcheck_values. Same bits, every kind.
TEST(Filler, HostFillIsPythonsRefcheckValues) {
    kevo_device_test::expect_python_draws_the_host_fill("/usr/bin/python3", "cpu");
}

}  // namespace

// A varied parameter (fill.h, the judge's fill of a "parameter" file input): moved by 1..n-1 places,
// never 0 (which would give the file's values back), and different per draw; its noise is a quarter
// of the values' RMS, 0.25 for an all-zero tensor (a zero bias must change too).
TEST(Filler, AVariedParameterMovesAndItsNoiseFollowsTheValuesScale) {
    using namespace kevo_device;
    EXPECT_EQ(vary_shift(7, 1), 0u);
    std::vector<uint64_t> shifts;
    for (uint64_t s = 0; s < 64; ++s) {
        const uint64_t k = vary_shift(tensor_seed(42 + s, 1), 5);
        EXPECT_GE(k, 1u);
        EXPECT_LE(k, 4u);
        shifts.push_back(k);
    }
    EXPECT_GT(std::count(shifts.begin(), shifts.end(), shifts[0]), 0);
    EXPECT_LT(std::count(shifts.begin(), shifts.end(), shifts[0]), 64) << "the shift depends on the draw";
    const std::vector<float> half(1024, 0.5f), zeros(16, 0.0f), mixed{3.0f, -4.0f};
    EXPECT_DOUBLE_EQ(vary_scale(half.data(), KEVO_FLOAT32, 1024), 0.125);
    EXPECT_DOUBLE_EQ(vary_scale(zeros.data(), KEVO_FLOAT32, 16), 0.25);
    EXPECT_NEAR(vary_scale(mixed.data(), KEVO_FLOAT32, 2), 0.25 * std::sqrt(12.5), 1e-12);
    EXPECT_NE(vary_noise(1, 0, 0.125), vary_noise(2, 0, 0.125));
    EXPECT_DOUBLE_EQ(vary_noise(1, 3, 0.25), 2 * vary_noise(1, 3, 0.125)) << "normal noise of std `scale`";
}
