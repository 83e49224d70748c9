// `kernelevo bench` over the PyTorch baselines: fast_p and geomeans over each baseline among the tasks
// with its time; a baseline that was not run shows as "not run: <reason>" in the table, the JSON and the
// page (rendered in a real headless chromium), never as 0; and `bench --kernels` on this host writes
// the reasons its PyTorch gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/fs.h"
#include "common/process.h"
#include "sandbox/sandbox.h"

namespace kevo {
namespace {

bench::TaskResult task(const std::string& name, double speedup, double eager_us, double compile_us, double kernel_us) {
    bench::TaskResult r;
    r.name = name;
    r.status = "ok";
    r.done = true;
    r.speedup = speedup;
    r.kernel_us = kernel_us;
    r.reference_us = speedup * kernel_us;
    r.torch.precision = "pytorch";
    r.torch.torch_version = "2.11.0";
    r.torch.sets = {{0, "0", eager_us, compile_us}};
    for (const auto& k : baseline::kinds())
        if (r.torch.ran(k)) r.speedup_over[k] = r.torch.us(k) / kernel_us;
    return r;
}

bench::TaskResult not_run(const std::string& name, double speedup, const std::string& why) {
    bench::TaskResult r = task(name, speedup, -1, -1, 10);
    r.torch.sets.clear();
    r.speedup_over.clear();
    for (const auto& k : baseline::kinds()) r.torch.not_run[k] = why;
    return r;
}

std::vector<bench::TaskResult> suite() {
    // a: 2x over eager, 0.5x over compile; b: 4x over eager, 1.25x over compile; c: no baselines.
    return {task("a", 2.36, 200, 50, 100), task("b", 3.0, 80, 25, 20),
            not_run("c", 1.5, "the task has no PyTorch module (neither an imported KernelBench problem.py nor export_task's pytorch.json)")};
}

// An interrupted import leaves OUT/.NAME.install-*/task.json: never a task of the suite.
TEST(BenchSuite, SkipsHiddenFoldersSuchAsAnInterruptedImport) {
    TempDir dir;
    for (const char* name : {"b_task", "a_task", ".c_task.install-1234", ".hidden"}) {
        fs::create_directories(dir.path() / name);
        write_file_atomic(dir.path() / name / "task.json", "{}");
    }
    std::vector<fs::path> tasks = bench::suite_tasks(dir.path());
    ASSERT_EQ(tasks.size(), 2u);
    EXPECT_EQ(tasks[0], dir.path() / "a_task" / "task.json");
    EXPECT_EQ(tasks[1], dir.path() / "b_task" / "task.json");
}

TEST(BenchBaselines, FastPAndGeomeanOverEachBaselineAmongTheTasksWithItsTime) {
    bench::Summary s = bench::summarize(suite());
    ASSERT_EQ(s.baselines.size(), 3u);  // eager, compile, aoti (baseline::table())
    EXPECT_EQ(s.baselines[2].kind, "aoti");
    EXPECT_EQ(s.baselines[2].measured, 0);
    const auto& eager = s.baselines[0];
    const auto& compile = s.baselines[1];
    EXPECT_EQ(eager.kind, "eager");
    EXPECT_EQ(compile.kind, "compile");
    EXPECT_EQ(compile.measured, 2);
    EXPECT_NEAR(eager.geomean_speedup, std::sqrt(2.0 * 4.0), 1e-12);
    EXPECT_NEAR(compile.geomean_speedup, std::sqrt(0.5 * 1.25), 1e-12);
    EXPECT_DOUBLE_EQ(compile.fast_p[1].second, 0.5);  // > 1x: b of a and b
    EXPECT_DOUBLE_EQ(eager.fast_p[3].second, 0.5);    // > 2x: b only (a is exactly 2x)
    EXPECT_EQ(s.precision, "pytorch");
}

TEST(BenchBaselines, ATaskWithoutBaselinesShowsWhyNotAZero) {
    bench::ReportInfo info{"suite", "kernels", "NVIDIA H200", "sm_90", "2026-12-04T15:00:00Z"};
    std::string md = bench::report_markdown(suite(), info);
    EXPECT_NE(md.find("| geomean speedup over torch.compile (Inductor, default mode), precision pytorch (correct tasks) | 0.791x |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| fast_1 over PyTorch eager, precision pytorch | 1.000 (2/2 tasks with its time) |"), std::string::npos) << md;
    EXPECT_NE(md.find("| PyTorch eager | speedup over eager | torch.compile (Inductor, default mode) | speedup over torch.compile |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| speedup over torch.compile | AOTInductor (torch.export + aoti_compile_and_package) | speedup over AOTInductor |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| a | ok | 2.360x | 100.0 us | 236.0 us | pytorch | 200.0 us | 2.000x | 50.0 us | 0.500x |"), std::string::npos) << md;
    EXPECT_NE(md.find("| c | ok | 1.500x | 10.0 us | 15.0 us | pytorch | not run: the task has no PyTorch module"), std::string::npos) << md;
    EXPECT_NE(md.find("pytorch.json) | not run |"), std::string::npos) << md;

    nlohmann::json j = bench::report_json(suite(), info);
    const auto& c = j["results"][2];
    EXPECT_TRUE(c["torch_compile_us"].is_null()) << c.dump();
    EXPECT_TRUE(c["speedup_over"]["compile"].is_null()) << c.dump();
    EXPECT_NE(c["torch"]["not_run"]["compile"].get<std::string>().find("no PyTorch module"), std::string::npos);
    EXPECT_EQ(j["over_baselines"]["compile"]["tasks_measured"], 2);

    // No task has a baseline: the summary says why (the first task's reason), not 0x.
    std::string none = bench::report_markdown({not_run("c", 1.5, "PyTorch 1.13.1 has no torch.compile (needs PyTorch 2)")}, info);
    EXPECT_NE(none.find("| speedup over torch.compile (Inductor, default mode), precision pytorch | not run: PyTorch 1.13.1 has no "
                        "torch.compile (needs PyTorch 2) |"),
              std::string::npos)
        << none;
    EXPECT_EQ(none.find("0.000x"), std::string::npos) << none;
}

std::string chromium_binary() {
    for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
        if (::access(p, X_OK) == 0) return p;
    return {};
}

TEST(BenchBaselines, ThePageRendersTheBaselineColumnsInABrowser) {
    if (chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    TempDir dir("kevo-bench-page");
    bench::ReportInfo info{"suite", "kernels", "NVIDIA H200", "sm_90", "2026-12-04T15:00:00Z"};
    write_file_atomic(dir.path() / "report.html", bench::report_html(suite(), info));
    ProcessOptions o;
    o.argv = {chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--user-data-dir=" + (dir.path() / "profile").string(), "--dump-dom", "file://" + (dir.path() / "report.html").string()};
    o.timeout_s = 120;
    ProcessResult r = run_process(o);
    ASSERT_TRUE(r.ok()) << r.describe() << r.err;
    const std::string& dom = r.out;
    for (const char* s : {"<th>torch.compile (Inductor, default mode)</th>", "<th>speedup over torch.compile</th>", "<th>PyTorch eager</th>",
                          "<td class=\"n\">0.500x</td>", "<td>not run: the task has no PyTorch module",
                          "geomean speedup over torch.compile (Inductor, default mode), precision pytorch (correct tasks)"})
        EXPECT_NE(dom.find(s), std::string::npos) << s << "\n" << dom.substr(0, 4000);
}

// `bench --kernels` on this host: the PyTorch baselines are measured (in the sandbox) and where this
// PyTorch cannot (no CUDA, no torch.compile) the reports say why.
TEST(BenchBaselines, BenchKernelsWritesTheReasonsThisHostsPyTorchGives) {
    if (!sandbox_layers().namespaces) GTEST_SKIP() << "no bubblewrap here";
    TempDir dir("kevo-bench-baselines");
    fs::path suite = dir.path() / "suite", kernels = dir.path() / "kernels", out = dir.path() / "report";
    fs::path fixture = fs::path(KEVO_TEST_DATA_DIR) / "baseline_relu_add";
    fs::create_directories(suite / "relu_add");
    fs::copy(fixture, suite / "relu_add", fs::copy_options::recursive);
    write_file_atomic(kernels / "relu_add.cu", read_file(fixture / "kernel.cu"));
    ProcessOptions po;
    po.argv = {KEVO_EXE, "bench", "--suite", suite.string(), "--out", out.string(), "--kernels", kernels.string(), "--timing-trials", "20",
               "--aoti"};
    po.timeout_s = 1200;
    ProcessResult p = run_process(po);
    ASSERT_TRUE(p.started);
    auto j = nlohmann::json::parse(read_file(out / "report.json"));
    const auto& t = j["results"][0];
    const std::string md = read_file(out / "report.md");
    if (t["status"] == "no_device") {  // a CPU host: no time for either, each with its reason
        for (const char* k : {"eager", "compile", "aoti"}) {
            EXPECT_TRUE(t["torch"][std::string(k) + "_us"].is_null()) << t.dump(2);
            EXPECT_FALSE(t["torch"]["not_run"][k].get<std::string>().empty()) << t.dump(2);
            EXPECT_EQ(j["over_baselines"][k]["tasks_measured"], 0);
        }
        EXPECT_NE(t["torch"]["not_run"]["eager"].get<std::string>().find("no CUDA device for PyTorch"), std::string::npos) << t.dump(2);
        EXPECT_NE(md.find("| not run: no CUDA device for PyTorch"), std::string::npos) << md;
        EXPECT_NE(p.err.find("over torch.compile (Inductor, default mode) (precision pytorch): not run: "), std::string::npos) << p.err;
        // --aoti asked for it: the reason is this PyTorch's, not "not asked for".
        EXPECT_EQ(t["torch"]["not_run"]["aoti"].get<std::string>().find("not asked for"), std::string::npos) << t.dump(2);
        EXPECT_NE(md.find("| speedup over AOTInductor (torch.export + aoti_compile_and_package), precision pytorch | not run: "),
                  std::string::npos)
            << md;
    } else {
        EXPECT_EQ(t["status"], "ok") << t.dump(2);
        EXPECT_GT(t["speedup_over"]["compile"].get<double>(), 0) << t.dump(2);
    }
}

}  // namespace
}  // namespace kevo
