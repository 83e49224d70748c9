#include "worker/worker.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/text.h"

namespace kevo::worker {
namespace {

double steady_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string hostname() {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "host";
    return buf;
}

std::string clock_text() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%H:%M:%S", std::localtime(&t));
    return buf;
}

// The files published with a task (Queue::publish_task: its model.pt, its weights), written beside
// the worker's copy of it under the relative paths the task names. Untrusted: a path must stay
// inside `dir`, and each file must have the size and sha256 the task was published with.
void install_task_files(Queue& queue, const std::string& task_hash, const fs::path& dir) {
    for (const auto& f : queue.task_files(task_hash)) {
        const std::string written = f.value("path", std::string());
        const std::string sha = f.value("sha256", std::string());
        const fs::path rel = fs::path(written).lexically_normal();
        bool inside = !written.empty() && rel.is_relative() && !rel.empty();
        for (const auto& part : rel) inside = inside && part != "..";
        if (!inside) throw UsageError("task " + task_hash.substr(0, 12) + " names a file outside its folder: '" + written + "'");
        std::optional<std::string> bytes = queue.get_object(sha);  // throws when the bytes do not hash to sha
        if (!bytes) throw UsageError("the file " + written + " of task " + task_hash.substr(0, 12) + " is no longer in the queue");
        if (bytes->size() != f.value("bytes", uint64_t{0}) || bytes->size() > Queue::kMaxTaskFileBytes)
            throw UsageError("the file " + written + " of task " + task_hash.substr(0, 12) + " does not have its published size");
        fs::create_directories((dir / rel).parent_path());
        write_file_atomic(dir / rel, *bytes);
    }
}

}  // namespace

std::vector<std::string> worker_streams(const WorkerOptions& o) {
    std::vector<std::string> s;
    for (const std::string& a : o.archs)
        if (!o.compile_only) s.push_back(Queue::stream_name("run", a));
    for (const std::string& a : o.archs) s.push_back(Queue::stream_name("compile", a));
    return s;
}

// ---- the real validator behind a worker ------------------------------------------------------

struct ValidatorHandler::Impl {
    WorkerOptions options;
    std::mutex mu;
    std::map<std::string, std::unique_ptr<Task>> tasks;             // by task hash
    std::map<std::string, std::unique_ptr<Validator>> validators;   // by task hash + options + arch
    bool device_known = false;
    DeviceInfo dev;
    // The judge's options on this worker's GPU (options.gpu; none for a compile-only worker).
    ValidateOptions validate_options() const {
        ValidateOptions vo;
        vo.device_index = options.compile_only ? -1 : options.gpu;
        return vo;
    }
};

ValidatorHandler::ValidatorHandler(const WorkerOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->options = options;
}
ValidatorHandler::~ValidatorHandler() = default;

nlohmann::json ValidatorHandler::device() {
    if (impl_->options.compile_only) return nlohmann::json::object();
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->device_known) {
        Validator probe(Task{}, impl_->validate_options());  // queries the GPU in a child
        impl_->dev = probe.device();
        impl_->device_known = true;
    }
    return impl_->dev.to_json();
}

std::string ValidatorHandler::device_arch() {
    nlohmann::json d = device();
    return d.value("present", false) ? impl_->dev.arch() : std::string();
}

