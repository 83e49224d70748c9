// The search's view of the limits: prompts with input bounds, speed-of-light floors, profiler
// summaries and diverse inspirations; the --target-sol stop; tuning of KEVO_TUNABLE candidates.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/fs.h"
#include "evolve/prompt_text.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

using testing::evolving;
using testing::kernel_source;
using testing::prompt_kind;
using testing::ScriptedEvaluator;
using testing::ScriptedProvider;
using testing::user_prompt;

struct SolRun {
    TempDir dir{"kevo-sol-search"};
    Task task;
    std::unique_ptr<store::Store> store;
    ScriptedEvaluator evaluator;
    SolRun() {
        fs::path ref = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "gelu_bias_ref.cpp";
        nlohmann::json j = {
            {"name", "gelu_bias"},
            {"reference", {{"source", ref.string()}, {"function", "gelu_bias"}}},
            {"inputs", {{{"name", "x"}, {"dtype", "float32"}, {"shape", {"M", "N"}}},
                        {{"name", "bias"}, {"dtype", "float32"}, {"shape", {"N"}}, {"init", {{"kind", "rand"}, {"low", -1}, {"high", 1}}}}}},
            {"outputs", {{{"name", "y"}, {"dtype", "float32"}, {"shape", {"M", "N"}}}}},
            {"shapes", {{{"M", 4096}, {"N", 4096}}, {{"M", 33}, {"N", 1001}}}},
            {"timing", {{"weights", {3, 1}}}}};
        task = parse_task(j, dir.path() / "task.json");
        store = store::open_store((dir.path() / "state.db").string());
    }
    SearchResult run(const SearchConfig& cfg, llm::Provider& provider) {
        Search search(task, cfg, Prompts(), provider, evaluator, *store);
        return search.run();
    }
};

SearchConfig small(int generations) {
    SearchConfig c;
    c.structure.islands = 1;
    c.structure.children = 2;
    c.evolution.generations = generations;
    c.evolution.repair_attempts = 1;
    c.evolution.migration_interval = 0;
    c.evolution.restart_after = 0;
    c.structure.seed = 3;
    return c;
}

const std::string kTunable =
    "#include \"kernelevo/abi.h\"\n"
    "KEVO_TUNABLE(FACTOR, 100, 50 100 150 200)\n"
    "// SPEEDUP=1.0\n"
    "extern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return FACTOR > 0 ? 0 : 1; }\n";

}  // namespace

TEST(Prompts, DescribeInitGivesBounds) {
    auto d = [](const char* kind, double a, double b) {
        Init i;
        i.kind = kind;
        i.a = a;
        i.b = b;
        return describe_init(i);
    };
    EXPECT_EQ(d("randn", 0, 1), "normal (mean 0, std 1)");
    EXPECT_EQ(d("rand", -1, 1), "uniform in [-1, 1)");
    EXPECT_EQ(d("randint", 0, 2), "integers in [0, 2)");
    EXPECT_EQ(d("full", 0.5, 0), "every element 0.5");
    EXPECT_EQ(d("ones", 0, 0), "all ones");
    EXPECT_EQ(d("arange", 0, 0), "0, 1, 2, ... in flat order");
    EXPECT_EQ(d("file", 0, 0), "file: fixed values from a raw file (path)");  // from the init-kind table
    Init param;
    param.kind = "file";
    param.parameter = true;  // the judge varies it: the prompt must not call it fixed
    EXPECT_EQ(describe_init(param), "a model's weights: the file's values on some calls, other values (moved and perturbed by the "
                                    "judge) on the others; read them on every call and keep no copy");
}

TEST(Prompts, InspirationsAreTheBestAndTheMostDifferent) {
    std::vector<std::string> src = {
        "__global__ void a(float* x) { x[0] = 1; }",                                   // the parent
        "__global__ void a(float* x) { x[0] = 2; }",                                   // fastest, near-copy
        "__global__ void a(float* x) { x[0] = 3; }",                                   // near-copy
        "template <int B> __global__ void tiled(const float4* in, float4* out) { __shared__ float s[B]; }",  // different
    };
    std::vector<double> speed = {1.0, 2.0, 1.5, 1.2};
    EXPECT_EQ(pick_inspirations(src, speed, 0, 2), (std::vector<size_t>{1, 3}));
    EXPECT_EQ(pick_inspirations(src, speed, 0, 5), (std::vector<size_t>{1, 3, 2}));
    EXPECT_EQ(pick_inspirations(src, speed, 1, 1), (std::vector<size_t>{2}));
    EXPECT_TRUE(pick_inspirations(src, speed, 0, 0).empty());
}

