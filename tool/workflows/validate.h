// The use case "validate a candidate": one `kernelevo validate` from its request to its outcome: the
// task and the kernel read, the judge set up (an architecture the toolkit cannot compile refused as
// a setup problem), the candidate compiled and run once (or again and again, for the timing's
// repeatability), its resources and speed of light noted and, beside a correct and timed kernel, the
// PyTorch baselines timed once the judge has ended. Progress lines go to stderr; the command prints
// the outcome.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "baseline/baseline.h"
#include "common/exit_code.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo::workflows {

struct ValidateRequest {
    std::string task, kernel;  // the task file, the candidate's file
    ValidateOptions options;   // the judge's (its architecture normalized and its task filled in here)
    bool baselines = true;     // time the PyTorch baselines beside a correct, timed kernel
    bool aoti = false;         // AOTInductor among them
    int repeat = 1;            // more than 1: the compiled kernel validated this many times
    bool progress = false;     // progress lines on stderr
    std::function<void(int run, const ValidationResult&)> each_run;  // repeat: each run (from 1) as it ends
};

struct ValidateOutcome {
    Task task;
    ValidationResult result;                    // the validation (repeat: the run that found no GPU)
    std::optional<baseline::Result> baselines;  // beside a correct, timed kernel: measured, or why not
    // repeat (compiled): each run, and the speedups of the correct ones with their median and largest
    // relative deviation from it; a run that finds no GPU ends them (`result`, rc 2).
    bool repeated = false;
    std::vector<ValidationResult> runs;
    std::vector<double> speedups;
    double median_speedup = 0, max_deviation = 0;
    int rc = kExitFailed;  // as `kernelevo validate` exits: 0 correct, 1 not, 2 no GPU to run on
};

// Throws UsageError on a broken task, an unreadable kernel or an architecture the toolkit cannot
// compile.
ValidateOutcome validate(const ValidateRequest& request);

}  // namespace kevo::workflows
