// What a model search budgets by and what its report adds up (issue 49): each region's gain still possible
// over torch.compile, and, from plan.json's recorded times and the regions' results, the speedups over eager
// and over torch.compile per region and end to end.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/plan.h"

namespace kevo::model {

// Whether the budget follows the gain over torch.compile: the plan timed torch.compile for every region given
// (a plan made without PyTorch 2, or off a GPU, has no compiled times: then the regions' eager shares).
bool budgets_over_compile(const std::vector<const Region*>& regions);
// A region's weight in the budget split: over_compile, the gain still possible over torch.compile (its compiled
// time minus its floor, 0 where the plan has none, times 1 + its repeats); else its share of eager time (with
// its repeats').
double budget_weight(const Region& r, bool over_compile);

// One searched region in the report: its kernel's speedups (from its search: over the LibTorch reference, over
// eager and torch.compile of its module where the search timed them) and its time estimated from them.
struct RegionGain {
    std::string name;
    bool runs = false;                     // its best is cached and at least the default minimum speedup
    std::optional<double> over_eager, over_compile, kernel_ms;
};

// End to end, from plan.json's times (the model's eager total_ms and compile_total_ms, each region's time_ms and
// compile_ms) with each region whose kernel runs replaced by its estimated time: the model over eager with
// every such region, over torch.compile with those that beat it, and the share of the compiled model's time in
// the regions that beat torch.compile. Estimates: Inductor compiles the whole model, not region by region.
struct ModelGains {
    std::vector<RegionGain> regions;
    std::optional<double> over_eager, over_compile, compiled_share_beaten;
    double eager_ms = 0, loaded_ms = 0;                 // the model in eager; with the kernels
    std::optional<double> compile_ms, compiled_loaded_ms;  // under torch.compile; with the kernels that beat it
    std::string compile_note;                           // the plan's "compile" where it has no compiled times
    nlohmann::json to_json() const;
    std::string text() const;  // the report's lines
};
ModelGains model_gains(const Plan& plan, const Summary& summary);

}  // namespace kevo::model
