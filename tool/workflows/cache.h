// The use case "manage the cache": what `kernelevo cache status|stats|add|remove|prune` and
// `cache objects stats` do with a kernel cache (CACHE_DIR/NAME/sm_XX.cu + .json, tool/cache) and the
// compiled-object cache, as requests in and typed outcomes out. The commands parse, call one of
// these and print; nothing here prints, and no message here names a command-line option
// (CacheInputError says what is wrong; the command words it with its flags).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cache/objects.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "evaluate/status.h"
#include "task/task.h"

namespace kevo::workflows {

// A wrong input to a cache use case. what() says it without options; `kind` and `path` (and
// `detail`) let a command say it in its own words.
struct CacheInputError : UsageError {
    enum class Kind {
        cache_not_a_directory,  // path: the cache directory
        no_build_tree,          // path: BUILD/kernelevo, which does not exist
        unreadable_lookup,      // path: BUILD/kernelevo/NAME/lookup.json; detail: why
        prune_without_tasks,    // stale entries can only be told from the current tasks
        unused_without_build,   // unused entries can only be told from a build tree
    };
    CacheInputError(Kind kind, std::string path, std::string detail = "");
    Kind kind;
    std::string path, detail;
};

// The current tasks a use case compares entries with: task files, plus those kernelevo_optimize()
// wrote under BUILD/kernelevo/*/task.json. Function name -> task.
std::map<std::string, Task> collect_tasks(const std::vector<std::string>& task_files, const std::string& build_dir);
// Each task's hashes, computed once per function (reference_hash() runs the preprocessor).
std::map<std::string, cache::TaskHashes> hashes_of(const std::map<std::string, Task>& tasks);
// What the build wants: function -> the architectures kernelevo_optimize() looked up at configure
// time (BUILD/kernelevo/NAME/lookup.json); empty without a build tree. With `min_speedups`, also
// function -> the minimum speedup the build kept kernels out under (KERNELEVO_MIN_SPEEDUP, MIN_SPEEDUP).
std::map<std::string, std::set<std::string>> wanted_arches(const std::string& build_dir,
                                                           std::map<std::string, double>* min_speedups = nullptr);

// ---- status: every function and architecture, and what the build lacks ------------------------

struct CacheStatusRequest {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks;   // task files
    std::vector<std::string> models;  // put into the suggested search commands ("": --model NAME)
    // A kernel measured below it is kept out (cache::kept_out()). Unset: a function the build
    // configured has the build's minimum (lookup.json), the others cache::kDefaultMinSpeedup.
    std::optional<double> min_speedup;
};

struct StatusRow {
    std::string function, arch;
    cache::Lookup lookup;
    bool checked_against_task = false;    // a current task of this function was given
    std::optional<bool> wanted_by_build;  // with a build tree: whether it wants this architecture
    std::string search_command;           // checked: the search that would (re)fill the entry
    double min_speedup = cache::kDefaultMinSpeedup;
    std::string kept_out;                 // a valid entry measured below min_speedup: cache::kept_out()
    nlohmann::json to_json() const;       // one element of `cache status --json`'s "entries"
};

struct CacheStatus {
    std::vector<StatusRow> rows;     // by function, then architecture
    std::vector<StatusRow> lacking;  // wanted by the build and not valid (missing, stale, broken) or kept out
    size_t tasks = 0;                // current tasks compared with
    int problems = 0;                // rows that are not valid or kept out
};
CacheStatus cache_status(const CacheStatusRequest& request);

// ---- stats: a summary like ccache -s -----------------------------------------------------------

struct CacheStatsRequest {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks;
};
// Everything `cache stats` reports (its --json document: totals, per architecture, every entry);
// the text output is printed from it.
nlohmann::json cache_stats(const CacheStatsRequest& request);

// ---- remove and prune --------------------------------------------------------------------------

struct CacheRemoveRequest {
    std::string cache_dir, function;
    std::vector<std::string> arches;  // empty: every architecture of the function
    bool dry_run = false;
};
// The entries' sources removed (or, dry_run, that would be). UsageError, with the closest name,
// for a function or architecture the cache does not have.
std::vector<std::filesystem::path> cache_remove(const CacheRemoveRequest& request);

struct CachePruneRequest {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks;
    bool unused = false;  // also valid entries the build does not use
    bool dry_run = false;
};
struct PruneStep {
    enum class Action { removed, kept_linked, kept_broken };
    std::string function, arch;
    Action action = Action::removed;
    std::string why;     // removed, kept_linked: why it is stale or unused
    std::string linked;  // kept_linked: linked_folder()'s reason
    std::string reason;  // kept_broken: why the entry is not valid (a hand edit, a missing file)
};
struct CachePrune {
    std::vector<PruneStep> steps;  // in list_entries() order
    int removed = 0, kept = 0;
};
CachePrune cache_prune(const CachePruneRequest& request);

// ---- add: a hand-written or external kernel, validated (twice) unless asked not to -------------

struct CacheAddRequest {
    std::string task, kernel, arch, cache_dir, note, origin = "manual", model, python;
    bool unvalidated = false;
    // What is happening, for the command's progress lines: the step, the task's function and the
    // architecture (normalized).
    enum class Step { compiling, validating, confirming, storing_unvalidated };
    std::function<void(Step, const std::string& function, const std::string& arch)> progress;
};
struct CacheAddition {
    enum class NotStored { none, compile_error, validation };
    NotStored not_stored = NotStored::none;
    Status status = Status::ok;  // validation: the verdict that kept it out
    std::string log;             // not stored: the compiler's or the validator's log
    std::string function, arch;  // the task's function, the architecture normalized
    cache::EntryMeta meta;       // stored: its metadata
    std::filesystem::path source;  // stored: the entry's source
    int rc = kExitSuccess;       // as `kernelevo cache add` exits: 0 stored, 1 refused, 2 no GPU to validate on
};
CacheAddition cache_add(const CacheAddRequest& request);

// ---- the compiled-object cache -----------------------------------------------------------------

struct ObjectCacheStats {
    std::filesystem::path root;            // cache_root()
    std::vector<cache::ObjectStats> areas;  // one per object area
    std::uint64_t files = 0, bytes = 0;    // over every area
};
ObjectCacheStats object_cache_stats();

}  // namespace kevo::workflows
