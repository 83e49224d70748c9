// The whole search loop on the CPU: scripted LLM replies and a scripted evaluator.
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
#include "store/store.h"

namespace kevo::evolve {
namespace {

using testing::kernel_reply;
using testing::prompt_kind;
using testing::ScriptedEvaluator;
using testing::ScriptedProvider;
using testing::user_prompt;

using testing::evolving;

struct SearchRun {
    TempDir dir;
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    std::unique_ptr<store::Store> store = store::open_store((dir.path() / "state.db").string());
    ScriptedEvaluator evaluator;

    SearchResult run(const SearchConfig& cfg, llm::Provider& provider, const std::atomic<bool>* stop = nullptr) {
        Search search(task, cfg, Prompts(), provider, evaluator, *store);
        return search.run(stop);
    }
    std::vector<store::Program> programs() { return store->programs(); }
    std::optional<store::Program> program(const std::string& key) { return store->find_program(key); }
};

SearchConfig small(int generations) {
    SearchConfig c;
    c.structure.islands = 2;
    c.structure.children = 2;
    c.evolution.generations = generations;
    c.evolution.repair_attempts = 2;
    c.evolution.migration_interval = 0;
    c.evolution.restart_after = 0;
    c.structure.seed = 7;
    return c;
}

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

// Runs to `generations` in one go, or with an interrupt after `interrupt_after` LLM calls and a resume.
std::vector<std::tuple<std::string, std::string, std::string>> outcome(SearchRun& r) {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const auto& p : r.programs()) out.emplace_back(p.key, p.source, store::program_status_name(p.status));
    std::sort(out.begin(), out.end());
    return out;
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


// ---- Batch mode -------------------------------------------------------------------------------

namespace batch {

SearchConfig config(const fs::path& dir) {
    SearchConfig cfg = small(3);
    cfg.requests.model = "vendor/m";
    cfg.batch.enabled = true;
    cfg.batch.prefix = (dir / "gelu").string();
    cfg.batch.url = "https://api.openai.com/v1";
    return cfg;
}

std::vector<std::string> lines_of(const fs::path& file) {
    std::vector<std::string> out;
    std::istringstream in(read_file(file));
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(l);
    return out;
}

// Batch mode must never send a request itself.
std::string never(const llm::ChatRequest&) {
    ADD_FAILURE() << "a request was sent";
    return "";
}

}  // namespace batch

TEST(SearchBatch, WritesRequestsAndResumesFromTheRepliesToTheOutcomeOfAnOnlineRun) {
    SearchConfig online_cfg = small(3);
    online_cfg.requests.model = "vendor/m";
    SearchRun online;
    ScriptedProvider p0(evolving);
    ASSERT_EQ(online.run(online_cfg, p0).stop_reason, "generations");

    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    ScriptedProvider never(batch::never);
    SearchResult res = b.run(cfg, never);
    ASSERT_EQ(res.stop_reason, "batch");
    EXPECT_EQ(res.batch_written, 1);  // the seed
    EXPECT_EQ(res.batch_file, (b.dir.path() / "gelu-1.jsonl").string());
    // The Batch API input format, with the body HttpProvider would send to that URL.
    auto first = batch::lines_of(res.batch_file);
    ASSERT_EQ(first.size(), 1u);
    nlohmann::json line = nlohmann::json::parse(first[0]);
    // The custom_id names the run (its id in the state), the task and the architecture.
    const std::string run_id = b.store->get_meta("run_id").value_or("").get<std::string>();
    EXPECT_TRUE(std::regex_match(run_id, std::regex("r[0-9a-f]{8}"))) << run_id;
    EXPECT_EQ(line["custom_id"], run_id + ".gelu_bias.sm_90:b1:g0.seed.a0");
    EXPECT_EQ(line["method"], "POST");
    EXPECT_EQ(line["url"], "/v1/chat/completions");
    EXPECT_EQ(line["body"]["model"], "vendor/m");
    EXPECT_EQ(line["body"]["max_completion_tokens"], 8192);
    EXPECT_EQ(line["body"]["messages"].size(), 2u);
    EXPECT_TRUE(line["body"]["seed"].is_number_integer());
    // The store records which request went into which file.
    auto recorded = b.store->batch_requests();
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].key, "g0.seed.a0");
    EXPECT_EQ(recorded[0].file, res.batch_file);
    EXPECT_EQ(recorded[0].batch, 1);
    EXPECT_GT(recorded[0].reserved_tokens, 8192);

