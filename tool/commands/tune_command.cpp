// `kernelevo tune`: tunes a kernel's KEVO_TUNABLE parameters on the local GPU, with no LLM.
#include <CLI/CLI.hpp>

#include <algorithm>

#include <cstdio>
#include <iostream>

#include "commands/commands.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "sol/sol.h"
#include "tune/tune.h"
#include "validate/validator_evaluator.h"

namespace kevo {

namespace {
struct TuneArgs {
    std::string task, kernel, arch, out;
    bool json = false;
    double timeout = 30;
    int timing_trials = 100;
    tune::TuneOptions opt;
};

std::string sol_of(const nlohmann::json& details) {
    const nlohmann::json* d = &details;
    if (d->contains("details")) d = &(*d)["details"];
    return d->contains("sol") ? sol::sol_line((*d)["sol"]) : std::string();
}


// The candidate and the target: --task, --kernel, --arch.
void add_input_options(CLI::App& cmd, TuneArgs& a) {
    cmd.add_option("--task", a.task, "Task file (JSON)")->required();
    cmd.add_option("--kernel", a.kernel, "Kernel (.cu) declaring KEVO_TUNABLE parameters")->required();
    cmd.add_option("--arch", a.arch, "Target architecture, e.g. sm_90 (default: the local GPU's)");
}

// How the space is searched: --strategy, --max-evals, --seed, --jobs.
void add_strategy_options(CLI::App& cmd, TuneArgs& a) {
    cmd.add_option("--strategy", a.opt.strategy,
                   "grid (every combination), random, tpe (Bayesian: Tree-structured Parzen Estimator), or auto: grid "
                   "when the space has at most --max-evals points, else tpe")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "grid", "random", "tpe"}));
    cmd.add_option("--max-evals", a.opt.max_evals, "Variants validated at most (the default values included)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    cmd.add_option("--seed", a.opt.seed, "Random seed (random and tpe)")->capture_default_str()->check(cli::Seed);
    cmd.add_option("--jobs", a.opt.compile_jobs, "Compiles at once (0: the machine's cores)")->capture_default_str()->check(CLI::NonNegativeNumber);
}

// What is written (--out, --json) and how each variant is run (--timeout, --timing-trials).
void add_output_and_run_options(CLI::App& cmd, TuneArgs& a) {
    cmd.add_option("--out", a.out, "Write the tuned kernel (the best values as defaults) to this .cu file");
    cmd.add_flag("--json", a.json, "Print the tuning result as one JSON object on stdout");
    cmd.add_option("--timeout", a.timeout, "Watchdog for running one variant, in seconds")->capture_default_str()
        ->check(cli::Seconds);
    cmd.add_option("--timing-trials", a.timing_trials, "Timed calls per shape set, at most (fewer once the time's 95% interval is within +-0.5%)")->capture_default_str()->check(CLI::Range(1, 100000));
}

// The kernel's tunables; a malformed declaration or none at all is bad usage.
std::vector<tune::Tunable> kernel_tunables(const TuneArgs& a, const std::string& source) {
    std::vector<tune::Tunable> tunables;
    try {
        tunables = tune::parse_tunables(source);
    } catch (const tune::TuneError& e) {
        throw UsageError(a.kernel + ": " + e.what());
    }
    if (tunables.empty())
        throw UsageError(a.kernel + " declares no tunable parameter (add e.g. KEVO_TUNABLE(BLOCK, 256, 64 128 256 512); "
                         "see kernelevo/abi.h)");
    return tunables;
}

// One progress line per validated variant: "[n] BLOCK=256: ok 1.234x (sol)" or its status.
void print_trial(size_t n, const tune::Trial& t) {
    char b[64];
    std::snprintf(b, sizeof b, "%.3fx", t.speedup);
    std::string line = t.status == Status::ok ? std::string("ok ") + b : std::string(status_name(t.status));
    std::string s = t.status == Status::ok ? sol_of(t.details) : std::string();
    std::cerr << "kernelevo: [" << n << "] " << tune::point_text(t.point) << ": " << line << (s.empty() ? "" : " (" + s + ")")
              << "\n";
}

