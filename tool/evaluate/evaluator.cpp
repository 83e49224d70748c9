// Evaluator::confirm's default: the candidate judged once more through run(), the speedups compared.
#include "evaluate/evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kevo {

Evaluation Evaluator::confirm(const CompileResult& compiled, const Evaluation& first, double agree) {
    Evaluation second = run(compiled);
    Evaluation out;
    out.details = {{"confirmation", second.details}};
    out.status = second.status;
    out.speedup = second.speedup;
    if (!second.ok()) {
        out.feedback = "the second validation did not pass: " + std::string(status_name(second.status)) + ": " + second.feedback;
        return out;
    }
    const double a = first.speedup, b = second.speedup;
    if (a > 0 && b > 0 && std::fabs(a - b) / std::max(a, b) <= agree) return out;
    char buf[256];
    std::snprintf(buf, sizeof buf, "the second validation measured %.3fx, the first %.3fx: they differ by more than %.0f%%", b,
                  a, 100 * agree);
    out.status = Status::rejected;
    out.feedback = buf;
    return out;
}

}  // namespace kevo
