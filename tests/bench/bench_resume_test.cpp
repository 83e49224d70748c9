// `kernelevo bench` as a user runs it, on real files: --json prints the report's document; search
// options with --kernels are refused (exit 2), not ignored; a resumed bench runs a task again when
// its task file or its kernel changed since (a kernel added to a task reported missing included).
#include <gtest/gtest.h>

#include <fstream>

#include "bench/bench.h"
#include "common/fs.h"
#include "common/process.h"

namespace kevo {
namespace {

struct Bench {
    TempDir dir{"kevo-bench-resume"};
    fs::path suite = dir.path() / "suite", kernels = dir.path() / "kernels", out = dir.path() / "report";
    Bench() {
        for (const char* name : {"a", "b"}) {
            fs::create_directories(suite / name);
            fs::copy(fs::path(KEVO_TEST_DATA_DIR) / "baseline_relu_add", suite / name, fs::copy_options::recursive);
            fs::remove(suite / name / "kernel.cu");
        }
        fs::create_directories(kernels);
    }
    ProcessResult run(std::vector<std::string> extra = {}) const {
        ProcessOptions po;
        po.argv = {KEVO_EXE, "bench", "--suite", suite.string(), "--out", out.string(), "--kernels", kernels.string(), "--no-baselines"};
        po.argv.insert(po.argv.end(), extra.begin(), extra.end());
        po.timeout_s = 900;
        return run_process(po);
    }
    nlohmann::json result(const std::string& name) const {
        const nlohmann::json report = nlohmann::json::parse(read_file(out / "report.json"));
        for (const auto& r : report["results"])
            if (r["name"] == name) return r;
        return nullptr;
    }
};

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

TEST(BenchCommand, JsonPrintsTheReportDocument) {
    Bench b;
    ProcessResult p = b.run({"--json"});
    ASSERT_TRUE(p.started);
    EXPECT_EQ(p.exit_code, 0) << p.err;
    ASSERT_FALSE(p.out.empty()) << p.err;
    nlohmann::json printed = nlohmann::json::parse(p.out);  // exactly one document on stdout
    EXPECT_EQ(printed, nlohmann::json::parse(read_file(b.out / "report.json")));
    EXPECT_EQ(printed["tasks"], 2);
    EXPECT_EQ(printed["results"][0]["status"], "missing");
}

TEST(BenchCommand, SearchOptionsWithKernelsAreRefused) {
    Bench b;
    ProcessResult p = b.run({"--model", "google/gemini-3-flash", "--max-time", "10m", "--json"});
    ASSERT_TRUE(p.started);
    EXPECT_EQ(p.exit_code, 2) << p.err;
    EXPECT_TRUE(has(p.err, "--kernels validates ready kernels and runs no search, so --max-time, --model have no effect") ||
                has(p.err, "so --model, --max-time have no effect"))
        << p.err;
    EXPECT_EQ(nlohmann::json::parse(p.out)["exit_code"], 2) << p.out;
    EXPECT_FALSE(fs::exists(b.out)) << "nothing may run";
    // The options that do apply with --kernels are accepted.
    p = b.run({"--timing-trials", "5", "--timeout", "20"});
    EXPECT_EQ(p.exit_code, 0) << p.err;
}

// Like make or ccache: a new or changed input makes the kept result stale.
TEST(BenchCommand, AResumedBenchRunsATaskAgainWhenItsKernelOrTaskChanged) {
    Bench b;
    ProcessResult p = b.run();
    ASSERT_EQ(p.exit_code, 0) << p.describe() << p.error << p.err;
    EXPECT_EQ(b.result("a")["status"], "missing");
    EXPECT_EQ(b.result("b")["status"], "missing");

    // A kernel added for a: a is validated now (no_device on a host without a GPU); b is kept.
    write_file_atomic(b.kernels / "a.cu", read_file(fs::path(KEVO_TEST_DATA_DIR) / "baseline_relu_add" / "kernel.cu"));
    p = b.run();
    ASSERT_EQ(p.exit_code == 0 || p.exit_code == 2, true) << p.err;
    EXPECT_TRUE(has(p.err, "a: the task or its kernel changed since the last run: running it again")) << p.err;
    EXPECT_NE(b.result("a")["status"], "missing") << b.result("a").dump(2);
    EXPECT_EQ(b.result("a")["kernel"], (b.kernels / "a.cu").string());
    EXPECT_TRUE(has(p.err, "b: done earlier (no kernel)")) << p.err;

    // b's task file edited: b runs again; a kernel in b's folder added at the same time is found.
    std::ofstream(b.suite / "b" / "task.json", std::ios::app) << "\n";
    fs::create_directories(b.kernels / "b");
    write_file_atomic(b.kernels / "b" / "kernel.cu", read_file(fs::path(KEVO_TEST_DATA_DIR) / "baseline_relu_add" / "kernel.cu"));
    p = b.run();
    EXPECT_TRUE(has(p.err, "b: the task or its kernel changed since the last run")) << p.err;
    EXPECT_EQ(b.result("b")["kernel"], (b.kernels / "b" / "kernel.cu").string()) << b.result("b").dump(2);

    // Nothing changed: a task that finished is not run again.
    nlohmann::json state = nlohmann::json::parse(read_file(b.out / "bench.json"));
    state["results"]["b"]["done"] = true;  // (on a host without a GPU nothing finished: make b finished)
    write_file_atomic(b.out / "bench.json", state.dump(2));
    p = b.run();
    EXPECT_TRUE(has(p.err, "b: done earlier")) << p.err;
    EXPECT_FALSE(has(p.err, "b: the task or its kernel changed")) << p.err;
}

TEST(BenchInputs, TheKeyCoversEveryFileAndItsBytes) {
    TempDir dir("kevo-bench-key");
    fs::path f = dir.path() / "k.cu";
    const std::string absent = bench::inputs_key({f});
    write_file_atomic(f, "x");
    const std::string one = bench::inputs_key({f});
    EXPECT_NE(absent, one);
    write_file_atomic(f, "y");
    EXPECT_NE(bench::inputs_key({f}), one);
    EXPECT_EQ(bench::inputs_key({f}), bench::inputs_key({f}));
    // Every candidate of a task, whatever the architecture: DIR/NAME.cu and DIR/NAME/*.cu.
    fs::create_directories(dir.path() / "t");
    write_file_atomic(dir.path() / "t" / "sm_80.cu", "");
    write_file_atomic(dir.path() / "t" / "sm_90.cu", "");
    write_file_atomic(dir.path() / "t.cu", "");
    EXPECT_EQ(bench::kernel_candidates(dir.path(), "t", "t"),
              (std::vector<fs::path>{dir.path() / "t" / "sm_80.cu", dir.path() / "t" / "sm_90.cu", dir.path() / "t.cu"}));
}

}  // namespace
}  // namespace kevo
