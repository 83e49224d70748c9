// The search's persistent state: every program with its lineage and validation result, every LLM
// request and reply with the tokens and money it cost, the run's configuration, the islands'
// archives at each committed generation and the run's history.
//
// The interface is a handful of record-level operations, each atomic on its own, implemented by
// the embedded SQLite backend (sqlite_store.cpp) and by a Redis backend (redis_store.cpp: hashes,
// Lua scripts and MULTI/EXEC) for runs that span machines. Implementations are thread-safe.
//
// Crash safety: every call that returns has committed its write; a process killed at any moment
// loses only the operation in progress.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/named_enum.h"

namespace kevo::store {

// A program's status: the evaluator's verdict (KEVO_VERDICT_LIST, kevo::Status's names in its order)
// or what the search wrote instead of one. Its name is what a state stores (the SQLite column, the
// Redis field: the same names in states of every version) and what report, serve and --json show.
#define KEVO_PROGRAM_STATUS_LIST(X)                                                        \
    KEVO_VERDICT_LIST(X)                                                                   \
    X(pending)    /* claimed; its evaluation had not ended (a restart evaluates it) */    \
    X(duplicate)  /* the same normalized source as an earlier program: not evaluated */   \
    X(no_code)    /* the model's reply held no usable kernel */                           \
    X(not_judged) /* the evaluator could not judge it, retries included */
enum class ProgramStatus { KEVO_PROGRAM_STATUS_LIST(KEVO_ENUM_VALUE) };
const char* program_status_name(ProgramStatus s);
// The status of that name; a name not in the list (a damaged state, or one a newer kernelevo wrote)
// is a UsageError that names it.
ProgramStatus parse_program_status(const std::string& name);
void to_json(nlohmann::json& j, ProgramStatus s);  // by its name
std::ostream& operator<<(std::ostream& os, ProgramStatus s);

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
    ProgramStatus status = ProgramStatus::pending;
    double speedup = 0;
    std::string feedback;            // what a repair prompt shows (compile log, first mismatch, timings)
    nlohmann::json details;          // the full validation result
    int64_t llm_call_id = 0;         // the reply this source came from (0: none)
    double created = 0;              // unix time
    bool ok() const { return status == ProgramStatus::ok; }
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

// One request written to a Batch API input file (--llm-batch): the record of which request went
// into which batch file. Its reply, once imported, is the LLM call with the same key; a request
// whose batch line failed may go into a later batch (a new record, another custom_id).
struct BatchRequest {
    std::string custom_id;           // unique; its id in the file: "b<batch>:<key>"
    std::string key;                 // the LLM call it answers
    int batch = 0;                   // 1, 2, ...: the run's batch files in order
    std::string file;                // the input file it was written to
    std::string kind;                // "seed" | "mutation" | "repair"
    nlohmann::json request;          // llm::request_json() of the request
    int64_t reserved_tokens = 0;     // what the budget holds for it until its reply is in
    double reserved_cost_usd = 0;
    std::string error;               // "": waiting or answered; else why its batch line failed
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
    // Inserts the call; returns its id. The budget spent grows with it. When a call with that key is
    // stored already (a second writer got there first), writes nothing and returns the stored call's
    // id: the caller reads that call back with find_llm_call() and uses it, never a second copy.
    // `inserted` (when given) says which: true when `call` itself was stored (no need to read it back).
    virtual int64_t add_llm_call(const LlmCall& call, bool* inserted = nullptr) = 0;
    virtual Spent spent() = 0;
    virtual std::vector<LlmCall> llm_calls() = 0;  // by id

    // Atomically: the requests of one batch file (their custom_ids must be new).
    virtual void add_batch(const std::vector<BatchRequest>& requests) = 0;
    virtual std::vector<BatchRequest> batch_requests() = 0;  // by batch, then custom_id
    // Records that the request's batch line failed (it is then free to be requested again).
    virtual void fail_batch_request(const std::string& custom_id, const std::string& error) = 0;
    // Atomically, all of it or nothing: what one import of Batch API replies adds, the LLM calls
    // (keys must be new) and the errors of the requests whose lines failed (custom_id, error).
    virtual void import_batch_replies(const std::vector<LlmCall>& calls,
                                      const std::vector<std::pair<std::string, std::string>>& failed) = 0;

