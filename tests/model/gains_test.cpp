// tool/model/gains.h (issue 49): the model search's budget follows the gain still possible over torch.compile
// where plan.json timed it (else the eager shares), and its report adds up, from the plan's times and the
// regions' speedups, the model's speedup over eager and over torch.compile and the compiled time in regions that
// beat it.
#include <gtest/gtest.h>

#include "model/gains.h"
#include "model/plan.h"
#include "model_folder.h"

using namespace kevo;
using namespace kevo::model_test;
using nlohmann::json;

namespace {

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

model::RegionRun run(const std::string& name, const std::string& task, double best, json over) {
    model::RegionRun r;
    r.name = name;
    r.task_name = task;
    r.status = model::RunStatus::done;
    r.best_speedup = best;
    r.over = std::move(over);
    return r;
}

TEST(ModelBudget, TheGainStillPossibleOverTorchCompileWhereThePlanTimedIt) {
    TempDir dir;
    make_model_folder(dir.path(), plan_with_compile_times());
    const model::Plan p = model::load_plan(dir.path());
    EXPECT_EQ(p.compile_total_ms, 2.0);
    EXPECT_EQ(p.regions[0].floor_ms, 0.1);
    const auto regions = p.searched();
    ASSERT_TRUE(model::budgets_over_compile(regions));
    // h.0.a: 0.9 - 0.1 ms, h.0.b: 0.5 - 0.3 ms; its repeats' too where it has some.
    EXPECT_NEAR(model::budget_weight(*regions[0], true), 0.8, 1e-12);
    EXPECT_NEAR(model::budget_weight(*regions[1], true), 0.2, 1e-12);
    model::Region twice = *regions[0];
    twice.repeats = 2;
    EXPECT_NEAR(model::budget_weight(twice, true), 2.4, 1e-12);
    // A region the plan did not time under torch.compile: the split falls back to every region's eager share.
    model::Region plain = *regions[1];
    plain.compile_ms.reset();
    EXPECT_FALSE(model::budgets_over_compile({regions[0], &plain}));
    EXPECT_DOUBLE_EQ(model::budget_weight(*regions[1], false), 0.745);

    json bad = plan_with_compile_times();
    bad["regions"][2]["compile_ms"] = -1;
    write_file_atomic(dir.path() / "plan.json", bad.dump());
    try {
        model::load_plan(dir.path());
        ADD_FAILURE() << "a negative time was read";
    } catch (const UsageError& e) {
        EXPECT_TRUE(contains(e.what(), "regions[2] (h.0.b): \"compile_ms\" must be a time in milliseconds"))
            << e.what();
    }
}

TEST(ModelGains, EndToEndOverEagerAndTorchCompileFromThePlansTimes) {
    TempDir dir;
    make_model_folder(dir.path(), plan_with_compile_times());
    const model::Plan p = model::load_plan(dir.path());
    model::Summary s;
    // h.0.a beats torch.compile (1.5x); h.0.b beats eager (1.2x) but not torch.compile (0.4x).
    s.regions = {run("h.0.a", "blk_a", 2.0, {{"eager", 2.0}, {"compile", 1.5}}),
                 run("h.0.b", "blk_b", 1.2, {{"eager", 1.2}, {"compile", 0.4}})};
    model::ModelGains g = model::model_gains(p, s);
    ASSERT_EQ(g.regions.size(), 2u);
    EXPECT_TRUE(g.regions[0].runs && g.regions[1].runs);
    EXPECT_NEAR(*g.regions[0].kernel_ms, 0.5, 1e-12);  // its 1 ms of eager time at 2x
    // Eager: 4 ms, less (1 - 0.5) and (2.98 - 2.98 / 1.2) ms.
    EXPECT_NEAR(g.loaded_ms, 4 - 0.5 - (2.98 - 2.98 / 1.2), 1e-9);
    EXPECT_NEAR(*g.over_eager, 4 / g.loaded_ms, 1e-12);
    // torch.compile: 2 ms, less what h.0.a gains over its 0.9 ms; h.0.b, slower than torch.compile, stays.
    EXPECT_NEAR(*g.compiled_loaded_ms, 1.6, 1e-12);
    EXPECT_NEAR(*g.over_compile, 1.25, 1e-12);
    EXPECT_NEAR(*g.compiled_share_beaten, 0.45, 1e-12);
    EXPECT_TRUE(contains(g.text(), "1.25x over torch.compile (2.000 -> 1.600 ms")) << g.text();
    EXPECT_TRUE(contains(g.text(), "45.0% of the compiled model's time is in regions whose kernel beats torch.compile"))
        << g.text();
    EXPECT_EQ(g.to_json()["over_compile"], 1.25);

    // A best the cache refused, or one slower than its reference (load_model's default minimum), does not run.
    s.regions[0].not_cached = "the second validation disagreed";
    s.regions[1].best_speedup = 0.8;
    g = model::model_gains(p, s);
    EXPECT_FALSE(g.regions[0].runs || g.regions[1].runs);
    EXPECT_DOUBLE_EQ(g.loaded_ms, 4.0);
    EXPECT_EQ(*g.over_compile, 1.0);
    EXPECT_EQ(*g.compiled_share_beaten, 0.0);
}

TEST(ModelGains, APlanWithoutCompiledTimesSaysWhy) {
    TempDir dir;
    json plan = good_plan();
    plan["compile_total_ms"] = nullptr;
    plan["compile"] = "not measured: PyTorch 1.13.1 has no torch.compile (needs 2.0 or newer)";
    make_model_folder(dir.path(), plan);
    const model::Plan p = model::load_plan(dir.path());
    EXPECT_FALSE(model::budgets_over_compile(p.searched()));
    model::Summary s;
    s.regions = {run("h.0.b", "blk_b", 2.0, json::object())};  // a search without baselines: over the reference
    const model::ModelGains g = model::model_gains(p, s);
    EXPECT_NEAR(*g.regions[0].over_eager, 2.0, 1e-12);
    EXPECT_NEAR(*g.over_eager, 4.0 / (4.0 - 2.98 / 2), 1e-9);
    EXPECT_FALSE(g.over_compile.has_value());
    EXPECT_TRUE(contains(g.text(), "over torch.compile not known: plan.json has no compiled times (not measured: "
                                   "PyTorch 1.13.1 has no torch.compile")) << g.text();
    EXPECT_TRUE(g.to_json()["over_compile"].is_null());
}

}  // namespace
