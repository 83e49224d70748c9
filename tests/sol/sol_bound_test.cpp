// The speed-of-light floors are lower bounds (issue 35): the compute floor uses the fastest rate a
// correct kernel can compute at under the task's precision policy (3xTF32 for strict fp32, TF32
// for pytorch/tf32, bf16 for bf16), the memory floor the highest known bandwidth, the binding floor
// is named, and a kernel measured faster than a floor never reads as more than 100%.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "sol/sol.h"
#include "task/task.h"
#include "../task/task_fixture.h"

using namespace kevo;
using nlohmann::json;

namespace {

class SolBound : public tasktest::TaskFileTest {
protected:
    // An fp32 matmul: what L2-99/L2-22 (matmul -> epilogue) reduce to for the compute floor.
    Task matmul32(int64_t n = 4096) const { return parse(matmul32_json(n)); }
    static json matmul32_json(int64_t n = 4096) {
        json j = json::parse(R"({"name": "mm32", "reference": "ref.cpp",
          "inputs":  [{"name": "a", "dtype": "float32", "shape": ["M", "K"]},
                      {"name": "b", "dtype": "float32", "shape": ["K", "N"]}],
          "outputs": [{"name": "c", "dtype": "float32", "shape": ["M", "N"]}],
          "flops": "2*M*N*K"})");
        j["shapes"] = {{{"M", n}, {"N", n}, {"K", n}}};
        return j;
    }
    // A 3x3 stride-1 convolution whose "flops" follows the contract (sol.h, the importer): one
    // multiply-add per output and input channel, Winograd's limit.
    Task conv3x3() const {
        return parse(json::parse(R"({"name": "conv", "reference": "ref.cpp",
          "inputs":  [{"name": "x", "dtype": "float32", "shape": ["N", "C", "H", "W"]},
                      {"name": "w", "dtype": "float32", "shape": ["OC", "C", 3, 3]}],
          "outputs": [{"name": "y", "dtype": "float32", "shape": ["N", "OC", "H", "W"]}],
          "shapes":  [{"N": 32, "C": 512, "H": 64, "W": 64, "OC": 512}],
          "flops": "2*N*OC*H*W*C"})"));
    }
    static double direct_conv_flops() { return 2.0 * 32 * 512 * 64 * 64 * 512 * 9; }
};

// Every percentage a line prints, as numbers.
std::vector<double> percentages(const std::string& line) {
    std::vector<double> out;
    static const std::regex pct("([0-9]+)%");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), pct); it != std::sregex_iterator(); ++it)
        out.push_back(std::atof((*it)[1].str().c_str()));
    return out;
}

}  // namespace

TEST(SolPeak, ThePolicyPicksTheFastestCorrectRate) {
    // sm_90 (H100/H200 SXM): fp32 67, TF32 495, bf16 989 TFLOP/s dense.
    auto fp32 = [](const std::string& policy, bool admits = false) {
        return sol::compute_peak("sm_90", 0, DType::FLOAT32, policy, admits);
    };
    EXPECT_DOUBLE_EQ(fp32("strict").flops, 495e12 / 3);  // 3xTF32 beats the CUDA cores' 67
    EXPECT_EQ(fp32("strict").name, "float32 emulated on TF32 tensor cores (3xTF32: the TF32 peak / 3)");
    EXPECT_DOUBLE_EQ(fp32("").flops, 495e12 / 3);  // no policy: strict
    EXPECT_DOUBLE_EQ(fp32("strict", true).flops, 495e12 / 3);  // strict is strict, whatever the tolerance
    EXPECT_DOUBLE_EQ(fp32("", true).flops, 495e12);            // no policy, a tolerance that admits TF32
    EXPECT_DOUBLE_EQ(fp32("pytorch").flops, 495e12);
    EXPECT_NE(fp32("pytorch").name.find("TF32 tensor cores (the pytorch policy"), std::string::npos) << fp32("pytorch").name;
    EXPECT_DOUBLE_EQ(fp32("tf32").flops, 495e12);
    EXPECT_DOUBLE_EQ(fp32("bf16").flops, 989e12);
    // A policy this table does not know gets the fastest floating peak: a floor stays a lower bound.
    EXPECT_DOUBLE_EQ(fp32("fp8ish").flops, 989e12);
    EXPECT_NE(fp32("fp8ish").name.find("'fp8ish' unknown here"), std::string::npos);
    // Half-precision inputs are on tensor cores under any policy; float64 on its own peak.
    EXPECT_DOUBLE_EQ(sol::compute_peak("sm_90", 0, DType::BFLOAT16, "strict").flops, 989e12);
    EXPECT_DOUBLE_EQ(sol::compute_peak("sm_90", 0, DType::FLOAT64, "pytorch").flops, 67e12);
    // Scaled by the SM count like the table.
    EXPECT_DOUBLE_EQ(sol::compute_peak("sm_90a", 66, DType::FLOAT32, "strict").flops, 495e12 / 3 / 2);
    // Where bf16x6 is faster than 3xTF32 (B200) it is the strict rate; where tensor cores are slow for
    // TF32 (RTX 3090: TF32 = fp32 rate) the CUDA cores are.
    EXPECT_DOUBLE_EQ(sol::compute_peak("sm_100", 0, DType::FLOAT32, "strict").flops, 2250e12 / 6);
    EXPECT_NE(sol::compute_peak("sm_100", 0, DType::FLOAT32, "strict").name.find("bf16x6"), std::string::npos);
    EXPECT_DOUBLE_EQ(sol::compute_peak("sm_86", 0, DType::FLOAT32, "strict").flops, 35.6e12);
    EXPECT_EQ(sol::compute_peak("sm_86", 0, DType::FLOAT32, "strict").name, "float32 CUDA cores");
    EXPECT_EQ(sol::compute_peak("sm_52", 0, DType::FLOAT32, "strict").flops, 0);  // unknown arch: no compute floor
}

