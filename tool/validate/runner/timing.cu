// Timed calls (see judge.h), in batches. Before a batch the judge gives each of N copies of the
// inputs new values and poisons their outputs; the candidate process then runs the N calls back to
// back on its stream, each after an L2 flush that leaves a proof (device_ops.cuh), with CUDA events
// around each kevo_forward, and reports the N times. One batch is one turn of the GPU for the
// candidate's context: no context switch falls inside a call, so its events are precise. The judge
// then checks the proofs and a random subset of the outputs (so memoizing across calls cannot pay),
// cross-checks the reported times against the wall-clock time it observed for the batch minus the
// proven flushes, and rejects times below the physical floor. A set's time is the interquartile
// mean of its calls, at least its lowest batch mean over kUnevenCallsAllowance (work moved between
// a batch's calls cannot hide). The reference is timed by the judge itself in its own context,
// batch for batch, with the same flush. The N copies of a set lie in one allocation (the arena),
// kept for the judge's life and mapped once into each candidate process. One timing of a set runs
// in named phases: a TimingSession (timing_session.h) that Judge::time_set_once drives.
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <tuple>
#include <string>

#include "judge.h"
#include "timing_session.h"

namespace kevo_runner {

void Judge::flush_l2(unsigned long long* proof, int j) {
    l2_flush_proof<<<flush_blocks_, 512, 0, stream_>>>(static_cast<const uint4*>(flush_.data()), flush_.size / 16, proof, j);
    cuda_ok(cudaGetLastError(), "l2_flush_proof");
}

unsigned long long Judge::proof_of(unsigned long long key) {
    unsigned long long k[2] = {key, 0};
    cuda_ok(cudaMemcpyAsync(judge_proof_, k, sizeof k, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync(proof)");
    flush_l2(judge_proof_, 0);
    cuda_ok(cudaMemcpyAsync(k, judge_proof_, sizeof k, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync(proof)");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return k[1];
}

double Judge::measure_flush_us() {
    if (flush_us_ >= 0) return flush_us_;
    cudaEvent_t e0, e1;
    cuda_ok(cudaEventCreate(&e0), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&e1), "cudaEventCreate");
    std::vector<double> us;
    for (int i = 0; i < 9; ++i) {
        cuda_ok(cudaEventRecord(e0, stream_), "cudaEventRecord");
        flush_l2(judge_proof_, 0);
        cuda_ok(cudaEventRecord(e1, stream_), "cudaEventRecord");
        cuda_ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
        float ms = 0;
        cuda_ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
        if (i >= 2) us.push_back(ms * 1000.0);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    flush_us_ = summarize(us).median_us;
    return flush_us_;
}

void Judge::post(const Msg& m, const char* what) {
    if (send_msg(sock_, m, -1, job_->call_timeout_s)) return;
    request(m, job_->call_timeout_s, what);  // reports why: the process is gone or stopped reading
}

Judge::TimingCopies& Judge::timing_copies(size_t set) {
    const Job& job = *job_;
    const auto& spec = job.sets[set];
    TimingCopies& tc = timing_copies_[set];
    auto same_shapes = [](const std::vector<JobTensor>& a, const std::vector<JobTensor>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const JobTensor& x, const JobTensor& y) { return x.dtype == y.dtype && x.sizes == y.sizes; });
    };
    if (!tc.ins.empty() && tc.requested == job.timing_copies && same_shapes(spec.inputs, tc.ins[0].desc) && same_shapes(spec.outputs, tc.outs[0].desc)) {
        for (auto& t : tc.ins) t.desc = spec.inputs, zero_slack(t);  // the same shapes; names and inits from this job
        for (auto& t : tc.outs) t.desc = spec.outputs, zero_slack(t);
        return tc;
    }
    release_copies(tc);
    // N copies of the inputs and outputs at different addresses, one per call of a batch: every call
    // of a batch gets its own buffers and values, and its inputs were last touched before the batch.
    // Each tensor starts at a multiple of the allocation granularity, as a separate allocation would.
    auto rounded = [&](const JobTensor& t) { return shareable_size(static_cast<size_t>(std::max<int64_t>(t.bytes(), 1)), device_); };
    int64_t set_bytes = 0;
    for (const auto& t : spec.inputs) set_bytes += static_cast<int64_t>(rounded(t));
    for (const auto& t : spec.outputs) set_bytes += static_cast<int64_t>(rounded(t));
    size_t free_mem = 0, total_mem = 0;
    cuda_ok(cudaMemGetInfo(&free_mem, &total_mem), "cudaMemGetInfo");
    // All sets' kept copies together take at most a quarter of the device (and of what is free), so
    // a task with many sets leaves the candidate, the reference and other validators their room.
    int64_t kept_bytes = 0;
    for (const auto& [other, copies_of_other] : timing_copies_) kept_bytes += static_cast<int64_t>(copies_of_other.arena.size);
    const int64_t room = std::min<int64_t>(static_cast<int64_t>(free_mem / 4), static_cast<int64_t>(total_mem / 4) - kept_bytes);
    int copies = static_cast<int>(std::max<int64_t>(
        1, std::min<int64_t>({static_cast<int64_t>(job.timing_copies), static_cast<int64_t>(kMaxBatch), room / std::max<int64_t>(set_bytes, 1)})));
    copies = copies_within_ledger(tc, set_bytes, copies);  // and all judges' kept copies on this device within their bound
    std::string e = create_shared(tc.arena, static_cast<size_t>(set_bytes) * copies, device_);
    if (!e.empty()) {
        release(tc.arena);
        timing_copies_.erase(set);
        throw SetupFailure{e + " (the timing copies of shape set " + std::to_string(set) + ")"};
    }
    size_t offset = 0;
    auto views = [&](const std::vector<JobTensor>& desc) {
        Tensors t;
        t.desc = desc;
        t.view = true;
        for (const auto& d : desc) {
            Mapping m;
            m.ptr = tc.arena.ptr + offset;
            m.size = rounded(d);
            t.mem.push_back(m);
            t.ids.push_back(-1);
            t.offsets.push_back(offset);
            offset += m.size;
        }
        zero_slack(t);
        return t;
    };
    for (int c = 0; c < copies; ++c) {
        tc.ins.push_back(views(spec.inputs));
        tc.outs.push_back(views(spec.outputs));
    }
    tc.requested = job.timing_copies;
    return tc;
}

void Judge::share_copies(TimingCopies& tc) {
    if (tc.arena_id < 0) tc.arena_id = map_in_candidate(tc.arena);
    for (auto* group : {&tc.ins, &tc.outs})
        for (auto& t : *group) std::fill(t.ids.begin(), t.ids.end(), tc.arena_id);
}

void Judge::release_copies(TimingCopies& tc) {
    unmap_in_candidate(tc.arena_id);
    for (auto* group : {&tc.ins, &tc.outs})
        for (auto& t : *group) t.free();
    release(tc.arena);
    tc.kept.reset();  // its bytes back in the ledger
    tc = TimingCopies{};
}

json Judge::time_set(size_t set) {
    try {
        return time_set_once(set, true);
    } catch (const TimeAgain& first) {
        json out = time_set_once(set, false);
        out[first.key]["first_attempt"] = first.figures;
        return out;
    }
}

// The phases of one timing, in order (timing_session.h says what each does).
json Judge::time_set_once(size_t set, bool retry) {
    TimingSession session(*this, set, retry);
    session.make_copies();
    session.share_buffers();
    session.prepare();
    session.warm_up();
    session.time_batches();
    session.dump_diagnostics();
    session.summarize_kernel();
    session.reference_figure();
    session.strict_reference();
    session.wall_check();
    session.physical_floor();
    return session.result();
}

}  // namespace kevo_runner