    // Rounds: answer each file and resume with every replies file so far (the earlier ones are
    // skipped, never counted twice). One line fails once, as in an expired batch.
    int rounds = 1;
    std::string failed_id;
    while (res.stop_reason == "batch") {
        ASSERT_LT(rounds, 80);
        std::vector<std::string> fail;
        auto requests = testing::batch_requests_of(read_file(res.batch_file));
        EXPECT_EQ(static_cast<int>(requests.size()), res.batch_written);
        if (failed_id.empty() && requests.size() >= 2) fail = {failed_id = requests[1].first};
        fs::path out = b.dir.path() / ("replies-" + std::to_string(rounds) + ".jsonl");
        write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), evolving, fail));
        cfg.batch.replies.push_back(out.string());
        res = b.run(cfg, never);
        ++rounds;
    }
    EXPECT_EQ(res.stop_reason, "generations");
    ASSERT_FALSE(failed_id.empty());
    EXPECT_EQ(outcome(b), outcome(online));
    EXPECT_EQ(b.store->spent().calls, online.store->spent().calls);
    EXPECT_EQ(b.store->spent().tokens(), online.store->spent().tokens());
    // The same requests as an online run asks (program ids in the prompts may differ: the slots
    // finish in another order); the reply names the model that answered.
    for (const auto& call : online.store->llm_calls()) {
        auto stored = b.store->find_llm_call(call.key);
        ASSERT_TRUE(stored) << call.key;
        for (const char* field : {"seed", "model", "max_tokens", "temperature"})
            EXPECT_EQ(stored->request[field], call.request[field]) << call.key << " " << field;
        EXPECT_EQ(stored->kind, call.kind) << call.key;
        EXPECT_EQ(stored->model, "vendor/m-2025");
    }
    // The failed line's request went into a later batch under a new custom_id.
    std::string failed_key = parse_batch_custom_id(failed_id).value().key;
    int failed = 0, again = 0;
    for (const auto& r : b.store->batch_requests()) {
        if (r.custom_id == failed_id) {
            EXPECT_NE(r.error.find("batch_expired"), std::string::npos) << r.error;
            ++failed;
        }
        if (r.key == failed_key && r.custom_id != failed_id && r.error.empty()) ++again;
    }
    EXPECT_EQ(failed, 1);
    EXPECT_EQ(again, 1);
    std::string text = report_text(*b.store);
    EXPECT_NE(text.find("Batches: " + std::to_string(rounds - 1) + " file(s), "), std::string::npos) << text;
    EXPECT_NE(text.find(" answered, 1 failed, 0 waiting (last: " + b.dir.path().string() + "/gelu-"), std::string::npos)
        << text;
}

TEST(SearchBatch, RequestsWaitingInABatchAreNeverSentOnline) {
    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    ScriptedProvider never(batch::never);
    SearchResult res = b.run(cfg, never);
    ASSERT_EQ(res.stop_reason, "batch");

    // Online, without the replies: the seed waits for its batch.
    SearchConfig online = cfg;
    online.batch.enabled = false;
    ScriptedProvider p(evolving);
    SearchResult waiting = b.run(online, p);
    EXPECT_EQ(waiting.stop_reason, "batch");
    EXPECT_EQ(waiting.batch_waiting, 1);
    EXPECT_EQ(waiting.batch_written, 0);
    EXPECT_EQ(p.calls(), 0u);
    // Again in batch mode: nothing new to write, the same request is not written twice.
    SearchResult again = b.run(cfg, never);
    EXPECT_EQ(again.stop_reason, "batch");
    EXPECT_EQ(again.batch_written, 0);
    EXPECT_EQ(b.store->batch_requests().size(), 1u);

    // With the replies, the run goes on online.
    fs::path out = b.dir.path() / "replies.jsonl";
    write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), evolving));
    online.batch.replies = {out.string()};
    EXPECT_EQ(b.run(online, p).stop_reason, "generations");
    EXPECT_GT(p.calls(), 0u);
    for (const auto& q : p.requests()) EXPECT_NE(prompt_kind(q), "seed") << "the seed's reply was requested again";
}

