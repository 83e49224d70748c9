// One timing of a shape set, phase by phase (timing_session.h lists them; timing.cu says how timed
// calls work and why).
#include "timing_session.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include "common/settings.h"
#include "test_hooks.h"

namespace kevo_runner {

TimingSession::TimingSession(Judge& judge, size_t set, bool retry)
    : judge(judge),
      job(*judge.job_),
      set(set),
      spec(job.sets[set]),
      retry(retry),
      flush(job.l2_flush != "none"),
      time_reference(spec.reference_us <= 0),
      t_last(clock::now()),
      rng(job.seed * 7919 + set) {}

TimingSession::~TimingSession() {
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
}

void TimingSession::tlap(const char* what) {
    auto now = clock::now();
    judge.timing_profile_[what] += std::chrono::duration<double>(now - t_last).count();
    t_last = now;
}

void TimingSession::make_copies() {
    tc = &judge.timing_copies(set);
    tlap("copies");
    copies = static_cast<int>(tc->ins.size());
}

void TimingSession::share_buffers() {
    judge.share_copies(*tc);
    if (flush && judge.flush_id_ < 0) {
        judge.flush_id_ = judge.map_in_candidate(judge.flush_);
        judge.proof_id_ = judge.map_in_candidate(judge.proof_);
    }
    flush_us = flush ? judge.measure_flush_us() : 0.0;
    if (flush && judge.judge_empty_us_ <= 0) {  // once per judge: its context's fixed cost of a call
        judge.empty_calls_us(8, true);
        judge.judge_empty_us_ = kevo::empty_call_cost_us(judge.empty_calls_us(kMaxBatch, true));
    }
    tlap("share");
}

void TimingSession::prepare() {
    if (judge.expected_.size() <= set) judge.expected_.resize(set + 1);
    if (judge.expected_[set].desc.empty()) judge.expected_[set] = judge.allocate(spec.outputs, false);
    judge.cuda_ok(cudaEventCreate(&e0), "cudaEventCreate");
    judge.cuda_ok(cudaEventCreate(&e1), "cudaEventCreate");
}

// One batch of n candidate calls, calls first..first+n-1 (negative: warm-up).
void TimingSession::run_batch(int n, int first, bool record) {
    queue_calls(n);
    std::vector<unsigned long long> proofs = prepare_batch(n, first);
    tlap("prepare_batches");
    double wall = 0;
    const Msg r = send_batch(n, wall);
    tlap("batches");
    if (call_wall_us <= 0) call_wall_us = wall / n;
    const double sum = check_reply(r, n);
    if (flush) check_proofs(proofs, n);
    tlap("proofs");
    if (!record) return;
    record_batch(r, n, sum, wall);
}

void TimingSession::queue_calls(int n) {
    // The calls are queued before the inputs get their values: nothing can start on them early.
    for (int j = 0; j < n; ++j) {
        Msg q;
        q.op = OP_QUEUE;
        judge.fill_refs(q, ins(j), outs(j));
        judge.post(q, "while being timed");
    }
}

// New values for the batch's inputs, poisoned outputs, and the first link of the flushes' proofs.
std::vector<unsigned long long> TimingSession::prepare_batch(int n, int first) {
    for (int j = 0; j < n; ++j) {
        judge.fill(ins(j), call_seed(first + j));
        judge.poison(outs(j), 0xFF);
    }
    std::vector<unsigned long long> proofs(n + 1, 0);
    if (flush) {
        proofs[0] = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
        judge.cuda_ok(cudaMemcpyAsync(judge.proof_.data(), proofs.data(), proofs.size() * sizeof(unsigned long long), cudaMemcpyHostToDevice, judge.stream_),
                      "cudaMemcpyAsync(proof)");
    }
    judge.cuda_ok(cudaStreamSynchronize(judge.stream_), "cudaStreamSynchronize");
    return proofs;
}

// The batch runs in the candidate process; `wall` is what the judge observed of it.
Msg TimingSession::send_batch(int n, double& wall) {
    Msg m;
    m.op = OP_TIME_BATCH;
    m.flags = (flush ? FLAG_FLUSH : 0) | (empty_calls ? FLAG_EMPTY : 0);
    m.id = judge.flush_id_;
    m.aux = judge.proof_id_;
    auto t0 = clock::now();
    const double limit_s = call_wall_us > 0 ? std::max(2 * job.call_timeout_s, job.call_timeout_s + 4e-6 * n * call_wall_us) : 2 * job.call_timeout_s;
    Msg r = judge.request(m, limit_s, "while being timed");
    wall = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    return r;
}

// The batch's reply: every call ran, none failed, every time is possible. Returns their sum.
double TimingSession::check_reply(const Msg& r, int n) {
    if (r.rc <= -1000 && r.text[0]) throw CandidateFailure{"runtime_error", std::string("while being timed: ") + r.text};  // the runner's own code
    if (r.rc != 0) throw CandidateFailure{"runtime_error", "kevo_forward returned " + std::to_string(r.rc) + " while being timed" + (r.text[0] ? std::string(": ") + r.text : "")};
    if (r.cuda_error != 0) throw CandidateFailure{"runtime_error", std::string("CUDA error while being timed: ") + r.text};
    if (r.count != n) throw CandidateFailure{"rejected", "the candidate process ran " + std::to_string(r.count) + " of the " + std::to_string(n) + " calls of a timed batch"};
    double sum = 0;
    for (int j = 0; j < n; ++j) {
        double us = r.us[j];
        if (!(us >= 0) || us > 1e9) throw CandidateFailure{"rejected", "the candidate process reported an impossible time"};
        sum += us;
    }
    return sum;
}

void TimingSession::check_proofs(std::vector<unsigned long long>& proofs, int n) {
    // The proofs: the last link and two others at random, recomputed by the judge.
    judge.cuda_ok(cudaMemcpy(proofs.data(), judge.proof_.data(), proofs.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost), "cudaMemcpy(proof)");
    std::vector<int> links{n - 1};
    for (int k = 0; k < 2 && n > 1; ++k) links.push_back(static_cast<int>(rng() % (n - 1)));
    for (int j : links) {
        if (judge.proof_of(proofs[j]) != proofs[j + 1])
            throw CandidateFailure{"rejected", "the L2 flush before timed call " + std::to_string(j + 1) + " of a batch did not run as asked (its proof is wrong): "
                                              "the candidate process tampers with the timing"};
    }
    if (judge.proof_of(kFlushDigestKey) != judge.flush_digest_)
        throw CandidateFailure{"rejected", "the candidate process modified the L2-flush buffer (it holds values the judge chose): it tampers with the timing"};
}

void TimingSession::record_batch(const Msg& r, int n, double sum, double wall) {
    for (int j = 0; j < n; ++j) kt.push_back(r.us[j]);
    batch_n.push_back(n);
    batch_sum.push_back(sum);
    batch_wall.push_back(wall);
    batch_excess.push_back(wall - sum - n * flush_us);
}

void TimingSession::verify(int j, int call) {
    judge.fill(ins(j), call_seed(call));  // the values the call was given, whatever the kernel did to them
    judge.reference_forward(ins(j), judge.expected_[set]);
    json c = judge.compare(set, call_seed(call), outs(j), judge.expected_[set], warnings);
    if (!c.value("pass", false))
        throw CandidateFailure{"mismatch", "timed call " + std::to_string(call + 1) + " (new input values every call) gave wrong outputs: " +
                                               c.value("message", std::string()) +
                                               "\n(a kernel that remembers earlier calls' results, or works only on its first calls, fails here)"};
}

void TimingSession::reference_call(RefCall call, int j, int seed_of, std::vector<double>* times) {
    judge.fill(ins(j), call_seed(seed_of));
    if (flush) judge.flush_l2(judge.judge_proof_, 0);
    auto in = ins(j).abi();
    judge.cuda_ok(cudaEventRecord(e0, judge.stream_), "cudaEventRecord");
    judge.cuda_ok(judge.fence_.begin(e0), "fencing the context");
    int rc = call(in.data(), static_cast<int>(in.size()), judge.stream_);
    judge.cuda_ok(judge.fence_.end(judge.stream_), "fencing the context");
    judge.cuda_ok(cudaEventRecord(e1, judge.stream_), "cudaEventRecord");
    judge.cuda_ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
    judge.ref_release_();
    if (rc != 0) throw SetupFailure{std::string("the reference failed while being timed: ") + judge.ref_error_()};
    float ms = 0;
    judge.cuda_ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    if (times) times->push_back(ms * 1000.0);
}

void TimingSession::reference_calls(int n, int first, bool record) {
    for (int j = 0; j < n; ++j) reference_call(judge.ref_call_, j, first + j, record ? &rt : nullptr);
    tlap("reference");
}

void TimingSession::warm_up() {
    t_start = clock::now();
    warm = std::min(copies, std::max(1, job.warmup));
    run_batch(1, -1000, false);
    if (warm > 1) run_batch(std::min(warm - 1, std::max(1, static_cast<int>(job.timing_budget_s * 0.1e6 / call_wall_us))), -999, false);
    if (time_reference) reference_calls(warm, -1000, false);
}

void TimingSession::time_batches() {
    limits.min_trials = job.min_timing_trials;
    limits.max_trials = job.timing_trials;
    limits.target_ci = job.target_ci;
    limits.budget_s = job.timing_budget_s;
    limits.extend_s = job.extend_timing_s;
    stop = kevo::TrialStop::kContinue;
    while (stop == kevo::TrialStop::kContinue) {
        const int n = kevo::next_batch_size(limits, calls, copies, call_wall_us);
        // Alternate who goes first so that drift affects both alike.
        if (time_reference && batches % 2 == 1) reference_calls(n, calls, true);
        run_batch(n, calls, true);
        for (int j = 0; j < n; ++j) {
            if ((calls == 0 && j == 0) || j == n - 1 || coin(rng) < job.verify_fraction) {
                verify(j, calls + j);
                ++verified;
            }
        }
        tlap("verify");
        if (time_reference && batches % 2 == 0) reference_calls(n, calls, true);
        calls += n;
        ++batches;
        Summary ks = summarize(kt), rs = time_reference ? summarize(rt) : Summary{};
        stop = kevo::next_trial_step(limits, calls, std::chrono::duration<double>(clock::now() - t_start).count(), ks,
                                     time_reference ? &rs : nullptr);
    }
    stopped_early = stop == kevo::TrialStop::kPrecise && calls < limits.most();
    reduced = stop == kevo::TrialStop::kBudget && calls < limits.most();
}

void TimingSession::dump_diagnostics() {
    const char* dump = kevo::env(kevo::EnvVar::kTimingDump);  // diagnostics (validate.cpp passes it on)
    if (!dump) return;
    // And what an empty call costs in each process: one batch of the runner's empty kernel in
    // the candidate process, as many in the judge (after the same flushes).
    const auto saved = std::make_tuple(kt, batch_n, batch_wall, batch_excess, batch_sum);
    kt.clear();
    empty_calls = true;
    run_batch(copies, 0, true);
    empty_calls = false;
    std::vector<double> kernel_empty = kt;
    std::tie(kt, batch_n, batch_wall, batch_excess, batch_sum) = saved;
    std::vector<double> judge_empty = judge.empty_calls_us(copies, flush);
    if (FILE* f = std::fopen(dump, "a")) {
        std::string line = json{{"label", spec.label}, {"stop_reason", kevo::trial_stop_name(stop)}, {"kernel_us", kt}, {"reference_us", rt},
                                {"candidate_empty_us", kernel_empty}, {"judge_empty_us", judge_empty}}.dump() + "\n";
        std::fwrite(line.data(), 1, line.size(), f);
        std::fclose(f);
    }
}

void TimingSession::summarize_kernel() {
    k = summarize(kt);
    // Work moved between the calls of a batch (one call doing later calls' work while they do
    // nothing) would leave the interquartile mean only idle calls: the time is at least the lowest
    // batch mean over kUnevenCallsAllowance (trials.h).
    middle_us = k.time_us;  // the physical floor below judges this, the lowest figure
    even = kevo::even_calls_floor(k.time_us, batch_sum, batch_n, kUnevenCallsAllowance);
    if (even.bound && retry)
        throw TimeAgain{"uneven_calls", json{{"middle_us", middle_us}, {"lowest_batch_mean_us", even.lowest_batch_mean_us}, {"batches", batch_n.size()}}};
    if (even.bound)
        warnings.push_back("the timed calls' times are uneven: a batch's calls took " + fmt(even.lowest_batch_mean_us) + " us each on average, "
                           "but the middle half of all calls " + fmt(k.time_us) + " us (some calls did others' work?); the time is at least the batch mean over " +
                           fmt(kUnevenCallsAllowance) + ", " + fmt(even.time_us) + " us");
    k.time_us = even.time_us;
    // Each process's CUDA context launches at its own fixed cost, and the candidate's calls run in
    // its process while the reference's run in the judge's: the kernel's time is put on the judge's
    // footing by the difference between an empty call in each (both timed after an L2 flush, the
    // candidate's by runner code before its library was loaded, under the GPU lock: nothing of the
    // candidate can sway it). On the H200 the difference is 0.4-1.1 us (the candidate's calls cost
    // more than the judge's), and its shift from one candidate process to the next moved a 4.5 us
    // set by up to 4%. kMaxLaunchCorrectionUs bounds it (a sanity limit).
    measured_us = k.time_us;
    lc = kevo::correct_launch_cost(measured_us, judge.candidate_empty_us_, judge.judge_empty_us_, flush, kMaxLaunchCorrectionUs);
    if (lc.bounded)
        warnings.push_back("an empty call cost " + fmt(judge.candidate_empty_us_) + " us in the candidate process and " + fmt(judge.judge_empty_us_) +
                           " us in the judge; the kernel's time was corrected by the most allowed, " + fmt(lc.correction_us) + " us");
    k.time_us = lc.time_us;
    out = json{{"shape_set", set}, {"label", spec.label}, {"weight", spec.weight}, {"trials", calls}, {"batches", batches},
               {"stopped_early", stopped_early}, {"trials_reduced_to_fit_budget", reduced},
               {"stop_reason", kevo::trial_stop_name(stop)}, {"target_ci", job.target_ci}, {"verified_calls", verified},
               {"buffer_copies", copies}, {"l2_flush", job.l2_flush}, {"l2_flush_bytes", flush ? judge.flush_.size : 0}, {"l2_flush_us", flush_us},
               {"call_fence", judge.fence_.mode()}};
    out["kernel"] = k.to_json();
    out["kernel"]["measured_us"] = measured_us;
    out["kernel"]["lowest_batch_mean_us"] = even.lowest_batch_mean_us;
    out["kernel"]["uneven_calls"] = even.bound;
    out["uneven_calls"] = json{{"floor_us", even.floor_us}, {"bound", even.bound}};
    out["launch_cost"] = json{{"candidate_empty_us", judge.candidate_empty_us_}, {"judge_empty_us", judge.judge_empty_us_}, {"correction_us", lc.correction_us},
                              {"applied", lc.applied}, {"bounded", lc.bounded}};
}

void TimingSession::reference_figure() {
    ref_time = spec.reference_us;
    if (time_reference) {
        Summary r = summarize(rt);
        out["reference"] = r.to_json();
        ref_time = r.time_us;
        out["reference_source"] = "measured";
    } else if (job.best_speedup > 0 && k.time_us > 0 && ref_time / k.time_us > job.best_speedup) {
        remeasure_reference();
    } else {
        out["reference"] = json{{"time_us", ref_time}};
        out["reference_source"] = "earlier in this run";
    }
    out["speedup"] = k.time_us > 0 ? ref_time / k.time_us : 0;
}

// This result would become the best: measure the reference again now, so that a drift since
// it was last timed cannot make a new best.
void TimingSession::remeasure_reference() {
    // As precisely as a timed reference (the same stopping rule), alone on the GPU.
    rt.clear();
    const auto r0 = clock::now();
    for (int done = 0;;) {
        const int n = kevo::next_batch_size(limits, done, copies, 0);
        reference_calls(n, done, true);
        done += n;
        Summary rs = summarize(rt);
        if (kevo::next_trial_step(limits, done, std::chrono::duration<double>(clock::now() - r0).count(), rs, nullptr) != kevo::TrialStop::kContinue)
            break;
    }
    Summary r = summarize(rt);
    out["reference"] = r.to_json();
    out["reference_source"] = "re-measured (the result beats the best so far)";
    ref_time = r.time_us;
}

// Where LibTorch's defaults run the reference in TF32, the reference as correctness judges it
// (strict fp32) is timed too, for the report only: like the reference (after a flush, between the
// context fence's events), but a few calls (their median) and once per judge.
void TimingSession::strict_reference() {
    if (!(judge.tf32_defaults_ && judge.ref_call_strict_)) return;
    std::string key = job.l2_flush;
    for (const auto& t : spec.inputs) {
        key += "|" + std::to_string(t.dtype);
        for (int64_t d : t.sizes) key += "," + std::to_string(d);
    }
    auto it = judge.strict_times_.find(set);
    if (it == judge.strict_times_.end() || it->second.first != key) {
        json figures = time_strict_reference();
        it = judge.strict_times_.insert_or_assign(set, std::make_pair(key, figures)).first;
        out["reference_strict"] = figures;
        out["reference_strict"]["source"] = "measured";
        tlap("reference_strict");
    } else {
        out["reference_strict"] = it->second.second;
        out["reference_strict"]["source"] = "earlier in this judge process";
    }
    const double strict_us = out["reference_strict"].value("time_us", 0.0);
    if (strict_us > 0 && k.time_us > 0) out["speedup_vs_strict_fp32"] = strict_us / k.time_us;
}

json TimingSession::time_strict_reference() {
    json figures;
    try {
        std::vector<double> st;
        for (int c = 0; c < std::min(copies, 2); ++c) reference_call(judge.ref_call_strict_, c, -2000 + c, nullptr);  // its own plans, loaded once
        const auto s0 = clock::now();
        const double budget_s = std::max(0.5, 0.05 * job.timing_budget_s);
        for (int c = 0; c < kStrictMostCalls; ++c) {
            if (c >= kStrictFewestCalls && std::chrono::duration<double>(clock::now() - s0).count() > budget_s) break;
            reference_call(judge.ref_call_strict_, c % copies, 20000 + c, &st);
        }
        Summary r = summarize(st);
        figures = r.to_json();
        figures["time_us"] = r.median_us;
        figures["statistic"] = "median";
    } catch (const SetupFailure& f) {  // a figure for the report: its failure fails nothing
        figures = json{{"error", f.message}};
    }
    return figures;
}

void TimingSession::wall_check() {
    // Cross-check with the wall clock. For each batch the judge knows what it observed (wall), what
    // the candidate reported (the sum of its calls' times) and what the proven flushes cost; the
    // rest is the batch's fixed cost (two messages, a GPU context switch, the first launch) and a
    // few microseconds per call (launches, events). A process that under-reports its kernels'
    // times, or works outside its events, leaves more than that.
    double excess = 0, allowed = 0;
    for (size_t b = 0; b < batch_n.size(); ++b) {
        excess += batch_excess[b];
        allowed += job.wall_batch_allow_us + batch_n[b] * job.wall_call_allow_us;
    }
    allowed += 0.03 * k.mean_us * static_cast<double>(kt.size());
    out["wall_check"] = json{{"batch_wall_median_us", summarize(batch_wall).median_us},
                             {"batch_excess_median_us", summarize(batch_excess).median_us},
                             {"excess_us", excess},
                             {"allowed_us", allowed},
                             {"allowance", {{"per_batch_us", job.wall_batch_allow_us}, {"per_call_us", job.wall_call_allow_us}, {"fraction", 0.03}}}};
    // KEVO_FAULT_WALL_CHECK (a test hook: test builds only; validate.cpp passes it on): the first
    // attempt fails the check whatever it measured, so the retry is exercised.
    if ((excess > allowed || test_hook(kevo::EnvVar::kFaultWallCheck)) && retry) throw TimeAgain{"wall_check", out["wall_check"]};
    if (excess > allowed)
        throw CandidateFailure{"rejected", "the reported kernel times (" + fmt(measured_us) + " us) do not agree with the time the judge observed, on the set's second timing: " +
                                               std::to_string(batch_n.size()) + " batches of " + std::to_string(kt.size()) + " calls in all took " + fmt(excess) +
                                               " us more than the reported calls and the proven L2 flushes, where launches and messages explain at most " + fmt(allowed) +
                                               " us (" + fmt(job.wall_batch_allow_us) + " us per batch, " + fmt(job.wall_call_allow_us) + " us per call, 3% of the calls' time). "
                                               "Either the kernel's process works outside its timed calls or under-reports them, or other work on the GPU delayed the batches"};
}

void TimingSession::physical_floor() {
    // The physical floor: every input must be read from DRAM at least once (L2 was flushed), and
    // what of the outputs does not fit in L2 must be written back within the call, at no more than
    // the device's peak bandwidth.
    int64_t input_bytes = 0, output_bytes = 0;
    for (const auto& t : spec.inputs) input_bytes += t.bytes();
    for (const auto& t : spec.outputs) output_bytes += t.bytes();
    const int64_t floor_bytes = input_bytes + std::max<int64_t>(0, output_bytes - judge.l2_bytes_);
    if (judge.peak_gbs_ > 0) {
        double floor_us = floor_bytes / (judge.peak_gbs_ * 1e3);
        out["floor_us"] = floor_us;
        out["floor_bytes"] = floor_bytes;
        if (middle_us < floor_us && floor_bytes > judge.l2_bytes_)
            throw CandidateFailure{"rejected", "the reported kernel time (" + fmt(middle_us) + " us) is below the physical floor: reading the inputs and writing back "
                                               "the outputs that do not fit in L2 (" + std::to_string(floor_bytes) + " bytes) at the GPU's peak bandwidth (" +
                                               fmt(judge.peak_gbs_) + " GB/s) takes at least " + fmt(floor_us) + " us"};
    }
}

json TimingSession::result() {
    for (const auto& w : warnings) out["warnings"].push_back(w);
    return out;
}

}  // namespace kevo_runner
