#include "reference/reference.h"

#include <unistd.h>

#include <chrono>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "compile/compile.h"
#include "reference/internal/torch_config.h"

namespace kevo {

namespace {
// The wrapper's fixed part: conversions between kevo_tensor and at::Tensor, result normalization.
const char* kWrapperPrelude = R"CPP(
#include <ATen/ATen.h>
#if defined(KEVO_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#define KEVO_HAVE_CUDA_RUNTIME 1
#endif
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include "kernelevo/abi.h"

namespace kevo_ref_detail {
inline at::ScalarType scalar_type(int32_t dt) {
    switch (dt) {
#define KEVO_REF_SCALAR_TYPE_(e, v, n, sz, fl, aten) case KEVO_##e: return at::ScalarType::aten;
        KEVO_DTYPE_LIST(KEVO_REF_SCALAR_TYPE_)
#undef KEVO_REF_SCALAR_TYPE_
    }
    throw std::runtime_error("unknown kevo_dtype " + std::to_string(dt));
}
inline at::Tensor wrap(const kevo_tensor& t) {
    std::vector<int64_t> sizes(t.sizes, t.sizes + t.ndim), strides(t.strides, t.strides + t.ndim);
#if defined(KEVO_TORCH_CUDA)
    int dev = 0;
    cudaGetDevice(&dev);
    auto device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(dev));
#else
    auto device = at::Device(at::kCPU);
#endif
    return at::from_blob(t.data, sizes, strides, at::TensorOptions().dtype(scalar_type(t.dtype)).device(device));
}
inline void flatten(std::vector<at::Tensor>& out, const at::Tensor& t) { out.push_back(t); }
inline void flatten(std::vector<at::Tensor>& out, const std::vector<at::Tensor>& v) { out.insert(out.end(), v.begin(), v.end()); }
template <typename... Ts>
void flatten(std::vector<at::Tensor>& out, const std::tuple<Ts...>& t) {
    std::apply([&](const auto&... e) { (flatten(out, e), ...); }, t);
}
template <typename T>
std::vector<at::Tensor> results(const T& r) {
    std::vector<at::Tensor> out;
    flatten(out, r);
    return out;
}
thread_local std::string g_error;
std::vector<at::Tensor> g_kept;
}  // namespace kevo_ref_detail
)CPP";

const char* kWrapperEntry = R"CPP(
namespace kevo_ref_detail {
struct StreamScope {
#if defined(KEVO_TORCH_CUDA)
    explicit StreamScope(cudaStream_t s) {
        int dev = 0;
        cudaGetDevice(&dev);
        guard.emplace(c10::cuda::getStreamFromExternal(s, static_cast<c10::DeviceIndex>(dev)));
    }
    c10::optional<c10::cuda::CUDAStreamGuard> guard;
#else
    explicit StreamScope(cudaStream_t) {}
#endif
};
// Correctness is judged against strict fp32: LibTorch runs convolutions (cuDNN) in TF32 by default,
// which on KernelBench L2-46 put 1.9 M of 65 M outputs more than 1e-4 from fp64, while strict fp32
// stays within 8e-7. kevo_ref_forward (the outputs kernels are compared with) runs with TF32 off;
// kevo_ref_call (the speed baseline) with the task's precision policy (KEVO_REF_CUDNN_TF32 and
// KEVO_REF_CUBLAS_TF32, generated from task.json's "precision"), as the user's PyTorch or LibTorch
// code runs it; both restore the flags after. The legacy setters exist in LibTorch 1.13 and 2.x
// alike; since 2.9 they also set the per-op fp32_precision that the conv and matmul paths read, so
// no TORCH_VERSION guard is needed. The getters throw only where code mixed the legacy and new APIs;
// the entry point then reports that error.
struct Tf32Scope {
    bool cudnn = at::globalContext().allowTF32CuDNN(), cublas = at::globalContext().allowTF32CuBLAS();
    Tf32Scope(bool cudnn_on, bool cublas_on) {
        at::globalContext().setAllowTF32CuDNN(cudnn_on);
        at::globalContext().setAllowTF32CuBLAS(cublas_on);
    }
    ~Tf32Scope() {
        at::globalContext().setAllowTF32CuDNN(cudnn);
        at::globalContext().setAllowTF32CuBLAS(cublas);
    }
};
struct StrictFp32 : Tf32Scope {
    StrictFp32() : Tf32Scope(false, false) {}
};
struct PolicyTf32 : Tf32Scope {
    PolicyTf32() : Tf32Scope(KEVO_REF_CUDNN_TF32 != 0, KEVO_REF_CUBLAS_TF32 != 0) {}
};

// Runs the reference and copies its results into `out` (checking count, shape, dtype and device).
template <class Precision>
int forward_into(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    try {
        StreamScope scope(stream);
        Precision precision;
        if (n_in != KEVO_N_IN || n_out != KEVO_N_OUT) throw std::runtime_error("wrong number of tensors");
        std::vector<at::Tensor> res = kevo_ref_run(in, n_in);
        if (static_cast<int>(res.size()) != n_out)
            throw std::runtime_error("the reference returned " + std::to_string(res.size()) + " tensors, the task declares " + std::to_string(n_out) + " outputs");
        for (int i = 0; i < n_out; ++i) {
            at::Tensor dst = wrap(out[i]);
            const at::Tensor& r = res[i];
            std::ostringstream ss;
            ss << "output " << i << " (" << kevo_output_name(i) << "): the reference returned ";
            if (r.sizes() != dst.sizes()) ss << "shape " << r.sizes() << ", the task declares " << dst.sizes();
            else if (r.scalar_type() != dst.scalar_type()) ss << "dtype " << r.scalar_type() << ", the task declares " << dst.scalar_type();
            else if (r.device() != dst.device()) ss << "a tensor on " << r.device() << ", expected " << dst.device();
            else { dst.copy_(r); continue; }
            throw std::runtime_error(ss.str());
        }
        return 0;
    } catch (const std::exception& e) {
        g_error = e.what();
        return 1;
    }
}

// Runs the reference and keeps its results (what timing measures).
template <class Precision>
int call_kept(const kevo_tensor* in, int n_in, cudaStream_t stream) {
    try {
        StreamScope scope(stream);
        Precision precision;
        if (n_in != KEVO_N_IN) throw std::runtime_error("wrong number of inputs");
        g_kept = kevo_ref_run(in, n_in);
        return 0;
    } catch (const std::exception& e) {
        g_error = e.what();
        return 1;
    }
}
}  // namespace kevo_ref_detail

