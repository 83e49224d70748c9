// tool/model/plan.h: plan.json (good, and every refusal as one line naming the file), the budget
// split by time share, search/summary.json written and read back.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "common/error.h"
#include "model/plan.h"
#include "model_folder.h"

using namespace kevo;
using namespace kevo::model_test;
using nlohmann::json;

namespace {

// The UsageError's message of load_plan(dir), or "" when it loads.
std::string plan_error(const fs::path& dir) {
    try {
        model::load_plan(dir);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

TEST(ModelPlan, ReadsTheRegionsAndResolvesTheTaskFolders) {
    TempDir dir;
    make_model_folder(dir.path());
    model::Plan p = model::load_plan(dir.path());
    EXPECT_EQ(p.model, "Blk");
    EXPECT_EQ(p.precision, "pytorch");
    EXPECT_DOUBLE_EQ(p.total_ms, 4.0);
    ASSERT_EQ(p.regions.size(), 4u);
    EXPECT_EQ(p.regions[1].status, model::RegionStatus::view);
    auto searched = p.searched();
    ASSERT_EQ(searched.size(), 2u);
    EXPECT_EQ(searched[0]->task_name, "blk_a");
    EXPECT_EQ(searched[1]->name, "h.0.b");
    EXPECT_DOUBLE_EQ(searched[1]->share, 0.745);
    EXPECT_TRUE(fs::equivalent(searched[0]->task_file, dir.path() / "regions" / "blk_a" / "task.json"));
    EXPECT_TRUE(searched[0]->task_file.is_absolute());
}

// A task with repeats (export_model's status "repeat": regions computing the same, running its
// kernel) is budgeted by its share with theirs; a repeat has no task and names its task region.
TEST(ModelPlan, ATaskWithRepeatsCoversTheirShareToo) {
    TempDir dir;
    json plan = plan_with_repeat();
    make_model_folder(dir.path(), plan);
    model::Plan p = model::load_plan(dir.path());
    auto searched = p.searched();
    ASSERT_EQ(searched.size(), 2u);
    EXPECT_DOUBLE_EQ(searched[0]->share, 0.25);
    EXPECT_EQ(p.regions[3].status, model::RegionStatus::repeat);
    EXPECT_EQ(p.regions[3].same_as, "h.0.a");
    EXPECT_TRUE(p.regions[3].task.empty());

    plan["regions"][0]["share_with_repeats"] = 0.01;  // less than its own share
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    EXPECT_TRUE(contains(plan_error(dir.path()), "regions[0] (h.0.a): \"share_with_repeats\" must be a number >= \"share\""))
        << plan_error(dir.path());
    plan["regions"][0]["share_with_repeats"] = 0.25;
    plan["regions"][3].erase("same_as");
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    EXPECT_TRUE(contains(plan_error(dir.path()), "regions[3] (h.1.a): missing key \"same_as\"")) << plan_error(dir.path());
}

TEST(ModelPlan, AnotherFormatIsRefusedNamingTheFile) {
    TempDir dir;
    json plan = good_plan();
    plan["format"] = "kernelevo-model-plan/2";
    make_model_folder(dir.path(), plan);
    const std::string e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, (dir.path() / "plan.json").string())) << e;
    EXPECT_TRUE(contains(e, "kernelevo-model-plan/2\" is not kernelevo-model-plan/1")) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(ModelPlan, MissingKeysAndBadJsonAreRefused) {
    TempDir dir;
    json plan = good_plan();
    plan["regions"][2].erase("share");
    make_model_folder(dir.path(), plan);
    std::string e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "regions[2] (h.0.b): missing key \"share\"")) << e;

    plan = good_plan();
    plan["regions"][0].erase("task");
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "regions[0] (h.0.a): missing key \"task\"")) << e;

    plan = good_plan();
    plan["regions"][0]["status"] = "maybe";
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    EXPECT_TRUE(contains(plan_error(dir.path()), "unknown status \"maybe\""));

    plan = good_plan();
    plan["regions"][3]["task_name"] = "blk_a";
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    EXPECT_TRUE(contains(plan_error(dir.path()), "duplicate task_name \"blk_a\""));

    plan = good_plan();
    plan["regions"][0]["task_name"] = "../../x";  // it names the region's state and log files
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    EXPECT_TRUE(contains(plan_error(dir.path()), "regions[0] (h.0.a): task_name \"../../x\" is not an identifier"));

    write_file_atomic(dir.path() / "plan.json", "{\"format\": ");
    e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "plan.json: not valid JSON")) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;

    fs::remove(dir.path() / "plan.json");
    EXPECT_TRUE(contains(plan_error(dir.path()), "no plan.json"));
}

