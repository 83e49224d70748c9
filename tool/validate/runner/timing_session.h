// One timing of a shape set (timing.cu says how timed calls work), in the phases it runs in.
// Judge::time_set_once runs them in this order:
//   make_copies       the set's timing copies (kept for the judge's life), named as this job names them
//   share_buffers     the copies and the L2-flush buffers mapped in the candidate process; what a flush
//                     and the judge's empty call cost (the judge's side of the launch-cost correction)
//   prepare           the expected outputs of verified calls, the reference calls' events
//   warm_up           the candidate's warm-up batches, then the reference's warm-up calls
//   time_batches      timed batches until the stopping rule (trials.h) says stop, a random subset of
//                     each batch's outputs verified, the reference's batches alternating with them
//   dump_diagnostics  KEVO_TIMING_DUMP only: the figures and an empty call's cost in each process
//   summarize_kernel  the kernel's time: interquartile mean, uneven-calls floor, launch-cost correction
//   reference_figure  the reference's time: measured here, re-measured for a new best, or given
//   strict_reference  the strict fp32 reference's time, for the report (where the defaults run TF32)
//   wall_check        the reported times against the wall clock the judge observed
//   physical_floor    no kernel reads its inputs from DRAM faster than the peak bandwidth
//   result            the set's figures (JSON), with the warnings
// A phase throws CandidateFailure (the candidate cheated or failed), SetupFailure (the judge or the
// reference failed) or, on a first attempt, TimeAgain (time_set times the set once more).
#pragma once
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "judge.h"

namespace kevo_runner {

// A timing that is repeated once: the wall-clock cross-check failed, or the calls' times were
// uneven. A host hiccup (the judge or the candidate process descheduled for a few milliseconds
// inside a batch) does either as surely as hidden or moved work, but only a kernel that hides or
// moves work does it twice. On the H200 one of about twenty validations of good.cu was rejected
// after its sets had been timed (2026-12-03), which only the wall check does there; its message
// was not kept.
struct TimeAgain {
    const char* key;  // where the first attempt's figures go: out[key]["first_attempt"]
    json figures;
};

struct TimingSession {
    using clock = std::chrono::steady_clock;
    // A reference entry point: kevo_ref_call or kevo_ref_call_strict.
    using RefCall = int (*)(const kevo_tensor*, int, cudaStream_t);

    // `retry`: a failed wall-clock cross-check, or calls whose times are uneven, throw TimeAgain
    // instead of deciding.
    TimingSession(Judge& judge, size_t set, bool retry);
    ~TimingSession();
    TimingSession(const TimingSession&) = delete;
    TimingSession& operator=(const TimingSession&) = delete;

    // The phases, in the order they run (above).
    void make_copies();
    void share_buffers();
    void prepare();
    void warm_up();
    void time_batches();
    void dump_diagnostics();
    void summarize_kernel();
    void reference_figure();
    void strict_reference();
    void wall_check();
    void physical_floor();
    json result();

private:
    // One batch of n candidate calls, calls first..first+n-1 (negative: warm-up).
    void run_batch(int n, int first, bool record);
    void queue_calls(int n);
    std::vector<unsigned long long> prepare_batch(int n, int first);
    Msg send_batch(int n, double& wall);
    double check_reply(const Msg& r, int n);
    void check_proofs(std::vector<unsigned long long>& proofs, int n);
    void record_batch(const Msg& r, int n, double sum, double wall);
    // Checks the outputs of timed call `call`, made on copy j.
    void verify(int j, int call);
    // One timed call of a reference entry point on copy j with the values of call `seed_of`; its
    // time is added to `times` unless null.
    void reference_call(RefCall call, int j, int seed_of, std::vector<double>* times);
    void reference_calls(int n, int first, bool record);
    void remeasure_reference();
    json time_strict_reference();
    uint64_t call_seed(int call) const { return job.seed + 10007 + static_cast<uint64_t>(call) * 31; }
    void tlap(const char* what);  // where timing's time goes, summed over sets
    Tensors& ins(int j) { return tc->ins[j]; }   // copy j's inputs
    Tensors& outs(int j) { return tc->outs[j]; }  // copy j's outputs

    Judge& judge;
    const Job& job;
    const size_t set;
    const kevo::JobShapeSet& spec;
    const bool retry;
    const bool flush;
    const bool time_reference;  // timed here, batch for batch (else its time is given)
    clock::time_point t_last, t_start;
    Judge::TimingCopies* tc = nullptr;
    int copies = 0;
    double flush_us = 0;
    std::vector<std::string> warnings;
    std::mt19937_64 rng;
    std::random_device rd;
    std::uniform_real_distribution<double> coin{0, 1};
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    // The recorded batches.
    std::vector<double> kt, batch_wall, batch_excess, batch_sum;
    bool empty_calls = false;  // diagnostics: the candidate process times its empty kernel instead
    std::vector<int> batch_n;
    // How long one call takes, wall clock, from the first warm-up call: a batch's watchdog is sized by
    // it (a hang is still caught within seconds), and so is a batch of slow calls (the time budget).
    double call_wall_us = 0;
    std::vector<double> rt;  // the reference's timed calls
    int warm = 0, verified = 0, calls = 0, batches = 0;
    kevo::TrialLimits limits;
    kevo::TrialStop stop = kevo::TrialStop::kContinue;
    bool stopped_early = false, reduced = false;
    // The kernel's figures (summarize_kernel) and the set's (out).
    Summary k;
    double middle_us = 0, measured_us = 0, ref_time = 0;
    kevo::EvenCallsFloor even;
    kevo::LaunchCorrection lc;
    json out;
};

}  // namespace kevo_runner