// The task's precision policy and the TF32 flags kevo_ref_call (the speed baseline) runs with, e.g.
// "pytorch (cuDNN TF32 on, cuBLAS TF32 off)"; the judge reports it beside "strict fp32" for correctness.
extern "C" __attribute__((visibility("default"))) const char* kevo_ref_precision(void) {
    return KEVO_REF_POLICY " (cuDNN TF32 " KEVO_REF_CUDNN_TEXT ", cuBLAS TF32 " KEVO_REF_CUBLAS_TEXT ")";
}

extern "C" __attribute__((visibility("default"))) const char* kevo_ref_error(void) {
    return kevo_ref_detail::g_error.c_str();
}

// The outputs kernels are compared with: the reference in strict fp32.
extern "C" __attribute__((visibility("default"))) int kevo_ref_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    return kevo_ref_detail::forward_into<kevo_ref_detail::StrictFp32>(in, n_in, out, n_out, stream);
}

// The outputs of the reference as it is timed (under the policy): how far they are from
// kevo_ref_forward's is the policy's own error on the problem, which the tolerance must admit.
extern "C" __attribute__((visibility("default"))) int kevo_ref_forward_policy(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    return kevo_ref_detail::forward_into<kevo_ref_detail::PolicyTf32>(in, n_in, out, n_out, stream);
}

extern "C" __attribute__((visibility("default"))) int kevo_ref_call(const kevo_tensor* in, int n_in, cudaStream_t stream) {
    return kevo_ref_detail::call_kept<kevo_ref_detail::PolicyTf32>(in, n_in, stream);
}

// The speed baseline in strict fp32 (what correctness is judged against), timed by the judge only
// where the policy turns TF32 on: a kernel's speedup against it is reported beside the speedup
// against the policy's reference, which alone ranks candidates.
extern "C" __attribute__((visibility("default"))) int kevo_ref_call_strict(const kevo_tensor* in, int n_in, cudaStream_t stream) {
    return kevo_ref_detail::call_kept<kevo_ref_detail::StrictFp32>(in, n_in, stream);
}

extern "C" __attribute__((visibility("default"))) void kevo_ref_release(void) {
    using namespace kevo_ref_detail;
    // Poison what the reference produced before handing the memory back, so that a candidate can
    // never find the right answer lying in freed memory.
    // The blocks stay in LibTorch's cache (not handed back to CUDA, where a candidate's cudaMalloc
    // could receive them); and the reference only ever runs after the candidate on the same inputs.
    for (auto& t : g_kept)
        if (t.defined() && t.is_floating_point()) t.fill_(std::numeric_limits<double>::quiet_NaN());
    g_kept.clear();
}
)CPP";

// References written for PyTorch's C++ extensions include <torch/extension.h>, which needs Python's
// headers. The reference never talks to Python, so it gets this stand-in (found first: -I comes
// before the -isystem torch directories); pybind11 code in a reference still fails to build.
const char* kExtensionShim =
    "// kernelevo: stand-in for <torch/extension.h> without Python; the reference runs outside Python.\n"
    "#pragma once\n#include <torch/torch.h>\n";
}  // namespace

