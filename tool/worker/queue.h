// The validation queue on a Redis server: jobs travel through Redis Streams (one stream per kind
// and GPU architecture, read through one consumer group), results are written once, compiled
// objects travel by content hash, workers heartbeat. Used by `kernelevo search --workers`
// (RemoteEvaluator), `kernelevo worker` and `kernelevo serve`.
//
// Key layout, Q = "{NAME}queue:" (NAME: the URL's prefix, default "kernelevo"; Q never starts with
// a state store's "{NAME}:", so `search --fresh` on the same server leaves the queue alone):
//   Q compile:<arch>      stream  compile jobs  (field job = job id)      group "workers"
//   Q run:<arch>          stream  check-and-time jobs                      group "workers"
//   Q job:<id>            hash    spec (JSON), stream, state (queued|running|done), attempts,
//                                 worker, workers (who started it, comma-separated), submitted,
//                                 started, finished
//   Q result:<id>         string  the result (JSON), written once: a job done twice counts once
//   Q waiters:<id>        set     clients waiting for the result
//   Q reply:<client>      list    ids of finished jobs, one list per waiting client (BLPOP)
//   Q obj:<sha256>        string  a compiled shared object (expires after a day)
//   Q task:<hash>         hash    task (canonical JSON), reference (its source), name
//   Q worker:<name>       string  the worker's status (JSON), rewritten at every heartbeat
//   Q workers             set     worker names
//   Q dead                stream  dead-lettered jobs: job, reason
//   Q recent              list    the last 500 finished job ids
//   Q stats               hash    submitted, done, duplicate_results, dead
//   Q runs                hash    state location (display form) -> the search's {task, arch, state, ...}
//
// A job's id is the hash of everything that determines its result (kind, architecture, task and
// reference hashes, source or object, options), so submitting the same job again — e.g. by a search
// restarted after kill -9 — returns the stored result or joins the queued job.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"
#include "task/task.h"

namespace kevo::store::redis { class Connection; }

namespace kevo::worker {

// What a job asks for.
struct JobSpec {
    std::string kind;            // "compile" (nvcc, CPU) | "run" (check and time on a GPU)
    std::string arch;            // "sm_90"
    std::string task_hash;       // Task::hash() of a task published with publish_task()
    std::string reference_hash;  // Task::reference_hash()
    std::string source;          // the candidate's source
    std::string object_sha256;   // run: the compiled object in the queue (empty: the GPU worker compiles)
    nlohmann::json options = nlohmann::json::object();  // validator options (timeout_s, timing_trials, ...)
    // 0, or how many times this same run was answered "not judged" (a failure outside the kernel:
    // the GPU's memory taken by others) before: part of the id, so that the search's own re-run is a
    // new job and not the stored verdict of the old one.
    int rerun = 0;
    // run: null, or the confirmation of a result that passed ({"first": its ValidationResult JSON,
    // "agree": a fraction}): the worker then runs Validator::confirm (fresh sandbox, new seeds, the
    // reference measured again). Part of the id: never answered by the stored verdict of the run.
    nlohmann::json confirm;
    nlohmann::json to_json() const;
    static JobSpec from_json(const nlohmann::json& j);
    std::string id() const;      // content hash of the spec
};

// A job a worker took from a stream.
struct Claimed {
    std::string stream, entry, id;
    JobSpec spec;
    int attempts = 0;            // how many times a worker started it, this one included
    std::string workers;         // who started it before (comma-separated)
    bool reclaimed = false;      // taken over from a worker that died or stalled
    double queued_s = 0;         // from queued to started (by the Redis server's clock)
};

const char* const kGroup = "workers";

class Queue {
public:
    // url: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME], as for --state. Connects.
    // Throws UsageError when it is malformed or the server cannot be reached.
    explicit Queue(const std::string& url);
    ~Queue();
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;

    const std::string& display() const { return display_; }  // the URL without the password
    const std::string& key_prefix() const { return q_; }
    static std::string stream_name(const std::string& kind, const std::string& arch) { return kind + ":" + arch; }

