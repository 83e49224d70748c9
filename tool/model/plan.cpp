#include "model/plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <regex>
#include <set>

#include "common/error.h"
#include "common/text.h"

namespace kevo::model {
namespace {

using nlohmann::json;

constexpr const char* kRegionStatusNames[] = {KEVO_REGION_STATUS_LIST(KEVO_ENUM_NAME)};
constexpr const char* kRunStatusNames[] = {KEVO_RUN_STATUS_LIST(KEVO_ENUM_NAME)};

// One line naming the file and where in it: "DIR/plan.json: regions[2] (h.0.mlp): task: ...".
[[noreturn]] void fail(const fs::path& file, const std::string& where, const std::string& message) {
    throw UsageError(file.string() + ": " + (where.empty() ? std::string() : where + ": ") + message);
}

const json& need(const fs::path& file, const std::string& where, const json& obj, const char* key, json::value_t type) {
    auto it = obj.find(key);
    if (it == obj.end()) fail(file, where, std::string("missing key \"") + key + "\"");
    const bool number = type == json::value_t::number_float;
    if (number ? !it->is_number() : it->type() != type)
        fail(file, where, std::string("\"") + key + "\" must be " + (number ? "a number" : type == json::value_t::string ? "a string"
                                                                                          : type == json::value_t::array ? "an array"
                                                                                                                        : "an object"));
    return *it;
}

std::string str(const fs::path& file, const std::string& where, const json& obj, const char* key) {
    return need(file, where, obj, key, json::value_t::string).get<std::string>();
}
// An optional string key: "" when absent or not a string (the exporter writes null for "no value").
std::string opt_str(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double num(const fs::path& file, const std::string& where, const json& obj, const char* key) {
    return need(file, where, obj, key, json::value_t::number_float).get<double>();
}

// An optional time: absent or null is none, else a finite number >= 0.
std::optional<double> opt_ms(const fs::path& file, const std::string& where, const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::nullopt;
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
        fail(file, where, std::string("\"") + key + "\" must be a time in milliseconds (a number >= 0) or null");
    return it->get<double>() + 0.0;
}

// The region's task folder, which must lie inside the model folder (symbolic links resolved).
fs::path region_task_file(const Plan& p, const std::string& where, const std::string& task) {
    if (task.empty()) fail(p.file, where, "\"task\" is empty (a region with status \"task\" names its task folder)");
    if (fs::path(task).is_absolute())
        fail(p.file, where, "task \"" + task + "\" is an absolute path; it must be a folder inside " + p.dir.string());
    std::error_code ec;
    const fs::path root = fs::weakly_canonical(p.dir, ec);
    const fs::path folder = fs::weakly_canonical(p.dir / task, ec);
    auto rel = folder.lexically_relative(root);
    if (ec || rel.empty() || *rel.begin() == ".." || rel == ".")
        fail(p.file, where, "task \"" + task + "\" leaves the model folder " + p.dir.string());
    if (!fs::is_directory(folder))
        fail(p.file, where, "task folder " + (p.dir / task).string() + " does not exist (was the model folder copied whole?)");
    if (!fs::is_regular_file(folder / "task.json"))
        fail(p.file, where, "task folder " + (p.dir / task).string() + " has no task.json");
    return folder / "task.json";
}

Region read_region(const Plan& p, const json& r, size_t i) {
    std::string where = "regions[" + std::to_string(i) + "]";
    if (!r.is_object()) fail(p.file, where, "must be an object");
    Region g;
    g.name = str(p.file, where, r, "name");
    where += " (" + g.name + ")";
    g.task_name = str(p.file, where, r, "task_name");
    static const std::regex identifier("[A-Za-z_][A-Za-z0-9_]*");
    if (!std::regex_match(g.task_name, identifier))  // it names files: search/<task_name>.db
        fail(p.file, where, "task_name \"" + g.task_name + "\" is not an identifier (letters, digits and _)");
    const std::string status = str(p.file, where, r, "status");
    if (auto s = enum_of_name<RegionStatus>(kRegionStatusNames, status)) g.status = *s;
    else fail(p.file, where, "unknown status \"" + status + "\" (expected " + enum_names_text(kRegionStatusNames) +
              ")");
    g.share = num(p.file, where, r, "share") + 0.0;  // + 0.0: -0 is 0
    if (!std::isfinite(g.share) || g.share < 0 || g.share > 1.001)  // a fraction of the model's time
        fail(p.file, where, "\"share\" must be a number from 0 to 1 (a fraction of the model's time)");
    g.kind = opt_str(r, "kind");
    g.reason = opt_str(r, "reason");
    if (r.contains("time_ms") && r["time_ms"].is_number()) g.time_ms = r["time_ms"].get<double>();
    g.compile_ms = opt_ms(p.file, where, r, "compile_ms");
    g.floor_ms = opt_ms(p.file, where, r, "floor_ms");
    if (r.contains("repeats") && r["repeats"].is_number_integer()) g.repeats = std::max(0, r["repeats"].get<int>());
    if (g.searched()) {
        g.task = str(p.file, where, r, "task");
        g.task_file = region_task_file(p, where, g.task);
        // A task with repeats (regions computing the same, which run its kernel) covers their time too.
        if (r.contains("share_with_repeats")) {
            const double with = num(p.file, where, r, "share_with_repeats");
            if (!std::isfinite(with) || with < g.share) fail(p.file, where, "\"share_with_repeats\" must be a number >= \"share\"");
            if (with > 1.001)
                fail(p.file, where, "\"share_with_repeats\" must be at most 1 (a fraction of the model's time)");
            g.share = with;
        }
    }
    if (g.status == RegionStatus::repeat) g.same_as = str(p.file, where, r, "same_as");
    return g;
}

}  // namespace

const char* region_status_name(RegionStatus s) { return enum_name(kRegionStatusNames, s); }
const char* run_status_name(RunStatus s) { return enum_name(kRunStatusNames, s); }

std::vector<const Region*> Plan::searched() const {
    std::vector<const Region*> out;
    for (const auto& r : regions)
        if (r.searched()) out.push_back(&r);
    return out;
}

Plan load_plan(const fs::path& dir) {
    Plan p;
    p.dir = fs::absolute(dir).lexically_normal();
    p.file = p.dir / "plan.json";
    if (!fs::is_directory(p.dir)) throw SettingError({settings::kModelDir}, "{model.dir}: " + dir.string() + " is not a folder");
    if (!fs::exists(p.file))
        throw UsageError(p.file.string() + ": no plan.json (a model folder is written by kernelevo.export_model() or "
                         "`kernelevo import kernelbench` of a level-3 problem)");
    json j;
    try {
        j = json::parse(read_input_file(p.file, "a model plan (plan.json)"));
    } catch (const json::exception& e) {
        fail(p.file, "", std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) fail(p.file, "", "must be a JSON object");
    const std::string format = str(p.file, "", j, "format");
    if (format != kPlanFormat)
        fail(p.file, "", "format \"" + format + "\" is not " + kPlanFormat + " (written by another version of KernelEvo?)");
    p.model = str(p.file, "", j, "model");
    p.source = opt_str(j, "source");
    p.precision = opt_str(j, "precision");
    p.device = opt_str(j, "device");
    if (j.contains("total_ms") && j["total_ms"].is_number()) p.total_ms = j["total_ms"].get<double>();
    if (j.contains("threshold") && j["threshold"].is_number()) p.threshold = j["threshold"].get<double>();
    p.compile_total_ms = opt_ms(p.file, "", j, "compile_total_ms");
    p.compile_note = opt_str(j, "compile");
    const json& regions = need(p.file, "", j, "regions", json::value_t::array);
    std::set<std::string> names, task_names;
    for (size_t i = 0; i < regions.size(); ++i) {
        Region g = read_region(p, regions[i], i);
        if (!names.insert(g.name).second) fail(p.file, "regions[" + std::to_string(i) + "]", "duplicate name \"" + g.name + "\"");
        if (!task_names.insert(g.task_name).second)
            fail(p.file, "regions[" + std::to_string(i) + "]", "duplicate task_name \"" + g.task_name + "\"");
        p.regions.push_back(std::move(g));
    }
    return p;
}

std::vector<long> split_budget(const std::vector<double>& shares, long total_s, double floor_fraction) {
    const size_t n = shares.size();
    std::vector<long> out(n, 0);
    if (n == 0 || total_s <= 0) return out;
    double sum = 0;
    for (double s : shares) sum += std::max(0.0, s);
    std::vector<double> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = sum > 0 ? std::max(0.0, shares[i]) / sum : 1.0 / n;
    // Water-filling: regions below the floor get the floor, the others share the rest in proportion.
    const double floor_w = std::clamp(floor_fraction, 0.0, 1.0) / n;
    std::vector<bool> floored(n, false);
    for (bool changed = true; changed;) {
        changed = false;
        double rest = 1, free_sum = 0;
        for (size_t i = 0; i < n; ++i) {
            if (floored[i]) rest -= floor_w;
            else free_sum += w[i];
        }
        for (size_t i = 0; i < n; ++i) {
            if (floored[i]) continue;
            double v = free_sum > 0 ? w[i] / free_sum * rest : rest / n;
            if (v < floor_w - 1e-12) {
                floored[i] = changed = true;
            }
        }
        if (!changed)
            for (size_t i = 0; i < n; ++i) w[i] = floored[i] ? floor_w : free_sum > 0 ? w[i] / free_sum * rest : rest / n;
    }
    // Whole seconds (at least 1 each when the total allows), the remainders to the largest fractions.
    const long least = total_s >= static_cast<long>(n) ? 1 : 0;
    long given = 0;
    std::vector<double> frac(n);
    for (size_t i = 0; i < n; ++i) {
        const double exact = w[i] * static_cast<double>(total_s);
        out[i] = std::max(least, static_cast<long>(std::floor(exact)));
        frac[i] = exact - std::floor(exact);
        given += out[i];
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return frac[a] > frac[b]; });
    for (size_t k = 0; given < total_s; k = (k + 1) % n, ++given) ++out[order[k]];
    // (a floor of 1 s may overshoot a tiny total: take it back from the largest)
    while (given > total_s) {
        auto it = std::max_element(out.begin(), out.end());
        if (*it <= least) break;
        --*it;
        --given;
    }
    return out;
}

const RegionRun* Summary::find(const std::string& task_name) const {
    for (const auto& r : regions)
        if (r.task_name == task_name) return &r;
    return nullptr;
}

nlohmann::json Summary::to_json() const {
    json rs = json::array();
    for (const auto& r : regions)
        rs.push_back({{"name", r.name}, {"task_name", r.task_name}, {"budget_s", r.budget_s},
                      {"status", run_status_name(r.status)},
                      {"exit_code", r.exit_code ? json(*r.exit_code) : json()},
                      {"best_speedup", r.best_speedup ? json(*r.best_speedup) : json()},
                      {"best_over", r.over}, {"stop_reason", r.stop_reason}, {"elapsed_s", r.elapsed_s},
                      {"state", r.state}, {"log", r.log}, {"not_cached", r.not_cached}});
    return {{"format", kSummaryFormat}, {"precision", precision}, {"regions", rs}};
}

void write_summary(const fs::path& file, const Summary& s) { write_file_atomic(file, s.to_json().dump(2) + "\n"); }

Summary read_summary(const fs::path& file) {
    Summary s;
    if (!fs::exists(file)) return s;
    json j;
    try {
        j = json::parse(read_input_file(file, "a model search summary (summary.json)"));
    } catch (const json::exception& e) {
        fail(file, "", std::string("not valid JSON: ") + e.what() + " (remove it to start the model's search over)");
    }
    if (!j.is_object() || opt_str(j, "format") != kSummaryFormat)
        fail(file, "", std::string("not a ") + kSummaryFormat + " summary (remove it to start the model's search over)");
    try {
        s.precision = j.value("precision", "");
        const json& rs = need(file, "", j, "regions", json::value_t::array);
        for (size_t i = 0; i < rs.size(); ++i) {
            const std::string where = "regions[" + std::to_string(i) + "]";
            if (!rs[i].is_object()) fail(file, where, "must be an object");
            RegionRun r;
            r.name = str(file, where, rs[i], "name");
            r.task_name = str(file, where, rs[i], "task_name");
            const std::string status = str(file, where, rs[i], "status");
            if (auto st = enum_of_name<RunStatus>(kRunStatusNames, status)) r.status = *st;
            else fail(file, where, "unknown status \"" + printable(status) + "\" (expected " +
                      enum_names_text(kRunStatusNames) + "; remove it to start the model's search over)");
            r.budget_s = rs[i].value("budget_s", 0L);
            if (rs[i].contains("exit_code") && rs[i]["exit_code"].is_number_integer()) r.exit_code = rs[i]["exit_code"].get<int>();
            if (rs[i].contains("best_speedup") && rs[i]["best_speedup"].is_number()) r.best_speedup = rs[i]["best_speedup"].get<double>();
            if (rs[i].contains("best_over") && rs[i]["best_over"].is_object()) r.over = rs[i]["best_over"];
            r.stop_reason = rs[i].value("stop_reason", "");
            r.elapsed_s = rs[i].value("elapsed_s", 0.0);
            r.state = rs[i].value("state", "");
            r.log = rs[i].value("log", "");
            r.not_cached = rs[i].value("not_cached", "");
            s.regions.push_back(std::move(r));
        }
    } catch (const json::exception& e) {  // a value of the wrong type
        fail(file, "", std::string("damaged: ") + e.what() + " (remove it to start the model's search over)");
    }
    return s;
}

}  // namespace kevo::model
