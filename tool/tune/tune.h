// Tuning a kernel's declared parameters without the LLM (Kernel Tuner-style).
//
// A kernel declares tunables with KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...) (kernelevo/abi.h). A
// variant is the source with each DEFAULT rewritten, so a variant, and the tuned kernel that gets
// cached, is one ordinary .cu file. Strategies:
//   grid    every combination (the default when the space has at most max_evals points)
//   random  max_evals distinct points drawn at random
//   tpe     a small Tree-structured Parzen Estimator: random points first, then points where the
//           density of the best quarter over the density of the rest is highest (default for
//           larger spaces)
// The default point is always evaluated first (the baseline). Variants compile in parallel
// (Evaluator::compile is thread-safe), runs happen one at a time, each as soon as its compile is done.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/setting_error.h"

#include <nlohmann/json.hpp>

#include "evaluate/evaluator.h"

namespace kevo::tune {

struct TuneError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Tunable {
    std::string name;
    int64_t default_value = 0;
    std::vector<int64_t> values;  // as listed (the default among them)
    size_t offset = 0, length = 0;  // where DEFAULT is written in the source
};

using Point = std::map<std::string, int64_t>;

// The tunables a source declares (outside comments and strings), in source order. Throws TuneError
// for a malformed declaration: a name used twice, a non-integer value, a default not in the list.
std::vector<Tunable> parse_tunables(const std::string& source);
// The source with each tunable's default replaced by point[name] (names not in `point` keep theirs).
std::string with_values(const std::string& source, const std::vector<Tunable>& tunables, const Point& point);
Point default_point(const std::vector<Tunable>& tunables);
uint64_t space_size(const std::vector<Tunable>& tunables);
// "BLOCK=256 UNROLL=4"
std::string point_text(const Point& point);

struct TuneOptions {
    std::string strategy = "auto";  // auto | grid | random | tpe
    int max_evals = 32;             // points evaluated at most (the default point included)
    uint64_t seed = 0;
    int compile_jobs = 0;           // compiles at once (0: the machine's cores)
};

struct Trial {
    Point point;
    Status status = Status::runtime_error;  // Evaluation::status
    double speedup = 0;  // the evaluator's fitness (0 unless ok)
    std::string feedback;
    nlohmann::json details;
    double compile_s = 0;
    double run_wall_s = 0;  // wall time of Evaluator::run for this point (0 when it did not compile)
};

// Where the tuner's time inside Evaluator::run goes, summed over the trials (from each evaluation's
// details: gpu_lock_wait_s, run_s (the judge's job), annotate_s); `other_s` is the rest (the compiled
// library's hash check, the job's set-up, reading the result back).
struct RunTimeSplit {
    int points = 0;  // evaluations run
    double wall_s = 0, lock_wait_s = 0, job_s = 0, annotate_s = 0, other_s = 0;
    void add(double wall, const nlohmann::json& details);
    nlohmann::json to_json() const;
    std::string text() const;  // "per point: 1.05 s wall = 0.50 s job + 0.01 s lock wait + ..."
};

struct TuneResult {
    std::vector<Tunable> tunables;
    std::string strategy;        // the one used ("grid" for auto on a small space, ...)
    uint64_t space = 0;
    std::vector<Trial> trials;   // in evaluation order; trials[0] is the default point
    int best = -1;               // index of the fastest correct trial (-1: none was correct)
    std::string best_source;     // the source with the best point's values as defaults
    double wall_s = 0, run_s = 0;  // whole tuning; time inside Evaluator::run
    RunTimeSplit split;            // run_s broken down
    const Trial* best_trial() const { return best >= 0 ? &trials[static_cast<size_t>(best)] : nullptr; }
    nlohmann::json to_json() const;
};

// Tunes `source`. Throws TuneError when it declares no tunable or options are invalid.
// `on_trial` is called after each evaluation (from the calling thread).
TuneResult tune(const std::string& source, Evaluator& evaluator, const TuneOptions& options,
                const std::function<void(const Trial&)>& on_trial = {});

}  // namespace kevo::tune
