#include "task/fitness.h"

#include <cmath>

namespace kevo {

double weighted_geomean(const std::vector<double>& speedups, const std::vector<double>& weights) {
    if (speedups.empty() || (!weights.empty() && weights.size() != speedups.size())) return 0;
    double sum_w = 0, sum = 0;
    for (size_t i = 0; i < speedups.size(); ++i) {
        double w = weights.empty() ? 1.0 : weights[i];
        if (!(speedups[i] > 0) || !std::isfinite(speedups[i]) || !(w > 0) || !std::isfinite(w)) return 0;
        sum_w += w;
        sum += w * std::log(speedups[i]);
    }
    return std::exp(sum / sum_w);
}

}  // namespace kevo
