// The whole search loop on the CPU: scripted LLM replies and a scripted evaluator. (Batch mode:
// search_batch_test.cpp.)
#include <gtest/gtest.h>

#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "evolve/archive.h"
#include "evolve/batch_mode.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "llm/budget.h"
#include "scripted.h"
#include "search_run.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

using testing::kernel_reply;
using testing::prompt_kind;
using testing::ScriptedEvaluator;
using testing::ScriptedProvider;
using testing::user_prompt;

using testing::evolving;
using namespace search_testing;

TEST(Search, SeedsRepairsAndImproves) {
    SearchRun r;
    // The first seed does not compile; the repair fixes it.
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        if (prompt_kind(req) == "seed") return kernel_reply(1, 1.0, "COMPILE_ERROR");
        return evolving(req);
    });
    SearchResult res = r.run(small(3), provider);
    EXPECT_EQ(res.stop_reason, "generations");
    EXPECT_EQ(res.generations_committed, 4);

    auto a0 = r.program("g0.seed.a0"), a1 = r.program("g0.seed.a1");
    ASSERT_TRUE(a0 && a1);
    EXPECT_EQ(a0->status, store::ProgramStatus::compile_error);
    EXPECT_EQ(a0->origin, "seed");
    EXPECT_TRUE(a1->ok());
    EXPECT_EQ(a1->origin, "repair");
    EXPECT_EQ(a1->parent_id, a0->id);  // lineage: the repair points at what it repaired
    // The repair prompt carried the failing code and the compiler's error.
    auto reqs = provider.requests();
    auto repair = std::find_if(reqs.begin(), reqs.end(), [](const auto& q) { return prompt_kind(q) == "repair"; });
    ASSERT_NE(repair, reqs.end());
    EXPECT_NE(user_prompt(*repair).find("scripted compile error"), std::string::npos);
    EXPECT_NE(user_prompt(*repair).find("COMPILE_ERROR"), std::string::npos);
    // Mutation prompts carry the task, reference, ABI, GPU, parent and its metrics.
    auto mutation = std::find_if(reqs.begin(), reqs.end(), [](const auto& q) { return prompt_kind(q) != "repair" && prompt_kind(q) != "seed"; });
    ASSERT_NE(mutation, reqs.end());
    for (const char* part : {"gelu_bias", "float32[M, N]", "M=4096", "kevo_forward", "Scripted GPU", "132 SMs",
                             "speedup 1.000x over the LibTorch reference", "kVariant", "Latest validation feedback"})
        EXPECT_NE(user_prompt(*mutation).find(part), std::string::npos) << part;

    ASSERT_TRUE(res.best);
    EXPECT_GT(res.best->speedup, 1.0);
    EXPECT_EQ(res.best_model, "scripted-model");
    EXPECT_EQ(res.progress.tokens, static_cast<int64_t>(provider.calls()) * 150);
    EXPECT_FALSE(r.evaluator.overlapped()) << "two candidates ran on the GPU at once";
    auto history = r.store->history();
    ASSERT_EQ(history.size(), 4u);
    for (size_t i = 1; i < history.size(); ++i) EXPECT_GE(history[i].best_speedup, history[i - 1].best_speedup);
    for (const auto& island : r.store->islands()) EXPECT_FALSE(Island::from_json(island).archive.empty());
}

