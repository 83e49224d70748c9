// The speed of light on a real GPU (issue 35): a kernel the tool measures never reads above 100%.
// A strict fp32 matmul computed as 3xTF32 on tensor cores (tests/data/matmul_strict) is validated by
// `kernelevo validate --json`, as a user runs it; its floor must be a bound for it: the fraction in
// (0, 1], no set marked floor_beaten, and no percentage above 100 in the printed line. Skips
// without a CUDA device; on the H200: build-gpu/tests/sol/sol_gpu_test (scripts/device_build.sh first).
// SolAnnotate (no GPU): the annotation bounds the launch floor by the judge's own empty call.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>

#include "common/fs.h"
#include "common/process.h"
#include "task/task.h"
#include "validate/annotate.h"
#include "validate/validate.h"

using namespace kevo;
using nlohmann::json;

namespace {
const fs::path kTaskDir = fs::path(KEVO_TEST_DATA_DIR) / "matmul_strict";

const DeviceInfo& device() {
    static const DeviceInfo d = Validator(load_task(kTaskDir / "task.json"), ValidateOptions()).device();
    return d;
}

ProcessResult validate(const std::string& kernel, bool as_json) {
    ProcessOptions po;
    po.argv = {KEVO_EXE, "validate", "--task", (kTaskDir / "task.json").string(), "--kernel", (kTaskDir / "kernels" / kernel).string()};
    if (as_json) po.argv.push_back("--json");
    po.timeout_s = 600;
    return run_process(po);
}
}  // namespace

TEST(SolGpu, A3xTf32GemmIsNeverAboveTheSpeedOfLight) {
    if (!device().present) GTEST_SKIP() << "no CUDA device: " << device().error;
    ProcessResult p = validate("gemm_3xtf32.cu", true);
    ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
    const json r = json::parse(p.out);
    ASSERT_EQ(r.value("status", ""), "ok") << r.dump(2);
    ASSERT_TRUE(r["details"].contains("sol")) << r["details"].dump(2);
    const json& sol = r["details"]["sol"];
    EXPECT_FALSE(sol.value("floor_beaten", true)) << sol.dump(2);
    EXPECT_GT(sol.value("fraction", 0.0), 0) << sol.dump(2);
    EXPECT_LE(sol.value("fraction", 2.0), 1.0) << sol.dump(2);
    ASSERT_EQ(sol["sets"].size(), 1u);
    const json& set = sol["sets"][0];
    EXPECT_EQ(set.value("bound", ""), "compute") << set.dump(2);
    EXPECT_LE(set.value("floor_ratio", 2.0), 1.0) << set.dump(2);
    // What the kernel achieved, beside the old floor (fp32 CUDA cores): a 3xTF32 kernel faster than
    // 67 TFLOP/s of fp32 work read above 100% before issue 35.
    const double flop = 2.0 * 4096 * 4096 * 4096, kernel_us = set.value("kernel_us", 0.0);
    const double cuda_core_peak = 67e12 * device().sm_count / 132;
    std::printf("3xTF32 GEMM: %.1f us, %.1f TFLOP/s of fp32 work; the fp32 CUDA-core floor would read %.0f%%; now %.0f%% (%s)\n",
                kernel_us, flop / kernel_us / 1e6, 100 * flop / cuda_core_peak / (kernel_us * 1e-6), 100 * sol.value("fraction", 0.0),
                set.value("binding", "").c_str());
    EXPECT_NE(sol.value("peak", "").find("3xTF32"), std::string::npos) << sol.dump(2);  // strict fp32: the emulated rate

    // The line a user reads prints no percentage above 100.
    ProcessResult human = validate("gemm_3xtf32.cu", false);
    ASSERT_EQ(human.exit_code, 0) << human.out << human.err;
    static const std::regex pct("([0-9]+)%");
    for (auto it = std::sregex_iterator(human.out.begin(), human.out.end(), pct); it != std::sregex_iterator(); ++it)
        EXPECT_LE(std::atoi((*it)[1].str().c_str()), 100) << human.out;
    EXPECT_NE(human.out.find("speed of light"), std::string::npos) << human.out;
}

// No GPU needed: the annotation reads the judge's empty call per set (details.timing.sets[].launch_cost)
// so that a tiny set's launch floor is never above it.
TEST(SolAnnotate, TheJudgesEmptyCallBoundsTheLaunchFloor) {
    Task task = load_task(kTaskDir / "task.json");
    task.shapes[0] = {{"M", 64}, {"N", 64}, {"K", 64}};  // 48 KiB: launch-bound
    ValidationResult r;
    r.status = Status::ok;
    r.arch = "sm_90";
    r.kernel_us = 1.6;
    r.details = {{"timing", {{"sets", {{{"shape_set", 0}, {"launch_cost", {{"judge_empty_us", 1.5}}}}}}}}};
    annotate_sol(r, task, 4800, "datasheet peak", 132);
    ASSERT_TRUE(r.details.contains("sol")) << r.details.dump();
    const json& set = r.details["sol"]["sets"][0];
    EXPECT_EQ(set.value("bound", ""), "launch") << set.dump();
    EXPECT_DOUBLE_EQ(set.value("launch_floor_us", 0.0), 1.5) << set.dump();
    EXPECT_FALSE(set.value("floor_beaten", true)) << set.dump();
    EXPECT_NEAR(r.details["sol"].value("fraction", 0.0), 1.5 / 1.6, 1e-12);
}
