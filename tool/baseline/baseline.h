// The baselines users pick instead of a kernel: the task's PyTorch module in eager PyTorch, under
// torch.compile (Inductor, default mode) and, when asked (--aoti), compiled ahead of time by
// AOTInductor (what a C++ user deploying through LibTorch runs), timed in the same run on the validator's inputs
// (baseline_torch.py, run in the import's sandbox: the module is someone else's Python), and a
// kernel's speedup over each. A baseline that could not run carries its reason ("not run: ..."),
// never a zero.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "evaluate/evaluator.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo::baseline {

// The one table of the baselines (baseline.cpp), in the order every output shows them.
struct Kind {
    const char* name;    // as options and JSON name it: "eager", "compile", "aoti"
    const char* label;   // for people: "PyTorch eager", "torch.compile (Inductor, default mode)", ...
    const char* column;  // short, for a table's "speedup over ..." column
    const char* opt_in;  // empty: timed by default; else the flag that asks for it (and why it is not default)
};
const std::vector<Kind>& table();
// The baselines' names, in the table's order.
const std::vector<std::string>& kinds();
// The names timed when nothing more is asked: those without opt_in, plus the opt-in ones in `also`.
std::vector<std::string> asked(const std::vector<std::string>& also = {});
// The kind's label; "reference" is "the LibTorch reference". Unknown: UsageError naming the choices.
std::string label(const std::string& kind);
// The kind's short column name ("eager", "torch.compile", "AOTInductor").
std::string column(const std::string& kind);
// "reference, eager, compile or aoti": what --fitness-baseline accepts, for messages and help.
std::string choices();
// The columns of `which`, for progress lines: "eager, torch.compile, AOTInductor".
std::string columns(const std::vector<std::string>& which);
// The task's precision policy's name (task.json "precision", task/precision.h).
std::string task_precision(const Task& task);

struct Options {
    std::string python;             // empty: python3 if it has torch, else /usr/bin/python3
    std::vector<std::string> which = asked();  // the others are "not run: not asked for (<opt_in>)"
    std::string l2_flush = "read";  // as the judge times the reference (ValidateOptions::l2_flush)
    int warmup = 10, trials = 100;  // calls before timing (torch.compile compiles on the first), timed calls
    uint64_t seed = 42;             // copy c of a set draws the validator's inputs of seed + c
    int copies = 2;                 // input copies cycled through the timed calls
    double timeout_s = 1800;
    double memory_pause_s = 2;      // the first pause before measuring again when the GPU's memory was full
    std::function<void(const std::string&)> note;  // a wait for the GPU's lock or memory, said once per wait
};

struct SetTime {
    int set = 0;
    std::string label;
    double eager_us = -1, compile_us = -1, aoti_us = -1;  // -1: not measured
    double us(const std::string& kind) const;
};

// What torch.compile runs, from Inductor's generated code for the first timed set (baseline_torch.py's
// capture_inductor): the kernels it generates and its call(), cut at about 12 KB.
struct InductorCode {
    std::string code;                        // the generated kernels' code, then call(): launches and library calls
    std::vector<std::string> kernels;        // the generated kernels' names
    std::vector<std::string> library_calls;  // what call() calls outside them (extern_kernels.mm, aten...), once each
    int64_t bytes = 0;                       // the code's size before it was cut
    std::string not_captured;                // why there is no code ("" when there is)
};

struct Result {
    std::vector<SetTime> sets;                     // the task's timed shape sets
    std::map<std::string, std::string> not_run;    // kind -> why it has no time
    // kind -> how its outputs matched eager's on each set's first copy: {"rel_l2", "tol"} (compile, aoti)
    nlohmann::json checks = nlohmann::json::object();
    std::string torch_version, device, precision, module;
    InductorCode inductor;
    // The first timed set's time (-1: not run).
    double us(const std::string& kind) const;
    bool ran(const std::string& kind) const { return !not_run.count(kind) && us(kind) > 0; }
    // "not run: <reason>" for a kind without a time, else "".
    std::string why_not(const std::string& kind) const;
    nlohmann::json to_json() const;
    static Result from_json(const nlohmann::json& j);
};

// Whether the task has a PyTorch module to run (an imported KernelBench task's problem.py, an
// exported task's pytorch.json); else why not.
std::string no_module_reason(const std::filesystem::path& task_dir);

// Measures the baselines of `task` on its timed shape sets, under the device's GPU lock when
// `device` is present. Never throws for a baseline that cannot run: its reason is in not_run.
// AOTInductor, when asked for with others, is measured by a second process of its own (a crash there
// costs only its own time).
Result measure(const Task& task, const Options& options, const DeviceInfo& device);
// Whether a baseline of `r` has no time because the GPU's memory was full (PyTorch's "out of memory").
bool out_of_memory(const Result& r);
// once() again while its result is out_of_memory(): after pauses that double from `pause_s` (at most
// 30 s), six attempts in all, as a validation waits for its share. A baseline still without memory then
// says so, with the processes holding the GPU's memory when nvidia-smi can name them.
Result measure_for_memory(const std::function<Result()>& once, double pause_s);
// Why the baseline script gave no answer, from its process: a crash inside one of AOTInductor's steps
// (the script names each on stderr before it starts) is said to be PyTorch's, naming the step.
std::string script_failure(const ProcessResult& p);
// `r` (eager and torch.compile) with AOTInductor's time, reason and check taken from `aoti`'s run.
Result with_aoti(Result r, const Result& aoti);

// A kernel's speedup over a baseline: the weighted geometric mean over its timed sets of
// baseline time / kernel time (task/fitness.h); 0 when a set has no baseline time.
double speedup_over(const Result& b, const std::string& kind, const std::vector<ShapeTiming>& kernel);

// Lines for people: each baseline's time and the kernel's speedup over it, labelled with what it is
// and the precision ("  torch.compile (Inductor, default mode)  1.94 ms (precision pytorch): 0.43x"),
// or "not run: <reason>". `indent` starts each line.
std::string speedup_lines(const Result& b, const std::vector<ShapeTiming>& kernel, const std::string& indent);
// {"eager": {"label", "us", "speedup"} | {"label", "not_run"}, "compile": ... (with "check": {"rel_l2", "tol"}), "aoti": ...,
//  "precision", "torch_version", "device"}.
nlohmann::json speedups_json(const Result& b, const std::vector<ShapeTiming>& kernel);

// The search's prompt section on the time to beat (evolve's {{to_beat}}), when torch.compile ran: its time
// and PyTorch eager's on each timed set, then what it runs (Inductor's code, cut at `max_code_bytes`, with
// its library calls and kernels). "" otherwise: the prompts are then as without PyTorch baselines.
std::string to_beat_section(const Result& b, size_t max_code_bytes = 12000);

// `kernelevo search --fitness-baseline compile|eager|aoti`: the search's fitness is the speedup over that
// baseline (measured once, before the search) instead of over the reference. Wraps the evaluator:
// each correct candidate's speedup is recomputed from its per-set kernel times; the speedup over the
// reference stays in its details ("speedup_over_reference").
std::unique_ptr<Evaluator> fitness_over(Evaluator& inner, const Result& b, const std::string& kind);

}  // namespace kevo::baseline