TEST(ModelPlan, ATaskPathThatLeavesTheModelFolderIsRefused) {
    TempDir dir;
    const fs::path model = dir.path() / "model";
    write_region_task(dir.path() / "outside", "blk_x");
    for (const std::string& task : {std::string("../outside"), std::string("regions/../../outside"),
                                    (dir.path() / "outside").string(), std::string("regions/link")}) {
        json plan = good_plan();
        plan["regions"][0]["task"] = task;
        make_model_folder(model, plan);
        fs::create_directory_symlink(dir.path() / "outside", model / "regions" / "link");  // a link out of the folder
        const std::string e = plan_error(model);
        EXPECT_TRUE(contains(e, (model / "plan.json").string() + ": regions[0] (h.0.a): task \"" + task + "\"")) << task << ": " << e;
        EXPECT_TRUE(contains(e, "leaves the model folder") || contains(e, "is an absolute path")) << e;
        fs::remove_all(model);
    }
}

TEST(ModelPlan, AMissingTaskFolderOrTaskFileIsRefused) {
    TempDir dir;
    make_model_folder(dir.path());
    fs::remove(dir.path() / "regions" / "blk_b" / "task.json");
    std::string e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "regions[2] (h.0.b): task folder " + (dir.path() / "regions/blk_b").string() + " has no task.json")) << e;
    fs::remove_all(dir.path() / "regions" / "blk_b");
    e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "regions/blk_b does not exist")) << e;
}

TEST(ModelBudget, SharesNormalisedOverTheSearchedRegionsInWholeSeconds) {
    // 0.6 and 0.2 of a model (the rest stays in PyTorch): 3/4 and 1/4 of the budget.
    EXPECT_EQ(model::split_budget({0.6, 0.2}, 1000), (std::vector<long>{750, 250}));
    EXPECT_EQ(model::split_budget({0, 0, 0}, 90), (std::vector<long>{30, 30, 30}));  // no shares: even
    auto b = model::split_budget({0.5, 0.3, 0.2}, 601);
    EXPECT_EQ(std::accumulate(b.begin(), b.end(), 0L), 601);
    EXPECT_TRUE(b[0] >= 300 && b[0] <= 301 && b[1] >= 180 && b[1] <= 181) << b[0] << " " << b[1];
}

TEST(ModelBudget, ATinyRegionGetsAtLeastATenthOfAnEvenSplit) {
    // Even split of 1000 s over 2: 500 s; a tenth of it is the floor: 50 s.
    EXPECT_EQ(model::split_budget({0.999, 0.001}, 1000), (std::vector<long>{950, 50}));
    // Over 4, floor 50 s each for the two tiny ones; the rest (1900 s) in proportion 3:1.
    EXPECT_EQ(model::split_budget({0.6, 0.2, 0.0001, 0}, 2000), (std::vector<long>{1425, 475, 50, 50}));
    // Too little time for whole seconds each: at least 1 s when the total allows, the total kept.
    auto b = model::split_budget({0.9, 0.05, 0.05}, 3);
    EXPECT_EQ(b, (std::vector<long>{1, 1, 1}));
    EXPECT_EQ(model::split_budget({1, 1}, 0), (std::vector<long>{0, 0}));
}

