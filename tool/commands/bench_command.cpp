// `kernelevo bench --suite DIR --out REPORT_DIR [search options | --kernels DIR]`.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "baseline/baseline.h"
#include "bench/bench.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "cache/cache.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "commands/search_command.h"
#include "model/plan.h"
#include "store/writer.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo {
namespace {

struct BenchArgs {
    std::string suite, out, kernels, python, baseline;
    bool fresh = false, torch_compile = false;
    evolve::SearchArgs search;
};

std::string hms(double s) {
    long t = std::lround(std::max(0.0, s));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

// What a task's result is computed from (bench::inputs_key): the task file, its reference and the
// reference's setup file, and with --kernels every kernel file that could serve it. A resumed bench
// runs the task again when the key changed (a header the reference includes is not covered).
std::string task_inputs_key(const BenchArgs& a, const fs::path& task_path, const std::string& folder) {
    std::vector<fs::path> files = {task_path};
    std::string name = folder;
    try {
        Task task = load_task(task_path);
        name = task.name;
        files.push_back(task.reference_source);
        if (!task.reference_arg.empty()) files.push_back(task.reference_arg);
    } catch (const TaskError&) {  // run again, and reported, as the task it is
    }
    if (!a.kernels.empty())
        for (const auto& k : bench::kernel_candidates(fs::absolute(a.kernels), folder, name)) files.push_back(k);
    return bench::inputs_key(files);
}

// The PyTorch baselines of the task (tool/baseline: eager and torch.compile, in the sandbox, under
// the GPU lock) and the kernel's speedup over each; `kernel`: its timed sets (empty: none correct).
void measure_baselines(const BenchArgs& a, const Task& task, const DeviceInfo& device, const std::vector<ShapeTiming>& kernel,
                       bench::TaskResult& r) {
    if (a.search.no_baselines) {
        r.torch = baseline::Result{};
        r.torch.precision = baseline::task_precision(task);
        for (const auto& k : baseline::kinds()) r.torch.not_run[k] = "--no-baselines";
        return;
    }
    baseline::Options o;
    o.python = a.python;
    o.trials = a.search.timing_trials;
    if (a.search.aoti) o.which = baseline::asked({"aoti"});  // --aoti (search's options)
    r.torch = baseline::measure(task, o, device);
    for (const auto& k : baseline::kinds())
        if (r.torch.ran(k) && r.correct()) r.speedup_over[k] = baseline::speedup_over(r.torch, k, kernel);
}

void run_bench(BenchArgs& a, int& rc) {
    const fs::path suite = fs::absolute(a.suite).lexically_normal();
    const fs::path out = fs::absolute(a.out).lexically_normal();
    const std::vector<fs::path> tasks = bench::suite_tasks(suite);
    const std::string mode = a.kernels.empty() ? "search" : "kernels";
    const std::map<std::string, bench::Baseline> baseline =
        a.baseline.empty() ? std::map<std::string, bench::Baseline>{} : bench::load_baseline(a.baseline);
    const fs::path state_path = out / "bench.json";
    if (a.fresh) {
        // Another bench (or search) still running on these states holds their writer leases: it is
        // refused here, naming it, rather than having its states deleted under it.
        std::vector<std::unique_ptr<store::WriterLease>> held;
        std::error_code ec;
        if (fs::is_directory(out / "state", ec))
            for (const auto& e : fs::directory_iterator(out / "state"))
                if (e.path().extension() == ".db") {
                    store::WriterOptions w;
                    w.what = "kernelevo bench";
                    held.push_back(store::acquire_writer(e.path().string(), w));
                }
        fs::remove(state_path, ec);
        fs::remove_all(out / "state", ec);
    }
    // Resume: results of finished tasks are kept; the unfinished search continues from its state.
    std::map<std::string, bench::TaskResult> prior;
    nlohmann::json state{{"suite", suite.string()}, {"mode", mode}, {"kernels", a.kernels}, {"results", nlohmann::json::object()}};
    std::error_code ec;
    if (fs::exists(state_path, ec)) {
        nlohmann::json old;
        try {
            old = nlohmann::json::parse(read_file(state_path));
        } catch (const nlohmann::json::exception&) {
            throw UsageError(state_path.string() + ": not a bench state (remove it or pass --fresh)");
        }
        if (old.value("suite", "") != suite.string() || old.value("mode", "") != mode)
            throw UsageError("--out " + out.string() + " holds a bench of " + old.value("suite", std::string("?")) + " (mode " +
                             old.value("mode", std::string("?")) + "): pass --fresh to start over, or another --out");
        for (auto it = old["results"].begin(); it != old["results"].end(); ++it)
            prior[it.key()] = bench::TaskResult::from_json(it.value());
        size_t done = 0;
        for (const auto& [k, v] : prior) done += v.done;
        std::cerr << "kernelevo: resuming the bench in " << out.string() << " (" << done << " of " << tasks.size()
                  << " task(s) done)\n";
    }
    fs::create_directories(out);

    ValidateOptions vo;
    vo.arch = a.search.arch;
    vo.timeout_s = a.search.timeout;
    vo.timing_trials = a.search.timing_trials;
    bench::ReportInfo info{suite.string(), mode, "", a.search.arch, cache::utc_now()};
    std::vector<bench::TaskResult> results(tasks.size());
    auto write_reports = [&] {
        nlohmann::json rs = nlohmann::json::object();
        for (const auto& r : results)
            if (!r.name.empty()) rs[r.name] = r.to_json();
        for (const auto& [k, v] : prior)
            if (!rs.contains(k)) rs[k] = v.to_json();
        state["results"] = rs;
        state["gpu"] = info.gpu;
        state["arch"] = info.arch;
        write_file_atomic(state_path, state.dump(2) + "\n");
        std::vector<bench::TaskResult> shown;
        for (const auto& r : results)
            if (!r.name.empty()) shown.push_back(r);
        write_file_atomic(out / "report.md", bench::report_markdown(shown, info));
        write_file_atomic(out / "report.json", bench::report_json(shown, info).dump(2) + "\n");
        write_file_atomic(out / "report.html", bench::report_html(shown, info));
    };

    // A search validates every candidate on the local GPU: without one it would only spend tokens.
    if (mode == "search") {
        Validator probe(load_task(tasks.front()), vo);
        const DeviceInfo& d = probe.device();
        if (!d.present)
            throw UsageError("no usable GPU here (" + d.error + "): the search validates every candidate on the local GPU; "
                             "run the bench on a GPU host, or validate ready kernels with --kernels");
        info.gpu = d.name;
        info.arch = probe.arch();
    }

    auto apply_baseline = [&](bench::TaskResult& r) {
        if (auto b = baseline.find(r.name); b != baseline.end()) {
            r.baseline_eager_us = b->second.eager_us;
            r.baseline_compile_us = b->second.compile_us;
            r.baseline_note = b->second.note;
        }
    };

    const auto t_start = std::chrono::steady_clock::now();
    std::optional<DeviceInfo> torch_device;  // queried once, for the lock around PyTorch's timings
    std::vector<ShapeTiming> kernel_sets;     // the task's kernel timings, for its speedups over the baselines
    nlohmann::json so_baselines;              // what the task's search measured of them
    int ran = 0;
    bool interrupted = false;
    for (size_t i = 0; i < tasks.size(); ++i) {
        const fs::path task_path = tasks[i];
        const std::string folder = task_path.parent_path().filename().string();
        const std::string prefix = "[" + std::to_string(i + 1) + "/" + std::to_string(tasks.size()) + "] ";
        bench::TaskResult r;
        kernel_sets.clear();
        so_baselines = nullptr;
        r.task = task_path.string();
        r.name = folder;
        r.inputs = task_inputs_key(a, task_path, folder);
        auto p = prior.find(folder);
        const bool changed = p != prior.end() && p->second.inputs != r.inputs;
        if (p != prior.end() && p->second.done && !changed) {
            results[i] = p->second;
            apply_baseline(results[i]);
            std::cerr << prefix << folder << ": done earlier (" << results[i].status
                      << (results[i].correct() ? ", " + std::to_string(results[i].speedup) + "x" : "") << ")\n";
            continue;
        }
        if (changed)
            std::cerr << prefix << folder << ": " << (a.kernels.empty() ? "the task" : "the task or its kernel")
                      << (p->second.inputs.empty() ? " may have changed since the last run (no record of its inputs)" : " changed since the last run")
                      << ": running it again\n";
        // A search of a task that changed starts over (its state holds candidates judged against the old one).
        const bool restart = changed && !p->second.inputs.empty();
        double prior_wall = p != prior.end() && !changed ? p->second.wall_s : 0;
        auto t0 = std::chrono::steady_clock::now();
        try {
            Task task = load_task(task_path);
            r.name = folder;
            if (mode == "kernels") {
                Validator v(task, vo);
                std::string arch = v.arch();
                fs::path k = bench::find_kernel(a.kernels, folder, task.name, arch);
                if (k.empty()) {
                    r.status = "missing";
                    r.note = "no kernel for this task in " + a.kernels;
                    r.done = true;
                } else {
                    r.kernel = k.string();
                    ValidationResult vr = v.validate(read_kernel_file(k, "--kernels"));  // a FIFO named .cu is refused, not read
                    r.status = status_name(vr.status);
                    r.speedup = vr.speedup;
                    r.kernel_us = vr.kernel_us;
                    r.reference_us = vr.reference_us;
                    kernel_sets = vr.shapes;
                    if (!vr.ok()) r.note = vr.log.substr(0, 400);
                    if (!vr.gpu.empty()) info.gpu = vr.gpu;
                    info.arch = vr.arch.empty() ? arch : vr.arch;
                    // Without a GPU nothing was measured: run again where there is one.
                    r.done = vr.status != Status::no_device;
                }
            } else {
                evolve::SearchArgs s = a.search;
                s.task = task_path.string();
                s.out = (out / "kernels").string();
                s.state = (out / "state" / (folder + ".db")).string();
                s.fresh = restart;
                s.json = false;  // bench --json prints the bench's document, not each search's summary
                fs::create_directories(out / "state");
                if (s.python.empty()) s.python = a.python;  // --python: also the one with Triton (--backend triton|both)
                evolve::SearchOutcome so = evolve::run_search(s, prefix + folder + " | ");
                r.tokens = so.tokens;
                so_baselines = so.baselines;
                r.cost_usd = so.cost_usd;
                info.arch = so.arch;
                if (so.found) {
                    r.status = "ok";
                    r.speedup = so.best_details.value("speedup", so.speedup);  // over the reference (so.speedup: the fitness)
                    r.kernel_us = so.best_details.value("kernel_us", 0.0);
                    r.reference_us = so.best_details.value("reference_us", 0.0);
                    kernel_sets = ValidationResult::from_json(so.best_details).shapes;
                    if (so.best_details.contains("gpu")) info.gpu = so.best_details.value("gpu", std::string());
                    r.kernel = cache::source_path(s.out, task.name, so.arch).string();
                } else {
                    r.status = so.stop == evolve::StopReason::no_gpu ? "no_device" : "no_kernel";
                }
                r.note = "search stopped: " + so.stop_reason;
                r.done = so.finished;
                interrupted = so.stop == evolve::StopReason::interrupted;
            }
        } catch (const TaskError& e) {
            r.status = "error";
            r.note = e.what();
            r.done = true;
        }
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.wall_s = prior_wall + wall;
        if (mode == "search" && so_baselines.is_object()) {  // the search measured them already
            r.torch = baseline::Result::from_json(so_baselines);
            for (const auto& k : baseline::kinds())
                if (r.torch.ran(k) && r.correct()) r.speedup_over[k] = baseline::speedup_over(r.torch, k, kernel_sets);
        } else if ((r.done || r.status == "no_device") && r.status != "error") {  // no GPU: PyTorch says why too
            // PyTorch's timings run on the GPU too: under its lock (baseline::measure takes it), as
            // validations do, so that neither disturbs the other.
            if (!torch_device) torch_device = Validator(Task{}, vo).device();
            try {
                measure_baselines(a, load_task(task_path), *torch_device, kernel_sets, r);
            } catch (const TaskError&) {
            }
        }
        apply_baseline(r);
        results[i] = r;
        ++ran;
        write_reports();

        // Progress: task i/N, this result, the best so far, the ETA over the tasks still to run.
        const bench::TaskResult* best = nullptr;
        for (const auto& x : results)
            if (x.correct() && (!best || x.speedup > best->speedup)) best = &x;
        size_t left = 0;
        for (size_t k = i + 1; k < tasks.size(); ++k) {
            auto q = prior.find(tasks[k].parent_path().filename().string());
            left += !(q != prior.end() && q->second.done);
        }
        double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count() / ran;
        char line[160];
        std::snprintf(line, sizeof line, "%s", r.correct() ? (std::to_string(r.speedup).substr(0, 5) + "x").c_str() : r.status.c_str());
        std::cerr << prefix << folder << ": " << line << " [" << hms(wall) << "]"
                  << " | best " << (best ? best->name + " " + std::to_string(best->speedup).substr(0, 5) + "x" : "none")
                  << " | ETA " << hms(per * left) << "\n";
        if (interrupted) break;
    }
    write_reports();
    std::vector<bench::TaskResult> shown;
    for (const auto& r : results)
        if (!r.name.empty()) shown.push_back(r);
    bench::Summary sum = bench::summarize(shown);
    // "Correct" among the tasks that ran: tasks with no GPU of their architecture here are not run, not failed.
    std::cerr << "kernelevo: " << sum.correct << " of " << sum.tasks - sum.not_run << " run correct"
              << (sum.not_run ? " (" + std::to_string(sum.not_run) + " of " + std::to_string(sum.tasks) + " not run: no GPU of their architecture here)" : "");
    for (auto [p, share] : sum.fast_p)
        if (p > 0) std::cerr << ", fast_" << p << " " << share;
    if (sum.correct) std::cerr << ", geomean " << sum.geomean_speedup << "x over the LibTorch reference";
    for (const auto& b : sum.baselines) {
        std::cerr << "; over " << baseline::label(b.kind) << (sum.precision.empty() ? "" : " (precision " + sum.precision + ")") << ": ";
        if (!b.measured) std::cerr << b.not_run;
        else std::cerr << "geomean " << (b.correct ? std::to_string(b.geomean_speedup).substr(0, 5) + "x" : std::string("-")) << " over "
                       << b.measured << " task(s) with its time";
    }
    std::cerr << "; reports in " << out.string() << " (report.md, report.json, report.html)\n";
    if (a.search.json) std::cout << bench::report_json(shown, info).dump(2) << std::endl;  // report.json's document
    if (sum.not_run) std::cerr << "kernelevo: " << sum.not_run << " task(s) not run: no GPU of this architecture here\n";
    if (interrupted) {
        std::cerr << "kernelevo: interrupted; run the same command again to continue\n";
        rc = 1;
        return;
    }
    rc = sum.not_run == sum.tasks && sum.tasks > 0 ? 2 : 0;
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
    CLI::Option* suite = cmd->add_option("--suite", a->suite, "Suite directory: one folder per task with a task.json");
    cmd->add_option("--model-dir", *model_dir,
                    "A model folder (kernelevo.export_model()): the suite is its regions' tasks (DIR/regions), the report "
                    "goes to --out (default DIR/bench); with --kernels DIR/cache it validates what `kernelevo search "
                    "--model-dir` found")
        ->type_name("DIR")
        ->check(cli::NonEmpty)
        ->excludes(suite);
    cmd->add_option("--out", a->out, "Report directory (also holds the resumable state); required with --suite");
    cmd->add_option("--kernels", a->kernels,
                    "Validate ready kernels instead of searching: DIR/NAME.cu, DIR/NAME/sm_XX.cu, DIR/NAME/kernel.cu "
                    "or the only .cu in DIR/NAME (only --arch, --timeout, --timing-trials, --no-baselines and --aoti apply then; "
                    "a search option is refused)");
    cmd->add_flag("--fresh", a->fresh, "Discard REPORT_DIR's previous bench and search states and start over");
    cmd->add_flag("--torch-compile", a->torch_compile,
                  "Kept for older scripts: each task's PyTorch module (an imported problem.py, an exported model) is now timed by "
                  "default in eager PyTorch and under torch.compile (Inductor, default mode) on the validator's inputs, in the "
                  "import's sandbox under the GPU lock, and speedups, fast_p and geomeans are reported over each too (see --no-baselines)");
    cmd->add_option("--python", a->python,
                    "Python with PyTorch for the baselines, and with Triton for --backend triton|both "
                    "(default: python3 if it has torch, else /usr/bin/python3; for Triton $KERNELEVO_PYTHON, else python3)");
    cmd->add_option("--baseline", a->baseline,
                    "KernelBench's published timings (baseline_h100.tsv) to show beside ours, matched by task name "
                    "(kb<level>_<file stem>); for reference only, speedups stay over our own LibTorch eager")
        ->check(CLI::ExistingFile);
    const std::vector<CLI::Option*> own = cmd->get_options();
    evolve::add_search_options(*cmd, a->search);
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
        if (!model_dir->empty()) {  // the regions with status "task" are the folders of DIR/regions (model_plan.md)
            const model::Plan plan = model::load_plan(*model_dir);
            if (plan.searched().empty())
                throw UsageError(plan.file.string() + ": no region has status \"task\": nothing to bench");
            a->suite = (plan.dir / "regions").string();
            if (a->out.empty()) a->out = (plan.dir / "bench").string();
        }
        if (a->suite.empty()) throw UsageError("bench: give --suite DIR (a suite of tasks) or --model-dir DIR (a model's regions)");
        if (a->out.empty()) throw UsageError("bench: --out is required with --suite (the report directory)");
        std::string given;
        size_t n = 0;
        for (const CLI::Option* o : *search_only)
            if (o->count() > 0) given += (n++ ? ", " : "") + o->get_name();
        if (!a->kernels.empty() && n)
            throw UsageError("--kernels validates ready kernels and runs no search, so " + given + (n == 1 ? " has" : " have") +
                             " no effect: remove " + (n == 1 ? "it" : "them") +
                             " (with --kernels only --arch, --timeout, --timing-trials, --no-baselines and --aoti apply)");
        run_bench(*a, rc);
    });
}

}  // namespace kevo
