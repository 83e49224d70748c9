// The judge's side of the device's memory ledger (validate/gpu_ledger.h, issue 36): what a job will
// allocate is reserved before it is allocated, and the timing copies a judge keeps between jobs are
// bounded for the whole device (all judges, every search and worker on it), not per judge.
// A ledger that cannot be used (its directory unwritable) leaves the judge as it was: sizes from
// cudaMemGetInfo alone.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "judge.h"

namespace kevo_runner {

// All judges' kept copies on one device together: at most this share of the ledger's budget.
constexpr uint64_t kKeptShareDivisor = 4;

kevo::MemoryLedger* Judge::ledger() {
    if (ledger_) return ledger_.get();
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return nullptr;
    // The same key as the validator's GPU lock (validate.cpp lock_device): the device's UUID.
    const std::string key = kevo::GpuLock::device_key(device_json_.value("uuid", std::string()), device_);
    try {
        ledger_ = std::make_unique<kevo::MemoryLedger>(key, total_bytes);
    } catch (const std::exception&) {
        return nullptr;
    }
    return ledger_.get();
}

// The job's own buffers (every set's outputs and expected outputs, its inputs and the previous
// set's, which the trials keep alive), reserved before the trials allocate them. Jobs on one GPU
// take turns under its lock, so this waits only for users outside it; after the wait it goes on
// unreserved (as before the ledger: an allocation that fails is reported outside the kernel).
void Judge::reserve_job_memory(const Job& job) {
    job_reserved_.reset();
    kevo::MemoryLedger* l = ledger();
    if (!l) return;
    uint64_t bytes = 0, largest_inputs = 0;
    for (const auto& set : job.sets) {
        uint64_t in = 0, out = 0;
        for (const auto& t : set.inputs) in += static_cast<uint64_t>(std::max<int64_t>(t.bytes(), 1));
        for (const auto& t : set.outputs) out += static_cast<uint64_t>(std::max<int64_t>(t.bytes(), 1));
        bytes += in + 2 * out;
        largest_inputs = std::max(largest_inputs, in);
    }
    bytes += largest_inputs;
    if (bytes > l->budget()) {  // it could never be admitted: a setting to change, not a wait
        auto gib = [](uint64_t b) { return fmt(static_cast<double>(b) / (1ull << 30)); };
        const std::string what = job.label.empty() ? std::string("this task") : "'" + job.label + "'";
        throw SetupFailure{"validating " + what + " needs " + gib(bytes) +
                           " GiB of GPU memory (every shape set's inputs and twice its outputs), more than the " +
                           gib(l->budget()) + " GiB the memory ledger shares out (KERNELEVO_GPU_MEMORY_BYTES or the "
                           "device's memory, less KERNELEVO_GPU_MEMORY_MARGIN_BYTES); raise that budget or use smaller "
                           "shapes"};
    }
    kevo::LedgerWait w;
    w.timeout_s = std::max(5.0, job.call_timeout_s);
    try {
        // Idle judges' kept copies do not shrink while this one waits: it waits only for what can
        // be given back (other jobs' reservations), never longer than the call timeout.
        const uint64_t kept = l->reserved("kept");
        const uint64_t ceiling = l->budget() > kept ? l->budget() - kept : 0;
        if (ceiling > 0) job_reserved_ = l->reserve(std::min(bytes, ceiling), bytes, "job", w);
    } catch (const std::exception&) {
    }
}

// How many timing copies of `set_bytes` each this judge may keep: as many as the device's bound on
// kept copies still allows (fewer under pressure), at least one (the timing needs one). When not
// even one fits in the bound, the one copy is made for this job only and given back at its end.
int Judge::copies_within_ledger(TimingCopies& tc, int64_t set_bytes, int copies) {
    tc.kept.reset();
    kevo::MemoryLedger* l = ledger();
    if (!l || set_bytes <= 0) return copies;
    const uint64_t one = static_cast<uint64_t>(set_bytes);
    try {
        tc.kept = l->reserve(one, one * static_cast<uint64_t>(copies), "kept", {}, l->budget() / kKeptShareDivisor);
    } catch (const std::exception&) {
        return copies;
    }
    if (!tc.kept) return 1;
    return std::max(1, std::min(copies, static_cast<int>(tc.kept->bytes() / one)));
}

}  // namespace kevo_runner

namespace kevo_runner {

// Between the checks and the timing (issue 48): the trials' buffers and their reservation go back
// before the judge waits for its turn to time, so that judges waiting to time hold their kept timing
// copies only: a judge checking beside them never waits on the ledger for memory a waiting judge
// holds while that one waits for the checks to end.
void Judge::release_trial_buffers() {
    for (auto* group : {&trial_inputs_, &outputs_}) {
        for (auto& t : *group) unshare(t), t.free();
        group->clear();
    }
    for (auto& t : expected_) t.free();
    expected_.clear();
    job_reserved_.reset();
}

// With the GPU held exclusively (no other judge allocates now): the timed sets' expected outputs.
void Judge::reserve_timing_memory(const Job& job) {
    kevo::MemoryLedger* l = ledger();
    if (!l) return;
    uint64_t bytes = 0;
    for (const auto& set : job.sets)
        if (set.timed)
            for (const auto& t : set.outputs) bytes += static_cast<uint64_t>(std::max<int64_t>(t.bytes(), 1));
    try {  // tried once (no wait with the GPU held): what did not fit goes on unreserved, as before the ledger
        job_reserved_ = l->reserve(bytes, bytes, "job");
    } catch (const std::exception&) {
    }
}

}  // namespace kevo_runner
