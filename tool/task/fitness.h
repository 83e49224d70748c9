// The search's fitness over several timed shape sets: the weighted geometric mean of their speedups,
//   exp( sum_i w_i * ln(s_i) / sum_i w_i ),
// so a kernel 2x faster on one set and 2x slower on another scores 1.0, whatever the sets' sizes.
#pragma once
#include <vector>

namespace kevo {

// `weights` empty means all 1; otherwise one weight (> 0) per speedup. Returns 0 when `speedups`
// is empty, when a speedup is not positive (a set that failed counts as a failure of the whole), or
// when the weights do not match.
double weighted_geomean(const std::vector<double>& speedups, const std::vector<double>& weights);

}  // namespace kevo
