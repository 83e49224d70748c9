#include "validate/validate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <cstdlib>

#include "common/env.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "reference/reference.h"
#include "common/hash.h"
#include "task/fitness.h"
#include "language/registry.h"
#include "sandbox/confine.h"
#include "sandbox/sandbox.h"
#include "device/tolerance.h"
#include "validate/accuracy.h"
#include "validate/gpu_lock.h"
#include "validate/job.h"
#include "validate/validator_impl.h"

namespace kevo {

namespace {
std::string tail(const std::string& s, size_t n) { return s.size() <= n ? s : "[...]\n" + s.substr(s.size() - n); }

fs::path default_runner() {
    if (const char* p = env(EnvVar::kRunner); p && *p) return p;
    fs::path beside = self_exe_dir() / "kernelevo-runner";
    std::error_code ec;
    if (fs::exists(beside, ec)) return beside;
#ifdef KEVO_BUILD_RUNNER
    if (fs::exists(KEVO_BUILD_RUNNER, ec)) return KEVO_BUILD_RUNNER;
#endif
    return beside;
}

}  // namespace

std::unique_ptr<GpuLock> lock_device(const DeviceInfo& d, const std::function<void(const std::string&)>& note) {
    if (!d.present) return nullptr;
    return std::make_unique<GpuLock>(d.uuid.empty() ? "gpu" + std::to_string(d.index) : d.uuid, "GPU " + std::to_string(d.index) + " (" + d.name + ")", note);
}

namespace {
// A judge's setup error that says the device had no memory left (CUDA's and LibTorch's words).
bool gpu_memory_full(const std::string& log) {
    return log.find("out of memory") != std::string::npos || log.find("OUT_OF_MEMORY") != std::string::npos ||
           log.find("cudaErrorMemoryAllocation") != std::string::npos;
}

// What the judge saw of other processes on the GPU around a wall-clock rejection
// (runner/gpu_activity.h), as a line for the log; marks the result not attributable to the kernel
// when another process used the GPU meanwhile.
std::string interference_note(const nlohmann::json& a, nlohmann::json& details) {
    if (!a.is_object() || a.value("source", "") != "nvml")
        return "(whether other processes used the GPU meanwhile is unknown here: " +
               (a.is_object() ? a.value("why", std::string("the judge did not say")) : std::string("the judge did not say")) + ")";
    std::string who;
    for (const auto& o : a.value("others", nlohmann::json::array()))
        who += (who.empty() ? "" : "; ") + std::string("pid ") + std::to_string(o.value("pid", 0)) + " (" + o.value("name", std::string()) +
               "): SM up to " + std::to_string(o.value("sm_pct", 0)) + "%, memory up to " + std::to_string(o.value("mem_pct", 0)) + "%";
    if (who.empty()) return "(no other process used the GPU meanwhile, by NVML's per-process samples)";
    details["not_attributable"] = true;
    return "During this validation other processes used the GPU (" + who +
           "): the extra time may be theirs, and it is not attributed to the kernel.";
}

// The weighted geometric mean of the timed shape sets' speedups (task/fitness.h).
double shapes_geomean(const std::vector<ShapeTiming>& shapes) {
    std::vector<double> s, w;
    for (const auto& t : shapes) s.push_back(t.speedup), w.push_back(t.weight);
    return weighted_geomean(s, w);
}

// Where the cuBLAS libraries the runner opens for candidates of ABI version 2 really are
// (runner/cublas_host.cpp): the sandbox shows them and Landlock lets the candidate process read them.
std::vector<std::string> cublas_dirs() {
    std::vector<std::string> dirs;
    for (const char* lib : {KEVO_CUBLAS_LIBRARY, KEVO_CUBLASLT_LIBRARY}) {
        std::error_code ec;
        const fs::path real = fs::canonical(lib, ec);
        if (ec) continue;
        const std::string dir = real.parent_path().string();
        if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    }
    return dirs;
}

// Landlock's view for the candidate process: the system paths (with namespaces they are all the
// sandbox has anyway; without, only the candidate's own /proc entry), the runner and cuBLAS.
std::vector<std::string> candidate_readable(const fs::path& runner, bool namespaces) {
    std::vector<std::string> r = system_readable_paths(namespaces);
    r.push_back(runner.string());
    for (const auto& d : cublas_dirs()) r.push_back(d);
    return r;
}
}  // namespace

Validator::Validator(Task task, ValidateOptions options) : task_(std::move(task)), options_(std::move(options)), impl_(new Impl) {
    impl_->runner = options_.runner.empty() ? default_runner() : options_.runner;
    if (!options_.arch.empty()) options_.arch = normalize_arch(options_.arch);
    if (options_.timeout_s <= 0) throw UsageError("the timeout must be positive");
    if (options_.timing_trials < 1) throw UsageError("timing needs at least one trial");
    static const char* flushes[] = {"read", "none"};
    if (std::find(std::begin(flushes), std::end(flushes), options_.l2_flush) == std::end(flushes))
        throw UsageError("L2 flush must be read or none, not '" + options_.l2_flush + "'");
    if (options_.timing_copies < 1 || options_.timing_copies > 64) throw UsageError("timing copies must be between 1 and 64");
    if (options_.min_timing_trials < 1) options_.min_timing_trials = 1;
}

Validator::~Validator() {
    // The judge's exit frees what it kept on the GPU (the timing copies: up to a quarter of the
    // device); that happens under the lock too, never inside another validation's timed batches.
    if (!impl_->judge || !impl_->judge->alive()) return;
    try {
        auto gpu = lock_gpu();
        impl_->judge.reset();
    } catch (const std::exception&) {
        impl_->judge.reset();
    }
}

void Validator::set_note(std::function<void(const std::string&)> note) { impl_->note = std::move(note); }
void Validator::set_retry_pause(double s) { impl_->retry_pause_s = s; }
std::unique_ptr<GpuLock> Validator::lock_gpu() { return lock_device(device(), impl_->note); }
void Validator::set_best_speedup(double s) {
    std::lock_guard<std::mutex> lock(impl_->run_mu);
    impl_->best_speedup = s;
}

const DeviceInfo& Validator::device() {
    std::lock_guard<std::mutex> lock(impl_->device_mu);
    if (impl_->device_queried) return impl_->device;
    impl_->device_queried = true;
    std::error_code ec;
    if (!fs::exists(impl_->runner, ec)) {
        impl_->device.error = "kernelevo-runner not found at " + impl_->runner.string();
        return impl_->device;
    }
    ProcessOptions po;
    po.argv = {impl_->runner.string(), "--info"};
    po.timeout_s = 60;
    po.exact_env = sandbox_environment();
    ProcessResult r = run_process(po);
    if (!r.ok()) {
        impl_->device.error = "querying the GPU failed: " + r.describe() + " " + tail(r.err, 500);
        return impl_->device;
    }
    try {
        impl_->device = DeviceInfo::from_json(nlohmann::json::parse(r.out));
    } catch (const std::exception& e) {
        impl_->device.error = std::string("unreadable device description: ") + e.what();
    }
    return impl_->device;
}

double Validator::measured_bandwidth_gbs() {
    std::lock_guard<std::mutex> lock(impl_->bw_mu);
    if (impl_->bandwidth >= 0) return impl_->bandwidth;
    impl_->bandwidth = 0;
    const DeviceInfo& d = device();
    if (!d.present) return 0;
    // Cached per device (its UUID) and toolkit in the tool's cache.
    fs::path cache = cache_root() / "devices" / (d.uuid.empty() ? d.name : d.uuid) / "bandwidth.json";
    std::error_code ec;
    if (fs::exists(cache, ec)) {
        try {
            impl_->bandwidth = nlohmann::json::parse(read_file(cache)).value("copy_gbs", 0.0);
            if (impl_->bandwidth > 0) return impl_->bandwidth;
        } catch (const std::exception&) {
        }
    }
    auto gpu = lock_device(d, impl_->note);
    ProcessOptions po;
    po.argv = {impl_->runner.string(), "--bandwidth"};
    po.timeout_s = 120;
    po.exact_env = sandbox_environment();
    ProcessResult r = run_process(po);
    if (r.ok()) {
        try {
            impl_->bandwidth = nlohmann::json::parse(r.out).value("copy_gbs", 0.0);
            write_file_atomic(cache, nlohmann::json{{"copy_gbs", impl_->bandwidth}, {"gpu", d.name}}.dump());
        } catch (const std::exception&) {
        }
    }
    return impl_->bandwidth;
}

std::string Validator::arch() {
    if (!options_.arch.empty()) return options_.arch;
    const DeviceInfo& d = device();
    return d.present ? d.arch() : "sm_90";
}

CompileResult Validator::compile(const std::string& source) {
    CompileOptions co = options_.compile;
    co.arch = arch();
    // A candidate with a launch description binds the task's tensors and dimensions.
    if (!co.task) co.task = std::make_shared<const Task>(task_);
    return compile_candidate(source, co);  // in its language (CompileOptions::backend)
}

ValidationResult Validator::run_job(const CompileResult& compiled, uint64_t seed_offset, bool fresh_reference) {
    ValidationResult res;
    res.arch = compiled.arch.empty() ? arch() : compiled.arch;
    res.compile_s = compiled.seconds;
    if (!compiled.ok) {
        res.status = Status::compile_error;
        res.log = compiled.log;
        return res;
    }
    const DeviceInfo& dev = device();
    res.gpu = dev.name;
    const bool run_on_gpu = dev.present && (dev.arch() == res.arch || dev.arch() + "a" == res.arch);
    {
        // Build (or fetch) the reference even without a GPU: a broken reference is a broken task.
        std::lock_guard<std::mutex> lock(impl_->ref_mu);
        if (!impl_->ref_built) {
            impl_->ref = build_reference(task_);
            impl_->ref_built = true;
        }
        if (!impl_->ref.ok) throw UsageError(impl_->ref.log);
    }
    check_sandbox_layers();
    const bool namespaces = sandbox_mode() != SandboxMode::off && sandbox_layers().namespaces;

    Job job;
    // Fresh random inputs for every validation unless a seed is given (ValidateOptions::seed).
    if (options_.seed) {
        job.seed = options_.seed + seed_offset;
    } else {
        std::random_device rd;
        job.seed = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & ((1ull << 53) - 1);  // exact in any JSON reader
        if (job.seed == 0) job.seed = 1;
    }
    TempDir tmp("kernelevo-run");
    if (options_.keep_temps) tmp.keep();
    // The candidate process loads a private copy of the library, checked against its content hash.
    fs::path lib = tmp.path() / "kernel.so";
    std::string why = verify_compiled(compiled);
    if (!why.empty()) {
        res.status = Status::compile_error;
        res.log = why;
        return res;
    }
    fs::copy_file(compiled.library, lib, fs::copy_options::overwrite_existing);
    job.kernel = lib.string();
    job.workdir = tmp.path().string();
    SandboxPolicy policy;
    policy.workdir = tmp.path();
    policy.gpu = run_on_gpu;
    policy.read_only = {impl_->runner};
    for (const auto& d : cublas_dirs()) policy.read_only.push_back(d);
    job.sandbox_prefix = sandbox_prefix(policy);
    std::map<std::string, std::string> extra;
    if (options_.device_index >= 0) extra[env_name(EnvVar::kDevice)] = std::to_string(options_.device_index);
    job.candidate_env = sandbox_environment(extra);
    job.candidate_env["HOME"] = tmp.path().string();
    job.confine = sandbox_mode() != SandboxMode::off;
    job.readable = candidate_readable(impl_->runner, namespaces);
    job.readable.push_back(tmp.path().string());
    // With namespaces /tmp is the sandbox's own; without them the real /tmp stays out of reach.
    job.writable = {tmp.path().string(), "/dev"};
    if (namespaces) job.writable.push_back("/tmp");
    job.call_timeout_s = options_.timeout_s;

    if (!run_on_gpu) {
        // No GPU of this architecture here: still load the candidate in the sandbox, so unresolved
        // symbols and static constructors are checked (and confined) on every machine.
        job.load_only = true;
        ValidationResult lr = send_job(job, res);
        if (lr.status != Status::ok) return lr;
        res.status = Status::no_device;
        res.details = lr.details;
        res.details["seed"] = job.seed;
        if (!dev.present)
            res.log = "compiled for " + res.arch + " and loaded in the sandbox; not run: " +
                      (dev.error.empty() ? std::string("no CUDA device") : dev.error);
        else
            res.log = "compiled for " + res.arch + " and loaded in the sandbox, but the GPU here is " + dev.name + " (" + dev.arch() + "); not run";
        return res;
    }

    job.reference = impl_->ref.library.string();
    job.reference_arg = task_.reference_arg.string();
    const std::vector<int> timed = task_.timed_sets();
    const std::vector<double> weights = task_.weights();
    for (size_t s = 0; s < task_.shapes.size(); ++s) {
        JobShapeSet set;
        for (const auto& [k, v] : task_.shapes[s]) set.label += (set.label.empty() ? "" : ", ") + k + "=" + std::to_string(v);
        for (const auto& t : task_.inputs) {
            JobTensor jt;
            jt.name = t.name;
            jt.dtype = dtype_abi(t.dtype);
            jt.sizes = task_.concrete_shape(t, s);
            jt.init = kevo_init_kind_from_name(t.init.kind.c_str());
            jt.a = t.init.a;
            jt.b = t.init.b;
            jt.path = t.init.file.string();
            set.inputs.push_back(jt);
        }
        for (const auto& t : task_.outputs) {
            JobTensor jt;
            jt.name = t.name;
            jt.dtype = dtype_abi(t.dtype);
            jt.sizes = task_.concrete_shape(t, s);
            set.outputs.push_back(jt);
        }
        auto at = std::find(timed.begin(), timed.end(), static_cast<int>(s));
        set.timed = at != timed.end();
        set.weight = set.timed && static_cast<size_t>(at - timed.begin()) < weights.size() ? weights[at - timed.begin()] : 1.0;
        job.sets.push_back(set);
    }
    job.trials = task_.correctness_trials;
    job.atol = task_.atol;
    job.rtol = task_.rtol;
    job.time = options_.time_kernels;
    job.timing_trials = options_.timing_trials;
    job.min_timing_trials = std::min(options_.min_timing_trials, options_.timing_trials);
    job.target_ci = options_.target_ci;
    job.extend_timing_s = options_.extend_timing_s;
    job.verify_fraction = options_.verify_fraction;
    job.warmup = options_.warmup;
    job.timing_budget_s = std::max(1.0, options_.timeout_s * 0.4);
    job.l2_flush = options_.l2_flush;
    job.timing_copies = options_.timing_copies;

    std::lock_guard<std::mutex> lock(impl_->run_mu);  // one candidate at a time on this GPU ...
    bool reuse = options_.reuse_reference_timing && !fresh_reference && !impl_->ref_us.empty() && impl_->ref_age < 25 &&
                 std::chrono::steady_clock::now() - impl_->ref_time < std::chrono::minutes(10);
    if (reuse) {
        for (size_t s = 0; s < job.sets.size(); ++s)
            if (impl_->ref_us.count(static_cast<int>(s))) job.sets[s].reference_us = impl_->ref_us[static_cast<int>(s)];
        job.best_speedup = impl_->best_speedup;
        ++impl_->ref_age;
    }
    // ... and across processes: the device's lock.
    auto gpu = lock_device(dev, impl_->note);
    ValidationResult out = send_job(job, res);
    if (out.status == Status::ok && !out.shapes.empty()) {
        const auto& sets = out.details["timing"]["sets"];
        bool measured = false;
        for (const auto& t : sets)
            if (t.value("reference_source", std::string()) != "earlier in this run") measured = true;
        if (measured) {
            for (const auto& t : sets) impl_->ref_us[t.value("shape_set", 0)] = t["reference"].value("time_us", 0.0);
            if (!reuse) {
                impl_->ref_age = 0;
                impl_->ref_time = std::chrono::steady_clock::now();
            }
        }
    }
    out.details["gpu_lock_wait_s"] = gpu->waited_s();
    out.details["seed"] = job.seed;
    out.details["tolerance"] = {{"atol", task_.atol}, {"rtol", task_.rtol}, {"rule", kevo_device::kToleranceRule}};
    if (!task_.tolerance_policy.empty()) out.details["tolerance"]["policy"] = task_.tolerance_policy;
    // The judge sends each side's precision with the timing; it describes the whole validation.
    if (auto t = out.details.find("timing"); t != out.details.end() && t->contains("reference_precision")) {
        out.details["reference_precision"] = (*t)["reference_precision"];
        t->erase("reference_precision");
    }
    return out;
}

std::string Validator::verify_compiled(const CompileResult& compiled) {
    if (compiled.library_sha256.empty()) return "";
    std::string actual;
    try {
        actual = sha256_hex(read_file(compiled.library));
    } catch (const std::exception& e) {
        return std::string("the compiled kernel cannot be read: ") + e.what();
    }
    if (actual != compiled.library_sha256) {
        // A concurrent build of the same source may have replaced it, with its own digest beside it.
        std::string recorded;
        try {
            recorded = read_file(fs::path(compiled.library.string() + ".sha256")).substr(0, 64);
        } catch (const std::exception&) {
        }
        if (recorded != actual)
            return "the compiled kernel " + compiled.library.string() + " does not match its content hash (it was modified after the build); it was not run";
    }
    return "";
}

ValidationResult Validator::send_job(const Job& job, const ValidationResult& base) {
    ValidationResult res = base;
    // The judge: one warm process per validator (the reference stays loaded), restarted when it dies.
    if (!impl_->judge || !impl_->judge->alive()) {
        ProcessOptions po;
        po.argv = {impl_->runner.string(), "--serve"};
        std::map<std::string, std::string> extra;
        if (options_.device_index >= 0) extra[env_name(EnvVar::kDevice)] = std::to_string(options_.device_index);
        // Diagnostics passed on to the judge: KEVO_TIMING_DUMP=FILE appends every timed set's raw
        // per-call times to FILE (JSON lines); KEVO_GATE_KERNEL gates the correctness check with the
        // spinning kernel instead of a stream-memory wait; KEVO_FAULT_WALL_CHECK (tests) fails the
        // wall-clock cross-check's first attempt at each set, so its retry is exercised.
        // The GPU memory ledger's place and its test hooks (gpu_ledger.h) reach the judge too.
        for (EnvVar var : {EnvVar::kTimingDump, EnvVar::kGateKernel, EnvVar::kFaultWallCheck, EnvVar::kLockDir, EnvVar::kGpuMemoryBytes,
                           EnvVar::kGpuMemoryMarginBytes})
            if (const char* v = env(var)) extra[env_name(var)] = v;
        po.exact_env = sandbox_environment(extra);
        impl_->judge = std::make_unique<Subprocess>(po);
    }
    auto t0 = std::chrono::steady_clock::now();
    std::string line;
    Subprocess::Read rd = Subprocess::Read::closed;
    if (impl_->judge->write_line(nlohmann::json(job).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))) {
        // The judge enforces the per-call watchdog itself; this one catches a judge that hangs.
        double limit = options_.timeout_s * 3 + 120 + job.timing_budget_s * job.sets.size();
        rd = impl_->judge->read_line(line, limit);
    }
    res.run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rd != Subprocess::Read::line) {
        std::string err = impl_->judge->err_tail(3000);
        bool timed_out = rd == Subprocess::Read::timeout;
        impl_->judge->kill_now();
        std::string how = impl_->judge->describe_exit();
        impl_->judge.reset();
        res.status = timed_out ? Status::timeout : Status::runtime_error;
        res.log = timed_out ? "the validation did not finish in time; the judge process was killed.\n" + tail(err, 1500)
                            : "the judge process died (" + how + ") before reporting a result.\n" + tail(err, 3000);
        return res;
    }
    JobResult out;
    try {
        out = nlohmann::json::parse(line).get<JobResult>();
    } catch (const std::exception& e) {
        res.status = Status::runtime_error;
        res.log = std::string("unreadable result from the judge: ") + e.what();
        return res;
    }
    if (out.status == "setup_error" && gpu_memory_full(out.log)) {
        // The judge's own allocations (inputs, timing copies, the reference's) found the GPU's memory
        // taken, by other validators' kept copies or other programs: not the kernel's fault, and not
        // a broken task. This judge goes (with what it kept); run() tries once more with a new one.
        impl_->judge.reset();
        res.status = Status::runtime_error;
        res.log = "the GPU's memory was full when the judge allocated its buffers (other processes hold it): " + out.log;
        res.details = {{"outside_kernel", "the GPU's memory was taken by other processes when the judge allocated its buffers"}};
        return res;
    }
    if (out.status == "setup_error") throw UsageError("validating against the reference of '" + task_.name + "' failed: " + out.log);
    res.status = parse_status(out.status);
    res.log = out.log;
    res.max_abs_diff = out.max_abs_diff;
    res.trials = out.trials;
    res.details = nlohmann::json(out);
    res.details.erase("log");
    res.details.erase("status");
    for (auto& w : summarize_accuracy(res.details)) {  // details.accuracy and .kernelbench_check (accuracy.h)
        res.details["warnings"].push_back(w);
        out.warnings.push_back(std::move(w));
    }
    if (!out.candidate_output.empty()) res.details["candidate_output"] = tail(out.candidate_output, 4000);
    if (out.timing.contains("sets")) {
        for (const auto& t : out.timing["sets"]) {
            ShapeTiming st;
            st.set = t.value("shape_set", 0);
            st.label = t.value("label", std::string());
            st.kernel_us = t["kernel"].value("time_us", 0.0);
            st.reference_us = t["reference"].value("time_us", 0.0);
            st.speedup = t.value("speedup", 0.0);
            st.weight = t.value("weight", 1.0);
            res.shapes.push_back(st);
        }
        if (!res.shapes.empty()) {
            const auto& t0j = out.timing["sets"][0];
            res.kernel_us = res.shapes[0].kernel_us;
            res.reference_us = res.shapes[0].reference_us;
            res.kernel_spread = t0j["kernel"].value("spread", 0.0);
            res.reference_spread = t0j["reference"].value("spread", 0.0);
            res.speedup = shapes_geomean(res.shapes);
            // Beside it, never ranked by: the speedup against the reference in strict fp32, where the
            // judge timed that too (LibTorch's defaults run TF32; runner/timing.cu), over the same sets.
            std::vector<ShapeTiming> strict = res.shapes;
            bool every_set = true;
            for (size_t i = 0; i < strict.size(); ++i) {
                const auto& t = out.timing["sets"][i];
                every_set = every_set && t.contains("speedup_vs_strict_fp32");
                if (every_set) strict[i].speedup = t["speedup_vs_strict_fp32"].get<double>();
            }
            if (every_set) res.details["speedup_vs_strict_fp32"] = shapes_geomean(strict);
            res.suspicious = res.speedup > options_.suspicious_speedup;
            if (res.suspicious)
                res.log += (res.log.empty() ? "" : "\n") + std::string("suspicious: ") + std::to_string(res.speedup) +
                           "x faster than the reference (threshold " + std::to_string(options_.suspicious_speedup) +
                           "x); it enters a cache only if a second validation agrees";
        }
    }
    if (res.status == Status::ok)
        for (const auto& w : out.warnings) res.log += (res.log.empty() ? "" : "\n") + std::string("warning: ") + w;
    if (is_wall_check_rejection(res)) res.log += "\n" + interference_note(out.interference, res.details);
    return res;
}

ValidationResult Validator::validate(const std::string& source) { return run(compile(source)); }

}  // namespace kevo
