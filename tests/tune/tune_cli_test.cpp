// `kernelevo tune` on any machine: its help, and clear errors (exit 2) for kernels it cannot tune
// and for a machine without a GPU.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "common/process.h"

using namespace kevo;

namespace {
const fs::path kTask = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json";

ProcessResult kernelevo(std::vector<std::string> args) {
    ProcessOptions o;
    o.argv = {KEVO_EXE};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = 300;
    o.env["KERNELEVO_CACHE_HOME"] = (fs::path(KEVO_BINARY_DIR) / "test-cache").string();
    return run_process(o);
}
}  // namespace

TEST(TuneCli, HelpNamesTheStrategiesAndTheMacro) {
    ProcessResult r = kernelevo({"tune", "--help"});
    EXPECT_EQ(r.exit_code, 0);
    for (const char* s : {"KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...)", "grid", "random", "tpe", "--max-evals", "--out", "without any LLM"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(TuneCli, AKernelWithoutTunablesIsBadUsage) {
    ProcessResult r = kernelevo({"tune", "--task", kTask.string(), "--kernel",
                                 (fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "kernels" / "good.cu").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("declares no tunable parameter"), std::string::npos) << r.err;
}

TEST(TuneCli, AMalformedTunableSaysWhich) {
    TempDir dir("kevo-tune-cli");
    write_file_atomic(dir.path() / "k.cu", "#include <kernelevo/abi.h>\nKEVO_TUNABLE(BLOCK, 100, 64 128)\n");
    ProcessResult r = kernelevo({"tune", "--task", kTask.string(), "--kernel", (dir.path() / "k.cu").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("KEVO_TUNABLE(BLOCK, 100, 64 128): the default 100 is not among the values"), std::string::npos) << r.err;
    ProcessResult missing = kernelevo({"tune", "--task", kTask.string(), "--kernel", (dir.path() / "none.cu").string()});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
    ProcessResult strategy = kernelevo({"tune", "--task", kTask.string(), "--kernel", (dir.path() / "k.cu").string(), "--strategy", "annealing"});
    EXPECT_EQ(strategy.exit_code, 2);
}

TEST(TuneCli, WithoutAGpuItSaysSo) {
    ProcessResult probe = kernelevo({"tune", "--task", kTask.string(), "--kernel",
                                     (fs::path(KEVO_SOURCE_DIR) / "tests" / "tune" / "tuned_gelu.cu").string(), "--max-evals", "1"});
    if (probe.err.find("tuning needs a GPU") == std::string::npos) GTEST_SKIP() << "a GPU is present (kevo_tune_gpu_test covers it)";
    EXPECT_EQ(probe.exit_code, 2) << probe.err;
    EXPECT_NE(probe.err.find(": tuning needs a GPU (status no_device)"), std::string::npos) << probe.err;
}
