// kernelevo-runner: runs ONE candidate kernel against the task's reference in a fresh process.
// The kernelevo process starts it with a job file and a watchdog; whatever the candidate does
// (segfault, illegal address, hang, memory exhaustion, cheating) stays inside this process.
//
//   kernelevo-runner --info                       device description as JSON on stdout
//   kernelevo-runner --job JOB.json --result R.json
//
// Exit codes: 0 result written (whatever the candidate's status), 3 setup failure (the reference or
// the runner itself failed; message on stderr and in the result), anything else: the process died.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_ops.cuh"
#include "kernelevo/abi.h"

using json = nlohmann::json;
using namespace kevo_runner;

namespace {

// The candidate failed: status is one of runtime_error, mismatch, rejected.
struct CandidateFailure {
    std::string status, message;
};
// The reference or the runner failed: not the candidate's fault.
struct SetupFailure {
    std::string message;
};

typedef int (*forward_fn)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t);
typedef int (*ref_call_fn)(const kevo_tensor*, int, cudaStream_t);
typedef void (*ref_release_fn)(void);
typedef const char* (*ref_error_fn)(void);

bool g_candidate_ran = false;  // CUDA errors after this point may be the candidate's doing

void cuda_check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    std::string msg = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    if (g_candidate_ran) throw CandidateFailure{"runtime_error", "CUDA error after running the kernel: " + msg};
    throw SetupFailure{msg};
}
#define CK(x) cuda_check((x), #x)

void stage(const std::string& s) { std::fprintf(stderr, "[runner] %s\n", s.c_str()); }

int grid_for(int64_t n) {
    static int sms = 0;
    if (!sms) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int64_t blocks = (n + 255) / 256;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, static_cast<int64_t>(sms) * 16)));
}

json device_info() {
    json j;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        j["present"] = false;
        std::string why = e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this CUDA runtime"
                          : e == cudaErrorNoDevice || e == cudaSuccess ? "no CUDA device"
                                                                       : cudaGetErrorString(e);
        j["error"] = "no usable CUDA GPU here (" + why + (e != cudaSuccess ? std::string(", ") + cudaGetErrorName(e) : std::string()) + ")";
        return j;
    }
    int dev = 0;
    if (const char* v = std::getenv("KERNELEVO_DEVICE")) dev = std::atoi(v);
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        j["present"] = false;
        j["error"] = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
        return j;
    }
    int mem_clock_khz = 0, bus_width = 0, optin = 0, drv = 0, rt = 0;
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
    cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, dev);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    j["present"] = true;
    j["index"] = dev;
    j["name"] = p.name;
    j["cc_major"] = p.major;
    j["cc_minor"] = p.minor;
    j["sm_count"] = p.multiProcessorCount;
    j["mem_bandwidth_gbs"] = 2.0 * mem_clock_khz * 1e3 * (bus_width / 8.0) / 1e9;
    j["total_mem"] = static_cast<int64_t>(p.totalGlobalMem);
    j["l2_bytes"] = static_cast<int64_t>(p.l2CacheSize);
    j["smem_per_block"] = static_cast<int>(p.sharedMemPerBlock);
    j["smem_per_block_optin"] = optin;
    j["smem_per_sm"] = static_cast<int>(p.sharedMemPerMultiprocessor);
    j["driver_version"] = drv;
    j["runtime_version"] = rt;
    return j;
}

struct TensorDesc {
    std::string name;
    int32_t dtype;
    std::vector<int64_t> sizes;
    int kind = INIT_RANDN;
    double a = 0, b = 1;
    int64_t numel() const {
        int64_t n = 1;
        for (auto s : sizes) n *= s;
        return n;
    }
    int64_t bytes() const { return numel() * kevo_dtype_size(dtype); }
};

int init_kind(const std::string& k) {
    static const char* names[] = {"randn", "rand", "randint", "ones", "zeros", "full", "arange"};
    for (int i = 0; i < 7; ++i)
        if (k == names[i]) return i;
    throw SetupFailure{"unknown init kind " + k};
}

