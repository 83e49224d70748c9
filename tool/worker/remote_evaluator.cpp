#include "worker/remote_evaluator.h"

#include <unistd.h>

#include <chrono>
#include <random>

#include "common/error.h"
#include "validate/validator_evaluator.h"  // to_evaluation()

namespace kevo::worker {
namespace {

constexpr const char* kObjectScheme = "queue-object:";  // CompileResult::library of a remote compile
constexpr const char* kStoppedObject = "queue-stopped:";  // ... of a compile whose wait gave up

double steady_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string random_client() {
    std::random_device rd;
    char buf[40];
    std::snprintf(buf, sizeof buf, "search-%d-%08x", static_cast<int>(::getpid()), rd());
    return buf;
}

}  // namespace

RemoteEvaluator::RemoteEvaluator(const std::string& queue_url, const Task& task, const ValidateOptions& options,
                                 std::function<void(const std::string&)> log)
    : task_(task), options_(options), log_(std::move(log)) {
    ops_ = std::make_unique<Queue>(queue_url);
    listener_ = std::make_unique<Queue>(queue_url);
    client_ = random_client();
    ops_->publish_task(task_);
    job_options_ = portable_options(options_);
    if (!options_.arch.empty()) {
        arch_ = normalize_arch(options_.arch);
    } else {
        for (const auto& w : live_workers())
            if (w.value("kind", "") == "gpu" && w["device"].value("present", false)) {
                arch_ = DeviceInfo::from_json(w["device"]).arch();
                break;
            }
        if (arch_.empty()) arch_ = "sm_90";
    }
    for (const char* kind : {"compile", "run"}) ops_->ensure_group(Queue::stream_name(kind, arch_));
    listen_thread_ = std::thread([this] { listen(); });
}

RemoteEvaluator::~RemoteEvaluator() {
    done_ = true;
    if (listen_thread_.joinable()) listen_thread_.join();
}

std::vector<nlohmann::json> RemoteEvaluator::live_workers() {
    std::vector<nlohmann::json> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : ops_->workers())
        if (w.value("state", "") != "stopped" && w.value("age_s", 1e9) < 3 * w.value("lease_s", 30.0)) out.push_back(w);
    return out;
}

DeviceInfo RemoteEvaluator::device() {
    for (const auto& w : live_workers())
        if (w.value("kind", "") == "gpu" && w["device"].value("present", false)) {
            DeviceInfo d = DeviceInfo::from_json(w["device"]);
            if (d.arch() == arch_ || d.arch() + "a" == arch_) return d;
        }
    DeviceInfo none;
    none.error = "no live GPU worker for " + arch_ + " on " + ops_->display();
    return none;
}

std::string RemoteEvaluator::arch() { return arch_; }

int RemoteEvaluator::capacity() {
    int n = 0;
    for (const auto& w : live_workers())
        for (const auto& s : w.value("streams", nlohmann::json::array()))
            if (s.get<std::string>().find(":" + arch_) != std::string::npos) {
                ++n;
                break;
            }
    return 2 * std::max(n, 1);
}

JobSpec RemoteEvaluator::spec(const std::string& kind, const std::string& source) const {
    JobSpec s;
    s.kind = kind;
    s.arch = arch_;
    s.task_hash = task_.hash();
    s.reference_hash = task_.reference_hash();
    s.source = source;
    s.options = job_options_;
    return s;
}

