// `kernelevo validate`: compile, check and time one candidate kernel against a task's reference.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/log.h"
#include "compile/arch_support.h"
#include "baseline/baseline.h"
#include "language/registry.h"
#include "validate/annotate.h"
#include "validate/validate.h"

namespace kevo {

namespace {
struct ValidateArgs {
    std::string task, kernel, arch, python, backend = "auto";
    bool json = false, no_timing = false, keep = false, no_baselines = false, aoti = false;
    double timeout = 30, suspicious = 10;
    int trials = 100, warmup = 10, copies = 64, repeat = 1;
    double extend_s = kevo::ValidateOptions{}.extend_timing_s;
    uint64_t seed = 0;
    std::string flush = "read";
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
// `--repeat N`: the same compiled kernel validated N times by one validator, each in a fresh
// candidate process; prints the speedups and their largest deviation from the median.
int repeat_runs(Validator& v, const CompileResult& c, int n, bool as_json, bool progress) {
    std::vector<double> speedups;
    nlohmann::json runs = nlohmann::json::array();
    int failed = 0;
    for (int i = 0; i < n; ++i) {
        ValidationResult r = v.run(c);
        if (progress) std::cerr << "kernelevo: run " << i + 1 << "/" << n << ": " << status_name(r.status) << "\n";
        if (r.status == Status::no_device) {
            if (as_json) std::cout << r.to_json().dump(2) << std::endl;
            else print_human(v.task(), r);
            return kExitUsage;
        }
        runs.push_back({{"status", status_name(r.status)}, {"speedup", r.speedup}, {"kernel_us", r.kernel_us},
                        {"reference_us", r.reference_us}, {"shapes", r.shapes_json()}});
        if (r.status == Status::ok && r.speedup > 0) speedups.push_back(r.speedup);
        else {
            ++failed;
            if (!as_json) std::cout << "run " << i + 1 << ": " << status_name(r.status) << "\n" << r.log << "\n";
        }
    }
    std::vector<double> sorted = speedups;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? 0 : sorted.size() % 2 ? sorted[sorted.size() / 2] : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
    double worst = 0;
    for (double s : speedups) worst = std::max(worst, std::abs(s - median) / median);
    if (as_json) {
        std::cout << nlohmann::json{{"runs", runs}, {"median_speedup", median}, {"max_deviation", worst}, {"failed", failed}}.dump(2) << std::endl;
    } else {
        char b[128];
        for (size_t i = 0; i < runs.size(); ++i) {
            std::snprintf(b, sizeof b, "run %zu: %-8s speedup %.4fx  kernel %s  reference %s", i + 1, runs[i]["status"].get<std::string>().c_str(),
                          runs[i]["speedup"].get<double>(), us(runs[i]["kernel_us"].get<double>()).c_str(), us(runs[i]["reference_us"].get<double>()).c_str());
            std::cout << b;
            for (const auto& s : runs[i]["shapes"]) {
                std::snprintf(b, sizeof b, "  [%s: %.4fx]", s["label"].get<std::string>().c_str(), s["speedup"].get<double>());
                std::cout << b;
            }
            std::cout << "\n";
        }
        std::snprintf(b, sizeof b, "median speedup %.4fx; largest deviation from it %.2f%% over %zu ok runs\n", median, worst * 100, speedups.size());
        std::cout << b;
    }
    return exit_code_of(failed == 0);
}
// The PyTorch baselines beside a correct, timed kernel (tool/baseline): measured in the sandbox under
// the GPU lock, or "not run: <reason>" (--no-baselines, a task without a PyTorch module, no PyTorch 2).
baseline::Result baselines(const ValidateArgs& a, const Task& task, const DeviceInfo& device, bool progress) {
    baseline::Result b;
    if (a.no_baselines) {
        b.precision = baseline::task_precision(task);
        for (const auto& k : baseline::kinds()) b.not_run[k] = "--no-baselines";
        return b;
    }
    baseline::Options o;
    o.python = a.python;
    o.l2_flush = a.flush;
    o.trials = a.trials;
    o.warmup = a.warmup;
    if (a.seed) o.seed = a.seed;
    if (a.aoti) o.which = baseline::asked({"aoti"});
    if (progress && baseline::no_module_reason(task.file.parent_path()).empty())
        std::cerr << "kernelevo: timing the PyTorch baselines (" << baseline::columns(o.which) << ") ...\n";
    o.note = [=](const std::string& line) {
        if (progress) std::cerr << "kernelevo: " << line << "\n";
    };
    return baseline::measure(task, o, device);
}

// The candidate: --task, --kernel, its language (--backend) and Python (--python).
void add_candidate_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_option("--task", a.task, "Task file (JSON)")->required();
    cmd.add_option("--kernel", a.kernel, language::kernel_help())->required();
    cmd.add_option("--backend", a.backend, language::backend_help())
        ->capture_default_str()
        ->check(CLI::IsMember(language::backend_choices()));
    const std::string languages = language::python_help();  // each Python-run language: what --python is to it
    cmd.add_option("--python", a.python,
                   (languages.empty() ? std::string("The Python") : languages + "; also the Python") +
                       " with PyTorch for the baselines (default: python3 if it has torch, else /usr/bin/python3)");
}

// The PyTorch baselines timed beside a correct kernel: --no-baselines, --aoti.
void add_baseline_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_flag("--no-baselines", a.no_baselines,
                 "Do not time the PyTorch baselines. By default a correct kernel of a task with a PyTorch module (an imported "
                 "problem.py, an exported model) is also compared with PyTorch eager and torch.compile (Inductor, default "
                 "mode), timed on the validator's inputs under the task's precision policy; one that cannot run says why");
    cmd.add_flag("--aoti", a.aoti,
                 "Also time AOTInductor (torch.export, then torch._inductor.aoti_compile_and_package per timed shape set: what a "
                 "C++ user deploying through LibTorch runs); opt-in because its ahead-of-time compilation takes tens of seconds");
}

// Where and how the candidate runs: --arch, --json, --timeout.
void add_run_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_option("--arch", a.arch, "Target architecture, e.g. sm_90 (default: the local GPU's, else sm_90)");
    cmd.add_flag("--json", a.json, "Print one JSON object on stdout instead of a summary");
    cmd.add_option("--timeout", a.timeout, "Watchdog for running the candidate, in seconds")->capture_default_str()
        ->check(cli::Seconds);
}

