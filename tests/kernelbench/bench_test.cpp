// `kernelevo bench`: the fast_p arithmetic, and `bench --kernels` on a small imported suite with
// fixture kernels producing the tables and the page (on a CPU machine the kernels cannot run: the
// report says so and the GPU-only figures stay empty), resumably.
#include <gtest/gtest.h>

#include "bench/bench.h"
#include "kb_suite.h"

namespace kevo {
namespace {

bench::TaskResult res(const std::string& name, const std::string& status, double speedup, int64_t tokens = 0) {
    bench::TaskResult r;
    r.name = name;
    r.status = status;
    r.speedup = speedup;
    r.tokens = tokens;
    r.cost_usd = tokens * 1e-6;
    r.wall_s = 10;
    r.done = true;
    return r;
}

TEST(Bench, FastPOverAllTasksAndSpeedupsOverTheCorrectOnes) {
    std::vector<bench::TaskResult> rs = {res("a", "ok", 2.5, 1000), res("b", "ok", 1.2, 2000), res("c", "ok", 0.5, 3000),
                                         res("d", "mismatch", 9.0, 4000), res("e", "missing", 0)};
    bench::Summary s = bench::summarize(rs);
    EXPECT_EQ(s.tasks, 5);
    EXPECT_EQ(s.correct, 3);
    ASSERT_EQ(s.fast_p.size(), 4u);
    EXPECT_DOUBLE_EQ(s.fast_p[0].first, 0);
    EXPECT_DOUBLE_EQ(s.fast_p[0].second, 3.0 / 5);  // correct
    EXPECT_DOUBLE_EQ(s.fast_p[1].second, 2.0 / 5);  // > 1x
    EXPECT_DOUBLE_EQ(s.fast_p[2].second, 1.0 / 5);  // > 1.5x
    EXPECT_DOUBLE_EQ(s.fast_p[3].second, 1.0 / 5);  // > 2x; the wrong 9x kernel never counts
    EXPECT_NEAR(s.geomean_speedup, std::cbrt(2.5 * 1.2 * 0.5), 1e-12);
    EXPECT_DOUBLE_EQ(s.median_speedup, 1.2);
    EXPECT_EQ(s.tokens, 10000);
    EXPECT_DOUBLE_EQ(s.wall_s, 50);

    bench::ReportInfo info{"suite", "search", "NVIDIA H200", "sm_90", "2026-12-02T10:00:00Z"};
    std::string md = bench::report_markdown(rs, info);
    EXPECT_NE(md.find("| fast_0 (correct) | 0.600 (3/5) |"), std::string::npos) << md;
    EXPECT_NE(md.find("| fast_1.5 | 0.200 (1/5) |"), std::string::npos) << md;
    EXPECT_NE(md.find("| geomean speedup (correct tasks) | 1.145x |"), std::string::npos) << md;
    EXPECT_NE(md.find("| a | ok | 2.500x |"), std::string::npos) << md;
    EXPECT_NE(md.find("| d | mismatch | - |"), std::string::npos) << md;
    nlohmann::json j = bench::report_json(rs, info);
    EXPECT_DOUBLE_EQ(j["fast_p"]["2"].get<double>(), 0.2);
    EXPECT_DOUBLE_EQ(j["median_speedup"].get<double>(), 1.2);
    EXPECT_EQ(j["results"].size(), 5u);
    std::string html = bench::report_html(rs, info);
    EXPECT_EQ(html.find("src="), std::string::npos) << "self-contained: the charts' uPlot is inline";
    EXPECT_EQ(html.find("href="), std::string::npos);
    size_t charts = 0;
    for (size_t p = html.find("<figure class='chart'"); p != std::string::npos; p = html.find("<figure class='chart'", p + 1)) ++charts;
    EXPECT_EQ(charts, 3u);
    EXPECT_NE(html.find("\\u003c0.5x"), std::string::npos) << "labels cannot close the script";
    for (const char* title : {"Speedup per task", "Speedup distribution", "Best speedup vs LLM tokens spent"})
        EXPECT_NE(html.find(title), std::string::npos) << title;
    // No task yet: no division by zero, no NaN.
    std::string empty = bench::report_markdown({}, info);
    EXPECT_EQ(empty.find("nan"), std::string::npos) << empty;
}

TEST(Bench, KernelsOnAnImportedSuiteWriteTheTableAndThePage) {
    const auto& imp = kbtest::cpu_import();
    ASSERT_EQ(imp.report.value("imported", 0), 12) << imp.run.err;
    // A small suite: three of the imported tasks.
    TempDir dir("kevo-bench-test");
    fs::path suite = dir.path() / "suite", kernels = dir.path() / "kernels", out = dir.path() / "report";
    for (const char* t : {"kb1_19_ReLU", "kb1_40_LayerNorm", "kb1_1_Square_matrix_multiplication"})
        fs::create_directories(suite / t), fs::copy(imp.out / t, suite / t, fs::copy_options::recursive);
    fs::copy_file(imp.out / "kernelbench_reference.cpp", suite / "kernelbench_reference.cpp");
    write_file_atomic(kernels / "kb1_19_ReLU.cu", read_file(fs::path(KEVO_TEST_DATA_DIR) / "kb_relu" / "relu.cu"));
    write_file_atomic(kernels / "kb1_40_LayerNorm" / "kernel.cu", "#include <kernelevo/abi.h>\nthis does not compile\n");

    auto r = kbtest::kernelevo({"bench", "--suite", suite.string(), "--out", out.string(), "--kernels", kernels.string(),
                                "--timing-trials", "20", "--baseline",
                                (kbtest::problems() / "baseline_h100.tsv").string(), "--torch-compile"});
    ASSERT_TRUE(r.started);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const char* f : {"report.md", "report.json", "report.html", "bench.json"}) EXPECT_TRUE(fs::exists(out / f)) << f;
    // Progress: task i/N, the best so far, an ETA.
    EXPECT_NE(r.err.find("[1/3] kb1_19_ReLU: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[3/3] kb1_40_LayerNorm: compile_error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("| ETA "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[2/3] kb1_1_Square_matrix_multiplication: no kernel"), std::string::npos) << r.err;

