// The use case "run a bench": every task of a suite (DIR/NAME/task.json) searched (run_search()
// per task) or its ready kernel validated, resumably (OUT/bench.json; each search resumes from
// OUT/state/NAME.db), the PyTorch baselines timed beside them, and OUT/report.{md,json,html}
// written after every task. `kernelevo bench` fills the request, calls run_bench() and prints the
// outcome's summary.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "workflows/search.h"

namespace kevo::workflows {

struct BenchRequest {
    std::string suite;     // the suite directory
    std::string out;       // the report directory (also the resumable state)
    std::string kernels;   // ready kernels to validate instead of searching ("": search every task)
    std::string python;    // the Python with PyTorch for the baselines (and what a candidate language needs)
    std::string baseline;  // KernelBench's published timings (baseline_h100.tsv), shown beside ours
    bool fresh = false;    // discard the previous bench and search states first
    // Each task's search (its task, out, state, fresh and json are the bench's); also the arch,
    // timeout, timing trials and baseline choices that validating ready kernels uses.
    SearchArgs search;
    // One progress line at a time (no trailing newline): resuming, each task's result, the ETA.
    // Empty: none.
    std::function<void(const std::string&)> progress;
};

// Why a bench did not start (nothing was run).
enum class BenchRefusal {
    none,
    unreadable_state,  // OUT/bench.json is not a bench state
    other_bench,       // OUT holds the bench of another suite or mode
    no_gpu,            // a search needs the local GPU (ready kernels do not)
};

struct BenchOutcome {
    BenchRefusal refused = BenchRefusal::none;
    std::string why;           // refused: what is wrong, in words
    std::filesystem::path state_file;  // unreadable_state: the file
    std::string held_suite, held_mode;  // other_bench: what OUT holds
    std::string device_error;  // no_gpu: the device's error

    std::filesystem::path out;  // the report directory (absolute)
    std::string mode;           // "search" or "kernels"
    bench::ReportInfo info;     // as the reports show it
    std::vector<bench::TaskResult> results;  // the tasks of this run and those done earlier, in suite order
    bench::Summary summary;     // summarize(results)
    bool interrupted = false;   // a search was interrupted (Ctrl-C): the same request continues it
    int rc = kExitSuccess;      // as `kernelevo bench` exits: 0 done, 1 interrupted, 2 refused or no task could run
};

// A model folder's suite (kernelevo.export_model(): its regions with status "task" are the folders
// of DIR/regions) and its default report directory (DIR/bench). UsageError when no region is a task.
struct ModelSuite {
    std::string suite, out;
};
ModelSuite model_suite(const std::string& model_dir);

// Runs (or resumes) the bench. A refusal is returned, not thrown; bad inputs (no suite, an
// unreadable baseline file, a state held by a running bench) throw UsageError.
BenchOutcome run_bench(const BenchRequest& request);

}  // namespace kevo::workflows
