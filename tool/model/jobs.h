// The searches of a model's regions as child processes (the same kernelevo executable), at most N at
// once, each with its stdout and stderr in files; a Ctrl-C of the parent is passed on to them.
#pragma once
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "model/plan.h"

namespace kevo::model {

struct Job {
    std::vector<std::string> argv;  // argv[0]: an absolute path
    fs::path out_file;              // its stdout (truncated first)
    fs::path log_file;              // its stderr (appended to: a resumed search's log continues)
};

struct JobResult {
    bool started = false;
    std::string error;   // why it did not start
    int exit_code = -1;  // when it exited
    int signal = 0;      // when a signal ended it
    bool interrupted = false;  // it was running when the parent passed on a Ctrl-C
    double seconds = 0;
    std::string describe() const;  // "exit code 1", "signal 9 (Killed)", "did not start: ..."
};

struct JobEvents {
    std::function<void(size_t)> started;
    std::function<void(size_t, const JobResult&)> ended;
};

// Runs the jobs in order, at most `parallel` at once. Each child has its own process group, stdin
// from /dev/null, and the parent's environment (its LLM key included); it gets SIGTERM should the
// parent die. `interrupts` counts the parent's Ctrl-Cs (its SIGINT handler increments it): at the
// first no new job starts and every running one gets SIGINT (a search then stops after the work in
// flight, its state saved), at each further one again (a search then aborts its LLM requests).
// Returns a result per job; none for a job never started.
std::vector<std::optional<JobResult>> run_jobs(const std::vector<Job>& jobs, int parallel, const std::atomic<int>& interrupts,
                                               const JobEvents& events);

// The path of the running executable (/proc/self/exe).
fs::path self_executable();

// What one region's search did, from its exit and its --json summary (null when it printed none):
// done (it finished: generations, target, budget or time, with or without a kernel), stopped
// (interrupted, or waiting for Batch API replies: resumable) or failed (setup error, crash).
RunStatus region_status(const JobResult& r, const nlohmann::json& child_json);

}  // namespace kevo::model