// Device buffers of one set of tensors, with their ABI descriptors.
struct Buffers {
    std::vector<TensorDesc> desc;
    std::vector<void*> ptr;
    std::vector<kevo_tensor> abi;
    Buffers() = default;
    explicit Buffers(const std::vector<TensorDesc>& d) : desc(d) {
        for (const auto& t : desc) {
            void* p = nullptr;
            size_t bytes = static_cast<size_t>(std::max<int64_t>(t.bytes(), 1));
            cudaError_t e = cudaMalloc(&p, bytes);
            if (e != cudaSuccess) {
                release();
                throw SetupFailure{"cannot allocate " + std::to_string(bytes) + " bytes for tensor " + t.name + ": " + cudaGetErrorString(e)};
            }
            ptr.push_back(p);
            kevo_tensor k{};
            k.data = p;
            k.ndim = static_cast<int32_t>(t.sizes.size());
            k.dtype = t.dtype;
            int64_t stride = 1;
            for (int i = k.ndim - 1; i >= 0; --i) {
                k.sizes[i] = t.sizes[i];
                k.strides[i] = stride;
                stride *= t.sizes[i];
            }
            abi.push_back(k);
        }
    }
    Buffers(Buffers&& o) noexcept : desc(std::move(o.desc)), ptr(std::move(o.ptr)), abi(std::move(o.abi)) { o.ptr.clear(); }
    Buffers& operator=(Buffers&& o) noexcept {
        release();
        desc = std::move(o.desc);
        ptr = std::move(o.ptr);
        abi = std::move(o.abi);
        o.ptr.clear();
        return *this;
    }
    ~Buffers() { release(); }
    void release() {
        for (void* p : ptr) cudaFree(p);
        ptr.clear();
    }
    // The ABI hands out copies: a kernel that scribbles over its descriptors changes nothing here.
    std::vector<kevo_tensor> fresh_abi() const { return abi; }
};

struct Scratch {
    unsigned long long* sum = nullptr;
    CompareStats* stats = nullptr;
    Scratch() {
        CK(cudaMalloc(&sum, sizeof(unsigned long long)));
        CK(cudaMalloc(&stats, sizeof(CompareStats)));
    }
    ~Scratch() {
        cudaFree(sum);
        cudaFree(stats);
    }
};

void fill(const Buffers& b, uint64_t seed, cudaStream_t s) {
    for (size_t i = 0; i < b.desc.size(); ++i) {
        const auto& t = b.desc[i];
        int64_t n = t.numel();
        if (n == 0) continue;
        fill_kernel<<<grid_for(n), 256, 0, s>>>(b.ptr[i], t.dtype, n, t.kind, t.a, t.b, seed * 1000003ull + i);
        CK(cudaGetLastError());
    }
}

void poison(const Buffers& b, unsigned char pattern, cudaStream_t s) {
    for (size_t i = 0; i < b.desc.size(); ++i) CK(cudaMemsetAsync(b.ptr[i], pattern, b.desc[i].bytes(), s));
}

