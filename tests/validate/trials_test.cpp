// The judge's stopping rule for timed calls (validate/trials.h), driven by scripted timings and a
// simulated clock, the way timing.cu drives it: batches until next_trial_step says stop.
#include "validate/trials.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

namespace kevo {
namespace {

struct Sim {
    int calls = 0, batches = 0;
    TrialStop stop = TrialStop::kContinue;
    TimingSummary kernel;
};

// kernel_us(i): the i-th call's time; cost_us: what one call costs the judge (kernel, flush, launch).
Sim simulate(const TrialLimits& l, const std::function<double(int)>& kernel_us, double cost_us, int copies = 64,
             const std::function<double(int)>& reference_us = nullptr) {
    Sim r;
    std::vector<double> kt, rt;
    double elapsed_s = 0;
    while (r.stop == TrialStop::kContinue) {
        int n = next_batch_size(l, r.calls, copies, cost_us);
        EXPECT_GE(n, 1);
        for (int j = 0; j < n; ++j) {
            kt.push_back(kernel_us(r.calls + j));
            if (reference_us) rt.push_back(reference_us(r.calls + j));
        }
        r.calls += n;
        ++r.batches;
        elapsed_s += n * cost_us * 1e-6;
        r.kernel = summarize_times(kt);
        TimingSummary rs = summarize_times(rt);
        r.stop = next_trial_step(l, r.calls, elapsed_s, r.kernel, reference_us ? &rs : nullptr);
    }
    return r;
}

// Times spread uniformly over ±spread around `us` (seeded).
std::function<double(int)> noisy(double us, double spread, unsigned seed = 1) {
    auto rng = std::make_shared<std::mt19937>(seed);
    return [=](int) { return us * (1 + std::uniform_real_distribution<double>(-spread, spread)(*rng)); };
}

TEST(Trials, SummaryIntervalNarrowsWithMoreCalls) {
    auto f = noisy(10, 0.2);
    std::vector<double> v;
    for (int i = 0; i < 100; ++i) v.push_back(f(i));
    TimingSummary a = summarize_times(v);
    for (int i = 0; i < 900; ++i) v.push_back(f(i));
    TimingSummary b = summarize_times(v);
    EXPECT_NEAR(a.median_us, 10, 0.5);
    EXPECT_NEAR(b.median_us, 10, 0.2);
    EXPECT_LT(b.ci, a.ci / 2);  // about sqrt(10) narrower
    EXPECT_EQ(b.n, 1000u);
}

TEST(Trials, TimeIsTheInterquartileMean) {
    // The lowest and the highest quarter do not count: one huge outlier changes nothing.
    TimingSummary s = summarize_times({1, 2, 3, 4, 5, 6, 7, 1000});
    EXPECT_DOUBLE_EQ(s.time_us, 4.5);  // mean of 3 4 5 6
    EXPECT_DOUBLE_EQ(s.median_us, 5);  // the upper middle of an even count
    EXPECT_GT(s.mean_us, 100);
    EXPECT_EQ(summarize_times({7}).ci, 1);  // one call says nothing about its precision
    EXPECT_DOUBLE_EQ(summarize_times({7}).time_us, 7);
    EXPECT_EQ(summarize_times({3, 3, 3, 3}).ci, 0);
}

// A launch-bound kernel's calls in two modes, half each (gelu_bias's 33x1001 set on the H200: about
// 4.3 and 4.7 µs). Over repeated validations of 400 calls the median lands in either mode (about 6%
// apart); the interquartile mean averages them and stays within about 2%.
TEST(Trials, BimodalTimesAreSteadierAsInterquartileMeansThanAsMedians) {
    std::mt19937 rng(5);
    std::normal_distribution<double> noise(0, 0.01);
    std::bernoulli_distribution slow(0.5);
    double med_lo = 1e9, med_hi = 0, iqm_lo = 1e9, iqm_hi = 0;
    for (int rep = 0; rep < 20; ++rep) {
        std::vector<double> v;
        for (int i = 0; i < 400; ++i) v.push_back((slow(rng) ? 4.7 : 4.3) * (1 + noise(rng)));
        TimingSummary s = summarize_times(v);
        med_lo = std::min(med_lo, s.median_us), med_hi = std::max(med_hi, s.median_us);
        iqm_lo = std::min(iqm_lo, s.time_us), iqm_hi = std::max(iqm_hi, s.time_us);
        EXPECT_NEAR(s.time_us, 4.5, 0.2);
    }
    EXPECT_GT((med_hi - med_lo) / 4.5, 0.04);
    EXPECT_LT((iqm_hi - iqm_lo) / 4.5, 0.025);
}

TEST(Trials, SteadyTimesStopAtTheMinimum) {
    TrialLimits l;
    l.min_trials = 20;
    Sim r = simulate(l, noisy(50, 0.001), 60, /*copies=*/8);
    EXPECT_EQ(r.stop, TrialStop::kPrecise);
    EXPECT_EQ(r.calls, 24);  // three batches of 8: the first count at or past the minimum
}

TEST(Trials, NoisyExpensiveSetStopsAtTheMostTrials) {
    TrialLimits l;  // 100 trials, extension while under 0.1 s
    l.extend_s = 0.1;
    Sim r = simulate(l, noisy(2000, 0.3), 2100);  // 100 calls cost 0.21 s: no extension
    EXPECT_EQ(r.stop, TrialStop::kMaxTrials);
    EXPECT_EQ(r.calls, 100);
    EXPECT_GT(r.kernel.ci, l.target_ci);
}

TEST(Trials, NoisyCheapSetGoesOnUntilItsTimeIsPrecise) {
    TrialLimits l;
    l.extend_s = 0.1;
    Sim r = simulate(l, noisy(5, 0.05), 60);  // ±5%: 100 calls give about ±1%, 400 about ±0.5%
    EXPECT_EQ(r.stop, TrialStop::kPrecise);
    EXPECT_GT(r.calls, 100);
    EXPECT_LE(r.calls, 1000);
    EXPECT_LE(r.kernel.ci, l.target_ci);
}

TEST(Trials, TheExtensionIsBoundedByCallsAndByTime) {
    TrialLimits l;
    l.extend_s = 0.1;
    Sim by_calls = simulate(l, noisy(5, 0.9), 10);  // never precise, very cheap
    EXPECT_EQ(by_calls.stop, TrialStop::kExtendedMax);
    EXPECT_EQ(by_calls.calls, 1000);
    Sim by_time = simulate(l, noisy(5, 0.9), 400);  // 100 calls 0.04 s: extends until 0.1 s are spent
    EXPECT_EQ(by_time.stop, TrialStop::kExtensionSpent);
    EXPECT_GE(by_time.calls, 250);
    EXPECT_LE(by_time.calls, 250 + 64);  // one batch past the point where 0.1 s were reached
    l.extend_s = 0;  // no extension at all (the default)
    Sim none = simulate(l, noisy(5, 0.9), 10);
    EXPECT_EQ(none.stop, TrialStop::kMaxTrials);
    EXPECT_EQ(none.calls, 100);
}

TEST(Trials, AnImpreciseReferenceKeepsTheSetGoing) {
    TrialLimits l;
    l.extend_s = 0;
    Sim r = simulate(l, noisy(50, 0.001), 60, 64, noisy(80, 0.5, 7));
    EXPECT_EQ(r.stop, TrialStop::kMaxTrials);  // the kernel alone was precise after 64 calls
    EXPECT_EQ(r.calls, 100);
}

TEST(Trials, SlowCallsComeInShortBatchesAndTheBudgetEndsThem) {
    TrialLimits l;
    l.budget_s = 1;
    // 110 ms a call: batches of at most 0.25 s, i.e. 2 calls; the budget (1.1 s spent) ends it at 10.
    EXPECT_EQ(next_batch_size(l, 0, 64, 110000), 2);
    Sim r = simulate(l, noisy(110000, 0.3), 110000);
    EXPECT_EQ(r.stop, TrialStop::kBudget);
    EXPECT_EQ(r.calls, 10);
    EXPECT_EQ(r.batches, 5);
}

TEST(Trials, BatchesNeverPassTheCap) {
    TrialLimits l;
    l.extend_s = 0.1;
    EXPECT_EQ(next_batch_size(l, 90, 64, 10), 10);    // 100 at most before the extension
    EXPECT_EQ(next_batch_size(l, 100, 64, 10), 64);   // then up to 1000
    EXPECT_EQ(next_batch_size(l, 990, 64, 10), 10);
    l.extend_s = 0;
    EXPECT_EQ(next_batch_size(l, 100, 64, 10), 1);    // past the cap: never zero (the caller stops first)
}

TEST(Trials, StopReasonsHaveNames) {
    EXPECT_STREQ(trial_stop_name(TrialStop::kPrecise), "precise");
    EXPECT_STREQ(trial_stop_name(TrialStop::kExtensionSpent), "extension_time_spent");
}

// The launch-cost correction (as measured on the H200: an empty call 3.58 us in the candidate
// process, 2.79 us in the judge; the kernel 4.90 us measured).
TEST(LaunchCost, TheKernelIsPutOnTheJudgesFooting) {
    LaunchCorrection c = correct_launch_cost(4.90, 3.58, 2.79, true, 2.0);
    EXPECT_TRUE(c.applied);
    EXPECT_FALSE(c.bounded);
    EXPECT_NEAR(c.correction_us, 0.79, 1e-9);
    EXPECT_NEAR(c.time_us, 4.11, 1e-9);
    // A candidate process that launches faster than the judge gets time added, not taken off.
    c = correct_launch_cost(4.90, 2.50, 2.79, true, 2.0);
    EXPECT_NEAR(c.time_us, 5.19, 1e-9);
}

TEST(LaunchCost, TheDifferenceIsBoundedAndNeverTakesMoreThanHalf) {
    LaunchCorrection c = correct_launch_cost(40.0, 9.0, 2.8, true, 2.0);  // a glitch of 6.2 us
    EXPECT_TRUE(c.bounded);
    EXPECT_NEAR(c.correction_us, 2.0, 1e-9);
    EXPECT_NEAR(c.time_us, 38.0, 1e-9);
    c = correct_launch_cost(3.0, 4.9, 2.9, true, 2.0);  // a kernel barely slower than an empty call
    EXPECT_TRUE(c.bounded);
    EXPECT_NEAR(c.time_us, 1.5, 1e-9);
    c = correct_launch_cost(40.0, 0.8, 2.8, true, 2.0);
    EXPECT_NEAR(c.time_us, 42.0, 1e-9);
}

TEST(LaunchCost, NotAppliedWithoutBothCostsOrWithoutAFlush) {
    for (auto [cand, judge, flushed] : {std::tuple{0.0, 2.8, true}, std::tuple{3.5, 0.0, true}, std::tuple{3.5, 2.8, false},
                                        std::tuple{std::nan(""), 2.8, true}}) {
        LaunchCorrection c = correct_launch_cost(4.9, cand, judge, flushed, 2.0);
        EXPECT_FALSE(c.applied);
        EXPECT_EQ(c.time_us, 4.9);
        EXPECT_EQ(c.correction_us, 0.0);
    }
}

TEST(LaunchCost, AnEmptyCallsCostIgnoresImpossibleFiguresAndNeedsEnoughCalls) {
    std::vector<double> us(64, 3.2);
    us[0] = -1, us[1] = 0, us[2] = std::nan(""), us[3] = 5000, us[4] = 1e30;
    EXPECT_NEAR(empty_call_cost_us(us), 3.2, 1e-9);
    EXPECT_EQ(empty_call_cost_us(std::vector<double>(15, 3.2)), 0.0);  // too few to go by
    std::vector<double> spread;
    for (int i = 0; i < 64; ++i) spread.push_back(i % 8 == 0 ? 40.0 : 3.0 + 0.01 * (i % 4));  // a slow tail
    EXPECT_LT(empty_call_cost_us(spread), 3.1);
}

// One call in four does four calls' work, the other three nothing: the interquartile mean keeps
// only the idle calls, the batch's mean keeps the work.
TEST(EvenCalls, WorkMovedBetweenCallsCannotHideFromTheBatchMean) {
    std::vector<double> calls;
    for (int j = 0; j < 64; ++j) calls.push_back(j % 4 == 0 ? 4 * 35.0 + 2.0 : 2.5);
    const double iqm = summarize_times(calls).time_us;
    ASSERT_LT(iqm, 3.0);
    double sum = 0;
    for (double c : calls) sum += c;
    EvenCallsFloor f = even_calls_floor(iqm, {sum}, {64}, 1.1);
    EXPECT_TRUE(f.bound);
    EXPECT_NEAR(f.lowest_batch_mean_us, sum / 64, 1e-9);
    EXPECT_NEAR(f.time_us, sum / 64 / 1.1, 1e-9);
    EXPECT_GT(f.time_us, 30.0);  // within the allowance of the real 37 us per call
}

TEST(EvenCalls, HonestCallsKeepTheirTimeAndAHiccupBatchDoesNotCount) {
    // An honest batch's mean lies close to its interquartile mean; a second batch with a 1 ms
    // hiccup in one call has a high mean, and only the lowest batch mean sets the floor.
    std::vector<double> sums{64 * 4.6, 63 * 4.5 + 1000.0};
    EvenCallsFloor f = even_calls_floor(4.5, sums, {64, 64}, 1.1);
    EXPECT_FALSE(f.bound);
    EXPECT_EQ(f.time_us, 4.5);
    EXPECT_NEAR(f.lowest_batch_mean_us, 4.6, 1e-9);
    // No batches, an empty one, or no allowance: nothing to go by, the time stands.
    EXPECT_FALSE(even_calls_floor(4.5, {}, {}, 1.1).bound);
    EXPECT_EQ(even_calls_floor(4.5, {100.0}, {0}, 1.1).time_us, 4.5);
    EXPECT_EQ(even_calls_floor(4.5, {640.0}, {64}, 0.5).time_us, 4.5);
    EXPECT_EQ(even_calls_floor(4.5, {std::nan("")}, {64}, 1.1).time_us, 4.5);
}

}  // namespace
}  // namespace kevo
