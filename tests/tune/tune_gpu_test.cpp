// On a GPU: tuning a kernel with two tunables (4 x 4 = 16 points) finds the best combination of an
// exhaustive sweep validated point by point, within 16 validations' GPU time; `kernelevo tune`
// writes the tuned kernel. Speed-of-light figures are printed for the lead's report. Skips
// without a CUDA device.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/fs.h"
#include "common/process.h"
#include "tune/tune.h"
#include "validate/annotate.h"
#include "validate/validator_evaluator.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR);
const fs::path kKernel = fs::path(KEVO_SOURCE_DIR) / "tests" / "tune" / "tuned_gelu.cu";

ValidateOptions options() {
    ValidateOptions o;
    o.timeout_s = 30;
    o.timing_trials = 50;
    return o;
}
}  // namespace

TEST(TuneGpu, FindsTheBestOfAnExhaustiveSweep) {
    Validator v(load_task(kData / "gelu_bias" / "task.json"), options());
    if (!v.device().present) GTEST_SKIP() << "no CUDA device: " << v.device().error;
    const std::string src = read_file(kKernel);
    ValidatorEvaluator ev(v);
    tune::TuneOptions o;  // auto: grid for 16 points
    tune::TuneResult r = tune::tune(src, ev, o);
    ASSERT_EQ(r.strategy, "grid");
    ASSERT_EQ(r.trials.size(), 16u);
    ASSERT_NE(r.best_trial(), nullptr);

    // The sweep: every point validated on its own.
    auto tunables = tune::parse_tunables(src);
    double sweep_best = 0, sweep_run_s = 0;
    tune::Point sweep_point;
    for (const auto& t : r.trials) {
        ValidationResult x = v.validate(tune::with_values(src, tunables, t.point));
        sweep_run_s += x.run_s;
        ASSERT_TRUE(x.ok()) << tune::point_text(t.point) << ": " << x.log;
        if (x.speedup > sweep_best) sweep_best = x.speedup, sweep_point = t.point;
    }
    double tuned_again = v.validate(r.best_source).speedup;
    // Informational (a figure, not an assertion: timing belongs in benchmarks): the tuner's time in
    // Evaluator::run against the sweep's judge job time, and where the tuner's time went.
    std::printf("tuner best %s %.3fx (again %.3fx); sweep best %s %.3fx; tuner run %.1f s, wall %.1f s; sweep job %.1f s\n%s\n",
                tune::point_text(r.best_trial()->point).c_str(), r.best_trial()->speedup, tuned_again,
                tune::point_text(sweep_point).c_str(), sweep_best, r.run_s, r.wall_s, sweep_run_s, r.split.text().c_str());
    EXPECT_GE(tuned_again, 0.97 * sweep_best);  // the same point, or one within timing noise of it
    EXPECT_EQ(r.split.points, 16);              // every point's time is accounted for
    EXPECT_NEAR(r.split.wall_s, r.run_s, 1e-6);
}

TEST(TuneGpu, CommandWritesTheTunedKernelAndSpeedOfLight) {
    Validator v(load_task(kData / "gelu_bias" / "task.json"), options());
    if (!v.device().present) GTEST_SKIP() << "no CUDA device: " << v.device().error;
    TempDir dir("kevo-tune-gpu");
    ProcessOptions po;
    po.argv = {KEVO_EXE, "tune", "--task", (kData / "gelu_bias" / "task.json").string(), "--kernel", kKernel.string(),
               "--out", (dir.path() / "tuned.cu").string(), "--json"};
    po.timeout_s = 600;
    po.env["KERNELEVO_CACHE_HOME"] = (fs::path(KEVO_BINARY_DIR) / "test-cache").string();
    ProcessResult p = run_process(po);
    std::printf("%s\n", p.err.c_str());
    ASSERT_EQ(p.exit_code, 0) << p.err;
    auto j = nlohmann::json::parse(p.out);
    EXPECT_EQ(j["trials"].size(), 16u);
    std::string tuned = read_file(dir.path() / "tuned.cu");
    EXPECT_EQ(tune::default_point(tune::parse_tunables(tuned)), j["best"].get<tune::Point>());
    EXPECT_NE(p.err.find("speed of light: "), std::string::npos);
}