std::vector<unsigned long long> checksums(const Buffers& b, Scratch& sc, cudaStream_t s) {
    std::vector<unsigned long long> out;
    for (size_t i = 0; i < b.desc.size(); ++i) {
        CK(cudaMemsetAsync(sc.sum, 0, sizeof(unsigned long long), s));
        int64_t bytes = b.desc[i].bytes();
        checksum_kernel<<<grid_for(bytes / 8 + 1), 256, 0, s>>>(b.ptr[i], bytes, sc.sum);
        CK(cudaGetLastError());
        unsigned long long v = 0;
        CK(cudaMemcpyAsync(&v, sc.sum, sizeof v, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        out.push_back(v);
    }
    return out;
}

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

std::string fmt(double v) {
    if (std::isnan(v)) return "nan";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.7g", v);
    return buf;
}

double host_value(const void* dev, int32_t dtype, int64_t i) {
    unsigned char raw[8] = {0};
    int sz = kevo_dtype_size(dtype);
    if (cudaMemcpy(raw, static_cast<const char*>(dev) + i * sz, sz, cudaMemcpyDeviceToHost) != cudaSuccess) return NAN;
    switch (dtype) {
        case KEVO_FLOAT32: { float f; std::memcpy(&f, raw, 4); return f; }
        case KEVO_FLOAT16: { __half h; std::memcpy(&h, raw, 2); return __half2float(h); }
        case KEVO_BFLOAT16: { __nv_bfloat16 h; std::memcpy(&h, raw, 2); return __bfloat162float(h); }
        case KEVO_INT32: { int32_t v; std::memcpy(&v, raw, 4); return v; }
        case KEVO_INT64: { int64_t v; std::memcpy(&v, raw, 8); return static_cast<double>(v); }
        case KEVO_FLOAT64: { double v; std::memcpy(&v, raw, 8); return v; }
        case KEVO_INT8: return static_cast<int8_t>(raw[0]);
        default: return raw[0];
    }
}

struct Job {
    std::string kernel, reference;
    std::vector<std::vector<TensorDesc>> inputs, outputs;  // per shape set
    std::vector<std::string> set_labels;
    int trials = 5;
    double atol = 1e-4, rtol = 1e-4;
    uint64_t seed = 42;
    bool time = true;
    int timing_trials = 100, warmup = 10;
    double timing_budget_s = 10;
    std::string l2_flush = "read";  // read: leave L2 full of clean lines; write: memset (dirty lines)
    int timing_copies = 4;          // buffer copies used in turn while timing
};

Job parse_job(const json& j) {
    Job job;
    job.kernel = j.at("kernel");
    job.reference = j.at("reference");
    for (const auto& set : j.at("shape_sets")) {
        std::vector<TensorDesc> ins, outs;
        for (const auto& t : set.at("inputs")) {
            TensorDesc d;
            d.name = t.at("name");
            d.dtype = t.at("dtype");
            d.sizes = t.at("sizes").get<std::vector<int64_t>>();
            d.kind = init_kind(t.at("init").at("kind"));
            d.a = t.at("init").value("a", 0.0);
            d.b = t.at("init").value("b", 1.0);
            ins.push_back(d);
        }
        for (const auto& t : set.at("outputs")) {
            TensorDesc d;
            d.name = t.at("name");
            d.dtype = t.at("dtype");
            d.sizes = t.at("sizes").get<std::vector<int64_t>>();
            outs.push_back(d);
        }
        job.inputs.push_back(ins);
        job.outputs.push_back(outs);
        job.set_labels.push_back(set.value("label", std::string()));
    }
    job.trials = j.value("trials", 5);
    job.atol = j.value("atol", 1e-4);
    job.rtol = j.value("rtol", 1e-4);
    job.seed = j.value("seed", 42ull);
    job.time = j.value("time", true);
    job.timing_trials = j.value("timing_trials", 100);
    job.warmup = j.value("warmup", 10);
    job.timing_budget_s = j.value("timing_budget_s", 10.0);
    job.l2_flush = j.value("l2_flush", std::string("read"));
    job.timing_copies = std::max(1, j.value("timing_copies", 4));
    return job;
}

class Runner {
public:
    explicit Runner(const Job& job) : job_(job) {}

    json run() {
        json result;
        result["device"] = device_info();
        if (!result["device"].value("present", false)) {
            result["status"] = "no_device";
            result["log"] = result["device"].value("error", std::string("no CUDA device"));
            return result;
        }
        device_ = result["device"].value("index", 0);
        CK(cudaSetDevice(device_));
        auto t0 = std::chrono::steady_clock::now();
        auto lap = [&](const char* what) {
            auto now = std::chrono::steady_clock::now();
            result["profile_s"][what] = std::chrono::duration<double>(now - t0).count();
            t0 = now;
        };
        CK(cudaFree(nullptr));  // create the context before loading anything
        lap("context");
        // A non-blocking stream: work a kernel puts on the legacy default stream is NOT ordered
        // with it, so such "side stream" work shows up as a cheat instead of being hidden.
        CK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&observer_, cudaStreamNonBlocking));
        { void* g = nullptr; CK(cudaHostAlloc(&g, 2 * sizeof(int), cudaHostAllocMapped)); gate_ = static_cast<volatile int*>(g); }
        CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_dev_), const_cast<int*>(gate_), 0));
        {
            int khz = 0;
            cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device_);
            gate_cycles_ = static_cast<long long>(std::max(khz, 1000000)) * 300;  // ~300 ms at the top clock
        }
        load();
        lap("load");
        json checks = json::array();
        double max_abs = 0;
        std::vector<std::string> warnings;
        const int sets = static_cast<int>(job_.inputs.size());
        int trials = std::max<int>(job_.trials, 2 * sets);
        Scratch sc;
        // Trials come in pairs per shape set: fresh buffers (allocated while the previous ones are
        // still held, so at new addresses), then the SAME buffers refilled with new values. Every
        // trial has its own values, so a kernel that caches results by pointer or by shape fails.
        Buffers previous_inputs;
        for (int t = 0; t < trials; ++t) {
            size_t set = (t / 2) % sets;
            bool refill = t % 2 == 1;
            Buffers in = refill ? std::move(previous_inputs) : Buffers(job_.inputs[set]);
            uint64_t seed = job_.seed + t;
            json check = run_trial(set, in, seed, static_cast<unsigned char>(t % 2 ? 0x7F : 0xFF), sc, warnings);
            check["refill_same_addresses"] = refill;
            max_abs = std::max(max_abs, check.value("max_abs_diff", 0.0));
            checks.push_back(check);
            previous_inputs = std::move(in);
            if (!check.value("pass", false)) {
                result["status"] = "mismatch";
                result["log"] = check["message"];
                result["checks"] = checks;
                result["max_abs_diff"] = max_abs;
                result["trials"] = t + 1;
                return result;
            }
        }
        result["checks"] = checks;
        result["max_abs_diff"] = max_abs;
        result["trials"] = trials;
        lap("correctness");
        for (const auto& [k, v] : trial_profile_) result["profile_s"][std::string("trials.") + k] = v;
        if (job_.time) {
            result["timing"] = time_both(sc);
            lap("timing");
            // A kernel that behaves only for its first calls is caught by checking again after timing.
            Buffers in(job_.inputs[0]);
            json check = run_trial(0, in, job_.seed + 104729, 0xFF, sc, warnings);
            check["after_timing"] = true;
            checks.push_back(check);
            if (!check.value("pass", false)) {
                result["status"] = "mismatch";
                result["log"] = "after timing: " + check.value("message", std::string());
                result["checks"] = checks;
                return result;
            }
            lap("recheck");
        }
        result["status"] = "ok";
        result["warnings"] = warnings;
        result["log"] = "";
        return result;
    }

