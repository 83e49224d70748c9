// `kernelevo cache status|stats|add|remove|prune|hash`: inspect the committed kernel cache (and what a
// configured build wants of it), add a hand-written or external kernel (validated on the local GPU
// unless --unvalidated), remove entries, prune stale ones, print a task's hashes.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "cache/cache.h"
#include "cli/cli.h"
#include "commands/cache_command.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/process.h"
#include "common/text.h"
#include "compile/arch_support.h"
#include "compile/compile.h"
#include "task/fitness.h"
#include "task/task.h"
#include "triton/backends.h"
#include "triton/launch.h"
#include "validate/annotate.h"
#include "validate/validate.h"


namespace kevo {
namespace fs = std::filesystem;

// Tasks given with --task, plus those kernelevo_optimize() wrote under BUILD/kernelevo/*/task.json.
std::map<std::string, Task> collect_tasks(const std::vector<std::string>& task_files, const std::string& build_dir) {
    std::map<std::string, Task> tasks;
    std::vector<fs::path> files(task_files.begin(), task_files.end());
    if (!build_dir.empty()) {
        fs::path root = fs::path(build_dir) / "kernelevo";
        if (!fs::is_directory(root)) throw UsageError("--build-dir: " + root.string() + " does not exist (configure with kernelevo_optimize() first)");
        for (const auto& d : fs::directory_iterator(root))
            if (fs::is_regular_file(d.path() / "task.json")) files.push_back(d.path() / "task.json");
    }
    for (const auto& f : files) {
        Task t = load_task(f);
        tasks.emplace(t.name, std::move(t));
    }
    return tasks;
}

// Each task's hashes, computed once per function (reference_hash() runs the preprocessor).
std::map<std::string, cache::TaskHashes> hashes_of(const std::map<std::string, Task>& tasks) {
    std::map<std::string, cache::TaskHashes> out;
    for (const auto& [name, t] : tasks) out.emplace(name, cache::TaskHashes::of(t));
    return out;
}

// What the build wants: function -> the architectures kernelevo_optimize() looked up at configure
// time (BUILD/kernelevo/NAME/lookup.json).
namespace {

struct StatusArgs {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks, models;  // models: put into the suggested search commands
    bool json = false;
};

// The --model part of a suggested search command: the models given to `cache status`, else a NAME
// to fill in (search has no default model; status then says so below its list).
std::string model_args(const std::vector<std::string>& models) {
    if (models.empty()) return " --model NAME";
    std::string s;
    for (const auto& m : models) s += " --model " + shell_quote(m);
    return s;
}
struct AddArgs {
    std::string task, kernel, arch, cache_dir, note, origin = "manual", model, python;
    bool unvalidated = false;
};
struct RemoveArgs {
    std::string cache_dir, function;
    std::vector<std::string> arches;
    bool dry_run = false;
};
struct PruneArgs {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks;
    bool unused = false, dry_run = false;
};
struct HashArgs {
    std::string task;
    bool json = false;
};

std::map<std::string, std::set<std::string>> wanted_arches(const std::string& build_dir) {
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
        } catch (const std::exception& e) {
            throw UsageError("--build-dir: cannot read " + f.string() + ": " + e.what() + " (re-run cmake)");
        }
    }
    return wanted;
}

