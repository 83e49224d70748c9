// The cache use cases but `add` (cache_add.cpp) and `stats` (cache_stats.cpp): the current tasks,
// status, remove, prune, the compiled-object cache. Moved from tool/commands/cache_command.cpp.
#include "workflows/cache.h"

#include "common/arch.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/suggest.h"
#include "language/registry.h"
#include "sol/sol.h"

namespace kevo::workflows {
namespace fs = std::filesystem;

namespace {

std::string input_error_text(CacheInputError::Kind kind, const std::string& path, const std::string& detail) {
    using K = CacheInputError::Kind;
    switch (kind) {
        case K::cache_not_a_directory: return "the cache " + path + " is not a directory";
        case K::no_build_tree: return path + " does not exist (the build tree was not configured with kernelevo_optimize())";
        case K::unreadable_lookup: return "cannot read " + path + ": " + detail + " (re-run cmake)";
        case K::prune_without_tasks: return "telling stale entries needs the current tasks (task files or a configured build tree)";
        case K::unused_without_build: return "telling unused entries needs a configured build tree (what the build wants)";
    }
    return path;
}

// The --model part of a suggested search command: the models given, else a NAME to fill in
// (search has no default model; status then says so below its list).
std::string model_args(const std::vector<std::string>& models) {
    if (models.empty()) return " --model NAME";
    std::string s;
    for (const auto& m : models) s += " --model " + shell_quote(m);
    return s;
}

void require_directory(const std::string& cache_dir) {
    if (!fs::is_directory(cache_dir)) throw CacheInputError(CacheInputError::Kind::cache_not_a_directory, cache_dir);
}

}  // namespace

CacheInputError::CacheInputError(Kind k, std::string p, std::string d)
    : UsageError(input_error_text(k, p, d)), kind(k), path(std::move(p)), detail(std::move(d)) {}

std::map<std::string, Task> collect_tasks(const std::vector<std::string>& task_files, const std::string& build_dir) {
    std::map<std::string, Task> tasks;
    std::vector<fs::path> files(task_files.begin(), task_files.end());
    if (!build_dir.empty()) {
        fs::path root = fs::path(build_dir) / "kernelevo";
        if (!fs::is_directory(root)) throw CacheInputError(CacheInputError::Kind::no_build_tree, root.string());
        for (const auto& d : fs::directory_iterator(root))
            if (fs::is_regular_file(d.path() / "task.json")) files.push_back(d.path() / "task.json");
    }
    for (const auto& f : files) {
        Task t = load_task(f);
        tasks.emplace(t.name, std::move(t));
    }
    return tasks;
}

std::map<std::string, cache::TaskHashes> hashes_of(const std::map<std::string, Task>& tasks) {
    std::map<std::string, cache::TaskHashes> out;
    for (const auto& [name, t] : tasks) out.emplace(name, cache::TaskHashes::of(t));
    return out;
}

std::map<std::string, std::set<std::string>> wanted_arches(const std::string& build_dir,
                                                           std::map<std::string, double>* min_speedups) {
    std::map<std::string, std::set<std::string>> wanted;
    if (build_dir.empty()) return wanted;
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(fs::path(build_dir) / "kernelevo", ec)) {
        fs::path f = d.path() / "lookup.json";
        if (!fs::is_regular_file(f)) continue;
        try {
            nlohmann::json j = nlohmann::json::parse(read_file(f));
            auto& arches = wanted[j.at("function").get<std::string>()];
            for (const auto& a : j.at("architectures")) arches.insert(a.at("arch").get<std::string>());
            if (min_speedups && j.contains("min_speedup"))  // (a build configured before it was recorded: none)
                (*min_speedups)[j.at("function").get<std::string>()] = j.at("min_speedup").get<double>();
        } catch (const std::exception& e) {
            throw CacheInputError(CacheInputError::Kind::unreadable_lookup, f.string(), e.what());
        }
    }
    return wanted;
}

