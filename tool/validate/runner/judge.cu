// The judge (judge.h): its device and reference, a job from start to verdict, the correctness
// trials, the timed sets. The candidate process it drives is in candidate_process.cu, the
// buffers it fills and compares in buffers.cu.
#include "judge.h"
#include "gpu_activity.h"
#include "verdict.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace kevo_runner {

namespace {
void stage(const std::string& s) { std::fprintf(stderr, "[runner] %s\n", s.c_str()); }
}  // namespace

std::string fmt(double v) {
    if (std::isnan(v)) return "nan";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.7g", v);
    return buf;
}

Judge::Judge() = default;

Judge::~Judge() {
    JobResult r;
    stop_candidate(r);
}

void Judge::cuda_ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    throw SetupFailure{std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}
#define CK(x) cuda_ok((x), #x)

void Judge::init_device(JobResult& r) {
    if (device_ready_) {
        r.device = device_json_;
        return;
    }
    device_json_ = device_info();
    r.device = device_json_;
    if (!device_json_.value("present", false)) return;
    device_ = device_json_.value("index", 0);
    peak_gbs_ = device_json_.value("mem_bandwidth_gbs", 0.0);
    // Before the context: the judge, and every candidate process it starts (they inherit it), on
    // the GPU's own NUMA node.
    const std::string cpus = pin_to_device_cpus(device_json_.value("pci_bus_id", std::string()));
    if (!cpus.empty()) device_json_["pinned_cpus"] = cpus;
    r.device = device_json_;
    CK(cudaSetDevice(device_));
    CK(cudaFree(nullptr));
    if (!cu().ok) throw SetupFailure{"the CUDA driver API (cuMem*) is unavailable"};
    // Non-blocking streams: work a candidate puts on the legacy default stream is NOT ordered with them.
    CK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&observer_, cudaStreamNonBlocking));
    if (!fence_.init()) throw SetupFailure{"cannot create the event that bounds timed calls"};
    CK(cudaMalloc(&sum_, sizeof(unsigned long long)));
    CK(cudaMalloc(&stats_, sizeof(CompareStats)));
    int v = 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device_);
    l2_bytes_ = v;
    cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_);
    // L2 is flushed between timed calls by reading a buffer well beyond its size: the next call
    // starts with L2 full of clean lines (a memset would leave dirty ones to write back).
    // The candidate process flushes before each of its timed calls, reading this buffer (random
    // values) with a proof the judge checks (l2_flush_proof); the judge flushes the same way.
    {
        std::string e = create_shared(flush_, l2_flush_bytes(l2_bytes_), device_);
        if (!e.empty()) throw SetupFailure{"the L2-flush buffer: " + e};
        e = create_shared(proof_, (kMaxBatch + 1) * sizeof(unsigned long long), device_);
        if (!e.empty()) throw SetupFailure{"the flush-proof buffer: " + e};
    }
    CK(cudaMalloc(&judge_proof_, 2 * sizeof(unsigned long long)));
    // Values no one can predict: a candidate cannot compute a proof from the seed instead of reading.
    std::random_device rd;
    const uint64_t flush_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    fill_kernel<<<sms_ * 16, 256, 0, stream_>>>(flush_.data(), KEVO_FLOAT32, static_cast<int64_t>(flush_.size / 4), KEVO_INIT_RANDN, 0.0, 1.0, flush_seed);
    CK(cudaGetLastError());
    flush_blocks_ = l2_flush_blocks(sms_);
    CK(cudaDeviceSynchronize());
    // The candidate process maps the flush buffer read-write (an importer chooses its own access), so
    // the judge checks after every batch that it still holds these values: a process that overwrote
    // it with values it knows could compute proofs without reading anything.
    flush_digest_ = proof_of(kFlushDigestKey);
    device_ready_ = true;
}