Validator& ValidatorHandler::validator(const JobSpec& spec, Queue& queue) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    std::string vkey = spec.task_hash + "|" + spec.arch + "|" + spec.options.dump();
    if (auto it = impl_->validators.find(vkey); it != impl_->validators.end()) return *it->second;
    if (!impl_->tasks.count(spec.task_hash)) {
        auto t = queue.task(spec.task_hash);
        if (!t) throw UsageError("the task " + spec.task_hash.substr(0, 12) + " was never published to the queue");
        // The task as the search has it, with its reference beside it under a plain file name.
        nlohmann::json j = t->first;
        fs::path dir = cache_root() / "worker" / "tasks" / spec.task_hash.substr(0, 32);
        std::string ref_name = fs::path(j["reference"].value("source", std::string("reference.cpp"))).filename().string();
        if (ref_name.empty() || ref_name == "." || ref_name == "..") ref_name = "reference.cpp";
        j["reference"]["source"] = ref_name;
        // reference.show names files beside the search's task that are not published; they only feed
        // the search's prompts and are not hashed, so the worker's copy of the task goes without them.
        j["reference"].erase("show");
        write_file_atomic(dir / ref_name, t->second);
        install_task_files(queue, spec.task_hash, dir);
        write_file_atomic(dir / "task.json", j.dump(2));
        auto task = std::make_unique<Task>(load_task(dir / "task.json"));
        if (!spec.reference_hash.empty() && task->reference_hash() != spec.reference_hash)
            throw UsageError("the published reference of task " + task->name + " does not match the job's reference hash");
        impl_->tasks[spec.task_hash] = std::move(task);
    }
    ValidateOptions vo = impl_->validate_options();
    vo.arch = spec.arch;
    apply_portable_options(vo, spec.options);
    auto v = std::make_unique<Validator>(*impl_->tasks[spec.task_hash], vo);
    Validator& ref = *v;
    impl_->validators[vkey] = std::move(v);
    return ref;
}

nlohmann::json ValidatorHandler::handle(const Claimed& job, Queue& queue, const std::function<void(const std::string&)>& log) {
    const JobSpec& spec = job.spec;
    Validator& v = validator(spec, queue);
    if (spec.kind == "compile") {
        CompileResult cr = v.compile(spec.source);
        // Every field of the result travels (compile/compile.h): the .cu generated from a candidate in
        // a language compiled ahead of time, and that compile's facts too, so the search host stores
        // the best kernel without that language's compiler of its own,
        // and ptxas's figures, which the search's prompts quote.
        nlohmann::json r = compile_result_to_json(cr);
        r["kind"] = "compile";
        try {
            r["toolkit"] = nvcc_version(CompileOptions{});
        } catch (const UsageError&) {
        }
        if (cr.ok) {
            double t0 = steady_s();
            std::string bytes = read_file(cr.library);
            r["object_sha256"] = queue.put_object(bytes);
            r["object_bytes"] = bytes.size();
            r["object_put_s"] = steady_s() - t0;
        }
        log(std::string("compiled ") + job.id.substr(0, 8) + (cr.ok ? " ok" : " failed") + " in " +
            std::to_string(cr.seconds).substr(0, 5) + " s" + (cr.cached ? " (cached)" : ""));
        return r;
    }
    if (spec.kind != "run") throw UsageError("unknown job kind '" + spec.kind + "'");
    CompileResult cr;
    double fetch_s = 0;
    if (!spec.object_sha256.empty()) {
        fs::path so = cache_root() / "worker" / "objects" / (spec.object_sha256 + ".so");
        double t0 = steady_s();
        std::error_code ec;
        if (!fs::exists(so, ec)) {
            try {
                if (auto bytes = queue.get_object(spec.object_sha256)) write_file_atomic(so, *bytes);
            } catch (const UsageError& e) {
                log(std::string("refused the object: ") + e.what() + "; compiling from source");
            }
        } else if (sha256_file(so) != spec.object_sha256) {  // a local copy that changed: never trust it
            fs::remove(so, ec);
        }
        fetch_s = steady_s() - t0;
        if (fs::exists(so, ec)) {
            cr.ok = true;
            cr.library = so;
            cr.arch = spec.arch;
            cr.source_hash = spec.object_sha256;
        }
    }
    if (!cr.ok) cr = v.compile(spec.source);
    ValidationResult res = spec.confirm.is_null()
                               ? v.run(cr)
                               : v.confirm(cr, ValidationResult::from_json(spec.confirm.value("first", nlohmann::json::object())),
                                           spec.confirm.value("agree", 0.1));
    nlohmann::json r = res.to_json();
    r["kind"] = "run";
    r["object_fetch_s"] = fetch_s;
    log("ran " + job.id.substr(0, 8) + ": " + status_name(res.status) +
        (res.ok() ? " " + std::to_string(res.speedup).substr(0, 5) + "x" : std::string()) + " in " +
        std::to_string(res.run_s).substr(0, 5) + " s");
    return r;
}