void run_status(const StatusArgs& a, int& rc) {
    // A missing cache directory is an empty cache (as for stats); something else there is an error.
    std::error_code ec;
    if (fs::exists(a.cache_dir, ec) && !fs::is_directory(a.cache_dir, ec))
        throw UsageError("--cache-dir: " + a.cache_dir + " is not a directory");
    auto tasks = collect_tasks(a.tasks, a.build_dir);
    const auto hashes = hashes_of(tasks);
    auto wanted = wanted_arches(a.build_dir);
    std::map<std::string, std::set<std::string>> rows;  // function -> arches
    for (const auto& e : cache::list_entries(a.cache_dir)) rows[e.function].insert(e.arch);
    for (const auto& [name, t] : tasks) rows[name];  // functions with a task but no entry at all
    for (const auto& [name, arches] : wanted) rows[name].insert(arches.begin(), arches.end());
    // Every function known from a task is checked against every arch seen anywhere in the cache.
    std::set<std::string> all_arches;
    for (const auto& [f, arches] : rows) all_arches.insert(arches.begin(), arches.end());

    nlohmann::json out = nlohmann::json::array();
    int problems = 0;
    for (auto& [function, arches] : rows) {
        auto t = tasks.find(function);
        const bool checked = t != tasks.end();
        const cache::TaskHashes* h = checked ? &hashes.at(function) : nullptr;
        if (checked) arches.insert(all_arches.begin(), all_arches.end());
        for (const auto& arch : arches) {
            cache::Lookup l = cache::lookup(a.cache_dir, function, arch, h);
            auto w = wanted.find(function);
            const bool by_build = w != wanted.end() && w->second.count(arch);
            nlohmann::json row{{"function", function}, {"arch", arch}, {"state", cache::state_name(l.state)},
                               {"checked_against_task", checked}, {"reason", l.reason},
                               {"source", l.source.string()}, {"metadata", l.metadata.string()},
                               {"validated", nullptr}};
            if (!a.build_dir.empty()) row["wanted_by_build"] = by_build;
            if (checked) row["search_command"] = "kernelevo search --task " + shell_quote(t->second.file.string()) +
                                                 " --out " + shell_quote(a.cache_dir) + " --arch " + arch + model_args(a.models);
            if (l.meta) {
                row["speedup"] = l.meta->speedup;
                row["date"] = l.meta->date;
                row["origin"] = l.meta->origin;
                row["model"] = l.meta->model;
                row["validated"] = l.meta->validated;
                row["gpu"] = l.meta->gpu;
                row["summary"] = sol::result_summary(l.meta->validation);  // per-shape speedups, speed of light
                row["backend"] = l.meta->backend;
                if (l.meta->backend == "triton" && l.meta->triton.is_object())
                    row["triton_version"] = l.meta->triton.value("triton_version", "");
            }
            if (l.state != cache::State::valid) ++problems;
            out.push_back(row);
        }
    }
    // The architectures the build wants that the cache lacks (missing, or present but not valid).
    nlohmann::json lacking = nlohmann::json::array();
    for (const auto& r : out)
        if (r.value("wanted_by_build", false) && r["state"] != "valid") lacking.push_back(r);
    if (a.json) {
        nlohmann::json j{{"cache_dir", fs::absolute(a.cache_dir).string()}, {"entries", out}};
        if (!a.build_dir.empty()) {
            nlohmann::json lack = nlohmann::json::array();
            for (const auto& r : lacking) lack.push_back({{"function", r["function"]}, {"arch", r["arch"]}, {"state", r["state"]}});
            j["build_dir"] = fs::absolute(a.build_dir).string();
            j["build_lacks"] = lack;
        }
        // Replace: a path that is not UTF-8 must not turn the report into an "invalid UTF-8" crash.
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        if (out.empty()) std::cout << "No kernels in " << a.cache_dir << "\n";
        std::printf("%-24s %-8s %-8s %-13s %-9s %-21s %s\n", "FUNCTION", "ARCH", "STATE", "BACKEND", "SPEEDUP", "DATE", "ORIGIN");
        for (const auto& r : out) {
            std::string state = r["state"];
            if (state == "valid" && !r["checked_against_task"].get<bool>()) state = "ok?";
            std::string origin = r.value("origin", "");
            if (origin == "search" && !r.value("model", std::string()).empty()) origin += " (" + r["model"].get<std::string>() + ")";
            if (origin == "manual") origin = "hand-written";
            if (r["validated"].is_boolean() && !r["validated"].get<bool>()) {
                origin += ", UNVALIDATED";
                if (state == "valid" || state == "ok?") state = "unval.";
            }
            if (r.value("wanted_by_build", false) && r["state"] == "missing") state = "MISSING";
            std::string backend = r.value("backend", std::string("-"));
            if (backend == "triton" && !r.value("triton_version", std::string()).empty())
                backend += " " + r["triton_version"].get<std::string>();
            // The metadata is text from a file anyone could have committed: escaped for the terminal.
            backend = printable(backend);
            origin = printable(origin);
            std::printf("%-24s %-8s %-8s %-13s %-9s %-21s %s\n", r["function"].get<std::string>().c_str(), r["arch"].get<std::string>().c_str(),
                        state.c_str(), backend.c_str(), r.contains("speedup") && r["speedup"].get<double>() > 0 ? format_double("%.2fx", r["speedup"].get<double>()).c_str() : "-",
                        printable(r.value("date", std::string("-"))).c_str(), origin.empty() ? "-" : origin.c_str());
            if (!r.value("summary", std::string()).empty()) std::printf("    %s\n", printable(r["summary"].get<std::string>()).c_str());
            if (!r["reason"].get<std::string>().empty() && r["state"] != "valid")
                std::printf("    %s\n", printable(r["reason"].get<std::string>()).c_str());
        }
        if (tasks.empty())
            std::cout << "(staleness not checked: pass --task T.json or --build-dir BUILD to compare with the current tasks; "
                         "ok? = readable and unedited)\n";
        bool any_unvalidated = false;
        for (const auto& r : out) any_unvalidated |= r["validated"].is_boolean() && !r["validated"].get<bool>();
        if (any_unvalidated)
            std::cout << "(unval. = stored with cache add --unvalidated: never checked against the reference; "
                         "run kernelevo cache add without --unvalidated on a GPU to validate it)\n";
        if (!a.build_dir.empty()) {
            if (lacking.empty()) {
                std::cout << "The build in " << a.build_dir << " has a valid kernel for every architecture it wants.\n";
            } else {
                std::cout << "\nThe build in " << a.build_dir << " wants " << lacking.size()
                          << " kernel(s) the cache lacks (the reference runs there instead):\n";
                for (const auto& r : lacking)
                    std::cout << "  " << r["function"].get<std::string>() << " " << r["arch"].get<std::string>() << " ("
                              << r["state"].get<std::string>() << "): " << r.value("search_command", std::string()) << "\n";
                if (a.models.empty())
                    std::cout << "(NAME: the model to search with, e.g. google/gemini-3-flash; pass --model NAME to cache "
                                 "status to have it filled in)\n";
            }
        }
    }
    rc = problems ? 1 : 0;
}