void Judge::load_reference(const Job& job) {
    if (ref_lib_ && ref_path_ == job.reference && ref_arg_ == job.reference_arg) return;
    if (ref_lib_) throw SetupFailure{"one judge process serves one reference; start another for " + job.reference};
    stage("loading the reference");
    ref_lib_ = dlopen(job.reference.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!ref_lib_) throw SetupFailure{std::string("cannot load the reference build: ") + dlerror()};
    ref_forward_ = reinterpret_cast<decltype(ref_forward_)>(dlsym(ref_lib_, "kevo_ref_forward"));
    ref_call_ = reinterpret_cast<decltype(ref_call_)>(dlsym(ref_lib_, "kevo_ref_call"));
    ref_release_ = reinterpret_cast<decltype(ref_release_)>(dlsym(ref_lib_, "kevo_ref_release"));
    ref_error_ = reinterpret_cast<decltype(ref_error_)>(dlsym(ref_lib_, "kevo_ref_error"));
    ref_precision_ = reinterpret_cast<decltype(ref_precision_)>(dlsym(ref_lib_, "kevo_ref_precision"));
    ref_call_strict_ = reinterpret_cast<decltype(ref_call_strict_)>(dlsym(ref_lib_, "kevo_ref_call_strict"));
    if (!ref_forward_ || !ref_call_ || !ref_release_ || !ref_error_) throw SetupFailure{"the reference build lacks its entry points"};
    if (auto setup = reinterpret_cast<int (*)(const char*)>(dlsym(ref_lib_, "kevo_ref_setup"))) {
        if (setup(job.reference_arg.c_str()) != 0) throw SetupFailure{std::string("the reference's setup failed: ") + ref_error_()};
    }
    // After the setup, which may set them: "cuDNN TF32 on, cuBLAS TF32 off" differs from strict fp32
    // (what correctness is judged against) when either is on.
    tf32_defaults_ = ref_precision_ && std::strstr(ref_precision_(), "TF32 on") != nullptr;
    ref_path_ = job.reference;
    ref_arg_ = job.reference_arg;
}

std::vector<double> Judge::empty_calls_us(int n, bool flush) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int j = 0; j < n; ++j) {
        if (flush) flush_l2(judge_proof_, 0);
        CK(cudaEventRecord(e0, stream_));
        CK(fence_.begin(e0));
        empty_kernel<<<1, 32, 0, stream_>>>();
        CK(fence_.end(stream_));
        CK(cudaEventRecord(e1, stream_));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        us.push_back(ms * 1000.0);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return us;
}

void Judge::fill_refs(Msg& m, const Tensors& in, const Tensors& out) const {
    m.n_in = static_cast<int32_t>(in.desc.size());
    m.n_out = static_cast<int32_t>(out.desc.size());
    if (m.n_in + m.n_out > kMaxTensors) throw SetupFailure{"too many tensors for one call (at most " + std::to_string(kMaxTensors) + ")"};
    auto put = [&](const Tensors& t, int base) {
        auto abi = t.abi();
        for (size_t i = 0; i < abi.size(); ++i) {
            TensorRef& r = m.t[base + i];
            r.buffer = t.ids[i];
            r.offset = t.offsets[i];
            r.ndim = abi[i].ndim;
            r.dtype = abi[i].dtype;
            for (int d = 0; d < r.ndim; ++d) {
                r.sizes[d] = abi[i].sizes[d];
                r.strides[d] = abi[i].strides[d];
            }
        }
    };
    put(in, 0);
    put(out, m.n_in);
}

void Judge::reference_forward(const Tensors& in, Tensors& expected) {
    auto ins = in.abi();
    auto outs = expected.abi();
    int rc = ref_forward_(ins.data(), static_cast<int>(ins.size()), outs.data(), static_cast<int>(outs.size()), stream_);
    if (rc != 0) throw SetupFailure{std::string("the reference failed: ") + ref_error_()};
    CK(cudaStreamSynchronize(stream_));
}

void Judge::first_call(const Tensors& in, const Tensors& out) {
    // The candidate's first call runs ungated: what a first call does once (CUDA loading the
    // library's kernels lazily, a workspace allocated, a handle created) may wait for the whole
    // context to go idle, which a gated stream never does; the gate's watchdog would release it
    // after 300 ms and the trial would lose its stream check. Its outputs are poisoned after.
    call_candidate(in, out, 0, "during its first call");
    sync_candidate(OP_DEVSYNC, "while running the kernel's first call");
    warmed_up_ = true;
}

