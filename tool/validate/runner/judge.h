// The judge: the trusted side of a validation (see runner.h). It owns the GPU buffers, fills the
// inputs, runs the reference, starts the sandboxed candidate process and checks what it did.
#pragma once
#include <cuda_runtime.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "channel.h"
#include "context_fence.h"
#include "device_ops.cuh"
#include "validate/gpu_ledger.h"
#include "validate/gpu_lock.h"
#include "runner.h"
#include "shared_buffer.h"
#include "validate/trials.h"

namespace kevo_runner {

using kevo::Job;
using kevo::JobResult;
using kevo::JobTensor;
using json = nlohmann::json;

// The candidate failed: status is one of runtime_error, mismatch, rejected, timeout, compile_error.
struct CandidateFailure {
    std::string status, message;
};
// The reference or the runner failed: not the candidate's fault.
struct SetupFailure {
    std::string message;
};

// One set of tensors in memory the candidate process can map (or, for expected outputs, judge-only).
struct Tensors {
    std::vector<JobTensor> desc;
    std::vector<Mapping> mem;
    std::vector<int> ids;           // buffer ids in the candidate process (-1: not shared)
    std::vector<uint64_t> offsets;  // where each tensor starts in that buffer
    bool view = false;              // mem are views into an arena another object owns: free() only forgets them
    std::vector<kevo_tensor> abi() const;  // judge-side descriptors
    void free();
};

// The strict fp32 reference's timed calls (timing_session.cu), for the report only: at least the fewest,
// then more while they take under a twentieth of the timing budget (0.5 s at least), at most the most.
constexpr int kStrictFewestCalls = 5, kStrictMostCalls = 15;

using Summary = kevo::TimingSummary;  // validate/trials.h, with the stopping rule
inline Summary summarize(std::vector<double> us) { return kevo::summarize_times(std::move(us)); }

class Judge {
public:
    Judge();
    ~Judge();
    JobResult run(const Job& job);

private:
    friend struct TimingSession;  // timing_session.h: one timing of a set, phase by phase
    // a job's parts (run)
    bool correctness_trials(const Job& job, JobResult& result);  // false: a mismatch (the verdict is in result)
    void warn_constant_outputs(const Job& job, JobResult& result);
    void time_sets(const Job& job, JobResult& result);
    void note_interference(const CandidateFailure& f, JobResult& result, uint64_t started_us);
    void end_job(JobResult& result);
    // setup
    void init_device(JobResult& r);
    void load_reference(const Job& job);
    void spawn_candidate(const Job& job);
    void admit_candidate(const Job& job, JobResult& r);
    std::vector<std::string> candidate_argv(const Job& job) const;
    void read_output(int rfd);  // the candidate process's stdout and stderr into output_
    void await_hello(const Job& job, JobResult& r, const std::string& exe);
    void stop_candidate(JobResult& r);
    void kill_candidate(bool reap = true);  // its session and PID namespace too; reaps it unless told not to
    // candidate requests
    Msg request(Msg m, double timeout_s, const char* what, int fd = -1);
    void post(const Msg& m, const char* what);  // a message that has no reply
    int map_in_candidate(const Mapping& mem);  // OP_MAP: returns the buffer's id there
    void share(Tensors& t);
    void unshare(Tensors& t);
    void unmap_in_candidate(int& id);  // OP_UNMAP; id becomes -1
    void fill_refs(Msg& m, const Tensors& in, const Tensors& out) const;
    // One kevo_forward call (FLAG_GATED: behind the gate); a non-zero return is the candidate's failure.
    void call_candidate(const Tensors& in, const Tensors& out, int32_t flags, const std::string& when);
    // OP_SYNC or OP_DEVSYNC; a CUDA error reported is the candidate's failure. Returns the reply.
    Msg sync_candidate(int32_t op, const std::string& what);
    // device work of the judge
    Tensors allocate(const std::vector<JobTensor>& desc, bool shared);
    void fill(Tensors& t, uint64_t seed);
    void poison(Tensors& t, unsigned char pattern);
    std::vector<unsigned long long> checksums(const Tensors& t, cudaStream_t s);
    void reference_forward(const Tensors& in, Tensors& expected);
    json compare(size_t set, uint64_t seed, const Tensors& out, const Tensors& expected, std::vector<std::string>& warnings);
    void flush_l2(unsigned long long* proof, int j);  // on the judge's stream (reference calls, checks)
    double measure_flush_us();
    unsigned long long proof_of(unsigned long long key);  // one flush's proof, computed by the judge
    // phases
    json correctness_trial(size_t set, Tensors& in, uint64_t seed, unsigned char pattern, std::vector<std::string>& warnings);
    void first_call(const Tensors& in, const Tensors& out);  // ungated, once per candidate process
    void gated_call(const Tensors& in, const Tensors& out, const std::vector<unsigned long long>& poisoned, json& check,
                    std::vector<std::string>& warnings);
    void check_side_effects(const Tensors& in, const Tensors& out, const std::vector<unsigned long long>& before);
    json time_set(size_t set);
    // One timing of a set (a TimingSession's phases). `retry`: a failed wall-clock cross-check, or
    // calls whose times are uneven, throw TimeAgain (time_set times the set once more) instead of deciding.
    json time_set_once(size_t set, bool retry);
    // Diagnostics (KEVO_TIMING_DUMP): n empty-kernel calls timed like reference calls (after a flush).
    std::vector<double> empty_calls_us(int n, bool flush);
    void cuda_ok(cudaError_t e, const char* what);
    // The device's GPU lock (gpu_turns.cu): shared for the checks, exclusive for the timed calls.
    std::unique_ptr<kevo::GpuLock> take_gpu(kevo::GpuUse use, JobResult& r);
    void pause_candidate(bool stop);
    void take_turn_to_time(const Job& job, JobResult& r);
    std::unique_ptr<kevo::GpuLock> gpu_;  // the job's hold of the lock (none between jobs)
    // The job's phases with their wall-clock span and the lock they held ($KEVO_PHASE_LOG).
    void lap(JobResult& r, const char* what);
    void phase_done(const char* what, const char* lock, std::chrono::steady_clock::time_point from);
    void write_phase_log(const JobResult& r);
    json phases_ = json::array();
    std::chrono::steady_clock::time_point lap_t0_;
    const char* lap_lock_ = "none";  // what the phase that ends at the next lap holds

