// Every request counts (issue 36): a verdict outside the kernel is evaluated again by the search
// itself, a duplicate is dropped, and only a fault of the kernel becomes a repair request, with
// its error. The model is a real HTTP server on loopback answering OpenAI-compatible replies in
// order (HttpProvider, the client `kernelevo search` uses); the GPU is the scripted evaluator.
#include <gtest/gtest.h>

#include <map>

#include "common/fs.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "evolve/search_slot.h"
#include "evolve/waste.h"
#include "llm/llm.h"
#include "loopback_server.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

using llm::test::chat_body;
using llm::test::LoopbackServer;
using testing::kernel_reply;
using testing::ScriptedEvaluator;

// The scripted evaluator, except that a source marked BUSY=<n> is not judged (the GPU's memory
// taken by other processes, as validate/ reports it) on its first n runs. Every run holds the GPU
// for half a second, as the validator reports it.
class BusyGpu : public ScriptedEvaluator {
public:
    Evaluation run(const CompileResult& compiled) override {
        Evaluation e = ScriptedEvaluator::run(compiled);
        e.gpu_s = 0.5;
        const std::string source = runs().back();
        const size_t at = source.find("BUSY=");
        if (at == std::string::npos || busy_runs_[source]++ >= std::stoi(source.substr(at + 5))) return e;
        Evaluation busy;
        busy.status = Status::rejected;
        busy.outside_kernel = true;
        busy.gpu_s = 0.5;
        busy.feedback = "not judged: the validator could not measure this kernel reliably (the GPU's memory was taken by "
                        "other processes when the judge allocated its buffers); this says nothing about the kernel, which "
                        "may be sent again unchanged";
        busy.details = {{"status", "rejected"}};
        return busy;
    }

private:
    std::map<std::string, int> busy_runs_;
};

class WasteTest : public ::testing::Test {
protected:
    // Runs a search whose model answers `replies` in order, one request at a time.
    SearchResult search(const std::vector<std::string>& replies, SearchConfig cfg) {
        for (const std::string& r : replies) server.push({200, {}, chat_body(r, "stop", 1000, 200, 0.01)});
        llm::HttpConfig http;
        http.base_url = server.base_url();
        http.max_attempts = 1;
        llm::HttpProvider provider(http);
        cfg.evolution.outside_kernel_backoff_s = 0;
        cfg.requests.model = "test/model";
        Search s(task, cfg, Prompts(), provider, evaluator, *store);
        return s.run();
    }
    // The user prompts the server received, in order.
    std::vector<std::string> prompts() const {
        std::vector<std::string> out;
        for (const auto& r : server.requests())
            out.push_back(nlohmann::json::parse(r.body)["messages"].back()["content"].get<std::string>());
        return out;
    }
    static bool is_repair(const std::string& prompt) { return prompt.find("## Failing kernel") != std::string::npos; }

    TempDir dir{"kevo-test"};
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    std::unique_ptr<store::Store> store = store::open_store((dir.path() / "state.db").string());
    BusyGpu evaluator;
    LoopbackServer server;
};

SearchConfig one_slot(int generations, int repair_attempts) {
    SearchConfig cfg;
    cfg.structure.islands = 1;
    cfg.structure.children = 1;
    cfg.evolution.jobs = 1;
    cfg.evolution.generations = generations;
    cfg.evolution.repair_attempts = repair_attempts;
    cfg.evolution.tune_evals = 0;
    cfg.structure.seed = 5;
    cfg.evolution.mode = "full";
    return cfg;
}

// Not judged twice, then judged: the search runs the candidate three times and asks the model
// nothing about it.
TEST_F(WasteTest, ACandidateNotJudgedIsEvaluatedAgainWithoutARequest) {
    SearchResult res = search({kernel_reply(1, 1.5, "BUSY=2")}, one_slot(0, 3));
    EXPECT_EQ(server.requests().size(), 1u) << "a request was spent on a candidate that was not judged";
    for (const std::string& p : prompts()) EXPECT_FALSE(is_repair(p)) << p;
    EXPECT_EQ(evaluator.runs().size(), 3u);
    auto seed = store->find_program("g0.seed.a0");
    ASSERT_TRUE(seed);
    EXPECT_EQ(seed->status, store::ProgramStatus::ok);
    EXPECT_EQ(seed->details.value("runs", 0), 3);
    EXPECT_DOUBLE_EQ(seed->details.value("gpu_s", 0.0), 1.5);
    EXPECT_FALSE(store->find_program("g0.seed.a1")) << "a repair attempt was made";
    ASSERT_TRUE(res.best);
    EXPECT_NEAR(res.best->speedup, 1.5, 1e-9);
    EXPECT_EQ(res.waste.requests, 0);
    EXPECT_EQ(res.progress.not_judged, 0);
}