// The correctness call, gated; `poisoned`: the outputs' checksums before it.
void Judge::gated_call(const Tensors& in, const Tensors& out, const std::vector<unsigned long long>& poisoned, json& check,
                       std::vector<std::string>& warnings) {
    // The candidate holds its stream behind a gate, calls the kernel, and the judge watches the
    // outputs from its own process meanwhile: honest work is queued behind the gate and cannot have
    // touched them yet.
    const auto sent = std::chrono::steady_clock::now();
    call_candidate(in, out, FLAG_GATED, "during the correctness check");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto during = checksums(out, observer_);
    // The gate's watchdog starts after the call was sent, so it cannot have released the stream
    // before the judge finished looking unless that look ended kGateLimitMs after the send. A
    // "released" claim earlier than that is not believed (the flag lives in the candidate's memory).
    const bool release_possible = std::chrono::steady_clock::now() - sent >= std::chrono::milliseconds(kGateLimitMs);
    Msg open;
    open.op = OP_OPEN_GATE;
    request(open, job_->call_timeout_s, "while opening the gate");
    Msg r = sync_candidate(OP_SYNC, "while running the kernel");
    const bool released = r.gate_timed_out && release_possible;
    if (!released && during != poisoned)
        throw CandidateFailure{"rejected",
                               "the outputs were written while the given stream was still held back: the kernel works on another "
                               "stream (or the legacy default stream) or from a host thread; enqueue everything on `stream`"};
    if (released) {
        // kevo_forward itself waited for its stream (a synchronizing call: cudaStreamSynchronize,
        // cudaFree, a blocking copy): the gate's watchdog released it, and this trial's stream check
        // could not be made.
        check["gate_released_by_watchdog"] = true;
        const std::string w = "kevo_forward waits for its own stream (cudaStreamSynchronize, cudaFree, cudaMalloc or a blocking copy inside it): "
                              "the check that all work is on `stream` could not be made, and each correctness call waited " +
                              std::to_string(kGateLimitMs) + " ms; keep kevo_forward asynchronous";
        if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    }
}

