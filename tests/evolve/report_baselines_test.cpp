// `kernelevo report` shows the best program's speedups over the PyTorch baselines where the state
// records them (meta kBestBaselinesMeta, stored by `kernelevo search`), each labelled, and
// "not run: <reason>" where it does not, never a 0.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

TEST(ReportBaselines, ShowsTheBestsSpeedupsOverPyTorchOrWhyNot) {
    TempDir dir;
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto store = store::open_store((dir.path() / "state.db").string());
    testing::ScriptedEvaluator evaluator;
    testing::ScriptedProvider provider(testing::evolving);
    SearchConfig cfg;
    cfg.structure.islands = 1;
    cfg.structure.children = 1;
    cfg.evolution.generations = 1;
    cfg.structure.seed = 3;
    SearchResult res = Search(task, cfg, Prompts(), provider, evaluator, *store).run();
    ASSERT_TRUE(res.best);

    // Nothing stored: why not, in the text and the JSON.
    std::string text = report_text(*store);
    EXPECT_NE(text.find("PyTorch baselines: not run: this state records no PyTorch baseline times"), std::string::npos) << text;
    EXPECT_TRUE(report_json(*store)["best"]["baselines"]["not_run"].is_string());

    // What search stores: eager timed, compile not run.
    store->put_meta(kBestBaselinesMeta,
                    {{"program", res.best->id}, {"precision", "pytorch"}, {"torch_version", "2.11.0"}, {"device", "H200"},
                     {"eager", {{"label", "PyTorch eager"}, {"us", 50.0}, {"speedup", 2.5}}},
                     {"compile", {{"label", "torch.compile (Inductor, default mode)"}, {"not_run", "torch.compile failed: no triton"}}}});
    text = report_text(*store);
    EXPECT_NE(text.find("PyTorch baselines (precision pytorch, PyTorch 2.11.0):"), std::string::npos) << text;
    EXPECT_NE(text.find("PyTorch eager 2.500x (50.00 us)"), std::string::npos) << text;
    EXPECT_NE(text.find("torch.compile (Inductor, default mode) not run: torch.compile failed: no triton"), std::string::npos) << text;
    EXPECT_EQ(text.find("0.000x"), std::string::npos) << text;
    nlohmann::json j = report_json(*store)["best"]["baselines"];
    EXPECT_EQ(j["eager"]["speedup"], 2.5);
    EXPECT_EQ(j["compile"]["not_run"], "torch.compile failed: no triton");

    // Stored for another program (an earlier best): not this best's.
    store->put_meta(kBestBaselinesMeta, {{"program", res.best->id + 1000}, {"eager", {{"label", "PyTorch eager"}, {"speedup", 9.0}}}});
    EXPECT_EQ(report_text(*store).find("9.000x"), std::string::npos);
    // A search that timed none says why.
    store->put_meta(kBestBaselinesMeta, {{"not_run", "--no-baselines"}});
    EXPECT_NE(report_text(*store).find("PyTorch baselines: not run: --no-baselines\n"), std::string::npos) << report_text(*store);

    // A search whose fitness was over PyTorch eager: the Best line says so, with that baseline's precision.
    EXPECT_NE(report_text(*store).find("x over the LibTorch reference"), std::string::npos);
    store::Program best = *res.best;
    best.details["fitness_baseline"] = {{"baseline", "eager"}, {"label", "PyTorch eager"}, {"precision", "pytorch"}};
    store->put_program(best);
    text = report_text(*store);
    EXPECT_NE(text.find("x over PyTorch eager (precision pytorch) (program #"), std::string::npos) << text;
}

}  // namespace
}  // namespace kevo::evolve
