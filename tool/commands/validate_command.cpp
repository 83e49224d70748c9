// `kernelevo validate`: compile, check and time one candidate kernel against a task's reference; the
// use case is workflows::validate().
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/log.h"
#include "language/registry.h"
#include "sol/sol.h"
#include "validate/annotate.h"
#include "workflows/validate.h"

namespace kevo {

namespace {
struct ValidateArgs {
    workflows::ValidateRequest request;  // the options below that are the use case's fill it directly
    bool json = false, no_timing = false, no_baselines = false;
};

std::string us(double v) {
    char b[32];
    std::snprintf(b, sizeof b, v >= 100 ? "%.1f us" : "%.2f us", v);
    return b;
}

// Which precision the reference ran in for correctness and for timing (the judge reports it in
// details.reference_precision, as text or {"correctness", "timing"}).
void print_reference_precision(const nlohmann::json& details) {
    const nlohmann::json* p = nullptr;
    if (details.contains("reference_precision")) p = &details["reference_precision"];
    else if (details.contains("timing") && details["timing"].contains("reference_precision")) p = &details["timing"]["reference_precision"];
    if (!p) return;
    if (p->is_string()) std::cout << "  precision    " << p->get<std::string>() << "\n";
    else if (p->is_object())
        std::cout << "  precision    correctness " << p->value("correctness", std::string("?")) << "; timing "
                  << p->value("timing", std::string("?")) << "\n";
}

void print_human(const Task& task, const ValidationResult& r) {
    std::cout << task.name << " on " << (r.gpu.empty() ? "(no GPU)" : r.gpu) << " (" << r.arch << "): " << status_name(r.status) << "\n";
    if (r.status == Status::ok) {
        char b[512];
        std::snprintf(b, sizeof b, "  correctness  %d trials over %zu shape set(s), max |diff| %.3g (atol %g, rtol %g)\n", r.trials,
                      task.shapes.size(), r.max_abs_diff, task.atol, task.rtol);
        std::cout << b;
        if (!task.tolerance_policy.empty()) std::cout << "  tolerance    " << task.tolerance_policy << "\n";
        print_reference_precision(r.details);
        if (r.kernel_us > 0) {
            std::snprintf(b, sizeof b, "  kernel       %s (spread %.1f%%)\n  reference    %s (spread %.1f%%)\n  speedup      %.3fx over the LibTorch reference (precision %s)%s\n",
                          us(r.kernel_us).c_str(), 100 * r.kernel_spread, us(r.reference_us).c_str(), 100 * r.reference_spread,
                          r.speedup, task.precision.label().c_str(), r.suspicious ? "  (suspicious: check by hand)" : "");
            std::cout << b;
            // Where LibTorch's defaults run TF32, the reference in strict fp32 (what correctness is
            // judged against) was timed too; the speedup above stays the one against the defaults.
            const auto& d = r.details;
            if (d.contains("speedup_vs_strict_fp32") && d.contains("timing") && d["timing"].contains("reference_strict_us")) {
                std::snprintf(b, sizeof b, "  reference strict fp32: %s (speedup %.3fx against it)\n",
                              us(d["timing"]["reference_strict_us"].get<double>()).c_str(), d["speedup_vs_strict_fp32"].get<double>());
                std::cout << b;
            }
        }
        if (r.details.contains("sol")) {
            const auto& sol = r.details["sol"];
            std::cout << "  speed of light  " << sol::sol_line(sol) << " [" << sol.value("bandwidth_source", std::string()) << " "
                      << static_cast<long>(sol.value("bandwidth_gbs", 0.0)) << " GB/s]\n";
        }
    }
    if (r.details.contains("resources") && !r.details["resources"].empty()) {
        std::vector<KernelResources> k;
        for (const auto& j : r.details["resources"]) k.push_back(KernelResources::from_json(j));
        std::cout << "  ptxas        " << resources_summary(k) << "\n";
    }
    if (!r.log.empty()) std::cout << (r.status == Status::ok ? "" : "\n") << r.log << (r.log.back() == '\n' ? "" : "\n");
}
// `--repeat N`: each run's speedup and their largest deviation from the median.
void print_repeats(const workflows::ValidateOutcome& o, bool as_json) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : o.runs)
        runs.push_back({{"status", status_name(r.status)}, {"speedup", r.speedup}, {"kernel_us", r.kernel_us},
                        {"reference_us", r.reference_us}, {"shapes", r.shapes_json()}});
    const size_t failed = o.runs.size() - o.speedups.size();
    if (as_json) {
        const nlohmann::json j = {{"runs", runs}, {"median_speedup", o.median_speedup},
                                  {"max_deviation", o.max_deviation}, {"failed", failed}};
        std::cout << j.dump(2) << std::endl;
        return;
    }
    char b[128];
    for (size_t i = 0; i < runs.size(); ++i) {
        const ValidationResult& r = o.runs[i];
        std::snprintf(b, sizeof b, "run %zu: %-8s speedup %.4fx  kernel %s  reference %s", i + 1,
                      status_name(r.status), r.speedup, us(r.kernel_us).c_str(), us(r.reference_us).c_str());
        std::cout << b;
        for (const auto& s : runs[i]["shapes"]) {
            std::snprintf(b, sizeof b, "  [%s: %.4fx]", s["label"].get<std::string>().c_str(),
                          s["speedup"].get<double>());
            std::cout << b;
        }
        std::cout << "\n";
    }
    std::snprintf(b, sizeof b, "median speedup %.4fx; largest deviation from it %.2f%% over %zu ok runs\n",
                  o.median_speedup, o.max_deviation * 100, o.speedups.size());
    std::cout << b;
}