// --backend both: even islands write Triton, odd ones CUDA (translating the Triton seed on their
// first mutation); the archives keep Triton and CUDA programs in separate cells.
TEST(Search, BothBackendsAlternateIslandsAndKeepEach) {
    SearchRun r;
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        const std::string& u = user_prompt(req);
        long v = static_cast<long>(req.seed.value());
        bool triton = u.find("Write a Triton kernel") != std::string::npos ||
                      u.find("Improve the speed of a Triton kernel") != std::string::npos;
        if (!triton) return kernel_reply(v, 1.5);
        return "```python\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n    pass  # SPEEDUP=" +
               std::to_string(1.0 + static_cast<double>(v % 100) / 100.0) + " variant " + std::to_string(v) +
               "\n\nKEVO_LAUNCH = {\"kernel\": \"k\"}\n```\n";
    });
    SearchConfig cfg = small(2);
    cfg.structure.backend = "both";
    cfg.evolution.mode = "full";
    SearchResult res = r.run(cfg, provider);
    ASSERT_TRUE(res.best);
    auto reqs = provider.requests();
    ASSERT_FALSE(reqs.empty());
    // The seed (island 0) is Triton, with the Triton format in the prompt.
    EXPECT_NE(user_prompt(reqs[0]).find("Write a Triton kernel"), std::string::npos);
    EXPECT_NE(user_prompt(reqs[0]).find("KEVO_LAUNCH"), std::string::npos);
    EXPECT_NE(user_prompt(reqs[0]).find("```python code block"), std::string::npos);
    bool translated = false;
    for (const auto& q : reqs)
        translated = translated || user_prompt(q).find("write the CUDA version of it") != std::string::npos;
    EXPECT_TRUE(translated) << "island 1 translates the Triton seed into CUDA";
    int triton_ok = 0, cuda_ok = 0;
    for (const auto& p : r.programs())
        if (p.ok()) (p.source.find("@triton.jit") != std::string::npos ? triton_ok : cuda_ok)++;
    EXPECT_GT(triton_ok, 0);
    EXPECT_GT(cuda_ok, 0);
    auto islands = r.store->islands();
    ASSERT_EQ(islands.size(), 2u);
    for (const auto& e : Island::from_json(islands[0]).archive.elites()) EXPECT_EQ(e.technique.rfind("triton_", 0), 0u) << e.technique;
    bool island1_cuda = false;
    for (const auto& e : Island::from_json(islands[1]).archive.elites()) island1_cuda = island1_cuda || e.technique.rfind("triton_", 0) != 0;
    EXPECT_TRUE(island1_cuda);
}

TEST(Search, RepairGivesUpAfterTheConfiguredAttempts) {
    SearchRun r;
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        return kernel_reply(static_cast<long>(req.seed.value()), 1.0, "MISMATCH");
    });
    SearchConfig cfg = small(0);
    cfg.evolution.repair_attempts = 3;
    SearchResult res = r.run(cfg, provider);
    EXPECT_EQ(provider.calls(), 4u);  // the seed and 3 repairs
    EXPECT_EQ(r.programs().size(), 4u);
    for (const auto& p : r.programs()) EXPECT_EQ(p.status, store::ProgramStatus::mismatch);
    EXPECT_FALSE(res.best);
    EXPECT_EQ(res.progress.failed, 4);
    auto reqs = provider.requests();
    EXPECT_NE(user_prompt(reqs.back()).find("differs at index 7"), std::string::npos);
}

TEST(Search, AnUnusableReplyIsRepairedToo) {
    SearchRun r;
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        if (prompt_kind(req) == "seed") return std::string("I would rather not write code today.");
        return kernel_reply(5, 1.0);
    });
    r.run(small(0), provider);
    EXPECT_EQ(r.program("g0.seed.a0")->status, store::ProgramStatus::no_code);
    EXPECT_TRUE(r.program("g0.seed.a1")->ok());
}

TEST(Search, RejectsDuplicatesWithoutEvaluatingThem) {
    SearchRun r;
    // Every mutation returns the seed again, reformatted and re-commented.
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        if (prompt_kind(req) == "seed") return kernel_reply(1, 1.0);
        std::string s = testing::kernel_source(1, 1.0);
        s = "// a new comment\n" + std::regex_replace(s, std::regex("  "), "\t  ");
        return "```cuda\n" + s + "```\n";
    });
    SearchResult res = r.run(small(2), provider);
    EXPECT_EQ(r.evaluator.runs().size(), 1u);  // only the seed ran
    EXPECT_EQ(res.progress.duplicates, 8);     // 2 islands x 2 children x 2 generations
    EXPECT_EQ(provider.calls(), 9u);           // a duplicate of a correct kernel is not "repaired"
    auto dup = r.program("g1.i0.c0.a0");
    ASSERT_TRUE(dup);
    EXPECT_EQ(dup->status, store::ProgramStatus::duplicate);
    EXPECT_EQ(dup->details["duplicate_of"], r.program("g0.seed.a0")->id);
}

