#include "compile/arch_support.h"

#include <map>
#include <mutex>
#include <sstream>

#include "common/error.h"
#include "common/process.h"

namespace kevo {
namespace {
std::mutex g_mu;
}

std::vector<std::string> toolkit_arches(const CompileOptions& options) {
    static std::map<std::string, std::vector<std::string>> cache;
    const std::string nvcc = nvcc_path(options);
    std::lock_guard<std::mutex> lock(g_mu);
    if (auto it = cache.find(nvcc); it != cache.end()) return it->second;
    ProcessOptions po;
    po.argv = {nvcc, "--list-gpu-code"};
    po.timeout_s = 60;
    ProcessResult r = run_process(po);
    std::vector<std::string> arches;
    if (r.ok()) {
        std::istringstream in(r.out);
        for (std::string w; in >> w;)
            if (w.rfind("sm_", 0) == 0) arches.push_back(w);
    }
    return cache[nvcc] = arches;
}

bool toolkit_supports_arch(const std::string& arch, const CompileOptions& options) {
    static std::map<std::pair<std::string, std::string>, bool> cache;
    const std::string nvcc = nvcc_path(options);
    {
        std::lock_guard<std::mutex> lock(g_mu);
        if (auto it = cache.find({nvcc, arch}); it != cache.end()) return it->second;
    }
    if (arch.rfind("sm_", 0) != 0) throw UsageError("toolkit_supports_arch: expected a normalized sm_XX, got '" + arch + "'");
    const std::string gencode = arch.substr(3);
    ProcessOptions po;
    // The same -gencode as compile_kernel(); --dryrun only prints the steps (the file need not exist).
    po.argv = {nvcc, "--dryrun", "-c", "kevo_arch_probe.cu", "-o", "kevo_arch_probe.o", "-gencode",
               "arch=compute_" + gencode + ",code=sm_" + gencode};
    po.timeout_s = 60;
    ProcessResult r = run_process(po);
    if (!r.started)
        throw UsageError("cannot run nvcc (" + nvcc + "): " + r.error + ". Install the CUDA Toolkit or set KERNELEVO_NVCC.");
    const bool ok = r.ok();
    std::lock_guard<std::mutex> lock(g_mu);
    cache[{nvcc, arch}] = ok;
    return ok;
}

void require_toolkit_arch(const std::string& arch, const CompileOptions& options) {
    if (toolkit_supports_arch(arch, options)) return;
    std::string list;
    for (const auto& a : toolkit_arches(options)) list += (list.empty() ? "" : " ") + a;
    std::string version;
    try {
        version = nvcc_version(options);
    } catch (const UsageError&) {
        version = "nvcc";
    }
    throw SettingError({settings::kCompileArch},
                       "{compile.arch} " + arch + ": the installed CUDA toolkit (" + version + ", " + nvcc_path(options) +
                           ") cannot compile for it" + (list.empty() ? std::string() : "; it supports " + list) +
                           ". Pick one of those, or install a toolkit that supports " + arch +
                           " (KERNELEVO_NVCC selects the nvcc).");
}

}  // namespace kevo
