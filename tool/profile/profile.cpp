#include "profile/profile.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "common/settings.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/text.h"
#include "sandbox/sandbox.h"
#include "task/init_kind.h"

namespace kevo::profile {

namespace {

const char* const kDuration = "gpu__time_duration.sum";
const char* const kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const char* const kSm = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const char* const kOccupancy = "sm__warps_active.avg.pct_of_peak_sustained_active";
const char* const kTheoretical = "sm__maximum_warps_per_active_cycle_pct";
const char* const kRegisters = "launch__registers_per_thread";

std::string stall_metric(const std::string& reason) {
    return "smsp__average_warps_issue_stalled_" + reason + "_per_issue_active.ratio";
}

// One CSV record (RFC 4180: quoted fields, doubled quotes); `pos` advances past it.
std::vector<std::string> csv_record(const std::string& t, size_t& pos) {
    std::vector<std::string> fields;
    std::string f;
    bool quoted = false, any = false;
    while (pos < t.size()) {
        char c = t[pos++];
        any = true;
        if (quoted) {
            if (c == '"') {
                if (pos < t.size() && t[pos] == '"') f += '"', ++pos;
                else quoted = false;
            } else {
                f += c;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.push_back(f);
            f.clear();
        } else if (c == '\n') {
            break;
        } else if (c != '\r') {
            f += c;
        }
    }
    if (any) fields.push_back(f);
    return fields;
}

// "1,234.5" -> 1234.5; false when not a number ("n/a", "").
bool number(std::string s, double& v) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    if (s.empty()) return false;
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return end && *end == '\0';
}

double to_us(double v, const std::string& unit) {
    if (unit == "nsecond" || unit == "ns") return v / 1000;
    if (unit == "msecond" || unit == "ms") return v * 1000;
    if (unit == "second" || unit == "s") return v * 1e6;
    return v;  // usecond
}

}  // namespace

const std::vector<std::string>& stall_reasons() {
    static const std::vector<std::string> r = {"long_scoreboard", "short_scoreboard", "lg_throttle", "mio_throttle",
                                               "math_pipe_throttle", "barrier", "membar", "wait", "not_selected",
                                               "no_instruction", "branch_resolving", "dispatch_stall", "drain",
                                               "imc_miss", "tex_throttle", "sleeping", "misc"};
    return r;
}

const std::vector<std::string>& default_metrics() {
    static const std::vector<std::string> m = [] {
        std::vector<std::string> v = {kDuration, kDram, kSm, kOccupancy, kTheoretical, kRegisters};  // the core six
        for (const auto& r : stall_reasons()) v.push_back(stall_metric(r));
        return v;
    }();
    return m;
}

double KernelProfile::value(const std::string& metric, double missing) const {
    auto it = metrics.find(metric);
    return it == metrics.end() ? missing : it->second;
}

std::string find_ncu(const ProfileOptions& o) {
    if (!o.ncu.empty()) return ::access(o.ncu.c_str(), X_OK) == 0 ? o.ncu : "";
    if (const char* p = env(EnvVar::kNcu); p && *p) return ::access(p, X_OK) == 0 ? p : "";
    if (const char* path = std::getenv("PATH")) {
        std::stringstream ss(path);
        std::string dir;
        while (std::getline(ss, dir, ':'))
            if (!dir.empty() && ::access((dir + "/ncu").c_str(), X_OK) == 0) return dir + "/ncu";
    }
    for (const char* c : {"/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu"})
        if (::access(c, X_OK) == 0) return c;
    return "";
}

std::vector<std::string> ncu_command(const std::string& ncu, const std::vector<std::string>& program, const ProfileOptions& o) {
    std::string metrics;
    for (const auto& m : o.metrics.empty() ? default_metrics() : o.metrics) metrics += (metrics.empty() ? "" : ",") + m;
    std::vector<std::string> argv = {ncu, "--csv", "--page", "raw", "--metrics", metrics, "--target-processes", "all"};
    if (!o.profile_from_start) argv.insert(argv.end(), {"--profile-from-start", "off"});
    if (o.launch_skip > 0) argv.insert(argv.end(), {"--launch-skip", std::to_string(o.launch_skip)});
    if (o.launch_count > 0) argv.insert(argv.end(), {"--launch-count", std::to_string(o.launch_count)});
    if (!o.kernel_regex.empty()) argv.insert(argv.end(), {"--kernel-name", "regex:" + o.kernel_regex});
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
}

std::vector<KernelProfile> parse_ncu_csv(const std::string& text) {
    // Find the header: the first record whose first field is "ID".
    size_t pos = 0;
    std::vector<std::string> header;
    while (pos < text.size()) {
        size_t line_start = pos;
        std::vector<std::string> rec = csv_record(text, pos);
        if (!rec.empty() && rec[0] == "ID" && rec.size() > 2) {
            header = rec;
            break;
        }
        if (pos == line_start) break;
    }
    if (header.empty()) throw ProfileError("no ncu CSV table in the output (was ncu run with --csv?)");
    auto col = [&](const std::string& name) -> int {
        for (size_t i = 0; i < header.size(); ++i)
            if (header[i] == name) return static_cast<int>(i);
        return -1;
    };
    const int id = col("ID"), kname = col("Kernel Name"), grid = col("Grid Size"), block = col("Block Size");
    const int mname = col("Metric Name"), munit = col("Metric Unit"), mvalue = col("Metric Value");
    const bool details = mname >= 0 && mvalue >= 0;  // --page details: one row per (launch, metric)
    if (kname < 0) throw ProfileError("ncu CSV without a \"Kernel Name\" column");

    struct Acc {
        KernelProfile p;
        std::map<std::string, std::pair<double, int>> sums;  // metric -> (sum, count)
        std::vector<std::string> launch_ids;
    };
    std::vector<Acc> kernels;
    std::vector<std::string> units(header.size());
    auto at = [](const std::vector<std::string>& r, int i) { return i >= 0 && i < static_cast<int>(r.size()) ? r[i] : std::string(); };
    auto acc_for = [&](const std::vector<std::string>& r) -> Acc& {
        std::string name = at(r, kname);
        for (auto& a : kernels)
            if (a.p.name == name) return a;
        kernels.push_back(Acc{});
        kernels.back().p.name = name;
        kernels.back().p.grid = at(r, grid);
        kernels.back().p.block = at(r, block);
        return kernels.back();
    };
    auto add = [](Acc& a, const std::string& metric, double v) {
        auto& s = a.sums[metric];
        s.first += v;
        ++s.second;
    };
    while (pos < text.size()) {
        std::vector<std::string> r = csv_record(text, pos);
        if (r.size() < 2) continue;
        if (at(r, id).empty()) {  // the units row of --page raw
            for (size_t i = 0; i < r.size() && i < units.size(); ++i) units[i] = r[i];
            continue;
        }
        Acc& a = acc_for(r);
        if (std::find(a.launch_ids.begin(), a.launch_ids.end(), at(r, id)) == a.launch_ids.end()) a.launch_ids.push_back(at(r, id));
        if (details) {
            double v;
            if (!number(at(r, mvalue), v)) continue;
            std::string m = at(r, mname);
            if (m == kDuration || m == "Duration") v = to_us(v, at(r, munit)), m = kDuration;
            add(a, m, v);
        } else {
            for (size_t i = 0; i < r.size() && i < header.size(); ++i) {
                double v;
                if (static_cast<int>(i) == id || static_cast<int>(i) == kname || !number(r[i], v)) continue;
                if (header[i].find("__") == std::string::npos) continue;  // ID columns, not metrics
                if (header[i] == kDuration) v = to_us(v, units[i]);
                add(a, header[i], v);
            }
        }
    }
    std::vector<KernelProfile> out;
    for (auto& a : kernels) {
        a.p.launches = static_cast<int>(a.launch_ids.size());
        for (const auto& [m, s] : a.sums) a.p.metrics[m] = s.first / s.second;
        out.push_back(a.p);
    }
    return out;
}

std::string summarize(const std::vector<KernelProfile>& kernels, size_t max_kernels) {
    std::vector<const KernelProfile*> order;
    for (const auto& k : kernels) order.push_back(&k);
    std::stable_sort(order.begin(), order.end(), [](const KernelProfile* a, const KernelProfile* b) {
        return a->value(kDuration, 0) > b->value(kDuration, 0);
    });
    std::string out;
    for (size_t i = 0; i < order.size() && i < max_kernels; ++i) {
        const KernelProfile& k = *order[i];
        std::string line = k.name;
        if (!k.grid.empty() || !k.block.empty()) line += " [grid " + k.grid + ", block " + k.block + "]";
        line += ":";
        std::vector<std::string> parts;
        if (k.value(kDuration) >= 0) parts.push_back(format_double(k.value(kDuration) >= 100 ? "%.0f us" : "%.2f us", k.value(kDuration)));
        std::string tp;
        if (k.value(kDram) >= 0) tp += format_double("DRAM %.0f%% of peak", k.value(kDram));
        if (k.value(kSm) >= 0) tp += (tp.empty() ? "" : ", ") + format_double("SM %.0f%%", k.value(kSm));
        if (!tp.empty()) parts.push_back(tp);
        if (k.value(kOccupancy) >= 0) {
            std::string occ = format_double("achieved occupancy %.0f%%", k.value(kOccupancy));
            if (k.value(kTheoretical) >= 0) occ += format_double(" (theoretical %.0f%%)", k.value(kTheoretical));
            parts.push_back(occ);
        }
        if (k.value(kRegisters) >= 0) parts.push_back(format_double("%.0f registers/thread", k.value(kRegisters)));
        std::vector<std::pair<double, std::string>> stalls;
        for (const auto& r : stall_reasons())
            if (k.value(stall_metric(r)) > 0) stalls.push_back({k.value(stall_metric(r)), r});
        std::stable_sort(stalls.begin(), stalls.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        if (!stalls.empty()) {
            std::string s = "top stalls (cycles per issued instruction):";
            for (size_t j = 0; j < stalls.size() && j < 3; ++j) s += (j ? ", " : " ") + stalls[j].second + format_double(" %.1f", stalls[j].first);
            parts.push_back(s);
        }
        for (size_t j = 0; j < parts.size(); ++j) line += (j ? "; " : " ") + parts[j];
        out += (out.empty() ? "" : "\n") + line;
    }
    if (order.size() > max_kernels) out += "\n(" + std::to_string(order.size() - max_kernels) + " more kernel(s) not shown)";
    return out;
}

std::filesystem::path default_profile_program() {
    if (const char* p = env(EnvVar::kProfile); p && *p) return p;
    if (const char* p = env(EnvVar::kBenchDeprecated); p && *p) {
        static std::once_flag said;
        std::call_once(said, [] {
            std::fprintf(stderr, "kernelevo: %s is deprecated (the profiler's program kernelevo-bench is now kernelevo-profile): set %s instead\n",
                         env_name(EnvVar::kBenchDeprecated), env_name(EnvVar::kProfile));
        });
        return p;
    }
    std::filesystem::path beside = self_exe_dir() / "kernelevo-profile";
    std::error_code ec;
    if (std::filesystem::exists(beside, ec)) return beside;
#ifdef KEVO_BUILD_PROFILE_PROGRAM
    if (std::filesystem::exists(KEVO_BUILD_PROFILE_PROGRAM, ec)) return KEVO_BUILD_PROFILE_PROGRAM;
#endif
    return beside;
}

std::vector<std::string> profile_program_command(const std::filesystem::path& program, const std::filesystem::path& library,
                                                 const Task& task, size_t set, int warmup, int calls) {
    std::vector<std::string> argv = {program.string(), "--kernel", library.string(), "--warmup", std::to_string(warmup),
                                     "--calls", std::to_string(calls), "--confine"};
    auto dims = [&](const TensorSpec& t) {
        std::string s;
        for (int64_t v : task.concrete_shape(t, set)) s += (s.empty() ? "" : ",") + std::to_string(v);
        return s;
    };
    auto number = [](double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%.17g", v);
        return std::string(b);
    };
    for (const auto& t : task.inputs) {
        int kind = kevo_init_kind_from_name(t.init.kind.c_str());
        argv.push_back("--in");
        argv.push_back(std::to_string(dtype_abi(t.dtype)) + ":" + dims(t) + ":" + std::to_string(kind < 0 ? KEVO_INIT_ZEROS : kind) +
                       ":" + number(t.init.a) + ":" + number(t.init.b));
    }
    for (const auto& t : task.outputs) {
        argv.push_back("--out");
        argv.push_back(std::to_string(dtype_abi(t.dtype)) + ":" + dims(t));
    }
    return argv;
}

ProfileOptions profile_program_options() {
    ProfileOptions o;
    o.profile_from_start = false;
    o.launch_count = 0;
    return o;
}

Profiler::Profiler(ProfileOptions options, std::function<void(const std::string&)> log)
    : options_(std::move(options)), log_(std::move(log)) {}

std::string sandbox_refusal() {
    if (sandbox_mode() == SandboxMode::off)
        return "the sandbox is off (--sandbox off), and a candidate is never profiled outside it";
    const SandboxLayers& l = sandbox_layers();
    if (!l.namespaces) {
        std::string why = l.why_not.substr(0, l.why_not.find('\n'));
        return "ncu runs a candidate only inside the sandbox's namespaces, which are unavailable here (" + why + ")";
    }
    return "";
}

bool Profiler::available() {
    if (!checked_) {
        ncu_ = find_ncu(options_);
        checked_ = true;
        if (ncu_.empty()) {
            said_ = true;
            if (log_) log_("Nsight Compute (ncu) not found: candidates are not profiled (install it, or set KERNELEVO_NCU)");
        } else if (std::string why = sandbox_refusal(); !why.empty()) {
            ncu_.clear();
            said_ = true;
            if (log_) log_("profiling skipped: " + why);
        }
    }
    return !ncu_.empty();
}

std::string Profiler::profile(const std::vector<std::string>& program_argv,
                              const std::vector<std::filesystem::path>& reads, const Run& run) {
    if (!available() || program_argv.empty()) return "";
    // The sandbox of a validation: the GPU, a fresh work dir (HOME, the current directory), a
    // private /tmp (where ncu keeps its lock and talks to its injected library), the allowlisted
    // environment; ncu's installation, the program and `reads` read-only.
    TempDir work("kernelevo-profile");
    SandboxPolicy policy;
    policy.workdir = work.path();
    policy.gpu = true;
    std::error_code ec;
    const std::filesystem::path ncu_real = std::filesystem::canonical(ncu_, ec);
    policy.read_only = {std::filesystem::path(ncu_).parent_path(), program_argv[0]};
    if (!ec) policy.read_only.push_back(ncu_real.parent_path());
    policy.read_only.insert(policy.read_only.end(), reads.begin(), reads.end());
    const std::vector<std::string> prefix = sandbox_prefix(policy);
    if (prefix.empty()) return "profile failed: the sandbox cannot host ncu here";  // available() said why
    ProcessOptions po;
    po.exact_env = sandbox_environment();
    (*po.exact_env)["HOME"] = work.path().string();
    po.timeout_s = options_.timeout_s;
    std::vector<std::string> program = program_argv;
    if (run) program.insert(program.end(), {"--turns", work.path().string()});
    auto sandboxed = [&](const std::vector<std::string>& ncu_argv) {
        std::vector<std::string> argv = prefix;
        argv.insert(argv.end(), ncu_argv.begin(), ncu_argv.end());
        return argv;
    };
    auto started = [&] { return run ? run(po, work.path()) : run_process(po); };
    po.argv = sandboxed(ncu_command(ncu_, program, options_));
    ProcessResult r = started();
    if (!r.ok() && options_.metrics.empty() && (r.out + r.err).find("metric") != std::string::npos) {
        // An ncu that lacks one of the stall metrics: once more with the core set only.
        ProfileOptions core = options_;
        core.metrics.assign(default_metrics().begin(), default_metrics().begin() + 6);
        po.argv = sandboxed(ncu_command(ncu_, program, core));
        r = started();
    }
    if (!r.ok() && (r.out + r.err).find("ERR_NVGPUCTRPERM") != std::string::npos) {
        // No access to the performance counters: no later profile can work either.
        ncu_.clear();
        said_ = true;
        return "profile failed: ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM: run as root or "
               "allow it with the driver option NVreg_RestrictProfilingToAdminUsers=0); profiling is off for this run";
    }
    if (!r.ok()) {
        std::string why = r.err.empty() ? r.out : r.err;
        if (why.size() > 400) why = why.substr(0, 400) + " ...";
        return "profile failed: ncu " + r.describe() + (why.empty() ? "" : ": " + why);
    }
    try {
        auto kernels = parse_ncu_csv(r.out);
        return kernels.empty() ? "profile failed: ncu profiled no kernel" : summarize(kernels);
    } catch (const ProfileError& e) {
        return std::string("profile failed: ") + e.what();
    }
}

}  // namespace kevo::profile
