// Timed calls (see judge.h). The judge refills the inputs with new values and poisons the outputs
// before every timed call, flushes L2, and asks the candidate process for one call timed with CUDA
// events on its stream. It then checks a random subset of those calls' outputs against the
// reference (so memoizing across calls cannot pay), cross-checks the reported times against the
// wall-clock time it observed, and rejects times below the physical floor. The reference is timed
// by the judge itself, interleaved, the same way.
#include <algorithm>
#include <functional>
#include <cmath>
#include <random>

#include "judge.h"

namespace kevo_runner {

json Summary::to_json() const {
    return json{{"median_us", median_us}, {"p10_us", p10_us}, {"p90_us", p90_us}, {"mean_us", mean_us},
                {"min_us", min_us},       {"spread", spread}, {"ci95", ci},     {"n", n}};
}

Summary summarize(std::vector<double> v) {
    Summary s;
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

void Judge::flush_l2(int i) {
    if (job_->l2_flush == "write") {
        cuda_ok(cudaMemsetAsync(flush_, i & 0xFF, flush_bytes_, stream_), "cudaMemsetAsync(flush)");
    } else {
        l2_flush_read<<<flush_blocks_, 512, 0, stream_>>>(static_cast<const uint4*>(flush_), flush_bytes_ / 16, flush_sink_);
        cuda_ok(cudaGetLastError(), "l2_flush_read");
    }
}

json Judge::time_set(size_t set) {
    using clock = std::chrono::steady_clock;
    const Job& job = *job_;
    const auto& spec = job.sets[set];
    const bool flush_in_candidate = job.l2_flush.rfind("candidate-", 0) == 0;
    const bool time_reference = spec.reference_us <= 0;
    // Copies of the inputs and outputs at different addresses, used in turn: a time that depends on
    // where buffers lie then averages out within one run instead of differing between runs.
    int64_t set_bytes = 1;
    for (const auto& t : spec.inputs) set_bytes += t.bytes();
    for (const auto& t : spec.outputs) set_bytes += t.bytes();
    size_t free_mem = 0, total_mem = 0;
    cuda_ok(cudaMemGetInfo(&free_mem, &total_mem), "cudaMemGetInfo");
    const int copies = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(job.timing_copies, static_cast<int64_t>(free_mem / 4) / set_bytes)));
    std::vector<Tensors> ins, outs;
    auto release_all = [&] {
        for (auto& t : ins) unshare(t), t.free();
        for (auto& t : outs) unshare(t), t.free();
    };
    struct Guard {
        std::function<void()> f;
        ~Guard() { try { f(); } catch (...) {} }
    } guard{release_all};
    for (int c = 0; c < copies; ++c) {
        ins.push_back(allocate(spec.inputs, true));
        outs.push_back(allocate(spec.outputs, true));
        share(ins.back());
        share(outs.back());
    }
    if (expected_.size() <= set) expected_.resize(set + 1);
    if (expected_[set].desc.empty()) expected_[set] = allocate(spec.outputs, false);
    std::vector<std::string> warnings;
    std::mt19937_64 rng(job.seed * 7919 + set);
    std::uniform_real_distribution<double> coin(0, 1);
    cudaEvent_t e0, e1;
    cuda_ok(cudaEventCreate(&e0), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&e1), "cudaEventCreate");

    // Prepares copy `cur` for a call: new input values, poisoned outputs, flushed L2.
    // Only the candidate's own calls get poisoned outputs: the reference's and the empty calls
    // leave the last call's outputs in place for the judge to check.
    auto prepare = [&](int cur, uint64_t seed, int i, bool for_kernel = true) {
        fill(ins[cur], seed);
        if (for_kernel) poison(outs[cur], 0xFF);
        if (!flush_in_candidate) flush_l2(i);
        cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    };
    auto kernel_call = [&](int cur, int i, double* wall_us, bool null_call = false) {
        Msg m;
        m.op = OP_TIME;
        m.id = i;
        if (flush_in_candidate) m.flags = FLAG_FLUSH | (job.l2_flush == "candidate-write" ? FLAG_FLUSH_WRITE : 0);
        if (null_call) m.flags |= FLAG_NULL;
        fill_refs(m, ins[cur], outs[cur]);
        auto t0 = clock::now();
        Msg r = request(m, job.call_timeout_s, "while being timed");
        *wall_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
        if (r.rc != 0) throw CandidateFailure{"runtime_error", "kevo_forward returned " + std::to_string(r.rc) + " while being timed"};
        if (r.cuda_error != 0) throw CandidateFailure{"runtime_error", std::string("CUDA error while being timed: ") + r.text};
        if (!(r.ms >= 0) || r.ms > 1e6) throw CandidateFailure{"rejected", "the candidate process reported an impossible time"};
        return r.ms * 1000.0;
    };
    auto reference_call = [&](int cur, double* wall_us) {
        auto in = ins[cur].abi();
        auto t0 = clock::now();
        cuda_ok(cudaEventRecord(e0, stream_), "cudaEventRecord");
        int rc = ref_call_(in.data(), static_cast<int>(in.size()), stream_);
        cuda_ok(cudaEventRecord(e1, stream_), "cudaEventRecord");
        cuda_ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
        *wall_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
        ref_release_();
        if (rc != 0) throw SetupFailure{std::string("the reference failed while being timed: ") + ref_error_()};
        float ms = 0;
        cuda_ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
        return ms * 1000.0;
    };
    auto verify = [&](int cur, int i, uint64_t seed) {
        reference_forward(ins[cur], expected_[set]);
        json c = compare(set, seed, outs[cur], expected_[set], warnings);
        if (!c.value("pass", false))
            throw CandidateFailure{"mismatch", "timed call " + std::to_string(i + 1) + " (new input values every call) gave wrong outputs: " +
                                                   c.value("message", std::string()) +
                                                   "\n(a kernel that remembers earlier calls' results, or works only on its first calls, fails here)"};
    };

    auto t_start = clock::now();
    double wall_dummy = 0;
    for (int i = 0; i < std::max(1, job.warmup); ++i) {
        int cur = i % copies;
        prepare(cur, job.seed + 5000 + i, i);
        kernel_call(cur, i, &wall_dummy);
        if (time_reference) {
            prepare(cur, job.seed + 5000 + i, i, false);
            reference_call(cur, &wall_dummy);
        }
    }
    std::vector<double> kt, rt, kwall, rwall, null_overhead;
    int verified = 0;
    bool stopped_early = false, reduced = false;
    int max_trials = std::max(job.min_timing_trials, job.timing_trials);
    const double budget = job.timing_budget_s;
    int i = 0;
    for (; i < max_trials; ++i) {
        int cur = i % copies;
        uint64_t seed = job.seed + 10007 + static_cast<uint64_t>(i) * 31;
        // Alternate who goes first so that clock drift affects both alike.
        for (int k = 0; k < 2; ++k) {
            bool kernel_turn = (k == 0) == (i % 2 == 0);
            if (kernel_turn) {
                prepare(cur, seed, i);
                double w = 0;
                kt.push_back(kernel_call(cur, i, &w));
                kwall.push_back(w);
                if (i == 0 || coin(rng) < job.verify_fraction) {
                    verify(cur, i, seed);
                    ++verified;
                }
                if (i % 4 == 3) {  // the same call with nothing in it: what one call costs beyond its work
                    prepare(cur, seed, i, false);
                    double nw = 0;
                    double nms = kernel_call(cur, i, &nw, true);
                    null_overhead.push_back(nw - nms);
                }
            } else if (time_reference) {
                prepare(cur, seed, i, false);
                double w = 0;
                rt.push_back(reference_call(cur, &w));
                rwall.push_back(w);
            }
        }
        int n = i + 1;
        if (n >= job.min_timing_trials && n % 10 == 0) {
            bool precise = summarize(kt).ci <= job.target_ci && (!time_reference || summarize(rt).ci <= job.target_ci);
            if (precise && n < max_trials) {
                stopped_early = true;
                ++i;
                break;
            }
        }
        if (std::chrono::duration<double>(clock::now() - t_start).count() > budget && n >= 10) {
            reduced = n < max_trials;
            ++i;
            break;
        }
    }
    // The last timed call is always checked.
    verify((i - 1) % copies, i - 1, job.seed + 10007 + static_cast<uint64_t>(i - 1) * 31);
    ++verified;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);

    Summary k = summarize(kt);
    json out{{"shape_set", set}, {"label", spec.label}, {"weight", spec.weight}, {"trials", i}, {"stopped_early", stopped_early},
             {"trials_reduced_to_fit_budget", reduced}, {"verified_calls", verified}, {"buffer_copies", copies},
             {"l2_flush", job.l2_flush}, {"l2_flush_bytes", flush_bytes_}};
    json kj = k.to_json();
    // Per-copy medians show whether a time depends on where the buffers lie.
    json per_copy = json::array();
    for (int c = 0; c < copies && c < static_cast<int>(kt.size()); ++c) {
        std::vector<double> a;
        for (size_t j = c; j < kt.size(); j += copies) a.push_back(kt[j]);
        per_copy.push_back(summarize(a).median_us);
    }
    kj["per_copy_median_us"] = per_copy;
    out["kernel"] = kj;
    double ref_med = spec.reference_us;
    if (time_reference) {
        Summary r = summarize(rt);
        out["reference"] = r.to_json();
        ref_med = r.median_us;
        std::vector<double> ro;
        for (size_t j = 0; j < rt.size(); ++j) ro.push_back(rwall[j] - rt[j]);
        judge_overhead_us_ = summarize(ro).median_us;
        out["reference_source"] = "measured";
    } else if (job.best_speedup > 0 && k.median_us > 0 && ref_med / k.median_us > job.best_speedup) {
        // This result would become the best: measure the reference again now, so that a drift since
        // it was last timed cannot make a new best.
        std::vector<double> again;
        for (int j = 0; j < job.min_timing_trials; ++j) {
            int cur = j % copies;
            prepare(cur, job.seed + 20011 + j, j, false);
            double w = 0;
            again.push_back(reference_call(cur, &w));
        }
        Summary r = summarize(again);
        out["reference"] = r.to_json();
        out["reference_source"] = "re-measured (the result beats the best so far)";
        ref_med = r.median_us;
    } else {
        out["reference"] = json{{"median_us", ref_med}};
        out["reference_source"] = "earlier in this run";
    }
    out["speedup"] = k.median_us > 0 ? ref_med / k.median_us : 0;

    // Cross-check: the time the judge saw pass for each call must be explained by the reported time
    // plus the overhead of a call (which the judge measures on its own reference calls) and of the
    // two messages. A process that under-reports its kernel's time leaves an excess here.
    std::vector<double> excess;
    for (size_t j = 0; j < kt.size(); ++j) excess.push_back(kwall[j] - kt[j]);
    // The overhead of a call between two processes on one GPU (messages, a GPU context switch) is
    // measured with empty calls interleaved with the real ones: the same messages, the same
    // preparation, events around nothing.
    double call_overhead = summarize(excess).median_us;
    double empty_overhead = null_overhead.empty() ? 0.0 : summarize(null_overhead).median_us;
    // Measured on the H200: an honest call costs ~50 us more than an empty one (the launch and its
    // completion); the allowance leaves room for that and for noise.
    double slack = 80.0 + 0.25 * k.median_us;
    out["wall_check"] = json{{"kernel_wall_median_us", summarize(kwall).median_us},
                             {"candidate_overhead_us", call_overhead},
                             {"empty_call_overhead_us", empty_overhead},
                             {"judge_overhead_us", judge_overhead_us_},
                             {"allowed_excess_us", slack}};
    if (!null_overhead.empty() && call_overhead - empty_overhead > slack)
        throw CandidateFailure{"rejected", "the reported kernel time (" + fmt(k.median_us) + " us median) does not agree with the time the judge observed (" +
                                               fmt(summarize(kwall).median_us) + " us per call, of which about " + fmt(empty_overhead) +
                                               " us is the overhead of an empty call): the kernel's process misreports its timing"};
    // The physical floor: every input must be read from DRAM at least once (L2 was flushed), at no
    // more than the device's peak bandwidth. Outputs may stay in L2, so only inputs count.
    int64_t input_bytes = 0;
    for (const auto& t : spec.inputs) input_bytes += t.bytes();
    if (peak_gbs_ > 0) {
        double floor_us = input_bytes / (peak_gbs_ * 1e3);
        out["floor_us"] = floor_us;
        out["floor_bytes"] = input_bytes;
        if (k.median_us < floor_us && input_bytes > l2_bytes_)
            throw CandidateFailure{"rejected", "the reported kernel time (" + fmt(k.median_us) + " us) is below the physical floor: reading the inputs (" +
                                                   std::to_string(input_bytes) + " bytes) at the GPU's peak bandwidth (" + fmt(peak_gbs_) +
                                                   " GB/s) takes at least " + fmt(floor_us) + " us"};
    }
    for (const auto& w : warnings) out["warnings"].push_back(w);
    return out;
}

}  // namespace kevo_runner