// ---- the loop -------------------------------------------------------------------------------

namespace {

// The options a worker runs with: its name defaulted (HOST-gpuN-PID or HOST-cpu-PID), checked.
WorkerOptions named_options(const WorkerOptions& in) {
    WorkerOptions opt = in;
    if (opt.name.empty())
        opt.name = hostname() + (opt.compile_only ? std::string("-cpu") : "-gpu" + std::to_string(opt.gpu)) + "-" +
                   std::to_string(::getpid());
    if (opt.archs.empty()) throw UsageError("worker: no architecture to work for");
    if (opt.lease_s <= 0) throw UsageError("worker: the lease must be positive");
    return opt;
}

// The result written for a job started more than max_attempts times: it crashes or hangs workers.
nlohmann::json dead_letter_result(const Claimed& c, const std::string& reason) {
    nlohmann::json r = c.spec.kind == "compile" ? nlohmann::json{{"kind", "compile"}, {"ok", false}, {"log", reason}}
                                                : nlohmann::json{{"kind", "run"}, {"status", "runtime_error"}, {"log", reason}};
    r["dead_letter"] = true;
    return r;
}

// One worker's loop: claims jobs (taking over expired ones first), has the handler do them, writes
// each result once; a second thread heartbeats the status and renews the lease of the job in progress.
class WorkerLoop {
public:
    WorkerLoop(const WorkerOptions& options, JobHandler& handler)
        : opt_(named_options(options)),
          handler_(handler),
          beat_s_(opt_.heartbeat_s > 0 ? opt_.heartbeat_s : opt_.lease_s / 4),
          streams_(worker_streams(opt_)),
          queue_(opt_.redis_url),
          beats_(opt_.redis_url) {
        for (const auto& s : streams_) queue_.ensure_group(s);
        started_unix_ = now_unix();
        dev_ = handler_.device();
        // A GPU worker leaves compile jobs to compile-only workers while one is live for its
        // architecture: a compile there would keep a run job (and the GPU) waiting.
        for (const auto& st : streams_)
            if (st.rfind("run:", 0) == 0) run_streams_.push_back(st);
    }
    WorkerSummary run(const std::atomic<bool>* stop);

private:
    void log(const std::string& line);
    nlohmann::json status(const std::string& state);
    void heartbeat_loop();
    bool compile_workers_live();
    std::optional<Claimed> claim();
    bool dead_letter(const Claimed& c);
    void work_on(const Claimed& c);
    nlohmann::json handled(const Claimed& c);
    template <class F>
    void locked(F f) {
        std::lock_guard<std::mutex> lock(mu_);
        f();
    }