TEST(SearchBatch, RefusesRepliesThatAreNotThisRunsAndBadSettings) {
    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    ScriptedProvider never(batch::never);
    ASSERT_EQ(b.run(cfg, never).stop_reason, "batch");
    fs::path other = b.dir.path() / "other.jsonl";
    write_file_atomic(other, R"({"id":"x","custom_id":"b1:g7.i0.c0.a0","response":{"status_code":200,"body":{}},"error":null})"
                             "\n");
    cfg.batch.replies = {other.string()};
    try {
        b.run(cfg, never);
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("other.jsonl:1: custom_id 'b1:g7.i0.c0.a0' has no run id"),
                  std::string::npos) << e.what();
    }
    write_file_atomic(other, "not json\n");
    EXPECT_THROW(b.run(cfg, never), UsageError);
    EXPECT_TRUE(b.store->llm_calls().empty());

    SearchConfig no_model = batch::config(b.dir.path());
    no_model.requests.model.clear();
    EXPECT_THROW(b.run(no_model, never), UsageError);
    SearchConfig no_price = batch::config(b.dir.path());
    no_price.stopping.budget_usd = 1;
    EXPECT_THROW(b.run(no_price, never), UsageError);
}

TEST(SearchBatch, ImportedRepliesCountTheReportedCostElseThePrice) {
    for (double reported : {0.0125, -1.0}) {
        SearchRun b;
        SearchConfig cfg = batch::config(b.dir.path());
        cfg.requests.price = llm::Price{1, 2};   // 100 * 1e-6 + 50 * 2e-6 = $0.0002 per reply
        ScriptedProvider never(batch::never);
        SearchResult res = b.run(cfg, never);
        ASSERT_EQ(res.stop_reason, "batch");
        fs::path out = b.dir.path() / "replies.jsonl";
        write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), evolving, {}, reported));
        cfg.batch.replies = {out.string()};
        b.run(cfg, never);
        auto call = b.store->find_llm_call("g0.seed.a0");
        ASSERT_TRUE(call);
        EXPECT_DOUBLE_EQ(call->cost_usd, reported >= 0 ? reported : 0.0002);
        EXPECT_EQ(call->prompt_tokens, 100);
        EXPECT_EQ(call->completion_tokens, 50);
    }
}

TEST(SearchBatch, TheBudgetHoldsWhatIsDeferred) {
    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    cfg.stopping.budget_tokens = 1000;  // less than one request may use
    ScriptedProvider never(batch::never);
    SearchResult res = b.run(cfg, never);
    EXPECT_EQ(res.stop_reason, "budget");
    EXPECT_TRUE(res.batch_file.empty());
    EXPECT_TRUE(b.store->batch_requests().empty());
}

// ---- Batch files belong to their run (issue 28) ------------------------------------------------

namespace batch {

// Everything an import could change, read back through the store (and, for the file on disk,
// through a second, read-only connection).
std::string fingerprint(store::Store& s) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& c : s.llm_calls())
        j["calls"].push_back({c.key, c.kind, c.reply, c.model, c.prompt_tokens, c.completion_tokens, c.cost_usd});
    for (const auto& b : s.batch_requests()) j["batch"].push_back({b.custom_id, b.key, b.file, b.error});
    store::Spent spent = s.spent();
    j["spent"] = {spent.calls, spent.prompt_tokens, spent.completion_tokens, spent.cost_usd};
    for (const auto& p : s.programs()) j["programs"].push_back({p.key, p.status});
    j["run_id"] = s.get_meta("run_id").value_or(nullptr);
    j["generation"] = s.last_generation();
    return j.dump();
}
std::string on_disk(const fs::path& state) {
    return fingerprint(*store::open_store(state.string(), store::Access::read_only));
}