TEST(ModelSummary, RoundTrip) {
    TempDir dir;
    model::Summary s;
    s.precision = "pytorch";
    model::RegionRun a;
    a.name = "h.0.a";
    a.task_name = "blk_a";
    a.status = model::RunStatus::done;
    a.budget_s = 150;
    a.exit_code = 0;
    a.best_speedup = 1.75;
    a.over = {{"eager", 1.5}};
    a.stop_reason = "time";
    a.state = "search/blk_a.db";
    a.log = "search/blk_a.log";
    model::RegionRun b;
    b.name = "h.0.b";
    b.task_name = "blk_b";
    b.best_speedup = 3.07;  // a best whose confirmation disagreed: the summary keeps why it is not cached
    b.not_cached = "the second validation measured 1.016x, the first 3.071x";
    s.regions = {a, b};
    const fs::path file = dir.path() / "search" / "summary.json";
    model::write_summary(file, s);
    json j = json::parse(read_file(file));
    EXPECT_EQ(j["format"], "kernelevo-model-search/1");
    EXPECT_TRUE(j["regions"][1]["exit_code"].is_null());
    model::Summary r = model::read_summary(file);
    ASSERT_EQ(r.regions.size(), 2u);
    EXPECT_EQ(r.regions[0].status, model::RunStatus::done);
    EXPECT_EQ(r.regions[0].budget_s, 150);
    EXPECT_EQ(r.regions[0].exit_code, 0);
    EXPECT_EQ(r.regions[0].best_speedup, 1.75);
    EXPECT_EQ(r.regions[0].over["eager"], 1.5);
    EXPECT_EQ(r.regions[0].state, "search/blk_a.db");
    EXPECT_EQ(r.regions[1].status, model::RunStatus::pending);
    EXPECT_FALSE(r.regions[1].exit_code.has_value());
    EXPECT_EQ(r.regions[1].best_speedup, 3.07);
    EXPECT_EQ(r.regions[0].not_cached, "");
    EXPECT_EQ(r.regions[1].not_cached, "the second validation measured 1.016x, the first 3.071x");
    ASSERT_NE(r.find("blk_b"), nullptr);
    EXPECT_EQ(r.find("blk_c"), nullptr);

    EXPECT_TRUE(model::read_summary(dir.path() / "none.json").regions.empty());  // never written: empty
    write_file_atomic(file, "{\"format\": \"kernelevo-model-search/1\", \"regions\": [{\"name\": \"a\", \"task_name\": \"a\", "
                            "\"status\": \"done\", \"budget_s\": \"ten\"}]}");
    try {
        model::read_summary(file);
        ADD_FAILURE() << "a damaged summary was read";
    } catch (const UsageError& e) {
        EXPECT_TRUE(contains(e.what(), file.string() + ": damaged: ")) << e.what();
    }
    write_file_atomic(file, "{\"format\": \"something-else\", \"regions\": []}");
    try {
        model::read_summary(file);
        ADD_FAILURE() << "another format was read";
    } catch (const UsageError& e) {
        EXPECT_TRUE(contains(e.what(), file.string() + ": not a kernelevo-model-search/1 summary")) << e.what();
    }
    // A status no kernelevo writes is named, never read as one of the statuses.
    write_file_atomic(file, "{\"format\": \"kernelevo-model-search/1\", \"regions\": [{\"name\": \"a\", "
                            "\"task_name\": \"a\", \"status\": \"exploded\"}]}");
    try {
        model::read_summary(file);
        ADD_FAILURE() << "an unknown status was read";
    } catch (const UsageError& e) {
        EXPECT_TRUE(contains(e.what(), file.string() + ": regions[0]: unknown status \"exploded\" (expected pending, "
                                       "running, done, stopped or failed; remove it")) << e.what();
    }
}

// Every status of a region and of its search round-trips through its name in plan.json and summary.json.
TEST(ModelPlan, EveryStatusRoundTripsThroughItsName) {
    TempDir dir;
    const fs::path file = dir.path() / "summary.json";
    model::Summary s;
#define KEVO_RUN(id) s.regions.push_back({#id, #id, model::RunStatus::id});
    KEVO_RUN_STATUS_LIST(KEVO_RUN)
#undef KEVO_RUN
    model::write_summary(file, s);
    const model::Summary r = model::read_summary(file);
    ASSERT_EQ(r.regions.size(), 5u);
    for (const auto& g : r.regions) EXPECT_EQ(model::run_status_name(g.status), g.name);
#define KEVO_REGION(id) EXPECT_STREQ(model::region_status_name(model::RegionStatus::id), #id);
    KEVO_REGION_STATUS_LIST(KEVO_REGION)
#undef KEVO_REGION
}

}  // namespace

// Issue 50's attacks on plan.json: a share past 100% (1e308 each: their sum overflowed, the table
// printed "inf%") is refused; a share of -0 is read as 0, never "-0.0%".
TEST(ModelPlan, SharesPastTheWholeAreRefused) {
    TempDir dir;
    json plan = good_plan();
    make_model_folder(dir.path(), plan);
    std::string e;
    plan = good_plan();
    plan["regions"][0]["share"] = 1e308;
    plan["regions"][2]["share"] = 1e308;
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "regions[0] (h.0.a): \"share\" must be a number from 0 to 1")) << e;

    plan = good_plan();
    plan["regions"][0]["share"] = -0.0;
    write_file_atomic(dir.path() / "plan.json", plan.dump());
    const model::Plan p = model::load_plan(dir.path());
    EXPECT_FALSE(std::signbit(p.regions[0].share));
}

TEST(ModelPlan, AShareWithRepeatsPastTheWholeIsRefused) {
    TempDir dir;
    json plan = plan_with_repeat();
    plan["regions"][0]["share_with_repeats"] = 1e308;
    make_model_folder(dir.path(), plan);
    const std::string e = plan_error(dir.path());
    EXPECT_TRUE(contains(e, "regions[0] (h.0.a): \"share_with_repeats\" must be at most 1")) << e;
}
