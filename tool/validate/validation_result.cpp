// A validation's result as JSON (what `validate --json` prints, what a search stores, what a worker
// sends back), the options a remote validator takes from it, and what a result says about faults
// that are not the kernel's (validate.h).
#include <cmath>

#include "validate/job.h"
#include "validate/validate.h"

namespace kevo {

namespace {
// JSON cannot hold inf/nan: such numbers become null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
}  // namespace

bool is_wall_check_rejection(const ValidationResult& r) {
    return r.status == Status::rejected && r.log.find(kWallCheckPhrase) != std::string::npos;
}

std::string outside_kernel_reason(const ValidationResult& r) {
    if (r.ok()) return "";
    if (r.status == Status::no_device) return "no GPU to validate on";
    if (r.details.is_object()) {
        if (r.details.value("not_attributable", false))
            return "other processes used the GPU while the judge timed the kernel, and the extra time cannot be attributed to it";
        if (r.details.contains("outside_kernel") && r.details["outside_kernel"].is_string()) return r.details["outside_kernel"].get<std::string>();
    }
    return "";
}

nlohmann::json ValidationResult::to_json() const {
    return nlohmann::json{{"status", status_name(status)},
                          {"speedup", num(speedup)},
                          {"kernel_us", num(kernel_us)},
                          {"reference_us", num(reference_us)},
                          {"kernel_spread", num(kernel_spread)},
                          {"reference_spread", num(reference_spread)},
                          {"max_abs_diff", num(max_abs_diff)},
                          {"suspicious", suspicious},
                          {"log", log},
                          {"arch", arch},
                          {"gpu", gpu},
                          {"compile_s", num(compile_s)},
                          {"run_s", num(run_s)},
                          {"trials", trials},
                          {"shapes", shapes_json()},
                          {"confirmed", confirmed},
                          {"details", details}};
}

nlohmann::json ValidationResult::shapes_json() const {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : shapes)
        a.push_back({{"set", s.set}, {"label", s.label}, {"kernel_us", num(s.kernel_us)}, {"reference_us", num(s.reference_us)},
                     {"speedup", num(s.speedup)}, {"weight", s.weight}});
    return a;
}

ValidationResult ValidationResult::from_json(const nlohmann::json& j) {
    ValidationResult r;
    auto d = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; };
    r.status = parse_status(j.value("status", std::string("runtime_error")));
    r.speedup = d("speedup");
    r.kernel_us = d("kernel_us");
    r.reference_us = d("reference_us");
    r.kernel_spread = d("kernel_spread");
    r.reference_spread = d("reference_spread");
    r.max_abs_diff = d("max_abs_diff");
    r.suspicious = j.value("suspicious", false);
    r.log = j.value("log", std::string());
    r.arch = j.value("arch", std::string());
    r.gpu = j.value("gpu", std::string());
    r.compile_s = d("compile_s");
    r.run_s = d("run_s");
    r.trials = j.value("trials", 0);
    r.details = j.value("details", nlohmann::json::object());
    r.confirmed = j.value("confirmed", false);
    if (j.contains("shapes") && j["shapes"].is_array())
        for (const auto& t : j["shapes"]) {
            ShapeTiming s;
            s.set = t.value("set", 0);
            s.label = t.value("label", std::string());
            s.kernel_us = t.value("kernel_us", 0.0);
            s.reference_us = t.value("reference_us", 0.0);
            s.speedup = t.value("speedup", 0.0);
            s.weight = t.value("weight", 1.0);
            r.shapes.push_back(s);
        }
    return r;
}

nlohmann::json portable_options(const ValidateOptions& o) {
    nlohmann::json j = nlohmann::json::object();
#define KEVO_X(f) j[#f] = o.f;
    KEVO_PORTABLE_VALIDATE_OPTIONS(KEVO_X)
#undef KEVO_X
    return j;
}

void apply_portable_options(ValidateOptions& o, const nlohmann::json& j) {
    if (!j.is_object()) return;
#define KEVO_X(f) o.f = j.value(#f, o.f);
    KEVO_PORTABLE_VALIDATE_OPTIONS(KEVO_X)
#undef KEVO_X
}

}  // namespace kevo