// The task's own "precision" picks the rate: pytorch (the default) and tf32 the TF32 peak, strict
// 3xTF32, bf16 the bf16 peak; the floor's JSON and text name the policy.
TEST_F(SolBound, TheTasksPolicyPicksTheComputeFloor) {
    const double flop = 2.0 * 4096 * 4096 * 4096;
    for (auto [policy, peak] : std::vector<std::pair<std::string, double>>{
             {"", 495e12}, {"pytorch", 495e12}, {"tf32", 495e12}, {"strict", 495e12 / 3}, {"bf16", 989e12}}) {
        json j = matmul32_json();
        if (!policy.empty()) j["precision"] = policy;
        Task t = parse(j);
        EXPECT_EQ(sol::task_precision(t), policy.empty() ? "pytorch" : policy);
        sol::Limits l = sol::limits(t, 4800, "datasheet peak", "sm_90");
        EXPECT_DOUBLE_EQ(l.peak_flops, peak) << policy;
        EXPECT_NEAR(l.sets[0].compute_us, flop / peak * 1e6, 1e-6) << policy;
        EXPECT_EQ(sol::measure(l, {{0, 5000}}).to_json()["precision"], sol::task_precision(t));
        EXPECT_NE(sol::limits_text(t, l).find("precision policy " + sol::task_precision(t) + ","), std::string::npos)
            << sol::limits_text(t, l);
    }
}

// The issue's L2-99/L2-22 case: a strict fp32 matmul run as 3xTF32 on tensor cores. The old floor
// (fp32 CUDA cores) was above such a kernel's time; the floor now is at most what a 3xTF32 kernel at
// the TF32 peak / 3 needs, and a kernel faster than the old floor reads at most 100%.
TEST_F(SolBound, StrictMatmulFloorIsNotAboveA3xTf32KernelAtPeak) {
    Task t = matmul32();
    const double flop = 2.0 * 4096 * 4096 * 4096;
    sol::Limits l = sol::limits(t, 4800, "datasheet peak", "sm_90", 132, "strict");
    ASSERT_EQ(l.sets.size(), 1u);
    const double x3_at_peak_us = flop / (495e12 / 3) * 1e6;  // 833 us
    const double old_floor_us = flop / 67e12 * 1e6;           // 2051 us
    EXPECT_LE(l.sets[0].floor_us(), x3_at_peak_us * (1 + 1e-12));
    EXPECT_STREQ(l.sets[0].bound(), "compute");
    // A 3xTF32 kernel at 100 TFLOP/s of fp32 work: faster than the old floor (it would have read 149%).
    const double kernel_us = flop / 100e12 * 1e6;
    ASSERT_LT(kernel_us, old_floor_us);
    sol::Sol s = sol::measure(l, {{0, kernel_us}});
    ASSERT_EQ(s.sets.size(), 1u);
    EXPECT_FALSE(s.sets[0].floor_beaten);
    EXPECT_GT(s.fraction, 0);
    EXPECT_LE(s.fraction, 1.0);
    EXPECT_NEAR(s.fraction, 100.0 / 165.0, 1e-9);
    const std::string line = sol::sol_line(s);
    EXPECT_NE(line.find("the compute floor (165 TFLOP/s, float32 emulated on TF32 tensor cores (3xTF32: the TF32 peak / 3) of "
                        "sm_90) is 833 us: 61% of the limit"),
              std::string::npos)
        << line;
    for (double p : percentages(line)) EXPECT_LE(p, 100) << line;
    // Under pytorch (TF32 allowed) a plain TF32 kernel at 400 TFLOP/s reads at most 100% too.
    sol::Sol tf = sol::measure(sol::limits(t, 4800, "datasheet peak", "sm_90", 132, "pytorch"), {{0, flop / 400e12 * 1e6}});
    EXPECT_NEAR(tf.fraction, 400.0 / 495.0, 1e-9);
}