void RemoteEvaluator::listen() {
    while (!done_) {
        std::vector<std::string> ids;
        try {
            ids = listener_->wait_replies(client_, 0.5);
        } catch (const std::exception& e) {
            if (log_) log_(std::string("queue: ") + e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            continue;
        }
        for (const std::string& id : ids) {
            std::shared_ptr<Waiter> w;
            {
                std::lock_guard<std::mutex> lock(mu_);
                auto it = waiters_.find(id);
                if (it == waiters_.end()) continue;
                w = it->second;
            }
            std::optional<nlohmann::json> r;
            try {
                r = listener_->result(id);
            } catch (const std::exception&) {
            }
            if (!r) continue;  // the waiter polls
            std::lock_guard<std::mutex> lock(mu_);
            w->result = std::move(r);
            w->cv.notify_all();
        }
    }
}

bool RemoteEvaluator::served(const std::string& kind) {
    const std::string stream = Queue::stream_name(kind, arch_);
    for (const auto& w : live_workers())
        for (const auto& st : w.value("streams", nlohmann::json::array()))
            if (st.is_string() && st.get<std::string>() == stream) return true;
    return false;
}

void RemoteEvaluator::stop_when(std::function<int()> stopping) {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = std::move(stopping);
}

std::optional<nlohmann::json> RemoteEvaluator::wait(const JobSpec& s) {
    std::string id = s.id();
    auto w = std::make_shared<Waiter>();
    {
        std::lock_guard<std::mutex> lock(mu_);
        waiters_[id] = w;
    }
    double t0 = steady_s();
    std::optional<nlohmann::json> r;
    {
        std::lock_guard<std::mutex> lock(mu_);  // ops_ is shared by the search's threads
        r = ops_->submit(s, client_);
    }
    double last_note = steady_s(), last_poll = 0;
    bool serving = true;
    std::unique_lock<std::mutex> lock(mu_);
    while (!r) {
        // Short waits: a stop (Ctrl-C, the deadline) is seen within a fraction of a second.
        if (w->cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return w->result.has_value(); })) {
            r = w->result;
            break;
        }
        const int stop = stopping_ ? stopping_() : 0;
        if (steady_s() - last_poll < 2 && stop == 0) continue;
        last_poll = steady_s();
        r = ops_->result(id);  // a lost notification (e.g. a broken connection) is not a lost result
        if (r) break;
        lock.unlock();
        serving = served(s.kind);
        const std::string stream = Queue::stream_name(s.kind, arch_);
        if (!serving && log_ && !warned_.exchange(true))
            log_("no live worker serves " + stream + " on " + ops_->display() + ": the " + s.kind +
                 " jobs wait until one starts (`kernelevo worker --redis " + ops_->display() +
                 (s.kind == "compile" ? " --compile-only --arch " + arch_ + "`, or a GPU worker" : " --gpu N` on a " + arch_ + " GPU") +
                 "; Ctrl-C or --max-time stops the search meanwhile)");
        if (serving && log_ && steady_s() - last_note > 60) {
            last_note = steady_s();
            log_("still waiting for " + s.kind + " job " + id.substr(0, 8) + " on " + ops_->display());
        }
        lock.lock();
        if (stop >= 2 || (stop == 1 && !serving)) break;  // given up: no verdict (the job stays queued)
    }
    waiters_.erase(id);
    if (!r) return std::nullopt;
    double seen = steady_s() - t0;
    if (r->contains("job_s")) {
        const double queued = r->value("queued_s", 0.0);
        overhead_ms_.push_back(std::max(0.0, seen - r->value("job_s", 0.0) - queued) * 1000);
        queued_ms_.push_back(queued * 1000);
    }
    return r;
}

void RemoteEvaluator::register_run(const std::string& state_display) {
    ops_->register_run({{"state", state_display}, {"task", task_.name}, {"arch", arch_}, {"client", client_},
                        {"task_hash", task_.hash()}});
}

std::vector<double> RemoteEvaluator::overhead_ms() {
    std::lock_guard<std::mutex> lock(mu_);
    return overhead_ms_;
}

std::vector<double> RemoteEvaluator::queued_ms() {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_ms_;
}

// A job given up (stop_when()): no device answered, so nothing is said about the candidate.
Evaluation RemoteEvaluator::stopped_evaluation(const std::string& kind) {
    Evaluation e;
    e.status = Status::no_device;
    e.feedback = "the search stopped while its " + kind + " job waited" +
                 (served(kind) ? "" : ": no live worker serves " + Queue::stream_name(kind, arch_) + " on " + ops_->display());
    e.details = {{"status", status_name(e.status)}, {"error", e.feedback}};
    return e;
}