TEST(Search, MigratesTheBestToTheNextIsland) {
    SearchRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(2);
    cfg.evolution.migration_interval = 2;
    r.run(cfg, provider);
    auto events = r.store->events();
    int migrations = 0;
    for (const auto& e : events)
        if (e.kind == "migration") {
            ++migrations;
            EXPECT_EQ(e.generation, 2);
        }
    EXPECT_EQ(migrations, 2);  // 0 -> 1 and 1 -> 0
    // The island that did not find the overall best holds it now.
    store::Program best;
    for (const auto& p : r.programs())
        if (p.ok() && p.speedup > best.speedup) best = p;
    Island other = Island::from_json(r.store->islands()[1 - best.island]);
    EXPECT_TRUE(other.archive.contains(best.id));
    EXPECT_EQ(other.best, best.speedup);
}

TEST(Search, RestartsAnIslandThatStopsImproving) {
    SearchRun r;
    // Nothing ever beats the 1.0x seed.
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        long v = static_cast<long>(req.seed.value());
        return kernel_reply(v, prompt_kind(req) == "seed" ? 1.0 : 0.5);
    });
    SearchConfig cfg = small(3);
    cfg.evolution.restart_after = 2;
    r.run(cfg, provider);
    int restarts = 0;
    for (const auto& e : r.store->events())
        if (e.kind == "restart") {
            ++restarts;
            EXPECT_EQ(e.generation, 2);
        }
    EXPECT_EQ(restarts, 2);
    int64_t seed_id = r.program("g0.seed.a0")->id;
    for (const auto& j : r.store->islands()) {
        Island island = Island::from_json(j);
        EXPECT_EQ(island.restarts, 1);
        EXPECT_EQ(island.last_improvement, 2);
        // After the restart at 2, only generation 3's children and the seed are in the archive.
        for (const Elite& e : island.archive.elites()) {
            auto p = r.store->get_program(e.id);
            EXPECT_TRUE(e.id == seed_id || p->generation == 3) << p->key;
        }
    }
}

class Schedules : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Search, Schedules, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "steady" : "generations"; });

// The budget's refusal that stopped a run ("token budget: USED tokens used and RESERVED reserved
// ... may use up to NEXT ..."), as {USED, RESERVED, NEXT}; empty when the run logged none.
std::vector<int64_t> refusal(const std::vector<std::string>& log) {
    static const std::regex line(R"(^token budget: (\d+) tokens used and (\d+) reserved .* may use up to (\d+) )");
    std::smatch m;
    for (const auto& l : log)
        if (std::regex_search(l, m, line)) return {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3])};
    return {};
}

TEST_P(Schedules, StopsAtTheTokenBudgetWithoutOverrunningItAndResumesWithALargerOne) {
    SearchRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(50);
    cfg.evolution.steady = GetParam();
    cfg.requests.max_tokens = 200;
    cfg.stopping.budget_tokens = 10000;  // each call uses 150 tokens and reserves its prompt's bytes + 200
    std::mutex log_mu;
    std::vector<std::string> log;
    cfg.log = [&](const std::string& l) {
        std::lock_guard<std::mutex> lock(log_mu);
        log.push_back(l);
    };
    SearchResult res = r.run(cfg, provider);
    EXPECT_EQ(res.stop_reason, "budget");
    store::Spent spent = r.store->spent();
    // Never overrun, although four slots ask at once; and stopped only by a request that did not fit
    // with nothing left in flight. (Its own reservation, not the largest one sent: which slot asks
    // when nothing is in flight depends on the threads' order, and its prompt may be the longest.)
    EXPECT_LE(spent.tokens(), 10000);
    const std::vector<int64_t> refused = refusal(log);
    ASSERT_EQ(refused.size(), 3u) << "no budget refusal was logged";
    EXPECT_EQ(refused[0], spent.tokens());
    EXPECT_EQ(refused[1], 0) << "stopped while requests were in flight";
    EXPECT_GT(refused[0] + refused[2], 10000);
    EXPECT_GT(spent.calls, 4);
    EXPECT_EQ(provider.calls(), static_cast<size_t>(spent.calls));

    // The same budget again: what is asked (if anything fits) still fits.
    ScriptedProvider again(evolving);
    EXPECT_EQ(r.run(cfg, again).stop_reason, "budget");
    EXPECT_LE(r.store->spent().tokens(), 10000);
    // A larger one: the run continues.
    cfg.stopping.budget_tokens = 16000;
    ScriptedProvider more(evolving);
    EXPECT_EQ(r.run(cfg, more).stop_reason, "budget");
    EXPECT_GT(more.calls(), 0u);
    EXPECT_LE(r.store->spent().tokens(), 16000);
    // A cost cap, with the price that makes the scripted $0.001 per call (100 + 50 tokens).
    double spent_usd = r.store->spent().cost_usd;
    cfg.stopping.budget_tokens = 0;
    cfg.stopping.budget_usd = spent_usd + 0.02;
    cfg.requests.price = llm::Price{2, 16};
    ScriptedProvider paid(evolving);
    EXPECT_EQ(r.run(cfg, paid).stop_reason, "budget");
    EXPECT_GT(paid.calls(), 0u);
    EXPECT_LE(r.store->spent().cost_usd, cfg.stopping.budget_usd + 1e-12);
}

