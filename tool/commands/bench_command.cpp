// `kernelevo bench --suite DIR --out REPORT_DIR [search options | --kernels DIR]`.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>

#include "baseline/baseline.h"
#include "bench/bench.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/commands.h"
#include "commands/search_command.h"
#include "common/error.h"
#include "language/registry.h"
#include "workflows/bench.h"

namespace kevo {
namespace {

struct BenchArgs {
    workflows::BenchRequest request;
    bool torch_compile = false;  // kept for older scripts: the baselines are timed by default
};

// A refused bench in the command line's words (the use case says what is wrong, not which option).
[[noreturn]] void refuse(const workflows::BenchOutcome& o) {
    switch (o.refused) {
        case workflows::BenchRefusal::unreadable_state:
            throw UsageError(o.state_file.string() + ": not a bench state (remove it or pass --fresh)");
        case workflows::BenchRefusal::other_bench:
            throw UsageError("--out " + o.out.string() + " holds a bench of " + o.held_suite + " (mode " + o.held_mode +
                             "): pass --fresh to start over, or another --out");
        case workflows::BenchRefusal::no_gpu:
            throw UsageError("no usable GPU here (" + o.device_error + "): the search validates every candidate on the local GPU; "
                             "run the bench on a GPU host, or validate ready kernels with --kernels");
        case workflows::BenchRefusal::none:
            break;
    }
    throw UsageError(o.why);
}

// The bench's last lines: correct tasks, fast_p, geomeans over the reference and each baseline.
void print_summary(const workflows::BenchOutcome& o, bool json) {
    const bench::Summary& sum = o.summary;
    // "Correct" among the tasks that ran: tasks with no GPU of their architecture here are not run, not failed.
    // Tasks without a kernel (none in --kernels, none found by the search) were not run either.
    const std::string of = " of " + std::to_string(sum.tasks);
    std::string aside = sum.no_kernel ? std::to_string(sum.no_kernel) + of + " without a kernel" : "";
    if (sum.not_run)
        aside += (aside.empty() ? "" : "; ") + std::to_string(sum.not_run) + of +
                 " not run: no GPU of their architecture here";
    std::cerr << "kernelevo: " << sum.correct << " of " << sum.tasks - sum.not_run - sum.no_kernel << " run correct"
              << (aside.empty() ? "" : " (" + aside + ")");
    for (auto [p, share] : sum.fast_p)
        if (p > 0) std::cerr << ", fast_" << p << " " << share;
    if (sum.correct) std::cerr << ", geomean " << sum.geomean_speedup << "x over the LibTorch reference";
    for (const auto& b : sum.baselines) {
        std::cerr << "; over " << baseline::label(b.kind) << (sum.precision.empty() ? "" : " (precision " + sum.precision + ")") << ": ";
        if (!b.measured) std::cerr << b.not_run;
        else std::cerr << "geomean " << (b.correct ? std::to_string(b.geomean_speedup).substr(0, 5) + "x" : std::string("-")) << " over "
                       << b.measured << " task(s) with its time";
    }
    std::cerr << "; reports in " << o.out.string() << " (report.md, report.json, report.html)\n";
    if (json) std::cout << bench::report_json(o.results, o.info).dump(2) << std::endl;  // report.json's document
    if (sum.not_run) std::cerr << "kernelevo: " << sum.not_run << " task(s) not run: no GPU of this architecture here\n";
    if (o.interrupted) std::cerr << "kernelevo: interrupted; run the same command again to continue\n";
}

// Parse what is left (the model folder, the options that do not go together), run, print.
void run(BenchArgs& a, const std::vector<const CLI::Option*>& search_only, const std::string& model_dir, int& rc) {
    workflows::BenchRequest& q = a.request;
    if (!model_dir.empty()) {
        const workflows::ModelSuite m = workflows::model_suite(model_dir);
        q.suite = m.suite;
        if (q.out.empty()) q.out = m.out;
    }
    if (q.suite.empty()) throw UsageError("bench: give --suite DIR (a suite of tasks) or --model-dir DIR (a model's regions)");
    if (q.out.empty()) throw UsageError("bench: --out is required with --suite (the report directory)");
    std::string given;
    size_t n = 0;
    for (const CLI::Option* o : search_only)
        if (o->count() > 0) given += (n++ ? ", " : "") + o->get_name();
    if (!q.kernels.empty() && n)
        throw UsageError("--kernels validates ready kernels and runs no search, so " + given + (n == 1 ? " has" : " have") +
                         " no effect: remove " + (n == 1 ? "it" : "them") +
                         " (with --kernels only --arch, --timeout, --timing-trials, --no-baselines and --aoti apply)");
    q.progress = [](const std::string& line) { std::cerr << line << "\n"; };
    const workflows::BenchOutcome o = workflows::run_bench(q);
    if (o.refused != workflows::BenchRefusal::none) refuse(o);
    print_summary(o, q.search.json);
    rc = o.rc;
}

}  // namespace

void register_bench_command(CLI::App& app, int& rc) {
    auto a = std::make_shared<BenchArgs>();
    CLI::App* cmd = app.add_subcommand(
        "bench",
        "Benchmark a suite of tasks and report fast_p. The suite is "
        "DIR/NAME/task.json, e.g. from `kernelevo import kernelbench`; bench runs the search on "
        "every task (the search options, budgets and --max-time included, apply to each task's search), or validates "
        "ready kernels (--kernels), and writes REPORT_DIR/report.{md,json,html}: fast_p for "
        "p = 0 (correct), 1, 1.5, 2 over all tasks, geometric-mean and median speedup over LibTorch eager (measured "
        "by the validator in the same run), per-task speedup, tokens, cost and wall time. Resumable: kill it and run "
        "the same command to continue (REPORT_DIR/bench.json; each search resumes from REPORT_DIR/state/NAME.db; "
        "kernels found go to REPORT_DIR/kernels). Exit 0 when done, 1 when interrupted, 2 on bad usage or when no "
        "task could run (no GPU).");
    auto model_dir = std::make_shared<std::string>();
    CLI::Option* suite = cmd->add_option("--suite", a->request.suite, "Suite directory: one folder per task with a task.json");
    cmd->add_option("--model-dir", *model_dir,
                    "A model folder (kernelevo.export_model()): the suite is its regions' tasks (DIR/regions), the report "
                    "goes to --out (default DIR/bench); with --kernels DIR/cache it validates what `kernelevo search "
                    "--model-dir` found")
        ->type_name("DIR")
        ->check(cli::NonEmpty)
        ->excludes(suite);
    cmd->add_option("--out", a->request.out, "Report directory (also holds the resumable state); required with --suite")
        ->check(cli::OutputFolder);
    cmd->add_option("--kernels", a->request.kernels,
                    "Validate ready kernels instead of searching: DIR/NAME.cu, DIR/NAME/sm_XX.cu, DIR/NAME/kernel.cu "
                    "or the only .cu in DIR/NAME (only --arch, --timeout, --timing-trials, --no-baselines and --aoti apply then; "
                    "a search option is refused)");
    cmd->add_flag("--fresh", a->request.fresh, "Discard REPORT_DIR's previous bench and search states and start over");
    cmd->add_flag("--torch-compile", a->torch_compile,
                  "Kept for older scripts: each task's PyTorch module (an imported problem.py, an exported model) is now timed by "
                  "default in eager PyTorch and under torch.compile (Inductor, default mode) on the validator's inputs, in the "
                  "import's sandbox under the GPU lock, and speedups, fast_p and geomeans are reported over each too (see --no-baselines)");
    const std::string languages_python = language::python_help();  // the candidate languages' use of it
    cmd->add_option("--python", a->request.python,
                    "Python with PyTorch for the baselines (default: python3 if it has torch, else /usr/bin/python3)" +
                        (languages_python.empty() ? std::string() : "; also for the candidate languages: " + languages_python));
    cmd->add_option("--baseline", a->request.baseline,
                    "KernelBench's published timings (baseline_h100.tsv) to show beside ours, matched by task name "
                    "(kb<level>_<file stem>); for reference only, speedups stay over our own LibTorch eager")
        ->check(CLI::ExistingFile);
    const std::vector<CLI::Option*> own = cmd->get_options();
    evolve::add_search_options(*cmd, a->request.search);
    // The search's options that --kernels has no use for: refused there, not silently ignored.
    auto search_only = std::make_shared<std::vector<const CLI::Option*>>();
    for (const CLI::Option* o : cmd->get_options()) {
        bool applies = std::find(own.begin(), own.end(), o) != own.end();
        for (const char* n : {"--arch", "--timeout", "--timing-trials", "--no-baselines", "--aoti", "--json", "--quiet", "--verbose"})
            applies = applies || o->check_name(n);
        if (!applies) search_only->push_back(o);
    }
    cli::set_examples(*cmd, {
        {"Search every task of a suite, 10 minutes each",
         "kernelevo bench --suite suite --out bench-report --model openai/gpt-5-mini --max-time 10m"},
        {"Validate ready kernels instead (PyTorch eager and torch.compile timed beside them)",
         "kernelevo bench --suite suite --out bench-report --kernels kernels"},
        {"Continue after an interruption: the same command again",
         "kernelevo bench --suite suite --out bench-report --model openai/gpt-5-mini --max-time 10m"},
    });
    cmd->callback([a, search_only, model_dir, &rc] {
        run(*a, *search_only, *model_dir, rc);
    });
}

}  // namespace kevo