    auto j = nlohmann::json::parse(read_file(out / "report.json"));
    EXPECT_EQ(j["tasks"], 3);
    for (const char* p : {"0", "1", "1.5", "2"}) EXPECT_TRUE(j["fast_p"].contains(p)) << p;
    std::map<std::string, nlohmann::json> by;
    for (const auto& t : j["results"]) by[t["name"]] = t;
    EXPECT_EQ(by["kb1_40_LayerNorm"]["status"], "compile_error");
    EXPECT_EQ(by["kb1_1_Square_matrix_multiplication"]["status"], "missing");
    // The PyTorch baselines (tool/baseline): timed where PyTorch sees a GPU, else each says why not.
    const auto& ln = by["kb1_40_LayerNorm"];
    if (kbtest::gpu().present)
        EXPECT_TRUE(ln["torch_eager_us"].is_number() || ln["torch"]["not_run"].contains("eager")) << ln.dump();
    else
        EXPECT_NE(ln["torch"]["not_run"]["eager"].get<std::string>().find("no CUDA device"), std::string::npos) << ln.dump();
    std::string md = read_file(out / "report.md"), html = read_file(out / "report.html");
    EXPECT_NE(md.find("| fast_1 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| kb1_40_LayerNorm | compile_error |"), std::string::npos) << md;
    // KernelBench's published H100 times beside ours (ReLU: 4.28 ms eager there).
    EXPECT_NE(md.find("baseline eager | baseline compile |"), std::string::npos) << md;
    EXPECT_DOUBLE_EQ(by["kb1_19_ReLU"]["baseline_eager_us"].get<double>(), 4280);
    EXPECT_NE(html.find("<th>baseline eager</th>"), std::string::npos);
    EXPECT_EQ(html.find("src="), std::string::npos);
    const std::string relu = by["kb1_19_ReLU"]["status"];
    if (relu == "no_device") {
        // GPU-only parts: not run here, and the report says so.
        EXPECT_NE(md.find("not run: no GPU"), std::string::npos) << md;
        EXPECT_NE(html.find("not run: no GPU"), std::string::npos);
        EXPECT_EQ(j["correct"], 0);
        // Correct among those that ran: not "0/3 correct" as if the ReLU had failed.
        // And a task without a kernel was not run either (issue 51 item 4d).
        EXPECT_NE(r.err.find("kernelevo: 0 of 1 run correct (1 of 3 without a kernel; 1 of 3 not run: no GPU"),
                  std::string::npos) << r.err;
    } else {
        EXPECT_EQ(relu, "ok") << by["kb1_19_ReLU"].dump();
        EXPECT_GT(by["kb1_19_ReLU"]["reference_us"].get<double>(), 0) << "LibTorch eager, timed in the same run";
        EXPECT_DOUBLE_EQ(j["fast_p"]["0"].get<double>(), 1.0 / 3);
    }

    // The same command resumes: finished tasks are not validated again.
    auto again = kbtest::kernelevo({"bench", "--suite", suite.string(), "--out", out.string(), "--kernels", kernels.string(),
                                    "--timing-trials", "20"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("resuming the bench"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("[3/3] kb1_40_LayerNorm: done earlier (compile_error)"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("[2/3] kb1_1_Square_matrix_multiplication: done earlier (no kernel)"), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(read_file(out / "report.json"))["tasks"], 3);

    // Another suite into the same report directory is refused, not mixed in.
    auto other = kbtest::kernelevo({"bench", "--suite", imp.out.string(), "--out", out.string(), "--kernels", kernels.string()});
    EXPECT_EQ(other.exit_code, 2);
    EXPECT_NE(other.err.find("pass --fresh"), std::string::npos) << other.err;
}

// Without a GPU a search could only spend tokens: refused before the first LLM request.
TEST(Bench, SearchWithoutAGpuStopsBeforeAnyRequest) {
    if (kbtest::gpu().present) GTEST_SKIP() << "there is a GPU here";
    const auto& imp = kbtest::cpu_import();
    ASSERT_EQ(imp.report.value("imported", 0), 12) << imp.run.err;
    TempDir dir("kevo-bench-test");
    auto r = kbtest::kernelevo({"bench", "--suite", imp.out.string(), "--out", (dir.path() / "r").string(), "--model", "m",
                                "--llm-url", "http://127.0.0.1:9/v1"},
                               300);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("no usable GPU here"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--kernels"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("chat/completions"), std::string::npos) << "no request was sent: " << r.err;
}

TEST(Bench, BadSuiteIsExitTwo) {
    TempDir dir("kevo-bench-test");
    auto r = kbtest::kernelevo({"bench", "--suite", dir.path().string(), "--out", (dir.path() / "r").string(), "--kernels",
                                dir.path().string()},
                               120);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("no task folders (DIR/NAME/task.json)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kevo