// The candidate: --task, --kernel, its language (--backend) and Python (--python).
void add_candidate_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_option("--task", a.request.task, "Task file (JSON)")->required();
    cmd.add_option("--kernel", a.request.kernel, language::kernel_help())->required();
    cmd.add_option("--backend", a.request.options.compile.backend, language::backend_help())
        ->capture_default_str()
        ->check(CLI::IsMember(language::backend_choices()));
    const std::string languages = language::python_help();  // each Python-run language: what --python is to it
    cmd.add_option("--python", a.request.options.compile.python,
                   (languages.empty() ? std::string("The Python") : languages + "; also the Python") +
                       " with PyTorch for the baselines (default: python3 if it has torch, else /usr/bin/python3)");
}

// The PyTorch baselines timed beside a correct kernel: --no-baselines, --aoti.
void add_baseline_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_flag("--no-baselines", a.no_baselines,
                 "Do not time the PyTorch baselines. By default a correct kernel of a task with a PyTorch module (an imported "
                 "problem.py, an exported model) is also compared with PyTorch eager and torch.compile (Inductor, default "
                 "mode), timed on the validator's inputs under the task's precision policy; one that cannot run says why");
    cmd.add_flag("--aoti", a.request.aoti,
                 "Also time AOTInductor (torch.export, then torch._inductor.aoti_compile_and_package per timed shape set: what a "
                 "C++ user deploying through LibTorch runs); opt-in because its ahead-of-time compilation takes tens of seconds");
}

// Where and how the candidate runs: --arch, --json, --timeout.
void add_run_options(CLI::App& cmd, ValidateArgs& a) {
    ValidateOptions& vo = a.request.options;
    cmd.add_option("--arch", vo.arch, "Target architecture, e.g. sm_90 (default: the local GPU's, else sm_90)");
    cmd.add_flag("--json", a.json, "Print one JSON object on stdout instead of a summary");
    cmd.add_option("--timeout", vo.timeout_s, "Watchdog for running the candidate, in seconds")->capture_default_str()
        ->check(cli::Seconds);
}

