#include "validate/validate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <cstdlib>

#include "common/settings.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "reference/reference.h"
#include "common/hash.h"
#include "language/registry.h"
#include "sandbox/sandbox.h"
#include "validate/gpu_lock.h"
#include "validate/job.h"
#include "validate/judge_job.h"
#include "validate/validator_impl.h"

namespace kevo {

namespace {
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

std::unique_ptr<GpuLock> lock_device(const DeviceInfo& d, GpuUse use, const std::string& reason,
                                     const std::function<void(const std::string&)>& note) {
    if (!d.present) return nullptr;
    const std::string label = "GPU " + std::to_string(d.index) + " (" + d.name + ")";
    try {
        return std::make_unique<GpuLock>(GpuLock::device_key(d.uuid, d.index), label, note, use, reason);
    } catch (const std::runtime_error& e) {
        throw UsageError(e.what());  // the lock directory is unusable: a setup error
    }
}

namespace {
// A judge's setup error that says the device had no memory left (CUDA's and LibTorch's words).
bool gpu_memory_full(const std::string& log) {
    return log.find("out of memory") != std::string::npos || log.find("OUT_OF_MEMORY") != std::string::npos ||
           log.find("cudaErrorMemoryAllocation") != std::string::npos;
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

Validator::~Validator() = default;

void Validator::set_note(std::function<void(const std::string&)> note) { impl_->note = std::move(note); }
void Validator::set_retry_pause(double s) { impl_->retry_pause_s = s; }
std::unique_ptr<GpuLock> Validator::lock_gpu(const std::string& reason) {
    return lock_device(device(), GpuUse::exclusive, reason, impl_->note);
}
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
        impl_->device.error = "querying the GPU failed: " + r.describe() + " " + log_tail(r.err, 500);
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
    auto gpu = lock_device(d, GpuUse::exclusive, "measuring the copy bandwidth", impl_->note);
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

const ReferenceBuild& Validator::Impl::reference(const Task& task) {
    std::lock_guard<std::mutex> lock(ref_mu);
    if (!ref_built) {
        ref = build_reference(task);
        ref_built = true;
    }
    if (!ref.ok) throw UsageError(ref.log);
    return ref;
}

bool Validator::Impl::reuse_reference_times(Job& job, const ValidateOptions& options, bool fresh_reference) {
    const bool reuse = options.reuse_reference_timing && !fresh_reference && !ref_us.empty() && ref_age < 25 &&
                       std::chrono::steady_clock::now() - ref_time < std::chrono::minutes(10);
    if (!reuse) return false;
    for (size_t s = 0; s < job.sets.size(); ++s)
        if (ref_us.count(static_cast<int>(s))) job.sets[s].reference_us = ref_us[static_cast<int>(s)];
    job.best_speedup = best_speedup;
    ++ref_age;
    return true;
}

void Validator::Impl::remember_reference_times(const ValidationResult& out, bool reused) {
    if (out.status != Status::ok || out.shapes.empty()) return;
    const auto& sets = out.details["timing"]["sets"];
    bool measured = false;
    for (const auto& t : sets)
        if (t.value("reference_source", std::string()) != "earlier in this run") measured = true;
    if (!measured) return;
    for (const auto& t : sets) ref_us[t.value("shape_set", 0)] = t["reference"].value("time_us", 0.0);
    if (!reused) {
        ref_age = 0;
        ref_time = std::chrono::steady_clock::now();
    }
}

namespace {
// A candidate compiled for an architecture this machine cannot run, loaded in the sandbox only
// (`loaded`: the judge's load-only answer): no_device, saying why it was not run.
ValidationResult loaded_not_run(ValidationResult res, const ValidationResult& loaded, const DeviceInfo& dev, uint64_t seed) {
    res.status = Status::no_device;
    res.details = loaded.details;
    res.details["seed"] = seed;
    if (!dev.present)
        res.log = "compiled for " + res.arch + " and loaded in the sandbox; not run: " +
                  (dev.error.empty() ? std::string("no CUDA device") : dev.error);
    else
        res.log = "compiled for " + res.arch + " and loaded in the sandbox, but the GPU here is " + dev.name + " (" + dev.arch() + "); not run";
    return res;
}
}  // namespace

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
    // Build (or fetch) the reference even without a GPU: a broken reference is a broken task.
    const ReferenceBuild& ref = impl_->reference(task_);
    check_sandbox_layers();
    const bool namespaces = sandbox_mode() != SandboxMode::off && sandbox_layers().namespaces;

    Job job;
    // Fresh random inputs for every validation unless a seed is given (ValidateOptions::seed).
    job.seed = job_seed(options_, seed_offset);
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
    set_job_sandbox(job, tmp.path(), impl_->runner, run_on_gpu, namespaces, options_);

    if (!run_on_gpu) {
        // No GPU of this architecture here: still load the candidate in the sandbox, so unresolved
        // symbols and static constructors are checked (and confined) on every machine.
        job.load_only = true;
        ValidationResult lr = send_job(job, res);
        return lr.status != Status::ok ? lr : loaded_not_run(res, lr, dev, job.seed);
    }

    job.reference = ref.library.string();
    job.reference_arg = task_.reference_arg.string();
    job.sets = job_shape_sets(task_);
    set_job_checks(job, task_, options_);
    job.label = task_.name;

    // One candidate at a time in this validator's judge, which takes the device's lock itself: shared
    // for the correctness runs, exclusive for the timed calls (runner/judge.cu).
    std::lock_guard<std::mutex> lock(impl_->run_mu);
    const bool reused = impl_->reuse_reference_times(job, options_, fresh_reference);
    ValidationResult out = send_job(job, res);
    impl_->remember_reference_times(out, reused);
    add_validation_facts(out.details, task_, job.seed);
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

void Validator::Impl::start_judge(int device_index) {
    if (judge && judge->alive()) return;
    ProcessOptions po;
    po.argv = {runner.string(), "--serve"};
    std::map<std::string, std::string> extra;
    if (device_index >= 0) extra[env_name(EnvVar::kDevice)] = std::to_string(device_index);
    // Diagnostics passed on to the judge: KEVO_TIMING_DUMP=FILE appends every timed set's raw
    // per-call times to FILE (JSON lines); KEVO_PHASE_LOG=FILE each job's phases (the GPU lock's too);
    // KEVO_GATE_KERNEL gates the correctness check with the
    // spinning kernel instead of a stream-memory wait; KEVO_FAULT_WALL_CHECK (tests) fails the
    // wall-clock cross-check's first attempt at each set, so its retry is exercised.
    // The GPU memory ledger's place and its test hooks (gpu_ledger.h) reach the judge too.
    for (EnvVar var : {EnvVar::kTimingDump, EnvVar::kPhaseLog, EnvVar::kGateKernel, EnvVar::kFaultWallCheck,
                       EnvVar::kLockDir, EnvVar::kGpuMemoryBytes, EnvVar::kGpuMemoryMarginBytes})
        if (const char* v = env(var)) extra[env_name(var)] = v;
    po.exact_env = sandbox_environment(extra);
    judge = std::make_unique<Subprocess>(po);
}

void Validator::Impl::judge_lost(Subprocess::Read rd, ValidationResult& res) {
    std::string err = judge->err_tail(3000);
    bool timed_out = rd == Subprocess::Read::timeout;
    judge->kill_now();
    std::string how = judge->describe_exit();
    judge.reset();
    res.status = timed_out ? Status::timeout : Status::runtime_error;
    res.log = timed_out ? "the validation did not finish in time; the judge process was killed.\n" + log_tail(err, 1500)
                        : "the judge process died (" + how + ") before reporting a result.\n" + log_tail(err, 3000);
}

ValidationResult Validator::send_job(const Job& job, const ValidationResult& base) {
    ValidationResult res = base;
    // The judge: one warm process per validator (the reference stays loaded), restarted when it dies.
    impl_->start_judge(options_.device_index);
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
        impl_->judge_lost(rd, res);
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
    for (const auto& w : out.lock_waits)
        if (impl_->note) impl_->note(w);
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
    read_job_result(std::move(out), options_, res);
    return res;
}

ValidationResult Validator::validate(const std::string& source) { return run(compile(source)); }

}  // namespace kevo
