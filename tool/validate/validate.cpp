#include "validate/validate.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "reference/reference.h"

namespace kevo {

namespace {
const char* kStatusNames[] = {"ok", "compile_error", "runtime_error", "mismatch", "timeout", "rejected", "no_device"};

std::string tail(const std::string& s, size_t n) { return s.size() <= n ? s : "[...]\n" + s.substr(s.size() - n); }

fs::path default_runner() {
    if (const char* p = std::getenv("KERNELEVO_RUNNER"); p && *p) return p;
    fs::path beside = self_exe_dir() / "kernelevo-runner";
    std::error_code ec;
    if (fs::exists(beside, ec)) return beside;
#ifdef KEVO_BUILD_RUNNER
    if (fs::exists(KEVO_BUILD_RUNNER, ec)) return KEVO_BUILD_RUNNER;
#endif
    return beside;
}

// JSON cannot hold inf/nan: such numbers become null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
}  // namespace

const char* status_name(Status s) { return kStatusNames[static_cast<int>(s)]; }

Status parse_status(const std::string& s) {
    for (int i = 0; i < 7; ++i)
        if (s == kStatusNames[i]) return static_cast<Status>(i);
    throw UsageError("unknown validation status '" + s + "'");
}

std::string DeviceInfo::arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }

nlohmann::json DeviceInfo::to_json() const {
    nlohmann::json j{{"present", present}};
    if (!present) {
        j["error"] = error;
        return j;
    }
    j.update({{"index", index}, {"name", name}, {"cc_major", cc_major}, {"cc_minor", cc_minor}, {"arch", arch()},
              {"sm_count", sm_count}, {"mem_bandwidth_gbs", mem_bandwidth_gbs}, {"total_mem", total_mem},
              {"l2_bytes", l2_bytes}, {"smem_per_block", smem_per_block}, {"smem_per_block_optin", smem_per_block_optin},
              {"smem_per_sm", smem_per_sm}, {"driver_version", driver_version}, {"runtime_version", runtime_version}});
    return j;
}

DeviceInfo DeviceInfo::from_json(const nlohmann::json& j) {
    DeviceInfo d;
    d.present = j.value("present", false);
    d.error = j.value("error", std::string());
    d.index = j.value("index", 0);
    d.name = j.value("name", std::string());
    d.cc_major = j.value("cc_major", 0);
    d.cc_minor = j.value("cc_minor", 0);
    d.sm_count = j.value("sm_count", 0);
    d.mem_bandwidth_gbs = j.value("mem_bandwidth_gbs", 0.0);
    d.total_mem = j.value("total_mem", int64_t{0});
    d.l2_bytes = j.value("l2_bytes", int64_t{0});
    d.smem_per_block = j.value("smem_per_block", 0);
    d.smem_per_block_optin = j.value("smem_per_block_optin", 0);
    d.smem_per_sm = j.value("smem_per_sm", 0);
    d.driver_version = j.value("driver_version", 0);
    d.runtime_version = j.value("runtime_version", 0);
    return d;
}

nlohmann::json ValidationResult::to_json() const {
    return nlohmann::json{{"status", status_name(status)},
                          {"speedup", num(speedup)},
                          {"kernel_us", num(kernel_us)},
                          {"reference_us", num(reference_us)},
                          {"kernel_spread", num(kernel_spread)},
                          {"reference_spread", num(reference_spread)},
                          {"max_abs_diff", num(max_abs_diff)},
                          {"suspicious", suspicious},
                          {"log", log},
                          {"arch", arch},
                          {"gpu", gpu},
                          {"compile_s", num(compile_s)},
                          {"run_s", num(run_s)},
                          {"trials", trials},
                          {"details", details}};
}

ValidationResult ValidationResult::from_json(const nlohmann::json& j) {
    ValidationResult r;
    auto d = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; };
    r.status = parse_status(j.value("status", std::string("runtime_error")));
    r.speedup = d("speedup");
    r.kernel_us = d("kernel_us");
    r.reference_us = d("reference_us");
    r.kernel_spread = d("kernel_spread");
    r.reference_spread = d("reference_spread");
    r.max_abs_diff = d("max_abs_diff");
    r.suspicious = j.value("suspicious", false);
    r.log = j.value("log", std::string());
    r.arch = j.value("arch", std::string());
    r.gpu = j.value("gpu", std::string());
    r.compile_s = d("compile_s");
    r.run_s = d("run_s");
    r.trials = j.value("trials", 0);
    r.details = j.value("details", nlohmann::json::object());
    return r;
}

struct Validator::Impl {
    std::mutex device_mu, ref_mu, run_mu;
    bool device_queried = false;
    DeviceInfo device;
    bool ref_built = false;
    ReferenceBuild ref;
    fs::path runner;
};

Validator::Validator(Task task, ValidateOptions options) : task_(std::move(task)), options_(std::move(options)), impl_(new Impl) {
    impl_->runner = options_.runner.empty() ? default_runner() : options_.runner;
    if (!options_.arch.empty()) options_.arch = normalize_arch(options_.arch);
    if (options_.timeout_s <= 0) throw UsageError("the timeout must be positive");
    if (options_.timing_trials < 1) throw UsageError("timing needs at least one trial");
    if (options_.l2_flush != "read" && options_.l2_flush != "write")
        throw UsageError("L2 flush must be read or write, not '" + options_.l2_flush + "'");
    if (options_.timing_copies < 1 || options_.timing_copies > 64) throw UsageError("timing copies must be between 1 and 64");
}

Validator::~Validator() = default;

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

std::string Validator::arch() {
    if (!options_.arch.empty()) return options_.arch;
    const DeviceInfo& d = device();
    return d.present ? d.arch() : "sm_90";
}