    // Blocking calls (next(), wait_replies()) hold this queue's single connection while they
    // wait: give each blocking thread its own Queue.

    // ---- the search's side ----
    // Makes the task (its canonical JSON, the reference's source, and the files beside the task
    // that it names by a relative path: reference.arg, e.g. an imported task's model.pt, and inputs
    // read from files, e.g. its weights) available to workers. The files go as objects by content
    // hash; one over kMaxTaskFileBytes is refused (UsageError).
    void publish_task(const Task& task);
    static constexpr uint64_t kMaxTaskFileBytes = 512ull << 20;  // a Redis string's limit
    // Queues a job unless its result exists; `client` (may be empty) is told on its reply list when
    // it finishes. Returns the stored result when there is one already.
    std::optional<nlohmann::json> submit(const JobSpec& spec, const std::string& client);
    std::optional<nlohmann::json> result(const std::string& id);
    // Ids of jobs finished for `client`, waiting up to timeout_s for the first (BLPOP).
    std::vector<std::string> wait_replies(const std::string& client, double timeout_s);

    // ---- objects by content hash (untrusted bytes: the reader verifies) ----
    std::string put_object(const std::string& bytes, int64_t ttl_s = 86400);  // returns its sha256
    // The object's bytes, or nullopt when missing; throws UsageError when its bytes do not hash to `sha256`.
    std::optional<std::string> get_object(const std::string& sha256);

    // ---- the worker's side ----
    // The task's JSON and reference source (nullopt when never published).
    std::optional<std::pair<nlohmann::json, std::string>> task(const std::string& hash);
    // The files published with the task: [{"path" (relative, as the task names it), "sha256",
    // "bytes"}] (empty when none, or for a task published before files travelled).
    nlohmann::json task_files(const std::string& hash);
    void ensure_group(const std::string& stream);
    // The next new job of these streams (tried in order without blocking; then blocks up to
    // block_ms on all of them: a job that came in on a later stream meanwhile is held and
    // returned by the next call). Counts the start (attempts).
    std::optional<Claimed> next(const std::vector<std::string>& streams, const std::string& consumer, int block_ms);
    // A job whose worker has not touched it for lease_ms (died, stalled), taken over (XAUTOCLAIM).
    std::optional<Claimed> reclaim(const std::vector<std::string>& streams, const std::string& consumer, int64_t lease_ms);
    // Renews the lease on a job in progress.
    void touch(const Claimed& job, const std::string& consumer);
    // Writes the result once and acknowledges the job; false when a result was there already
    // (the job was done twice: counted once). `dead_reason` non-empty: dead-letters it too.
    bool complete(const Claimed& job, const nlohmann::json& result, const std::string& worker,
                  const std::string& dead_reason = "");
    // Worker status (JSON with at least name), rewritten at every heartbeat.
    void heartbeat(const nlohmann::json& status);
    void remove_worker(const std::string& name);

    // ---- for the server page and tests ----
    std::vector<nlohmann::json> workers();      // every worker's last status, with age_s
    nlohmann::json stats();                     // counters, stream lengths and pending counts
    std::vector<nlohmann::json> recent_jobs(int n);  // last finished jobs (id, kind, state, worker, times, status)
    std::vector<nlohmann::json> dead_letters(int n);
    std::optional<nlohmann::json> job(const std::string& id);  // the job's hash as JSON
    std::vector<std::string> streams();         // every job stream name ("run:sm_90", ...)
    // Searches that validate through this queue, so `kernelevo serve` can show them.
    void register_run(const nlohmann::json& run);  // needs "state"
    std::vector<nlohmann::json> runs();
    const store::StoreLocation& location() const { return where_; }

private:
    std::optional<Claimed> start(const std::string& stream, const std::string& entry, const std::string& id,
                                 const std::string& consumer, bool reclaimed);
    store::StoreLocation where_;
    std::string q_, display_;
    std::mutex mu_;
    std::unique_ptr<store::redis::Connection> conn_;
    std::vector<Claimed> held_;  // claimed by a blocking read together with another job
};

double now_unix();

}  // namespace kevo::worker