// A batch-mode run of `task` on `arch` that wrote its first batch file (the seed's request).
struct BatchRun {
    explicit BatchRun(const std::string& task_dir = "gelu_bias", const std::string& arch = "sm_90")
        : task(load_task(fs::path(KEVO_TEST_DATA_DIR) / task_dir / "task.json")), evaluator(arch) {
        cfg = config(dir.path());
        first = run();
    }
    SearchResult run() {
        ScriptedProvider p(never);
        Search search(task, cfg, Prompts(), p, evaluator, *store);
        return search.run();
    }
    // Answers the batch file `input` as the provider would, with `respond`.
    fs::path answer(const std::string& input, const ScriptedProvider::Respond& respond, const std::string& name) {
        fs::path out = dir.path() / name;
        write_file_atomic(out, testing::answer_batch(read_file(input), respond));
        return out;
    }
    std::string run_id() { return store->get_meta("run_id").value_or("").get<std::string>(); }
    // The message the run is refused with ("" when it is not).
    std::string refusal() {
        try {
            run();
        } catch (const UsageError& e) {
            return e.what();
        }
        return "";
    }
    fs::path state() const { return dir.path() / "state.db"; }

    struct ArchEvaluator : ScriptedEvaluator {
        explicit ArchEvaluator(std::string a) : arch_(std::move(a)) {}
        std::string arch() override { return arch_; }
        std::string arch_;
    };
    TempDir dir;
    Task task;
    std::unique_ptr<store::Store> store = store::open_store((dir.path() / "state.db").string());
    ArchEvaluator evaluator;
    SearchConfig cfg;
    SearchResult first;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(l);
    return out;
}

}  // namespace batch

