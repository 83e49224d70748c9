// `kernelevo bench`: the KernelBench-style benchmark over a suite of tasks (one folder per task
// with a task.json, e.g. written by `kernelevo import kernelbench`): run the search on every task,
// or validate ready kernels, resumably, and report fast_p, speedups, tokens, cost and time as
// Markdown, JSON and a self-contained HTML page.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baseline/baseline.h"
#include "common/setting_error.h"

namespace kevo::bench {

// The suite's tasks: DIR/*/task.json (sorted by folder name; folders named ".*", such as an interrupted
// import's ".NAME.install-*", are skipped), or DIR itself when it holds a task.json.
std::vector<std::filesystem::path> suite_tasks(const std::filesystem::path& suite);

// --kernels DIR: the ready kernel of a task (folder FOLDER, task name NAME) for ARCH: DIR/FOLDER.cu,
// DIR/FOLDER/ARCH.cu, DIR/FOLDER/kernel.cu, the only .cu in DIR/FOLDER, then the same with NAME;
// empty when none.
std::filesystem::path find_kernel(const std::filesystem::path& dir, const std::string& folder, const std::string& name,
                                  const std::string& arch);
// Every file find_kernel() could pick for the task, whatever the architecture (sorted).
std::vector<std::filesystem::path> kernel_candidates(const std::filesystem::path& dir, const std::string& folder,
                                                     const std::string& name);
// What a task's result depends on, as one content hash (as make or ccache decide): each file's
// path and bytes (or that it is absent, or not a regular file). A resumed bench runs a task again
// when its key changed: an edited task or reference, a kernel added, changed or removed.
std::string inputs_key(const std::vector<std::filesystem::path>& files);

// One task's outcome, as stored in REPORT_DIR/bench.json and reported.
struct TaskResult {
    std::string name;
    std::string task;         // task.json path
    std::string status;       // a validator status ("ok", "mismatch", ...), "missing" (no kernel), "no_kernel"
                              // (the search found none), "error"
    bool done = false;        // finished: skipped on resume
    double speedup = 0;       // over LibTorch eager, as measured by our validator
    double kernel_us = 0, reference_us = 0;   // medians; reference = LibTorch eager, same run
    // The PyTorch baselines (tool/baseline: eager, torch.compile) in this run, each with its time or
    // why it was not run, and the kernel's speedup over each (kind -> speedup; absent: none).
    baseline::Result torch;
    std::map<std::string, double> speedup_over;
    double baseline_eager_us = -1, baseline_compile_us = -1;  // --baseline (KernelBench's published times), -1: none
    std::string baseline_note;                // the baseline file's notes (e.g. a stale entry)
    int64_t tokens = 0;
    double cost_usd = 0, wall_s = 0;
    std::string kernel;       // the kernel validated or found
    std::string note;         // why not correct, or what was skipped
    std::string inputs;       // inputs_key() of what the result was computed from ("": unknown, an older bench)
    bool correct() const { return status == "ok"; }
    // No kernel was there to run ("missing", "no_kernel"): neither run nor "not correct", speedup null in JSON.
    bool no_kernel() const { return status == "missing" || status == "no_kernel"; }
    std::string status_text() const;  // the status as tables and progress show it: "no kernel" for no_kernel()
    double over(const std::string& kind) const;  // speedup_over[kind], 0 when none
    nlohmann::json to_json() const;
    static TaskResult from_json(const nlohmann::json& j);
};

// KernelBench's baseline table (baseline_h100.tsv: level, id, file, <GPU>_eager_mean_ms, ...,
// <GPU>_compile_default_mean_ms, ..., notes): task name (kb<level>_<stem>, as the importer names
// tasks) -> (eager us, compile us, notes), from the first eager/compile column pair.
struct Baseline {
    double eager_us = -1, compile_us = -1;
    std::string note;
};
std::map<std::string, Baseline> load_baseline(const std::filesystem::path& tsv);

// fast_p and the geometric mean over one PyTorch baseline, among the tasks where it was measured.
struct OverBaseline {
    std::string kind;                               // baseline::kinds()
    int measured = 0, correct = 0;                  // tasks with its time; of those, correct ones
    std::vector<std::pair<double, double>> fast_p;  // (p, share of the measured tasks correct and > p x faster than it)
    double geomean_speedup = 0;                     // over the correct measured tasks
    std::string not_run;                            // when no task has its time: the first task's reason
};

struct Summary {
    int tasks = 0, correct = 0, not_run = 0;    // not_run: no GPU here
    int no_kernel = 0;                          // tasks without a kernel to run (TaskResult::no_kernel())
    std::vector<std::pair<double, double>> fast_p;  // (p, share of all tasks correct and > p x faster); p = 0 counts correct ones
    double geomean_speedup = 0, median_speedup = 0;  // over the correct tasks
    std::vector<OverBaseline> baselines;             // one per baseline::kinds()
    std::string precision;                           // the tasks' precision policy, or "mixed (per task)"
    int64_t tokens = 0;
    double cost_usd = 0, wall_s = 0;
};

Summary summarize(const std::vector<TaskResult>& results);

struct ReportInfo {
    std::string suite, mode, gpu, arch, date;
};

std::string report_markdown(const std::vector<TaskResult>& results, const ReportInfo& info);
nlohmann::json report_json(const std::vector<TaskResult>& results, const ReportInfo& info);
// A self-contained page (no network; the charts are drawn by the uPlot serve embeds, inlined): the tables and three charts.
std::string report_html(const std::vector<TaskResult>& results, const ReportInfo& info);

}  // namespace kevo::bench
