// The judge's correctness rule for one output, for host and device code alike (compare.cuh runs it
// on the device; tests/device/device_test.cpp on the host, the same functions).
//
// A tolerance must scale with the output it judges: an absolute atol of 1e-4 on outputs of about
// 1.2e-4 (a softmax over 8192 columns) admits close to 100% error per element, and a kernel writing
// the constant 1/8192 passed 99.3% of its elements. So, per output, with s the RMS of the expected
// output's finite elements (its scale):
//   per element:  |got - expected| <= atol * min(1, s) + rtol * |expected|
//   per output:   rms(got - expected) <= max(atol * min(1, s), rtol * s)
// The absolute term is atol itself for outputs whose scale is 1 or more and shrinks with smaller
// ones, so it never exceeds atol times the output's scale; where the expected output is all zero
// (s = 0: nothing to scale by, and zeros are right) it stays atol. The norm rule allows the larger of
// the two terms where the per-element rule, every element at its limit, would allow their sum (half
// of it when atol = rtol and s < 1): a kernel whose error sits near the per-element limit everywhere
// fails it. Integer and bool outputs
// compare exactly. `tolerance_used` (the largest fraction of either bound used) above
// kNearToleranceFraction marks a kernel right only to about the tolerance, which results report.
// KernelBench's own check (allclose, atol = rtol = 1e-2, on the unscaled values) is counted beside
// it, reported and never the verdict.
#pragma once
#include <math.h>

#include "device/dtype.h"