// How the candidate and the reference are timed: trials, extension, warm-up, L2 flush, copies.
void add_timing_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_option("--timing-trials", a.trials, "Timed calls per shape set, at most (fewer once the time's 95% interval is within +-0.5%)")->capture_default_str()->check(CLI::Range(1, 100000));
    cmd.add_option("--timing-extend", a.extend_s,
                   "Seconds a shape set still imprecise at --timing-trials may spend on more calls (up to 10x as many); 0: none")
        ->capture_default_str()
        ->check(cli::FiniteNumber)->check(CLI::Range(0.0, 60.0));
    cmd.add_option("--warmup", a.warmup, "Warm-up calls per implementation")->capture_default_str()->check(CLI::Range(0, 10000));
    cmd.add_option("--l2-flush", a.flush,
                   "How L2 is flushed before each timed call: read (a proven read of a buffer 4x L2, leaving clean lines) or none")
        ->capture_default_str()
        ->check(CLI::IsMember({"read", "none"}));
    cmd.add_option("--timing-copies", a.copies, "Copies of the inputs and outputs, one per call of a timed batch (fewer where GPU memory is short)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
}

// What is checked and how often: --suspicious, --no-timing, --seed, --repeat, --keep-temps.
void add_check_options(CLI::App& cmd, ValidateArgs& a) {
    cmd.add_option("--suspicious", a.suspicious, "Flag speedups above this factor")->capture_default_str()->check(cli::FiniteNumber)->check(CLI::PositiveNumber);
    cmd.add_flag("--no-timing", a.no_timing, "Check correctness only");
    cmd.add_option("--seed", a.seed,
                   "The inputs' seed, to repeat a validation (its result's details carry the seed it used); "
                   "default: a fresh random seed every validation")
        ->check(cli::Seed)->check(CLI::PositiveNumber);
    cmd.add_option("--repeat", a.repeat,
                   "Validate the kernel N times in one run, as a search does (one runner; the reference timed on the first "
                   "and reused), and print each speedup and their largest deviation from the median: the timing's repeatability")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd.add_flag("--keep-temps", a.keep, "Keep the runner's job directory (for debugging)");
}