TEST(Search, StopsAtTheTargetSpeedup) {
    SearchRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(100);
    cfg.stopping.target_speedup = 1.5;
    SearchResult res = r.run(cfg, provider);
    EXPECT_EQ(res.stop_reason, "target");
    EXPECT_GE(res.best->speedup, 1.5);
    EXPECT_LT(res.generations_committed, 100);
}


TEST(Search, InterruptedRunResumesWithoutRepayingOrReevaluating) {
    SearchConfig cfg = small(4);
    cfg.evolution.migration_interval = 2;
    cfg.evolution.restart_after = 3;
    cfg.evolution.mode = "full";

    SearchRun straight;
    ScriptedProvider p0(evolving);
    straight.run(cfg, p0);

    SearchRun broken;
    std::atomic<bool> stop{false};
    std::atomic<int> calls{0};
    ScriptedProvider p1([&](const llm::ChatRequest& req) {
        if (++calls == 7) stop = true;  // Ctrl-C in the middle of generation 2
        return evolving(req);
    });
    SearchResult first = broken.run(cfg, p1, &stop);
    EXPECT_EQ(first.stop_reason, "interrupted");
    EXPECT_LT(first.generations_committed, 5);
    size_t runs_before = broken.evaluator.runs().size();
    std::set<std::string> evaluated;
    for (const auto& s : broken.evaluator.runs()) evaluated.insert(normalized_hash(s));

    ScriptedProvider p2(evolving);
    SearchResult second = broken.run(cfg, p2);
    EXPECT_EQ(second.stop_reason, "generations");
    // Every reply was paid for once, and the two halves together asked exactly what one run asks.
    EXPECT_EQ(p1.calls() + p2.calls(), p0.calls());
    std::set<int64_t> first_seeds;
    for (const auto& q : p1.requests()) first_seeds.insert(*q.seed);
    for (const auto& q : p2.requests()) EXPECT_FALSE(first_seeds.count(*q.seed)) << "a stored reply was requested again";
    for (size_t i = runs_before; i < broken.evaluator.runs().size(); ++i)
        EXPECT_FALSE(evaluated.count(normalized_hash(broken.evaluator.runs()[i]))) << "a candidate was evaluated again";
    // And the result is the same as the uninterrupted run's.
    EXPECT_EQ(outcome(broken), outcome(straight));
    EXPECT_EQ(broken.store->spent().tokens(), straight.store->spent().tokens());
}

TEST(Search, IsDeterministicUnderASeed) {
    SearchConfig cfg = small(3);
    cfg.evolution.migration_interval = 2;
    SearchRun a, b, c;
    ScriptedProvider pa(evolving), pb(evolving), pc(evolving);
    a.run(cfg, pa);
    b.run(cfg, pb);
    EXPECT_EQ(outcome(a), outcome(b));
    cfg.structure.seed = 8;
    c.run(cfg, pc);
    EXPECT_NE(outcome(a), outcome(c));
}