    const Job* job_ = nullptr;
    int device_ = 0;
    bool device_ready_ = false;
    json device_json_;
    double peak_gbs_ = 0;
    cudaStream_t stream_ = nullptr, observer_ = nullptr;
    ContextFence fence_;  // bounds each timed reference and empty call (context_fence.h)
    unsigned long long* sum_ = nullptr;
    CompareStats* stats_ = nullptr;
    Mapping flush_;                               // the L2-flush buffer (random values), shared
    Mapping proof_;                               // the proofs of a batch's flushes, shared
    unsigned long long* judge_proof_ = nullptr;   // the judge's own proofs (private)
    int flush_id_ = -1, proof_id_ = -1;           // their ids in the current candidate process
    bool warmed_up_ = false;                      // the current candidate process made its first call
    double flush_us_ = -1;                        // one flush, measured by the judge
    unsigned long long flush_digest_ = 0;         // proof_of(kFlushDigestKey) of the buffer as filled
    int flush_blocks_ = 0;
    int64_t l2_bytes_ = 0;
    int sms_ = 1;
    // reference
    std::string ref_path_, ref_arg_;
    void* ref_lib_ = nullptr;
    int (*ref_forward_)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) = nullptr;
    int (*ref_call_)(const kevo_tensor*, int, cudaStream_t) = nullptr;
    void (*ref_release_)(void) = nullptr;
    const char* (*ref_error_)(void) = nullptr;
    const char* (*ref_precision_)(void) = nullptr;  // optional: each side's precision (reference.cpp)
    // Optional (builds before it lack it): the speed baseline in strict fp32. Timed only where
    // LibTorch's defaults turn TF32 on (tf32_defaults_), so that a kernel's speedup against the
    // reference as correctness judges it is reported beside the one against the defaults.
    int (*ref_call_strict_)(const kevo_tensor*, int, cudaStream_t) = nullptr;
    bool tf32_defaults_ = false;
    struct FileValues {
        std::string bytes;
        double vary_scale = 0;  // a parameter's noise (device/fill.h), when it is one
    };
    std::map<std::string, FileValues> file_data_;  // init kind file: path -> bytes
    const FileValues& file_values(const JobTensor& d);
    // candidate process
    pid_t pid_ = -1;
    std::string candidate_exe_;  // argv[0] of its command line (the sandbox's, or this runner)
    int sock_ = -1;
    std::thread output_reader_;
    std::string output_;
    int next_id_ = 1;
    std::vector<Tensors> outputs_, expected_;  // per shape set
    std::vector<Tensors> trial_inputs_;        // the input sets of this job's correctness trials
    // The timing copies of each shape set, kept for the judge's life: every candidate of a run is
    // timed on the same memory (buffer groups allocated apart differed by up to 10% for a 4.5 us
    // kernel in the study; the shift between candidate processes proved to be their launch cost,
    // corrected in timing.cu). Keyed by the set; remade when the set's tensors or the requested
    // count change. All copies of a set lie in one shared allocation (the arena), each tensor at its
    // own granularity-aligned offset, as separate allocations would: a candidate process maps it
    // once (mapping 64 copies' tensors one by one took 0.55 s of each validation on the H200).
    struct TimingCopies {
        Mapping arena;
        int arena_id = -1;  // its id in the current candidate process (-1: not mapped there yet)
        std::vector<Tensors> ins, outs;  // views into the arena
        int requested = 0;
        // Its bytes in the device's memory ledger (gpu_ledger.h) while kept between jobs; null: made
        // for this job only (the device's kept copies were at their bound), given back at its end.
        std::unique_ptr<kevo::MemoryLedger::Reservation> kept;
    };
    std::map<size_t, TimingCopies> timing_copies_;
    // The device's memory ledger (null until the device is known, or when its directory is unusable):
    // the job's buffers are reserved there before they are allocated, and all judges' kept timing
    // copies on this device together stay within a quarter of its budget.
    std::unique_ptr<kevo::MemoryLedger> ledger_;
    std::unique_ptr<kevo::MemoryLedger::Reservation> job_reserved_;
    kevo::MemoryLedger* ledger();
    void reserve_job_memory(const Job& job);
    int copies_within_ledger(TimingCopies& tc, int64_t set_bytes, int copies);
    void release_trial_buffers();                 // before the wait to time (ledger_use.cu)
    void reserve_timing_memory(const Job& job);  // after it
    TimingCopies& timing_copies(size_t set);
    void share_copies(TimingCopies& tc);    // maps the arena in the candidate process (once per process) and points the views at it
    void release_copies(TimingCopies& tc);
    // At a job's end: gives the kept copies back when the device is crowded (judge.cu says why).
    void release_copies_if_crowded();
    void zero_slack(Tensors& t);
    std::map<std::string, double> trial_profile_, timing_profile_;  // where trials' and timing's time goes
    std::map<std::pair<size_t, std::string>, bool> output_varies_;  // (set, output): not constant on some draw
    // What an empty call costs (the interquartile mean of calls timed after an L2 flush, as timed
    // calls are) in the current candidate process (from its calibration, 0: none) and in the judge
    // (0: not measured yet; measured once, at the first timed set).
    double candidate_empty_us_ = 0, judge_empty_us_ = 0;
    // The strict fp32 reference's timing per set, measured once per judge (the reference does not
    // change; a search's candidates share it): its shapes and flush mode, and the figures.
    std::map<size_t, std::pair<std::string, json>> strict_times_;
};

std::string fmt(double v);

}  // namespace kevo_runner
