// make_evaluators(): the one place a search picks its evaluator (the queue's or the local GPU's).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "common/error.h"
#include "common/text.h"
#include "profile/profile.h"
#include "store/store.h"
#include "validate/validator_evaluator.h"
#include "workflows/search.h"
#include "workflows/search_parts.h"
#ifdef KEVO_WITH_WORKERS
#include "worker/remote_evaluator.h"
#endif

namespace kevo::workflows {

namespace {
void log_line(const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; }

#ifdef KEVO_WITH_WORKERS
Evaluators remote_evaluators(const SearchArgs& a, const Task& task, const ValidateOptions& vo) {
    store::parse_store_location(a.workers);  // registers a Redis password before anything is printed
    auto remote = std::make_unique<worker::RemoteEvaluator>(a.workers, task, vo, log_line);
    worker::RemoteEvaluator* r = remote.get();
    Evaluators ev;
    ev.evaluator = std::move(remote);
    ev.register_run = [r](const std::string& state) { r->register_run(state); };
    ev.stop_when = [r](std::function<int()> stopping) { r->stop_when(std::move(stopping)); };
    ev.report_overhead = [r] {
        std::vector<double> o = r->overhead_ms(), w = r->queued_ms();
        if (o.empty() || w.size() != o.size()) return;
        std::sort(o.begin(), o.end());
        std::sort(w.begin(), w.end());
        std::fprintf(stderr, "kernelevo: queue overhead per job (submit to result, waiting for a free worker and the work excluded): "
                     "median %.1f ms, p90 %.1f ms over %zu jobs; waiting for a free worker: median %.0f ms, p90 %.0f ms\n",
                     o[o.size() / 2], o[o.size() * 9 / 10], o.size(), w[w.size() / 2], w[w.size() * 9 / 10]);
    };
    return ev;
}
#endif
}  // namespace

Evaluators make_evaluators(const SearchArgs& a, const Task& task, const ValidateOptions& vo, Validator& validator,
                           bool profile_best) {
    if (!a.workers.empty()) {
#ifdef KEVO_WITH_WORKERS
        return remote_evaluators(a, task, vo);
#else
        throw SettingError({settings::kWorkers}, "{request.workers}: this kernelevo was built without Redis support "
                                                         "(install libhiredis-dev and rebuild)");
#endif
    }
    auto local = std::make_unique<ValidatorEvaluator>(validator);
    local->log = log_line;
    if (profile_best) {  // new best kernels run once more, alone, under ncu (kernelevo-profile)
        local->profile_options = profile::profile_program_options();
        local->profile_command = [&task, program = profile::default_profile_program()](const CompileResult& c) {
            return profile::profile_program_command(program, c.library, task, static_cast<size_t>(task.timed_sets().front()));
        };
    }
    Evaluators ev;
    ev.evaluator = std::move(local);
    return ev;
}

}  // namespace kevo::workflows
