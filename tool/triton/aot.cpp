#include "triton/aot.h"

#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace kevo::triton {

namespace {

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

std::string first_match(const std::string& text, const std::regex& re, const char* what) {
    std::smatch m;
    if (!std::regex_search(text, m, re))
        throw AotFormatError(std::string("the AOT compiler's C output has no ") + what +
                             "; this Triton version writes a format kernelevo does not know (Triton 3.x expected)");
    return m[1].str();
}

// C string literal for a symbol name from Triton's output (plain identifiers in practice).
std::string c_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// The AOT source with its #include lines dropped (the wrapper includes them once, at file scope).
std::string without_includes(const std::string& c) {
    std::istringstream in(c);
    std::string line, out;
    while (std::getline(in, line)) {
        std::string t = trim(line);
        if (t.rfind("#include", 0) == 0) out += "// (kernelevo: moved to the top) " + t + "\n";
        else out += line + "\n";
    }
    return out;
}


// The CUDA driver API, opened at run time (libcuda.so.1) instead of linked: a program built with
// this kernel starts, and falls back to its reference, on a machine without the NVIDIA driver.
// Every driver function used below (and by Triton's AOT code) goes through this table.
const char* const kDriverTable = R"KEVO(#define KEVO_STR2_(x) #x
#define KEVO_STR_(x) KEVO_STR2_(x)
#define KEVO_DRIVER_FUNCTIONS(X) X(cuGetErrorString) X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) \
    X(cuDeviceGetAttribute) X(cuFuncSetCacheConfig) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuCtxGetCurrent) X(cuCtxGetDevice)
struct kevo_driver_table {
#define KEVO_DRIVER_FIELD_(f) decltype(&::f) f##_ = nullptr;
    KEVO_DRIVER_FUNCTIONS(KEVO_DRIVER_FIELD_)
#undef KEVO_DRIVER_FIELD_
};
kevo_driver_table kevo_drv;
// Opens libcuda.so.1 and fills kevo_drv (the caller holds kevo_load_mutex); 0 on success.
int kevo_driver_open() {
    if (kevo_drv.cuLaunchKernel_) return 0;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "kevo_forward (Triton): cannot open the CUDA driver: %s\n", dlerror());
        return 13;
    }
    kevo_driver_table t;
#define KEVO_DRIVER_SYM_(f)                                                                        \
    t.f##_ = (decltype(t.f##_))dlsym(h, KEVO_STR_(f));                                             \
    if (!t.f##_) {                                                                                 \
        fprintf(stderr, "kevo_forward (Triton): the CUDA driver has no %s\n", KEVO_STR_(f));       \
        return 14;                                                                                 \
    }
    KEVO_DRIVER_FUNCTIONS(KEVO_DRIVER_SYM_)
#undef KEVO_DRIVER_SYM_
    kevo_drv = t;
    return 0;
}
#undef cuGetErrorString
#define cuGetErrorString kevo_drv.cuGetErrorString_
#undef cuModuleLoadData
#define cuModuleLoadData kevo_drv.cuModuleLoadData_
#undef cuModuleGetFunction
#define cuModuleGetFunction kevo_drv.cuModuleGetFunction_
#undef cuModuleUnload
#define cuModuleUnload kevo_drv.cuModuleUnload_
#undef cuDeviceGetAttribute
#define cuDeviceGetAttribute kevo_drv.cuDeviceGetAttribute_
#undef cuFuncSetCacheConfig
#define cuFuncSetCacheConfig kevo_drv.cuFuncSetCacheConfig_
#undef cuFuncSetAttribute
#define cuFuncSetAttribute kevo_drv.cuFuncSetAttribute_
#undef cuLaunchKernel
#define cuLaunchKernel kevo_drv.cuLaunchKernel_
#undef cuCtxGetCurrent
#define cuCtxGetCurrent kevo_drv.cuCtxGetCurrent_
#undef cuCtxGetDevice
#define cuCtxGetDevice kevo_drv.cuCtxGetDevice_

)KEVO";

}  // namespace

