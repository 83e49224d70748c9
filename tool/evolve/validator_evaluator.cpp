#include "evolve/internal/validator_evaluator.h"

#include <cstdio>

namespace kevo::evolve {

Evaluation to_evaluation(const ValidationResult& r) {
    Evaluation e;
    e.status = status_name(r.status);
    e.speedup = r.speedup;
    e.details = r.to_json();
    if (r.ok()) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "correct; speedup %.3fx: kernel %.2f us (spread %.0f%%), reference %.2f us; max abs diff %.3g",
                      r.speedup, r.kernel_us, r.kernel_spread * 100, r.reference_us, r.max_abs_diff);
        e.feedback = buf;
        if (r.suspicious) e.feedback += " (suspiciously fast: make sure all work is real and on the given stream)";
    } else {
        e.feedback = std::string(status_name(r.status)) + ": " + r.log;
    }
    return e;
}

Evaluation ValidatorEvaluator::run(const CompileResult& compiled) { return to_evaluation(v_.run(compiled)); }

}  // namespace kevo::evolve
