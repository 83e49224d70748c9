#include "validate/trials.h"

#include <algorithm>
#include <cmath>

namespace kevo {

nlohmann::json TimingSummary::to_json() const {
    return nlohmann::json{{"median_us", median_us}, {"p10_us", p10_us}, {"p90_us", p90_us}, {"mean_us", mean_us},
                          {"min_us", min_us},       {"spread", spread}, {"ci95", ci},     {"n", n}};
}

TimingSummary summarize_times(std::vector<double> v) {
    TimingSummary s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    auto q = [&](double p) { return v[std::min<size_t>(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))]; };
    double mean = 0;
    for (double x : v) mean += x;
    s.n = v.size();
    s.mean_us = mean / v.size();
    s.median_us = q(0.5);
    s.p10_us = q(0.1);
    s.p90_us = q(0.9);
    s.min_us = v.front();
    s.spread = s.median_us > 0 ? (s.p90_us - s.p10_us) / s.median_us : 0;
    // Distribution-free 95% interval of the median: the order statistics n/2 -+ 0.98 sqrt(n).
    const double n = static_cast<double>(v.size());
    size_t lo = static_cast<size_t>(std::max(0.0, std::floor(n / 2 - 0.98 * std::sqrt(n))));
    size_t hi = static_cast<size_t>(std::min(n - 1, std::ceil(n / 2 + 0.98 * std::sqrt(n))));
    s.ci = s.median_us > 0 ? (v[hi] - v[lo]) / (2 * s.median_us) : 0;
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
    const int most = std::max(l.min_trials, l.max_trials);
    return l.extend_s > 0 && l.extend_factor > 1 ? most * l.extend_factor : most;
}
}  // namespace

TrialStop next_trial_step(const TrialLimits& l, int calls, double elapsed_s, const TimingSummary& kernel,
                          const TimingSummary* reference) {
    const int most = std::max(l.min_trials, l.max_trials);
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
    const int most = std::max(l.min_trials, l.max_trials);
    const int cap = calls < most ? most : extended_cap(l);
    return std::max(1, std::min({copies, cap - calls, by_time}));
}

}  // namespace kevo