// A 3x3 convolution: the floor counts one multiply-add per output and input channel, so a Winograd
// kernel at the peak (F(2x2,3x3), F(4x4,3x3), F(6x6,3x3), ..., (m+2)^2 multiplies per m^2 outputs)
// is never faster than it, while the direct count (what the importer wrote before) put every one of
// them above 100%.
TEST_F(SolBound, Conv3x3FloorAllowsWinogradAndFft) {
    Task t = conv3x3();
    const double peak = 495e12 / 3;
    sol::Limits l = sol::limits(t, 4800, "datasheet peak", "sm_90", 0, "strict");
    ASSERT_EQ(l.sets.size(), 1u);
    EXPECT_DOUBLE_EQ(l.sets[0].flops, direct_conv_flops() / 9);
    EXPECT_STREQ(l.sets[0].bound(), "compute");  // 512 channels: compute binds, even at Winograd's limit
    for (int m : {2, 4, 6, 8, 16}) {
        const double winograd_flops = direct_conv_flops() / 9 * (m + 2.0) * (m + 2.0) / (m * m);
        const double at_peak_us = winograd_flops / peak * 1e6;
        sol::Sol s = sol::measure(l, {{0, at_peak_us}});
        EXPECT_FALSE(s.floor_beaten) << "F(" << m << "x" << m << ",3x3)";
        EXPECT_LE(s.fraction, 1.0) << m;
        // The direct count as the floor's FLOPs would put F(m,3) at peak above 100% for every m >= 2.
        EXPECT_GT(direct_conv_flops() / peak * 1e6 / at_peak_us, 1.0) << m;
    }
}

TEST_F(SolBound, TheBindingFloorIsNamed) {
    Task t = matmul32();
    sol::Limits l = sol::limits(t, 4800, "datasheet peak", "sm_90", 0, "strict");
    json j = sol::measure(l, {{0, 1000}}).to_json();
    EXPECT_EQ(j["precision"], "strict");
    EXPECT_EQ(j["sets"][0]["bound"], "compute");
    EXPECT_EQ(j["sets"][0]["binding"], "165 TFLOP/s, float32 emulated on TF32 tensor cores (3xTF32: the TF32 peak / 3) of sm_90");
    std::string text = sol::limits_text(t, l);
    EXPECT_NE(text.find("compute floor 833 us (compute binds)"), std::string::npos) << text;
    EXPECT_NE(text.find("precision policy strict, atol 0.0001 rtol 0.0001)"), std::string::npos) << text;
    EXPECT_NE(text.find("no correct kernel is faster"), std::string::npos) << text;
    // A small matmul is bound by its bytes: the memory floor names the bandwidth it assumes.
    Task small = matmul32(64);
    sol::Limits m = sol::limits(small, 4800, "datasheet peak", "sm_90", 0, "strict");
    json sm = sol::measure(m, {{0, 10}}).to_json();
    EXPECT_EQ(sm["sets"][0]["bound"], "launch");  // 48 KiB: below the launch floor
    EXPECT_EQ(sol::sol_line(sm), "10.0 us; the launch floor is 2.00 us: 20% of the limit (5 GB/s achieved)");
    Task big = parse(json::parse(R"({"name": "copy", "reference": "ref.cpp",
        "inputs": [{"name": "x", "dtype": "float32", "shape": [8192, 8192]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [8192, 8192]}], "flops": "8192*8192"})"));
    json bj = sol::measure(sol::limits(big, 4800, "datasheet peak", "sm_90", 0, "strict"), {{0, 200}}).to_json();
    EXPECT_EQ(bj["sets"][0]["bound"], "memory");
    EXPECT_EQ(bj["sets"][0]["binding"], "4.80 TB/s, datasheet peak");
}

