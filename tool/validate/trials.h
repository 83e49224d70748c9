// How many timed calls a shape set gets: the judge's stopping rule, kept apart from CUDA so that it
// can be tested against scripted timings. A set is timed in batches until its time's 95% interval
// is within the target (after a minimum), or the most trials ran, or the time budget is spent. A set
// whose time is still imprecise at the most trials may go on, up to `extend_factor` times as many,
// while its timing so far has cost under `extend_s` (off by default: see validate.h).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kevo {

// A set's time is the interquartile mean of its calls (the mean of the middle half): like the
// median it ignores the slow tail (a context switch, a clock change), but where a launch-bound
// kernel's times fall into two modes (as gelu_bias's 33x1001 set does on the H200, about 4.3 and
// 4.7 µs), the median flips between them from one validation to the next and the interquartile
// mean averages them; nor is it held to the event timer's 32 ns ticks. Measured over 6 validations
// (README): the fitness within 2.0% of its median with this time, 2.6% with the median.
struct TimingSummary {
    double time_us = 0;  // the interquartile mean: what speedups are computed from
    double median_us = 0, p10_us = 0, p90_us = 0, mean_us = 0, min_us = 0, spread = 0;
    double ci = 0;       // half-width of time_us's 95% interval, as a fraction of it (1 with fewer than 2 calls)
    size_t n = 0;
    nlohmann::json to_json() const;
};
// The interval is Tukey and McLaughlin's for a trimmed mean: the winsorized standard deviation over
// (1 - 2 x 0.25) sqrt(n), times 1.96.
TimingSummary summarize_times(std::vector<double> us);

struct TrialLimits {
    int min_trials = 20;     // the fewest before stopping early
    int max_trials = 100;    // the most, unless extended
    double target_ci = 0.005;
    double budget_s = 10;    // the set's whole timing
    double extend_s = 0;     // > 0: an imprecise set may exceed max_trials while its timing cost less than this
    int extend_factor = 10;  // ... up to this many times max_trials
    int most() const { return min_trials > max_trials ? min_trials : max_trials; }  // the most, unextended
};

enum class TrialStop { kContinue, kPrecise, kMaxTrials, kExtendedMax, kBudget, kExtensionSpent };
const char* trial_stop_name(TrialStop s);

// After `calls` timed calls and `elapsed_s` of the set's timing: go on, or why to stop. `kernel`
// and `reference` (null when the reference is not timed here) summarize the times so far.
TrialStop next_trial_step(const TrialLimits& limits, int calls, double elapsed_s, const TimingSummary& kernel,
                          const TimingSummary* reference);
// The size of the next batch: at most `copies`, never past the current cap, and short enough that a
// batch of slow calls takes a quarter of the budget at most.
int next_batch_size(const TrialLimits& limits, int calls, int copies, double call_wall_us);

// What an empty call costs in one process: the interquartile mean of the calls timed for it (as
// timed calls are: after an L2 flush, between events). Figures that are no time (<= 0, NaN) or
// absurd (>= 1 ms) are dropped; fewer than 16 left give 0 (not known).
double empty_call_cost_us(const std::vector<double>& us);

// The launch-cost correction (timing.cu): each process's CUDA context launches at its own fixed
// cost, and the candidate's calls run in its own process while the reference's run in the judge's.
// The kernel's measured time is put on the judge's footing by the difference of their empty calls,
// bounded by `bound_us`, and never below half the measured time. Not applied (the measured time
// stands) where either cost is unknown (0) or the timing runs without an L2 flush.
struct LaunchCorrection {
    double time_us = 0;        // the corrected time: what the speedup is computed from
    double correction_us = 0;  // subtracted from the measured time
    bool applied = false;
    bool bounded = false;      // the difference exceeded bound_us (or the half-time floor bit)
};
LaunchCorrection correct_launch_cost(double measured_us, double candidate_empty_us, double judge_empty_us, bool flushed, double bound_us);

// Work moved between calls. A timed batch's inputs all hold their values before its first call, so
// a kernel could compute later calls' outputs in an earlier call (one call in four doing four calls'
// work): the interquartile mean would keep only the calls that did nothing. No call can take work
// out of its batch (the next batch's inputs get their values after it ends), so a batch's mean
// time per call is honest whatever moved inside it. A set's time is therefore at least the lowest
// batch mean divided by `allowance` (on the H200 an honest kernel's batch means lay within 0.97-1.03
// of its interquartile mean, so the floor binds only where the calls are uneven).
struct EvenCallsFloor {
    double time_us = 0;          // max(time_us given, floor_us)
    double floor_us = 0;         // the lowest batch mean / allowance (0: no batch)
    double lowest_batch_mean_us = 0;
    bool bound = false;          // the floor raised the time
};
EvenCallsFloor even_calls_floor(double time_us, const std::vector<double>& batch_sum_us, const std::vector<int>& batch_calls, double allowance);

}  // namespace kevo