AotKernel parse_aot_source(const std::string& c) {
    AotKernel k;
    k.c_source = c;
    static const std::regex launcher_re(R"(CUresult\s+(\w+)\s*\(\s*CUstream\s+stream\s*(?:,([^)]*))?\)\s*\{)");
    std::smatch m;
    bool found = false;
    for (auto it = std::sregex_iterator(c.begin(), c.end(), launcher_re); it != std::sregex_iterator(); ++it) {
        m = *it;
        found = true;
    }
    if (!found)
        throw AotFormatError("the AOT compiler's C output has no launcher `CUresult NAME(CUstream stream, ...) {`; this Triton "
                             "version writes a format kernelevo does not know (Triton 3.x expected)");
    k.launcher = m[1].str();
    std::string params = m[2].str();
    std::stringstream ps(params);
    std::string p;
    while (std::getline(ps, p, ',')) {
        p = trim(p);
        if (p.empty()) continue;
        size_t split = p.find_last_of(" \t*&");
        if (split == std::string::npos) throw AotFormatError("cannot read the launcher parameter '" + p + "'");
        k.params.emplace_back(trim(p.substr(0, split + 1)), trim(p.substr(split + 1)));
    }
    // The embedded cubin: `#define CUBIN_NAME NAME_cubin` in Triton 3.x, else the byte array itself.
    std::smatch cm;
    if (std::regex_search(c, cm, std::regex(R"(#define\s+CUBIN_NAME\s+(\w+))"))) k.cubin = cm[1].str();
    else k.cubin = first_match(c, std::regex(R"(unsigned\s+char\s+(\w+)\s*\[\s*\d+\s*\])"), "embedded cubin array");
    k.module = first_match(c, std::regex(R"(CUmodule\s+(\w+)\s*=\s*NULL\s*;)"), "CUmodule global");
    k.function = first_match(c, std::regex(R"(CUfunction\s+(\w+)\s*=\s*NULL\s*;)"), "CUfunction global");
    k.triton_kernel_name =
        first_match(c, std::regex(R"(cuModuleGetFunction\s*\(\s*&\s*\w+\s*,\s*\w+\s*,\s*\"([^\"]+)\")"), "cuModuleGetFunction call");
    // Dynamic shared memory: `int shared = N;` in the load function, else cuLaunchKernel's argument.
    std::smatch sm;
    if (std::regex_search(c, sm, std::regex(R"(int\s+shared\s*=\s*(\d+)\s*;)")))
        k.shared = std::stoll(sm[1].str());
    else
        k.shared = std::stoll(first_match(c, std::regex(R"(cuLaunchKernel\s*\([^;]*?,\s*(\d+)\s*,\s*stream\s*,)"),
                                          "shared memory size"));
    return k;
}