TEST(Search, AppliesSearchReplaceEdits) {
    SearchRun r;
    ScriptedProvider provider([](const llm::ChatRequest& req) {
        if (prompt_kind(req) == "seed") return kernel_reply(1, 1.0);
        if (prompt_kind(req) == "repair") return kernel_reply(static_cast<long>(*req.seed), 1.1);
        // An edit of the parent: a faster variant. The second child's edit does not match.
        bool bad = user_prompt(req).find("kVariant = 2;") != std::string::npos;
        return std::string("Faster:\n<<<<<<< SEARCH\n") +
               (bad ? "no such line\n" : "static const long kVariant = 1;  // SPEEDUP=1.000 \n") +
               "=======\nstatic const long kVariant = 2;  // SPEEDUP=2.000\n>>>>>>> REPLACE\n";
    });
    SearchConfig cfg = small(2);
    cfg.structure.islands = 1;
    cfg.structure.children = 1;
    cfg.evolution.mode = "diff";
    r.run(cfg, provider);
    auto child = r.program("g1.i0.c0.a0");
    ASSERT_TRUE(child);
    EXPECT_TRUE(child->ok()) << child->status << ": " << child->feedback;
    EXPECT_DOUBLE_EQ(child->speedup, 2.0);
    EXPECT_NE(child->source.find("extern \"C\" int kevo_forward"), std::string::npos);  // the rest of the parent
    auto bad = r.program("g2.i0.c0.a0");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, store::ProgramStatus::no_code);
    EXPECT_TRUE(r.program("g2.i0.c0.a1")->ok());  // repaired with a full kernel
}

TEST(Search, StartsFromTheInitialKernel) {
    SearchRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(1);
    cfg.structure.initial_source = testing::kernel_source(99, 1.2);
    r.run(cfg, provider);
    auto seed = r.program("g0.seed.a0");
    ASSERT_TRUE(seed);
    EXPECT_EQ(seed->origin, "initial");
    EXPECT_DOUBLE_EQ(seed->speedup, 1.2);
    EXPECT_EQ(provider.calls(), 4u);  // generation 1 only
    // A resume with another seed kernel (or none) is another run.
    cfg.structure.initial_source.clear();
    try {
        r.run(cfg, provider);
        ADD_FAILURE() << "a resume with another seed kernel was accepted";
    } catch (const SettingError& e) {  // in words; the command line names --state and --fresh
        EXPECT_EQ(e.id(), "store.state");
        EXPECT_NE(std::string(e.what()).find("; use another state file, or an emptied state to start over"), std::string::npos) << e.what();
        EXPECT_NE(e.render([](const Setting& s) { return std::string(s.id); }).find("use another store.state, or search.fresh"),
                  std::string::npos);
    }
}

// ---- steady state (no generation barrier) ----------------------------------------------------

// One slow LLM reply in generation 1: with a barrier, nothing of generation 2 starts until it
// returns; in steady state the other slots go on into generation 2 meanwhile.
size_t requests_during_a_slow_reply(bool steady) {
    SearchRun r;
    std::atomic<int> n{0};
    std::atomic<size_t> during{0};
    ScriptedProvider* self = nullptr;
    ScriptedProvider provider([&](const llm::ChatRequest& req) {
        if (++n == 2) {  // the first mutation
            size_t before = self->calls();
            std::this_thread::sleep_for(std::chrono::milliseconds(600));
            during = self->calls() - before;
        }
        return evolving(req);
    });
    self = &provider;
    SearchConfig cfg = small(4);
    cfg.evolution.steady = steady;
    SearchResult res = r.run(cfg, provider);
    EXPECT_EQ(res.stop_reason, "generations");
    EXPECT_EQ(res.generations_committed, 5);
    EXPECT_FALSE(r.evaluator.overlapped()) << "two candidates ran on the GPU at once";
    return during;
}

TEST(Search, SteadyStateDoesNotWaitForTheSlowestSlot) {
    size_t barrier = requests_during_a_slow_reply(false), steady = requests_during_a_slow_reply(true);
    EXPECT_LE(barrier, 3u);  // the other slots of generation 1 only
    EXPECT_GE(steady, 6u) << "generation 2 did not start while generation 1 was finishing";
}

