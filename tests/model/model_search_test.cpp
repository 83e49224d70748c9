// `kernelevo search --model-dir` through the real binary, on a hand-made model folder (two region
// tasks copied from tests/data/gelu_bias). Without a GPU each region's search stops at its GPU check
// (exit 2): the bookkeeping (budgets, logs, summary, resume, exit code) is tested on that; on a GPU
// host, ModelSearchGpu searches both regions from a recorded transcript.
//   ctest --test-dir BUILD -R model_search_test --output-on-failure
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <csignal>
#include <thread>

#include "../llm/loopback_server.h"
#include "common/fs.h"
#include "common/process.h"
#include "llm/llm.h"
#include "model_folder.h"
#include "task/task.h"
#include "validate/validate.h"

using namespace kevo;
using namespace kevo::model_test;
using nlohmann::json;

namespace {

const std::string kExe = KEVO_EXE;

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

ProcessResult kernelevo(std::vector<std::string> args, double timeout = 120) {
    ProcessOptions o;
    o.argv = {kExe};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = timeout;
    return run_process(o);
}

bool have_gpu() {
    static const bool known = [] {
        Validator v(load_task(kData / "gelu_bias" / "task.json"), ValidateOptions{});
        return v.device().present;
    }();
    return known;
}

std::vector<std::string> search(const fs::path& dir, std::vector<std::string> more) {
    std::vector<std::string> a = {"search", "--model-dir", dir.string()};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

TEST(ModelSearch, DryRunPrintsTheBudgetsBySharesLargestFirst) {
    TempDir dir;
    make_model_folder(dir.path());
    auto r = kernelevo(search(dir.path(), {"--max-time", "20m", "--dry-run", "--model", "m"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Blk: 2 of 2 region search(es) to run, 1200 s split by time share, 2 at once")) << r.out;
    // 0.745 and 0.25 of the model, normalised over the two searched: 898 s and 302 s.
    const size_t b = r.out.find("h.0.b   74.5%   898 s"), a = r.out.find("h.0.a   25.0%   302 s");
    EXPECT_NE(b, std::string::npos) << r.out;
    EXPECT_NE(a, std::string::npos) << r.out;
    EXPECT_LT(b, a) << r.out;
    EXPECT_FALSE(contains(r.out, "h.0.view")) << r.out;  // not searched
    EXPECT_TRUE(contains(r.out, "over the LibTorch reference (precision pytorch)")) << r.out;
    EXPECT_FALSE(fs::exists(dir.path() / "search"));
}

// Issue 49: where plan.json timed torch.compile, the budget follows the gain still possible over it (h.0.a: 0.8
// of 1 ms, though its eager share is the smaller) and each region's fitness is its speedup over torch.compile,
// unless the options say another; a plan without compiled times keeps the eager shares (the test above).
TEST(ModelSearch, ThePlansTorchCompileTimesSetTheBudgetsAndTheFitness) {
    TempDir dir;
    make_model_folder(dir.path(), plan_with_compile_times());
    auto r = kernelevo(search(dir.path(), {"--max-time", "1000s", "--dry-run", "--model", "m"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "1000 s split by the gain still possible over torch.compile")) << r.out;
    const size_t a = r.out.find("h.0.a   25.0%   800 s"), b = r.out.find("h.0.b   74.5%   200 s");
    EXPECT_NE(a, std::string::npos) << r.out;
    EXPECT_LT(a, b) << r.out;
    if (have_gpu()) return;  // (the searches below stop at their GPU check, having written their commands)
    kernelevo(search(dir.path(), {"--max-time", "10m", "--model", "m", "--llm-url", "http://127.0.0.1:9/v1"}));
    EXPECT_TRUE(contains(read_file(dir.path() / "search" / "blk_a.cmd"), " --fitness-baseline compile"));
    kernelevo(search(dir.path(), {"--max-time", "10m", "--model", "m", "--llm-url", "http://127.0.0.1:9/v1", "--fresh",
                                  "--fitness-baseline", "eager"}));
    const std::string cmd = read_file(dir.path() / "search" / "blk_a.cmd");
    EXPECT_TRUE(contains(cmd, " --fitness-baseline eager")) << cmd;
    EXPECT_FALSE(contains(cmd, "compile")) << cmd;
}

// A task with repeats is budgeted and shown by its share with theirs; --region of a repeat searches
// the region whose kernel it runs.
TEST(ModelSearch, ATaskWithRepeatsIsBudgetedByTheirShareAndARepeatNamesIt) {
    TempDir dir;
    nlohmann::json plan = plan_with_repeat();
    make_model_folder(dir.path(), plan);
    auto r = kernelevo(search(dir.path(), {"--max-time", "20m", "--dry-run"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "h.0.a (+1)  25.0%   302 s")) << r.out;
    EXPECT_TRUE(contains(r.out, "(+N): N regions repeat the region (the same computation) and run its kernel too; its share includes theirs"))
        << r.out;
    EXPECT_FALSE(contains(r.out, "h.1.a")) << r.out;  // no search of its own
    auto one = kernelevo(search(dir.path(), {"--max-time", "20m", "--dry-run", "--region", "h.1.a"}));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_TRUE(contains(one.err, "region h.1.a is a repeat of h.0.a (it runs that region's kernel): searching h.0.a")) << one.err;
    EXPECT_TRUE(contains(one.out, "h.0.a (+1)  25.0%   1200 s")) << one.out;
}

// --region picks regions by name or task name; the budget is theirs alone; a wrong name lists the rest.
TEST(ModelSearch, RegionNamesTheRegionsToSearchAndTheBudgetIsTheirs) {
    TempDir dir;
    make_model_folder(dir.path());
    auto r = kernelevo(search(dir.path(), {"--max-time", "20m", "--dry-run", "--region", "h.0.a"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Blk: 1 of 1 region search(es) to run, 1200 s")) << r.out;
    EXPECT_TRUE(contains(r.out, "h.0.a   25.0%   1200 s")) << r.out;
    EXPECT_FALSE(contains(r.out, "h.0.b")) << r.out;
    auto bad = kernelevo(search(dir.path(), {"--max-time", "20m", "--dry-run", "--region", "h.0.zz"}));
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_TRUE(contains(bad.err, "--region h.0.zz: ")) << bad.err;
    EXPECT_TRUE(contains(bad.err, "(h.0.a, h.0.b)") || contains(bad.err, "(h.0.b, h.0.a)")) << bad.err;
    auto task_only = kernelevo({"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out", "k", "--region", "x"});
    EXPECT_EQ(task_only.exit_code, 2);
    EXPECT_TRUE(contains(task_only.err, "--region is for --model-dir only")) << task_only.err;
}

TEST(ModelSearch, BadUsageIsOneLineAndExitTwo) {
    TempDir dir;
    make_model_folder(dir.path());
    const std::string task = (kData / "gelu_bias" / "task.json").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {search(dir.path(), {"--model", "m"}), "--model-dir needs --max-time"},
        {search(dir.path(), {"--max-time", "1h", "--task", task}), "--task excludes --model-dir"},
        {search(dir.path(), {"--max-time", "1h", "--state", "x.db"}), "each region's state is DIR/search/"},
        {search(dir.path(), {"--max-time", "1h", "--initial", task}), "--initial: a seed kernel is for one task"},
        {search(dir.path(), {"--max-time", "0"}), "at least one second"},
        {search(dir.path() / "none", {"--max-time", "1h"}), "is not a folder"},
        {{"search", "--task", task, "--out", "k", "--dry-run"}, "--dry-run is for --model-dir only"},
        {{"search", "--max-time", "1h"}, "give --task FILE (one task) or --model-dir DIR"},
    };
    for (const auto& [args, message] : cases) {
        auto r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 2) << message << ": " << r.err;
        EXPECT_TRUE(contains(r.err, message)) << r.err;
    }
    json plan = good_plan();
    plan["regions"][2]["task"] = "../elsewhere";
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    auto r = kernelevo(search(dir.path(), {"--max-time", "1h"}));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "plan.json: regions[2] (h.0.b): task \"../elsewhere\" leaves the model folder")) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "search"));
}

// No GPU: each region's search stops at its GPU check, the model search says so per region.
TEST(ModelSearch, EveryRegionRunsAsASearchOfItsOwnAndTheSummarySaysHowItEnded) {
    if (have_gpu()) GTEST_SKIP() << "this machine has a GPU (ModelSearchGpu covers it)";
    TempDir dir;
    make_model_folder(dir.path());
    auto r = kernelevo(search(dir.path(), {"--max-time", "10m", "--model", "m", "--llm-url", "http://127.0.0.1:9/v1",
                                           "--islands", "3", "--no-profile", "--json", "--budget-usd", "2",
                                           "--budget-tokens", "100000"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;  // a setup error
    EXPECT_TRUE(contains(r.err, "[1/2] h.0.b: searching, budget 449 s")) << r.err;
    // Issue 51 item 4c: no GPU is every region's error: said once (both regions ran at once here).
    const std::string error = "validates every candidate on the local GPU";
    ASSERT_TRUE(contains(r.err, error)) << r.err;  // the region's own error, once
    EXPECT_EQ(r.err.find(error), r.err.rfind(error)) << r.err;
    EXPECT_FALSE(contains(r.err, "failed (exit code 2)")) << r.err;
    EXPECT_TRUE(contains(r.err, "every region's search stops on it: said once; 0 of 2 region search(es) not started"))
        << r.err;
    json out = json::parse(r.out);
    EXPECT_EQ(out["exit_code"], 2);
    EXPECT_EQ(out["model"], "Blk");
    EXPECT_EQ(out["end_to_end"]["eager_ms"], 4.0);  // (no region has a kernel: the model as it was)
    EXPECT_EQ(out["end_to_end"]["over_eager"], 1.0);
    json s = json::parse(read_file(dir.path() / "search" / "summary.json"));
    EXPECT_EQ(s["format"], "kernelevo-model-search/1");
    ASSERT_EQ(s["regions"].size(), 2u);
    EXPECT_EQ(s["regions"][0]["task_name"], "blk_b");
    EXPECT_EQ(s["regions"][0]["status"], "failed");
    EXPECT_EQ(s["regions"][0]["exit_code"], 2);
    EXPECT_EQ(s["regions"][0]["budget_s"], 449);
    EXPECT_EQ(s["regions"][1]["budget_s"], 151);
    EXPECT_EQ(s["regions"][1]["status"], "failed");
    EXPECT_TRUE(contains(read_file(dir.path() / "search" / "blk_b.log"), "validates every candidate on the local GPU"));
    // The region's command: its task, the model's cache and state, its budget, the options passed on.
    const std::string cmd = read_file(dir.path() / "search" / "blk_b.cmd");
    const std::string task_b = (dir.path() / "regions/blk_b/task.json").string();
    for (const std::string& part : std::vector<std::string>{"search --task " + task_b,
                                    "--out " + (dir.path() / "cache").string(),
                                    "--state " + (dir.path() / "search/blk_b.db").string(), "--max-time 449",
                                    "--islands 3", "--no-profile", "--model m",
                                    // the money and tokens split by the same shares (74.8744%)
                                    "--budget-usd 1.497488 ", "--budget-tokens 74874 "})
        EXPECT_TRUE(contains(cmd, part)) << part << " not in " << cmd;
    EXPECT_FALSE(contains(cmd, "--model-dir")) << cmd;
    EXPECT_FALSE(contains(cmd, "--budget-usd 2 ")) << cmd;
    EXPECT_FALSE(contains(cmd, "--fitness-baseline")) << cmd;  // no compiled times in the plan: over the reference
    // One at a time: the first region's setup error stops the model search before the second starts.
    r = kernelevo(search(dir.path(), {"--max-time", "10m", "--model", "m", "--llm-url", "http://127.0.0.1:9/v1",
                                      "--model-jobs", "1", "--fresh"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(contains(r.err, "[2/2]")) << r.err;
    EXPECT_TRUE(contains(r.err, "said once; 1 of 2 region search(es) not started")) << r.err;
    EXPECT_TRUE(r.out.empty()) << "no table of failures: " << r.out;
    s = json::parse(read_file(dir.path() / "search" / "summary.json"));
    EXPECT_EQ(s["regions"][1]["status"], "pending");
}

// A region done before (summary.json says so and its state is there) is skipped; the others run,
// with the whole --max-time split over them.
TEST(ModelSearch, RunningItAgainSkipsTheRegionsDoneAndSplitsTheTimeOverTheRest) {
    if (have_gpu()) GTEST_SKIP() << "this machine has a GPU (ModelSearchGpu covers it)";
    TempDir dir;
    make_model_folder(dir.path());
    json done = {{"format", "kernelevo-model-search/1"},
                 {"regions", {{{"name", "h.0.b"}, {"task_name", "blk_b"}, {"status", "done"}, {"budget_s", 900},
                               {"exit_code", 0}, {"best_speedup", 1.8}, {"state", "search/blk_b.db"},
                               {"log", "search/blk_b.log"}}}}};
    write_file_atomic(dir.path() / "search" / "summary.json", done.dump());
    write_file_atomic(dir.path() / "search" / "blk_b.db", "");  // (only its presence is asked)
    auto r = kernelevo(search(dir.path(), {"--max-time", "10m", "--model", "m"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "h.0.b: skipped: done in an earlier run (best 1.80x")) << r.err;
    EXPECT_TRUE(contains(r.err, "[1/1] h.0.a: searching, budget 600 s")) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "search" / "blk_b.log"));
    json s = json::parse(read_file(dir.path() / "search" / "summary.json"));
    EXPECT_EQ(s["regions"][0]["status"], "done");
    EXPECT_EQ(s["regions"][0]["best_speedup"], 1.8);
    EXPECT_EQ(s["regions"][1]["status"], "failed");
    EXPECT_TRUE(contains(r.err, "said once; 0 of 1 region search(es) not started")) << r.err;  // no GPU: setup
    r = kernelevo(search(dir.path(), {"--max-time", "10m", "--model", "m", "--dry-run"}));
    EXPECT_TRUE(contains(r.out, "h.0.b   74.5%   900 s      done     0     1.80x")) << r.out;

    // Without its state the region is searched again; --dry-run says so.
    fs::remove(dir.path() / "search" / "blk_b.db");
    write_file_atomic(dir.path() / "search" / "summary.json", done.dump());
    r = kernelevo(search(dir.path(), {"--generations", "2", "--dry-run"}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "2 of 2 region search(es) to run, each for the same generations")) << r.out;
}

// bench --model-dir: the suite is the regions' tasks, the report in DIR/bench unless --out says.
TEST(ModelBench, TheSuiteIsTheRegionsTasks) {
    TempDir dir;
    make_model_folder(dir.path());
    auto r = kernelevo({"bench", "--model-dir", dir.path().string(), "--kernels", (dir.path() / "cache").string(), "--no-baselines"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json report = json::parse(read_file(dir.path() / "bench" / "report.json"));
    EXPECT_EQ(report["suite"], (dir.path() / "regions").string());
    ASSERT_EQ(report["results"].size(), 2u) << report.dump(2);
    EXPECT_EQ(report["results"][0]["name"], "blk_a");
    EXPECT_EQ(report["results"][1]["name"], "blk_b");
    // Issue 51 item 4d: no cache yet: each region has no kernel (nothing run, its speedup null), not
    // "run, not correct" with a speedup of 0.
    for (const auto& res : report["results"]) {
        EXPECT_EQ(res["status"], "missing") << res.dump();
        EXPECT_TRUE(res["speedup"].is_null()) << res.dump();
    }
    EXPECT_TRUE(contains(r.err, "kernelevo: 0 of 0 run correct (2 of 2 without a kernel)")) << r.err;
    EXPECT_TRUE(contains(r.err, "[1/2] blk_a: no kernel")) << r.err;
    const std::string md = read_file(dir.path() / "bench" / "report.md");
    EXPECT_TRUE(contains(md, "| blk_a | no kernel | - |")) << md;
    EXPECT_FALSE(contains(md, "run, none correct")) << md;
    EXPECT_TRUE(contains(read_file(dir.path() / "bench" / "report.html"), "no task has a kernel (2 without a kernel)"));
    r = kernelevo({"bench", "--model-dir", dir.path().string(), "--suite", dir.path().string(), "--out", "x"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "--suite excludes --model-dir")) << r.err;
    fs::remove_all(dir.path() / "regions" / "blk_a");
    r = kernelevo({"bench", "--model-dir", dir.path().string(), "--kernels", (dir.path() / "cache").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "plan.json: regions[0] (h.0.a): task folder")) << r.err;
}

// On a GPU host: both regions searched from one recorded transcript (the same kernel serves both),
// then the same command again skips both.
TEST(ModelSearchGpu, TwoRegionsFromAReplayedTranscriptThenNothingLeft) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    TempDir dir;
    const fs::path model = dir.path() / "model";
    make_model_folder(model);
    {
        llm::Transcript t(dir.path() / "t.jsonl");
        llm::ChatRequest req;
        req.model = "replay-model";
        req.messages = {{"user", "seed"}};
        llm::ChatResponse resp;
        resp.content = "```cuda\n" + read_file(kData / "gelu_bias" / "kernels" / "good.cu") + "```\n";
        resp.finish_reason = "stop";
        resp.model = "replay-model";
        t.record(req, &resp, nullptr, 0.1);
    }
    const std::vector<std::string> args =
        search(model, {"--replay", (dir.path() / "t.jsonl").string(), "--llm-replay-in-order", "--islands", "1", "--children",
                       "1", "--generations", "0", "--no-profile", "--no-baselines"});
    auto r = kernelevo(args, 900);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json s = json::parse(read_file(model / "search" / "summary.json"));
    for (const auto& g : s["regions"]) {
        EXPECT_EQ(g["status"], "done") << s.dump(2);
        EXPECT_GT(g["best_speedup"].get<double>(), 0) << s.dump(2);
        EXPECT_TRUE(fs::exists(model / g["state"].get<std::string>()));
        EXPECT_TRUE(fs::exists(model / "cache" / g["task_name"].get<std::string>()));
    }
    EXPECT_TRUE(contains(r.out, "over the LibTorch reference (precision pytorch)")) << r.out;
    r = kernelevo(args, 300);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "h.0.a: skipped: done in an earlier run")) << r.err;
    EXPECT_TRUE(contains(r.err, "h.0.b: skipped: done in an earlier run")) << r.err;
}

// On a GPU host: Ctrl-C (twice: the regions' LLM requests hang) stops both regions' searches, the
// summary says "stopped" and the exit code is 1; the same command again resumes them.
TEST(ModelSearchGpu, CtrlCStopsEveryRegionAndTheSameCommandResumes) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    TempDir dir;
    make_model_folder(dir.path());
    llm::test::LoopbackServer server;
    llm::test::ScriptedReply hang;
    hang.delay_s = 30;
    hang.body = R"({"choices": [{"message": {"content": "no code"}, "finish_reason": "stop"}]})";
    server.set_default(hang);
    ProcessOptions o;
    o.argv = {kExe, "search", "--model-dir", dir.path().string(), "--llm-url", server.base_url(), "--model", "m",
              "--max-time", "20m", "--islands", "1", "--children", "1", "--no-profile", "--no-baselines"};
    o.env = {{"KERNELEVO_API_KEY", "sk-test"}};
    Subprocess parent(o);
    while (server.requests().size() < 2 && parent.alive()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(server.requests().size(), 2u) << parent.err_tail(4000);  // both regions are waiting for the LLM
    ::kill(parent.pid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ::kill(parent.pid(), SIGINT);  // the second aborts the LLM requests
    std::string line;
    while (parent.read_line(line, 120) == Subprocess::Read::line) {
    }
    while (parent.alive()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(parent.describe_exit(), "exit code 1") << parent.err_tail(4000);
    json s = json::parse(read_file(dir.path() / "search" / "summary.json"));
    for (const auto& g : s["regions"]) {
        EXPECT_EQ(g["status"], "stopped") << s.dump(2);
        EXPECT_TRUE(fs::exists(dir.path() / g["state"].get<std::string>())) << s.dump(2);
    }
    // Again: both are resumed from their state (not skipped), each says so in its log.
    server.set_default({});
    auto r = kernelevo(search(dir.path(), {"--llm-url", server.base_url(), "--model", "m", "--max-time", "20",
                                           "--islands", "1", "--children", "1", "--no-profile", "--no-baselines"}),
                       300);
    EXPECT_FALSE(contains(r.err, "skipped")) << r.err;
    EXPECT_TRUE(contains(read_file(dir.path() / "search" / "blk_a.log"), "resuming the run in")) << r.err;
}

}  // namespace
