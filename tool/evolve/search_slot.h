// Inside the search: one slot of a generation. It picks a parent in its island's archive and
// inspirations beside it, asks the LLM for a child (or a seed), has it evaluated, and asks for
// repairs of what failed, up to SearchConfig::repair_attempts; every LLM call is stored under the
// attempt's key first, so a resumed run replays it instead of paying again.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evolve/search_evaluate.h"
#include "evolve/search_state.h"
#include "llm/llm.h"

namespace kevo::evolve::detail {

// The {{error}} of a repair prompt for the failed attempt: "STATUS: FEEDBACK". Throws
// std::logic_error (a bug in the search) when there is nothing to fix: an empty error text, a
// duplicate or a candidate that was not judged.
std::string repair_error(const store::Program& failed);
// The {{tried}} of a mutation prompt: the approaches in the island's archive.
std::string tried_text(const Island& island);

class SlotRunner {
public:
    SlotRunner(RunState& state, EvaluationPipeline& pipeline, llm::Provider& provider)
        : s_(state), pipeline_(pipeline), provider_(provider) {}
    // Throws Stopped when the run must stop (the slot is then replayed on resume).
    SlotResult run(const Slot& slot);

private:
    // What a slot starts from, decided before its first LLM call.
    struct Plan {
        std::optional<Island> island;  // a snapshot: other slots may be changing the islands (steady state)
        std::optional<store::Program> parent;
        std::vector<store::Program> inspirations;
        bool diff = false, initial = false, translate = false;
        std::string kind;     // "initial", "mutation" or "seed"
        std::string backend;  // the island's
    };
    // The conversation of the current attempt and what its SEARCH/REPLACE edits apply to.
    struct Request {
        std::map<std::string, std::string> vars;
        std::vector<llm::Message> messages;
        std::string edit_base;
    };
    Plan make_plan(const Slot& slot, Rng& rng);
    void pick_parent(Plan& plan, Rng& rng);
    Request first_request(const Plan& plan);
    store::Program attempt(const Slot& slot, const Plan& plan, int attempt, const Request& request, int64_t previous_id);
    void ask_repair(const Plan& plan, const store::Program& failed, Request& request);

    store::LlmCall llm_call(const std::string& key, const std::string& kind, const std::vector<llm::Message>& messages);
    llm::ChatResponse send(const llm::ChatRequest& req);
    std::string inspirations_text(const std::vector<store::Program>& insp) const;
    std::map<std::string, std::string> base_vars(const std::string& backend) const;
    std::string island_backend(int island) const;  // the backend an island writes in
    std::vector<llm::Message> messages(const std::string& templ, const std::map<std::string, std::string>& vars) const;

    RunState& s_;
    EvaluationPipeline& pipeline_;
    llm::Provider& provider_;
};

}  // namespace kevo::evolve::detail