    virtual std::optional<Program> find_program(const std::string& key) = 0;
    virtual std::optional<Program> get_program(int64_t id) = 0;
    // Atomically: when another program (different key, not itself a duplicate) already has
    // program.norm_hash, returns the earliest such program and writes nothing; otherwise inserts
    // (or replaces, same key) `program` and returns it with its id. (Duplicates are stored with the
    // hash they duplicate; skipping them lets a resumed slot re-claim its own pending program.)
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

// Where a store lives, parsed from a --state argument:
//   PATH | sqlite:PATH                                   an SQLite file (the default)
//   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME]  a Redis server (default port 6379, DB 0,
//                                                        prefix "kernelevo")
// Every key of a Redis run starts with "{NAME}:" (a hash tag), so several runs share one server.
// The password, from the URL or else $KERNELEVO_REDIS_PASSWORD, is registered with
// register_secret() and never shown by display().
struct StoreLocation {
    bool redis = false;
    std::string path;                // SQLite file
    std::string host = "localhost";  // Redis
    int port = 6379, db = 0;
    std::string prefix = "kernelevo";
    std::string user, password;
    // "PATH" or "redis://HOST:PORT/DB?prefix=NAME" (no password): for messages.
    std::string display() const;
    // The prefix of every key of this run: "{NAME}:".
    std::string key_prefix() const { return "{" + prefix + "}:"; }
};
// Throws UsageError for a malformed location (the message never contains the password).
StoreLocation parse_store_location(const std::string& location);

// Whether this build has the Redis backend (hiredis was found at configure time).
bool redis_supported();

// Opens (creating when missing) a store. SQLite: WAL journal, synchronous commits. Redis: one
// connection; each operation is one Lua script or MULTI/EXEC, hence atomic across machines.
// Throws UsageError when it cannot be opened or reached (naming the file or host:port) or is not
// a KernelEvo state.
//
// The tool's own texts (metadata such as the command line and the stop reason, events, error
// messages, batch file names) pass through kevo::redact() first, whatever the backend; data
// (requests, replies, model names, sources, feedback, validation details, island states) is stored
// byte for byte, never altered: a secret's text in a model's reply is part of the kernel.
//
// An existing file is read first, without writing: an empty file, a damaged one ("malformed
// database", SQLite's reason), another application's database ("not a KernelEvo state: it has
// tables ...") or another schema version is a UsageError naming the file, and the file stays byte
// for byte as it was, whatever the access. Only a missing file is created (whole: built under a
// temporary name, then linked into place).
// Access::read_only (kernelevo report) never creates, converts or adds tables to anything: a
// missing file is a UsageError too; writes through the store fail. (A Redis state is read without
// writes once its metadata exists: check store_exists().)
// Opening takes no writer lease: a search takes one first (store/writer.h).
enum class Access { read_write, read_only };
std::unique_ptr<Store> open_store(const std::string& location, Access access = Access::read_write);

// The content check above, done once at a search's start-up (issue 36): check_state() checks an
// existing SQLite state as open_store() would (a UsageError the same way) and returns the file's
// identity; open_store() and remove_store() given it do not read the file again while the file and
// its WAL have that identity (device, inode, size, modification time), and check it again otherwise.
// Nothing to check (no file, a Redis state): an empty StateCheck, which changes nothing.
struct StateCheck {
    std::string path;      // the checked file (empty: none)
    std::string identity;  // what it was when checked
};
StateCheck check_state(const std::string& location);
std::unique_ptr<Store> open_store(const std::string& location, Access access, const StateCheck& checked);
// The same, at a parsed location (its password, say, supplied by the caller).
std::unique_ptr<Store> open_store(const StoreLocation& where, Access access, const StateCheck& checked = {});
// How many times this process has read a state file's content to check it (tests, diagnostics).
int64_t state_content_checks();
// Whether a state exists there (an SQLite file, or the run's metadata key on the Redis server).
bool store_exists(const std::string& location);
bool store_exists(const StoreLocation& where);
// Deletes the state there (the SQLite file with its WAL and SHM files, or every key of the run's
// prefix on the Redis server but its writer lease); nothing else is touched: a file that is not a
// KernelEvo state is refused as open_store() refuses it.
void remove_store(const std::string& location, const StateCheck& checked = {});

}  // namespace kevo::store
