// `kernelevo cache status|stats|add|remove|prune|hash`: inspect the committed kernel cache (and what a
// configured build wants of it), add a hand-written or external kernel (validated on the local GPU
// unless --unvalidated), remove entries, prune stale ones, print a task's hashes.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/cache_command.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"
#include "language/registry.h"
#include "sol/sol.h"
#include "workflows/cache.h"

namespace kevo {
namespace fs = std::filesystem;

void throw_with_flags(const workflows::CacheInputError& e) {
    using K = workflows::CacheInputError::Kind;
    switch (e.kind) {
        case K::cache_not_a_directory: throw UsageError("--cache-dir: " + e.path + " is not a directory");
        case K::no_build_tree:
            throw UsageError("--build-dir: " + e.path + " does not exist (configure with kernelevo_optimize() first)");
        case K::unreadable_lookup: throw UsageError("--build-dir: cannot read " + e.path + ": " + e.detail + " (re-run cmake)");
        case K::prune_without_tasks:
            throw UsageError("prune needs the current tasks to tell stale entries: pass --build-dir BUILD or --task T.json");
        case K::unused_without_build: throw UsageError("--unused needs --build-dir (what the build wants)");
    }
    throw UsageError(e.what());
}

namespace {

struct StatusArgs {
    workflows::CacheStatusRequest request;
    double min_speedup = cache::kDefaultMinSpeedup;  // given: request.min_speedup
    bool json = false;
};

// A row's state as the text shows it: "kept out" for a valid entry measured below the minimum.
std::string shown_state(const nlohmann::json& r) {
    return r.value("kept_out", nlohmann::json()).is_string() ? "kept out" : r["state"].get<std::string>();
}
struct StatsArgs {
    workflows::CacheStatsRequest request;
    bool json = false;
};
struct HashArgs {
    std::string task;
    bool json = false;
};

// `cache status --json`: every row, and with a build tree what it lacks.
void print_status_json(const workflows::CacheStatusRequest& a, const nlohmann::json& out, const nlohmann::json& lacking) {
    nlohmann::json j{{"cache_dir", fs::absolute(a.cache_dir).string()}, {"entries", out}};
    if (!a.build_dir.empty()) {
        nlohmann::json lack = nlohmann::json::array();
        for (const auto& r : lacking)
            lack.push_back({{"function", r["function"]}, {"arch", r["arch"]}, {"state", r["state"]},
                            {"kept_out", r["kept_out"]}});
        j["build_dir"] = fs::absolute(a.build_dir).string();
        j["build_lacks"] = lack;
    }
    // Replace: a path that is not UTF-8 must not turn the report into an "invalid UTF-8" crash.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// `cache status`'s table, its notes and what the build lacks, printed from the rows' JSON.
void print_status_text(const workflows::CacheStatusRequest& a, const nlohmann::json& out, const nlohmann::json& lacking,
                       size_t tasks) {
    if (out.empty()) std::cout << "No kernels in " << a.cache_dir << "\n";
    std::printf("%-24s %-8s %-8s %-13s %-9s %-21s %s\n", "FUNCTION", "ARCH", "STATE", "BACKEND", "SPEEDUP", "DATE", "ORIGIN");
    for (const auto& r : out) {
        std::string state = shown_state(r);
        if (state == "valid" && !r["checked_against_task"].get<bool>()) state = "ok?";
        std::string origin = r.value("origin", "");
        if (origin == "search" && !r.value("model", std::string()).empty()) origin += " (" + r["model"].get<std::string>() + ")";
        if (origin == "manual") origin = "hand-written";
        if (r["validated"].is_boolean() && !r["validated"].get<bool>()) {
            origin += ", UNVALIDATED";
            if (state == "valid" || state == "ok?" || state == "kept out") state = "unval.";  // (a line: kept out)
        }
        if (r.value("wanted_by_build", false) && r["state"] == "missing") state = "MISSING";
        std::string backend = r.value("backend", std::string("-"));
        // A language that records its compiler's version says it (the row's "<backend>_version").
        if (const std::string version = r.value(backend + "_version", std::string()); !version.empty()) backend += " " + version;
        // The metadata is text from a file anyone could have committed: escaped for the terminal.
        backend = printable(backend);
        origin = printable(origin);
        std::printf("%-24s %-8s %-8s %-13s %-9s %-21s %s\n", r["function"].get<std::string>().c_str(), r["arch"].get<std::string>().c_str(),
                    state.c_str(), backend.c_str(), r.contains("speedup") && r["speedup"].get<double>() > 0 ? format_double("%.2fx", r["speedup"].get<double>()).c_str() : "-",
                    printable(r.value("date", std::string("-"))).c_str(), origin.empty() ? "-" : origin.c_str());
        if (!r.value("summary", std::string()).empty()) std::printf("    %s\n", printable(r["summary"].get<std::string>()).c_str());
        if (!r["reason"].get<std::string>().empty() && r["state"] != "valid")
            std::printf("    %s\n", printable(r["reason"].get<std::string>()).c_str());
        if (r["kept_out"].is_string())
            std::printf("    %s: the reference runs instead\n", r["kept_out"].get<std::string>().c_str());
    }
    if (!tasks)
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
                          << shown_state(r) << "): " << r.value("search_command", std::string()) << "\n";
            if (a.models.empty())
                std::cout << "(NAME: the model to search with, e.g. google/gemini-3-flash; pass --model NAME to cache "
                             "status to have it filled in)\n";
        }
    }
}

void run_status(const StatusArgs& s, int& rc) {
    const workflows::CacheStatus st = workflows::cache_status(s.request);
    nlohmann::json out = nlohmann::json::array(), lacking = nlohmann::json::array();
    for (const auto& r : st.rows) out.push_back(r.to_json());
    for (const auto& r : st.lacking) lacking.push_back(r.to_json());
    if (s.json) print_status_json(s.request, out, lacking);
    else print_status_text(s.request, out, lacking, st.tasks);
    rc = exit_code_of(!st.problems);
}

void run_remove(const workflows::CacheRemoveRequest& a, int& rc) {
    for (const auto& source : workflows::cache_remove(a))
        std::cout << (a.dry_run ? "would remove " : "removed ") << source.string() << " (+ .json)\n";
    rc = kExitSuccess;
}

void run_prune(const workflows::CachePruneRequest& a, int& rc) {
    const workflows::CachePrune p = workflows::cache_prune(a);
    using Action = workflows::PruneStep::Action;
    for (const auto& s : p.steps) {
        if (s.action == Action::kept_linked)
            std::cout << "kept " << s.function << " " << s.arch << " (" << s.why << "; but " << s.linked
                      << ": kernelevo never deletes through a link; remove the link itself if it is not wanted)\n";
        else if (s.action == Action::kept_broken && !quiet())
            std::cout << "kept " << s.function << " " << s.arch << " (" << printable(s.reason)
                      << "; remove it with kernelevo cache remove if it is not wanted)\n";
        else if (s.action == Action::removed)
            std::cout << (a.dry_run ? "would remove " : "removed ") << s.function << " " << s.arch << " (" << printable(s.why) << ")\n";
    }
    if (!quiet())
        std::cout << (a.dry_run ? "would remove " : "removed ") << p.removed << " entr" << (p.removed == 1 ? "y" : "ies")
                  << (p.kept ? ", kept " + std::to_string(p.kept) + " broken, hand-edited or behind a link" : std::string()) << "\n";
    rc = kExitSuccess;
}

// The display name of the language a kernel file is written in (the registry's "auto" choice).
std::string language_of(const std::string& kernel) {
    try {
        return language::of_source(read_kernel_file(kernel)).display_name();
    } catch (const std::exception&) {
        return "kernel's";
    }
}

void run_add(workflows::CacheAddRequest a, int& rc) {
    using Step = workflows::CacheAddRequest::Step;
    const std::string kernel = a.kernel;
    a.progress = [kernel](Step step, const std::string& function, const std::string& arch) {
        if (step == Step::storing_unvalidated)
            std::cerr << "kernelevo: storing " << function << " " << arch << " WITHOUT validation (--unvalidated)\n";
        else if (!quiet())
            std::cerr << (step == Step::compiling    ? "kernelevo: compiling the " + language_of(kernel) + " candidate " + kernel + " for " + arch + " ...\n"
                          : step == Step::validating ? "kernelevo: validating " + kernel + " for " + arch + " ...\n"
                                                     : std::string("kernelevo: confirming in a fresh sandbox with new seeds ...\n"));
    };
    const workflows::CacheAddition o = workflows::cache_add(a);
    rc = o.rc;
    using NotStored = workflows::CacheAddition::NotStored;
    if (o.not_stored == NotStored::compile_error) {
        std::cerr << "kernelevo: not stored: compile_error\n" << o.log << "\n";
        return;
    }
    if (o.not_stored == NotStored::validation) {
        std::cerr << "kernelevo: not stored: validation " << status_name(o.status)
                  << (o.status == Status::no_device ? " (no GPU here; --unvalidated stores it anyway, marked as such)" : "") << "\n";
        if (!o.log.empty()) std::cerr << o.log << "\n";
        return;
    }
    const cache::EntryMeta& m = o.meta;
    std::cout << "stored " << o.source.string() << " (+ .json)";
    if (m.validated) std::cout << format_double(": %.2fx vs the reference", m.speedup) << " on " << m.gpu;
    if (std::string summary = sol::result_summary(m.validation); !summary.empty()) std::cout << " (" << summary << ")";
    std::cout << "\n";
}

// `cache status`: every entry with its state, and what a build lacks.
void add_status_command(CLI::App& cache, int& rc) {
    auto st = std::make_shared<StatusArgs>();
    workflows::CacheStatusRequest& stq = st->request;
    CLI::App* status = cache.add_subcommand("status",
        "List every function and architecture in the cache with speedup, date, origin and stale/missing/unvalidated "
        "marks; an entry measured slower than --min-speedup is 'kept out'. A missing cache directory is an empty "
        "cache, as for stats. Exit 0 when every entry is valid and none is kept out (and, with --build-dir, every "
        "architecture the build wants is cached), 1 otherwise, 2 on bad usage.");
    status->add_option("--cache-dir", stq.cache_dir, "The cache directory (kernelevo_optimize()'s CACHE_DIR)")->required();
    status->add_option("--task", stq.tasks, "Current task file(s) to check staleness against (repeatable)");
    status->add_option("--build-dir", stq.build_dir,
                       "A configured build tree: check against the tasks kernelevo_optimize() wrote there and list the "
                       "architectures the build wants that the cache lacks (BUILD/kernelevo/*/task.json, lookup.json)");
    status->add_option("--model", stq.models,
                       "Model(s) to put into the suggested search commands for what the build lacks (repeatable; "
                       "without it they say --model NAME)");
    CLI::Option* min = status->add_option("--min-speedup", st->min_speedup,
        "An entry measured slower than this over its reference is kept out: the build compiles in the reference "
        "(default: with --build-dir, what the build used, KERNELEVO_MIN_SPEEDUP; else 1; 0 keeps none out)")
        ->check(cli::FiniteNumber)->check(CLI::NonNegativeNumber);
    status->add_flag("--json", st->json, "Print JSON");
    status->callback([st, min, &rc] {
        if (min->count()) st->request.min_speedup = st->min_speedup;
        with_flags([&] { run_status(*st, rc); });
    });
}

// `cache add`: a kernel validated (twice) and stored.
void add_add_command(CLI::App& cache, int& rc) {
    auto ad = std::make_shared<workflows::CacheAddRequest>();
    CLI::App* add = cache.add_subcommand("add",
        "Validate a hand-written or external kernel on the local GPU and store it in the cache. Exit 0 stored, "
        "1 validation failed, 2 bad usage or no GPU.");
    add->add_option("--task", ad->task, "Task file (JSON)")->required();
    add->add_option("--kernel", ad->kernel,
                    language::kernel_help() + " (one that is not a .cu is stored as the .cu generated from it, with it beside "
                    "that .cu)")->required();
    if (!language::python_help().empty()) add->add_option("--python", ad->python, language::python_help());
    add->add_option("--arch", ad->arch, "Architecture, e.g. sm_90")->required();
    add->add_option("--cache-dir", ad->cache_dir, "The cache directory")->required();
    add->add_flag("--unvalidated", ad->unvalidated, "Store without validating (the metadata says validated: false)");
    add->add_option("--origin", ad->origin, "Origin recorded in the metadata (manual, search, ...)")->capture_default_str();
    add->add_option("--model", ad->model, "Model that wrote the kernel, if any");
    add->add_option("--note", ad->note, "Free text recorded in the metadata");
    cli::add_verbosity_flags(*add);
    add->callback([ad, &rc] { with_flags([&] { run_add(*ad, rc); }); });
}

// `cache remove`: a function's entries deleted.
void add_remove_command(CLI::App& cache, int& rc) {
    auto rm = std::make_shared<workflows::CacheRemoveRequest>();
    CLI::App* remove = cache.add_subcommand("remove",
        "Delete a function's cached kernels (all architectures, or those given with --arch). Exit 0 removed, 2 no such entry.");
    remove->add_option("--cache-dir", rm->cache_dir, "The cache directory")->required();
    remove->add_option("--function", rm->function, "The function (the kernelevo_optimize() name)")->required();
    remove->add_option("--arch", rm->arches, "Only this architecture, e.g. sm_90 (repeatable)");
    remove->add_flag("--dry-run", rm->dry_run, "Only print what would be removed");
    remove->callback([rm, &rc] { with_flags([&] { run_remove(*rm, rc); }); });
}

// `cache prune`: stale (and unused) entries deleted.
void add_prune_command(CLI::App& cache, int& rc) {
    auto pr = std::make_shared<workflows::CachePruneRequest>();
    CLI::App* prune = cache.add_subcommand("prune",
        "Delete the entries that are stale because their task or reference changed (and, with --unused, those the build "
        "no longer uses). Entries edited by hand or missing a file are kept and listed. Exit 0, 2 on bad usage.");
    prune->add_option("--cache-dir", pr->cache_dir, "The cache directory")->required();
    prune->add_option("--build-dir", pr->build_dir, "A configured build tree: its tasks and the architectures it wants");
    prune->add_option("--task", pr->tasks, "Current task file(s) (repeatable)");
    prune->add_flag("--unused", pr->unused, "Also delete valid entries of functions or architectures the build (--build-dir) does not use");
    prune->add_flag("--dry-run", pr->dry_run, "Only print what would be removed");
    cli::add_verbosity_flags(*prune);
    prune->callback([pr, &rc] { with_flags([&] { run_prune(*pr, rc); }); });
}

// `cache stats`: a summary like ccache -s.
void add_stats_command(CLI::App& cache, int& rc) {
    auto sa = std::make_shared<StatsArgs>();
    workflows::CacheStatsRequest& saq = sa->request;
    CLI::App* stats = cache.add_subcommand("stats",
        "Summarize the cache like ccache -s: entries per architecture, fresh/stale/invalid, speedups, size and when "
        "entries were last validated (-v or --json: every entry). Exit 0, 2 on bad usage.");
    stats->add_option("--cache-dir", saq.cache_dir, "The cache directory (kernelevo_optimize()'s CACHE_DIR)")->required();
    stats->add_option("--task", saq.tasks, "Current task file(s) to tell fresh from stale (repeatable)");
    stats->add_option("--build-dir", saq.build_dir, "A configured build tree: check against the tasks kernelevo_optimize() wrote there");
    stats->add_flag("--json", sa->json, "Print JSON (totals, per architecture, and every entry)");
    cli::add_verbosity_flags(*stats, "Also list every entry with its state, speedup, last validation and size");
    stats->callback([sa, &rc] { with_flags([&] { run_stats(sa->request, sa->json, rc); }); });
}

// `cache hash`: a task's hashes as the metadata records them.
void add_hash_command(CLI::App& cache, int& rc) {
    auto hs = std::make_shared<HashArgs>();
    CLI::App* hash = cache.add_subcommand("hash",
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
        rc = kExitSuccess;
    });
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

    add_status_command(*cache, rc);
    add_add_command(*cache, rc);
    add_remove_command(*cache, rc);
    add_prune_command(*cache, rc);
    add_stats_command(*cache, rc);
    add_hash_command(*cache, rc);
    register_cache_objects_command(*cache, rc);
}

}  // namespace kevo
