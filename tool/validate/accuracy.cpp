#include "validate/accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "device/tolerance.h"

namespace kevo {

namespace {
using json = nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

// A figure of the judge's (null: not finite, i.e. infinite).
double figure(const json& o, const char* key) {
    auto it = o.find(key);
    if (it == o.end()) return std::nan("");
    return it->is_number() ? it->get<double>() : kInf;
}
json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string percent(double f) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f%%", 100 * f);
    return b;
}
std::string g(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", v);
    return b;
}

// The worst of one output's trials: largest figures, smallest effective tolerance.
void merge(json& acc, const json& o) {
    for (const char* k : {"max_abs_diff", "rel_l2", "tolerance_used"}) {
        double v = figure(o, k);
        if (std::isnan(v)) continue;
        double was = acc.contains(k) ? figure(acc, k) : -kInf;
        acc[k] = num(std::max(v, was));
    }
    for (const char* k : {"atol_effective", "rel_l2_bound", "scale"}) {
        double v = figure(o, k);
        if (std::isnan(v)) continue;
        acc[k] = num(acc.contains(k) ? std::min(v, figure(acc, k)) : v);
    }
    if (o.contains("rtol")) acc["rtol"] = o["rtol"];
    acc["trials"] = acc.value("trials", 0) + 1;
    acc["pass"] = acc.value("pass", true) && o.value("pass", false);
    acc["kernelbench_check"] = acc.value("kernelbench_check", "pass") == "pass" && o.value("kernelbench_check", "fail") == "pass" ? "pass" : "fail";
}
}  // namespace

std::vector<std::string> summarize_accuracy(json& details) {
    std::vector<std::string> warnings;
    auto checks = details.find("checks");
    if (checks == details.end() || !checks->is_array()) return warnings;
    json acc = json::object();
    for (const auto& c : *checks)
        for (const auto& o : c.value("outputs", json::array())) merge(acc[o.value("output", std::string("?"))], o);
    if (acc.empty()) return warnings;
    bool kernelbench = true;
    for (auto& [name, a] : acc.items()) {
        kernelbench = kernelbench && a["kernelbench_check"] == "pass";
        const double used = a.contains("tolerance_used") ? figure(a, "tolerance_used") : 0.0;
        const double norm_used = a.contains("rel_l2") && a.contains("rel_l2_bound")
                                     ? kevo_device::fraction(figure(a, "rel_l2"), figure(a, "rel_l2_bound")) : 0.0;
        a["near_tolerance"] = kevo_device::is_near_tolerance(a["pass"].get<bool>(), used, norm_used);
        if (a["near_tolerance"].get<bool>())
            warnings.push_back("output '" + name + "' is right only to about its tolerance: it used " + percent(used) +
                               " of it (largest |diff| " + g(figure(a, "max_abs_diff")) + ", relative L2 error " + g(figure(a, "rel_l2")) +
                               " against a bound of " + g(figure(a, "rel_l2_bound")) + "), not the task's precision with room to spare");
    }
    details["accuracy"] = acc;
    details["kernelbench_check"] = kernelbench ? "pass" : "fail";
    return warnings;
}

}  // namespace kevo
