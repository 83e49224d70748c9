#include "validate/annotate.h"

namespace kevo {

std::vector<std::pair<int, double>> kernel_times(const ValidationResult& r, const Task& task) {
    std::vector<std::pair<int, double>> out;
    const auto& shapes = r.details.is_object() && r.details.contains("shapes") ? r.details["shapes"] : nlohmann::json();
    if (shapes.is_array()) {
        for (const auto& s : shapes)
            if (s.is_object() && s.value("kernel_us", 0.0) > 0) out.push_back({s.value("set", 0), s.value("kernel_us", 0.0)});
        if (!out.empty()) return out;
    }
    if (r.kernel_us > 0) out.push_back({task.timed_sets().front(), r.kernel_us});
    return out;
}

void annotate_sol(ValidationResult& r, const Task& task, double gbs, const std::string& source, int sm_count) {
    annotate_sol(r, task, gbs, source, sm_count, kernel_times(r, task));
}

void annotate_sol(ValidationResult& r, const Task& task, double gbs, const std::string& source, int sm_count,
                  const std::vector<std::pair<int, double>>& times) {
    if (!r.ok() || !(gbs > 0) || times.empty()) return;
    // The judge's empty call per timed set (details.timing.sets[].launch_cost): the launch floor
    // is never above it.
    std::vector<std::pair<int, double>> empty;
    const nlohmann::json* timing = r.details.is_object() && r.details.contains("timing") ? &r.details["timing"] : nullptr;
    if (timing && timing->is_object() && timing->contains("sets") && (*timing)["sets"].is_array())
        for (const auto& t : (*timing)["sets"])
            if (t.is_object() && t.contains("launch_cost") && t["launch_cost"].is_object())
                empty.push_back({t.value("shape_set", 0), t["launch_cost"].value("judge_empty_us", 0.0)});
    sol::Sol s = sol::measure(sol::limits(task, gbs, source, r.arch, sm_count), times, empty);
    if (s.sets.empty()) return;
    if (!r.details.is_object()) r.details = nlohmann::json::object();
    r.details["sol"] = s.to_json();
}

void annotate_resources(ValidationResult& r, const CompileResult& compiled) {
    if (compiled.kernels.empty()) return;
    if (!r.details.is_object()) r.details = nlohmann::json::object();
    nlohmann::json k = nlohmann::json::array();
    for (const auto& x : compiled.kernels) k.push_back(x.to_json());
    r.details["resources"] = k;
}

}  // namespace kevo