namespace kevo_device {

// The rule in words, for prompts and reports.
constexpr const char* kToleranceRule =
    "every element within atol * min(1, s) + rtol * |expected|, and rms(got - expected) within max(atol * min(1, s), rtol * s), "
    "s the RMS of the expected output: the absolute term shrinks with outputs smaller than 1";

constexpr double kKernelBenchTolerance = 1e-2;
constexpr double kNearToleranceFraction = 0.5;
// One element may use up to this fraction of its own tolerance before the output is called near it
// (a rounding step of a narrow output dtype, e.g. one bf16 ulp, uses about half of a 1e-2 rtol on its
// own; the output's overall error is what the norm fraction measures).
constexpr double kNearElementFraction = 0.9;

// Whether a passing output is right only to about its tolerance: its overall (norm) error uses more
// than kNearToleranceFraction of the norm bound, or one element more than kNearElementFraction of its
// own. `used` is the largest fraction of either bound (tolerance_used), `norm_used` the norm's.
KEVO_HD bool is_near_tolerance(bool pass, double used, double norm_used) {
    return pass && (norm_used > kNearToleranceFraction || used > kNearElementFraction);
}

// One output's tolerance once its scale is known.
struct OutputTolerance {
    double scale;      // RMS of the expected output's finite elements
    double abs;        // the absolute term: atol * min(1, scale) (atol where scale is 0 or not finite)
    double rtol;
    double rms_bound;  // the largest rms(got - expected) allowed: max(abs, rtol * scale)
};

KEVO_HD OutputTolerance output_tolerance(double atol, double rtol, double sum_sq, unsigned long long finite) {
    OutputTolerance t;
    t.scale = finite ? sqrt(sum_sq / static_cast<double>(finite)) : 0.0;
    t.rtol = rtol;
    t.abs = t.scale > 0 && isfinite(t.scale) ? atol * fmin(1.0, t.scale) : atol;
    t.rms_bound = fmax(t.abs, rtol * t.scale);  // fmax drops the NaN of 0 * inf
    return t;
}

// One element against its expected value.
struct ElementResult {
    float diff;   // |got - expected| (inf where NaN or inf disagree)
    float ratio;  // diff / its allowed difference (inf where nothing is allowed and it differs)
    bool bad;
    bool kernelbench_bad;  // outside allclose(atol = rtol = 1e-2)
};

KEVO_HD ElementResult check_element(double x, double y, bool exact, const OutputTolerance& t) {
    ElementResult r{0.f, 0.f, false, false};
    const bool special = isnan(x) || isnan(y) || isinf(x) || isinf(y);
    if (special && !exact) {  // NaN matches NaN, inf matches the same inf, nothing else matches them
        r.bad = r.kernelbench_bad = !(isnan(x) ? isnan(y) : x == y);
        r.diff = r.ratio = r.bad ? INFINITY : 0.f;
        return r;
    }
    const double d = fabs(x - y);
    r.diff = static_cast<float>(d);
    r.kernelbench_bad = d > kKernelBenchTolerance * (1.0 + fabs(y));
    const double allowed = exact ? 0.0 : t.abs + t.rtol * fabs(y);
    r.bad = exact ? x != y : d > allowed;
    r.ratio = allowed > 0 ? static_cast<float>(d / allowed) : (r.bad ? INFINITY : 0.f);
    return r;
}

// What the comparison of one output adds up (on the device: per thread, then merged).
struct DiffSums {
    unsigned long long mismatches;
    unsigned long long kernelbench_mismatches;
    unsigned long long first_bad;  // smallest mismatching index (~0ull: none)
    double sum_d2;                 // squares of the finite differences
    float max_diff;                // the largest |diff| (inf when NaN/inf disagree)
    float max_finite;              // the largest finite |diff|
    float max_ratio;               // the largest diff / allowed
};

KEVO_HD DiffSums no_diffs() { return DiffSums{0, 0, ~0ull, 0.0, 0.f, 0.f, 0.f}; }

KEVO_HD void add_element(DiffSums& s, unsigned long long i, const ElementResult& e) {
    if (e.bad) {
        ++s.mismatches;
        if (i < s.first_bad) s.first_bad = i;
    }
    s.kernelbench_mismatches += e.kernelbench_bad ? 1 : 0;
    if (isfinite(e.diff)) {
        s.sum_d2 += static_cast<double>(e.diff) * e.diff;
        s.max_finite = fmaxf(s.max_finite, e.diff);
    }
    s.max_diff = fmaxf(s.max_diff, e.diff);
    s.max_ratio = fmaxf(s.max_ratio, e.ratio);
}

// The verdict on one output of n elements.
struct OutputVerdict {
    bool elements_ok;  // every element inside its tolerance
    bool norm_ok;      // rms(diff) <= rms_bound (always true for exact outputs)
    bool pass;
    double rms_diff;
    double rel_l2;          // ||got - expected||_2 / ||expected||_2 (inf for a nonzero diff of an all-zero output)
    double tolerance_used;  // the largest fraction of either bound used
    bool near_tolerance;    // passes, but is_near_tolerance() says it is right only to about it
    bool kernelbench_pass;
};

KEVO_HD double fraction(double x, double bound) { return bound > 0 ? x / bound : (x > 0 ? INFINITY : 0.0); }

KEVO_HD OutputVerdict output_verdict(const DiffSums& s, unsigned long long n, bool exact, const OutputTolerance& t) {
    OutputVerdict v;
    v.rms_diff = n ? sqrt(s.sum_d2 / static_cast<double>(n)) : 0.0;
    v.rel_l2 = fraction(v.rms_diff, t.scale);
    v.elements_ok = s.mismatches == 0;
    v.norm_ok = exact || v.rms_diff <= t.rms_bound;
    v.pass = v.elements_ok && v.norm_ok;
    v.tolerance_used = exact ? (v.elements_ok ? 0.0 : INFINITY) : fmax(static_cast<double>(s.max_ratio), fraction(v.rms_diff, t.rms_bound));
    v.near_tolerance = is_near_tolerance(v.pass, v.tolerance_used, exact ? 0.0 : fraction(v.rms_diff, t.rms_bound));
    v.kernelbench_pass = s.kernelbench_mismatches == 0;
    return v;
}

}  // namespace kevo_device