TEST(SearchBatch, CustomIdsNameTheRunAndFitBatchApiLimits) {
    const std::string tag = batch_run_tag("r0123abcd", "gelu_bias", "sm_90");
    EXPECT_EQ(tag, "r0123abcd.gelu_bias.sm_90");
    EXPECT_EQ(batch_custom_id(tag, 3, "g12.i1.c0.a2"), "r0123abcd.gelu_bias.sm_90:b3:g12.i1.c0.a2");
    auto id = parse_batch_custom_id("r0123abcd.gelu_bias.sm_90:b3:g12.i1.c0.a2");
    ASSERT_TRUE(id);
    EXPECT_EQ(id->run, "r0123abcd");
    EXPECT_EQ(id->task, "gelu_bias");
    EXPECT_EQ(id->arch, "sm_90");
    EXPECT_EQ(id->batch, 3);
    EXPECT_EQ(id->key, "g12.i1.c0.a2");
    auto old = parse_batch_custom_id("b2:g0.seed.a1");   // written before run ids
    ASSERT_TRUE(old);
    EXPECT_EQ(old->run, "");
    EXPECT_EQ(old->batch, 2);
    EXPECT_EQ(old->key, "g0.seed.a1");
    for (const char* bad : {"", "x", "b:k", "bx:k", "b1:", "r0123abcd:b1:k", "r0123abcd.t.a:b1:", "R0123abcd.t.a:b1:k",
                            "r0123abcd.t.a.b:b1:k", "r0123abcd.t/x.a:b1:k", "r0123abcd.t.a:1:k", "r0123abcd.t.a:b99999999999:k"})
        EXPECT_FALSE(parse_batch_custom_id(bad)) << bad;

    // A long task name, an odd architecture and a long key still fit the 64 characters that
    // Batch APIs accept, in their characters, and stay unique per key.
    const std::string long_tag = batch_run_tag("rffffffff", "kernelbench_L2_57_conv2d_relu_hardswish", "sm_100a/x");
    std::set<std::string> ids;
    for (const std::string& key : std::vector<std::string>{"g0.seed.a0", "g123456.i99.c99.a99", std::string(80, 'k'),
                                                           std::string(80, 'k') + "2", "g1 i0"}) {
        std::string cid = batch_custom_id(long_tag, 123456, key);
        EXPECT_LE(cid.size(), kMaxBatchCustomId) << cid;
        EXPECT_EQ(cid.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-"), std::string::npos) << cid;
        EXPECT_TRUE(parse_batch_custom_id(cid)) << cid;
        EXPECT_TRUE(ids.insert(cid).second) << cid;
    }
}

// The issue's case: a replies file of another run of the same task and architecture used to be
// imported (same custom ids in every run), and the run's own reply then skipped.
TEST(SearchBatch, RepliesOfAnotherRunAreRefusedWithNothingChangedThenItsOwnImport) {
    batch::BatchRun a, b;
    ASSERT_EQ(a.first.stop_reason, "batch");
    ASSERT_EQ(b.first.stop_reason, "batch");
    ASSERT_NE(a.run_id(), b.run_id());
    fs::path of_a = a.answer(a.first.batch_file, [](const llm::ChatRequest&) { return testing::kernel_reply(999, 1.0); },
                             "replies-a.jsonl");
    fs::path of_b = b.answer(b.first.batch_file, evolving, "replies-b.jsonl");
    const std::string before = batch::fingerprint(*b.store), disk_before = batch::on_disk(b.state());

    // A's file, alone or next to B's own (every file is checked before anything is stored).
    for (const std::vector<std::string>& files : {std::vector<std::string>{of_a.string()},
                                                  std::vector<std::string>{of_b.string(), of_a.string()}}) {
        b.cfg.batch.replies = files;
        std::string why = b.refusal();
        EXPECT_TRUE(batch::contains(why, of_a.string() + ":1: the replies of another run of gelu_bias on sm_90 (run " +
                                             a.run_id() + "); this state is run " + b.run_id() + " of gelu_bias on sm_90."))
            << why;
        EXPECT_TRUE(batch::contains(why, "Nothing was imported")) << why;
        EXPECT_EQ(batch::fingerprint(*b.store), before);
        EXPECT_EQ(batch::on_disk(b.state()), disk_before);
    }

    // B's own file: imported, the reply is B's; given again (alone and twice in one run), it is
    // skipped, never counted twice.
    std::vector<std::string> log;
    b.cfg.log = [&log](const std::string& line) { log.push_back(line); };
    b.cfg.batch.replies = {of_b.string()};
    ASSERT_EQ(b.run().stop_reason, "batch");
    auto seed = b.store->find_llm_call("g0.seed.a0");
    ASSERT_TRUE(seed);
    EXPECT_EQ(seed->reply, evolving(testing::batch_requests_of(read_file(b.first.batch_file)).at(0).second));
    EXPECT_FALSE(batch::contains(seed->reply, "999"));
    EXPECT_EQ(b.store->spent().calls, 1);
    EXPECT_NE(std::find(log.begin(), log.end(), "imported 1 replies from " + of_b.string()), log.end());
    const std::string after = batch::fingerprint(*b.store);
    b.cfg.batch.replies = {of_b.string(), of_b.string()};
    log.clear();
    EXPECT_EQ(b.run().stop_reason, "batch");
    EXPECT_EQ(b.store->spent().calls, 1);
    EXPECT_EQ(std::count(log.begin(), log.end(), "imported 0 replies from " + of_b.string() + ", 1 imported before"), 2);
    // (the import's run wrote the next round's batch; the runs given the file again add nothing)
    EXPECT_EQ(batch::fingerprint(*b.store), after);
}

TEST(SearchBatch, RepliesOfAnotherTaskOrArchitectureAreRefused) {
    batch::BatchRun b;
    batch::BatchRun conv("matmul", "sm_90"), ampere("gelu_bias", "sm_80");
    ASSERT_EQ(conv.first.stop_reason, "batch");
    ASSERT_EQ(ampere.first.stop_reason, "batch");
    fs::path of_conv = conv.answer(conv.first.batch_file, evolving, "replies-conv.jsonl");
    fs::path of_ampere = ampere.answer(ampere.first.batch_file, evolving, "replies-sm80.jsonl");
    const std::string before = batch::fingerprint(*b.store);
    const std::string self = "; this state is run " + b.run_id() + " of gelu_bias on sm_90.";
    b.cfg.batch.replies = {of_conv.string()};
    std::string why = b.refusal();
    EXPECT_TRUE(batch::contains(why, of_conv.string() + ":1: the replies of a run of another task or architecture (run " +
                                         conv.run_id() + " of matmul on sm_90)" + self)) << why;
    b.cfg.batch.replies = {of_ampere.string()};
    why = b.refusal();
    EXPECT_TRUE(batch::contains(why, of_ampere.string() + ":1: the replies of a run of another task or architecture (run " +
                                         ampere.run_id() + " of gelu_bias on sm_80)" + self)) << why;
    EXPECT_EQ(batch::fingerprint(*b.store), before);
    // And the other way round: B's file is no reply for them either.
    fs::path of_b = b.answer(b.first.batch_file, evolving, "replies-b.jsonl");
    conv.cfg.batch.replies = {of_b.string()};
    EXPECT_TRUE(batch::contains(conv.refusal(), "(run " + b.run_id() + " of gelu_bias on sm_90); this state is run " +
                                                    conv.run_id() + " of matmul on sm_90.")) << conv.refusal();
}

// A file cut short, with a custom_id twice, a request this run never wrote, an input file given
// as replies, an empty file: each refused whole, naming the line, with nothing stored; then the
// run's own file imports.
TEST(SearchBatch, BrokenRepliesFilesAreRefusedWholeWithNothingChanged) {
    batch::BatchRun b;
    // Round 2 has several requests (the first generation's mutations).
    b.cfg.batch.replies = {b.answer(b.first.batch_file, evolving, "replies-1.jsonl").string()};
    SearchResult second = b.run();
    ASSERT_EQ(second.stop_reason, "batch");
    ASSERT_GE(second.batch_written, 3);
    const std::string good = testing::answer_batch(read_file(second.batch_file), evolving);
    std::vector<std::string> lines = batch::split(good);
    const std::string before = batch::fingerprint(*b.store), disk_before = batch::on_disk(b.state());
    const fs::path file = b.dir.path() / "replies-2.jsonl";
    auto refused = [&](const std::string& text) {
        write_file_atomic(file, text);
        b.cfg.batch.replies = {b.cfg.batch.replies[0], file.string()};
        std::string why = b.refusal();
        EXPECT_TRUE(batch::contains(why, "Nothing was imported")) << why;
        EXPECT_EQ(batch::fingerprint(*b.store), before) << why;
        EXPECT_EQ(batch::on_disk(b.state()), disk_before) << why;
        b.cfg.batch.replies.pop_back();
        return why;
    };
    // Cut in the middle of its second line: the complete first line is not imported either.
    std::string why = refused(lines[0] + "\n" + lines[1].substr(0, lines[1].size() / 2));
    EXPECT_TRUE(batch::contains(why, file.string() + ":2: the file ends in the middle of this line (cut short")) << why;
    why = refused(lines[0] + "\n" + lines[1] + "\n" + lines[0] + "\n");
    EXPECT_TRUE(batch::contains(why, file.string() + ":3: custom_id '" +
                                         nlohmann::json::parse(lines[0])["custom_id"].get<std::string>() +
                                         "' is in the file twice (lines 1 and 3)")) << why;
    // A reply under this run's id for a request it never wrote.
    nlohmann::json invented = nlohmann::json::parse(lines[1]);
    const std::string cid = invented["custom_id"];
    invented["custom_id"] = cid.substr(0, cid.rfind(':') + 1) + "g7.i0.c0.a0";
    why = refused(lines[0] + "\n" + invented.dump() + "\n");
    EXPECT_TRUE(batch::contains(why, file.string() + ":2: custom_id '" + invented["custom_id"].get<std::string>() +
                                         "' names this run, but this run never wrote that request")) << why;
    why = refused(read_file(second.batch_file));
    EXPECT_TRUE(batch::contains(why, file.string() + ":1: a Batch API input line (a request), not a reply")) << why;
    why = refused("");
    EXPECT_TRUE(batch::contains(why, file.string() + ": no replies in the file (it is empty)")) << why;
    why = refused("\n{\"custom_id\": \"x\\u001b[31m\", \"response\": null, \"error\": {\"message\": \"m\"}}\n");
    EXPECT_TRUE(batch::contains(why, "custom_id 'x\\x1b[31m' was not written by kernelevo search --llm-batch")) << why;

    // The whole file, in an order of its own: imported.
    std::string shuffled = lines[2] + "\n" + lines[0] + "\n" + lines[1] + "\n";
    for (size_t i = 3; i < lines.size(); ++i) shuffled += lines[i] + "\n";
    write_file_atomic(file, shuffled);
    b.cfg.batch.replies.push_back(file.string());
    b.run();
    EXPECT_EQ(b.store->spent().calls, 1 + second.batch_written);
}

// A state written before run ids (custom ids "b<n>:<key>", no run_id in its metadata) imports its
// own replies; its next batch carries the run id it gets then.
TEST(SearchBatch, AStateOfAnOlderVersionImportsItsOwnReplies) {
    batch::BatchRun now;   // the same first round, turned into what the older version wrote
    TempDir dir;
    const fs::path state = dir.path() / "old.db";
    {
        auto old = store::open_store(state.string());
        for (const char* key : {"structure", "task_name", "config", "elapsed_s", "stop_reason"})
            if (auto v = now.store->get_meta(key)) old->put_meta(key, *v);
        std::vector<store::BatchRequest> rows = now.store->batch_requests();
        std::string input;
        for (store::BatchRequest& r : rows) {
            r.custom_id = "b" + std::to_string(r.batch) + ":" + r.key;
            r.file = (dir.path() / "gelu-1.jsonl").string();
        }
        for (const std::string& line : batch::lines_of(now.first.batch_file)) {
            nlohmann::json j = nlohmann::json::parse(line);
            j["custom_id"] = "b1:" + parse_batch_custom_id(j["custom_id"]).value().key;
            input += j.dump() + "\n";
        }
        old->add_batch(rows);
        write_file_atomic(dir.path() / "gelu-1.jsonl", input);
        EXPECT_FALSE(old->get_meta("run_id"));
    }
    write_file_atomic(dir.path() / "replies-1.jsonl", testing::answer_batch(read_file(dir.path() / "gelu-1.jsonl"), evolving));
    SearchConfig cfg = batch::config(dir.path());
    cfg.batch.replies = {(dir.path() / "replies-1.jsonl").string()};
    std::vector<std::string> log;
    cfg.log = [&log](const std::string& line) { log.push_back(line); };
    auto store = store::open_store(state.string());
    ScriptedEvaluator evaluator;
    ScriptedProvider never(batch::never);
    SearchResult res = Search(now.task, cfg, Prompts(), never, evaluator, *store).run();
    EXPECT_EQ(res.stop_reason, "batch");
    EXPECT_TRUE(store->find_llm_call("g0.seed.a0"));
    EXPECT_NE(std::find(log.begin(), log.end(), "imported 1 replies from " + (dir.path() / "replies-1.jsonl").string()), log.end());
    // Its new batch names the run id the state got now.
    const std::string run_id = store->get_meta("run_id").value_or("").get<std::string>();
    ASSERT_FALSE(run_id.empty());
    for (const auto& [id, request] : testing::batch_requests_of(read_file(res.batch_file)))
        EXPECT_EQ(id.rfind(run_id + ".gelu_bias.sm_90:b2:", 0), 0u) << id;
    // A reply under an old-style id this state never wrote: refused (whose it is cannot be told).
    fs::path unknown = dir.path() / "unknown.jsonl";
    write_file_atomic(unknown, R"({"custom_id":"b1:g9.i0.c0.a0","response":null,"error":{"code":"x","message":"y"}})" "\n");
    SearchConfig with_unknown = cfg;
    with_unknown.batch.replies.push_back(unknown.string());
    try {
        Search(now.task, with_unknown, Prompts(), never, evaluator, *store).run();
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_TRUE(batch::contains(e.what(), unknown.string() + ":1: custom_id 'b1:g9.i0.c0.a0' is not a request of this "
                                              "run's batch files")) << e.what();
    }
    // A file of another (new) run is refused here too.
    fs::path other = now.answer(now.first.batch_file, evolving, "replies-now.jsonl");
    cfg.batch.replies.push_back(other.string());
    try {
        Search(now.task, cfg, Prompts(), never, evaluator, *store).run();
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_TRUE(batch::contains(e.what(), "the replies of another run of gelu_bias on sm_90 (run " + now.run_id())) << e.what();
    }
}

}  // namespace
}  // namespace kevo::evolve
