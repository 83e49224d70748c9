// `kernelevo cache status|add|hash`: inspect the committed kernel cache, add a hand-written or
// external kernel (validated on the local GPU unless --unvalidated), print a task's hashes.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "cache/cache.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "compile/compile.h"
#include "task/task.h"
#include "validate/validate.h"

#ifndef KEVO_VERSION
#define KEVO_VERSION "0.0.0"
#endif

namespace kevo {
namespace {
namespace fs = std::filesystem;

struct StatusArgs {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks;
    bool json = false;
};
struct AddArgs {
    std::string task, kernel, arch, cache_dir, note, origin = "manual", model, python;
    bool unvalidated = false;
};
struct HashArgs {
    std::string task;
    bool json = false;
};

// Tasks given with --task, plus those kernelevo_optimize() wrote under BUILD/kernelevo/*/task.json.
std::map<std::string, Task> collect_tasks(const StatusArgs& a) {
    std::map<std::string, Task> tasks;
    std::vector<fs::path> files(a.tasks.begin(), a.tasks.end());
    if (!a.build_dir.empty()) {
        fs::path root = fs::path(a.build_dir) / "kernelevo";
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

std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

void run_status(const StatusArgs& a, int& rc) {
    if (!fs::is_directory(a.cache_dir)) throw UsageError("--cache-dir: " + a.cache_dir + " is not a directory");
    auto tasks = collect_tasks(a);
    std::map<std::string, std::set<std::string>> rows;  // function -> arches
    for (const auto& e : cache::list_entries(a.cache_dir)) rows[e.function].insert(e.arch);
    for (const auto& [name, t] : tasks) rows[name];  // functions with a task but no entry at all
    // Every function known from a task is checked against every arch seen anywhere in the cache.
    std::set<std::string> all_arches;
    for (const auto& [f, arches] : rows) all_arches.insert(arches.begin(), arches.end());

    nlohmann::json out = nlohmann::json::array();
    int problems = 0;
    for (auto& [function, arches] : rows) {
        auto t = tasks.find(function);
        const bool checked = t != tasks.end();
        std::string th, rh;
        if (checked) {
            th = t->second.hash();
            rh = t->second.reference_hash();
            arches.insert(all_arches.begin(), all_arches.end());
        }
        for (const auto& arch : arches) {
            cache::Lookup l = cache::lookup(a.cache_dir, function, arch, th, rh);
            nlohmann::json row{{"function", function}, {"arch", arch}, {"state", cache::state_name(l.state)},
                               {"checked_against_task", checked}, {"reason", l.reason},
                               {"source", l.source.string()}, {"metadata", l.metadata.string()}};
            if (l.meta) {
                row["speedup"] = l.meta->speedup;
                row["date"] = l.meta->date;
                row["origin"] = l.meta->origin;
                row["model"] = l.meta->model;
                row["validated"] = l.meta->validated;
                row["gpu"] = l.meta->gpu;
                row["backend"] = l.meta->backend;
                if (l.meta->backend == "triton" && l.meta->triton.is_object())
                    row["triton_version"] = l.meta->triton.value("triton_version", "");
            }
            if (l.state != cache::State::valid) ++problems;
            out.push_back(row);
        }
    }
    if (a.json) {
        std::cout << nlohmann::json{{"cache_dir", fs::absolute(a.cache_dir).string()}, {"entries", out}}.dump(2) << "\n";
    } else {
        if (out.empty()) std::cout << "No kernels in " << a.cache_dir << "\n";
        std::printf("%-24s %-8s %-8s %-13s %-9s %-21s %s\n", "FUNCTION", "ARCH", "STATE", "BACKEND", "SPEEDUP", "DATE", "ORIGIN");
        for (const auto& r : out) {
            std::string state = r["state"];
            if (state == "valid" && !r["checked_against_task"].get<bool>()) state = "ok?";
            std::string origin = r.value("origin", "");
            if (origin == "search" && !r.value("model", std::string()).empty()) origin += " (" + r["model"].get<std::string>() + ")";
            if (origin == "manual") origin = "hand-written";
            if (r.contains("validated") && !r["validated"].get<bool>()) origin += ", UNVALIDATED";
            std::string backend = r.value("backend", std::string("-"));
            if (backend == "triton" && !r.value("triton_version", std::string()).empty())
                backend += " " + r["triton_version"].get<std::string>();
            std::printf("%-24s %-8s %-8s %-13s %-9s %-21s %s\n", r["function"].get<std::string>().c_str(), r["arch"].get<std::string>().c_str(),
                        state.c_str(), backend.c_str(), r.contains("speedup") && r["speedup"].get<double>() > 0 ? fmt("%.2fx", r["speedup"].get<double>()).c_str() : "-",
                        r.value("date", std::string("-")).c_str(), origin.empty() ? "-" : origin.c_str());
            if (!r["reason"].get<std::string>().empty() && r["state"] != "valid")
                std::printf("    %s\n", r["reason"].get<std::string>().c_str());
        }
        if (tasks.empty())
            std::cout << "(staleness not checked: pass --task T.json or --build-dir BUILD to compare with the current tasks; "
                         "ok? = readable and unedited)\n";
    }
    rc = problems ? 1 : 0;
}

void run_add(const AddArgs& a, int& rc) {
    Task task = load_task(a.task);
    const std::string arch = normalize_arch(a.arch);
    std::string source;
    try {
        source = read_file(a.kernel);
    } catch (const UsageError&) {
        throw UsageError("--kernel: cannot read " + a.kernel);
    }
    cache::EntryMeta m;
    m.function = task.name;
    m.arch = arch;
    m.task_hash = task.hash();
    m.reference_hash = task.reference_hash();
    m.origin = a.origin;
    m.model = a.model;
    m.note = a.note;
    m.kernelevo_version = KEVO_VERSION;
    CompileOptions copt;
    copt.arch = arch;
    copt.python = a.python;
    copt.task = std::make_shared<const Task>(task);
    try {
        m.toolkit = nvcc_version(copt);
    } catch (const std::exception&) {
    }
    // A Triton candidate is stored as the .cu generated from it, with the .py beside it.
    const bool triton = candidate_backend(source, copt) == "triton";
    CompileResult compiled;
    if (a.unvalidated) {
        if (triton) {
            std::cerr << "kernelevo: compiling the Triton candidate " << a.kernel << " for " << arch << " ...\n";
            compiled = compile_kernel(source, copt);
            if (!compiled.ok) {
                std::cerr << "kernelevo: not stored: compile_error\n" << compiled.log << "\n";
                rc = 1;
                return;
            }
        }
        m.validated = false;
        m.validation = {{"status", "unvalidated"}, {"note", "stored with kernelevo cache add --unvalidated: not checked against the reference"}};
        std::cerr << "kernelevo: storing " << task.name << " " << arch << " WITHOUT validation (--unvalidated)\n";
    } else {
        ValidateOptions vopt;
        vopt.arch = arch;
        vopt.compile = copt;
        Validator v(task, vopt);
        std::cerr << "kernelevo: validating " << a.kernel << " for " << arch << " ...\n";
        compiled = v.compile(source);
        ValidationResult r = v.run(compiled);
        if (!r.ok()) {
            std::cerr << "kernelevo: not stored: validation " << status_name(r.status)
                      << (r.status == Status::no_device ? " (no GPU here; --unvalidated stores it anyway, marked as such)" : "") << "\n";
            if (!r.log.empty()) std::cerr << r.log << "\n";
            rc = r.status == Status::no_device ? 2 : 1;
            return;
        }
        m.validated = true;
        m.validation = r.to_json();
        m.speedup = r.speedup;
        m.kernel_us = r.kernel_us;
        m.reference_us = r.reference_us;
        m.gpu = r.gpu;
    }
    if (triton) {
        m.backend = "triton";
        m.triton = compiled.backend_info;
        m.triton.erase("aot_s");
        cache::store(a.cache_dir, compiled.generated_source, m, &source);
    } else {
        cache::store(a.cache_dir, source, m);
    }
    std::cout << "stored " << cache::source_path(a.cache_dir, m.function, arch).string() << " (+ .json)";
    if (m.validated) std::cout << fmt(": %.2fx vs the reference", m.speedup) << " on " << m.gpu;
    std::cout << "\n";
    rc = 0;
}

}  // namespace

void register_cache_command(CLI::App& app, int& rc) {
    CLI::App* cache = app.add_subcommand("cache", "Inspect and fill the per-architecture kernel cache (CACHE_DIR/NAME/sm_XX.cu + .json)");
    cache->require_subcommand(1);

    auto st = std::make_shared<StatusArgs>();
    CLI::App* status = cache->add_subcommand("status",
        "List every function and architecture in the cache with speedup, date, origin and stale/missing marks. "
        "Exit 0 when every entry is valid, 1 otherwise.");
    status->add_option("--cache-dir", st->cache_dir, "The cache directory (kernelevo_optimize()'s CACHE_DIR)")->required();
    status->add_option("--task", st->tasks, "Current task file(s) to check staleness against (repeatable)");
    status->add_option("--build-dir", st->build_dir, "A configured build tree: use the tasks kernelevo_optimize() wrote there (BUILD/kernelevo/*/task.json)");
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
    add->callback([ad, &rc] { run_add(*ad, rc); });

    auto hs = std::make_shared<HashArgs>();
    CLI::App* hash = cache->add_subcommand("hash",
        "Print a task's hashes (task_hash, reference_hash) as recorded in cache metadata; "
        "cmake/KernelEvo.cmake computes the same values at configure time.");
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
}

}  // namespace kevo