void run_remove(const RemoveArgs& a, int& rc) {
    if (!fs::is_directory(a.cache_dir)) throw UsageError("--cache-dir: " + a.cache_dir + " is not a directory");
    std::set<std::string> functions, arches;
    for (const auto& e : cache::list_entries(a.cache_dir)) functions.insert(e.function);
    if (!functions.count(a.function)) {
        auto near = cli::closest(a.function, std::vector<std::string>(functions.begin(), functions.end()));
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
    for (const auto& arch : targets) {
        if (!a.dry_run) cache::remove_entry(a.cache_dir, a.function, arch);
        std::cout << (a.dry_run ? "would remove " : "removed ") << cache::source_path(a.cache_dir, a.function, arch).string()
                  << " (+ .json)\n";
    }
    rc = 0;
}

void run_prune(const PruneArgs& a, int& rc) {
    if (!fs::is_directory(a.cache_dir)) throw UsageError("--cache-dir: " + a.cache_dir + " is not a directory");
    if (a.tasks.empty() && a.build_dir.empty())
        throw UsageError("prune needs the current tasks to tell stale entries: pass --build-dir BUILD or --task T.json");
    if (a.unused && a.build_dir.empty()) throw UsageError("--unused needs --build-dir (what the build wants)");
    const auto hashes = hashes_of(collect_tasks(a.tasks, a.build_dir));
    auto wanted = wanted_arches(a.build_dir);
    int removed = 0, kept = 0;
    for (const auto& e : cache::list_entries(a.cache_dir)) {
        auto t = hashes.find(e.function);
        // Hand edits and half-written entries are never deleted by prune: they may be someone's work.
        cache::Lookup plain = cache::lookup(a.cache_dir, e.function, e.arch, "", "");
        std::string why;
        if (t != hashes.end()) {
            cache::Lookup l = cache::lookup(a.cache_dir, e.function, e.arch, &t->second);
            if (l.state == cache::State::stale && plain.state == cache::State::valid) why = "stale: " + l.reason;
        }
        if (why.empty() && a.unused && plain.state == cache::State::valid) {
            auto w = wanted.find(e.function);
            if (w == wanted.end()) why = "unused: the build has no kernelevo_optimize(" + e.function + ")";
            else if (!w->second.count(e.arch)) why = "unused: the build does not target " + e.arch;
        }
        // Never through a link out of the cache: such an entry is kept, with the reason.
        if (std::string linked = cache::linked_folder(a.cache_dir, e.function); !why.empty() && !linked.empty()) {
            ++kept;
            std::cout << "kept " << e.function << " " << e.arch << " (" << why << "; but " << linked
                      << ": kernelevo never deletes through a link; remove the link itself if it is not wanted)\n";
            continue;
        }
        if (why.empty()) {
            if (plain.state != cache::State::valid) {
                ++kept;
                if (!quiet())
                    std::cout << "kept " << e.function << " " << e.arch << " (" << printable(plain.reason)
                              << "; remove it with kernelevo cache remove if it is not wanted)\n";
            }
            continue;
        }
        if (!a.dry_run) cache::remove_entry(a.cache_dir, e.function, e.arch);
        ++removed;
        std::cout << (a.dry_run ? "would remove " : "removed ") << e.function << " " << e.arch << " (" << printable(why) << ")\n";
    }
    if (!quiet())
        std::cout << (a.dry_run ? "would remove " : "removed ") << removed << " entr" << (removed == 1 ? "y" : "ies")
                  << (kept ? ", kept " + std::to_string(kept) + " broken, hand-edited or behind a link" : std::string()) << "\n";
    rc = 0;
}

void run_add(const AddArgs& a, int& rc) {
    Task task = load_task(a.task);
    const std::string arch = normalize_arch(a.arch);
    std::string source = read_kernel_file(a.kernel);  // a directory, a FIFO or a huge file refused with the reason
    CompileOptions toolkit;
    // Nothing is compiled with --unvalidated (but for a Triton candidate: what is stored is its generated .cu).
    if (!a.unvalidated || triton::is_triton_source(source)) require_toolkit_arch(arch, toolkit);
    CompileOptions copt;
    copt.arch = arch;
    copt.python = a.python;
    copt.task = std::make_shared<const Task>(task);
    // A Triton candidate is stored as the .cu generated from it, with the .py beside it.
    const bool triton = candidate_backend(source, copt) == "triton";
    CompileResult compiled;
    nlohmann::json validation;
    if (a.unvalidated) {
        if (triton) {  // not validated, but it must compile: what is stored is the generated .cu
            if (!quiet()) std::cerr << "kernelevo: compiling the Triton candidate " << a.kernel << " for " << arch << " ...\n";
            compiled = compile_candidate(source, copt);
            if (!compiled.ok) {
                std::cerr << "kernelevo: not stored: compile_error\n" << compiled.log << "\n";
                rc = 1;
                return;
            }
        }
        validation = {{"status", "unvalidated"}, {"note", "stored with kernelevo cache add --unvalidated: not checked against the reference"}};
        std::cerr << "kernelevo: storing " << task.name << " " << arch << " WITHOUT validation (--unvalidated)\n";
    } else {
        ValidateOptions vopt;
        vopt.arch = arch;
        vopt.compile = copt;
        Validator v(task, vopt);
        if (!quiet()) std::cerr << "kernelevo: validating " << a.kernel << " for " << arch << " ...\n";
        compiled = v.compile(source);
        ValidationResult r = v.run(compiled);
        if (r.ok()) {
            // What enters a cache is validated twice: again in a fresh sandbox with new seeds and a
            // re-measured reference, and the two speedups must agree.
            if (!quiet()) std::cerr << "kernelevo: confirming in a fresh sandbox with new seeds ...\n";
            r = v.confirm(compiled, r);
        }
        if (r.ok()) {  // the speed of light and ptxas's figures go into the metadata too
            annotate_resources(r, compiled);
            auto [gbs, gbs_source] = sol::bandwidth_of(v.device(), v.measured_bandwidth_gbs());
            annotate_sol(r, task, gbs, gbs_source, v.device().sm_count);
        }
        if (!r.ok()) {
            std::cerr << "kernelevo: not stored: validation " << status_name(r.status)
                      << (r.status == Status::no_device ? " (no GPU here; --unvalidated stores it anyway, marked as such)" : "") << "\n";
            if (!r.log.empty()) std::cerr << r.log << "\n";
            rc = r.status == Status::no_device ? 2 : 1;
            return;
        }
        validation = r.to_json();
    }
    cache::EntryMeta m = cache::entry_from_validation(task, arch, validation);
    m.origin = a.origin;
    m.model = a.model;
    m.note = a.note;
    cache::store_candidate(a.cache_dir, source, compiled, m);
    std::cout << "stored " << cache::source_path(a.cache_dir, m.function, arch).string() << " (+ .json)";
    if (m.validated) std::cout << format_double(": %.2fx vs the reference", m.speedup) << " on " << m.gpu;
    if (std::string summary = sol::result_summary(m.validation); !summary.empty()) std::cout << " (" << summary << ")";
    std::cout << "\n";
    rc = 0;
}

}  // namespace

