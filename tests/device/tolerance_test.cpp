// The judge's correctness rule (tool/device/tolerance.h) on the host: the same functions the compare
// kernels run on the device (compare.cuh), over outputs built here. Every attack below is one the
// rule before it (|got - expected| <= atol + rtol * |expected|, atol absolute) passed on outputs of
// small scale; each test says so by checking the old rule too. The GPU proof with real kernels:
// tests/validate/attacks_gpu_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "device/dtype.h"
#include "device/tolerance.h"

namespace {

using namespace kevo_device;
using Vec = std::vector<double>;

// Both passes of the judge, on the host: the expected output's scale, then every element.
OutputVerdict judge(const Vec& got, const Vec& expected, double atol, double rtol, bool exact = false) {
    double sum_sq = 0;
    unsigned long long finite = 0;
    for (double y : expected)
        if (std::isfinite(y)) sum_sq += y * y, ++finite;
    const OutputTolerance t = output_tolerance(atol, rtol, sum_sq, finite);
    DiffSums s = no_diffs();
    for (size_t i = 0; i < got.size(); ++i) add_element(s, i, check_element(got[i], expected[i], exact, t));
    return output_verdict(s, got.size(), exact, t);
}

// The rule this replaced.
bool old_rule_passes(const Vec& got, const Vec& expected, double atol, double rtol) {
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::fabs(got[i] - expected[i]) <= atol + rtol * std::fabs(expected[i]))) return false;
    return true;
}

// KernelBench L2-99's shape of output: x (M x K) times w (K x N) plus a bias, then a softmax over
// N = 8192 columns of logits with a spread of about 0.1: every output is about 1/8192 = 1.2e-4.
struct SoftmaxCase {
    int M = 16, K = 64, N = 8192;
    Vec x, w, bias;
    SoftmaxCase() {
        std::mt19937_64 rng(7);
        std::normal_distribution<double> normal(0, 1);
        std::uniform_real_distribution<double> u(-0.02, 0.02);
        for (int i = 0; i < M * K; ++i) x.push_back(normal(rng));
        for (int i = 0; i < K * N; ++i) w.push_back(u(rng));
        for (int i = 0; i < N; ++i) bias.push_back(u(rng));
    }
    // skip_k: the last K-slice left out; no_bias: the bias left out; `round` applied to every product
    // and to the result (to model lower precision).
    Vec forward(int skip_k = 0, bool no_bias = false, double (*round)(double) = nullptr) const {
        Vec out(static_cast<size_t>(M) * N);
        for (int m = 0; m < M; ++m) {
            Vec z(N, 0.0);
            for (int k = 0; k < K - skip_k; ++k)
                for (int n = 0; n < N; ++n) {
                    double a = x[m * K + k], b = w[k * N + n];
                    z[n] += round ? round(a) * round(b) : a * b;
                }
            double mx = -1e300, sum = 0;
            for (int n = 0; n < N; ++n) mx = std::max(mx, z[n] += no_bias ? 0 : bias[n]);
            for (int n = 0; n < N; ++n) sum += std::exp(z[n] - mx);
            for (int n = 0; n < N; ++n) {
                double y = std::exp(z[n] - mx) / sum;
                out[m * N + n] = round ? round(y) : y;
            }
        }
        return out;
    }
};

double to_bf16(double v) { return bf16_to_float(bf16_from_float(static_cast<float>(v))); }
double to_fp32(double v) { return static_cast<float>(v); }

const SoftmaxCase& softmax_case() {
    static const SoftmaxCase c;
    return c;
}
const Vec& softmax_expected() {
    static const Vec y = softmax_case().forward();
    return y;
}

constexpr double kTol = 1e-4;  // atol = rtol = 1e-4: the default, and the importer's floor

TEST(Tolerance, HonestFp32PassesWithRoomToSpare) {
    const Vec& y = softmax_expected();
    OutputVerdict v = judge(softmax_case().forward(0, false, to_fp32), y, kTol, kTol);
    EXPECT_TRUE(v.pass);
    EXPECT_LT(v.tolerance_used, 0.05) << v.tolerance_used;
    EXPECT_FALSE(v.near_tolerance);
    EXPECT_TRUE(v.kernelbench_pass);
}