TEST(Search, SteadyStateCommitsGenerationsInOrderWithMigrationAndRestarts) {
    SearchRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(6);
    cfg.evolution.steady = true;
    cfg.evolution.migration_interval = 2;
    cfg.evolution.restart_after = 3;
    SearchResult res = r.run(cfg, provider);
    EXPECT_EQ(res.stop_reason, "generations");
    auto history = r.store->history();
    ASSERT_EQ(history.size(), 7u);
    for (size_t i = 0; i < history.size(); ++i) EXPECT_EQ(history[i].generation, static_cast<int>(i));
    for (size_t i = 1; i < history.size(); ++i) EXPECT_GE(history[i].best_speedup, history[i - 1].best_speedup);
    int migrations = 0;
    for (const auto& e : r.store->events()) migrations += e.kind == "migration";
    EXPECT_EQ(migrations, 6);  // at 2, 4 and 6, both ways
    EXPECT_EQ(r.programs().size(), 1u + 6 * 4);
    for (const auto& p : r.programs()) EXPECT_NE(p.status, store::ProgramStatus::pending) << p.key;
    ASSERT_TRUE(res.best);
    EXPECT_GT(res.best->speedup, 1.0);
}

TEST(Search, SteadyStateResumesWithoutRepayingOrReevaluating) {
    SearchConfig cfg = small(5);
    cfg.evolution.steady = true;
    cfg.evolution.migration_interval = 2;
    SearchRun r;
    std::atomic<bool> stop{false};
    std::atomic<int> calls{0};
    ScriptedProvider p1([&](const llm::ChatRequest& req) {
        if (++calls == 9) stop = true;
        return evolving(req);
    });
    SearchResult first = r.run(cfg, p1, &stop);
    EXPECT_EQ(first.stop_reason, "interrupted");
    EXPECT_LT(first.generations_committed, 6);
    std::set<std::string> evaluated;
    for (const auto& s : r.evaluator.runs()) evaluated.insert(normalized_hash(s));
    size_t runs_before = r.evaluator.runs().size();
    std::set<int64_t> first_seeds;
    for (const auto& c : r.store->llm_calls()) first_seeds.insert(c.request.at("seed").get<int64_t>());

    ScriptedProvider p2(evolving);
    SearchResult second = r.run(cfg, p2);
    EXPECT_EQ(second.stop_reason, "generations");
    EXPECT_EQ(second.generations_committed, 6);
    for (const auto& q : p2.requests()) EXPECT_FALSE(first_seeds.count(*q.seed)) << "a stored reply was requested again";
    for (size_t i = runs_before; i < r.evaluator.runs().size(); ++i)
        EXPECT_FALSE(evaluated.count(normalized_hash(r.evaluator.runs()[i]))) << "a candidate was evaluated again";
    EXPECT_EQ(r.programs().size(), 1u + 5 * 4);
    for (const auto& p : r.programs()) EXPECT_NE(p.status, store::ProgramStatus::pending) << p.key;
}

TEST(Search, ReportShowsTheHistory) {
    SearchRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(3);
    cfg.evolution.migration_interval = 2;
    r.run(cfg, provider);
    std::string text = report_text(*r.store);
    for (const char* part : {"Task gelu_bias (sm_90), 4 generation(s) committed, stopped: generations",
                             "Best speedup by generation", "Best speedup by tokens spent", "Migrations: 2"})
        EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
    std::string svg = report_svg(*r.store);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_NE(svg.find("<polyline"), std::string::npos);
    EXPECT_NE(svg.find("<circle"), std::string::npos);
    // The HTML report's charts (drawn by uPlot in serve/search_report): best so far as a step line,
    // the candidates as dots, migrations as marks.
    nlohmann::json charts = report_charts(*r.store);
    ASSERT_EQ(charts.size(), 2u) << charts.dump();
    EXPECT_EQ(charts[0]["series"][0]["label"], "best so far") << charts[0].dump();
    EXPECT_EQ(charts[0]["series"][0]["kind"], "step");
    EXPECT_EQ(charts[0]["series"][1]["kind"], "points");
    EXPECT_FALSE(charts[0]["vlines"].empty());
    EXPECT_EQ(charts[1]["x"], "tokens");
    EXPECT_EQ(charts[1]["series"][0]["kind"], "step");
}

}  // namespace
}  // namespace kevo::evolve