// How the candidate and the reference are timed: trials, extension, warm-up, L2 flush, copies.
void add_timing_options(CLI::App& cmd, ValidateArgs& a) {
    ValidateOptions& vo = a.request.options;
    cmd.add_option("--timing-trials", vo.timing_trials,
                   "Timed calls per shape set, at most (fewer once the time's 95% interval is within +-0.5%)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    cmd.add_option("--timing-extend", vo.extend_timing_s,
                   "Seconds a shape set still imprecise at --timing-trials may spend on more calls (up to 10x as many); 0: none")
        ->capture_default_str()
        ->check(cli::FiniteNumber)->check(CLI::Range(0.0, 60.0));
    cmd.add_option("--warmup", vo.warmup, "Warm-up calls per implementation")
        ->capture_default_str()
        ->check(CLI::Range(0, 10000));
    cmd.add_option("--l2-flush", vo.l2_flush,
                   "How L2 is flushed before each timed call: read (a proven read of a buffer 4x L2, leaving clean lines) or none")
        ->capture_default_str()
        ->check(CLI::IsMember({"read", "none"}));
    cmd.add_option("--timing-copies", vo.timing_copies,
                   "Copies of the inputs and outputs, one per call of a timed batch (fewer where GPU memory is short)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
}

// What is checked and how often: --suspicious, --no-timing, --seed, --repeat, --keep-temps.
void add_check_options(CLI::App& cmd, ValidateArgs& a) {
    ValidateOptions& vo = a.request.options;
    cmd.add_option("--suspicious", vo.suspicious_speedup, "Flag speedups above this factor")
        ->capture_default_str()
        ->check(cli::FiniteNumber)
        ->check(CLI::PositiveNumber);
    cmd.add_flag("--no-timing", a.no_timing, "Check correctness only");
    cmd.add_option("--seed", vo.seed,
                   "The inputs' seed, to repeat a validation (its result's details carry the seed it used); "
                   "default: a fresh random seed every validation")
        ->check(cli::Seed)->check(CLI::PositiveNumber);
    cmd.add_option("--repeat", a.request.repeat,
                   "Validate the kernel N times in one run, as a search does (one runner; the reference timed on the first "
                   "and reused), and print each speedup and their largest deviation from the median: the timing's repeatability")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd.add_flag("--keep-temps", vo.keep_temps, "Keep the runner's job directory (for debugging)");
}

// `kernelevo validate`'s work; returns the exit code.
int run_validate(ValidateArgs& a) {
    if (a.request.repeat > 1 && a.no_timing)
        throw UsageError("--repeat measures how well the timing repeats; it cannot be combined with --no-timing");
    workflows::ValidateRequest& req = a.request;
    req.options.time_kernels = !a.no_timing;
    req.baselines = !a.no_baselines;
    req.progress = !a.json && !quiet();
    req.each_run = [&a](int i, const ValidationResult& r) {
        if (a.request.progress)
            std::cerr << "kernelevo: run " << i << "/" << a.request.repeat << ": " << status_name(r.status) << "\n";
        if (!a.json && r.status != Status::no_device && !(r.status == Status::ok && r.speedup > 0))
            std::cout << "run " << i << ": " << status_name(r.status) << "\n" << r.log << "\n";
    };
    const workflows::ValidateOutcome o = workflows::validate(req);
    if (o.repeated && o.rc != kExitUsage) {  // (a run that found no GPU is printed as one validation)
        print_repeats(o, a.json);
        return o.rc;
    }
    const ValidationResult& r = o.result;
    if (a.json) {
        nlohmann::json j = r.to_json();
        if (o.baselines) j["baselines"] = baseline::speedups_json(*o.baselines, r.shapes);
        std::cout << j.dump(2) << std::endl;
    } else {
        print_human(o.task, r);
        if (o.baselines) std::cout << baseline::speedup_lines(*o.baselines, r.shapes, "  ");
    }
    if (!a.json && verbose() && !r.details.is_null() && !o.repeated)
        std::cerr << "kernelevo: details:\n" << r.details.dump(2) << "\n";
    return o.rc;
}
}  // namespace

void register_validate_command(CLI::App& app, int& rc) {
    auto args = std::make_shared<ValidateArgs>();
    CLI::App* cmd = app.add_subcommand("validate",
                                       "Check a candidate kernel against the task's reference and time both. "
                                       "Compile a candidate kernel, check it against the task's reference on seeded random inputs "
                                       "for every shape set, and time both on every shape set (a set's time: the interquartile mean of its calls, at least its lowest batch's mean per call over 1.1, less the candidate process's extra launch cost over the judge's where L2 is flushed; "
                                       "the speedup: the geometric mean over the sets); report the fraction of the speed of light (bytes moved "
                                       "over the device bandwidth, FLOPs over its peak) and ptxas's registers, spills and shared memory. "
                                       "Exit 0 ok, 1 the candidate failed, "
                                       "2 bad usage, a broken task or setup, or no GPU to run on (status no_device).");
    add_candidate_options(*cmd, *args);
    add_baseline_options(*cmd, *args);
    add_run_options(*cmd, *args);
    add_timing_options(*cmd, *args);
    add_check_options(*cmd, *args);
    cli::add_verbosity_flags(*cmd, "Also print the compiler output and the runner's details (per-trial checks, timing, device)");
    cli::set_examples(*cmd, {
        {"Validate a kernel on this machine's GPU", "kernelevo validate --task gelu/task.json --kernel gelu.cu"},
        {"A candidate in another language (a .py: see --kernel), the result as JSON",
         "kernelevo validate --task gelu/task.json --kernel gelu.py --json"},
    });
    cmd->callback([args, &rc] { rc = run_validate(*args); });
}

}  // namespace kevo
