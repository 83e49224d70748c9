#include "sol/annotate.h"

namespace kevo::sol {

std::pair<double, std::string> bandwidth_of(Validator& validator) {
    // The lead's runner measures the copy bandwidth once per device (Validator::measured_bandwidth_gbs());
    // until that lands here, the datasheet peak stands in and says so.
    const DeviceInfo& d = validator.device();
    if (d.present && d.mem_bandwidth_gbs > 0) return {d.mem_bandwidth_gbs, "datasheet peak"};
    return {0, "unknown"};
}

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
    if (!r.ok() || !(gbs > 0)) return;
    auto times = kernel_times(r, task);
    if (times.empty()) return;
    Sol s = measure(limits(task, gbs, source, r.arch, sm_count), times);
    if (s.sets.empty()) return;
    if (!r.details.is_object()) r.details = nlohmann::json::object();
    r.details["sol"] = s.to_json();
}

}  // namespace kevo::sol
