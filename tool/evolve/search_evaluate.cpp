#include "evolve/search_evaluate.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "tune/tune.h"

namespace kevo::evolve::detail {

// One of the evaluator's parallel_runs() slots, held while a candidate runs.
struct EvaluationPipeline::GpuSlot {
    EvaluationPipeline& p;
    explicit GpuSlot(EvaluationPipeline& pipeline) : p(pipeline) {
        std::unique_lock<std::mutex> lock(p.gpu_mu_);
        const int limit = std::max(1, p.s_.evaluator.parallel_runs());
        p.gpu_cv_.wait(lock, [&] { return p.gpu_busy_ < limit; });
        ++p.gpu_busy_;
    }
    ~GpuSlot() {
        std::lock_guard<std::mutex> lock(p.gpu_mu_);
        --p.gpu_busy_;
        p.gpu_cv_.notify_one();
    }
};

// The evaluator with every run in a GPU slot, for the tuner.
struct EvaluationPipeline::LockedEvaluator : Evaluator {
    Evaluator& inner;
    EvaluationPipeline& pipeline;
    LockedEvaluator(Evaluator& e, EvaluationPipeline& p) : inner(e), pipeline(p) {}
    DeviceInfo device() override { return inner.device(); }
    std::string arch() override { return inner.arch(); }
    CompileResult compile(const std::string& source) override { return inner.compile(source); }
    Evaluation run(const CompileResult& compiled) override {
        GpuSlot slot(pipeline);
        if (pipeline.s_.should_stop()) throw Stopped{};
        return inner.run(compiled);
    }
};

void EvaluationPipeline::finish(store::Program& p) {
    store::Store& store = s_.store;
    if (p.status == store::ProgramStatus::no_code) {
        p.id = store.put_program(p);
    } else {
        p.norm_hash = normalized_hash(p.source);
        p.status = store::ProgramStatus::pending;
        store::Program claimed = store.claim_program(p);
        if (claimed.key != p.key) {
            p.status = store::ProgramStatus::duplicate;
            p.speedup = claimed.speedup;
            p.feedback = claimed.feedback;
            p.details = {{"duplicate_of", claimed.id}, {"status", claimed.status}};
            p.id = store.put_program(p);
        } else {
            p.id = claimed.id;
            evaluate(p);
            // Not judged (outside the kernel) does not mark its source: the same kernel sent again
            // is evaluated again, not dropped as a duplicate.
            if (not_judged(p)) p.norm_hash.clear();
            store.put_program(p);
        }
    }
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.tally(p);
    s_.report();
}

void EvaluationPipeline::evaluate(store::Program& p) {
    s_.check_stop();
    Evaluation ev;
    double gpu_s = 0;
    int runs = 0;
    // A verdict outside the kernel is no verdict: the same candidate again, after a back-off,
    // never a question to the model (SearchConfig::outside_kernel_retries).
    for (int retry = 0;; ++retry) {
        // Compiled again for each run: a cached result (compile caches by content), and an
        // evaluator may hold one compiled candidate for one run only (the remote queue's).
        CompileResult compiled = s_.evaluator.compile(p.source);
        if (!compiled.ok) {
            ev = Evaluation{};
            ev.status = Status::compile_error;
            ev.feedback = compiled.log.empty() ? "the compiler failed without a message" : compiled.log;
            ev.details = {{"status", status_name(ev.status)}, {"log", compiled.log}, {"compile_s", compiled.seconds}};
            break;
        }
        ev = run_once(compiled, gpu_s);
        ++runs;
        if (!ev.outside_kernel || ev.status == Status::no_device || retry >= s_.cfg.evolution.outside_kernel_retries) break;
        wait_before_retry(p, ev, retry);
    }
    if (ev.status == Status::no_device) {  // not the candidate's fault: stop, re-evaluate on resume
        s_.request_stop(StopReason::no_gpu, ev.feedback);
        throw Stopped{};
    }
    p.status = ev.outside_kernel ? store::ProgramStatus::not_judged : stored_status(ev.status);
    p.speedup = ev.ok() ? ev.speedup : 0;
    p.feedback = ev.feedback;
    // A judged failure always says something (a repair prompt never shows an empty error).
    if (!ev.ok() && p.feedback.empty())
        p.feedback = std::string("the evaluator reported ") + store::program_status_name(p.status) + " without details";
    p.details = ev.details.is_object() ? ev.details : nlohmann::json::object();
    if (gpu_s > 0) p.details["gpu_s"] = gpu_s;
    if (runs > 1) p.details["runs"] = runs;
}

// One run in a GPU slot; adds the GPU time it held (the evaluator's figure, else run()'s wall time).
Evaluation EvaluationPipeline::run_once(const CompileResult& compiled, double& gpu_s) {
    GpuSlot slot(*this);
    s_.check_stop();
    const auto t0 = std::chrono::steady_clock::now();
    Evaluation ev = s_.evaluator.run(compiled);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gpu_s += ev.gpu_s > 0 ? ev.gpu_s : wall;
    if (ev.ok() && s_.cfg.evolution.profile_best && s_.is_new_best(ev.speedup)) add_profile(ev, compiled);
    return ev;
}

// The back-off before running a candidate again that was not judged (the GPU slot is free
// meanwhile); a stop ends the wait.
void EvaluationPipeline::wait_before_retry(const store::Program& p, const Evaluation& ev, int retry) {
    double wait = std::max(ev.retry_after_s, s_.cfg.evolution.outside_kernel_backoff_s * static_cast<double>(1 << std::min(retry, 16)));
    if (s_.cfg.log) {
        // The evaluator's reason, whole words only (it starts with "not judged: " itself).
        std::string why = ev.feedback.rfind("not judged: ", 0) == 0 ? ev.feedback.substr(12) : ev.feedback;
        if (why.size() > 320) why = why.substr(0, why.rfind(' ', 317)) + "...";
        s_.cfg.log("candidate " + p.key + " was not judged (" + why + "); evaluating it again in " +
                   fixed(wait, 0) + " s (retry " + std::to_string(retry + 1) + " of " +
                   std::to_string(s_.cfg.evolution.outside_kernel_retries) + "), no LLM request");
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait * 1000));
    for (auto now = std::chrono::steady_clock::now(); now < until; now = std::chrono::steady_clock::now()) {
        s_.check_stop();
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(200), until - now));
    }
    s_.check_stop();
}

