// Speed of light and the fitness over shape sets: the task's "timing" and "flops" fields, byte and
// FLOP accounting, floors, fractions, the prompt/report lines, and the weighted geometric mean.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "common/fs.h"
#include "sol/sol.h"
#include "task/expr.h"
#include "task/fitness.h"
#include "task/task.h"
#include "../task/task_fixture.h"

using namespace kevo;
using nlohmann::json;

namespace {
class SolTest : public tasktest::TaskFileTest {
protected:
    json gelu() const { return gelu_bias({{{"M", 8192}, {"N", 8192}}, {{"M", 33}, {"N", 1001}}, {{"M", 1024}, {"N", 4096}}}); }
    json matmul() const {
        return json::parse(R"({
          "name": "mm",
          "reference": "ref.cpp",
          "inputs":  [{"name": "a", "dtype": "float16", "shape": ["M", "K"]},
                      {"name": "b", "dtype": "float16", "shape": ["K", "N"]}],
          "outputs": [{"name": "c", "dtype": "float16", "shape": ["M", "N"]}],
          "shapes":  [{"M": 4096, "N": 4096, "K": 4096}],
          "flops": "2*M*N*K"
        })");
    }
};
}  // namespace

TEST_F(SolTest, EveryShapeSetIsTimedByDefault) {
    Task t = parse(gelu());
    EXPECT_EQ(t.timed_sets(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(t.weights(), (std::vector<double>{1, 1, 1}));
    EXPECT_FALSE(t.to_json().contains("timing"));  // the canonical JSON (and hash) of old tasks is unchanged
    EXPECT_FALSE(t.to_json().contains("flops"));
}

TEST_F(SolTest, TimingNamesSetsAndWeights) {
    json j = gelu();
    j["timing"] = {{"shapes", {0, 2}}, {"weights", {3, 1}}};
    Task t = parse(j);
    EXPECT_EQ(t.timed_sets(), (std::vector<int>{0, 2}));
    EXPECT_EQ(t.weights(), (std::vector<double>{3, 1}));
    EXPECT_EQ(t.to_json()["timing"], json({{"shapes", {0, 2}}, {"weights", {3, 1}}}));
    EXPECT_NE(t.hash(), parse(gelu()).hash());  // what is timed changes the fitness: another task

    // Spelling out the default is the default.
    json all = gelu();
    all["timing"] = {{"shapes", "all"}, {"weights", {1, 1, 1}}};
    EXPECT_EQ(parse(all).hash(), parse(gelu()).hash());
    all["timing"] = {{"shapes", {0, 1, 2}}};
    EXPECT_EQ(parse(all).hash(), parse(gelu()).hash());

    json w = gelu();
    w["timing"] = {{"weights", {1, 2, 1}}};
    EXPECT_EQ(parse(w).timed_sets(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(parse(w).weights(), (std::vector<double>{1, 2, 1}));
}

TEST_F(SolTest, TimingErrorsNameTheField) {
    json j = gelu();
    j["timing"] = {{"shapes", {0, 3}}};
    expect_error(j, "timing.shapes[1]", "no shape set 3 (the task has 3");
    j["timing"] = {{"shapes", {2, 0}}};
    expect_error(j, "timing.shapes[1]", "ascending");
    j["timing"] = {{"shapes", {1, 1}}};
    expect_error(j, "timing.shapes[1]", "once each");
    j["timing"] = {{"shapes", "first"}};
    expect_error(j, "timing.shapes", "\"all\" or");
    j["timing"] = {{"shapes", json::array()}};
    expect_error(j, "timing.shapes", "non-empty");
    j["timing"] = {{"shapes", {0, 1}}, {"weights", {1}}};
    expect_error(j, "timing.weights", "array of 2 positive numbers");
    j["timing"] = {{"weights", {1, 0, 1}}};
    expect_error(j, "timing.weights[1]", "positive");
    j["timing"] = {{"shape", {0}}};
    expect_error(j, "timing.shape", "unknown field");
    j["timing"] = 3;
    expect_error(j, "timing", "expected an object");
}

TEST_F(SolTest, FlopsExpressionIsChecked) {
    Task t = parse(matmul());
    EXPECT_EQ(t.flops, "2*M*N*K");
    EXPECT_DOUBLE_EQ(sol::flops(t, 0), 2.0 * 4096 * 4096 * 4096);
    EXPECT_EQ(t.to_json()["flops"], "2*M*N*K");
    json j = matmul();
    j["flops"] = "2*M*N*Q";
    expect_error(j, "flops", "'Q' is not a dimension");
    j["flops"] = "2*M*(N";
    expect_error(j, "flops", "expected ')'");
    j["flops"] = "";
    expect_error(j, "flops", "empty");
    j["flops"] = 12;
    expect_error(j, "flops", "expected a string");
}

TEST(Expr, Arithmetic) {
    std::map<std::string, int64_t> d{{"M", 3}, {"N", 4}};
    EXPECT_DOUBLE_EQ(parse_expr("M*N*(5 + 2*N)").eval(d), 3 * 4 * 13);
    EXPECT_DOUBLE_EQ(parse_expr("2^3^2").eval(d), 512);  // right-associative
    EXPECT_DOUBLE_EQ(parse_expr("-M + N/2 - 1.5").eval(d), -3 + 2 - 1.5);
    EXPECT_EQ(parse_expr("M*N*M").names(), (std::set<std::string>{"M", "N"}));
    EXPECT_THROW(parse_expr("M*").eval(d), ExprError);
    EXPECT_THROW(parse_expr("M N"), ExprError);
    EXPECT_THROW(parse_expr("K").eval(d), ExprError);
}

TEST_F(SolTest, BytesEachInputReadOnceEachOutputWrittenOnce) {
    Task t = parse(gelu());
    EXPECT_EQ(sol::min_bytes(t, 0), (8192LL * 8192 * 2 + 8192) * 4);  // x + y + bias
    EXPECT_EQ(sol::min_bytes(t, 1), (33LL * 1001 * 2 + 1001) * 4);
    Task m = parse(matmul());
    EXPECT_EQ(sol::min_bytes(m, 0), 3LL * 4096 * 4096 * 2);  // fp16
    EXPECT_EQ(sol::shape_label(m, 0), "K=4096 M=4096 N=4096");
    // Mixed dtypes and literal sizes.
    json j = gelu();
    j["inputs"][1] = {{"name", "idx"}, {"dtype", "int64"}, {"shape", {7}}};
    j["outputs"].push_back({{"name", "flag"}, {"dtype", "bool"}, {"shape", {"M"}}});
    Task mixed = parse(j);
    EXPECT_EQ(sol::min_bytes(mixed, 1), 33LL * 1001 * 4 * 2 + 7 * 8 + 33);
}

TEST_F(SolTest, FloorsAndFractionOfTheDesignFacts) {
    // DESIGN.md: an 8192^2 fp32 GELU moves 512 MiB; at 4.3 TB/s its floor is about 125 us.
    json j = json::parse(R"({"name": "gelu", "reference": "ref.cpp",
        "inputs": [{"name": "x", "dtype": "float32", "shape": [8192, 8192]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [8192, 8192]}]})");
    Task t = parse(j);
    EXPECT_EQ(sol::min_bytes(t, 0), 512LL * 1024 * 1024);
    sol::Limits l = sol::limits(t, 4300, "measured copy bandwidth", "sm_90");
    ASSERT_EQ(l.sets.size(), 1u);
    EXPECT_NEAR(l.sets[0].memory_us, 124.85, 0.05);
    EXPECT_EQ(l.sets[0].compute_us, 0);  // no flops given
    EXPECT_STREQ(l.sets[0].bound(), "memory");
    sol::Sol s = sol::measure(l, {{0, 131.5}});
    ASSERT_EQ(s.sets.size(), 1u);
    EXPECT_NEAR(s.fraction, 124.85 / 131.5, 1e-3);
    EXPECT_NEAR(s.sets[0].achieved_gbs, 512.0 * 1024 * 1024 / 131.5e3, 1e-6);
    EXPECT_EQ(sol::sol_line(s), "132 us; the memory floor (4.30 TB/s, measured copy bandwidth) is 125 us: 95% of the limit (4.08 TB/s achieved)");
    EXPECT_EQ(s.to_json()["sets"][0]["binding"], "4.30 TB/s, measured copy bandwidth");
    // The JSON form carries the same figures and reads back into the same line.
    json sj = s.to_json();
    EXPECT_EQ(sj["sets"][0]["bytes"], 512LL * 1024 * 1024);
    EXPECT_NEAR(sj["fraction"].get<double>(), s.fraction, 1e-12);
    EXPECT_EQ(sol::sol_line(sj), sol::sol_line(s));
    // Unknown bandwidth: no floors, no fraction.
    sol::Sol none = sol::measure(sol::limits(t, 0, "unknown", "sm_90"), {{0, 131.5}});
    EXPECT_EQ(none.fraction, 0);
}

TEST_F(SolTest, ComputeFloorFromThePeakTable) {
    Task m = parse(matmul());
    EXPECT_EQ(sol::compute_dtype(m), DType::FLOAT16);
    EXPECT_DOUBLE_EQ(sol::peak_flops("sm_90", 0, DType::FLOAT16), 989e12);
    EXPECT_DOUBLE_EQ(sol::peak_flops("sm_90a", 66, DType::FLOAT16), 989e12 / 2);  // scaled by SMs
    EXPECT_DOUBLE_EQ(sol::peak_flops("sm_87", 0, DType::FLOAT32), sol::peak_flops("sm_80", 0, DType::FLOAT32));
    EXPECT_EQ(sol::peak_flops("sm_52", 0, DType::FLOAT32), 0);  // unknown: no compute floor
    sol::Limits l = sol::limits(m, 4300, "measured copy bandwidth", "sm_90");
    double compute_us = 2.0 * 4096 * 4096 * 4096 / 989e12 * 1e6;  // ~139 us
    EXPECT_NEAR(l.sets[0].compute_us, compute_us, 1e-6);
    EXPECT_NEAR(l.sets[0].memory_us, 3.0 * 4096 * 4096 * 2 / 4300e3, 1e-6);  // ~23 us
    EXPECT_STREQ(l.sets[0].bound(), "compute");
    sol::Sol s = sol::measure(l, {{0, 200}});
    EXPECT_NEAR(s.fraction, compute_us / 200, 1e-9);
    EXPECT_NE(sol::sol_line(s).find("the compute floor (989 TFLOP/s, float16 tensor cores of sm_90) is 139 us: 69% of the limit"),
              std::string::npos)
        << sol::sol_line(s);
    std::string text = sol::limits_text(m, l);
    EXPECT_NE(text.find("4.30 TB/s (measured copy bandwidth"), std::string::npos) << text;
    EXPECT_NE(text.find("989 TFLOP/s (float16 tensor cores peak of sm_90) over the fewest FLOPs of the known algorithms"), std::string::npos) << text;
    EXPECT_NE(text.find("- K=4096 M=4096 N=4096: 96.0 MiB, 137.44 GFLOP; memory floor 23.4 us, compute floor 139 us (compute binds)"),
              std::string::npos)
        << text;
}

// Without a known bandwidth (no device here) only the compute floor is a time floor: the text says
// so and never shows a memory floor of 0 us beside it.
TEST_F(SolTest, WithoutABandwidthOnlyTheComputeFloorIsShown) {
    Task m = parse(matmul());
    std::string text = sol::limits_text(m, sol::limits(m, 0, "unknown", "sm_90"));
    EXPECT_NE(text.find("bandwidth is unknown here, so no memory floors; each call must move at least the bytes below."),
              std::string::npos) << text;
    EXPECT_NE(text.find("- K=4096 M=4096 N=4096: 96.0 MiB, 137.44 GFLOP; compute floor 139 us\n"), std::string::npos) << text;
    EXPECT_EQ(text.find("memory floor "), std::string::npos) << text;  // no "memory floor 0.00 us" on any line
}

// A float32 conv or matmul without a precision policy: the TF32 tensor-core peak when the tolerance
// admits TF32's rounding (>= 1e-3, e.g. KernelBench's 1e-2); else strict fp32, whose fastest correct
// kernel is no longer the CUDA cores' 67 TFLOP/s but fp32 emulated on tensor cores (3xTF32: 495 / 3).
TEST_F(SolTest, Float32ComputeFloorUsesTheTf32PeakOnlyWhereTheToleranceAdmitsIt) {
    json j = matmul();
    for (auto& t : j["inputs"]) t["dtype"] = "float32";
    j["outputs"][0]["dtype"] = "float32";
    EXPECT_DOUBLE_EQ(sol::peak_flops("sm_90", 0, DType::FLOAT32, true), 495e12);
    EXPECT_DOUBLE_EQ(sol::peak_flops("sm_90", 0, DType::FLOAT32, false), 67e12);
    EXPECT_DOUBLE_EQ(sol::peak_flops("sm_90", 0, DType::FLOAT16, true), 989e12);  // tf32 is about float32 only
    const double flop = 2.0 * 4096 * 4096 * 4096;

    j["tolerance"] = {{"atol", 1e-3}, {"rtol", 1e-3}};
    Task loose = parse(j);
    EXPECT_TRUE(sol::admits_tf32(loose));
    sol::Limits l = sol::limits(loose, 4300, "measured copy bandwidth", "sm_90", 0, "");
    EXPECT_DOUBLE_EQ(l.peak_flops, 495e12);
    EXPECT_NEAR(l.sets[0].compute_us, flop / 495e12 * 1e6, 1e-6);
    std::string text = sol::limits_text(loose, l);
    EXPECT_NE(text.find("495 TFLOP/s (float32 on TF32 tensor cores (the tolerance admits TF32's rounding) peak of sm_90; "
                        "precision policy not stated, atol 0.001 rtol 0.001)"),
              std::string::npos)
        << text;
    EXPECT_EQ(sol::measure(l, {{0, 500}}).to_json()["peak"], "float32 on TF32 tensor cores (the tolerance admits TF32's rounding)");

    for (json tol : {json{{"atol", 1e-4}, {"rtol", 1e-4}}, json{{"atol", 1e-2}, {"rtol", 5e-4}}}) {
        j["tolerance"] = tol;
        Task strict = parse(j);
        EXPECT_FALSE(sol::admits_tf32(strict)) << tol;
        sol::Limits s = sol::limits(strict, 4300, "measured copy bandwidth", "sm_90", 0, "");
        EXPECT_DOUBLE_EQ(s.peak_flops, 495e12 / 3) << tol;
        text = sol::limits_text(strict, s);
        EXPECT_NE(text.find("165 TFLOP/s (float32 emulated on TF32 tensor cores (3xTF32: the TF32 peak / 3) peak of sm_90; "
                            "precision policy not stated"),
                  std::string::npos)
            << text;
    }
    j.erase("tolerance");
    EXPECT_FALSE(sol::admits_tf32(parse(j)));  // hand-written defaults (1e-4)
}

TEST_F(SolTest, SeveralTimedSetsCombineLikeSpeedups) {
    json j = gelu();
    j["timing"] = {{"shapes", {0, 1}}, {"weights", {3, 1}}};
    Task t = parse(j);
    sol::Limits l = sol::limits(t, 4000, "measured copy bandwidth", "sm_90");
    ASSERT_EQ(l.sets.size(), 2u);
    EXPECT_EQ(l.sets[1].label, "M=33 N=1001");
    EXPECT_STREQ(l.sets[1].bound(), "launch");  // 0.27 MB: a tiny set is bound by the launch, not its bytes
    EXPECT_DOUBLE_EQ(l.sets[1].floor_us(), sol::kLaunchFloorUs);
    double f0 = l.sets[0].memory_us / 150, f1 = sol::kLaunchFloorUs / 8;
    sol::Sol s = sol::measure(l, {{1, 8}, {0, 150}, {2, 99}});  // set 2 is not timed: ignored
    ASSERT_EQ(s.sets.size(), 2u);
    EXPECT_NEAR(s.fraction, std::exp((3 * std::log(f0) + std::log(f1)) / 4), 1e-12);
    std::string line = sol::sol_line(s);
    EXPECT_EQ(line.rfind("M=8192 N=8192: 150 us; the memory floor (4.00 TB/s, measured copy bandwidth) is ", 0), 0u) << line;
    EXPECT_NE(line.find("; M=33 N=1001: 8.00 us; the launch floor is 2.00 us: 25% of the limit"), std::string::npos) << line;
    EXPECT_NE(line.find("overall"), std::string::npos) << line;
    std::string text = sol::limits_text(t, l);
    EXPECT_NE(text.find("(weight 3)"), std::string::npos) << text;
    EXPECT_NE(text.find("- M=33 N=1001: 262.0 KiB; memory floor 0.07 us (below the launch floor of 2.00 us)"), std::string::npos) << text;
}

TEST(Fitness, WeightedGeometricMean) {
    EXPECT_DOUBLE_EQ(weighted_geomean({2.0, 0.5}, {}), 1.0);
    EXPECT_NEAR(weighted_geomean({2.0, 8.0}, {}), 4.0, 1e-12);
    EXPECT_NEAR(weighted_geomean({2.0, 8.0}, {3, 1}), std::pow(2.0, 0.75) * std::pow(8.0, 0.25), 1e-12);
    EXPECT_DOUBLE_EQ(weighted_geomean({1.7}, {5}), 1.7);
    EXPECT_EQ(weighted_geomean({}, {}), 0);
    EXPECT_EQ(weighted_geomean({2.0, 0.0}, {}), 0);         // a failed set fails the whole
    EXPECT_EQ(weighted_geomean({2.0, 3.0}, {1}), 0);        // mismatched weights
    EXPECT_EQ(weighted_geomean({2.0, NAN}, {}), 0);
}

TEST(Sol, ResultSummaryShowsEachShapeAndTheFraction) {
    json v = {{"status", "ok"},
              {"speedup", 1.6},
              {"details", {{"shapes", {{{"set", 0}, {"label", "M=4096 N=4096"}, {"speedup", 2.31}},
                                       {{"set", 1}, {"label", "M=33 N=1001"}, {"speedup", 1.1}}}},
                           {"sol", {{"fraction", 0.88}}}}}};
    EXPECT_EQ(sol::result_summary(v), "M=4096 N=4096 2.31x, M=33 N=1001 1.10x; 88% of the speed of light");
    json top = {{"shapes", {{{"set", 2}, {"speedup", 0.9}}}}};  // per-set timings at the top level
    EXPECT_EQ(sol::result_summary(top), "set 2 0.90x");
    EXPECT_EQ(sol::result_summary(json{{"status", "ok"}}), "");
    EXPECT_EQ(sol::result_summary(json()), "");
}