// `before`: the inputs' checksums before the call.
void Judge::check_side_effects(const Tensors& in, const Tensors& out, const std::vector<unsigned long long>& before) {
    // Work the caller never waits for (another stream, a host thread) may still be landing.
    auto h1 = checksums(out, stream_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sync_candidate(OP_DEVSYNC, "in work the kernel left behind");
    auto h2 = checksums(out, stream_);
    if (h1 != h2)
        throw CandidateFailure{"rejected",
                               "the outputs changed after the given stream had finished: the kernel does work on another stream or host thread that the caller never waits for; enqueue everything on `stream`"};
    auto after = checksums(in, stream_);
    for (size_t i = 0; i < before.size(); ++i)
        if (before[i] != after[i]) throw CandidateFailure{"rejected", "the kernel modified input '" + in.desc[i].name + "'; inputs are read-only"};
}

json Judge::correctness_trial(size_t set, Tensors& in, uint64_t seed, unsigned char pattern, std::vector<std::string>& warnings) {
    json check{{"shape_set", set}, {"seed", seed}};
    auto t_last = std::chrono::steady_clock::now();
    auto tlap = [&](const char* what) {  // where a trial's time goes, summed over trials
        auto now = std::chrono::steady_clock::now();
        trial_profile_[what] += std::chrono::duration<double>(now - t_last).count();
        t_last = now;
    };
    fill(in, seed);
    CK(cudaStreamSynchronize(stream_));
    auto before = checksums(in, stream_);
    tlap("fill_inputs");
    // Output and expected buffers are reused per shape set (poisoned before every run).
    if (outputs_.size() <= set) outputs_.resize(set + 1), expected_.resize(set + 1);
    if (outputs_[set].desc.empty()) outputs_[set] = allocate(job_->sets[set].outputs, true);
    if (expected_[set].desc.empty()) expected_[set] = allocate(job_->sets[set].outputs, false);
    Tensors& out = outputs_[set];
    Tensors& expected = expected_[set];
    share(in);
    share(out);
    if (!warmed_up_) {
        first_call(in, out);
        tlap("first_call");
    }
    poison(out, pattern);
    poison(expected, pattern ^ 0x80);
    CK(cudaStreamSynchronize(stream_));
    auto poisoned = checksums(out, stream_);
    tlap("poison_outputs");
    gated_call(in, out, poisoned, check, warnings);
    tlap("kernel_gated");
    check_side_effects(in, out, before);
    tlap("side_effect_checks");
    // The reference runs in the judge, after the candidate: its results never exist in memory the
    // candidate process can reach.
    reference_forward(in, expected);
    tlap("reference");
    json c = compare(set, seed, out, expected, warnings);
    tlap("compare");
    check.update(c);
    return check;
}

// Several validators on one GPU (searches, workers, `cache add`) each keep their timing copies
// between jobs, up to a quarter of the device apiece, and a multi-GiB job needs as much again for
// its trials: four searches on 4-15 GB problems would fill an H200 (estimated, not measured: about
// 75 GB of copies and 25 GB of LibTorch's caches kept idle). When less than a quarter of the
// device is free after a job (its own buffers and candidate process gone), this judge gives its
// copies back so that the others' jobs find room; its next job makes them again. (Idle memory
// costs nobody time; a job that cannot allocate fails outside the kernel: validate.cpp.) A judge
// alone on its GPU keeps them, as timing.cu wants.
void Judge::release_copies_if_crowded() {
    if (ledger_)  // copies the device's bound did not cover were made for this job only (ledger_use.cu)
        for (auto it = timing_copies_.begin(); it != timing_copies_.end();)
            if (!it->second.kept) release_copies(it->second), it = timing_copies_.erase(it);
            else ++it;
    size_t free_bytes = 0, total_bytes = 0;
    if (timing_copies_.empty() || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return;
    if (free_bytes >= total_bytes / 4) return;
    for (auto& [set, tc] : timing_copies_) release_copies(tc);  // the candidate process is gone: nothing to unmap
    timing_copies_.clear();
}

// A phase of the job ends: its time in the result's profile, its span in the phase log.
void Judge::lap(JobResult& r, const char* what) {
    auto now = std::chrono::steady_clock::now();
    r.profile_s[what] = std::chrono::duration<double>(now - lap_t0_).count();
    phase_done(what, lap_lock_, lap_t0_);
    lap_t0_ = now;
}

// From the checks to the timing: the trials' buffers given back, then the GPU exclusively. The
// candidate is stopped from before the shared hold ends until the judge's turn to time: no work of
// its is sent beside another judge's timing.
void Judge::take_turn_to_time(const Job& job, JobResult& r) {
    release_trial_buffers();
    pause_candidate(true);
    gpu_.reset();  // the shared hold first: one process never waits for itself
    lap_lock_ = "none";
    gpu_ = take_gpu(kevo::GpuUse::exclusive, r);
    pause_candidate(false);
    reserve_timing_memory(job);
    lap(r, "wait.exclusive");
    lap_lock_ = "exclusive";
}

JobResult Judge::run(const Job& job) {
    job_ = &job;
    JobResult result;
    trial_profile_.clear();
    timing_profile_.clear();
    output_varies_.clear();
    phases_ = json::array();
    lap_t0_ = std::chrono::steady_clock::now();
    lap_lock_ = "none";
    // The window in which another process's GPU use counts against a wall-clock rejection: from the
    // start of timing (the previous holder of the GPU lock was done long before: NVML's samples
    // cover the interval before them).
    uint64_t started_us = unix_us();
    try {
        if (!job.load_only) {
            init_device(result);
            if (!result.device.value("present", false)) {
                result.status = "no_device";
                result.log = result.device.value("error", std::string("no CUDA device"));
                return result;
            }
            lap(result, "context");
            spawn_candidate(job);  // its process and CUDA context, beside others' timing: no kernel of it runs
            lap(result, "spawn");
            // Everything else up to the timed calls measures nothing: it shares the GPU with other
            // judges' checks, never with a measurement.
            gpu_ = take_gpu(kevo::GpuUse::shared, result);
            lap(result, "wait.shared");
            lap_lock_ = "shared";
            reserve_job_memory(job);  // before anything of the job is allocated (ledger_use.cu)
            load_reference(job);
        } else {
            spawn_candidate(job);
        }
        admit_candidate(job, result);
        lap(result, "load");
        if (job.load_only) {
            end_job(result);
            result.status = "ok";
            return result;
        }
        if (!correctness_trials(job, result)) {
            end_job(result);
            return result;
        }
        warn_constant_outputs(job, result);
        lap(result, "correctness");
        for (const auto& [k, v] : trial_profile_) result.profile_s[std::string("trials.") + k] = v;
        if (job.time) {
            take_turn_to_time(job, result);
            started_us = unix_us();
            time_sets(job, result);
            lap(result, "timing");
            for (const auto& [k, v] : timing_profile_) result.profile_s[std::string("timing.") + k] = v;
        }
        result.status = "ok";
    } catch (const CandidateFailure& f) {
        result.status = f.status;
        result.log = f.message;
        note_interference(f, result, started_us);
    } catch (...) {
        end_job(result);
        throw;
    }
    end_job(result);
    return result;
}

// A job's end, however it ends: its buffers freed (the timing copies kept unless the device is
// crowded), the candidate process stopped.
void Judge::end_job(JobResult& result) {
    gpu_.reset();  // what follows frees memory: no lock needed
    for (auto& t : outputs_) t.free();
    for (auto& t : expected_) t.free();
    outputs_.clear();
    expected_.clear();
    for (auto& t : trial_inputs_) t.free();
    trial_inputs_.clear();
    stop_candidate(result);
    release_copies_if_crowded();
    job_reserved_.reset();  // the job's buffers are freed
    write_phase_log(result);
}

// The correctness trials. False where a trial's outputs were wrong (the verdict is in `result`).
bool Judge::correctness_trials(const Job& job, JobResult& result) {
    const int sets = static_cast<int>(job.sets.size());
    int trials = std::max<int>(job.trials, 2 * sets);
    double max_abs = 0;
    // Trials come in pairs per shape set: fresh buffers (allocated while the previous ones are
    // still held, so at new addresses), then the SAME buffers refilled with new values. Every
    // trial has its own values, so a kernel that caches results by pointer or by shape fails.
    for (int t = 0; t < trials; ++t) {
        size_t set = (t / 2) % sets;
        bool refill = t % 2 == 1;
        if (!refill) trial_inputs_.push_back(allocate(job.sets[set].inputs, true));
        Tensors& in = trial_inputs_.back();
        uint64_t seed = job.seed + t;
        json check = correctness_trial(set, in, seed, static_cast<unsigned char>(t % 2 ? 0x7F : 0xFF), result.warnings);
        check["refill_same_addresses"] = refill;
        max_abs = std::max(max_abs, check.value("max_abs_diff", 0.0));
        result.checks.push_back(check);
        result.max_abs_diff = max_abs;
        result.trials = t + 1;
        if (!check.value("pass", false)) {
            result.status = "mismatch";
            result.log = check.value("message", std::string());
            return false;
        }
        if (trial_inputs_.size() > 2) {  // keep the previous set alive (new addresses), drop older ones
            unshare(trial_inputs_.front());
            trial_inputs_.front().free();
            trial_inputs_.erase(trial_inputs_.begin());
        }
    }
    return true;
}

void Judge::warn_constant_outputs(const Job& job, JobResult& result) {
    for (const auto& [key, varies] : output_varies_) {
        if (varies) continue;
        const std::string& label = job.sets[key.first].label;
        result.warnings.push_back("the reference output '" + key.second + "' is constant on every input the check drew (shape set " +
                                  std::to_string(key.first) + (label.empty() ? "" : " (" + label + ")") +
                                  "); the check cannot tell a correct kernel from one that writes a constant");
    }
}

// Every timed set (timing.cu); the first timed set's figures also at the top, as before.
void Judge::time_sets(const Job& job, JobResult& result) {
    json timing = json::array();
    for (size_t s = 0; s < job.sets.size(); ++s)
        if (job.sets[s].timed) timing.push_back(time_set(s));
    result.timing = json{{"sets", timing}};
    if (ref_precision_)
        result.timing["reference_precision"] = {{"correctness", "strict fp32 (TF32 off)"},
                                                {"timing", std::string("precision ") + ref_precision_()}};
    if (!timing.empty()) {  // the first timed set, as before
        result.timing["kernel"] = timing[0]["kernel"];
        result.timing["reference"] = timing[0]["reference"];
        if (timing[0].contains("speedup_vs_strict_fp32")) result.timing["reference_strict_us"] = timing[0]["reference_strict"]["time_us"];
    }
}

// Time the batches took beyond the reported calls: was it another process's? (validate.cpp
// words the answer; it never blames the kernel for time another process took.)
void Judge::note_interference(const CandidateFailure& f, JobResult& result, uint64_t started_us) {
    if (f.status == "rejected" && f.message.find(kevo::kWallCheckPhrase) != std::string::npos) {
        const std::string pci = device_json_.value("pci_bus_id", std::string());
        result.interference = gpu_activity_since(pci, started_us);
        if (!others_were_active(result.interference)) {  // NVML's last samples may lag the batches a little
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            result.interference = gpu_activity_since(pci, started_us);
        }
    }
}

}  // namespace kevo_runner
