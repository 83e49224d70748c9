// A short real search on the GPU: `kernelevo search` with a replayed LLM transcript that feeds real
// CUDA kernels (a seed that does not compile, a vectorized kernel with wrong math, their fixes)
// through the real validator, for the gelu_bias task. Skips without a CUDA device.
//
//   ctest --test-dir BUILD -R SearchGpu --output-on-failure
#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "common/fs.h"
#include "common/process.h"
#include "llm/llm.h"
#include "store/store.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo {
namespace {

const fs::path kData = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias";
const fs::path kKernels = fs::path(KEVO_SOURCE_DIR) / "tests" / "evolve" / "gpu";

const DeviceInfo& device() {
    static DeviceInfo d = [] {
        Validator v(load_task(kData / "task.json"), ValidateOptions{});
        return v.device();
    }();
    return d;
}

#define REQUIRE_GPU()                                                                   \
    do {                                                                                \
        if (!device().present) GTEST_SKIP() << "no CUDA device: " << device().error;    \
    } while (0)

std::string vec4(int threads, int blocks_per_sm, const char* half = "0.5f") {
    std::string s = read_file(kKernels / "vec4.cu.in");
    s = std::regex_replace(s, std::regex("\\bTHREADS\\b"), std::to_string(threads));
    s = std::regex_replace(s, std::regex("\\bBLOCKS_PER_SM\\b"), std::to_string(blocks_per_sm));
    return std::regex_replace(s, std::regex("\\bHALF\\b"), half);
}

// A transcript whose n-th exchange answers the n-th request (replayed with --llm-replay-in-order).
void write_transcript(const fs::path& path, const std::vector<std::string>& kernels) {
    llm::Transcript t(path);
    for (size_t i = 0; i < kernels.size(); ++i) {
        llm::ChatRequest req;
        req.model = "replay-model";
        req.messages = {{"user", "request " + std::to_string(i)}};
        llm::ChatResponse resp;
        resp.content = "Here is the kernel.\n\n```cuda\n" + kernels[i] + "```\n";
        resp.finish_reason = "stop";
        resp.model = "replay-model";
        resp.usage.prompt_tokens = 3000;
        resp.usage.completion_tokens = 800;
        resp.usage.cost_usd = 0.002;
        resp.usage.cost_known = true;
        t.record(req, &resp, nullptr, 0.1);
    }
}

ProcessResult kernelevo(std::vector<std::string> args) {
    ProcessOptions o;
    o.argv = {KEVO_EXE};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = 540;
    return run_process(o);
}

TEST(SearchGpu, RepairsAndFindsAFasterKernel) {
    REQUIRE_GPU();
    TempDir dir;
    write_transcript(dir.path() / "transcript.jsonl",
                     {read_file(kKernels / "seed_broken.cu"),  // g0 seed: compile error
                      read_file(kKernels / "seed_fixed.cu"),   //   repair 1: correct
                      vec4(256, 32, "0.25f"),                  // g1 mutation: wrong math (mismatch)
                      vec4(256, 32),                           //   repair 1: correct, vectorized
                      vec4(512, 16),                           // g2 mutation
                      vec4(128, 64)});                         // g3 mutation
    fs::path out = dir.path() / "kernels", state = dir.path() / "state.db";
    ProcessResult r = kernelevo({"search", "--task", (kData / "task.json").string(), "--out", out.string(), "--state",
                                 state.string(), "--replay", (dir.path() / "transcript.jsonl").string(),
                                 "--llm-replay-in-order", "--islands", "1", "--children", "1", "--jobs", "1",
                                 "--generations", "3", "--mode", "full", "--seed", "1", "--timing-trials", "50"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;

    auto store = store::open_store(state.string());
    auto status = [&](const std::string& key) {
        auto p = store->find_program(key);
        return p ? p->status + ": " + p->feedback.substr(0, 300) : "missing";
    };
    EXPECT_EQ(status("g0.seed.a0").rfind("compile_error", 0), 0u) << status("g0.seed.a0");
    EXPECT_EQ(status("g0.seed.a1").rfind("ok", 0), 0u) << status("g0.seed.a1");
    EXPECT_EQ(status("g1.i0.c0.a0").rfind("mismatch", 0), 0u) << status("g1.i0.c0.a0");
    EXPECT_EQ(status("g1.i0.c0.a1").rfind("ok", 0), 0u) << status("g1.i0.c0.a1");
    EXPECT_EQ(store->spent().calls, 6);

    // The best kernel and its metadata, in the cache layout.
    std::string arch = device().arch();
    fs::path cu = out / "gelu_bias" / (arch + ".cu"), meta = out / "gelu_bias" / (arch + ".json");
    ASSERT_TRUE(fs::exists(cu)) << r.err;
    ASSERT_TRUE(fs::exists(meta));
    auto j = nlohmann::json::parse(read_file(meta));
    EXPECT_EQ(j.value("origin", ""), "search");
    EXPECT_GT(j.value("speedup", 0.0), 1.0) << j.dump(2);
    EXPECT_EQ(j.value("model", ""), "replay-model");
    EXPECT_EQ(j.value("prompt_tokens", 0), 6 * 3000);
    std::cout << "best speedup: " << j.value("speedup", 0.0) << "x\n";

    ProcessResult rep = kernelevo({"report", "--state", state.string(), "--plot", (dir.path() / "run.svg").string()});
    EXPECT_EQ(rep.exit_code, 0) << rep.err;
    EXPECT_NE(rep.out.find("Best speedup by generation"), std::string::npos) << rep.out;
    EXPECT_TRUE(fs::exists(dir.path() / "run.svg"));
}

// With instant LLM replies the loop keeps the GPU busy: at least 10 candidates a minute.
TEST(SearchGpu, ValidatesAtLeastTenCandidatesPerMinute) {
    REQUIRE_GPU();
    TempDir dir;
    std::vector<std::string> kernels = {read_file(kKernels / "seed_fixed.cu")};
    for (int threads : {128, 256, 512, 1024})
        for (int blocks : {4, 8, 16, 32}) kernels.push_back(vec4(threads, blocks));
    write_transcript(dir.path() / "transcript.jsonl", kernels);  // 17 replies: a seed and 16 distinct children
    fs::path state = dir.path() / "state.db";
    auto start = std::chrono::steady_clock::now();
    ProcessResult r = kernelevo({"search", "--task", (kData / "task.json").string(), "--out",
                                 (dir.path() / "kernels").string(), "--state", state.string(), "--replay",
                                 (dir.path() / "transcript.jsonl").string(), "--llm-replay-in-order", "--islands", "4",
                                 "--children", "2", "--generations", "2", "--mode", "full"});
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    auto store = store::open_store(state.string());
    auto programs = store->programs();
    int evaluated = 0;
    double first = 1e300, last = 0;
    for (const auto& p : programs) {
        if (p.status == "duplicate" || p.status == "no_code") continue;
        ++evaluated;
        first = std::min(first, p.created);
        last = std::max(last, p.created);
    }
    EXPECT_EQ(evaluated, 17);
    double per_minute_wall = evaluated / wall * 60;
    std::cout << "candidates validated: " << evaluated << " in " << wall << " s (" << per_minute_wall
              << " per minute, tool start-up and reference set-up included)\n";
    EXPECT_GE(per_minute_wall, 10.0);
}

}  // namespace
}  // namespace kevo