private:
    void load() {
        stage("loading the reference");
        ref_lib_ = dlopen(job_.reference.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!ref_lib_) throw SetupFailure{std::string("cannot load the reference build: ") + dlerror()};
        ref_forward_ = reinterpret_cast<forward_fn>(dlsym(ref_lib_, "kevo_ref_forward"));
        ref_call_ = reinterpret_cast<ref_call_fn>(dlsym(ref_lib_, "kevo_ref_call"));
        ref_release_ = reinterpret_cast<ref_release_fn>(dlsym(ref_lib_, "kevo_ref_release"));
        ref_error_ = reinterpret_cast<ref_error_fn>(dlsym(ref_lib_, "kevo_ref_error"));
        if (!ref_forward_ || !ref_call_ || !ref_release_ || !ref_error_) throw SetupFailure{"the reference build lacks its entry points"};
        stage("loading the kernel");
        kernel_lib_ = dlopen(job_.kernel.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!kernel_lib_) throw CandidateFailure{"runtime_error", std::string("cannot load the compiled kernel: ") + dlerror()};
        kernel_ = reinterpret_cast<forward_fn>(dlsym(kernel_lib_, "kevo_forward"));
        if (!kernel_)
            throw CandidateFailure{"runtime_error",
                                   "the kernel does not export kevo_forward; define it as extern \"C\" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream)"};
    }

    void call_kernel(const Buffers& in, Buffers& out, const char* when) {
        auto ins = in.fresh_abi();
        auto outs = out.fresh_abi();
        g_candidate_ran = true;
        int rc = kernel_(ins.data(), static_cast<int>(ins.size()), outs.data(), static_cast<int>(outs.size()), stream_);
        if (rc != 0) throw CandidateFailure{"runtime_error", std::string("kevo_forward returned ") + std::to_string(rc) + " (" + when + ")"};
        int dev = -1;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess && dev != device_)
            throw CandidateFailure{"rejected", "the kernel changed the current CUDA device and did not restore it"};
    }

    void sync_after_kernel(const char* when) {
        cudaError_t launch = cudaGetLastError();
        cudaError_t sync = cudaStreamSynchronize(stream_);
        cudaError_t e = sync != cudaSuccess ? sync : launch;
        if (e != cudaSuccess)
            throw CandidateFailure{"runtime_error", std::string("CUDA error ") + when + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
    }

    json run_trial(size_t set, Buffers& in, uint64_t seed, unsigned char pattern, Scratch& sc, std::vector<std::string>& warnings) {
        json check{{"shape_set", set}, {"seed", seed}};
        auto t_last = std::chrono::steady_clock::now();
        auto tlap = [&](const char* what) {  // where a trial's time goes, summed over trials
            auto now = std::chrono::steady_clock::now();
            double& acc = trial_profile_[what];
            acc += std::chrono::duration<double>(now - t_last).count();
            t_last = now;
        };
        fill(in, seed, stream_);
        CK(cudaStreamSynchronize(stream_));
        auto before = checksums(in, sc, stream_);
        tlap("fill_inputs");
        // Output and expected buffers are reused per shape set (poisoned before every run).
        if (outputs_.size() <= set) outputs_.resize(set + 1), expected_.resize(set + 1);
        if (outputs_[set].desc.empty()) outputs_[set] = Buffers(job_.outputs[set]);
        if (expected_[set].desc.empty()) expected_[set] = Buffers(job_.outputs[set]);
        Buffers& out = outputs_[set];
        Buffers& expected = expected_[set];
        poison(out, pattern, stream_);
        poison(expected, pattern ^ 0x80, stream_);
        CK(cudaStreamSynchronize(stream_));
        auto poisoned = checksums(out, sc, stream_);
        tlap("poison_outputs");
        stage("trial: running the kernel (shape set " + std::to_string(set) + ", seed " + std::to_string(seed) + ")");
        // Gate the stream, call the kernel, and watch the outputs from another stream while the
        // gate holds: honest work is queued behind the gate and cannot have touched them yet.
        gate_[0] = 0;
        gate_[1] = 0;
        gate_kernel<<<1, 1, 0, stream_>>>(gate_dev_, gate_dev_ + 1, gate_cycles_);
        CK(cudaGetLastError());
        call_kernel(in, out, "during the correctness check");
        cudaStreamSynchronize(cudaStreamLegacy);  // lets work on the legacy default stream land
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        auto during = checksums(out, sc, observer_);
        gate_[0] = 1;
        sync_after_kernel("while running the kernel");
        if (!gate_[1] && during != poisoned)
            throw CandidateFailure{"rejected",
                                   "the outputs were written while the given stream was still held back: the kernel works on another "
                                   "stream (or the legacy default stream) or from a host thread; enqueue everything on `stream`"};
        // Work the caller never waits for (another stream, a host thread) may still be landing.
        tlap("kernel_gated");
        auto h1 = checksums(out, sc, stream_);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess)
            throw CandidateFailure{"runtime_error", std::string("CUDA error in work the kernel left behind: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
        auto h2 = checksums(out, sc, stream_);
        if (h1 != h2)
            throw CandidateFailure{"rejected",
                                   "the outputs changed after the given stream had finished: the kernel does work on another stream or host thread that the caller never waits for; enqueue everything on `stream`"};
        auto after = checksums(in, sc, stream_);
        for (size_t i = 0; i < before.size(); ++i)
            if (before[i] != after[i])
                throw CandidateFailure{"rejected", "the kernel modified input '" + in.desc[i].name + "'; inputs are read-only"};

        // The reference runs after the candidate, so its result for these inputs never exists in
        // device memory while the candidate runs.
        tlap("side_effect_checks");
        stage("trial: running the reference");
        {
            auto ins = in.fresh_abi();
            auto outs = expected.fresh_abi();
            g_candidate_ran = false;
            int rc = ref_forward_(ins.data(), static_cast<int>(ins.size()), outs.data(), static_cast<int>(outs.size()), stream_);
            if (rc != 0) throw SetupFailure{std::string("the reference failed: ") + ref_error_()};
            cudaError_t re = cudaStreamSynchronize(stream_);
            if (re != cudaSuccess) throw SetupFailure{std::string("the reference failed: ") + cudaGetErrorString(re)};
            ref_release_();
            g_candidate_ran = true;
        }
        tlap("reference");

        bool pass = true;
        double max_abs = 0;
        std::string message;
        for (size_t o = 0; o < out.desc.size(); ++o) {
            const auto& d = out.desc[o];
            int64_t n = d.numel();
            if (n == 0) continue;
            bool exact = d.dtype != KEVO_FLOAT32 && d.dtype != KEVO_FLOAT16 && d.dtype != KEVO_BFLOAT16 && d.dtype != KEVO_FLOAT64;
            CompareStats init{};
            init.first_bad = ~0ull;
            init.worst = ~0ull;
            CK(cudaMemcpyAsync(sc.stats, &init, sizeof init, cudaMemcpyHostToDevice, stream_));
            compare_kernel<<<grid_for(n), 256, 0, stream_>>>(out.ptr[o], expected.ptr[o], d.dtype, n, exact, job_.atol, job_.rtol, sc.stats);
            CK(cudaGetLastError());
            CompareStats st{};
            CK(cudaMemcpyAsync(&st, sc.stats, sizeof st, cudaMemcpyDeviceToHost, stream_));
            CK(cudaStreamSynchronize(stream_));
            if (st.mismatches) {  // find the worst element for the report
                worst_kernel<<<grid_for(n), 256, 0, stream_>>>(out.ptr[o], expected.ptr[o], d.dtype, n, exact, job_.atol, job_.rtol, sc.stats);
                CK(cudaGetLastError());
                CK(cudaMemcpyAsync(&st, sc.stats, sizeof st, cudaMemcpyDeviceToHost, stream_));
                CK(cudaStreamSynchronize(stream_));
            }
            float max_diff, max_finite;
            std::memcpy(&max_diff, &st.max_diff_bits, 4);
            std::memcpy(&max_finite, &st.max_finite_bits, 4);
            max_abs = std::max<double>(max_abs, max_finite);
            if (st.nonconstant == 0 && n > 1) {
                std::string w = "the reference output '" + d.name + "' is constant on these inputs; the check cannot tell a correct kernel from one that writes a constant";
                if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
            }
            if (st.mismatches && pass) {
                pass = false;
                std::ostringstream ss;
                ss << "output '" << d.name << "' differs from the reference in shape set " << set;
                if (!job_.set_labels[set].empty()) ss << " (" << job_.set_labels[set] << ")";
                ss << ", seed " << seed << ": " << st.mismatches << " of " << n << " elements outside atol " << fmt(job_.atol)
                   << " + rtol " << fmt(job_.rtol) << "*|expected|.\n";
                ss << "first mismatch at index " << index_string(st.first_bad, d.sizes) << " (flat " << st.first_bad
                   << "): got " << fmt(host_value(out.ptr[o], d.dtype, st.first_bad)) << ", expected "
                   << fmt(host_value(expected.ptr[o], d.dtype, st.first_bad)) << "\n";
                if (st.worst != ~0ull)
                    ss << "worst element at index " << index_string(st.worst, d.sizes) << " (flat " << st.worst
                       << "): got " << fmt(host_value(out.ptr[o], d.dtype, st.worst)) << ", expected "
                       << fmt(host_value(expected.ptr[o], d.dtype, st.worst)) << " (|diff| " << fmt(max_diff) << ")";
                message = ss.str();
                check["output"] = d.name;
                check["mismatches"] = st.mismatches;
                check["first_mismatch"] = st.first_bad;
                check["worst"] = st.worst;
            }
        }
        tlap("compare");
        check["pass"] = pass;
        check["max_abs_diff"] = max_abs;
        if (!pass) check["message"] = message;
        return check;
    }

    static json summarize(std::vector<float> v) {
        std::sort(v.begin(), v.end());
        auto q = [&](double p) { return static_cast<double>(v[std::min<size_t>(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))]) * 1000.0; };
        double mean = 0;
        for (float x : v) mean += x;
        mean = mean / v.size() * 1000.0;
        double med = q(0.5);
        return json{{"median_us", med}, {"p10_us", q(0.1)}, {"p90_us", q(0.9)}, {"mean_us", mean},
                    {"min_us", static_cast<double>(v.front()) * 1000.0}, {"spread", med > 0 ? (q(0.9) - q(0.1)) / med : 0.0},
                    {"n", v.size()}};
    }

    json time_both(Scratch&) {
        stage("timing");
        // Several copies of the inputs and outputs at different addresses, used in turn: a time
        // that depends on where the buffers happen to lie in memory then averages out within one
        // run instead of differing between runs.
        int64_t set_bytes = 1;
        for (const auto& t : job_.inputs[0]) set_bytes += t.bytes();
        for (const auto& t : job_.outputs[0]) set_bytes += t.bytes();
        size_t free_mem = 0, total_mem = 0;
        CK(cudaMemGetInfo(&free_mem, &total_mem));
        const int copies = static_cast<int>(
            std::max<int64_t>(1, std::min<int64_t>(job_.timing_copies, static_cast<int64_t>(free_mem / 4) / set_bytes)));
        std::vector<Buffers> in_sets, out_sets;
        for (int c = 0; c < copies; ++c) {
            in_sets.emplace_back(job_.inputs[0]);
            fill(in_sets.back(), job_.seed + 7919, stream_);
            out_sets.emplace_back(job_.outputs[0]);
            poison(out_sets.back(), 0xFF, stream_);
        }
        int cur = 0;  // the copy the next call uses
        int64_t l2 = 0;
        {
            int v = 0;
            cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device_);
            l2 = v;
        }
        // Flush L2 between trials by touching a buffer well beyond its size (at least twice). By
        // default the flush reads, so the timed call starts with L2 full of clean lines; a memset
        // ("write") leaves it full of dirty lines whose write-back then lands inside the timed call.
        size_t flush_bytes = static_cast<size_t>(std::max<int64_t>(4 * l2, 256ll << 20)) & ~size_t(15);
        void* flush = nullptr;
        CK(cudaMalloc(&flush, flush_bytes));
        CK(cudaMemsetAsync(flush, 0, flush_bytes, stream_));
        const bool read_flush = job_.l2_flush != "write";
        unsigned* flush_sink = nullptr;
        CK(cudaMalloc(&flush_sink, sizeof(unsigned)));
        int flush_blocks = 0;
        {
            int sms = 0;
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_);
            flush_blocks = std::max(1, sms) * 4;
        }
        auto flush_l2 = [&](int i) {
            if (read_flush) {
                l2_flush_read<<<flush_blocks, 512, 0, stream_>>>(static_cast<const uint4*>(flush), flush_bytes / 16, flush_sink);
                CK(cudaGetLastError());
            } else {
                CK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, stream_));
            }
        };
        auto run_kernel = [&] {
            auto i2 = in_sets[cur].fresh_abi();
            auto o2 = out_sets[cur].fresh_abi();
            int rc = kernel_(i2.data(), static_cast<int>(i2.size()), o2.data(), static_cast<int>(o2.size()), stream_);
            if (rc != 0) throw CandidateFailure{"runtime_error", "kevo_forward returned " + std::to_string(rc) + " while being timed"};
        };
        auto run_ref = [&] {
            auto i2 = in_sets[cur].fresh_abi();
            g_candidate_ran = false;
            int rc = ref_call_(i2.data(), static_cast<int>(i2.size()), stream_);
            g_candidate_ran = true;
            if (rc != 0) throw SetupFailure{std::string("the reference failed while being timed: ") + ref_error_()};
        };
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        auto once = [&](auto&& fn, int i) {
            flush_l2(i);
            CK(cudaEventRecord(e0, stream_));
            fn();
            CK(cudaEventRecord(e1, stream_));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            return ms;
        };
        // Warm-up, which also sizes the number of trials to the time budget.
        float kw = 0, rw = 0, fw = 0;
        for (int i = 0; i < std::max(1, job_.warmup); ++i) {
            cur = i % copies;
            kw = once(run_kernel, i);
            sync_after_kernel("while warming up");
            rw = once(run_ref, i);
        }
        {
            CK(cudaEventRecord(e0, stream_));
            flush_l2(1);
            CK(cudaEventRecord(e1, stream_));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&fw, e0, e1));
        }
        double per_trial_s = (kw + rw + 2 * fw) / 1000.0 + 40e-6;
        int trials = job_.timing_trials;
        bool reduced = false;
        if (per_trial_s * trials > job_.timing_budget_s) {
            trials = std::max(10, static_cast<int>(job_.timing_budget_s / per_trial_s));
            reduced = trials < job_.timing_trials;
        }
        // Interleave candidate and reference (alternating who goes first) so that clock drift
        // affects both alike; each trial gets its own event pair, read back at the end.
        std::vector<cudaEvent_t> ev(4 * trials);
        for (auto& e : ev) CK(cudaEventCreate(&e));
        for (int i = 0; i < trials; ++i) {
            cur = i % copies;
            for (int k = 0; k < 2; ++k) {
                bool kernel_turn = (k == 0) == (i % 2 == 0);
                int slot = 4 * i + (kernel_turn ? 0 : 2);
                flush_l2(i);
                CK(cudaEventRecord(ev[slot], stream_));
                if (kernel_turn) run_kernel();
                else run_ref();
                CK(cudaEventRecord(ev[slot + 1], stream_));
            }
            // Keep the host close to the device so the launch queue never runs dry or over-full.
            if (i % 8 == 7) CK(cudaEventSynchronize(ev[4 * i + 3]));
        }
        sync_after_kernel("while being timed");
        std::vector<float> kt, rt;
        for (int i = 0; i < trials; ++i) {
            float a = 0, b = 0;
            CK(cudaEventElapsedTime(&a, ev[4 * i], ev[4 * i + 1]));
            CK(cudaEventElapsedTime(&b, ev[4 * i + 2], ev[4 * i + 3]));
            kt.push_back(a);
            rt.push_back(b);
        }
        for (auto& e : ev) cudaEventDestroy(e);
        json k = summarize(kt), r = summarize(rt);
        // Per-copy medians show whether a time depends on where the buffers lie.
        json kernel_copies = json::array(), reference_copies = json::array();
        for (int c = 0; c < copies && c < trials; ++c) {
            std::vector<float> a, b;
            for (int i = c; i < trials; i += copies) {
                a.push_back(kt[i]);
                b.push_back(rt[i]);
            }
            kernel_copies.push_back(summarize(a)["median_us"]);
            reference_copies.push_back(summarize(b)["median_us"]);
        }
        k["per_copy_median_us"] = kernel_copies;
        r["per_copy_median_us"] = reference_copies;

        // Work hidden from the stream is invisible to its events: compare wall-clock time with
        // the whole device synchronized against what the events saw.
        std::vector<double> wall;
        cur = 0;
        for (int i = 0; i < 5; ++i) {
            CK(cudaDeviceSynchronize());
            auto t0 = std::chrono::steady_clock::now();
            run_kernel();
            cudaError_t e = cudaDeviceSynchronize();
            if (e != cudaSuccess) throw CandidateFailure{"runtime_error", std::string("CUDA error: ") + cudaGetErrorString(e)};
            wall.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(wall.begin(), wall.end());
        double wall_med = wall[2], ev_med = k["median_us"];
        if (wall_med > 2 * ev_med + 100)
            throw CandidateFailure{"rejected", "the kernel takes " + fmt(wall_med) + " us of device time but only " + fmt(ev_med) +
                                                   " us on its stream: it does work outside the given stream"};
        cudaFree(flush);
        cudaFree(flush_sink);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return json{{"kernel", k}, {"reference", r}, {"trials", trials}, {"trials_reduced_to_fit_budget", reduced},
                    {"warmup", job_.warmup}, {"l2_flush_bytes", flush_bytes}, {"l2_flush", read_flush ? "read" : "write"}, {"buffer_copies", copies}, {"kernel_wall_us", wall_med}};
    }

    const Job& job_;
    cudaStream_t stream_ = nullptr, observer_ = nullptr;
    std::vector<Buffers> outputs_, expected_;  // per shape set
    std::map<std::string, double> trial_profile_;
    volatile int* gate_ = nullptr;  // [0] open flag, [1] timed out (pinned, mapped)
    int* gate_dev_ = nullptr;
    long long gate_cycles_ = 0;
    int device_ = 0;
    void* ref_lib_ = nullptr;
    void* kernel_lib_ = nullptr;
    forward_fn ref_forward_ = nullptr;
    ref_call_fn ref_call_ = nullptr;
    ref_release_fn ref_release_ = nullptr;
    ref_error_fn ref_error_ = nullptr;
    forward_fn kernel_ = nullptr;
};

