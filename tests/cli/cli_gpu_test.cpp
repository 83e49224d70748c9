// The kernelevo command line on a GPU host (each test skips without a CUDA device): `search` through
// the real binary, from a recorded transcript or against a loopback LLM.
//   ctest --test-dir BUILD -R cli_gpu_test --output-on-failure
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include <nlohmann/json.hpp>

#include "../llm/loopback_server.h"
#include "cli_run.h"
#include "common/fs.h"
#include "llm/llm.h"
#include "task/task.h"
#include "validate/validate.h"

using namespace kevo;
using nlohmann::json;

namespace {

using namespace kevo::clitest;

// ---- search --json -------------------------------------------------------------------------------

// On a GPU host: a one-generation search from a recorded transcript prints its summary as JSON.
TEST(CliSearchGpu, JsonSummary) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    TempDir dir;
    const std::string good = read_file(kData / "gelu_bias" / "kernels" / "good.cu");
    {
        llm::Transcript t(dir.path() / "t.jsonl");
        llm::ChatRequest req;
        req.model = "replay-model";
        req.messages = {{"user", "seed"}};
        llm::ChatResponse resp;
        resp.content = "```cuda\n" + good + "```\n";
        resp.finish_reason = "stop";
        resp.model = "replay-model";
        resp.usage.prompt_tokens = 100;
        resp.usage.completion_tokens = 50;
        t.record(req, &resp, nullptr, 0.1);
    }
    const fs::path out = dir.path() / "kernels";
    auto r = kernelevo({"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out", out.string(), "--state",
                        (dir.path() / "s.db").string(), "--replay", (dir.path() / "t.jsonl").string(), "--llm-replay-in-order",
                        "--islands", "1", "--children", "1", "--generations", "0", "--json", "--quiet"},
                       {}, 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["task"], "gelu_bias");
    EXPECT_EQ(j["stop_reason"], "generations");
    EXPECT_EQ(j["exit_code"], 0);
    ASSERT_TRUE(j["best"].is_object()) << j.dump(2);
    EXPECT_GT(j["best"]["speedup"].get<double>(), 0);
    EXPECT_TRUE(fs::exists(j["best"]["source"].get<std::string>()));
    EXPECT_EQ(j["candidates"]["ok"], 1);
    EXPECT_FALSE(contains(r.err, "gen 0 |")) << r.err;  // --quiet: no progress lines
}

// On a GPU host: an LLM URL nothing listens on stops the search within seconds, as a setup error.
TEST(CliSearchGpu, AnUnreachableLlmStopsTheSearchAtOnceWithExitTwo) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    std::string url;
    {
        llm::test::LoopbackServer closed;  // a port that was just free
        url = closed.base_url();
    }
    TempDir dir;
    auto t0 = std::chrono::steady_clock::now();
    auto r = kernelevo({"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out",
                        (dir.path() / "kernels").string(), "--state", (dir.path() / "s.db").string(), "--llm-url", url,
                        "--model", "m", "--json"},
                       {}, 600);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);  // no minutes of retries
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "not retried")) << r.err;
    EXPECT_TRUE(contains(r.err, "the LLM never answered")) << r.err;
    EXPECT_FALSE(contains(r.err, "retrying in")) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["exit_code"], 2);
    EXPECT_EQ(j["llm"]["requests"], 0);
}

// On a GPU host: an architecture the local GPU cannot run is a setup error before any request.
TEST(CliSearchGpu, AnArchitectureTheLocalGpuCannotRunExitsTwoBeforeAnyRequest) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    Validator v(load_task(kData / "gelu_bias" / "task.json"), ValidateOptions{});
    const std::string other = v.device().arch() == "sm_80" ? "sm_90" : "sm_80";
    llm::test::LoopbackServer server;
    TempDir dir;
    auto r = kernelevo({"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out",
                        (dir.path() / "kernels").string(), "--state", (dir.path() / "s.db").string(), "--llm-url",
                        server.base_url(), "--model", "m", "--arch", other});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "cannot run " + other + " kernels")) << r.err;
    EXPECT_TRUE(server.requests().empty());
    EXPECT_FALSE(fs::exists(dir.path() / "s.db"));
}

// On a GPU host: `validate --repeat` validates one kernel several times in one run, as a search
// does: a fresh candidate process each time, the reference timed on the first and reused after.
TEST(CliValidateGpu, RepeatPrintsEachSpeedupAndTheirDeviation) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    auto r = kernelevo({"validate", "--task", (kData / "gelu_bias" / "task.json").string(), "--kernel",
                        (kData / "gelu_bias" / "kernels" / "good.cu").string(), "--repeat", "3", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    json j = json::parse(r.out);
    ASSERT_EQ(j["runs"].size(), 3u);
    for (const auto& run : j["runs"]) {
        EXPECT_EQ(run["status"], "ok");
        EXPECT_DOUBLE_EQ(run["reference_us"].get<double>(), j["runs"][0]["reference_us"].get<double>());
        EXPECT_EQ(run["shapes"].size(), 2u);
    }
    double lo = 1e30, hi = 0;
    for (const auto& run : j["runs"]) lo = std::min(lo, run["speedup"].get<double>()), hi = std::max(hi, run["speedup"].get<double>());
    EXPECT_GT(lo, 0);
    EXPECT_LE(j["max_deviation"].get<double>(), (hi - lo) / lo + 1e-12);
    EXPECT_GE(j["median_speedup"].get<double>(), lo);
    EXPECT_LE(j["median_speedup"].get<double>(), hi);
    std::cout << "repeatability (3 runs): max deviation " << j["max_deviation"].get<double>() * 100 << "%\n";
}

}  // namespace
