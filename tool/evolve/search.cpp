#include "evolve/search.h"

#include <mutex>

#include "common/error.h"
#include "evolve/prompt_text.h"
#include "evolve/search_evaluate.h"
#include "evolve/search_generation.h"
#include "evolve/search_slot.h"
#include "evolve/search_state.h"

namespace kevo::evolve {

// The parts of a run, each with its own file: the shared state (search_state.h), the evaluation
// of candidates (search_evaluate.h), slots (search_slot.h) and generations (search_generation.h).
struct Search::Impl {
    detail::RunState state;
    detail::EvaluationPipeline pipeline;
    detail::SlotRunner runner;
    detail::Generations generations;

    Impl(const Task& t, SearchConfig c, Prompts p, llm::Provider& pr, Evaluator& ev, store::Store& st)
        : state(t, std::move(c), std::move(p), ev, st), pipeline(state), runner(state, pipeline, pr), generations(state, runner) {}

    SearchResult run() {
        state.load_or_init();
        if (state.cfg.evolution.steady) {
            detail::SteadyLoop(state, generations, runner).run();
        } else {
            generations.run_barrier();
        }
        return outcome();
    }

    // Why the run stopped, its best program and figures; the stop reason and time are stored.
    SearchResult outcome() {
        SearchResult result;
        if (std::lock_guard<std::mutex> lock(state.mu); state.stop.reason == StopReason::none)
            state.stop = Stop{state.batch->finish(result), ""};
        result.generations_committed = state.store.last_generation() + 1;
        {
            std::lock_guard<std::mutex> lock(state.mu);
            result.stop = state.stop.reason;
            result.stop_reason = state.stop.text();
            state.progress.elapsed_s = state.elapsed_before + state.invocation_s();
            result.progress = state.progress;
            if (state.best_id) result.best = state.store.get_program(state.best_id);
        }
        if (result.best)
            if (auto call = state.store.find_llm_call(result.best->key)) result.best_model = call->model;
        result.waste = waste_of(state.store);
        result.waste.wall_s = result.progress.elapsed_s;
        state.store.put_meta("elapsed_s", result.progress.elapsed_s);
        state.store.put_meta("stop_reason", result.stop_reason);
        state.store.put_meta("waste", result.waste.to_json());
        return result;
    }
};

Search::Search(const Task& task, SearchConfig config, Prompts prompts, llm::Provider& provider, Evaluator& evaluator,
               store::Store& store)
    : impl_(std::make_unique<Impl>(task, std::move(config), std::move(prompts), provider, evaluator, store)) {
    detail::RunState& s = impl_->state;
    s.reference = describe_reference(task);
    s.task_text = describe_task(task);
    s.arch = evaluator.arch();
    const DeviceInfo device = evaluator.device();
    s.gpu_text = describe_gpu(device, s.arch);
    s.limits_text = describe_limits(task, device, evaluator.measured_bandwidth_gbs(), s.arch);
}

Search::~Search() = default;

void Search::on_progress(std::function<void(const Progress&)> fn) { impl_->state.progress_fn = std::move(fn); }

SearchResult Search::run(const std::atomic<bool>* stop) {
    impl_->state.stop_flag = stop;
    return impl_->run();
}

}  // namespace kevo::evolve