TEST(Tolerance, ConstantOutputIsRejected) {
    const Vec& y = softmax_expected();
    Vec c(y.size(), 1.0 / 8192);
    ASSERT_TRUE(old_rule_passes(c, y, kTol, kTol));  // every element inside the old absolute 1e-4
    OutputVerdict v = judge(c, y, kTol, kTol);
    EXPECT_FALSE(v.pass);
    EXPECT_FALSE(v.elements_ok);
    EXPECT_FALSE(v.norm_ok);
    EXPECT_GT(v.rel_l2, 0.01);
    EXPECT_TRUE(v.kernelbench_pass);  // KernelBench's own check passes it too: reported, never the gate
}

TEST(Tolerance, ZeroOutputOfSmallScaleIsRejected) {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(-9e-5, 9e-5);  // every element inside the old atol 1e-4
    Vec y(100000), zeros(y.size(), 0.0);
    for (double& v : y) v = u(rng);
    ASSERT_TRUE(old_rule_passes(zeros, y, kTol, kTol));
    OutputVerdict v = judge(zeros, y, kTol, kTol);
    EXPECT_FALSE(v.pass);
    EXPECT_NEAR(v.rel_l2, 1.0, 1e-9);
}

TEST(Tolerance, SkippedMatmulTermsAreRejected) {
    const Vec& y = softmax_expected();
    for (bool no_bias : {false, true}) {
        Vec got = softmax_case().forward(no_bias ? 0 : 8, no_bias);  // the last 8 of 64 K, or the bias
        ASSERT_TRUE(old_rule_passes(got, y, kTol, kTol)) << no_bias;
        OutputVerdict v = judge(got, y, kTol, kTol);
        EXPECT_FALSE(v.pass) << no_bias;
        EXPECT_FALSE(v.norm_ok) << no_bias;
    }
}

TEST(Tolerance, WrongOnAFewRowsIsRejected) {
    const Vec& y = softmax_expected();
    Vec got = y;
    for (int n = 0; n < 8192; ++n) got[5 * 8192 + n] = 1.0 / 8192;  // one row of 16 written as the constant
    ASSERT_TRUE(old_rule_passes(got, y, kTol, kTol));
    OutputVerdict v = judge(got, y, kTol, kTol);
    EXPECT_FALSE(v.elements_ok);
    EXPECT_FALSE(v.pass);
}

TEST(Tolerance, Bf16ComputationFailsStrictFp32AndPassesBf16Tolerance) {
    const Vec& y = softmax_expected();
    Vec got = softmax_case().forward(0, false, to_bf16);
    ASSERT_TRUE(old_rule_passes(got, y, kTol, kTol));
    EXPECT_FALSE(judge(got, y, kTol, kTol).pass);
    OutputVerdict loose = judge(got, y, 1e-2, 1e-2);  // a bf16 task's tolerance admits it
    EXPECT_TRUE(loose.pass) << loose.tolerance_used;
}

TEST(Tolerance, ErrorNearTheLimitEverywhereFailsTheNormRule) {
    const Vec& y = softmax_expected();
    double sum_sq = 0;
    for (double v : y) sum_sq += v * v;
    const OutputTolerance t = output_tolerance(kTol, kTol, sum_sq, y.size());
    Vec got(y.size());
    for (size_t i = 0; i < y.size(); ++i) got[i] = y[i] + 0.9 * (t.abs + t.rtol * std::fabs(y[i]));
    OutputVerdict v = judge(got, y, kTol, kTol);
    EXPECT_TRUE(v.elements_ok);
    EXPECT_FALSE(v.norm_ok);
    EXPECT_FALSE(v.pass);
    // At 70% of rtol everywhere it passes, reported as right only to about the tolerance.
    for (size_t i = 0; i < y.size(); ++i) got[i] = y[i] * (1 + 0.7 * kTol);
    v = judge(got, y, kTol, kTol);
    EXPECT_TRUE(v.pass);
    EXPECT_TRUE(v.near_tolerance);
    EXPECT_NEAR(v.tolerance_used, 0.7, 0.01);
}