TEST(SolGpu, FiguresForTheFixtureKernels) {
    // Prints the speed-of-light line for the gelu fixture and the example's two kernels (gelu_bias,
    // row_softmax; the latter's task is the example's, as the Triton tests use it).
    const fs::path example = fs::path(KEVO_SOURCE_DIR) / "examples" / "fused_ops" / "kernels";
    const std::vector<std::pair<fs::path, fs::path>> cases = {
        {kData / "gelu_bias" / "task.json", kData / "gelu_bias" / "kernels" / "good.cu"},
        {kData / "gelu_bias" / "task.json", example / "gelu_bias" / "sm_90.cu"},
        {kData / "triton" / "row_softmax_task.json", example / "row_softmax" / "sm_90.cu"}};
    for (const auto& [task, k] : cases) {
        Validator v(load_task(task), options());
        if (!v.device().present) GTEST_SKIP() << "no CUDA device: " << v.device().error;
        ValidationResult r = v.validate(read_file(k));
        ASSERT_TRUE(r.ok()) << k << ": " << r.log;
        auto [gbs, src] = sol::bandwidth_of(v.device(), v.measured_bandwidth_gbs());
        annotate_sol(r, v.task(), gbs, src, v.device().sm_count);
        ASSERT_TRUE(r.details.contains("sol"));
        std::printf("%s/%s: %.3fx; %s [%s %.0f GB/s]\n", v.task().name.c_str(), k.filename().c_str(), r.speedup,
                    sol::sol_line(r.details["sol"]).c_str(), src.c_str(), gbs);
        EXPECT_GT(r.details["sol"]["fraction"].get<double>(), 0.05);
        EXPECT_LE(r.details["sol"]["fraction"].get<double>(), 1.15);  // never faster than physics (within timing noise)
    }
}

// The copy bandwidth the tool measures once per device (the speed of light's denominator) agrees
// within 15% with what PyTorch's device-to-device copy reaches on the same GPU. Skips without a
// CUDA device or without a Python whose torch sees it.
TEST(SolGpu, MeasuredCopyBandwidthIsWithin15PercentOfPyTorchs) {
    Validator v(load_task(kData / "gelu_bias" / "task.json"), options());
    if (!v.device().present) GTEST_SKIP() << "no CUDA device: " << v.device().error;
    ProcessOptions po;
    po.argv = {"python3", "-c", R"PY(
import torch
if not torch.cuda.is_available():
    print("NOCUDA"); raise SystemExit(0)
n = 1 << 30
a = torch.ones(n // 4, dtype=torch.float32, device="cuda")
b = torch.empty_like(a)
ts = []
for i in range(12):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); e.synchronize()
    if i >= 2: ts.append(s.elapsed_time(e))
ts.sort()
print("GBS", 2 * n / (ts[len(ts) // 2] * 1e-3) / 1e9)
)PY"};
    po.timeout_s = 120;
    ProcessResult r = run_process(po);
    if (!r.ok() || r.out.find("GBS ") == std::string::npos)
        GTEST_SKIP() << "no Python with a CUDA-enabled torch here: " << r.describe() << " " << r.out << r.err.substr(0, 300);
    const double torch_gbs = std::stod(r.out.substr(r.out.find("GBS ") + 4));
    const double ours = v.measured_bandwidth_gbs();
    std::printf("copy bandwidth: kernelevo %.0f GB/s, PyTorch %.0f GB/s (datasheet %.0f GB/s)\n", ours, torch_gbs,
                v.device().mem_bandwidth_gbs);
    ASSERT_GT(torch_gbs, 0);
    EXPECT_NEAR(ours / torch_gbs, 1.0, 0.15);
}