// Never judged within the retries: recorded as not judged, no request spent, the search goes on.
TEST_F(WasteTest, ACandidateNeverJudgedIsRecordedAsNotJudgedAndTheSearchGoesOn) {
    SearchConfig cfg = one_slot(1, 3);
    cfg.evolution.outside_kernel_retries = 2;
    SearchResult res = search({kernel_reply(1, 1.0), kernel_reply(2, 2.0, "BUSY=9")}, cfg);
    EXPECT_EQ(res.stop_reason, "generations");
    EXPECT_EQ(server.requests().size(), 2u) << "seed and mutation only";
    auto child = store->find_program("g1.i0.c0.a0");
    ASSERT_TRUE(child);
    EXPECT_EQ(child->status, store::ProgramStatus::not_judged);
    EXPECT_EQ(child->details.value("runs", 0), 3);
    EXPECT_TRUE(child->norm_hash.empty()) << "the same kernel sent again must be evaluated again";
    EXPECT_EQ(res.progress.not_judged, 1);
    EXPECT_EQ(res.progress.failed, 0);
    EXPECT_EQ(res.waste.requests, 0);
    EXPECT_EQ(res.waste.not_judged, 1);
}

// The model repairs a failing kernel by sending it again, and mutates a kernel into one tried
// before: both are dropped as duplicates, with no request for them; the mutation prompt names the
// approaches tried.
TEST_F(WasteTest, DuplicatesAreDroppedWithoutARequest) {
    const std::string failing = kernel_reply(1, 1.0, "MISMATCH");
    // The seed (a mismatch), its repair (correct), then the mutation answers the seed's failing
    // kernel again; a search that asked about that duplicate would get the repaired one again.
    SearchResult res = search({failing, kernel_reply(2, 1.2), failing, kernel_reply(2, 1.2)}, one_slot(1, 3));
    const std::vector<std::string> p = prompts();
    ASSERT_EQ(p.size(), 3u) << "a request followed a duplicate";
    EXPECT_TRUE(is_repair(p[1]));
    EXPECT_FALSE(is_repair(p[2]));
    EXPECT_NE(p[2].find("## Approaches already tried on this island"), std::string::npos) << p[2];
    EXPECT_NE(p[2].find("technique plain, 1.20x"), std::string::npos) << p[2];
    auto dup = store->find_program("g1.i0.c0.a0");
    ASSERT_TRUE(dup);
    EXPECT_EQ(dup->status, store::ProgramStatus::duplicate);
    EXPECT_FALSE(store->find_program("g1.i0.c0.a1")) << "a repair was asked for a duplicate";
    EXPECT_EQ(evaluator.runs().size(), 2u) << "a duplicate was evaluated";
    EXPECT_EQ(res.waste.requests, 0);
    EXPECT_EQ(res.progress.duplicates, 1);
}

// A real fault of the kernel: exactly one repair request, whose error says what failed. The waste
// figure (0) and the GPU use are in the state, the report (text, JSON, HTML).
TEST_F(WasteTest, AKernelFaultGetsOneRepairWithItsErrorAndTheFiguresAreReported) {
    SearchResult res = search({kernel_reply(1, 1.0, "MISMATCH"), kernel_reply(2, 1.3)}, one_slot(0, 3));
    const std::vector<std::string> p = prompts();
    ASSERT_EQ(p.size(), 2u);
    ASSERT_TRUE(is_repair(p[1]));
    EXPECT_NE(p[1].find("## Error\n\nmismatch: mismatch: output y differs at index 7"), std::string::npos) << p[1];
    EXPECT_EQ(res.waste.requests, 0);
    EXPECT_EQ(res.waste.evaluated, 2);
    EXPECT_DOUBLE_EQ(res.waste.gpu_s, 1.0);
    EXPECT_DOUBLE_EQ(res.waste.candidates_per_gpu_minute(), 120.0);
    auto meta = store->get_meta("waste");
    ASSERT_TRUE(meta);
    EXPECT_EQ((*meta)["wasted"]["requests"], 0);
    EXPECT_EQ((*meta)["gpu"]["candidates"], 2);
    nlohmann::json report = report_json(*store);
    EXPECT_EQ(report["waste"], *meta);
    const std::string text = report_text(*store);
    EXPECT_NE(text.find("Wasted LLM requests (replies that could not change the search): 0, 0 tokens, $0.0000"), std::string::npos) << text;
    EXPECT_NE(text.find("GPU: 2 candidate(s) in 0.02 GPU-minutes (120.0 per GPU-minute)"), std::string::npos) << text;
    // The busy share: the evaluations' GPU time over the run's wall time (both recorded).
    ASSERT_TRUE((*meta)["gpu"].contains("busy_share")) << meta->dump();
    const double wall = (*meta)["gpu"]["wall_s"].get<double>();
    EXPECT_GT(wall, 0);
    EXPECT_DOUBLE_EQ((*meta)["gpu"]["busy_share"].get<double>(), 1.0 / wall);
    EXPECT_NE(text.find("; busy with evaluations "), std::string::npos) << text;
}