std::string libtorch_version() { return torch_config().version; }

fs::path reference_sha256_file(const fs::path& source) { return source.string() + ".sha256"; }

void write_reference_sha256(const fs::path& source, const std::string& text) {
    const std::string line = sha256_hex(text) + "  " + source.filename().string() + "\n";
    const fs::path record = reference_sha256_file(source);
    std::error_code ec;
    if (!fs::exists(record, ec) || read_file(record) != line) write_file_atomic(record, line);
}

namespace {
// A generated source is compiled (into the trusted, unsandboxed reference library) only with the
// bytes recorded when it was generated.
void check_reference_sha256(const Task& task, const std::string& text) {
    const fs::path record = reference_sha256_file(task.reference_source);
    std::error_code ec;
    if (!fs::exists(record, ec) && !fs::is_symlink(record, ec)) return;
    std::string recorded;
    try {
        recorded = read_file(record).substr(0, 64);
    } catch (const UsageError&) {
    }
    const std::string now = sha256_hex(text);
    if (recorded != now)
        throw TaskError(task.file.string(), "reference.source",
                        task.reference_source.string() + " changed since it was generated (sha256 " + now + ", recorded in " +
                            record.string() + ": " + (recorded.empty() ? "unreadable" : recorded) +
                            "); it is not built: generate it again (kernelevo import kernelbench), or delete the record "
                            "to build your edit");
}
}  // namespace

ReferenceSupport reference_support() {
    ReferenceSupport s;
    s.available = torch_config().found;
    s.cuda = torch_config().found && torch_config().cuda;
    return s;
}

std::string reference_wrapper_source(const Task& task) {
    std::ostringstream ss;
    const bool vec = task.reference_signature == "vector";
    const auto qualified = [](const std::string& f) { return (f.rfind("::", 0) == 0 ? "" : "::") + f; };
    // A "vector" reference gets a wrapper that does not depend on the task (counts are checked at
    // run time), so all tasks sharing the reference source share one build.
    if (vec)
        ss << "// Generated by kernelevo: a torch-free C entry point around a reference taking a vector of tensors.\n";
    else
        ss << "// Generated by kernelevo: a torch-free C entry point around the reference of task '" << task.name << "'.\n";
    ss << kWrapperPrelude;
    ss << "#include <limits>\n#include <sstream>\n";
    ss << "#include \"" << task.reference_source.string() << "\"\n";
    if (vec) {
        ss << "#define KEVO_N_IN n_in\n#define KEVO_N_OUT n_out\n";
        ss << "static std::string kevo_output_name(int i) { return \"output \" + std::to_string(i); }\n";
        ss << "static std::vector<at::Tensor> kevo_ref_run(const kevo_tensor* in, int n_in) {\n"
           << "    std::vector<at::Tensor> args;\n"
           << "    for (int i = 0; i < n_in; ++i) args.push_back(kevo_ref_detail::wrap(in[i]));\n"
           << "    return kevo_ref_detail::results(" << qualified(task.reference_function) << "(args));\n}\n";
    } else {
        ss << "#define KEVO_N_IN " << task.inputs.size() << "\n#define KEVO_N_OUT " << task.outputs.size() << "\n";
        ss << "static const char* kKevoOutputNames[] = {";
        for (const auto& o : task.outputs) ss << "\"" << o.name << "\", ";
        ss << "};\n";
        ss << "static std::string kevo_output_name(int i) { return kKevoOutputNames[i]; }\n";
        ss << "static std::vector<at::Tensor> kevo_ref_run(const kevo_tensor* in, int) {\n"
           << "    using kevo_ref_detail::wrap;\n"
           // Qualified, so that argument-dependent lookup cannot pick at::relu over the user's relu.
           << "    return kevo_ref_detail::results(" << qualified(task.reference_function) << "(";
        for (size_t i = 0; i < task.inputs.size(); ++i) ss << (i ? ", " : "") << "wrap(in[" << i << "])";
        ss << "));\n}\n";
    }
    // The precision policy (task.json "precision"): the TF32 flags the speed baseline runs with.
    const Precision& p = task.precision;
    ss << "#define KEVO_REF_POLICY \"" << p.name() << "\"\n#define KEVO_REF_CUDNN_TF32 " << int(p.cudnn_tf32)
       << "\n#define KEVO_REF_CUBLAS_TF32 " << int(p.matmul_tf32) << "\n#define KEVO_REF_CUDNN_TEXT \""
       << (p.cudnn_tf32 ? "on" : "off") << "\"\n#define KEVO_REF_CUBLAS_TEXT \"" << (p.matmul_tf32 ? "on" : "off") << "\"\n";
    ss << kWrapperEntry;
    if (!task.reference_setup.empty())
        ss << "extern \"C\" __attribute__((visibility(\"default\"))) int kevo_ref_setup(const char* arg) {\n"
           << "    try {\n"
           << "        " << qualified(task.reference_setup) << "(std::string(arg ? arg : \"\"));\n"
           << "        return 0;\n"
           << "    } catch (const std::exception& e) {\n"
           << "        kevo_ref_detail::g_error = e.what();\n"
           << "        return 1;\n"
           << "    }\n}\n";
    return ss.str();
}

