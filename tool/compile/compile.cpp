#include "compile/compile.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "triton/triton_compile.h"

namespace kevo {

namespace {
// The one symbol every candidate must export (kernelevo/abi.h).
const char* const kLinkContract = "kevo_forward";

// A line for the reader (or the LLM repairing the code) when the failure is a broken contract
// rather than a CUDA mistake.
std::string compile_hint(const std::string& log) {
    if (log.find("kevo_forward") != std::string::npos && log.find("not defined") != std::string::npos)
        return "\nnote: a candidate must define extern \"C\" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, "
               "int n_out, cudaStream_t stream) (see kernelevo/abi.h)\n";
    if (log.find("torch/") != std::string::npos || log.find("ATen/") != std::string::npos || log.find("c10/") != std::string::npos)
        if (log.find("No such file") != std::string::npos)
            return "\nnote: candidates include no LibTorch header: only <kernelevo/abi.h>, the CUDA toolkit and the C++ standard library\n";
    return "";
}
}  // namespace

std::string normalize_arch(const std::string& arch_in) {
    std::string a = arch_in;
    for (auto& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::regex re(R"(^(?:sm_?|compute_?)?(\d)\.?(\d)([af]?)$)");
    std::smatch m;
    if (!std::regex_match(a, m, re))
        throw UsageError("unknown CUDA architecture '" + arch_in + "' (expected e.g. sm_90, 90 or 9.0)");
    return "sm_" + m[1].str() + m[2].str() + m[3].str();
}

std::string nvcc_path(const CompileOptions& options) {
    if (!options.nvcc.empty()) return options.nvcc;
    if (const char* p = std::getenv("KERNELEVO_NVCC"); p && *p) return p;
    // Prefer nvcc on PATH; fall back to the usual toolkit locations.
    if (const char* path = std::getenv("PATH")) {
        std::stringstream ss(path);
        std::string dir;
        while (std::getline(ss, dir, ':'))
            if (!dir.empty() && ::access((dir + "/nvcc").c_str(), X_OK) == 0) return dir + "/nvcc";
    }
    for (const char* c : {"/usr/local/cuda/bin/nvcc", "/usr/bin/nvcc"})
        if (::access(c, X_OK) == 0) return c;
    return "nvcc";
}

std::string nvcc_version(const CompileOptions& options) {
    static std::mutex mu;
    static std::map<std::string, std::string> cache;
    const std::string nvcc = nvcc_path(options);
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(nvcc);
    if (it != cache.end()) return it->second;
    ProcessOptions po;
    po.argv = {nvcc, "--version"};
    po.timeout_s = 60;
    ProcessResult r = run_process(po);
    if (!r.ok()) throw UsageError("cannot run nvcc (" + nvcc + "): " + r.describe() + ". Install the CUDA Toolkit or set KERNELEVO_NVCC.");
    std::smatch m;
    static const std::regex re(R"(release (\d+\.\d+))");
    std::string v = std::regex_search(r.out, m, re) ? "nvcc " + m[1].str() : "nvcc (unknown version)";
    cache[nvcc] = v;
    return v;
}

std::string trim_compiler_log(const std::string& log, size_t max_bytes) {
    std::istringstream in(log);
    std::string line, out;
    int errors = 0;
    while (std::getline(in, line)) {
        if (line.find("Detected ") == 0 && line.find("compilation errors") != std::string::npos) continue;
        if (line.find("error") != std::string::npos) ++errors;
        if (out.size() + line.size() + 1 > max_bytes) {
            out += "[... " + std::to_string(log.size() - out.size()) + " more bytes of compiler output omitted ...]\n";
            break;
        }
        out += line + "\n";
        if (errors >= 20) {
            out += "[... further errors omitted ...]\n";
            break;
        }
    }
    return out;
}

CompileResult compile_kernel(const std::string& source, const CompileOptions& opt) {
    if (auto routed = triton::route(source, opt)) return std::move(*routed);  // a Triton candidate
    CompileResult res;
    res.arch = normalize_arch(opt.arch);
    auto t0 = std::chrono::steady_clock::now();
    const std::string nvcc = nvcc_path(opt);
    const std::string version = nvcc_version(opt);

    std::string flags;
    for (const auto& f : opt.extra_flags) flags += f + "\x1f";
    res.source_hash = sha256_hex(source + "\x1e" + abi_header_text() + "\x1e" + res.arch + "\x1e" + flags + "\x1e" + version +
                                 "\x1e" + kLinkContract);
    fs::path dir = (opt.cache_dir.empty() ? cache_root() / "kernels" : opt.cache_dir) / res.source_hash.substr(0, 2);
    fs::path so = dir / (res.source_hash + ".so");
    fs::path err = dir / (res.source_hash + ".log");
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

    std::error_code ec;
    if (fs::exists(so, ec)) {
        res.ok = res.cached = true;
        res.library = so;
        res.seconds = elapsed();
        return res;
    }
    if (fs::exists(err, ec)) {  // the same source failed before: same answer, no recompile
        res.cached = true;
        res.log = read_file(err);
        res.seconds = elapsed();
        return res;
    }

    TempDir tmp("kernelevo-nvcc");
    fs::path cu = tmp.path() / "kernel.cu";
    write_file_atomic(cu, source);
    write_file_atomic(tmp.path() / "include" / "kernelevo" / "abi.h", abi_header_text());
    std::string gencode = res.arch.substr(3);  // "90", "90a"
    ProcessOptions po;
    po.argv = {nvcc, "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared",
               "-gencode", "arch=compute_" + gencode + ",code=sm_" + gencode,
               "-I" + (tmp.path() / "include").string(), "-o", "kernel.so", "kernel.cu",
               // A candidate without the entry point (or with C++ linkage) fails here, not at run time.
               "-Xlinker", std::string("--require-defined=") + kLinkContract};
    for (const auto& f : opt.extra_flags) po.argv.push_back(f);
    po.cwd = tmp.path();
    po.timeout_s = opt.timeout_s;
    ProcessResult r = run_process(po);
    // Paths of the private temp dir mean nothing to the reader (or to an LLM repairing the code).
    res.log = trim_compiler_log(strip_dir(r.out + r.err, tmp.path()));
    if (!r.ok()) {
        if (r.timed_out) res.log = "compilation " + r.describe() + "\n" + res.log;
        else if (res.log.empty()) res.log = "nvcc failed: " + r.describe();
        else res.log += compile_hint(res.log);
        if (r.started && !r.timed_out && r.term_signal == 0) write_file_atomic(err, res.log);
        res.seconds = elapsed();
        return res;
    }
    install_file_atomic(tmp.path() / "kernel.so", so, "the compiled kernel");
    res.ok = true;
    res.library = so;
    res.seconds = elapsed();
    return res;
}

}  // namespace kevo