namespace {

// The helpers of kevo_forward and the start of kevo_load_all (which the per-kernel loads continue).
const char* const kWrapperHelpers = R"(int64_t kevo_cdiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
int64_t kevo_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
int64_t kevo_mod(int64_t a, int64_t b) { return b == 0 ? 0 : a % b; }
int64_t kevo_min(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t kevo_max(int64_t a, int64_t b) { return a > b ? a : b; }

// Says why on stderr (once per process: the caller falls back on every failing call), returns code.
int kevo_fail(int code, const char* what, CUresult r) {
    static std::once_flag said;
    std::call_once(said, [&] {
        const char* s = nullptr;
        if (r != CUDA_SUCCESS && kevo_drv.cuGetErrorString_) cuGetErrorString(r, &s);
        fprintf(stderr, "kevo_forward (Triton): %s%s%s (returning %d)\n", what, s ? ": " : "", s ? s : "", code);
    });
    return code;
}

bool kevo_contiguous(const kevo_tensor& t) {
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
        if (t.sizes[d] != 1 && t.strides[d] != expected) return false;
        expected *= t.sizes[d];
    }
    return true;
}

// Loads a module into the current context (once per process; the first context wins), without
// the exit() that the AOT load function calls on an error.
CUresult kevo_load(CUmodule* mod, CUfunction* fn, const void* image, const char* name, int shared) {
    CUresult r = cuModuleLoadData(mod, image);
    if (r != CUDA_SUCCESS) return r;
    r = cuModuleGetFunction(fn, *mod, name);
    if (r != CUDA_SUCCESS) return r;
    if (shared > 49152) {
        CUdevice dev;
        r = cuCtxGetDevice(&dev);
        if (r != CUDA_SUCCESS) return r;
        int optin = 0;
        r = cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
        if (r != CUDA_SUCCESS) return r;
        if (shared > optin) return CUDA_ERROR_INVALID_VALUE;
        cuFuncSetCacheConfig(*fn, CU_FUNC_CACHE_PREFER_SHARED);
        r = cuFuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

std::mutex kevo_load_mutex;
CUcontext kevo_loaded_context = nullptr;

int kevo_load_all() {
    std::lock_guard<std::mutex> lock(kevo_load_mutex);
    if (int e = kevo_driver_open()) return e;
    CUcontext ctx = nullptr;
    CUresult r = cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS || ctx == nullptr) return kevo_fail(10, "no current CUDA context on this thread", r);
    if (kevo_loaded_context != nullptr) {
        if (ctx != kevo_loaded_context) return kevo_fail(11, "called from another CUDA context than the one the kernel was loaded in", CUDA_SUCCESS);
        return 0;
    }
)";

// The namespace names of the AOT sources: names[launch][specialization] (kevo_aot_0, kevo_aot_1...).
using NamespaceNames = std::vector<std::vector<std::string>>;

// The top of the file: provenance, includes, the driver table and the grid of the next launch.
void write_prelude(std::ostream& o, const std::string& header_comment) {
    o << "// " << header_comment << "\n"
      << "// The kernel-ABI entry point around Triton's ahead-of-time output (C with the cubin embedded).\n"
      << "// Uses the CUDA driver API, opened at run time (no -lcuda). Generated: do not edit.\n"
      << "#include <kernelevo/abi.h>\n"
      << "#include <cuda.h>\n#include <inttypes.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
      << "#include <dlfcn.h>\n#include <mutex>\n\n"
      << "namespace {\n"
      << kDriverTable
      << "// The grid of the next launch on this thread: triton.tools.compile was given\n"
      << "// --grid kevo_grid_x,kevo_grid_y,kevo_grid_z.\n"
      << "thread_local unsigned int kevo_grid_x = 0, kevo_grid_y = 0, kevo_grid_z = 0;\n\n";
}

// Every AOT source in a namespace of its own; returns the namespaces' names.
NamespaceNames write_aot_sources(std::ostream& o, const std::vector<CompiledLaunch>& launches) {
    int ns = 0;
    NamespaceNames ns_names(launches.size());
    for (size_t li = 0; li < launches.size(); ++li) {
        for (const AotKernel& k : launches[li].specializations) {
            std::string name = "kevo_aot_" + std::to_string(ns++);
            ns_names[li].push_back(name);
            o << "// ---- " << name << ": " << k.launcher << " (Triton kernel " << k.triton_kernel_name << ") ----\n"
              << "namespace " << name << " {\n"
              << without_includes(k.c_source) << "\n}  // namespace " << name << "\n"
              << "#undef CUBIN_NAME\n#undef CUDA_CHECK\n\n";
        }
    }
    return ns_names;
}

// The helpers and kevo_load_all, which loads every module; closes the anonymous namespace.
void write_loader(std::ostream& o, const std::vector<CompiledLaunch>& launches, const NamespaceNames& ns_names) {
    o << kWrapperHelpers;
    for (size_t li = 0; li < launches.size(); ++li)
        for (size_t si = 0; si < launches[li].specializations.size(); ++si) {
            const AotKernel& k = launches[li].specializations[si];
            const std::string& n = ns_names[li][si];
            o << "    r = kevo_load(&" << n << "::" << k.module << ", &" << n << "::" << k.function << ", " << n << "::" << k.cubin
              << ", " << c_string(k.triton_kernel_name) << ", " << k.shared << ");\n"
              << "    if (r != CUDA_SUCCESS) return kevo_fail(12, \"cannot load the Triton kernel " << k.triton_kernel_name
              << "\", r);\n";
        }
    o << "    kevo_loaded_context = ctx;\n    return 0;\n}\n}  // namespace\n\n";
}

// kevo_forward's checks of the tensors' rank, dtype, layout and sizes, binding each dimension to
// the first size that has it; returns dimension name -> its C variable.
std::map<std::string, std::string> write_tensor_checks(std::ostream& o, const Task& task) {
    std::map<std::string, std::string> dims;
    for (int io = 0; io < 2; ++io) {
        const auto& list = io == 0 ? task.inputs : task.outputs;
        const char* arr = io == 0 ? "in" : "out";
        for (size_t i = 0; i < list.size(); ++i) {
            std::string t = std::string(arr) + "[" + std::to_string(i) + "]";
            o << "    if (" << t << ".ndim != " << list[i].shape.size() << " || " << t << ".dtype != " << dtype_abi(list[i].dtype)
              << " || !kevo_contiguous(" << t << ")) return kevo_fail(2, \"" << list[i].name
              << ": unexpected rank, dtype or layout\", CUDA_SUCCESS);\n";
            for (size_t a = 0; a < list[i].shape.size(); ++a) {
                const Dim& d = list[i].shape[a];
                std::string size = t + ".sizes[" + std::to_string(a) + "]";
                if (d.symbol.empty()) {
                    o << "    if (" << size << " != INT64_C(" << d.value << ")) return kevo_fail(3, \"" << list[i].name
                      << ": unexpected size\", CUDA_SUCCESS);\n";
                } else if (!dims.count(d.symbol)) {
                    dims[d.symbol] = "kevo_dim_" + d.symbol;
                    o << "    const int64_t kevo_dim_" << d.symbol << " = " << size << ";\n";
                } else {
                    o << "    if (" << size << " != kevo_dim_" << d.symbol << ") return kevo_fail(3, \"" << list[i].name
                      << ": size " << d.symbol << " differs between tensors\", CUDA_SUCCESS);\n";
                }
            }
        }
    }
    return dims;
}

std::string tensor_ref(const Arg& a) { return std::string(a.is_input ? "in" : "out") + "[" + std::to_string(a.index) + "]"; }

// What one launch passes: parameter -> C expression (its scalars computed, and range-checked when
// i32, in `o`), and the names its grid may use (the dimensions and integer constexprs).
struct LaunchValues {
    std::map<std::string, std::string> value_of;
    std::map<std::string, std::string> grid_names;
};

LaunchValues write_launch_values(std::ostream& o, const Launch& L, const std::map<std::string, std::string>& dims) {
    LaunchValues v;
    v.grid_names = dims;
    for (const Arg& a : L.args) {
        if (a.kind == Arg::constexpr_value) {
            if (a.literal.find_first_of(".e") == std::string::npos) v.grid_names[a.param] = "INT64_C(" + a.literal + ")";
            continue;
        }
        if (a.kind == Arg::tensor) {
            v.value_of[a.param] = "(CUdeviceptr)" + tensor_ref(a) + ".data";
            continue;
        }
        std::string name = "kevo_v_" + a.param;
        o << "        const int64_t " << name << " = " << expression_to_c(a.expr, dims) << ";\n";
        if (a.triton_type == "i32")
            o << "        if (" << name << " < INT32_MIN || " << name << " > INT32_MAX) return kevo_fail(4, \"" << a.param
              << " does not fit in i32 (give it type i64)\", CUDA_SUCCESS);\n";
        v.value_of[a.param] = name;
    }
    return v;
}

// The call of an AOT launcher, its parameters bound by name; throws AotFormatError when the
// launcher and the launch description disagree on them.
std::string launcher_call(const AotKernel& k, const std::string& ns, const std::map<std::string, std::string>& value_of) {
    std::string call = ns + "::" + k.launcher + "((CUstream)stream";
    std::set<std::string> used;
    for (const auto& [type, name] : k.params) {
        if (name == "global_scratch" || name == "profile_scratch") continue;
        auto it = value_of.find(name);
        if (it == value_of.end())
            throw AotFormatError("the AOT launcher " + k.launcher + " takes a parameter '" + name +
                                 "' that the launch description does not bind");
        std::string v = it->second;
        if (type.find("int32") != std::string::npos) v = "(int32_t)" + v;
        call += ", " + v;
        used.insert(name);
    }
    for (const auto& [name, v] : value_of)
        if (!used.count(name))
            throw AotFormatError("the AOT launcher " + k.launcher + " does not take the parameter '" + name + "' of the launch description");
    return call + ")";
}

// The run-time test of the launch's divisibility hints (when it holds, the hinted specialization runs).
std::string hint_condition(const Launch& L, std::map<std::string, std::string>& value_of) {
    std::string cond;
    for (const Arg& a : L.args) {
        if (!a.hint) continue;
        std::string c = a.kind == Arg::tensor ? "((uintptr_t)" + tensor_ref(a) + ".data % 16 == 0)" : "(" + value_of[a.param] + " % 16 == 0)";
        cond += (cond.empty() ? "" : " && ") + c;
    }
    return cond;
}

// One launch inside kevo_forward: its values, its grid, and the call of its specialization.
void write_launch(std::ostream& o, size_t li, const CompiledLaunch& cl, const std::vector<std::string>& ns_names,
                  const std::map<std::string, std::string>& dims) {
    const Launch& L = cl.launch;
    o << "    {  // launch " << li << ": " << L.kernel << "\n";
    LaunchValues v = write_launch_values(o, L, dims);
    const char* axis[3] = {"x", "y", "z"};
    for (int g = 0; g < 3; ++g)
        o << "        const int64_t kevo_g" << axis[g] << " = " << expression_to_c(L.grid[g], v.grid_names) << ";\n";
    o << "        if (kevo_gx < 0 || kevo_gy < 0 || kevo_gz < 0 || kevo_gx > INT64_C(2147483647) || kevo_gy > 65535 || kevo_gz > 65535)\n"
      << "            return kevo_fail(5, \"grid out of range\", CUDA_SUCCESS);\n"
      << "        kevo_grid_x = (unsigned int)kevo_gx; kevo_grid_y = (unsigned int)kevo_gy; kevo_grid_z = (unsigned int)kevo_gz;\n"
      << "        if (kevo_gx * kevo_gy * kevo_gz > 0) {\n";
    for (size_t si = 0; si < cl.specializations.size(); ++si) {
        std::string call = launcher_call(cl.specializations[si], ns_names[si], v.value_of);
        if (L.has_hints() && si == 0) {
            o << "            if (" << hint_condition(L, v.value_of) << ") r = " << call << ";  // the hinted specialization\n"
              << "            else ";
        } else {
            o << (si == 0 ? "            " : "") << "r = " << call << ";\n";
        }
    }
    o << "            if (r != CUDA_SUCCESS) return kevo_fail(6, \"launching " << L.kernel << " failed\", r);\n"
      << "        }\n    }\n";
}

}  // namespace

std::string generate_wrapper(const std::vector<CompiledLaunch>& launches, const Task& task, const std::string& header_comment) {
    std::ostringstream o;
    write_prelude(o, header_comment);
    NamespaceNames ns_names = write_aot_sources(o, launches);
    write_loader(o, launches, ns_names);
    o << "extern \"C\" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {\n"
      << "    if (n_in != " << task.inputs.size() << " || n_out != " << task.outputs.size()
      << ") return kevo_fail(1, \"wrong number of tensors\", CUDA_SUCCESS);\n";
    std::map<std::string, std::string> dims = write_tensor_checks(o, task);
    o << "    (void)in; (void)out;\n";
    o << "    if (int e = kevo_load_all()) return e;\n";
    o << "    CUresult r = CUDA_SUCCESS;\n";
    for (size_t li = 0; li < launches.size(); ++li) write_launch(o, li, launches[li], ns_names[li], dims);
    o << "    return 0;\n}\n";
    return o.str();
}

}  // namespace kevo::triton
