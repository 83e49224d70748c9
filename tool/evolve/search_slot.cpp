#include "evolve/search_slot.h"

#include <algorithm>
#include <stdexcept>

#include "evolve/prompt_text.h"
#include "llm/reply.h"

namespace kevo::evolve::detail {

SlotResult SlotRunner::run(const Slot& slot) {
    Rng rng(s_.cfg.structure.seed, slot.key);
    const Plan plan = make_plan(slot, rng);
    Request request = first_request(plan);
    SlotResult result;
    int64_t previous_id = plan.parent ? plan.parent->id : 0;
    for (int n = 0; n <= s_.cfg.evolution.repair_attempts; ++n) {
        store::Program p = attempt(slot, plan, n, request, previous_id);
        if (p.ok()) {
            result.child = p;
            result.feedback = p.feedback;
            if (auto tuned = pipeline_.tune_program(p, p.key + ".tune")) {
                result.child = tuned;
                result.feedback = tuned->feedback;
            }
            break;
        }
        // Nothing for the model to fix: a duplicate (of an earlier program or of a sibling) is
        // dropped, and a candidate the evaluator could not judge (after its retries) is left as
        // not judged; no request is spent on either.
        if (p.status == store::ProgramStatus::duplicate || not_judged(p)) break;
        result.feedback = p.feedback;
        if (n == s_.cfg.evolution.repair_attempts) break;
        ask_repair(plan, p, request);
        previous_id = p.id;
    }
    result.completed = true;
    return result;
}

SlotRunner::Plan SlotRunner::make_plan(const Slot& slot, Rng& rng) {
    Plan plan;
    if (slot.generation > 0) {
        std::lock_guard<std::mutex> lock(s_.islands_mu);
        plan.island = s_.islands[slot.island];
    }
    if (plan.island && !plan.island->archive.empty()) pick_parent(plan, rng);
    const SearchConfig& cfg = s_.cfg;
    plan.diff = plan.parent && (cfg.evolution.mode == "diff" || (cfg.evolution.mode == "mixed" && rng.uniform() < cfg.evolution.diff_share));
    plan.initial = slot.generation == 0 && !cfg.structure.initial_source.empty();
    plan.kind = plan.initial ? "initial" : plan.parent ? "mutation" : "seed";
    plan.backend = island_backend(slot.island);
    // A parent in another language (a migrant, or the seed on a CUDA island of a "both" run)
    // is translated: a full rewrite in this island's backend.
    plan.translate = plan.parent && backend_of(plan.parent->source) != plan.backend;
    if (plan.translate) plan.diff = false;
    return plan;
}

// The parent (fitness-proportional) and the inspirations: the island's fastest other program,
// then the most different ones.
void SlotRunner::pick_parent(Plan& plan, Rng& rng) {
    std::vector<Elite> elites = plan.island->archive.elites();
    std::vector<double> speedups;
    for (const Elite& e : elites) speedups.push_back(e.speedup);
    size_t pick = select_index(speedups, s_.cfg.evolution.temperature, rng.uniform());
    plan.parent = s_.store.get_program(elites[pick].id);
    std::vector<store::Program> programs;
    std::vector<std::string> sources;
    std::vector<double> speeds;
    int parent_index = -1;
    for (size_t i = 0; i < elites.size(); ++i) {
        auto p = i == pick ? plan.parent : s_.store.get_program(elites[i].id);
        if (!p) continue;
        if (i == pick) parent_index = static_cast<int>(programs.size());
        programs.push_back(*p);
        sources.push_back(p->source);
        speeds.push_back(p->speedup);
    }
    for (size_t i : pick_inspirations(sources, speeds, parent_index, s_.cfg.evolution.inspirations))
        plan.inspirations.push_back(programs[i]);
}

// A mutation of the parent (full or diff, or a translation), or a seed; nothing for --initial.
SlotRunner::Request SlotRunner::first_request(const Plan& plan) {
    Request r;
    r.vars = base_vars(plan.backend);
    if (const auto& parent = plan.parent) {
        const std::string& backend = plan.backend;
        r.vars["parent_code"] = parent->source;
        r.vars["parent_fence"] = fence_of(backend_of(parent->source));
        r.vars["parent_metrics"] = "speedup " + fixed(parent->speedup, 3) + "x over " + s_.cfg.evolution.speedup_label;
        if (double f = sol_fraction_of(parent->details); f > 0)
            r.vars["parent_metrics"] += ", " + fixed(100 * f, 0) + "% of the speed of light";
        r.vars["inspirations"] = inspirations_text(plan.inspirations);
        r.vars["tried"] = tried_text(*plan.island);
        std::string fb = "Current kernel: " + parent->feedback;
        if (plan.translate) {
            const std::string from = language_named(backend_of(parent->source)).display_name();
            const std::string to = language_named(backend).display_name();
            fb = "The current kernel is written in " + from + "; write the " + to + " version of it (the same algorithm " +
                 "where it fits), in the " + to + " kernel format above.\n\n" + fb;
        }
        if (!plan.island->last_feedback.empty() && plan.island->last_feedback != parent->feedback)
            fb += "\n\nMost recent candidate on this island: " + plan.island->last_feedback;
        r.vars["feedback"] = fb;
        r.messages = messages(plan.diff ? "mutate_diff" : "mutate_full", r.vars);
        if (plan.diff) r.edit_base = parent->source;
    } else if (!plan.initial) {
        r.messages = messages("seed", r.vars);
    }
    return r;
}

// Attempt `n` of the slot: replayed from the store when a restarted process did it already,
// else the --initial kernel or the LLM's reply, evaluated.
store::Program SlotRunner::attempt(const Slot& slot, const Plan& plan, int n, const Request& request, int64_t previous_id) {
    std::string key = slot.key + ".a" + std::to_string(n);
    auto existing = s_.store.find_program(key);
    // done before a restart of the process: replay it
    if (existing && existing->status != store::ProgramStatus::pending) return *existing;
    store::Program p;
    p.key = key;
    p.generation = slot.generation;
    p.island = slot.island;
    p.parent_id = previous_id;
    p.origin = n == 0 ? plan.kind : "repair";
    p.attempt = n;
    if (n == 0 && plan.initial) {
        p.source = s_.cfg.structure.initial_source;
    } else {
        store::LlmCall call = llm_call(key, n == 0 ? plan.kind : "repair", request.messages);
        p.llm_call_id = call.id;
        try {
            p.source = llm::candidate_from_reply(call.reply, reply_languages(),
                                                 request.edit_base.empty() ? nullptr : &request.edit_base);
        } catch (const llm::ReplyError& e) {
            p.status = store::ProgramStatus::no_code;
            p.feedback = std::string("Your reply could not be used: ") + e.what();
        }
    }
    pipeline_.finish(p);
    return p;
}

std::string repair_error(const store::Program& failed) {
    const std::string status = store::program_status_name(failed.status);
    if (failed.status == store::ProgramStatus::duplicate || not_judged(failed))
        throw std::logic_error("internal: a repair prompt for " + failed.key + ", which is no fault of the kernel (" +
                               status + ")");
    if (failed.feedback.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::logic_error("internal: a repair prompt for " + failed.key + " (" + status +
                               ") without an error text");
    return status + ": " + failed.feedback;
}

// Asks for the smallest fix of what failed (or, for an unusable reply, of what it started from).
void SlotRunner::ask_repair(const Plan& plan, const store::Program& p, Request& r) {
    std::string failing =
        p.source.empty() ? (r.edit_base.empty() && plan.parent ? plan.parent->source : r.edit_base) : p.source;
    // The repair keeps the failing code's backend (or the island's, when there is no code).
    for (auto& [k, v] : base_vars(failing.empty() ? plan.backend : backend_of(failing))) r.vars[k] = v;
    r.vars["code"] = failing.empty() ? "(no kernel yet)" : failing;
    r.vars["error"] = repair_error(p);
    r.messages = messages("repair", r.vars);
    r.edit_base = failing;
}

store::LlmCall SlotRunner::llm_call(const std::string& key, const std::string& kind, const std::vector<llm::Message>& messages) {
    if (auto done = s_.store.find_llm_call(key)) return *done;  // paid for already
    s_.check_stop();
    llm::ChatRequest req;
    req.model = s_.cfg.requests.model;
    req.messages = messages;
    req.temperature = s_.cfg.requests.temperature;
    req.max_tokens = s_.cfg.requests.max_tokens;
    req.seed = static_cast<int64_t>(Rng(s_.cfg.structure.seed, key).next() >> 33);
    // Batch mode: the request waits in a batch file, or goes into the next one.
    if (s_.batch->waiting(key)) throw Stopped{};
    if (s_.cfg.batch.enabled) {
        s_.batch->defer(key, kind, req);  // (not when the budget cannot hold it: then the run stops for it)
        throw Stopped{};
    }
    llm::ChatResponse resp = send(req);
    store::LlmCall call;
    call.key = key;
    call.kind = kind;
    call.request = nlohmann::json::parse(llm::request_json(req));
    call.reply = resp.content;
    call.model = resp.model;
    call.prompt_tokens = resp.usage.prompt_tokens;
    call.completion_tokens = resp.usage.completion_tokens;
    call.cost_usd = resp.usage.cost_usd;
    call.latency_s = resp.latency_s;
    bool ours = false;
    call.id = s_.store.add_llm_call(call, &ours);
    // The stored call is the one that stands: ours, or one a second writer stored first under
    // this key (the store keeps the first and never fails on the second), read back only then.
    if (!ours)
        if (auto stored = s_.store.find_llm_call(key)) call = *stored;
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.progress.tokens += call.prompt_tokens + call.completion_tokens;
    s_.progress.cost_usd += call.cost_usd;
    return call;
}

// The provider's reply within the budget (its reservation settled); any failure stops the run.
llm::ChatResponse SlotRunner::send(const llm::ChatRequest& req) {
    llm::ChatResponse resp;
    try {
        llm::Reservation reservation = s_.budget->reserve(req);
        try {
            resp = provider_.chat(req);
        } catch (llm::TruncatedReply& e) {
            resp = e.response;  // paid for; extraction will tell the model what went wrong
        }
        resp.usage = s_.budget->settle(reservation, resp.usage);
    } catch (const llm::BudgetExceeded& e) {
        if (s_.request_stop(StopReason::budget) && s_.cfg.log) s_.cfg.log(e.what());
        throw Stopped{};
    } catch (const llm::Cancelled&) {
        s_.request_stop(StopReason::interrupted);
        throw Stopped{};
    } catch (const llm::LlmError& e) {
        s_.request_stop(StopReason::llm_failed, e.what());
        throw Stopped{};
    }
    return resp;
}

std::string SlotRunner::inspirations_text(const std::vector<store::Program>& insp) const {
    if (insp.empty()) return "(none yet)";
    std::string out;
    for (const auto& p : insp)
        out += "### Kernel #" + std::to_string(p.id) + ": speedup " + fixed(p.speedup, 2) + "x, technique " +
               technique_of(p.source) + "\n\n```" + fence_of(backend_of(p.source)) + "\n" + p.source + "\n```\n\n";
    return out;
}

// {{tried}}: the island's archive, fastest first, one line per approach (its technique and speed).
std::string tried_text(const Island& island) {
    std::vector<Elite> elites = island.archive.elites();
    std::stable_sort(elites.begin(), elites.end(), [](const Elite& a, const Elite& b) { return a.speedup > b.speedup; });
    std::string out;
    const size_t shown = std::min<size_t>(elites.size(), 12);
    for (size_t i = 0; i < shown; ++i)
        out += "- kernel #" + std::to_string(elites[i].id) + ": technique " + elites[i].technique + ", " +
               fixed(elites[i].speedup, 2) + "x\n";
    if (elites.size() > shown) out += "- and " + std::to_string(elites.size() - shown) + " slower ones\n";
    if (out.empty()) out = "(none yet)\n";
    return out + "Take a different approach from these, or a clear step beyond one of them: a kernel identical to an "
                 "earlier one is dropped without being evaluated.";
}

std::map<std::string, std::string> SlotRunner::base_vars(const std::string& backend) const {
    const CandidateLanguage& l = language_named(backend);
    return {{"task_name", s_.task.name}, {"task", s_.task_text}, {"reference", s_.reference},
            {"abi", s_.prompts.text(l.prompt_template())}, {"gpu", s_.gpu_text}, {"speed_of_light", s_.limits_text},
            {"to_beat", s_.cfg.evolution.to_beat}, {"language", l.display_name()}, {"fence", fence_of(backend)}};
}

std::string SlotRunner::island_backend(int island) const {
    if (s_.cfg.structure.backend == "both") return mixed_language(island);
    return s_.cfg.structure.backend;
}

std::vector<llm::Message> SlotRunner::messages(const std::string& templ, const std::map<std::string, std::string>& vars) const {
    return {{"system", s_.prompts.text("system")}, {"user", s_.prompts.render(templ, vars)}};
}

}  // namespace kevo::evolve::detail