CompileResult Validator::compile(const std::string& source) {
    CompileOptions co = options_.compile;
    co.arch = arch();
    return compile_kernel(source, co);
}

ValidationResult Validator::run(const CompileResult& compiled) {
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
    {
        // Build (or fetch) the reference even without a GPU: a broken reference is a broken task.
        std::lock_guard<std::mutex> lock(impl_->ref_mu);
        if (!impl_->ref_built) {
            impl_->ref = build_reference(task_);
            impl_->ref_built = true;
        }
        if (!impl_->ref.ok) throw UsageError(impl_->ref.log);
    }
    if (!dev.present) {
        res.status = Status::no_device;
        res.log = "compiled for " + res.arch + "; not run: " + (dev.error.empty() ? std::string("no CUDA device") : dev.error);
        return res;
    }
    if (dev.arch() != res.arch && dev.arch() + "a" != res.arch) {
        res.status = Status::no_device;
        res.log = "compiled for " + res.arch + ", but the GPU here is " + dev.name + " (" + dev.arch() + "); not run";
        return res;
    }

    nlohmann::json job;
    job["kernel"] = compiled.library.string();
    job["reference"] = impl_->ref.library.string();
    job["shape_sets"] = nlohmann::json::array();
    for (size_t s = 0; s < task_.shapes.size(); ++s) {
        nlohmann::json set;
        std::string label;
        for (const auto& [k, v] : task_.shapes[s]) label += (label.empty() ? "" : ", ") + k + "=" + std::to_string(v);
        set["label"] = label;
        for (const auto& t : task_.inputs)
            set["inputs"].push_back({{"name", t.name}, {"dtype", dtype_abi(t.dtype)}, {"sizes", task_.concrete_shape(t, s)},
                                     {"init", {{"kind", t.init.kind}, {"a", t.init.a}, {"b", t.init.b}}}});
        for (const auto& t : task_.outputs)
            set["outputs"].push_back({{"name", t.name}, {"dtype", dtype_abi(t.dtype)}, {"sizes", task_.concrete_shape(t, s)}});
        job["shape_sets"].push_back(set);
    }
    job["trials"] = task_.correctness_trials;
    job["atol"] = task_.atol;
    job["rtol"] = task_.rtol;
    job["seed"] = 42;
    job["time"] = options_.time_kernels;
    job["timing_trials"] = options_.timing_trials;
    job["warmup"] = options_.warmup;
    job["timing_budget_s"] = std::max(1.0, options_.timeout_s * 0.4);
    job["l2_flush"] = options_.l2_flush;
    job["timing_copies"] = options_.timing_copies;

    std::lock_guard<std::mutex> lock(impl_->run_mu);  // the GPU runs one candidate at a time
    TempDir tmp("kernelevo-run");
    if (options_.keep_temps) tmp.keep();
    fs::path job_file = tmp.path() / "job.json", result_file = tmp.path() / "result.json";
    write_file_atomic(job_file, job.dump());
    ProcessOptions po;
    po.argv = {impl_->runner.string(), "--job", job_file.string(), "--result", result_file.string()};
    po.cwd = tmp.path();
    po.timeout_s = options_.timeout_s;
    po.max_file_bytes = 64L << 20;
    ProcessResult pr = run_process(po);
    res.run_s = pr.seconds;
    std::error_code ec;
    nlohmann::json out;
    if (fs::exists(result_file, ec)) {
        try {
            out = nlohmann::json::parse(read_file(result_file));
        } catch (const std::exception&) {
            out = nlohmann::json();
        }
    }
    if (pr.timed_out) {
        res.status = Status::timeout;
        res.log = "the kernel did not finish within " + std::to_string(static_cast<int>(options_.timeout_s)) +
                  " s (watchdog); the process was killed.\n" + tail(pr.err, 1500);
        return res;
    }
    if (!out.is_object() || !out.contains("status")) {
        res.status = Status::runtime_error;
        res.log = "the process running the kernel died (" + pr.describe() + ") before reporting a result.\n" + tail(pr.out + pr.err, 3000);
        return res;
    }
    std::string status = out.value("status", std::string());
    if (status == "setup_error") throw UsageError("validating against the reference of '" + task_.name + "' failed: " + out.value("log", std::string()));
    res.status = parse_status(status);
    res.log = out.value("log", std::string());
    res.max_abs_diff = out.value("max_abs_diff", 0.0);
    res.trials = out.value("trials", 0);
    res.details = out;
    res.details.erase("log");
    res.details.erase("status");
    if (out.contains("timing")) {
        const auto& t = out["timing"];
        res.kernel_us = t["kernel"].value("median_us", 0.0);
        res.reference_us = t["reference"].value("median_us", 0.0);
        res.kernel_spread = t["kernel"].value("spread", 0.0);
        res.reference_spread = t["reference"].value("spread", 0.0);
        if (res.kernel_us > 0) res.speedup = res.reference_us / res.kernel_us;
        res.suspicious = res.speedup > options_.suspicious_speedup;
        if (res.suspicious)
            res.log += (res.log.empty() ? "" : "\n") + std::string("suspicious: ") + std::to_string(res.speedup) +
                       "x faster than the reference (threshold " + std::to_string(options_.suspicious_speedup) + "x); check it by hand";
    }
    if (res.status == Status::ok && out.contains("warnings"))
        for (const auto& w : out["warnings"]) res.log += (res.log.empty() ? "" : "\n") + std::string("warning: ") + w.get<std::string>();
    return res;
}

ValidationResult Validator::validate(const std::string& source) { return run(compile(source)); }

}  // namespace kevo
