#include "model/gains.h"

#include <algorithm>
#include <sstream>

#include "cache/cache.h"
#include "common/text.h"

namespace kevo::model {
namespace {

std::optional<double> over(const RegionRun& r, const char* kind) {
    auto it = r.over.find(kind);
    if (it != r.over.end() && it->is_number() && it->get<double>() > 0) return it->get<double>();
    return std::nullopt;
}

const Region* region_of(const Plan& plan, const std::string& task_name) {
    for (const auto& g : plan.regions)
        if (g.task_name == task_name) return &g;
    return nullptr;
}

// The region's speedups and its kernel's time, estimated from the speedups its search measured.
RegionGain gain_of(const Region& g, const RegionRun& r) {
    RegionGain out;
    out.name = g.name;
    out.runs = r.best_speedup && r.not_cached.empty() && *r.best_speedup >= cache::kDefaultMinSpeedup;
    if (!r.best_speedup || !r.not_cached.empty()) return out;
    out.over_eager = over(r, "eager");
    out.over_compile = over(r, "compile");
    if (out.over_eager && g.time_ms > 0) out.kernel_ms = g.time_ms / *out.over_eager;
    else if (out.over_compile && g.compile_ms) out.kernel_ms = *g.compile_ms / *out.over_compile;
    else if (g.time_ms > 0) out.kernel_ms = g.time_ms / *r.best_speedup;  // (the reference: LibTorch's eager ops)
    if (!out.over_eager && out.kernel_ms && g.time_ms > 0) out.over_eager = g.time_ms / *out.kernel_ms;
    if (!out.over_compile && out.kernel_ms && g.compile_ms) out.over_compile = *g.compile_ms / *out.kernel_ms;
    return out;
}

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

}  // namespace

bool budgets_over_compile(const std::vector<const Region*>& regions) {
    return !regions.empty() &&
           std::all_of(regions.begin(), regions.end(), [](const Region* g) { return g->compile_ms.has_value(); });
}

double budget_weight(const Region& r, bool over_compile) {
    if (!over_compile || !r.compile_ms) return r.share;
    return std::max(0.0, *r.compile_ms - r.floor_ms.value_or(0)) * (1 + r.repeats);
}

ModelGains model_gains(const Plan& plan, const Summary& summary) {
    ModelGains m;
    m.eager_ms = m.loaded_ms = plan.total_ms;
    m.compile_ms = m.compiled_loaded_ms = plan.compile_total_ms;
    m.compile_note = plan.compile_note;
    double beaten_ms = 0;
    for (const auto& r : summary.regions) {
        const Region* g = region_of(plan, r.task_name);
        if (!g) continue;
        m.regions.push_back(gain_of(*g, r));
        const RegionGain& k = m.regions.back();
        if (!k.runs || !k.kernel_ms) continue;
        const int n = 1 + g->repeats;
        m.loaded_ms -= n * (g->time_ms - *k.kernel_ms);
        if (m.compiled_loaded_ms && g->compile_ms && k.over_compile && *k.over_compile > 1) {
            *m.compiled_loaded_ms -= n * (*g->compile_ms - *k.kernel_ms);
            beaten_ms += n * *g->compile_ms;
        }
    }
    if (m.eager_ms > 0 && m.loaded_ms > 0) m.over_eager = m.eager_ms / m.loaded_ms;
    if (m.compile_ms && *m.compile_ms > 0) {
        if (*m.compiled_loaded_ms > 0) m.over_compile = *m.compile_ms / *m.compiled_loaded_ms;
        m.compiled_share_beaten = std::min(1.0, beaten_ms / *m.compile_ms);
    }
    return m;
}

nlohmann::json ModelGains::to_json() const {
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : regions)
        rs.push_back({{"name", r.name}, {"runs", r.runs}, {"over_eager", opt(r.over_eager)},
                      {"over_compile", opt(r.over_compile)}, {"kernel_ms", opt(r.kernel_ms)}});
    return {{"eager_ms", eager_ms}, {"loaded_ms", loaded_ms}, {"over_eager", opt(over_eager)},
            {"compile_ms", opt(compile_ms)}, {"compiled_loaded_ms", opt(compiled_loaded_ms)},
            {"over_compile", opt(over_compile)}, {"compiled_share_beaten", opt(compiled_share_beaten)},
            {"compile", compile_ms ? std::string("measured") : compile_note}, {"regions", rs}};
}

std::string ModelGains::text() const {
    std::ostringstream os;
    os << "end to end (estimated from plan.json's times and the regions' speedups, each region whose kernel the model "
          "runs replaced): ";
    os << (over_eager ? format_double("%.2fx over eager", *over_eager) + format_double(" (%.3f", eager_ms) +
                            format_double(" -> %.3f ms)", loaded_ms)
                      : std::string("over eager not known (no eager time in plan.json)"));
    if (over_compile && compiled_share_beaten)
        os << format_double("; %.2fx over torch.compile", *over_compile) + format_double(" (%.3f", *compile_ms) +
                  format_double(" -> %.3f ms", *compiled_loaded_ms) + ", the regions that beat it replaced); "
           << format_double("%.1f%%", 100 * *compiled_share_beaten)
           << " of the compiled model's time is in regions whose kernel beats torch.compile";
    else
        os << "; over torch.compile not known: plan.json has no compiled times ("
           << (compile_note.empty() ? std::string("not measured") : compile_note) << ")";
    os << "\n";
    return os.str();
}

}  // namespace kevo::model
