// A hand-made model folder for the tests: two region tasks copied from tests/data/gelu_bias (renamed
// blk_a and blk_b: one kernel serves both), a view region and one below the threshold.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "common/fs.h"

namespace kevo::model_test {

inline const fs::path kData = KEVO_TEST_DATA_DIR;

inline void write_region_task(const fs::path& dir, const std::string& name) {
    fs::create_directories(dir);
    fs::copy_file(kData / "gelu_bias" / "gelu_bias_ref.cpp", dir / "gelu_bias_ref.cpp");
    nlohmann::json t = nlohmann::json::parse(read_file(kData / "gelu_bias" / "task.json"));
    t["name"] = name;
    write_file_atomic(dir / "task.json", t.dump(2));
}

inline nlohmann::json region(const std::string& name, const std::string& task_name, double share, const std::string& status,
                             const std::string& task = "") {
    nlohmann::json r = {{"name", name}, {"task_name", task_name}, {"kind", "pointwise"}, {"nodes", {0, 1}},
                        {"ops", {"aten::gelu"}}, {"time_ms", share * 4}, {"share", share}, {"status", status},
                        {"reason", ""}, {"weights", nlohmann::json::array()}};
    if (!task.empty()) r["task"] = task;
    return r;
}

// plan.json of the model "Blk": h.0.b (75%) and h.0.a (25%) searched, a view and a small region not.
inline nlohmann::json good_plan() {
    return {{"format", "kernelevo-model-plan/1"}, {"model", "Blk"}, {"source", "export_model"}, {"fingerprint", "00"},
            {"precision", "pytorch"}, {"device", "cpu"}, {"inputs", nlohmann::json::array()}, {"total_ms", 4.0},
            {"threshold", 0.01},
            {"regions", {region("h.0.a", "blk_a", 0.25, "task", "regions/blk_a"), region("h.0.view", "blk_view", 0, "view"),
                         region("h.0.b", "blk_b", 0.745, "task", "regions/blk_b"),
                         region("h.0.tiny", "blk_tiny", 0.005, "below_threshold")}}};
}

// good_plan() where h.0.a (5% of the time) has one repeat, h.1.a (20%), in place of h.0.tiny: the
// plan export_model writes for a region computed twice (status "repeat", same_as, share_with_repeats).
inline nlohmann::json plan_with_repeat() {
    nlohmann::json plan = good_plan();
    plan["regions"][0]["share"] = 0.05;
    plan["regions"][0]["repeats"] = 1;
    plan["regions"][0]["share_with_repeats"] = 0.25;
    plan["regions"][3] = region("h.1.a", "blk_h_1_a", 0.2, "repeat");
    plan["regions"][3]["same_as"] = "h.0.a";
    return plan;
}

// good_plan() as export_model writes it where torch.compile was timed (PyTorch 2 on a GPU): the model 2 ms
// compiled; h.0.a (25% of eager time) 0.9 ms compiled over a 0.1 ms floor, h.0.b (74.5%) 0.5 ms over 0.3 ms:
// 0.8 and 0.2 ms still to gain over torch.compile.
inline nlohmann::json plan_with_compile_times() {
    nlohmann::json plan = good_plan();
    plan["compile_total_ms"] = 2.0;
    plan["compile"] = "measured";
    plan["regions"][0]["compile_ms"] = 0.9;
    plan["regions"][0]["floor_ms"] = 0.1;
    plan["regions"][2]["compile_ms"] = 0.5;
    plan["regions"][2]["floor_ms"] = 0.3;
    return plan;
}

inline void make_model_folder(const fs::path& dir, const nlohmann::json& plan = good_plan()) {
    write_region_task(dir / "regions" / "blk_a", "blk_a");
    write_region_task(dir / "regions" / "blk_b", "blk_b");
    write_file_atomic(dir / "plan.json", plan.dump(2));
}

}  // namespace kevo::model_test
