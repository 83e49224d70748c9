// KernelBench on the GPU (skip without a CUDA device):
//  - a handful of problems imported at KernelBench's own sizes, self-verified on the GPU, and
//    validated through the runner (file inputs and kevo_ref_setup with model.pt);
//  - `kernelevo bench` over a small suite with a replayed search.
//   ctest --test-dir BUILD -R KernelBenchGpu --output-on-failure
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "gpu_kernels.h"  // write_transcript (tests/evolve)
#include "kb_suite.h"
#include "llm/llm.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo {
namespace {

const DeviceInfo& device() { return kbtest::gpu(); }

#define REQUIRE_GPU()                                                                   \
    do {                                                                                \
        if (!device().present) GTEST_SKIP() << "no CUDA device: " << device().error;    \
    } while (0)

// Imported once at full size: elementwise (6.4 GB), LayerNorm with weights, matmul, GEMM fusion, conv.
const kbtest::Import& gpu_import() {
    static const kbtest::Import g = [] {
        std::vector<std::string> args = {"--jobs", "5"};  // one per problem: the GPU host has the cores
        for (const char* f : {"level1/19_ReLU.py", "level1/40_LayerNorm.py", "level1/1_Square_matrix_multiplication_.py",
                              "level2/12_Gemm_Multiply_LeakyReLU.py",
                              "level1/50_conv_standard_2D__square_input__square_kernel.py"})
            args.push_back((kbtest::problems() / f).string());
        return kbtest::cached_import("kernelbench-gpu-suite", args);
    }();
    return g;
}

TEST(KernelBenchGpu, ImportsAtKernelBenchSizesAndVerifiesOnTheGpu) {
    REQUIRE_GPU();
    const auto& g = gpu_import();
    ASSERT_FALSE(g.report.is_null()) << g.run.describe() << "\n" << g.run.err;
    EXPECT_EQ(g.run.exit_code, 0) << g.run.err;
    EXPECT_EQ(g.report["imported"], 5) << g.run.err;
    EXPECT_EQ(g.report["device"], "cuda");
    for (const auto& r : g.report["results"]) {
        EXPECT_EQ(r["status"], "ok") << r.dump();
        EXPECT_EQ(r["verify"].value("device", ""), "cuda") << r.dump();
        EXPECT_TRUE(r["verify"].value("ok", false)) << r.dump();
        std::cout << r.value("name", "") << ": max |diff| " << r["verify"].value("max_abs_diff", -1.0) << ", "
                  << r.value("seconds", 0.0) << " s\n";
    }
    std::cout << "import of 5 problems at KernelBench sizes: " << g.report.value("seconds", 0.0) << " s\n";
    // KernelBench's own sizes: ReLU is 4096 x 393216.
    Task relu = load_task(g.out / "kb1_19_ReLU" / "task.json");
    EXPECT_EQ(relu.concrete_shape(relu.inputs[0], 0), (std::vector<int64_t>{4096, 393216}));
}

TEST(KernelBenchGpu, ImportedTasksValidateThroughTheRunner) {
    REQUIRE_GPU();
    const auto& g = gpu_import();
    ASSERT_EQ(g.report.value("imported", 0), 5) << g.run.err;
    ValidateOptions o;
    o.timing_trials = 20;
    o.timeout_s = 120;
    // A real kernel on an imported task (no Python involved from here on).
    Validator relu(load_task(g.out / "kb1_19_ReLU" / "task.json"), o);
    ValidationResult r = relu.validate(read_file(fs::path(KEVO_TEST_DATA_DIR) / "kb_relu" / "relu.cu"));
    EXPECT_EQ(r.status, Status::ok) << r.log;
    EXPECT_GT(r.reference_us, 0);
    std::cout << "kb1_19_ReLU: " << r.speedup << "x (kernel " << r.kernel_us << " us, LibTorch eager via TorchScript "
              << r.reference_us << " us)\n";
    // A task with weights: a kernel that ignores them is caught (the reference really uses them).
    Validator ln(load_task(g.out / "kb1_40_LayerNorm" / "task.json"), o);
    ValidationResult bad = ln.validate(read_file(fs::path(KEVO_TEST_DATA_DIR) / "kb_relu" / "relu.cu"));
    EXPECT_EQ(bad.status, Status::mismatch) << bad.log;
}

// Problems imported at once hold the GPU lock shared, so they overlap (a default of "exclusive" once
// made an import of eight problems run them one at a time). Their holds are read from $KEVO_PHASE_LOG.
TEST(KernelBenchGpu, ProblemsImportedAtOnceHoldTheGpuSharedAndOverlap) {
    REQUIRE_GPU();
    TempDir dir("kevo-kb-shared");
    const fs::path log = dir.path() / "phases.jsonl";
    ::setenv("KEVO_PHASE_LOG", log.c_str(), 1);
    auto r = kbtest::kernelevo({"import", "kernelbench", "--out", (dir.path() / "suite").string(), "--jobs", "3",
                                "--max-numel", "1000000", (kbtest::problems() / "level1/19_ReLU.py").string(),
                                (kbtest::problems() / "level1/40_LayerNorm.py").string(),
                                (kbtest::problems() / "level2/12_Gemm_Multiply_LeakyReLU.py").string()});
    ::unsetenv("KEVO_PHASE_LOG");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    double last_got = 0, first_released = 1e300;
    int holds = 0;
    std::istringstream lines(read_file(log));
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j.value("reason", "").rfind("importing ", 0) != 0) continue;
        ++holds;
        EXPECT_EQ(j.value("lock", ""), "shared") << line;
        last_got = std::max(last_got, j.value("got", 0.0));
        first_released = std::min(first_released, j.value("released", 0.0));
    }
    EXPECT_EQ(holds, 3) << read_file(log);
    EXPECT_LT(last_got, first_released) << "the three imports did not hold the GPU at the same time:\n"
                                        << read_file(log);
}