// A kernel faster than its floor: the floor is wrong, not the kernel above 100%. The set and the
// overall fraction are unknown (0), the set is marked, the raw ratio kept, and no line prints a
// percentage above 100.
TEST_F(SolBound, AFloorAKernelBeatsIsNotABound) {
    Task t = matmul32();
    sol::Limits l = sol::limits(t, 4800, "datasheet peak", "sm_90", 0, "strict");
    const double floor = l.sets[0].floor_us();
    sol::Sol s = sol::measure(l, {{0, floor / 3.13}});  // the issue's "313% of the speed of light"
    ASSERT_EQ(s.sets.size(), 1u);
    EXPECT_TRUE(s.sets[0].floor_beaten);
    EXPECT_NEAR(s.sets[0].floor_ratio, 3.13, 1e-9);
    EXPECT_EQ(s.sets[0].fraction, 0);
    EXPECT_TRUE(s.floor_beaten);
    EXPECT_EQ(s.fraction, 0);
    json j = s.to_json();
    EXPECT_TRUE(j["floor_beaten"].get<bool>());
    EXPECT_NE(j.value("note", "").find("floor too high"), std::string::npos) << j.dump();
    const std::string line = sol::sol_line(j);
    EXPECT_NE(line.find("is 833 us, yet the kernel ran in 266 us: the floor is too high, not a bound for this kernel"),
              std::string::npos)
        << line;
    EXPECT_TRUE(percentages(line).empty()) << line;
    json v = {{"details", {{"sol", j}}}};
    EXPECT_EQ(sol::result_summary(v), "faster than a speed-of-light floor (the floor is too high)");

    // Two sets, one beaten: no overall fraction either, the other set keeps its own.
    json two = json::parse(R"({"name": "mm2", "reference": "ref.cpp",
      "inputs":  [{"name": "a", "dtype": "float32", "shape": ["M", "K"]}, {"name": "b", "dtype": "float32", "shape": ["K", "N"]}],
      "outputs": [{"name": "c", "dtype": "float32", "shape": ["M", "N"]}],
      "shapes": [{"M": 4096, "N": 4096, "K": 4096}, {"M": 2048, "N": 2048, "K": 2048}], "flops": "2*M*N*K"})");
    sol::Limits l2 = sol::limits(parse(two), 4800, "datasheet peak", "sm_90", 0, "strict");
    sol::Sol s2 = sol::measure(l2, {{0, l2.sets[0].floor_us() / 1.29}, {1, l2.sets[1].floor_us() * 2}});
    EXPECT_TRUE(s2.floor_beaten);
    EXPECT_EQ(s2.fraction, 0);
    EXPECT_NEAR(s2.sets[1].fraction, 0.5, 1e-9);
    const std::string line2 = sol::sol_line(s2);
    EXPECT_EQ(line2.find("overall"), std::string::npos) << line2;
    for (double p : percentages(line2)) EXPECT_LE(p, 100) << line2;
    // At the floor exactly is 100%, not beaten.
    sol::Sol at = sol::measure(l, {{0, floor}});
    EXPECT_FALSE(at.floor_beaten);
    EXPECT_DOUBLE_EQ(at.fraction, 1.0);
}

// A tiny set's launch floor is never above the judge's own empty call in that run: a kernel as
// fast as an empty call is at the limit, not above it.
TEST_F(SolBound, TheLaunchFloorIsNeverAboveAnEmptyCall) {
    Task t = matmul32(64);
    sol::Limits l = sol::limits(t, 4800, "datasheet peak", "sm_90", 0, "strict");
    ASSERT_STREQ(l.sets[0].bound(), "launch");
    EXPECT_TRUE(sol::measure(l, {{0, 1.6}}).floor_beaten);  // below the 2 us estimate
    sol::Sol s = sol::measure(l, {{0, 1.6}}, {{0, 1.5}});
    EXPECT_FALSE(s.floor_beaten);
    EXPECT_NEAR(s.fraction, 1.5 / 1.6, 1e-12);
    EXPECT_DOUBLE_EQ(s.sets[0].floor.launch_us, 1.5);
    EXPECT_DOUBLE_EQ(sol::measure(l, {{0, 3}}, {{0, 2.6}}).sets[0].floor.launch_us, sol::kLaunchFloorUs);  // never raised
    EXPECT_DOUBLE_EQ(sol::measure(l, {{0, 3}}, {{1, 1.0}}).sets[0].floor.launch_us, sol::kLaunchFloorUs);  // another set's
}

// The memory floor assumes the highest bandwidth known: a kernel that mostly reads can beat a
// measured copy, never the datasheet's pins.
TEST(SolBandwidth, TheHighestKnownBandwidth) {
    DeviceInfo d;
    d.present = true;
    d.mem_bandwidth_gbs = 4800;
    auto [gbs, source] = sol::bandwidth_of(d, 4100);
    EXPECT_DOUBLE_EQ(gbs, 4800);
    EXPECT_EQ(source, "datasheet peak; a copy measured 4.10 TB/s");
    EXPECT_EQ(sol::bandwidth_of(d, 0), (std::pair<double, std::string>{4800, "datasheet peak"}));
    EXPECT_EQ(sol::bandwidth_of(d, 4900), (std::pair<double, std::string>{4900, "measured copy bandwidth"}));
    DeviceInfo none;
    EXPECT_EQ(sol::bandwidth_of(none, 0).first, 0);
    EXPECT_EQ(sol::bandwidth_of(none, 3000), (std::pair<double, std::string>{3000, "measured copy bandwidth"}));
}