void register_cache_command(CLI::App& app, int& rc) {
    CLI::App* cache = app.add_subcommand("cache", "Inspect, fill and clean the per-architecture kernel cache. A kernel is "
                                                  "CACHE_DIR/NAME/sm_XX.cu with its metadata in sm_XX.json beside it.");
    cli::set_examples(*cache, {
        {"Every entry, with stale/missing marks", "kernelevo cache status --cache-dir kernels"},
        {"Also what a configured build wants", "kernelevo cache status --cache-dir kernels --build-dir build"},
        {"A summary like ccache -s", "kernelevo cache stats --cache-dir kernels"},
        {"Store a hand-written kernel after validating it",
         "kernelevo cache add --task gelu/task.json --kernel gelu.cu --cache-dir kernels"},
        {"Delete the stale entries", "kernelevo cache prune --cache-dir kernels"},
        {"Forget one function on one architecture", "kernelevo cache remove --cache-dir kernels --function gelu --arch sm_90"},
        {"The hashes the metadata records", "kernelevo cache hash --task gelu/task.json"},
        {"The compiled-object cache (~/.cache/kernelevo), like ccache -s / -C", "kernelevo cache objects stats"},
    });
    cache->require_subcommand(1);

    auto st = std::make_shared<StatusArgs>();
    CLI::App* status = cache->add_subcommand("status",
        "List every function and architecture in the cache with speedup, date, origin and stale/missing/unvalidated "
        "marks. A missing cache directory is an empty cache, as for stats. Exit 0 when every entry is valid (and, with "
        "--build-dir, every architecture the build wants is cached), 1 otherwise, 2 on bad usage.");
    status->add_option("--cache-dir", st->cache_dir, "The cache directory (kernelevo_optimize()'s CACHE_DIR)")->required();
    status->add_option("--task", st->tasks, "Current task file(s) to check staleness against (repeatable)");
    status->add_option("--build-dir", st->build_dir,
                       "A configured build tree: check against the tasks kernelevo_optimize() wrote there and list the "
                       "architectures the build wants that the cache lacks (BUILD/kernelevo/*/task.json, lookup.json)");
    status->add_option("--model", st->models,
                       "Model(s) to put into the suggested search commands for what the build lacks (repeatable; "
                       "without it they say --model NAME)");
    status->add_flag("--json", st->json, "Print JSON");
    status->callback([st, &rc] { run_status(*st, rc); });

    auto ad = std::make_shared<AddArgs>();
    CLI::App* add = cache->add_subcommand("add",
        "Validate a hand-written or external kernel on the local GPU and store it in the cache. Exit 0 stored, "
        "1 validation failed, 2 bad usage or no GPU.");
    add->add_option("--task", ad->task, "Task file (JSON)")->required();
    add->add_option("--kernel", ad->kernel,
                    "The kernel: a .cu (kernel ABI) or a Triton candidate (.py with KEVO_LAUNCH), stored as the .cu generated "
                    "from it plus the .py")->required();
    add->add_option("--python", ad->python, "Triton: the Python that has Triton (default: $KERNELEVO_PYTHON, else python3)");
    add->add_option("--arch", ad->arch, "Architecture, e.g. sm_90")->required();
    add->add_option("--cache-dir", ad->cache_dir, "The cache directory")->required();
    add->add_flag("--unvalidated", ad->unvalidated, "Store without validating (the metadata says validated: false)");
    add->add_option("--origin", ad->origin, "Origin recorded in the metadata (manual, search, ...)")->capture_default_str();
    add->add_option("--model", ad->model, "Model that wrote the kernel, if any");
    add->add_option("--note", ad->note, "Free text recorded in the metadata");
    cli::add_verbosity_flags(*add);
    add->callback([ad, &rc] { run_add(*ad, rc); });

    auto rm = std::make_shared<RemoveArgs>();
    CLI::App* remove = cache->add_subcommand("remove",
        "Delete a function's cached kernels (all architectures, or those given with --arch). Exit 0 removed, 2 no such entry.");
    remove->add_option("--cache-dir", rm->cache_dir, "The cache directory")->required();
    remove->add_option("--function", rm->function, "The function (the kernelevo_optimize() name)")->required();
    remove->add_option("--arch", rm->arches, "Only this architecture, e.g. sm_90 (repeatable)");
    remove->add_flag("--dry-run", rm->dry_run, "Only print what would be removed");
    remove->callback([rm, &rc] { run_remove(*rm, rc); });

    auto pr = std::make_shared<PruneArgs>();
    CLI::App* prune = cache->add_subcommand("prune",
        "Delete the entries that are stale because their task or reference changed (and, with --unused, those the build "
        "no longer uses). Entries edited by hand or missing a file are kept and listed. Exit 0, 2 on bad usage.");
    prune->add_option("--cache-dir", pr->cache_dir, "The cache directory")->required();
    prune->add_option("--build-dir", pr->build_dir, "A configured build tree: its tasks and the architectures it wants");
    prune->add_option("--task", pr->tasks, "Current task file(s) (repeatable)");
    prune->add_flag("--unused", pr->unused, "Also delete valid entries of functions or architectures the build (--build-dir) does not use");
    prune->add_flag("--dry-run", pr->dry_run, "Only print what would be removed");
    cli::add_verbosity_flags(*prune);
    prune->callback([pr, &rc] { run_prune(*pr, rc); });

    auto sa = std::make_shared<StatsArgs>();
    CLI::App* stats = cache->add_subcommand("stats",
        "Summarize the cache like ccache -s: entries per architecture, fresh/stale/invalid, speedups, size and when "
        "entries were last validated (-v or --json: every entry). Exit 0, 2 on bad usage.");
    stats->add_option("--cache-dir", sa->cache_dir, "The cache directory (kernelevo_optimize()'s CACHE_DIR)")->required();
    stats->add_option("--task", sa->tasks, "Current task file(s) to tell fresh from stale (repeatable)");
    stats->add_option("--build-dir", sa->build_dir, "A configured build tree: check against the tasks kernelevo_optimize() wrote there");
    stats->add_flag("--json", sa->json, "Print JSON (totals, per architecture, and every entry)");
    cli::add_verbosity_flags(*stats, "Also list every entry with its state, speedup, last validation and size");
    stats->callback([sa, &rc] { run_stats(*sa, rc); });

    auto hs = std::make_shared<HashArgs>();
    CLI::App* hash = cache->add_subcommand("hash",
        "Print a task's hashes (task_hash, reference_hash) as recorded in cache metadata; "
        "kernelevo_optimize() (cmake/KernelEvoTask.cmake) computes the same values at configure time.");
    hash->add_option("--task", hs->task, "Task file (JSON)")->required();
    hash->add_flag("--json", hs->json, "Print JSON");
    hash->callback([hs, &rc] {
        Task t = load_task(hs->task);
        if (hs->json)
            std::cout << nlohmann::json{{"function", t.name}, {"task_hash", t.hash()}, {"reference_hash", t.reference_hash()},
                                        {"canonical", [&] { auto j = t.to_json(); j["reference"].erase("source"); return j.dump(); }()}}
                             .dump(2)
                      << "\n";
        else
            std::cout << "task_hash      " << t.hash() << "\nreference_hash " << t.reference_hash() << "\n";
        rc = 0;
    });
    register_cache_objects_command(*cache, rc);
}

}  // namespace kevo
