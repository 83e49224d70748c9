// confirm_and_cache(): the second judgement of a best through the Evaluator seam, then the cache.
#include "workflows/confirm.h"

#include "cache/cache.h"
#include "common/error.h"
#include "language/registry.h"

namespace kevo::workflows {

namespace {
// The first judgement as the seam carries it: the best's stored validation.
Evaluation first_of(const store::Program& best) {
    Evaluation e;
    e.status = Status::ok;
    const auto it = best.details.find("speedup");
    e.speedup = it != best.details.end() && it->is_number() ? it->get<double>() : best.speedup;
    e.details = best.details;
    return e;
}
}  // namespace

CacheOutcome confirm_and_cache(Evaluator& evaluator, const Task& task, const store::Program& best, const CacheRequest& req) {
    CacheOutcome out;
    nlohmann::json details = best.details;
    const CandidateLanguage& language = language::of_source(best.source);
    const bool generated = language.keeps_source();
    const bool confirming = evaluator.device().present;
    // A kernel in a language whose cache entry keeps its own source beside it (a .py) is
    // stored as the .cu generated from it (compiled before: served from the compile cache, here or
    // through the queue's stored result).
    CompileResult compiled;
    if (confirming || generated) compiled = evaluator.compile(best.source);
    if (generated && (!compiled.ok || compiled.generated_source.empty()))
        throw UsageError("the best kernel (program #" + std::to_string(best.id) + ", " + language.display_name() +
                         ") does not compile again here: " + compiled.log);
    if (!confirming) {
        out.not_confirmed = "no device to judge it again";
    } else if (!compiled.ok) {
        out.refused = "it does not compile again: " + compiled.log;
        return out;
    } else {
        Evaluation second = evaluator.confirm(compiled, first_of(best));
        if (second.ok()) {
            out.confirmed = true;
            details["confirmation"] = second.details.value("confirmation", nlohmann::json());
        } else if (second.status == Status::no_device) {
            out.not_confirmed = second.feedback.empty() ? "no verdict from the second judgement" : second.feedback;
        } else {
            out.refused = second.feedback;
            return out;
        }
    }
    cache::EntryMeta meta = cache::entry_from_validation(task, req.arch, details);
    meta.origin = req.origin;
    meta.model = req.model;
    meta.prompt_tokens = req.spent.prompt_tokens;
    meta.completion_tokens = req.spent.completion_tokens;
    meta.cost_usd = req.spent.cost_usd;
    cache::store_candidate(req.out, best.source, generated ? compiled : CompileResult{}, meta);
    out.written = true;
    out.source = cache::source_path(req.out, task.name, req.arch);
    return out;
}

}  // namespace kevo::workflows