// The summary after tuning, the tuned kernel written to --out; returns the exit code (0 a correct
// variant, 1 none correct, 2 none could run here).
int report_tuning(const TuneArgs& a, const tune::TuneResult& r) {
    if (a.json) std::cout << r.to_json().dump(2) << std::endl;
    const tune::Trial* best = r.best_trial();
    char b[256];
    std::snprintf(b, sizeof b, "%zu variant(s) in %.1f s (%.1f s on the GPU), strategy %s", r.trials.size(), r.wall_s, r.run_s,
                  r.strategy.c_str());
    std::cerr << "kernelevo: " << b << "\n";
    if (r.split.points > 0) std::cerr << "kernelevo: " << r.split.text() << "\n";
    if (std::all_of(r.trials.begin(), r.trials.end(), [](const tune::Trial& t) { return t.status == Status::no_device; })) {
        std::cerr << "kernelevo: no variant could run here (no_device: " << r.trials[0].feedback << ")\n";
        return kExitUsage;
    }
    if (!best) {
        std::cerr << "kernelevo: no variant was correct; the first failure: " << status_name(r.trials[0].status) << ": " << r.trials[0].feedback
                  << "\n";
        return kExitFailed;
    }
    std::snprintf(b, sizeof b, "%.3fx (the defaults: %.3fx)", best->speedup, r.trials[0].speedup);
    std::cerr << "kernelevo: best " << tune::point_text(best->point) << ": " << b << "\n";
    if (std::string s = sol_of(best->details); !s.empty()) std::cerr << "kernelevo: speed of light: " << s << "\n";
    if (!a.out.empty()) {
        write_file_atomic(a.out, r.best_source);
        std::cerr << "kernelevo: tuned kernel written to " << a.out << "\n";
    }
    return kExitSuccess;
}

// `kernelevo tune`'s work; returns the exit code.
int run_tune(const TuneArgs& a) {
    Task task = load_task(a.task);
    std::string source = read_kernel_file(a.kernel);  // a directory, a FIFO or a huge file refused with the reason
    std::vector<tune::Tunable> tunables = kernel_tunables(a, source);
    ValidateOptions vo;
    vo.arch = a.arch;
    vo.timeout_s = a.timeout;
    vo.timing_trials = a.timing_trials;
    Validator v(task, vo);
    const DeviceInfo& dev = v.device();
    if (!dev.present) {
        std::cerr << "kernelevo: " << (dev.error.empty() ? "no CUDA device here" : dev.error)
                  << ": tuning needs a GPU (status no_device)\n";
        return kExitUsage;
    }
    ValidatorEvaluator ev(v);
    const uint64_t space = tune::space_size(tunables);
    std::cerr << "kernelevo: tuning " << a.kernel << " for " << v.arch() << " on " << dev.name << ": " << tunables.size()
              << " tunable(s), " << space << " point(s), at most " << a.opt.max_evals << " validation(s)\n";
    size_t n = 0;
    tune::TuneResult r;
    try {
        r = tune::tune(source, ev, a.opt, [&](const tune::Trial& t) { print_trial(++n, t); });
    } catch (const tune::TuneError& e) {
        throw UsageError(e.what());
    }
    return report_tuning(a, r);
}
}  // namespace

void register_tune_command(CLI::App& app, int& rc) {
    auto a = std::make_shared<TuneArgs>();
    CLI::App* cmd = app.add_subcommand(
        "tune",
        "Tune a kernel's parameters on the local GPU, without any LLM. The parameters are its "
        "KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...) declarations; every variant "
        "is validated like `kernelevo validate`; compiles run in parallel, runs one at a time. Exit 0 a correct variant "
        "was found, 1 none was correct, 2 bad usage or no GPU.");
    add_input_options(*cmd, *a);
    add_strategy_options(*cmd, *a);
    add_output_and_run_options(*cmd, *a);
    cli::set_examples(*cmd, {
        {"Try every combination, or a Bayesian search when there are too many",
         "kernelevo tune --task gelu/task.json --kernel gelu.cu"},
        {"At most 40 variants, the best written to a file",
         "kernelevo tune --task gelu/task.json --kernel gelu.cu --strategy tpe --max-evals 40 --out gelu-tuned.cu"},
    });
    cmd->callback([a, &rc] { rc = run_tune(*a); });
}

}  // namespace kevo