TEST(Tolerance, OneRoundingStepOnAFewElementsIsNotNearTheTolerance) {
    // A bf16 output rounded one step differently on a few elements (layernorm_bf16 on the H200: one
    // element at 52% of its own tolerance, relative L2 error 1.3e-5 against 1e-2) is right with room to
    // spare; a few elements at 95% of theirs are not.
    Vec y(4096), got(4096);
    for (size_t i = 0; i < y.size(); ++i) y[i] = got[i] = 1.0 + static_cast<double>(i % 97) / 97.0;
    got[7] = y[7] * (1 + 0.52 * 1e-2);
    OutputVerdict v = judge(got, y, 1e-6, 1e-2);
    EXPECT_TRUE(v.pass);
    EXPECT_GT(v.tolerance_used, kNearToleranceFraction);
    EXPECT_FALSE(v.near_tolerance);
    got[7] = y[7] * (1 + 0.95 * 1e-2);
    v = judge(got, y, 1e-6, 1e-2);
    EXPECT_TRUE(v.pass);
    EXPECT_TRUE(v.near_tolerance);
}

TEST(Tolerance, AbsoluteTermScalesWithTheOutputAndStaysForLargeOnes) {
    EXPECT_NEAR(output_tolerance(1e-4, 1e-4, 4 * 1e-8, 4).abs, 1e-8, 1e-20);      // RMS 1e-4: atol * 1e-4
    EXPECT_DOUBLE_EQ(output_tolerance(1e-3, 1e-4, 4 * 900.0, 4).abs, 1e-3);       // RMS 30: atol itself
    EXPECT_DOUBLE_EQ(output_tolerance(1e-3, 1e-4, 4 * 900.0, 4).rms_bound, 3e-3);  // rtol * RMS
    EXPECT_DOUBLE_EQ(output_tolerance(1e-4, 1e-4, 0, 10).abs, 1e-4);               // all zero: atol
    // On an output of scale 30 an element near zero keeps the old absolute allowance.
    Vec y{30, -30, 1e-6, 30}, got = y;
    got[2] += 5e-5;
    EXPECT_TRUE(judge(got, y, 1e-4, 1e-4).pass);
}

TEST(Tolerance, SpecialValuesAndExactOutputs) {
    const double nan = std::nan(""), inf = INFINITY;
    EXPECT_TRUE(judge({nan, inf, -inf, 1}, {nan, inf, -inf, 1}, kTol, kTol).pass);
    OutputVerdict v = judge({1, nan, 1}, {1, 1, 1}, kTol, kTol);
    EXPECT_FALSE(v.pass);
    EXPECT_TRUE(std::isinf(v.tolerance_used));
    EXPECT_FALSE(judge({inf}, {-inf}, kTol, kTol).pass);
    EXPECT_TRUE(judge({0, 0}, {0, 0}, 0, 0).pass);
    EXPECT_TRUE(judge({3, 4}, {3, 4}, kTol, kTol, true).pass);
    v = judge({3, 5}, {3, 4}, kTol, kTol, true);
    EXPECT_FALSE(v.pass);
    EXPECT_TRUE(v.norm_ok);  // exact outputs have no norm rule: one wrong element fails them
}

TEST(Tolerance, KernelBenchCheckIsReportedBeside) {
    Vec y{1, -2, 3, 0.5}, got(y.size());
    for (size_t i = 0; i < y.size(); ++i) got[i] = y[i] * 1.005;
    OutputVerdict v = judge(got, y, kTol, kTol);
    EXPECT_FALSE(v.pass);
    EXPECT_TRUE(v.kernelbench_pass);  // allclose(1e-2, 1e-2) admits 0.5%
    for (size_t i = 0; i < y.size(); ++i) got[i] = y[i] * 1.5;
    EXPECT_FALSE(judge(got, y, kTol, kTol).kernelbench_pass);
}

}  // namespace
