#include "evolve/prompt_text.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "common/fs.h"
#include "device/tolerance.h"
#include "evolve/archive.h"
#include "sol/sol.h"
#include "task/init_kind.h"

namespace kevo::evolve {

namespace {

std::string num(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s.precision(digits);
    s << std::fixed << v;
    return s.str();
}

std::set<std::string> tokens(const std::string& source) {
    std::set<std::string> out;
    std::istringstream in(normalize_source(source));
    std::string t;
    while (in >> t) out.insert(t);
    return out;
}

double distance(const std::set<std::string>& a, const std::set<std::string>& b) {
    if (a.empty() && b.empty()) return 0;
    size_t common = 0;
    for (const auto& t : a) common += b.count(t);
    return 1.0 - static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

const nlohmann::json* sol_json(const nlohmann::json& d) {
    if (!d.is_object()) return nullptr;
    if (d.contains("sol") && d["sol"].is_object()) return &d["sol"];
    if (d.contains("details") && d["details"].is_object() && d["details"].contains("sol")) return &d["details"]["sol"];
    return nullptr;
}

}  // namespace

std::string describe_init(const Init& i) {
    const std::string& k = i.kind;
    if (k == "randn") return "normal (mean " + num(i.a) + ", std " + num(i.b) + ")";
    if (k == "rand") return "uniform in [" + num(i.a) + ", " + num(i.b) + ")";
    if (k == "randint") return "integers in [" + num(i.a) + ", " + num(i.b) + ")";
    if (k == "ones") return "all ones";
    if (k == "zeros") return "all zeros";
    if (k == "full") return "every element " + num(i.a);
    if (k == "arange") return "0, 1, 2, ... in flat order";
    if (k == "file" && i.parameter)
        return "a model's weights: the file's values on some calls, other values (moved and perturbed by the judge) on "
               "the others; read them on every call and keep no copy";
    // Kinds without a wording here: the init-kind table's own description.
#define KEVO_INIT_DESCRIBE_(e, n, d) \
    if (k == n) return std::string(n) + ": " + d;
    KEVO_INIT_KIND_LIST(KEVO_INIT_DESCRIBE_)
#undef KEVO_INIT_DESCRIBE_
    return k;
}

std::string describe_task(const Task& t) {
    std::ostringstream s;
    auto shape = [](const TensorSpec& spec) {
        std::string r = std::string(dtype_name(spec.dtype)) + "[";
        for (size_t i = 0; i < spec.shape.size(); ++i)
            r += (i ? ", " : "") + (spec.shape[i].symbol.empty() ? std::to_string(spec.shape[i].value) : spec.shape[i].symbol);
        return r + "]";
    };
    if (t.reference_show.empty()) s << "Reference function: `" << t.reference_function << "`\n\n";
    s << "Inputs (in order):\n";
    for (const auto& in : t.inputs) s << "- " << in.name << ": " << shape(in) << " (values: " << describe_init(in.init) << ")\n";
    s << "\nOutputs (in order):\n";
    for (const auto& out : t.outputs) s << "- " << out.name << ": " << shape(out) << "\n";
    if (!t.shapes.empty() && !t.shapes[0].empty()) {
        const std::vector<int> timed = t.timed_sets();
        const std::vector<double> weights = t.weights();
        bool all = timed.size() == t.shapes.size();
        s << "\nShape sets (all are checked for correctness; " << (all ? "all" : "those marked") << " are timed, and the fitness is "
          << "the " << (t.timing_weights.empty() ? "" : "weighted ") << "geometric mean of their speedups):\n";
        for (size_t i = 0; i < t.shapes.size(); ++i) {
            s << "-";
            for (const auto& [sym, v] : t.shapes[i]) s << " " << sym << "=" << v;
            auto it = std::find(timed.begin(), timed.end(), static_cast<int>(i));
            if (it != timed.end()) {
                if (!all) s << " (timed)";
                double w = weights[static_cast<size_t>(it - timed.begin())];
                if (!t.timing_weights.empty()) s << " (weight " << num(w) << ")";
            }
            s << "\n";
        }
    }
    s << "\nTolerance: atol " << t.atol << ", rtol " << t.rtol << "; the rule: " << kevo_device::kToleranceRule << ".";
    if (!t.tolerance_policy.empty()) s << " (" << t.tolerance_policy << ")";
    s << "\nPrecision policy " << t.precision.describe() << ".";
    return s.str();
}

std::string describe_reference(const Task& t, size_t max_bytes) {
    auto fenced = [&](const std::string& title, const std::string& language, std::string text) {
        if (text.size() > max_bytes) text = text.substr(0, max_bytes) + "\n[truncated: the file has " + std::to_string(text.size()) + " bytes]";
        if (!text.empty() && text.back() != '\n') text += '\n';
        return "## " + title + "\n\n```" + language + "\n" + text + "```\n";
    };
    if (t.reference_show.empty()) return fenced("Reference implementation (LibTorch)", "cpp", read_file(t.reference_source));
    std::string out;
    for (const auto& f : t.reference_show) out += (out.empty() ? "" : "\n") + fenced(f.title, f.language, read_file(f.path));
    return out;
}

std::string describe_gpu(const DeviceInfo& d, const std::string& arch) {
    if (!d.present) return "Target architecture " + arch + " (no device details available).";
    std::ostringstream s;
    s << d.name << " (" << arch << ", compute capability " << d.cc_major << "." << d.cc_minor << "): " << d.sm_count
      << " SMs, about " << fixed(d.mem_bandwidth_gbs, 0) << " GB/s peak memory bandwidth, "
      << d.l2_bytes / (1024 * 1024) << " MiB L2 cache, " << d.smem_per_block / 1024
      << " KiB shared memory per block (up to " << d.smem_per_block_optin / 1024 << " KiB opt-in, "
      << d.smem_per_sm / 1024 << " KiB per SM), " << d.total_mem / (1024LL * 1024 * 1024) << " GiB device memory.";
    return s.str();
}

std::string describe_limits(const Task& task, const DeviceInfo& device, double measured_gbs, const std::string& arch) {
    auto [gbs, source] = sol::bandwidth_of(device, measured_gbs);
    return sol::limits_text(task, sol::limits(task, gbs, source, arch, device.sm_count));
}

double sol_fraction_of(const nlohmann::json& details) {
    const nlohmann::json* s = sol_json(details);
    return s ? s->value("fraction", 0.0) : 0.0;
}

std::string sol_line_of(const nlohmann::json& details) {
    const nlohmann::json* s = sol_json(details);
    return s ? sol::sol_line(*s) : std::string();
}

std::vector<size_t> pick_inspirations(const std::vector<std::string>& sources, const std::vector<double>& speedups, int parent,
                                      int n) {
    std::vector<size_t> chosen;
    std::vector<size_t> pool;
    for (size_t i = 0; i < sources.size(); ++i)
        if (static_cast<int>(i) != parent) pool.push_back(i);
    if (n <= 0 || pool.empty()) return chosen;
    size_t best = pool[0];
    for (size_t i : pool)
        if (speedups[i] > speedups[best]) best = i;
    chosen.push_back(best);
    std::vector<std::set<std::string>> tok;
    for (const auto& s : sources) tok.push_back(tokens(s));
    while (static_cast<int>(chosen.size()) < n && chosen.size() < pool.size()) {
        size_t pick = SIZE_MAX;
        double far = -1;
        for (size_t i : pool) {
            if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
            double d = parent >= 0 ? distance(tok[i], tok[static_cast<size_t>(parent)]) : 1.0;
            for (size_t c : chosen) d = std::min(d, distance(tok[i], tok[c]));
            if (d > far) far = d, pick = i;
        }
        if (pick == SIZE_MAX) break;
        chosen.push_back(pick);
    }
    return chosen;
}

}  // namespace kevo::evolve
