// The strict fp32 reference's figures on the CPU, over the fake runner (fake_runner.sh) standing in for
// the judge: the validator turns the judge's per-set speedup_vs_strict_fp32 into
// details.speedup_vs_strict_fp32 (the weighted geometric mean, like the ranking speedup, which stays
// the one against LibTorch's defaults) only when every timed set has one, and `kernelevo validate`
// prints its "reference strict fp32" line only then. (On a GPU: strict_reference_gpu_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "common/fs.h"
#include "common/process.h"
#include "reference/reference.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias";

// A judge's ok result with two timed sets (weights 3 and 1); `strict_us` per set, <= 0: none.
std::string judge_result(double strict0, double strict1) {
    nlohmann::json sets = nlohmann::json::array();
    const double kernel[] = {10, 4}, reference[] = {20, 6}, strict[] = {strict0, strict1}, weight[] = {3, 1};
    for (int s = 0; s < 2; ++s) {
        nlohmann::json set{{"shape_set", s}, {"weight", weight[s]}, {"kernel", {{"time_us", kernel[s]}}},
                           {"reference", {{"time_us", reference[s]}}}, {"speedup", reference[s] / kernel[s]}};
        if (strict[s] > 0) {
            set["reference_strict"] = {{"time_us", strict[s]}, {"statistic", "median"}, {"source", "measured"}};
            set["speedup_vs_strict_fp32"] = strict[s] / kernel[s];
        }
        sets.push_back(set);
    }
    nlohmann::json timing{{"sets", sets},
                          {"reference_precision", {{"correctness", "strict fp32 (TF32 off)"}, {"timing", "LibTorch defaults (cuDNN TF32 on, cuBLAS TF32 off)"}}}};
    if (strict0 > 0) timing["reference_strict_us"] = strict0;
    return nlohmann::json{{"status", "ok"}, {"trials", 4}, {"timing", timing}}.dump();
}

struct FakeJudge {
    TempDir dir{"kevo-strict-report"};
    explicit FakeJudge(const std::string& reply) {
        write_file_atomic(dir.path() / "replies", reply + "\n");
        setenv("KERNELEVO_RUNNER", (fs::path(KEVO_SOURCE_DIR) / "tests/validate/fake_runner.sh").c_str(), 1);
        setenv("KERNELEVO_FAKE_REPLIES", (dir.path() / "replies").c_str(), 1);
        setenv("KERNELEVO_FAKE_LOG", (dir.path() / "log").c_str(), 1);
        setenv("KERNELEVO_LOCK_DIR", (dir.path() / "locks").c_str(), 1);
        if (!std::getenv("KERNELEVO_CACHE_HOME")) setenv("KERNELEVO_CACHE_HOME", (fs::path(KEVO_BINARY_DIR) / "test-cache").c_str(), 1);
    }
    ValidationResult run() {
        ValidateOptions o;
        o.arch = "sm_90";
        Validator v(load_task(kData / "task.json"), o);
        write_file_atomic(dir.path() / "kernel.so", "not a library: the fake runner never loads it");
        CompileResult c;
        c.ok = true;
        c.arch = "sm_90";
        c.library = dir.path() / "kernel.so";
        return v.run(c);
    }
    ProcessResult cli() {
        ProcessOptions po;
        po.argv = {KEVO_EXE, "validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels" / "good.cu").string()};
        po.timeout_s = 600;
        return run_process(po);
    }
};

#define REQUIRE_REFERENCE() \
    if (!reference_support().available) GTEST_SKIP() << "this kernelevo cannot build references (no LibTorch)"
}  // namespace

TEST(StrictReport, TheStrictSpeedupIsTheWeightedGeomeanBesideTheRankingOne) {
    REQUIRE_REFERENCE();
    FakeJudge g(judge_result(50, 12));
    ValidationResult r = g.run();
    ASSERT_EQ(r.status, Status::ok) << r.log;
    // Ranked by the defaults: (2^3 * 1.5)^(1/4).
    EXPECT_NEAR(r.speedup, std::pow(8 * 1.5, 0.25), 1e-9);
    ASSERT_TRUE(r.details.contains("speedup_vs_strict_fp32")) << r.details.dump();
    EXPECT_NEAR(r.details["speedup_vs_strict_fp32"].get<double>(), std::pow(5.0 * 5.0 * 5.0 * 3.0, 0.25), 1e-9);
    EXPECT_DOUBLE_EQ(r.details["timing"]["reference_strict_us"].get<double>(), 50);
}

TEST(StrictReport, NoStrictSpeedupUnlessEverySetHasOne) {
    REQUIRE_REFERENCE();
    {
        FakeJudge g(judge_result(50, 0));
        ValidationResult r = g.run();
        ASSERT_EQ(r.status, Status::ok) << r.log;
        EXPECT_FALSE(r.details.contains("speedup_vs_strict_fp32")) << r.details.dump();
    }
    {
        FakeJudge g(judge_result(0, 0));
        ValidationResult r = g.run();
        ASSERT_EQ(r.status, Status::ok) << r.log;
        EXPECT_FALSE(r.details.contains("speedup_vs_strict_fp32"));
        EXPECT_NEAR(r.speedup, std::pow(8 * 1.5, 0.25), 1e-9);
    }
}

TEST(StrictReport, ValidatePrintsTheStrictLineOnlyWhenReported) {
    REQUIRE_REFERENCE();
    {
        FakeJudge g(judge_result(50, 12));
        ProcessResult p = g.cli();
        ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
        EXPECT_NE(p.out.find("  reference strict fp32: 50.00 us (speedup 4.401x against it)"), std::string::npos) << p.out;
        EXPECT_NE(p.out.find("x against it)"), std::string::npos) << p.out;
        EXPECT_NE(p.out.find("precision    correctness strict fp32 (TF32 off); timing LibTorch defaults (cuDNN TF32 on"), std::string::npos) << p.out;
    }
    {
        FakeJudge g(judge_result(0, 0));
        ProcessResult p = g.cli();
        ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
        EXPECT_NE(p.out.find("  speedup "), std::string::npos) << p.out;
        EXPECT_EQ(p.out.find("strict fp32:"), std::string::npos) << p.out;
    }
}