ValidateOptions validate_options(const ValidateArgs& a, const Task& task) {
    ValidateOptions opt;
    opt.arch = a.arch.empty() ? std::string() : normalize_arch(a.arch);
    opt.timeout_s = a.timeout;
    opt.timing_trials = a.trials;
    opt.extend_timing_s = a.extend_s;
    opt.warmup = a.warmup;
    opt.l2_flush = a.flush;
    opt.timing_copies = a.copies;
    opt.suspicious_speedup = a.suspicious;
    opt.time_kernels = !a.no_timing;
    opt.seed = a.seed;
    opt.keep_temps = a.keep;
    opt.compile.backend = a.backend;
    opt.compile.python = a.python;
    opt.compile.task = std::make_shared<const Task>(task);
    return opt;
}

// Compiles the candidate, with progress lines on stderr unless `progress` is off.
CompileResult compile_with_progress(Validator& v, const ValidateArgs& a, const std::string& source, const CompileOptions& co,
                                    bool progress) {
    if (progress) {
        // A language whose candidate is not the .cu compiles it into one ahead of time.
        const CandidateLanguage& l = language::chosen(source, co);
        const bool ahead = !l.cache_source_extension().empty();
        std::cerr << "kernelevo: compiling " << a.kernel << " for " << v.arch()
                  << (ahead ? " (" + l.display_name() + ", ahead of time)" : "") << " ...\n";
    }
    CompileResult c = v.compile(source);
    if (progress && c.ok) {
        char b[64];
        std::snprintf(b, sizeof b, "%.2f s", c.seconds);
        std::cerr << "kernelevo: compiled in " << b << (c.cached ? " (cached)" : "") << "; running ...\n";
        if (verbose() && !c.log.empty()) std::cerr << "kernelevo: compiler output:\n" << c.log << "\n";
    }
    return c;
}

// The result (with its baselines, if any) as JSON or as a summary; returns the exit code.
int report_validation(const ValidateArgs& a, const Task& task, const ValidationResult& r, const std::optional<baseline::Result>& base) {
    if (a.json) {
        nlohmann::json j = r.to_json();
        if (base) j["baselines"] = baseline::speedups_json(*base, r.shapes);
        std::cout << j.dump(2) << std::endl;
    } else {
        print_human(task, r);
        if (base) std::cout << baseline::speedup_lines(*base, r.shapes, "  ");
    }
    if (!a.json && verbose() && !r.details.is_null()) std::cerr << "kernelevo: details:\n" << r.details.dump(2) << "\n";
    return exit_code_of(r.status == Status::ok, r.status == Status::no_device);
}

// `kernelevo validate`'s work; returns the exit code.
int run_validate(const ValidateArgs& a) {
    if (a.repeat > 1 && a.no_timing)
        throw UsageError("--repeat measures how well the timing repeats; it cannot be combined with --no-timing");
    Task task = load_task(a.task);
    std::string source = read_kernel_file(a.kernel);  // a directory, a FIFO or a huge file refused with the reason
    const ValidateOptions opt = validate_options(a, task);
    auto v = std::make_unique<Validator>(task, opt);  // ended before the baselines run (below)
    // An architecture the toolkit cannot compile is a setup error, not a failed candidate.
    require_toolkit_arch(v->arch(), opt.compile);
    const bool progress = !a.json && !quiet();
    CompileResult c = compile_with_progress(*v, a, source, opt.compile, progress);
    if (a.repeat > 1 && c.ok) return repeat_runs(*v, c, a.repeat, a.json, progress);  // a compile error is reported once, below
    ValidationResult r = v->run(c);
    annotate_resources(r, c);
    auto [gbs, source_of_gbs] = sol::bandwidth_of(v->device(), r.ok() ? v->measured_bandwidth_gbs() : 0.0);
    annotate_sol(r, task, gbs, source_of_gbs, v->device().sm_count);
    std::optional<baseline::Result> base;
    if (r.ok() && r.kernel_us > 0) {
        // The judge keeps GPU memory (its timing copies) while it lives: it ends before PyTorch runs.
        const DeviceInfo device = v->device();
        v.reset();
        base = baselines(a, task, device, progress);
    }
    return report_validation(a, task, r, base);
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
