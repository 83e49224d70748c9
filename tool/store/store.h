// The search's persistent state: every program with its lineage and validation result, every LLM
// request and reply with the tokens and money it cost, the run's configuration, the islands'
// archives at each committed generation and the run's history.
//
// The interface is a handful of record-level operations, each atomic on its own, so that a
// key-value backend (Redis: hashes + MULTI/EXEC or a Lua script for claim_program) can implement
// it as well as the embedded SQLite one. Implementations are thread-safe.
//
// Crash safety: every call that returns has committed its write; a process killed at any moment
// loses only the operation in progress.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kevo::store {

// One candidate kernel: a mutation, a repair attempt, the seed or the user's initial kernel.
struct Program {
    int64_t id = 0;                  // assigned by the store
    std::string key;                 // unique slot key, e.g. "g3.i1.c0.a2" (generation, island, child, attempt)
    int generation = 0, island = 0;
    int64_t parent_id = 0;           // 0: none; for a repair attempt, the program it repairs
    std::string origin;              // "initial" | "seed" | "mutation" | "repair"
    int attempt = 0;                 // 0: the first try, 1..N: repair attempts
    std::string source;
    std::string norm_hash;           // hash of the normalized source (duplicate detection)
    std::string status = "pending";  // "pending", a validator status ("ok", "compile_error", ...), "duplicate", "no_code"
    double speedup = 0;
    std::string feedback;            // what a repair prompt shows (compile log, first mismatch, timings)
    nlohmann::json details;          // the full validation result
    int64_t llm_call_id = 0;         // the reply this source came from (0: none)
    double created = 0;              // unix time
    bool ok() const { return status == "ok"; }
};

// One chat request and its reply.
struct LlmCall {
    int64_t id = 0;
    std::string key;                 // unique; the same key on resume means "already paid for"
    std::string kind;                // "seed" | "mutation" | "repair"
    nlohmann::json request;          // messages, model, temperature
    std::string reply, model;
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0, latency_s = 0;
    double created = 0;
};

struct Spent {
    int64_t prompt_tokens = 0, completion_tokens = 0, calls = 0;
    double cost_usd = 0;
    int64_t tokens() const { return prompt_tokens + completion_tokens; }
};

// A row of the run's history, written when a generation is committed.
struct Generation {
    int generation = 0;
    double best_speedup = 0;
    int64_t best_program = 0;
    int64_t ok = 0, failed = 0;      // cumulative candidate counts
    int64_t tokens = 0;              // cumulative
    double cost_usd = 0, elapsed_s = 0;
};

struct Event {
    int generation = 0;
    std::string kind;                // "migration" | "restart" | "stop" | ...
    nlohmann::json detail;
};

class Store {
public:
    virtual ~Store() = default;

    // Run-level values (configuration, stop reason, elapsed time).
    virtual std::optional<nlohmann::json> get_meta(const std::string& key) = 0;
    virtual void put_meta(const std::string& key, const nlohmann::json& value) = 0;

    virtual std::optional<LlmCall> find_llm_call(const std::string& key) = 0;
    // Inserts the call (key must be new); returns its id. The budget spent grows with it.
    virtual int64_t add_llm_call(const LlmCall& call) = 0;
    virtual Spent spent() = 0;
    virtual std::vector<LlmCall> llm_calls() = 0;  // by id

    virtual std::optional<Program> find_program(const std::string& key) = 0;
    virtual std::optional<Program> get_program(int64_t id) = 0;
    // Atomically: when another program (different key) already has program.norm_hash, returns that
    // program and writes nothing; otherwise inserts (or replaces, same key) `program` and returns it
    // with its id.
    virtual Program claim_program(Program program) = 0;
    // Inserts or replaces the program with the same key; returns its id.
    virtual int64_t put_program(const Program& program) = 0;
    virtual std::vector<Program> programs() = 0;  // by id

    // Atomically: the islands' states as of the end of `g.generation`, its history row and events.
    virtual void commit_generation(const Generation& g, const std::vector<nlohmann::json>& islands,
                                   const std::vector<Event>& events) = 0;
    // The last committed generation (-1: none) and the islands' states as of it.
    virtual int last_generation() = 0;
    virtual std::vector<nlohmann::json> islands() = 0;
    virtual std::vector<Generation> history() = 0;
    virtual std::vector<Event> events() = 0;
};

// Opens (creating when missing) a store: "PATH" or "sqlite:PATH" is an SQLite file (WAL journal,
// synchronous commits). Throws UsageError when it cannot be opened or is not a KernelEvo state.
std::unique_ptr<Store> open_store(const std::string& location);

}  // namespace kevo::store