void write_result(const std::string& path, const json& j) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream o(tmp);
        o << j.dump() << "\n";
    }
    std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    std::string job_path, result_path;
    bool info = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--info") info = true;
        else if (a == "--job" && i + 1 < argc) job_path = argv[++i];
        else if (a == "--result" && i + 1 < argc) result_path = argv[++i];
        else {
            std::fprintf(stderr, "usage: kernelevo-runner --info | --job JOB.json --result RESULT.json\n(an internal helper of kernelevo)\n");
            return 2;
        }
    }
    if (info) {
        std::cout << device_info().dump() << std::endl;
        return 0;
    }
    if (job_path.empty() || result_path.empty()) {
        std::fprintf(stderr, "usage: kernelevo-runner --info | --job JOB.json --result RESULT.json\n");
        return 2;
    }
    json result;
    int code = 0;
    try {
        std::ifstream in(job_path);
        Job job = parse_job(json::parse(in));
        Runner runner(job);
        result = runner.run();
    } catch (const CandidateFailure& f) {
        result = json{{"status", f.status}, {"log", f.message}};
    } catch (const SetupFailure& f) {
        result = json{{"status", "setup_error"}, {"log", f.message}};
        std::fprintf(stderr, "%s\n", f.message.c_str());
        code = 3;
    } catch (const std::exception& e) {
        result = json{{"status", "setup_error"}, {"log", std::string("runner: ") + e.what()}};
        code = 3;
    }
    write_result(result_path, result);
    std::fflush(nullptr);
    // Skip static destructors: a misbehaving kernel library may crash them, and the answer is out.
    _exit(code);
}
