#include "validate/trials.h"

#include <algorithm>
#include <cmath>

namespace kevo {

nlohmann::json TimingSummary::to_json() const {
    return nlohmann::json{{"time_us", time_us}, {"median_us", median_us}, {"p10_us", p10_us}, {"p90_us", p90_us},
                          {"mean_us", mean_us}, {"min_us", min_us},       {"spread", spread},  {"ci95", ci}, {"n", n}};
}

TimingSummary summarize_times(std::vector<double> v) {
    TimingSummary s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    auto q = [&](double p) { return v[std::min<size_t>(n - 1, static_cast<size_t>(p * (n - 1) + 0.5))]; };
    double mean = 0;
    for (double x : v) mean += x;
    s.n = n;
    s.mean_us = mean / n;
    s.median_us = q(0.5);
    s.p10_us = q(0.1);
    s.p90_us = q(0.9);
    s.min_us = v.front();
    // The middle half: drop the lowest and the highest quarter (none below 4 calls).
    const size_t cut = n / 4;
    double mid = 0;
    for (size_t i = cut; i < n - cut; ++i) mid += v[i];
    s.time_us = mid / static_cast<double>(n - 2 * cut);
    s.spread = s.time_us > 0 ? (s.p90_us - s.p10_us) / s.time_us : 0;
    if (n < 2 || s.time_us <= 0) {
        s.ci = 1;
        return s;
    }
    // Winsorized at the same cut: the quarters dropped above count as their nearest kept value.
    double wmean = 0, wvar = 0;
    auto w = [&](size_t i) { return v[std::min(std::max(i, cut), n - 1 - cut)]; };
    for (size_t i = 0; i < n; ++i) wmean += w(i);
    wmean /= n;
    for (size_t i = 0; i < n; ++i) wvar += (w(i) - wmean) * (w(i) - wmean);
    wvar /= static_cast<double>(n - 1);
    const double kept = static_cast<double>(n - 2 * cut) / n;
    const double se = std::sqrt(wvar) / (kept * std::sqrt(static_cast<double>(n)));
    s.ci = 1.96 * se / s.time_us;
    return s;
}

const char* trial_stop_name(TrialStop s) {
    switch (s) {
        case TrialStop::kContinue: return "continue";
        case TrialStop::kPrecise: return "precise";
        case TrialStop::kMaxTrials: return "max_trials";
        case TrialStop::kExtendedMax: return "extended_max_trials";
        case TrialStop::kBudget: return "time_budget";
        case TrialStop::kExtensionSpent: return "extension_time_spent";
    }
    return "?";
}

namespace {
int extended_cap(const TrialLimits& l) {
    const int most = l.most();
    return l.extend_s > 0 && l.extend_factor > 1 ? most * l.extend_factor : most;
}
}  // namespace

TrialStop next_trial_step(const TrialLimits& l, int calls, double elapsed_s, const TimingSummary& kernel,
                          const TimingSummary* reference) {
    const int most = l.most();
    const bool precise = kernel.ci <= l.target_ci && (!reference || reference->ci <= l.target_ci);
    if (calls >= l.min_trials && precise) return TrialStop::kPrecise;
    if (elapsed_s > l.budget_s && calls >= std::min(10, most)) return TrialStop::kBudget;
    if (calls < most) return TrialStop::kContinue;
    // At the most trials and still imprecise: only a cheap set goes on.
    if (calls >= extended_cap(l)) return calls > most ? TrialStop::kExtendedMax : TrialStop::kMaxTrials;
    if (elapsed_s >= l.extend_s) return calls > most ? TrialStop::kExtensionSpent : TrialStop::kMaxTrials;
    return TrialStop::kContinue;
}

int next_batch_size(const TrialLimits& l, int calls, int copies, double call_wall_us) {
    const int by_time = std::max(1, static_cast<int>(l.budget_s * 0.25e6 / std::max(call_wall_us, 1.0)));
    const int most = l.most();
    const int cap = calls < most ? most : extended_cap(l);
    return std::max(1, std::min({copies, cap - calls, by_time}));
}

double empty_call_cost_us(const std::vector<double>& us) {
    std::vector<double> ok;
    for (double u : us)
        if (u > 0 && u < 1e3) ok.push_back(u);  // NaN fails both
    return ok.size() >= 16 ? summarize_times(ok).time_us : 0.0;
}

LaunchCorrection correct_launch_cost(double measured_us, double candidate_empty_us, double judge_empty_us, bool flushed, double bound_us) {
    LaunchCorrection c;
    c.time_us = measured_us;
    if (!flushed || !(candidate_empty_us > 0) || !(judge_empty_us > 0) || !(measured_us > 0)) return c;
    const double d = candidate_empty_us - judge_empty_us;
    c.correction_us = std::max(-bound_us, std::min(bound_us, d));
    c.bounded = c.correction_us != d;
    if (measured_us - c.correction_us < 0.5 * measured_us) {
        c.correction_us = 0.5 * measured_us;
        c.bounded = true;
    }
    c.time_us = measured_us - c.correction_us;
    c.applied = true;
    return c;
}

EvenCallsFloor even_calls_floor(double time_us, const std::vector<double>& batch_sum_us, const std::vector<int>& batch_calls, double allowance) {
    EvenCallsFloor f;
    f.time_us = time_us;
    double lowest = 0;
    for (size_t b = 0; b < batch_sum_us.size() && b < batch_calls.size(); ++b) {
        if (batch_calls[b] < 1 || !(batch_sum_us[b] >= 0)) continue;
        const double mean = batch_sum_us[b] / batch_calls[b];
        if (lowest <= 0 || mean < lowest) lowest = mean;
    }
    if (lowest <= 0 || !(allowance >= 1)) return f;
    f.lowest_batch_mean_us = lowest;
    f.floor_us = lowest / allowance;
    if (f.floor_us > time_us) {
        f.time_us = f.floor_us;
        f.bound = true;
    }
    return f;
}

}  // namespace kevo