TEST(SearchSol, PromptsCarryBoundsLimitsAndTheProfile) {
    SolRun r;
    r.evaluator.profile_text = "k [grid (4096, 1, 1), block (256, 1, 1)]: 131 us; DRAM 91% of peak, SM 23%";
    ScriptedProvider provider(evolving);
    r.run(small(2), provider);
    auto reqs = provider.requests();
    ASSERT_FALSE(reqs.empty());
    const std::string& seed = user_prompt(reqs[0]);
    EXPECT_EQ(prompt_kind(reqs[0]), "seed");
    EXPECT_NE(seed.find("- bias: float32[N] (values: uniform in [-1, 1))"), std::string::npos) << seed;
    EXPECT_NE(seed.find("- x: float32[M, N] (values: normal (mean 0, std 1))"), std::string::npos) << seed;
    EXPECT_NE(seed.find("all are timed, and the fitness is the weighted geometric mean"), std::string::npos) << seed;
    EXPECT_NE(seed.find("- M=4096 N=4096 (weight 3)"), std::string::npos) << seed;
    EXPECT_NE(seed.find("## Speed of light"), std::string::npos) << seed;
    // The highest bandwidth known: the datasheet's 4.8 TB/s over the 4.3 a copy measured (a floor is a lower bound).
    EXPECT_NE(seed.find("Memory floors assume 4.80 TB/s (datasheet peak; a copy measured 4.30 TB/s"), std::string::npos) << seed;
    EXPECT_NE(seed.find("- M=4096 N=4096: 128.0 MiB; memory floor 28.0 us (weight 3)"), std::string::npos) << seed;
    // A mutation prompt shows where the parent stands and what the profiler said about the best.
    std::string mutation;
    for (const auto& q : reqs)
        if (prompt_kind(q) == "mutate_full" || prompt_kind(q) == "mutate_diff") mutation = user_prompt(q);
    ASSERT_FALSE(mutation.empty());
    EXPECT_NE(mutation.find("% of the speed of light)"), std::string::npos) << mutation;  // parent_metrics
    EXPECT_NE(mutation.find("\nSpeed of light: "), std::string::npos) << mutation;
    EXPECT_NE(mutation.find(" us; the memory floor is 3.00 us: "), std::string::npos) << mutation;
    // The profile of a new best reaches the prompts that mutate it.
    bool profiled = false;
    for (const auto& q : reqs) profiled = profiled || user_prompt(q).find("Profile (Nsight Compute): k [grid (4096, 1, 1)") != std::string::npos;
    EXPECT_TRUE(profiled);
    EXPECT_GE(r.evaluator.profiles(), 1);
}

TEST(SearchSol, WithoutAProfilerPromptsSayNothingAboutIt) {
    SolRun r;
    ScriptedProvider provider(evolving);
    r.run(small(1), provider);
    for (const auto& q : provider.requests()) EXPECT_EQ(user_prompt(q).find("Profile (Nsight Compute)"), std::string::npos);
}

TEST(SearchSol, StopsAtTheTargetFractionOfTheSpeedOfLight) {
    SolRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(100);
    cfg.stopping.target_sol = 0.6;  // speedup 2x in the scripted evaluator
    SearchResult res = r.run(cfg, provider);
    EXPECT_EQ(res.stop_reason, "target_sol");
    EXPECT_GE(res.progress.best_sol, 0.6);
    EXPECT_LT(res.generations_committed, 100);
    std::string report = report_text(*r.store);
    EXPECT_NE(report.find("stopped: target_sol"), std::string::npos) << report;
    EXPECT_NE(report.find("% of the speed of light"), std::string::npos) << report;  // on the Best: line
    cfg.stopping.target_sol = 1.5;
    EXPECT_THROW(validate(cfg), UsageError);  // the caller checks it (workflows::search_config), once
}

TEST(SearchSol, TunesAPromisingCandidateWithoutTheLlm) {
    SolRun r;
    ScriptedProvider provider(evolving);
    SearchConfig cfg = small(1);
    cfg.structure.initial_source = kTunable;
    SearchResult res = r.run(cfg, provider);
    auto tuned = r.store->find_program("g0.seed.a0.tune");
    ASSERT_TRUE(tuned);
    EXPECT_EQ(tuned->origin, "tune");
    EXPECT_EQ(tuned->status, store::ProgramStatus::ok);
    EXPECT_DOUBLE_EQ(tuned->speedup, 2.0);
    EXPECT_NE(tuned->source.find("KEVO_TUNABLE(FACTOR, 200, 50 100 150 200)"), std::string::npos);
    EXPECT_NE(tuned->feedback.find("Tuned without the LLM: FACTOR=200 (4 variants, strategy grid"), std::string::npos)
        << tuned->feedback;
    EXPECT_TRUE(tuned->details.contains("tune"));
    ASSERT_TRUE(res.best);
    EXPECT_GE(res.best->speedup, 2.0);  // the tuned seed (or better) is what gets cached
    EXPECT_FALSE(r.evaluator.overlapped());
    // The next mutations start from the tuned kernel.
    bool from_tuned = false;
    for (const auto& q : provider.requests())
        from_tuned = from_tuned || user_prompt(q).find("KEVO_TUNABLE(FACTOR, 200") != std::string::npos;
    EXPECT_TRUE(from_tuned);
    // A resume neither tunes nor validates the seed again.
    size_t runs = r.evaluator.runs().size();
    cfg.evolution.generations = 1;
    r.run(cfg, provider);
    EXPECT_EQ(r.evaluator.runs().size(), runs);
    // --tune-evals 0: no tuning.
    SolRun off;
    cfg.evolution.tune_evals = 0;
    off.run(cfg, provider);
    EXPECT_FALSE(off.store->find_program("g0.seed.a0.tune"));
}

}  // namespace kevo::evolve
