#include "gpu_activity.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <vector>

namespace kevo_runner {

namespace {
// The few NVML entry points used, declared here (their ABI is stable) so the runner needs neither
// nvml.h nor a link to the library.
using nvmlDevice_t = struct nvmlDevice_st*;
struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
};
struct ProcessInfoV3 {  // nvmlProcessInfo_t (v3, driver 510+)
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
constexpr int kSuccess = 0, kInsufficientSize = 7, kNotFound = 6;

struct Nvml {
    void* lib = nullptr;
    int (*init)() = nullptr;
    int (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
    int (*utilization)(nvmlDevice_t, ProcessUtilizationSample*, unsigned int*, unsigned long long) = nullptr;
    int (*processes)(nvmlDevice_t, unsigned int*, ProcessInfoV3*) = nullptr;
    std::string why;  // empty: usable
};

Nvml& nvml() {
    static Nvml n = [] {
        Nvml x;
        x.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!x.lib) {
            x.why = "NVML (libnvidia-ml.so.1) is not available";
            return x;
        }
        x.init = reinterpret_cast<decltype(x.init)>(dlsym(x.lib, "nvmlInit_v2"));
        x.by_pci = reinterpret_cast<decltype(x.by_pci)>(dlsym(x.lib, "nvmlDeviceGetHandleByPciBusId_v2"));
        x.utilization = reinterpret_cast<decltype(x.utilization)>(dlsym(x.lib, "nvmlDeviceGetProcessUtilization"));
        x.processes = reinterpret_cast<decltype(x.processes)>(dlsym(x.lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
        if (!x.init || !x.by_pci || !x.utilization) x.why = "this NVML lacks per-process utilization";
        else if (x.init() != kSuccess) x.why = "NVML did not initialize";
        return x;
    }();
    return n;
}

// This process and its descendants (the candidate processes, inside their sandbox) are the
// validation itself.
bool ours(unsigned int pid) {
    const pid_t self = getpid();
    for (int depth = 0; pid > 1 && depth < 32; ++depth) {
        if (static_cast<pid_t>(pid) == self) return true;
        std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        if (!std::getline(f, line)) return false;
        size_t close = line.rfind(')');
        if (close == std::string::npos) return false;
        char state = 0;
        unsigned int ppid = 0;
        if (std::sscanf(line.c_str() + close + 1, " %c %u", &state, &ppid) != 2) return false;
        pid = ppid;
    }
    return false;
}

std::string name_of(unsigned int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
    std::string n;
    std::getline(f, n);
    return n.empty() ? "not visible here" : n;
}
}  // namespace

uint64_t unix_us() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

nlohmann::json gpu_activity_since(const std::string& pci_bus_id, uint64_t since_us) {
    Nvml& n = nvml();
    if (!n.why.empty()) return {{"source", "none"}, {"why", n.why}};
    nvmlDevice_t dev = nullptr;
    if (pci_bus_id.empty() || n.by_pci(pci_bus_id.c_str(), &dev) != kSuccess)
        return {{"source", "none"}, {"why", "NVML does not know the device " + pci_bus_id}};
    std::vector<ProcessUtilizationSample> samples;
    unsigned int count = 0;
    int rc = n.utilization(dev, nullptr, &count, since_us);
    if (rc == kInsufficientSize || (rc == kSuccess && count > 0)) {
        samples.resize(count + 16);
        count = static_cast<unsigned int>(samples.size());
        rc = n.utilization(dev, samples.data(), &count, since_us);
        samples.resize(rc == kSuccess ? count : 0);
    } else if (rc != kSuccess && rc != kNotFound) {
        return {{"source", "none"}, {"why", "NVML's per-process utilization is unsupported here (error " + std::to_string(rc) + ")"}};
    }
    std::map<unsigned int, std::pair<unsigned int, unsigned int>> peak;  // pid -> (SM %, memory %)
    for (const auto& s : samples) {
        if (s.timeStamp < since_us || (s.smUtil == 0 && s.memUtil == 0) || ours(s.pid)) continue;
        auto& p = peak[s.pid];
        p.first = std::max(p.first, s.smUtil);
        p.second = std::max(p.second, s.memUtil);
    }
    nlohmann::json others = nlohmann::json::array();
    for (const auto& [pid, p] : peak) others.push_back({{"pid", pid}, {"name", name_of(pid)}, {"sm_pct", p.first}, {"mem_pct", p.second}});
    nlohmann::json out = {{"source", "nvml"}, {"since_s", (unix_us() - since_us) / 1e6}, {"others", others}};
    if (n.processes) {
        std::vector<ProcessInfoV3> procs(64);
        unsigned int pc = static_cast<unsigned int>(procs.size());
        if (n.processes(dev, &pc, procs.data()) == kSuccess) {
            int other = 0;
            for (unsigned int i = 0; i < pc; ++i) other += ours(procs[i].pid) ? 0 : 1;
            out["other_contexts"] = other;
        }
    }
    return out;
}

bool others_were_active(const nlohmann::json& a) {
    return a.is_object() && a.value("source", "") == "nvml" && a.contains("others") && !a["others"].empty();
}

std::string describe_activity(const nlohmann::json& a) {
    if (!a.is_object() || a.value("source", "") != "nvml") return "whether other processes used the GPU is unknown (" + (a.is_object() ? a.value("why", std::string("no data")) : std::string("no data")) + ")";
    std::string s;
    for (const auto& o : a["others"])
        s += (s.empty() ? "" : "; ") + std::string("pid ") + std::to_string(o.value("pid", 0)) + " (" + o.value("name", std::string()) +
             "): SM up to " + std::to_string(o.value("sm_pct", 0)) + "%, memory up to " + std::to_string(o.value("mem_pct", 0)) + "%";
    if (s.empty()) s = "no other process used the GPU (NVML)";
    return s;
}

}  // namespace kevo_runner
