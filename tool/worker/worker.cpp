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
};

ValidatorHandler::ValidatorHandler(const WorkerOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->options = options;
}
ValidatorHandler::~ValidatorHandler() = default;

nlohmann::json ValidatorHandler::device() {
    if (impl_->options.compile_only) return nlohmann::json::object();
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->device_known) {
        Validator probe(Task{}, ValidateOptions{});  // queries the GPU in a child (KERNELEVO_DEVICE)
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
    ValidateOptions vo;
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

WorkerSummary run_worker(const WorkerOptions& opt_in, JobHandler& handler, const std::atomic<bool>* stop) {
    WorkerOptions opt = opt_in;
    if (opt.name.empty())
        opt.name = hostname() + (opt.compile_only ? std::string("-cpu") : "-gpu" + std::to_string(opt.gpu)) + "-" +
                   std::to_string(::getpid());
    if (opt.archs.empty()) throw UsageError("worker: no architecture to work for");
    if (opt.lease_s <= 0) throw UsageError("worker: the lease must be positive");
    double beat_s = opt.heartbeat_s > 0 ? opt.heartbeat_s : opt.lease_s / 4;
    std::vector<std::string> streams = worker_streams(opt);

    Queue queue(opt.redis_url), beats(opt.redis_url);
    for (const auto& s : streams) queue.ensure_group(s);

    std::mutex mu;  // guards status, current, logs
    std::deque<std::string> logs;
    std::optional<Claimed> current;
    double current_since = 0;
    WorkerSummary summary;
    double busy_s = 0, started_unix = now_unix();
    nlohmann::json dev = handler.device();
    auto log = [&](const std::string& line) {
        std::string l = clock_text() + " " + line;
        // Job errors quote compiler output about untrusted kernels: escaped for the terminal.
        std::cerr << "kernelevo worker " << opt.name << ": " << printable(redact(line)) << "\n";
        std::lock_guard<std::mutex> lock(mu);
        logs.push_back(redact(l));
        while (static_cast<int>(logs.size()) > opt.log_lines) logs.pop_front();
    };
    auto status = [&](const std::string& state) {
        std::lock_guard<std::mutex> lock(mu);
        nlohmann::json s = {{"name", opt.name}, {"host", hostname()}, {"pid", ::getpid()},
                            {"kind", opt.compile_only ? "compile" : "gpu"}, {"gpu", opt.gpu}, {"device", dev},
                            {"streams", streams}, {"state", state}, {"jobs", summary.jobs},
                            {"reclaimed", summary.reclaimed}, {"dead", summary.dead}, {"busy_s", busy_s},
                            {"started", started_unix}, {"lease_s", opt.lease_s},
                            {"log", nlohmann::json(std::vector<std::string>(logs.begin(), logs.end()))}};
        if (current) {
            s["state"] = "busy";
            s["job"] = {{"id", current->id}, {"kind", current->spec.kind}, {"since", current_since},
                        {"attempt", current->attempts}};
        }
        return s;
    };

    log("started: " + std::string(opt.compile_only ? "compile-only" : "GPU " + std::to_string(opt.gpu)) + ", streams " +
        [&] {
            std::string s;
            for (const auto& x : streams) s += (s.empty() ? "" : ", ") + x;
            return s;
        }() + " on " + queue.display());
    std::atomic<bool> done{false}, beat_now{false};
    beats.heartbeat(status("idle"));
    std::thread beat([&] {
        double next = steady_s();
        while (!done) {
            if (steady_s() >= next || beat_now.exchange(false)) {
                next = steady_s() + beat_s;
                try {
                    std::optional<Claimed> job;
                    double since = 0;
                    {
                        std::lock_guard<std::mutex> lock(mu);
                        job = current;
                        since = current_since;
                    }
                    // A job stuck past max_job_s (the validator's own watchdogs failed) is let go:
                    // its lease runs out and another worker takes it over, or dead-letters it.
                    if (job && now_unix() - since <= opt.max_job_s) beats.touch(*job, opt.name);
                    beats.heartbeat(status("idle"));
                } catch (const std::exception& e) {
                    log(std::string("heartbeat failed: ") + e.what());
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });

    // A GPU worker leaves compile jobs to compile-only workers while one is live for its
    // architecture: a compile there would keep a run job (and the GPU) waiting.
    std::vector<std::string> run_streams;
    for (const auto& st : streams)
        if (st.rfind("run:", 0) == 0) run_streams.push_back(st);
    bool leave_compiles = false;
    double last_check = -1e9;
    auto compile_workers_live = [&] {
        for (const auto& w : queue.workers()) {
            if (w.value("kind", "") != "compile" || w.value("state", "") == "stopped" ||
                w.value("age_s", 1e9) > 3 * w.value("lease_s", 30.0))
                continue;
            for (const auto& st : w.value("streams", nlohmann::json::array()))
                for (const auto& a : opt.archs)
                    if (st.get<std::string>() == Queue::stream_name("compile", a)) return true;
        }
        return false;
    };

    double last_reclaim = 0, last_job = steady_s();
    const int64_t lease_ms = static_cast<int64_t>(opt.lease_s * 1000);
    const double reclaim_every = std::min(1.0, opt.lease_s / 4);
    while (!(stop && stop->load())) {
        if (opt.idle_exit_s > 0 && steady_s() - last_job > opt.idle_exit_s) {
            summary.stop_reason = "idle";
            break;
        }
        std::optional<Claimed> c;
        try {
            if (steady_s() - last_reclaim >= reclaim_every) {
                last_reclaim = steady_s();
                c = queue.reclaim(streams, opt.name, lease_ms);
                if (c) {
                    {
                        std::lock_guard<std::mutex> lock(mu);
                        ++summary.reclaimed;
                    }
                    log("took over job " + c->id.substr(0, 8) + " (" + c->spec.kind + ", start " +
                        std::to_string(c->attempts) + ", earlier: " + c->workers + ")");
                }
            }
            if (!opt.compile_only && steady_s() - last_check > 5) {
                last_check = steady_s();
                bool now = compile_workers_live();
                if (now != leave_compiles)
                    log(now ? "compile-only workers are up: leaving compile jobs to them" : "compiling too (no compile-only worker is up)");
                leave_compiles = now;
            }
            if (!c) c = queue.next(leave_compiles ? run_streams : streams, opt.name, 200);
        } catch (const UsageError& e) {
            log(std::string("queue unreachable: ") + e.what() + "; retrying");
            std::this_thread::sleep_for(std::chrono::seconds(1));
            continue;
        }
        if (!c) continue;
        last_job = steady_s();
        try {
            if (c->attempts > opt.max_attempts) {
                std::string reason = "started " + std::to_string(c->attempts - 1) + " times without finishing (workers " +
                                     c->workers + " stopped heartbeating while running it: it crashes or hangs workers)";
                nlohmann::json r = c->spec.kind == "compile"
                                       ? nlohmann::json{{"kind", "compile"}, {"ok", false}, {"log", reason}}
                                       : nlohmann::json{{"kind", "run"}, {"status", "runtime_error"}, {"log", reason}};
                r["dead_letter"] = true;
                queue.complete(*c, r, opt.name, reason);
                {
                    std::lock_guard<std::mutex> lock(mu);
                    ++summary.dead;
                }
                log("dead-lettered job " + c->id.substr(0, 8) + ": " + reason);
                continue;
            }
            {
                std::lock_guard<std::mutex> lock(mu);
                current = c;
                current_since = now_unix();
            }
            beat_now = true;
            double t0 = steady_s();
            nlohmann::json result;
            try {
                result = handler.handle(*c, queue, log);
            } catch (const UsageError& e) {
                result = {{"kind", c->spec.kind}, {"status", "error"}, {"ok", false}, {"log", redact(e.what())}};
                log(std::string("job ") + c->id.substr(0, 8) + " failed: " + redact(e.what()));
            } catch (const std::exception& e) {
                result = {{"kind", c->spec.kind}, {"status", "runtime_error"}, {"ok", false},
                          {"log", std::string("worker error: ") + redact(e.what())}};
                log(std::string("job ") + c->id.substr(0, 8) + " failed: " + redact(e.what()));
            }
            double job_s = steady_s() - t0;
            result["worker"] = opt.name;
            result["job_s"] = job_s;
            result["queued_s"] = c->queued_s;
            {
                std::lock_guard<std::mutex> lock(mu);
                current.reset();
                if (c->spec.kind == "run") busy_s += job_s;
            }
            if (!queue.complete(*c, result, opt.name)) {
                {
                    std::lock_guard<std::mutex> lock(mu);
                    ++summary.duplicates;
                }
                log("job " + c->id.substr(0, 8) + " had been finished by another worker; counted once");
            }
            {
                std::lock_guard<std::mutex> lock(mu);
                ++summary.jobs;
            }
            beat_now = true;  // the status board shows the finished job at once
        } catch (const UsageError& e) {
            log(std::string("queue error: ") + e.what());
            std::lock_guard<std::mutex> lock(mu);
            current.reset();
        }
        if (opt.max_jobs > 0 && summary.jobs >= opt.max_jobs) {
            summary.stop_reason = "max_jobs";
            break;
        }
    }
    if (summary.stop_reason.empty()) summary.stop_reason = "stopped";
    done = true;
    beat.join();
    try {
        beats.heartbeat(status("stopped"));
    } catch (const std::exception&) {
    }
    log("stopped (" + summary.stop_reason + ") after " + std::to_string(summary.jobs) + " job(s)");
    return summary;
}

}  // namespace kevo::worker