    const WorkerOptions opt_;
    JobHandler& handler_;
    const double beat_s_;
    const std::vector<std::string> streams_;
    std::vector<std::string> run_streams_;
    Queue queue_, beats_;
    std::mutex mu_;  // guards summary_, current_, current_since_, busy_s_, logs_
    std::deque<std::string> logs_;
    std::optional<Claimed> current_;
    double current_since_ = 0;
    WorkerSummary summary_;
    double busy_s_ = 0, started_unix_ = 0;
    nlohmann::json dev_;
    std::atomic<bool> done_{false}, beat_now_{false};
    bool leave_compiles_ = false;
    double last_check_ = -1e9, last_reclaim_ = 0;
};

void WorkerLoop::log(const std::string& line) {
    std::string l = clock_text() + " " + line;
    // Job errors quote compiler output about untrusted kernels: escaped for the terminal.
    std::cerr << "kernelevo worker " << opt_.name << ": " << printable(redact(line)) << "\n";
    std::lock_guard<std::mutex> lock(mu_);
    logs_.push_back(redact(l));
    while (static_cast<int>(logs_.size()) > opt_.log_lines) logs_.pop_front();
}

nlohmann::json WorkerLoop::status(const std::string& state) {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json s = {{"name", opt_.name}, {"host", hostname()}, {"pid", ::getpid()},
                        {"kind", opt_.compile_only ? "compile" : "gpu"}, {"gpu", opt_.gpu}, {"device", dev_},
                        {"streams", streams_}, {"state", state}, {"jobs", summary_.jobs},
                        {"reclaimed", summary_.reclaimed}, {"dead", summary_.dead}, {"busy_s", busy_s_},
                        {"started", started_unix_}, {"lease_s", opt_.lease_s},
                        {"log", nlohmann::json(std::vector<std::string>(logs_.begin(), logs_.end()))}};
    if (current_) {
        s["state"] = "busy";
        s["job"] = {{"id", current_->id}, {"kind", current_->spec.kind}, {"since", current_since_},
                    {"attempt", current_->attempts}};
    }
    return s;
}

// The heartbeat thread: the status every beat_s (or at once when beat_now_ is set), and the lease of
// the job in progress renewed.
void WorkerLoop::heartbeat_loop() {
    double next = steady_s();
    while (!done_) {
        if (steady_s() >= next || beat_now_.exchange(false)) {
            next = steady_s() + beat_s_;
            try {
                std::optional<Claimed> job;
                double since = 0;
                locked([&] {
                    job = current_;
                    since = current_since_;
                });
                // A job stuck past max_job_s (the validator's own watchdogs failed) is let go:
                // its lease runs out and another worker takes it over, or dead-letters it.
                if (job && now_unix() - since <= opt_.max_job_s) beats_.touch(*job, opt_.name);
                beats_.heartbeat(status("idle"));
            } catch (const std::exception& e) {
                log(std::string("heartbeat failed: ") + e.what());
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// Whether a compile-only worker for one of this worker's architectures is heartbeating.
bool WorkerLoop::compile_workers_live() {
    for (const auto& w : queue_.workers()) {
        if (w.value("kind", "") != "compile" || w.value("state", "") == "stopped" ||
            w.value("age_s", 1e9) > 3 * w.value("lease_s", 30.0))
            continue;
        for (const auto& st : w.value("streams", nlohmann::json::array()))
            for (const auto& a : opt_.archs)
                if (st.get<std::string>() == Queue::stream_name("compile", a)) return true;
    }
    return false;
}

// The next job: an expired one taken over (checked at most every min(1 s, lease / 4)), else a new
// one (waiting up to 200 ms); a GPU worker skips compile streams while compile-only workers are up.
std::optional<Claimed> WorkerLoop::claim() {
    std::optional<Claimed> c;
    if (steady_s() - last_reclaim_ >= std::min(1.0, opt_.lease_s / 4)) {
        last_reclaim_ = steady_s();
        c = queue_.reclaim(streams_, opt_.name, static_cast<int64_t>(opt_.lease_s * 1000));
        if (c) {
            locked([&] { ++summary_.reclaimed; });
            log("took over job " + c->id.substr(0, 8) + " (" + c->spec.kind + ", start " + std::to_string(c->attempts) +
                ", earlier: " + c->workers + ")");
        }
    }
    if (!opt_.compile_only && steady_s() - last_check_ > 5) {
        last_check_ = steady_s();
        bool now = compile_workers_live();
        if (now != leave_compiles_)
            log(now ? "compile-only workers are up: leaving compile jobs to them" : "compiling too (no compile-only worker is up)");
        leave_compiles_ = now;
    }
    if (!c) c = queue_.next(leave_compiles_ ? run_streams_ : streams_, opt_.name, 200);
    return c;
}

// A job started more than max_attempts times is completed as dead; returns whether it was.
bool WorkerLoop::dead_letter(const Claimed& c) {
    if (c.attempts <= opt_.max_attempts) return false;
    std::string reason = "started " + std::to_string(c.attempts - 1) + " times without finishing (workers " + c.workers +
                         " stopped heartbeating while running it: it crashes or hangs workers)";
    queue_.complete(c, dead_letter_result(c, reason), opt_.name, reason);
    locked([&] { ++summary_.dead; });
    log("dead-lettered job " + c.id.substr(0, 8) + ": " + reason);
    return true;
}

// The handler's result for a job; its exceptions become error results (a UsageError: "error").
nlohmann::json WorkerLoop::handled(const Claimed& c) {
    try {
        return handler_.handle(c, queue_, [this](const std::string& line) { log(line); });
    } catch (const UsageError& e) {
        log(std::string("job ") + c.id.substr(0, 8) + " failed: " + redact(e.what()));
        return {{"kind", c.spec.kind}, {"status", "error"}, {"ok", false}, {"log", redact(e.what())}};
    } catch (const std::exception& e) {
        log(std::string("job ") + c.id.substr(0, 8) + " failed: " + redact(e.what()));
        return {{"kind", c.spec.kind}, {"status", "runtime_error"}, {"ok", false}, {"log", std::string("worker error: ") + redact(e.what())}};
    }
}

// Does a claimed job and writes its result (once: a result another worker wrote first is counted).
void WorkerLoop::work_on(const Claimed& c) {
    locked([&] {
        current_ = c;
        current_since_ = now_unix();
    });
    beat_now_ = true;
    double t0 = steady_s();
    nlohmann::json result = handled(c);
    double job_s = steady_s() - t0;
    result["worker"] = opt_.name;
    result["job_s"] = job_s;
    result["queued_s"] = c.queued_s;
    locked([&] {
        current_.reset();
        if (c.spec.kind == "run") busy_s_ += job_s;
    });
    if (!queue_.complete(c, result, opt_.name)) {
        locked([&] { ++summary_.duplicates; });
        log("job " + c.id.substr(0, 8) + " had been finished by another worker; counted once");
    }
    locked([&] { ++summary_.jobs; });
    beat_now_ = true;  // the status board shows the finished job at once
}

WorkerSummary WorkerLoop::run(const std::atomic<bool>* stop) {
    std::string names;
    for (const auto& x : streams_) names += (names.empty() ? "" : ", ") + x;
    log("started: " + std::string(opt_.compile_only ? "compile-only" : "GPU " + std::to_string(opt_.gpu)) + ", streams " + names +
        " on " + queue_.display());
    beats_.heartbeat(status("idle"));
    std::thread beat([this] { heartbeat_loop(); });
    double last_job = steady_s();
    while (!(stop && stop->load())) {
        if (opt_.idle_exit_s > 0 && steady_s() - last_job > opt_.idle_exit_s) {
            summary_.stop_reason = "idle";
            break;
        }
        std::optional<Claimed> c;
        try {
            c = claim();
        } catch (const UsageError& e) {
            log(std::string("queue unreachable: ") + e.what() + "; retrying");
            std::this_thread::sleep_for(std::chrono::seconds(1));
            continue;
        }
        if (!c) continue;
        last_job = steady_s();
        try {
            if (dead_letter(*c)) continue;
            work_on(*c);
        } catch (const UsageError& e) {
            log(std::string("queue error: ") + e.what());
            locked([&] { current_.reset(); });
        }
        if (opt_.max_jobs > 0 && summary_.jobs >= opt_.max_jobs) {
            summary_.stop_reason = "max_jobs";
            break;
        }
    }
    if (summary_.stop_reason.empty()) summary_.stop_reason = "stopped";
    done_ = true;
    beat.join();
    try {
        beats_.heartbeat(status("stopped"));
    } catch (const std::exception&) {
    }
    log("stopped (" + summary_.stop_reason + ") after " + std::to_string(summary_.jobs) + " job(s)");
    return summary_;
}

}  // namespace

WorkerSummary run_worker(const WorkerOptions& options, JobHandler& handler, const std::atomic<bool>* stop) {
    return WorkerLoop(options, handler).run(stop);
}

}  // namespace kevo::worker
