#include "compile/compile.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "common/settings.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/text.h"
#include "compile/source_rules.h"
#include "sandbox/sandbox.h"

namespace kevo {

namespace {
// The one symbol every candidate must export (kernelevo/abi.h).
const char* const kLinkContract = "kevo_forward";

std::string tail_text(const std::string& s, size_t n) { return s.size() <= n ? s : "[...]\n" + s.substr(s.size() - n); }

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

// A directory holding every library a candidate may call (kCandidateLinkLibraries), resolved.
bool has_candidate_libraries(const fs::path& d) {
    std::error_code ec;
    for (const char* l : kCandidateLinkLibraries)
        if (!fs::exists(d / ("lib" + std::string(l) + ".so"), ec)) return false;
    return true;
}

// Where the toolkit behind an nvcc lives: its root and the directory holding the libraries a
// candidate may call. First beside nvcc's real binary (bin/../lib64, targets/<host>/lib); else as
// nvcc itself reports them (`nvcc --dryrun` prints its TOP and the -L directories it links with),
// for an nvcc on PATH that is a wrapper script elsewhere (/usr/local/bin/nvcc exec'ing the
// toolkit's). `lib` is empty when the toolkit has no cuBLAS. Remembered per nvcc.
struct Toolkit {
    std::string top;
    std::string lib;
};

Toolkit toolkit_of(const std::string& nvcc) {
    static std::mutex mu;
    static std::map<std::string, Toolkit> known;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(nvcc); it != known.end()) return it->second;
    Toolkit& found = known[nvcc];
    std::error_code ec;
    const fs::path bin = fs::weakly_canonical(nvcc, ec).parent_path();
    if (!ec && !bin.empty())
        for (const char* sub : {"lib64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "lib"})
            if (has_candidate_libraries(bin / ".." / sub)) {
                found.top = fs::weakly_canonical(bin / "..", ec).string();
                found.lib = fs::weakly_canonical(bin / ".." / sub, ec).string();
                return found;
            }
    ProcessOptions po;
    po.argv = {nvcc, "--dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"};
    po.timeout_s = 60;
    const ProcessResult r = run_process(po);
    static const std::regex lib_re(R"re(-L"?([^" ]+))re");
    std::vector<fs::path> dirs;
    for (const std::string& text : {r.out, r.err}) {
        std::istringstream in(text);
        std::string line;
        while (std::getline(in, line)) {
            if (line.rfind("#$ TOP=", 0) == 0) found.top = fs::weakly_canonical(line.substr(7), ec).string();
            if (line.rfind("#$ LIBRARIES=", 0) != 0) continue;
            for (std::sregex_iterator m(line.begin(), line.end(), lib_re), e; m != e; ++m)
                if ((*m)[1].str().find("stubs") == std::string::npos) dirs.emplace_back((*m)[1].str());
        }
    }
    for (const fs::path& d : dirs)
        if (has_candidate_libraries(d)) {
            found.lib = fs::weakly_canonical(d, ec).string();
            break;
        }
    return found;
}

// nvcc's arguments that link the toolkit libraries a candidate may call, only as needed (a kernel
// that calls none of them depends on none), with the toolkit's directory as its run path.
std::vector<std::string> link_library_flags(const std::string& lib_dir) {
    if (lib_dir.empty()) return {};
    std::string libs = "--push-state,--as-needed,-L" + lib_dir;
    for (const char* l : kCandidateLinkLibraries) libs += std::string(",-l") + l;
    return {"-Xlinker", libs + ",--pop-state", "-Xlinker", "-rpath=" + lib_dir};
}
}  // namespace

std::string nvcc_path(const CompileOptions& options) {
    if (!options.nvcc.empty()) return options.nvcc;
    if (const char* p = env(EnvVar::kNvcc); p && *p) return p;
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

std::string candidate_library_dir(const CompileOptions& options) { return toolkit_of(nvcc_path(options)).lib; }

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

namespace {
// A build of this source hash already in the cache: the library when it still matches the hash
// recorded when it was built, or the compiler's log of an earlier failure. True when res is the answer.
bool reuse_cached(const fs::path& so, const fs::path& digest, const fs::path& err, CompileResult& res) {
    std::error_code ec;
    if (fs::exists(so, ec)) {
        // Reused only when it still matches the content hash recorded when it was built.
        std::string want, got;
        try {
            want = read_file(digest).substr(0, 64);
            got = sha256_hex(read_file(so));
        } catch (const std::exception&) {
        }
        if (!want.empty() && want == got) {
            res.ok = res.cached = true;
            res.library = so;
            res.library_sha256 = got;
            res.kernels = load_kernel_resources(so);
            return true;
        }
        // Rebuilt below and replaced atomically (never removed: another process may be loading it).
        std::fprintf(stderr, "kernelevo: warning: the cached build %s does not match its recorded hash; rebuilding it\n", so.c_str());
    }
    if (fs::exists(err, ec)) {  // the same source failed before: same answer, no recompile
        res.cached = true;
        res.log = read_file(err);
        return true;
    }
    return false;
}

// nvcc's command line for kernel.cu in workdir, inside the sandbox with its limits.
ProcessOptions nvcc_command(const std::string& nvcc, const Toolkit& toolkit, const std::vector<std::string>& link_flags,
                            const std::string& arch, const fs::path& workdir, const CompileOptions& opt) {
    const std::string& lib_dir = toolkit.lib;
    std::string gencode = arch.substr(3);  // "90", "90a"
    ProcessOptions po;
    po.argv = {nvcc, "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared",
               "-gencode", "arch=compute_" + gencode + ",code=sm_" + gencode,
               "-I" + (workdir / "include").string(), "-o", "kernel.so", "kernel.cu",
               // A candidate without the entry point (or with C++ linkage) fails here, not at run time.
               "-Xlinker", std::string("--require-defined=") + kLinkContract, "-Xptxas", "-v"};
    po.argv.insert(po.argv.end(), link_flags.begin(), link_flags.end());
    for (const auto& f : opt.extra_flags) po.argv.push_back(f);
    po.cwd = workdir;
    po.timeout_s = opt.timeout_s;
    // The compiler reads untrusted source: it runs sandboxed (no network, a private /tmp, the work
    // dir as the only writable place) with limits on memory, CPU time and file size.
    check_sandbox_layers();
    SandboxPolicy policy;
    policy.workdir = workdir;
    // The toolkit wherever it lives: the nvcc named (maybe a wrapper script outside it, shown as
    // that one file, not its folder) and the toolkit's root and libraries.
    if (nvcc.find('/') != std::string::npos) policy.read_only.push_back(fs::absolute(nvcc).string());
    if (!toolkit.top.empty()) policy.read_only.push_back(toolkit.top);
    if (!lib_dir.empty()) policy.read_only.push_back(lib_dir);
    std::vector<std::string> prefix = sandbox_prefix(policy);
    po.argv.insert(po.argv.begin(), prefix.begin(), prefix.end());
    po.exact_env = sandbox_environment({{"HOME", workdir.string()}});
    po.max_address_space = opt.memory_bytes;
    po.max_cpu_s = static_cast<long>(opt.timeout_s) + 5;
    po.max_file_bytes = 256L << 20;
    return po;
}

// The log of a failed compile: which limit stopped it (res.limit_hit), or nvcc's errors with a hint.
void explain_failure(const ProcessResult& r, const CompileOptions& opt, CompileResult& res) {
    const std::string all = r.out + r.err;
    const bool memory = all.find("memory exhausted") != std::string::npos || all.find("Cannot allocate memory") != std::string::npos ||
                        all.find("std::bad_alloc") != std::string::npos || all.find("out of memory") != std::string::npos;
    const bool killed = r.term_signal != 0 || all.find("died due to signal") != std::string::npos ||
                        all.find("signal 9") != std::string::npos || all.find("Killed") != std::string::npos;
    res.limit_hit = r.timed_out || memory || killed;
    if (r.timed_out) {
        res.log = "compile_error: the compilation hit the time limit (" + std::to_string(static_cast<long>(opt.timeout_s)) +
                  " s) and was killed\n" + tail_text(res.log, 2000);
    } else if (memory) {
        res.log = "compile_error: the compiler hit the memory limit (" + std::to_string(opt.memory_bytes >> 20) +
                  " MiB of address space per process) and was stopped\n" + tail_text(res.log, 2000);
    } else if (res.log.empty()) {
        res.log = "nvcc failed: " + r.describe();
    } else {
        res.log += compile_hint(res.log);
    }
}
}  // namespace

CompileResult compile_kernel(const std::string& source, const CompileOptions& opt) {
    CompileResult res;
    res.arch = normalize_arch(opt.arch);
    auto t0 = std::chrono::steady_clock::now();
    const std::string nvcc = nvcc_path(opt);
    const std::string version = nvcc_version(opt);

    // A call the caller's ABI provides instead (its own handle or stream) is refused before nvcc.
    if (std::string why = forbidden_call_in_source(source); !why.empty()) {
        res.log = why + "\n";
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }
    const Toolkit toolkit = toolkit_of(nvcc);
    const std::string& lib_dir = toolkit.lib;
    // A candidate that calls cuBLAS where the toolkit has none would compile and then fail to load
    // with an unresolved symbol: say so here, once, naming the toolkit.
    if (lib_dir.empty() && blank_comments_and_literals(source).find("cublas") != std::string::npos) {
        res.log = "this CUDA toolkit (" + nvcc + ") has no libcublas.so and libcublasLt.so that nvcc links with; "
                  "a kernel that calls cuBLAS cannot be built here (install the toolkit's cuBLAS, or set KERNELEVO_NVCC "
                  "to the nvcc of a toolkit that has it)\n";
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }
    const std::vector<std::string> link_flags = link_library_flags(lib_dir);
    std::string flags;
    for (const auto& f : opt.extra_flags) flags += f + "\x1f";
    for (const auto& f : link_flags) flags += f + "\x1f";
    res.source_hash = sha256_hex(source + "\x1e" + abi_header_text() + "\x1e" + res.arch + "\x1e" + flags + "\x1e" + version +
                                 "\x1e" + kLinkContract);
    fs::path dir = (opt.cache_dir.empty() ? cache_root() / "kernels" : opt.cache_dir) / res.source_hash.substr(0, 2);
    fs::path so = dir / (res.source_hash + ".so");
    fs::path err = dir / (res.source_hash + ".log");
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

    fs::path digest = dir / (res.source_hash + ".so.sha256");
    if (reuse_cached(so, digest, err, res)) {
        res.seconds = elapsed();
        return res;
    }

    TempDir tmp("kernelevo-nvcc");
    fs::path cu = tmp.path() / "kernel.cu";
    write_file_atomic(cu, source);
    write_file_atomic(tmp.path() / "include" / "kernelevo" / "abi.h", abi_header_text());
    ProcessOptions po = nvcc_command(nvcc, toolkit, link_flags, res.arch, tmp.path(), opt);
    ProcessResult r = run_process(po);
    // Paths of the private temp dir mean nothing to the reader (or to an LLM repairing the code).
    const std::string output = strip_dir(r.out + r.err, tmp.path());
    res.kernels = parse_ptxas_info(output);
    res.log = trim_compiler_log(strip_ptxas_info(output));
    if (!r.ok()) {
        explain_failure(r, opt, res);
        // Only a real verdict is remembered: a compile stopped by a limit is tried again next time.
        if (r.started && !res.limit_hit) write_file_atomic(err, res.log);
        res.seconds = elapsed();
        return res;
    }
    save_kernel_resources(so, res.kernels);  // before the .so: a cache hit always finds both
    // The digest goes in first: whoever sees the .so (another compile of the same source running
    // at the same time included) also finds the hash it must match.
    res.library_sha256 = sha256_hex(read_file(tmp.path() / "kernel.so"));
    write_file_atomic(digest, res.library_sha256 + "\n");
    install_file_atomic(tmp.path() / "kernel.so", so, "the compiled kernel");
    std::error_code ec;
    fs::permissions(so, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read, ec);
    res.ok = true;
    res.library = so;
    res.seconds = elapsed();
    return res;
}

}  // namespace kevo