CompileResult RemoteEvaluator::compile(const std::string& source) {
    std::optional<nlohmann::json> waited = wait(spec("compile", source));
    if (!waited) {  // the search stops: a handle whose run() says so, never a verdict on the source
        CompileResult c;
        c.ok = true;
        c.arch = arch_;
        c.library = kStoppedObject;
        return c;
    }
    const nlohmann::json& r = *waited;
    if (r.value("status", "") == "error")
        throw UsageError("worker " + r.value("worker", std::string("?")) + ": " + r.value("log", std::string()));
    CompileResult c = compile_result_from_json(r);
    c.arch = arch_;
    if (c.ok) c.library = std::string(kObjectScheme) + r.value("object_sha256", std::string()) + "/" + c.source_hash;
    // The source travels with the run job too (a GPU worker compiles it when the object expired).
    if (c.ok) {
        std::lock_guard<std::mutex> lock(mu_);
        sources_[c.library.string()] = {source, r.value("toolkit", std::string())};
    }
    return c;
}

JobSpec RemoteEvaluator::run_spec(const CompileResult& compiled, std::string& toolkit) {
    std::string lib = compiled.library.string(), source;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sources_.find(lib);
        if (it == sources_.end()) throw UsageError("internal: run() of a candidate this evaluator did not compile");
        source = it->second.first;
        toolkit = it->second.second;
        sources_.erase(it);
    }
    JobSpec s = spec("run", source);
    std::string rest = lib.substr(std::string(kObjectScheme).size());
    s.object_sha256 = rest.substr(0, rest.find('/'));
    return s;
}

Evaluation RemoteEvaluator::confirm(const CompileResult& compiled, const Evaluation& first, double agree) {
    if (compiled.library.string() == kStoppedObject) return stopped_evaluation("compile");
    std::string toolkit;
    JobSpec s = run_spec(compiled, toolkit);
    s.confirm = {{"first", first.details}, {"agree", agree}};
    std::optional<nlohmann::json> waited = wait(s);
    if (!waited) return stopped_evaluation("run");
    const nlohmann::json& r = *waited;
    if (r.value("status", "") == "error")
        throw UsageError("worker " + r.value("worker", std::string("?")) + ": " + r.value("log", std::string()));
    ValidationResult v = ValidationResult::from_json(r);
    Evaluation e;
    e.status = v.status;
    e.speedup = v.speedup;
    if (!v.ok()) e.feedback = v.log;
    e.details = {{"confirmation", v.details.value("confirmation", nlohmann::json())}, {"worker", r.value("worker", std::string())}};
    return e;
}

Evaluation RemoteEvaluator::run(const CompileResult& compiled) {
    if (compiled.library.string() == kStoppedObject) return stopped_evaluation("compile");
    std::string toolkit;
    JobSpec s = run_spec(compiled, toolkit);
    const std::string first_id = s.id();
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = reruns_.find(first_id); it != reruns_.end()) s.rerun = it->second;
    }
    std::optional<nlohmann::json> waited = wait(s);
    if (!waited) return stopped_evaluation("run");
    const nlohmann::json& r = *waited;
    if (r.value("status", "") == "error")
        throw UsageError("worker " + r.value("worker", std::string("?")) + ": " + r.value("log", std::string()));
    ValidationResult v = ValidationResult::from_json(r);
    Evaluation e = to_evaluation(v);
    if (e.outside_kernel) {  // the search runs it again: then as a new job, not this stored result
        std::lock_guard<std::mutex> lock(mu_);
        reruns_[first_id] = s.rerun + 1;
    }
    e.details["worker"] = r.value("worker", std::string());
    if (!toolkit.empty()) e.details["toolkit"] = toolkit;  // of the worker that compiled it
    if (r.value("dead_letter", false)) e.details["dead_letter"] = true;
    return e;
}

}  // namespace kevo::worker