nlohmann::json StatusRow::to_json() const {
    const cache::Lookup& l = lookup;
    nlohmann::json row{{"function", function}, {"arch", arch}, {"state", cache::state_name(l.state)},
                       {"checked_against_task", checked_against_task}, {"reason", l.reason},
                       {"source", l.source.string()}, {"metadata", l.metadata.string()},
                       {"validated", nullptr}};
    if (wanted_by_build) row["wanted_by_build"] = *wanted_by_build;
    row["min_speedup"] = min_speedup;
    row["kept_out"] = kept_out.empty() ? nlohmann::json() : nlohmann::json(kept_out);
    if (checked_against_task) row["search_command"] = search_command;
    if (l.meta) {
        row["speedup"] = l.meta->speedup;
        row["date"] = l.meta->date;
        row["origin"] = l.meta->origin;
        row["model"] = l.meta->model;
        row["validated"] = l.meta->validated;
        row["gpu"] = l.meta->gpu;
        row["toolkit"] = l.meta->toolkit;
        row["libtorch"] = l.meta->libtorch;
        row["summary"] = sol::result_summary(l.meta->validation);  // per-shape speedups, speed of light
        row["backend"] = l.meta->backend;
        const CandidateLanguage* language = language::named(l.meta->backend);  // its version under the facts' own key
        if (language && !language->version_fact().empty() && l.meta->facts.is_object())
            row[language->version_fact()] = l.meta->facts.value(language->version_fact(), "");
    }
    return row;
}

CacheStatus cache_status(const CacheStatusRequest& a) {
    // A missing cache directory is an empty cache (as for stats); something else there is an error.
    std::error_code ec;
    if (fs::exists(a.cache_dir, ec) && !fs::is_directory(a.cache_dir, ec))
        throw CacheInputError(CacheInputError::Kind::cache_not_a_directory, a.cache_dir);
    auto tasks = collect_tasks(a.tasks, a.build_dir);
    const auto hashes = hashes_of(tasks);
    std::map<std::string, double> min_speedups;  // the build's, where it recorded one
    auto wanted = wanted_arches(a.build_dir, &min_speedups);
    std::map<std::string, std::set<std::string>> rows;  // function -> arches
    for (const auto& e : cache::list_entries(a.cache_dir)) rows[e.function].insert(e.arch);
    for (const auto& [name, t] : tasks) rows[name];  // functions with a task but no entry at all
    for (const auto& [name, arches] : wanted) rows[name].insert(arches.begin(), arches.end());
    // Every function known from a task is checked against every arch seen anywhere in the cache.
    std::set<std::string> all_arches;
    for (const auto& [f, arches] : rows) all_arches.insert(arches.begin(), arches.end());

    CacheStatus out;
    out.tasks = tasks.size();
    for (auto& [function, arches] : rows) {
        auto t = tasks.find(function);
        const bool checked = t != tasks.end();
        const cache::TaskHashes* h = checked ? &hashes.at(function) : nullptr;
        if (checked) arches.insert(all_arches.begin(), all_arches.end());
        for (const auto& arch : arches) {
            StatusRow row;
            row.function = function;
            row.arch = arch;
            row.lookup = cache::lookup(a.cache_dir, function, arch, h);
            row.checked_against_task = checked;
            auto m = min_speedups.find(function);
            row.min_speedup = a.min_speedup.value_or(m != min_speedups.end() ? m->second : cache::kDefaultMinSpeedup);
            if (row.lookup.state == cache::State::valid)
                row.kept_out = cache::kept_out(*row.lookup.meta, row.min_speedup);
            auto w = wanted.find(function);
            if (!a.build_dir.empty()) row.wanted_by_build = w != wanted.end() && w->second.count(arch);
            if (checked)
                row.search_command = "kernelevo search --task " + shell_quote(t->second.file.string()) + " --out " +
                                     shell_quote(a.cache_dir) + " --arch " + arch + model_args(a.models);
            const bool unused = row.lookup.state != cache::State::valid || !row.kept_out.empty();
            if (unused) ++out.problems;
            // The architectures the build wants that the cache lacks (missing, present but not valid, kept out).
            if (row.wanted_by_build.value_or(false) && unused) out.lacking.push_back(row);
            out.rows.push_back(std::move(row));
        }
    }
    return out;
}

