// A model folder (python/kernelevo/model_plan.md, the one description of its format): its plan.json
// (the regions of a partitioned model and their share of its time), the split of a search budget
// over the regions by time share, and search/summary.json (what `kernelevo search --model-dir`
// did for each region, read back when the same command runs again).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "common/named_enum.h"
#include "common/setting_error.h"

namespace kevo::model {

// plan.json's "format"; python/kernelevo/model_export.py's PLAN_FORMAT writes the same.
inline constexpr const char* kPlanFormat = "kernelevo-model-plan/1";
// search/summary.json's "format".
inline constexpr const char* kSummaryFormat = "kernelevo-model-search/1";

// A region's status in plan.json (model_plan.md says what each means).
#define KEVO_REGION_STATUS_LIST(X) X(task) X(below_threshold) X(refused) X(failed) X(view) X(repeat)
enum class RegionStatus { KEVO_REGION_STATUS_LIST(KEVO_ENUM_VALUE) };
const char* region_status_name(RegionStatus s);

struct Region {
    std::string name, task_name, kind, reason;
    RegionStatus status = RegionStatus::task;
    double time_ms = 0;
    double share = 0;     // of the model's time; a task's with its repeats' (share_with_repeats): what its kernel runs
    std::optional<double> compile_ms;  // torch.compile's time of the region's module (task regions; none: not timed)
    std::optional<double> floor_ms;    // the least time any kernel of it can take (none: not known)
    int repeats = 0;                   // regions that repeat it and run its kernel
    std::string same_as;  // status "repeat": the task region whose kernel it runs
    std::string task;    // as written: relative to the model folder (status "task" only)
    fs::path task_file;  // DIR/<task>/task.json, absolute (status "task" only)
    bool searched() const { return status == RegionStatus::task; }
};

struct Plan {
    fs::path dir, file;  // the model folder and its plan.json, absolute
    std::string model, source, precision, device;
    double total_ms = 0, threshold = 0;
    std::optional<double> compile_total_ms;  // torch.compile's time of the whole model (none: not timed)
    std::string compile_note;                 // "measured", or "not measured: why"
    std::vector<Region> regions;  // in graph order
    std::vector<const Region*> searched() const;  // the regions with status "task"
};

// Reads DIR/plan.json. A missing file, another format, a missing or mistyped key, duplicate names,
// a region task path that is absolute or leaves DIR (symbolic links resolved), and a region task
// folder without task.json are UsageErrors of one line naming the file (and the region).
Plan load_plan(const fs::path& dir);

// Whole seconds for each share of `total_s`: shares normalised over the given ones (all zero: an
// even split), each at least `floor_fraction` of an even split, the rest in proportion to the
// shares; the seconds add up to total_s (largest remainders first) and each is at least 1 when
// total_s allows.
std::vector<long> split_budget(const std::vector<double>& shares, long total_s, double floor_fraction = 0.1);

// A region's search in search/summary.json: not started, running (while this kernelevo runs it), done
// (it finished), stopped (interrupted or waiting for Batch API replies: resumable), failed.
#define KEVO_RUN_STATUS_LIST(X) X(pending) X(running) X(done) X(stopped) X(failed)
enum class RunStatus { KEVO_RUN_STATUS_LIST(KEVO_ENUM_VALUE) };
const char* run_status_name(RunStatus s);

// One region in search/summary.json. Paths are relative to the model folder.
struct RegionRun {
    std::string name, task_name;
    RunStatus status = RunStatus::pending;
    long budget_s = 0;               // 0: no time limit (a search by generations)
    std::optional<int> exit_code;    // the region's `kernelevo search` exit code (none: not run)
    std::optional<double> best_speedup;  // over the LibTorch reference
    std::string state, log;
    std::string stop_reason;         // the child search's stop_reason
    double elapsed_s = 0;            // wall time of its last run
    nlohmann::json over = nlohmann::json::object();  // {"eager": 1.2, "compile": 0.9}: over the PyTorch baselines
    std::string not_cached;          // why the search's best did not enter the cache ("": it did, or no best)
};

struct Summary {
    std::string precision;  // the plan's
    std::vector<RegionRun> regions;
    const RegionRun* find(const std::string& task_name) const;
    nlohmann::json to_json() const;
};

// Writes the summary atomically (readers never see a partial file).
void write_summary(const fs::path& file, const Summary& s);
// Reads a summary written before; a missing file is an empty summary; another format or a
// damaged file is a UsageError naming the file.
Summary read_summary(const fs::path& file);

}  // namespace kevo::model