// What a profiler says about a new best kernel goes into its feedback, hence the next prompts.
void EvaluationPipeline::add_profile(Evaluation& ev, const CompileResult& compiled) {
    std::string summary = s_.evaluator.profile(compiled);
    if (summary.empty()) return;
    ev.feedback += "\nProfile (Nsight Compute): " + summary;
    if (ev.details.is_object()) ev.details["profile"] = summary;
}

std::optional<store::Program> EvaluationPipeline::tune_program(const store::Program& p, const std::string& key) {
    if (s_.cfg.evolution.tune_evals <= 0) return std::nullopt;
    if (backend_of(p.source) != "cuda") return std::nullopt;  // the tuner edits CUDA sources (KEVO_TUNE macros)
    std::vector<tune::Tunable> tunables;
    try {
        tunables = tune::parse_tunables(p.source);
    } catch (const tune::TuneError&) {
        return std::nullopt;  // the compiler accepted it; the tuner cannot read it: leave it be
    }
    if (tunables.empty()) return std::nullopt;
    if (auto done = s_.store.find_program(key)) {
        if (done->status != store::ProgramStatus::pending) return done->ok() ? done : std::nullopt;
    }
    {
        std::lock_guard<std::mutex> lock(s_.mu);
        if (p.speedup < 0.9 * s_.progress.best_speedup) return std::nullopt;
    }
    tune::TuneOptions o;
    o.max_evals = s_.cfg.evolution.tune_evals;
    o.seed = Rng(s_.cfg.structure.seed, key).next();
    LockedEvaluator locked(s_.evaluator, *this);
    tune::TuneResult r = tune::tune(p.source, locked, o);
    const tune::Trial* best = r.best_trial();
    if (!best || best->point == tune::default_point(r.tunables) || best->speedup <= p.speedup) return std::nullopt;
    store::Program t;
    t.key = key;
    t.generation = p.generation;
    t.island = p.island;
    t.parent_id = p.id;
    t.origin = "tune";
    t.attempt = p.attempt;
    t.source = r.best_source;
    finish(t);  // validated once more, as every stored program is
    if (t.ok()) {
        t.feedback += "\nTuned without the LLM: " + tune::point_text(best->point) + " (" + std::to_string(r.trials.size()) +
                      " variants, strategy " + r.strategy + "; the untuned kernel: " + fixed(p.speedup, 3) + "x)";
        t.details["tune"] = r.to_json();
        s_.store.put_program(t);
    }
    return t.ok() ? std::optional<store::Program>(t) : std::nullopt;
}

}  // namespace kevo::evolve::detail
