#include "evolve/search_evaluate.h"

#include <algorithm>
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
    if (p.status == "no_code") {
        p.id = store.put_program(p);
    } else {
        p.norm_hash = normalized_hash(p.source);
        p.status = "pending";
        store::Program claimed = store.claim_program(p);
        if (claimed.key != p.key) {
            p.status = "duplicate";
            p.speedup = claimed.speedup;
            p.feedback = claimed.feedback;
            p.details = {{"duplicate_of", claimed.id}, {"status", claimed.status}};
            p.id = store.put_program(p);
        } else {
            p.id = claimed.id;
            evaluate(p);
            // A failure outside the kernel (the judge could not attribute it) does not mark its
            // source: the same kernel sent again is evaluated again, not dropped as a duplicate.
            if (outside_kernel(p)) p.norm_hash.clear();
            store.put_program(p);
        }
    }
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.tally(p);
    s_.report();
}

void EvaluationPipeline::evaluate(store::Program& p) {
    s_.check_stop();
    CompileResult compiled = s_.evaluator.compile(p.source);
    Evaluation ev;
    if (!compiled.ok) {
        ev.status = Status::compile_error;
        ev.feedback = compiled.log;
        ev.details = {{"status", status_name(ev.status)}, {"log", compiled.log}, {"compile_s", compiled.seconds}};
    } else {
        GpuSlot slot(*this);
        s_.check_stop();
        ev = s_.evaluator.run(compiled);
        if (ev.ok() && s_.cfg.profile_best && s_.is_new_best(ev.speedup)) add_profile(ev, compiled);
    }
    if (ev.status == Status::no_device) {  // not the candidate's fault: stop, re-evaluate on resume
        s_.request_stop("error: no GPU to validate on: " + ev.feedback);
        throw Stopped{};
    }
    p.status = status_name(ev.status);  // the store's column also holds the search's own states
    p.speedup = ev.ok() ? ev.speedup : 0;
    p.feedback = ev.feedback;
    p.details = ev.details;
}

// What a profiler says about a new best kernel goes into its feedback, hence the next prompts.
void EvaluationPipeline::add_profile(Evaluation& ev, const CompileResult& compiled) {
    std::string summary = s_.evaluator.profile(compiled);
    if (summary.empty()) return;
    ev.feedback += "\nProfile (Nsight Compute): " + summary;
    if (ev.details.is_object()) ev.details["profile"] = summary;
}

std::optional<store::Program> EvaluationPipeline::tune_program(const store::Program& p, const std::string& key) {
    if (s_.cfg.tune_evals <= 0) return std::nullopt;
    if (backend_of(p.source) != "cuda") return std::nullopt;  // the tuner edits CUDA sources (KEVO_TUNE macros)
    std::vector<tune::Tunable> tunables;
    try {
        tunables = tune::parse_tunables(p.source);
    } catch (const tune::TuneError&) {
        return std::nullopt;  // the compiler accepted it; the tuner cannot read it: leave it be
    }
    if (tunables.empty()) return std::nullopt;
    if (auto done = s_.store.find_program(key)) {
        if (done->status != "pending") return done->ok() ? done : std::nullopt;
    }
    {
        std::lock_guard<std::mutex> lock(s_.mu);
        if (p.speedup < 0.9 * s_.progress.best_speedup) return std::nullopt;
    }
    tune::TuneOptions o;
    o.max_evals = s_.cfg.tune_evals;
    o.seed = Rng(s_.cfg.seed, key).next();
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
