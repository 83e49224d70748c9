// run_bench(): a suite's tasks one by one (searched or their ready kernels validated), resumable,
// with the reports rewritten after every task. Moved from tool/commands/bench_command.cpp.
#include "workflows/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "baseline/baseline.h"
#include "cache/cache.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "model/plan.h"
#include "store/writer.h"
#include "task/task.h"
#include "validate/validate.h"
#include "workflows/search_parts.h"

namespace kevo::workflows {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

std::string hms(double s) {
    long t = std::lround(std::max(0.0, s));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What a task's result is computed from (bench::inputs_key): the task file, its reference and the
// reference's setup file, and with ready kernels every kernel file that could serve it. A resumed
// bench runs the task again when the key changed (a header the reference includes is not covered).
std::string task_inputs_key(const BenchRequest& a, const fs::path& task_path, const std::string& folder) {
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
void measure_baselines(const BenchRequest& a, const Task& task, const DeviceInfo& device,
                       const std::vector<ShapeTiming>& kernel, bench::TaskResult& r) {
    if (a.search.no_baselines) {
        r.torch = no_torch_baselines(task);
        return;
    }
    baseline::Options o;
    o.python = a.python;
    o.trials = a.search.timing_trials;
    if (a.search.aoti) o.which = baseline::asked({"aoti"});  // --aoti (search's options)
    o.note = a.progress;
    r.torch = baseline::measure(task, o, device);
    for (const auto& k : baseline::kinds())
        if (r.torch.ran(k) && r.correct()) r.speedup_over[k] = baseline::speedup_over(r.torch, k, kernel);
}

// One bench from its request to its outcome; each step below is one method.
class BenchRun {
public:
    explicit BenchRun(const BenchRequest& a) : a_(a) {}
    BenchOutcome run();

private:
    void say(const std::string& line) const {
        if (a_.progress) a_.progress(line);
    }
    bool start_over_or_resume();
    bool probe_gpu();
    bool run_task(size_t i);
    void validate_kernel(const Task& task, const std::string& folder, bench::TaskResult& r);
    void search_task(const fs::path& task_path, const Task& task, const std::string& prefix, bool restart,
                     bench::TaskResult& r);
    void add_baselines(const fs::path& task_path, bench::TaskResult& r);
    void apply_published(bench::TaskResult& r) const;
    void report_progress(size_t i, const std::string& prefix, const bench::TaskResult& r, double wall);
    std::vector<bench::TaskResult> shown() const;
    void write_reports();

    const BenchRequest& a_;
    BenchOutcome o_;
    fs::path suite_, state_path_;
    std::vector<fs::path> tasks_;
    std::map<std::string, bench::Baseline> published_;  // --baseline
    std::map<std::string, bench::TaskResult> prior_;    // what bench.json held
    nlohmann::json state_;
    ValidateOptions vo_;
    std::vector<bench::TaskResult> results_;
    Clock::time_point t_start_;
    std::optional<DeviceInfo> torch_device_;  // queried once, for the lock around PyTorch's timings
    std::vector<ShapeTiming> kernel_sets_;    // the task's kernel timings, for its speedups over the baselines
    nlohmann::json so_baselines_;             // what the task's search measured of them
    int ran_ = 0;
};

// --fresh: the previous states go; else the results of finished tasks are kept and the unfinished
// search continues from its state. False when the folder holds something else.
bool BenchRun::start_over_or_resume() {
    const fs::path& out = o_.out;
    if (a_.fresh) {
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
        fs::remove(state_path_, ec);
        fs::remove_all(out / "state", ec);
    }
    state_ = {{"suite", suite_.string()}, {"mode", o_.mode}, {"kernels", a_.kernels}, {"results", nlohmann::json::object()}};
    std::error_code ec;
    if (!fs::exists(state_path_, ec)) return true;
    nlohmann::json old;
    try {  // a FIFO or device is one error (read_input_file), never a hang; any other form is no state
        old = nlohmann::json::parse(read_input_file(state_path_, "a bench state (bench.json)"));
        const nlohmann::json none = "", no_results = nlohmann::json::object();
        if (!old.is_object() || !old.value("suite", none).is_string() || !old.value("mode", none).is_string() ||
            !old.value("results", no_results).is_object())
            throw nlohmann::json::other_error::create(501, "not a bench state", nullptr);
        for (auto it = old["results"].begin(); it != old["results"].end(); ++it)
            (void)bench::TaskResult::from_json(it.value());
    } catch (const nlohmann::json::exception&) {
        o_.refused = BenchRefusal::unreadable_state;
        o_.state_file = state_path_;
        o_.why = state_path_.string() + ": not a bench state";
        return false;
    }
    if (old.value("suite", "") != suite_.string() || old.value("mode", "") != o_.mode) {
        o_.refused = BenchRefusal::other_bench;
        o_.held_suite = old.value("suite", std::string("?"));
        o_.held_mode = old.value("mode", std::string("?"));
        o_.why = out.string() + " holds a bench of " + o_.held_suite + " (mode " + o_.held_mode + ")";
        return false;
    }
    for (auto it = old["results"].begin(); it != old["results"].end(); ++it)
        prior_[it.key()] = bench::TaskResult::from_json(it.value());
    size_t done = 0;
    for (const auto& [k, v] : prior_) done += v.done;
    say("kernelevo: resuming the bench in " + out.string() + " (" + std::to_string(done) + " of " +
        std::to_string(tasks_.size()) + " task(s) done)");
    return true;
}

// A search validates every candidate on the local GPU: without one it would only spend tokens.
bool BenchRun::probe_gpu() {
    if (o_.mode != "search") return true;
    Validator probe(load_task(tasks_.front()), vo_);
    const DeviceInfo& d = probe.device();
    if (!d.present) {
        o_.refused = BenchRefusal::no_gpu;
        o_.device_error = d.error;
        o_.why = "no usable GPU here (" + d.error + "): the search validates every candidate on the local GPU";
        return false;
    }
    o_.info.gpu = d.name;
    o_.info.arch = probe.arch();
    return true;
}

std::vector<bench::TaskResult> BenchRun::shown() const {
    std::vector<bench::TaskResult> v;
    for (const auto& r : results_)
        if (!r.name.empty()) v.push_back(r);
    return v;
}

void BenchRun::write_reports() {
    nlohmann::json rs = nlohmann::json::object();
    for (const auto& r : results_)
        if (!r.name.empty()) rs[r.name] = r.to_json();
    for (const auto& [k, v] : prior_)
        if (!rs.contains(k)) rs[k] = v.to_json();
    state_["results"] = rs;
    state_["gpu"] = o_.info.gpu;
    state_["arch"] = o_.info.arch;
    write_file_atomic(state_path_, state_.dump(2) + "\n");
    const std::vector<bench::TaskResult> v = shown();
    write_file_atomic(o_.out / "report.md", bench::report_markdown(v, o_.info));
    write_file_atomic(o_.out / "report.json", bench::report_json(v, o_.info).dump(2) + "\n");
    write_file_atomic(o_.out / "report.html", bench::report_html(v, o_.info));
}

void BenchRun::apply_published(bench::TaskResult& r) const {
    if (auto b = published_.find(r.name); b != published_.end()) {
        r.baseline_eager_us = b->second.eager_us;
        r.baseline_compile_us = b->second.compile_us;
        r.baseline_note = b->second.note;
    }
}

void BenchRun::validate_kernel(const Task& task, const std::string& folder, bench::TaskResult& r) {
    Validator v(task, vo_);
    std::string arch = v.arch();
    fs::path k = bench::find_kernel(a_.kernels, folder, task.name, arch);
    if (k.empty()) {
        r.status = "missing";
        r.note = "no kernel for this task in " + a_.kernels;
        r.done = true;
        return;
    }
    r.kernel = k.string();
    ValidationResult vr = v.validate(read_kernel_file(k, "--kernels"));  // a FIFO named .cu is refused, not read
    r.status = status_name(vr.status);
    r.speedup = vr.speedup;
    r.kernel_us = vr.kernel_us;
    r.reference_us = vr.reference_us;
    kernel_sets_ = vr.shapes;
    if (!vr.ok()) r.note = vr.log.substr(0, 400);
    if (!vr.gpu.empty()) o_.info.gpu = vr.gpu;
    o_.info.arch = vr.arch.empty() ? arch : vr.arch;
    // Without a GPU nothing was measured: run again where there is one.
    r.done = vr.status != Status::no_device;
}

void BenchRun::search_task(const fs::path& task_path, const Task& task, const std::string& prefix, bool restart,
                           bench::TaskResult& r) {
    const std::string folder = r.name;
    SearchArgs s = a_.search;
    s.task = task_path.string();
    s.out = (o_.out / "kernels").string();
    s.state = (o_.out / "state" / (folder + ".db")).string();
    s.fresh = restart;
    s.json = false;  // bench --json prints the bench's document, not each search's summary
    fs::create_directories(o_.out / "state");
    if (s.python.empty()) s.python = a_.python;  // --python: also the one a candidate language may need
    SearchOutcome so = run_search(s, search_config(s), prefix + folder + " | ");
    r.tokens = so.tokens;
    so_baselines_ = so.baselines;
    r.cost_usd = so.cost_usd;
    o_.info.arch = so.arch;
    if (so.found) {
        r.status = "ok";
        r.speedup = so.best_details.value("speedup", so.speedup);  // over the reference (so.speedup: the fitness)
        r.kernel_us = so.best_details.value("kernel_us", 0.0);
        r.reference_us = so.best_details.value("reference_us", 0.0);
        kernel_sets_ = ValidationResult::from_json(so.best_details).shapes;
        if (so.best_details.contains("gpu")) o_.info.gpu = so.best_details.value("gpu", std::string());
        r.kernel = cache::source_path(s.out, task.name, so.arch).string();
    } else {
        r.status = so.stop == evolve::StopReason::no_gpu ? "no_device" : "no_kernel";
    }
    r.note = "search stopped: " + so.stop_reason;
    r.done = so.finished;
    o_.interrupted = so.stop == evolve::StopReason::interrupted;
}

// The PyTorch baselines beside the kernel: what the search measured, or timed here.
void BenchRun::add_baselines(const fs::path& task_path, bench::TaskResult& r) {
    if (o_.mode == "search" && so_baselines_.is_object()) {  // the search measured them already
        r.torch = baseline::Result::from_json(so_baselines_);
        for (const auto& k : baseline::kinds())
            if (r.torch.ran(k) && r.correct()) r.speedup_over[k] = baseline::speedup_over(r.torch, k, kernel_sets_);
    } else if ((r.done || r.status == "no_device") && r.status != "error") {  // no GPU: PyTorch says why too
        // PyTorch's timings run on the GPU too: under its lock (baseline::measure takes it), as
        // validations do, so that neither disturbs the other.
        if (!torch_device_) torch_device_ = Validator(Task{}, vo_).device();
        try {
            measure_baselines(a_, load_task(task_path), *torch_device_, kernel_sets_, r);
        } catch (const TaskError&) {
        }
    }
}

// Progress: task i/N, this result, the best so far, the ETA over the tasks still to run.
void BenchRun::report_progress(size_t i, const std::string& prefix, const bench::TaskResult& r, double wall) {
    const bench::TaskResult* best = nullptr;
    for (const auto& x : results_)
        if (x.correct() && (!best || x.speedup > best->speedup)) best = &x;
    size_t left = 0;
    for (size_t k = i + 1; k < tasks_.size(); ++k) {
        auto q = prior_.find(tasks_[k].parent_path().filename().string());
        left += !(q != prior_.end() && q->second.done);
    }
    double per = seconds_since(t_start_) / ran_;
    char line[160];
    std::snprintf(line, sizeof line, "%s", r.correct() ? (std::to_string(r.speedup).substr(0, 5) + "x").c_str() : r.status_text().c_str());
    say(prefix + r.name + ": " + line + " [" + hms(wall) + "]" + " | best " +
        (best ? best->name + " " + std::to_string(best->speedup).substr(0, 5) + "x" : "none") + " | ETA " + hms(per * left));
}

// One task: kept from an earlier run, or run (again); false when the bench stops here (Ctrl-C).
bool BenchRun::run_task(size_t i) {
    const fs::path task_path = tasks_[i];
    const std::string folder = task_path.parent_path().filename().string();
    const std::string prefix = "[" + std::to_string(i + 1) + "/" + std::to_string(tasks_.size()) + "] ";
    bench::TaskResult r;
    kernel_sets_.clear();
    so_baselines_ = nullptr;
    r.task = task_path.string();
    r.name = folder;
    r.inputs = task_inputs_key(a_, task_path, folder);
    auto p = prior_.find(folder);
    const bool changed = p != prior_.end() && p->second.inputs != r.inputs;
    if (p != prior_.end() && p->second.done && !changed) {
        results_[i] = p->second;
        apply_published(results_[i]);
        say(prefix + folder + ": done earlier (" + results_[i].status_text() +
            (results_[i].correct() ? ", " + std::to_string(results_[i].speedup) + "x" : "") + ")");
        return true;
    }
    if (changed)
        say(prefix + folder + ": " + (a_.kernels.empty() ? "the task" : "the task or its kernel") +
            (p->second.inputs.empty() ? " may have changed since the last run (no record of its inputs)" : " changed since the last run") +
            ": running it again");
    // A search of a task that changed starts over (its state holds candidates judged against the old one).
    const bool restart = changed && !p->second.inputs.empty();
    double prior_wall = p != prior_.end() && !changed ? p->second.wall_s : 0;
    auto t0 = Clock::now();
    try {
        Task task = load_task(task_path);
        r.name = folder;
        if (o_.mode == "kernels") validate_kernel(task, folder, r);
        else search_task(task_path, task, prefix, restart, r);
    } catch (const TaskError& e) {
        r.status = "error";
        r.note = e.what();
        r.done = true;
    }
    double wall = seconds_since(t0);
    r.wall_s = prior_wall + wall;
    add_baselines(task_path, r);
    apply_published(r);
    results_[i] = r;
    ++ran_;
    write_reports();
    report_progress(i, prefix, r, wall);
    return !o_.interrupted;
}

BenchOutcome BenchRun::run() {
    suite_ = fs::absolute(a_.suite).lexically_normal();
    o_.out = fs::absolute(a_.out).lexically_normal();
    tasks_ = bench::suite_tasks(suite_);
    o_.mode = a_.kernels.empty() ? "search" : "kernels";
    if (!a_.baseline.empty()) published_ = bench::load_baseline(a_.baseline);
    state_path_ = o_.out / "bench.json";
    if (!start_over_or_resume()) {
        o_.rc = kExitUsage;
        return o_;
    }
    fs::create_directories(o_.out);
    vo_.arch = a_.search.arch;
    vo_.timeout_s = a_.search.timeout;
    vo_.timing_trials = a_.search.timing_trials;
    o_.info = bench::ReportInfo{suite_.string(), o_.mode, "", a_.search.arch, cache::utc_now()};
    results_.resize(tasks_.size());
    if (!probe_gpu()) {
        o_.rc = kExitUsage;
        return o_;
    }
    t_start_ = Clock::now();
    for (size_t i = 0; i < tasks_.size(); ++i)
        if (!run_task(i)) break;
    write_reports();
    o_.results = shown();
    o_.summary = bench::summarize(o_.results);
    if (o_.interrupted) o_.rc = kExitFailed;
    else o_.rc = exit_code_of(true, o_.summary.not_run == o_.summary.tasks && o_.summary.tasks > 0);
    return o_;
}

}  // namespace

ModelSuite model_suite(const std::string& model_dir) {
    // The regions with status "task" are the folders of DIR/regions (model_plan.md).
    const model::Plan plan = model::load_plan(model_dir);
    if (plan.searched().empty()) throw UsageError(plan.file.string() + ": no region has status \"task\": nothing to bench");
    return {(plan.dir / "regions").string(), (plan.dir / "bench").string()};
}

BenchOutcome run_bench(const BenchRequest& request) { return BenchRun(request).run(); }

}  // namespace kevo::workflows