std::vector<fs::path> cache_remove(const CacheRemoveRequest& a) {
    require_directory(a.cache_dir);
    std::set<std::string> functions, arches;
    for (const auto& e : cache::list_entries(a.cache_dir)) functions.insert(e.function);
    if (!functions.count(a.function)) {
        auto near = closest(a.function, std::vector<std::string>(functions.begin(), functions.end()));
        throw UsageError("no function '" + a.function + "' in the cache " + a.cache_dir +
                         (near.empty() ? "" : "; did you mean '" + near.front() + "'?"));
    }
    for (const auto& e : cache::list_entries(a.cache_dir))
        if (e.function == a.function) arches.insert(e.arch);
    std::vector<std::string> targets;
    if (a.arches.empty()) targets.assign(arches.begin(), arches.end());
    for (const auto& given : a.arches) {
        std::string arch = normalize_arch(given);
        if (!arches.count(arch)) {
            std::string have;
            for (const auto& x : arches) have += (have.empty() ? "" : " ") + x;
            throw UsageError("the cache has no " + a.function + " kernel for " + arch + " (it has " + have + ")");
        }
        targets.push_back(arch);
    }
    std::vector<fs::path> removed;
    for (const auto& arch : targets) {
        if (!a.dry_run) cache::remove_entry(a.cache_dir, a.function, arch);
        removed.push_back(cache::source_path(a.cache_dir, a.function, arch));
    }
    return removed;
}

namespace {

// Why prune deletes the entry ("": it does not): stale against its task, or (unused) not wanted.
std::string prune_reason(const CachePruneRequest& a, const cache::EntryName& e, const cache::Lookup& plain,
                         const std::map<std::string, cache::TaskHashes>& hashes,
                         const std::map<std::string, std::set<std::string>>& wanted) {
    std::string why;
    if (auto t = hashes.find(e.function); t != hashes.end()) {
        cache::Lookup l = cache::lookup(a.cache_dir, e.function, e.arch, &t->second);
        if (l.state == cache::State::stale && plain.state == cache::State::valid) why = "stale: " + l.reason;
    }
    if (why.empty() && a.unused && plain.state == cache::State::valid) {
        auto w = wanted.find(e.function);
        if (w == wanted.end()) why = "unused: the build has no kernelevo_optimize(" + e.function + ")";
        else if (!w->second.count(e.arch)) why = "unused: the build does not target " + e.arch;
    }
    return why;
}

}  // namespace

CachePrune cache_prune(const CachePruneRequest& a) {
    require_directory(a.cache_dir);
    if (a.tasks.empty() && a.build_dir.empty()) throw CacheInputError(CacheInputError::Kind::prune_without_tasks, "");
    if (a.unused && a.build_dir.empty()) throw CacheInputError(CacheInputError::Kind::unused_without_build, "");
    const auto hashes = hashes_of(collect_tasks(a.tasks, a.build_dir));
    auto wanted = wanted_arches(a.build_dir);
    CachePrune out;
    for (const auto& e : cache::list_entries(a.cache_dir)) {
        // Hand edits and half-written entries are never deleted by prune: they may be someone's work.
        cache::Lookup plain = cache::lookup(a.cache_dir, e.function, e.arch, "", "");
        PruneStep step{e.function, e.arch, PruneStep::Action::removed, prune_reason(a, e, plain, hashes, wanted), "", ""};
        // Never through a link out of the cache: such an entry is kept, with the reason.
        if (std::string linked = cache::linked_folder(a.cache_dir, e.function); !step.why.empty() && !linked.empty()) {
            ++out.kept;
            step.action = PruneStep::Action::kept_linked;
            step.linked = linked;
            out.steps.push_back(step);
            continue;
        }
        if (step.why.empty()) {
            if (plain.state != cache::State::valid) {
                ++out.kept;
                step.action = PruneStep::Action::kept_broken;
                step.reason = plain.reason;
                out.steps.push_back(step);
            }
            continue;
        }
        if (!a.dry_run) cache::remove_entry(a.cache_dir, e.function, e.arch);
        ++out.removed;
        out.steps.push_back(step);
    }
    return out;
}

ObjectCacheStats object_cache_stats() {
    ObjectCacheStats s;
    s.root = cache_root();
    s.areas = cache::object_stats(s.root);
    for (const auto& a : s.areas) {
        s.files += a.files;
        s.bytes += a.bytes;
    }
    return s;
}

}  // namespace kevo::workflows