TEST(KernelBenchGpu, BenchOverASmallSuiteWithAReplayedSearch) {
    REQUIRE_GPU();
    const auto& g = gpu_import();
    ASSERT_EQ(g.report.value("imported", 0), 5) << g.run.err;
    TempDir dir("kevo-kb-bench");
    fs::path suite = dir.path() / "suite", out = dir.path() / "report";
    fs::create_directories(suite / "kb1_19_ReLU");
    fs::copy(g.out / "kb1_19_ReLU", suite / "kb1_19_ReLU", fs::copy_options::recursive);
    fs::copy_file(g.out / "kernelbench_reference.cpp", suite / "kernelbench_reference.cpp");
    std::string relu = read_file(fs::path(KEVO_TEST_DATA_DIR) / "kb_relu" / "relu.cu");
    write_transcript(dir.path() / "t.jsonl", {relu, relu, relu, relu});
    auto r = kbtest::kernelevo({"bench", "--suite", suite.string(), "--out", out.string(), "--replay",
                                (dir.path() / "t.jsonl").string(), "--llm-replay-in-order", "--islands", "1", "--children",
                                "1", "--generations", "0", "--mode", "full", "--timing-trials", "20", "--torch-compile"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(out / "report.json"));
    ASSERT_EQ(j["results"].size(), 1u);
    const auto& t = j["results"][0];
    EXPECT_EQ(t["status"], "ok") << t.dump();
    EXPECT_GT(t["speedup"].get<double>(), 0.5) << t.dump();
    EXPECT_EQ(t["tokens"], 3800) << t.dump();
    EXPECT_DOUBLE_EQ(j["fast_p"]["0"].get<double>(), 1.0);
    EXPECT_TRUE(fs::exists(out / "report.html"));
    std::cout << read_file(out / "report.md");
}

}  // namespace
}  // namespace kevo