// The waste of an older run: repairs it asked for a candidate that was not judged or a duplicate,
// with their tokens and cost.
TEST(Waste, CountsRepairsOfNonFaultsWithTheirTokensAndCost) {
    auto program = [](const std::string& key, store::ProgramStatus status, nlohmann::json details, const std::string& feedback) {
        store::Program p;
        p.key = key;
        p.status = status;
        p.details = std::move(details);
        p.feedback = feedback;
        return p;
    };
    std::vector<store::Program> programs = {
        program("g1.i0.c0.a0", store::ProgramStatus::rejected, {{"outside_kernel", true}, {"gpu_s", 2.0}}, "not judged: ..."),  // before not_judged
        program("g1.i0.c1.a0", store::ProgramStatus::duplicate, nlohmann::json::object(), ""),
        program("g1.i0.c2.a0", store::ProgramStatus::mismatch, {{"gpu_s", 1.0}}, "mismatch: at 7"),
        program("g1.i0.c3.a0", store::ProgramStatus::not_judged, {{"gpu_s", 3.0}}, "not judged: ..."),
    };
    auto call = [](const std::string& key, const std::string& kind) {
        store::LlmCall c;
        c.key = key;
        c.kind = kind;
        c.prompt_tokens = 100;
        c.completion_tokens = 10;
        c.cost_usd = 0.5;
        return c;
    };
    std::vector<store::LlmCall> calls = {call("g1.i0.c0.a0", "mutation"), call("g1.i0.c0.a1", "repair"),
                                         call("g1.i0.c1.a1", "repair"), call("g1.i0.c2.a1", "repair")};
    Waste w = waste_of(programs, calls);
    EXPECT_EQ(w.requests, 2);
    EXPECT_EQ(w.prompt_tokens, 200);
    EXPECT_EQ(w.completion_tokens, 20);
    EXPECT_DOUBLE_EQ(w.cost_usd, 1.0);
    EXPECT_EQ(w.not_judged, 2);
    EXPECT_EQ(w.evaluated, 3);
    EXPECT_DOUBLE_EQ(w.gpu_s, 6.0);
    EXPECT_DOUBLE_EQ(w.candidates_per_gpu_minute(), 30.0);
    EXPECT_FALSE(w.to_json()["gpu"].contains("busy_share"));  // no wall time: no share
    w.wall_s = 12;
    EXPECT_DOUBLE_EQ(w.busy_share(), 0.5);
    EXPECT_DOUBLE_EQ(w.to_json()["gpu"]["busy_share"].get<double>(), 0.5);
    EXPECT_NE(w.text().find("busy with evaluations 50% of the run's 12 s"), std::string::npos) << w.text();
}

// A repair prompt with nothing to fix is a bug in the search, never a request.
TEST(RepairError, RefusesAnEmptyErrorADuplicateAndACandidateNotJudged) {
    store::Program p;
    p.key = "g1.i0.c0.a0";
    p.status = store::ProgramStatus::mismatch;
    p.feedback = "output y differs at index 7";
    EXPECT_EQ(detail::repair_error(p), "mismatch: output y differs at index 7");
    p.feedback = " \n";
    EXPECT_THROW(detail::repair_error(p), std::logic_error);
    p.feedback = "";
    EXPECT_THROW(detail::repair_error(p), std::logic_error);
    p.status = store::ProgramStatus::duplicate;
    p.feedback = "correct; speedup 1.0x";
    EXPECT_THROW(detail::repair_error(p), std::logic_error);
    p.status = store::ProgramStatus::not_judged;
    EXPECT_THROW(detail::repair_error(p), std::logic_error);
}

}  // namespace
}  // namespace kevo::evolve