ReferenceBuild build_reference(const Task& task, double timeout_s) {
    ReferenceBuild b;
    const auto& cfg = torch_config();
    if (!cfg.found)
        throw UsageError("this kernelevo was built without LibTorch, so it cannot build the reference of '" + task.name +
                         "'; rebuild KernelEvo with LibTorch on CMAKE_PREFIX_PATH");
    auto t0 = std::chrono::steady_clock::now();
    const std::string wrapper = reference_wrapper_source(task);
    std::string reference_text;
    try {
        reference_text = read_file(task.reference_source);
    } catch (const UsageError&) {
        throw TaskError(task.file.string(), "reference.source", "cannot read " + task.reference_source.string());
    }
    check_reference_sha256(task, reference_text);
    std::vector<std::string> argv = {cfg.cxx.empty() ? "c++" : cfg.cxx, "-std=c++17", "-O2", "-fPIC", "-shared",
                                     "-fvisibility=hidden", "-w"};
    if (!cfg.cxx_flags.empty()) argv.push_back(cfg.cxx_flags);
    if (cfg.cuda) {
        argv.push_back("-DKEVO_TORCH_CUDA=1");
        argv.push_back("-I" + cfg.cuda_include);
    }
    for (const auto& d : cfg.include_dirs)
        if (d != "/usr/include" && d != "/usr/local/include") argv.push_back("-isystem" + d);  // never re-order the system dirs
    // The reference's own directory, so that it can include its neighbours.
    argv.push_back("-I" + task.reference_source.parent_path().string());
    // Hash everything that goes into the build; headers the reference includes are not tracked. Keyed
    // on content, not on where the reference lives (issue 40: an identical suite reference under a new
    // --out reuses the build): the wrapper's #include of it and the -I of its folder are left out of
    // the key, unless it includes a neighbour ("..."), whose folder then belongs to the key.
    const bool neighbours = std::regex_search(reference_text, std::regex("#[ \t]*include[ \t]*\""));
    const std::string own_include = "#include \"" + task.reference_source.string() + "\"\n", own_dir = argv.back();
    std::string keyed_wrapper = wrapper;
    if (size_t at = keyed_wrapper.find(own_include); !neighbours && at != std::string::npos)
        keyed_wrapper.replace(at, own_include.size(), "#include <the reference>\n");
    std::string key = keyed_wrapper + "\x1e" + reference_text + "\x1e" + abi_header_text() + "\x1e" + kExtensionShim + "\x1e" + cfg.libdir;
    for (const auto& a : argv)
        if (neighbours || a != own_dir) key += "\x1f" + a;
    const std::string hash = sha256_hex(key);
    fs::path dir = cache_root() / "references" / hash.substr(0, 2);
    fs::path so = dir / (hash + ".so");
    std::error_code ec;
    if (fs::exists(so, ec)) {
        b.ok = b.cached = true;
        b.library = so;
        return b;
    }
    TempDir tmp("kernelevo-ref");
    write_file_atomic(tmp.path() / "reference_wrapper.cpp", wrapper);
    write_file_atomic(tmp.path() / "include" / "kernelevo" / "abi.h", abi_header_text());
    write_file_atomic(tmp.path() / "include" / "torch" / "extension.h", kExtensionShim);
    argv.push_back("-I" + (tmp.path() / "include").string());
    argv.insert(argv.end(), {"reference_wrapper.cpp", "-o", "reference.so", "-L" + cfg.libdir, "-Wl,-rpath," + cfg.libdir,
                             "-Wl,--no-as-needed"});
    if (cfg.cuda) argv.insert(argv.end(), {"-ltorch_cuda", "-lc10_cuda"});
    argv.insert(argv.end(), {"-ltorch", "-ltorch_cpu", "-lc10", "-Wl,--as-needed"});
    ProcessOptions po;
    po.argv = argv;
    po.cwd = tmp.path();
    po.timeout_s = timeout_s;
    ProcessResult r = run_process(po);
    b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) {
        b.log = "building the reference " + task.reference_source.string() + " failed (" + r.describe() + "):\n" +
                trim_compiler_log(strip_dir(r.out + r.err, tmp.path()), 8000);
        return b;
    }
    install_file_atomic(tmp.path() / "reference.so", so, "the reference build");
    b.ok = true;
    b.library = so;
    return b;
}

}  // namespace kevo
