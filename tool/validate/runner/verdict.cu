// The judge's verdict on one output of one correctness trial (verdict.h).
#include "verdict.h"

#include <cmath>
#include <sstream>

#include "judge.h"

namespace kevo_runner {

namespace {
using namespace kevo_device;

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw SetupFailure{std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}
#define CHECK(x) check((x), #x)

std::string index_string(int64_t flat, const std::vector<int64_t>& sizes) {
    std::vector<int64_t> idx(sizes.size());
    for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
        idx[i] = sizes[i] ? flat % sizes[i] : 0;
        flat = sizes[i] ? flat / sizes[i] : 0;
    }
    std::string s = "[";
    for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
    return s + "]";
}

double host_value(const void* dev, int32_t dtype, int64_t i) {
    uint64_t raw = 0;  // room and alignment for any element
    int sz = kevo_dtype_size(dtype);
    if (cudaMemcpy(&raw, static_cast<const char*>(dev) + i * sz, sz, cudaMemcpyDeviceToHost) != cudaSuccess) return NAN;
    return load_as_double(&raw, dtype, 0);
}

CompareStats read_stats(const CompareStats* dev, cudaStream_t stream) {
    CompareStats st{};
    CHECK(cudaMemcpyAsync(&st, dev, sizeof st, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    return st;
}

// JSON has no infinity: a figure that is not finite is written as null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string element(const char* what, unsigned long long i, const kevo::JobTensor& d, const void* got, const void* expected) {
    return std::string(what) + " at index " + index_string(static_cast<int64_t>(i), d.sizes) + " (flat " + std::to_string(i) +
           "): got " + fmt(host_value(got, d.dtype, i)) + ", expected " + fmt(host_value(expected, d.dtype, i));
}

// Why the output failed, in the words the log (and the LLM's repair prompt) shows.
std::string failure_words(const kevo::JobTensor& d, const void* got, const void* expected, bool exact, double atol,
                          const OutputTolerance& t, const OutputVerdict& v, const CompareStats& st, const std::string& where) {
    std::ostringstream ss;
    ss << "output '" << d.name << "' differs from the reference in " << where << ": ";
    const double rel_bound = fraction(t.rms_bound, t.scale);
    if (!v.elements_ok) {
        ss << st.mismatches << " of " << d.numel() << " elements ";
        if (exact) ss << "differ (compared exactly).\n";
        else if (t.scale > 0 && std::isfinite(t.scale))
            ss << "outside atol " << fmt(t.abs) << " + rtol " << fmt(t.rtol) << "*|expected| (the task's atol " << fmt(atol)
               << " times min(1, " << fmt(t.scale) << "), the RMS of the expected output: tolerances follow each output's scale).\n";
        else
            ss << "outside atol " << fmt(t.abs) << " + rtol " << fmt(t.rtol) << "*|expected| (the task's own atol: the expected output is all zero, or too large for its RMS).\n";
        ss << element("first mismatch", st.first_bad, d, got, expected) << "\n";
        if (st.worst != ~0ull)
            ss << element("worst element", st.worst, d, got, expected) << " (|diff| " << fmt(bits_float(st.max_diff_bits)) << ")";
        if (!exact) ss << "\nrelative L2 error " << fmt(v.rel_l2) << " (bound " << fmt(rel_bound) << ")";
    } else {
        ss << "its relative L2 error ||got - expected|| / ||expected|| is " << fmt(v.rel_l2) << ", above its bound " << fmt(rel_bound)
           << " (max(atol " << fmt(t.abs) << ", rtol " << fmt(t.rtol) << " * RMS " << fmt(t.scale)
           << ") / RMS), although every element is inside its own tolerance: the error is close to the limit everywhere.";
    }
    return ss.str();
}
}  // namespace

OutputCheck compare_output(const kevo::JobTensor& d, const void* got, const void* expected, double atol, double rtol, int grid,
                           cudaStream_t stream, CompareStats* dev, const std::string& where) {
    const int64_t n = d.numel();
    const bool exact = !kevo_dtype_is_floating(d.dtype);
    const CompareStats init = compare_stats_init();
    CHECK(cudaMemcpyAsync(dev, &init, sizeof init, cudaMemcpyHostToDevice, stream));
    scale_kernel<<<grid, 256, 0, stream>>>(expected, d.dtype, n, dev);
    CHECK(cudaGetLastError());
    CompareStats st = read_stats(dev, stream);
    const OutputTolerance tol = output_tolerance(atol, rtol, st.sum_sq, st.finite);
    compare_kernel<<<grid, 256, 0, stream>>>(got, expected, d.dtype, n, exact, tol, dev);
    CHECK(cudaGetLastError());
    st = read_stats(dev, stream);
    if (st.mismatches) {  // find the worst element for the report
        worst_kernel<<<grid, 256, 0, stream>>>(got, expected, d.dtype, n, exact, tol, dev);
        CHECK(cudaGetLastError());
        st = read_stats(dev, stream);
    }
    const DiffSums sums = diff_sums(st);
    const OutputVerdict v = output_verdict(sums, static_cast<unsigned long long>(n), exact, tol);
    OutputCheck c;
    c.pass = v.pass;
    c.varies = st.nonconstant != 0;
    c.max_abs = sums.max_finite;
    c.report = {{"output", d.name}, {"pass", v.pass}, {"max_abs_diff", num(sums.max_finite)},
                {"kernelbench_check", v.kernelbench_pass ? "pass" : "fail"}};
    if (!exact) {
        c.report.update({{"rel_l2", num(v.rel_l2)}, {"rel_l2_bound", num(fraction(tol.rms_bound, tol.scale))},
                         {"scale", num(tol.scale)}, {"atol_effective", num(tol.abs)}, {"rtol", rtol},
                         {"tolerance_used", num(v.tolerance_used)}, {"near_tolerance", v.near_tolerance}});
    }
    if (st.mismatches) c.report.update({{"mismatches", st.mismatches}, {"first_mismatch", st.first_bad}, {"worst", st.worst}});
    if (!v.pass) c.message = failure_words(d, got, expected, exact, atol, tol, v, st, where);
    return c;
}

}  // namespace kevo_runner
