// The Triton backend without Triton (CI): the launch description, the wrapper generated from a
// recorded Triton 3.6 AOT output and compiled by the real nvcc, the whole compile path with a
// stand-in `triton` package answering from that recording (real Python, real run_process), the
// setup errors, and Triton cache entries.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "cache/cache.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "compile/compile.h"
#include "language/registry.h"
#include "sandbox/sandbox.h"
#include "task/task.h"
#include "triton/aot.h"
#include "triton/backends.h"
#include "triton/launch.h"
#include "triton/triton_compile.h"

using namespace kevo;
using namespace kevo::triton;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR);
const fs::path kTriton = kData / "triton";

const Task& gelu_task() {
    static Task t = load_task(kData / "gelu_bias" / "task.json");
    return t;
}

std::string gelu_source() { return read_file(kTriton / "gelu_bias.py"); }

// A "python" that is the real python3 with a stand-in triton package first on its path (and the
// recorded AOT output, which the stand-in serves: the compile sandbox shows the import path only).
std::string python_with(const std::string& package_dir) {
    static TempDir dir("kevo-triton-py");
    fs::path script = dir.path() / (package_dir + ".sh");
    write_file_atomic(script, "#!/bin/sh\nPYTHONPATH='" + (kTriton / package_dir).string() + ":" + (kTriton / "aot").string() +
                                  "' exec python3 \"$@\"\n");
    ::chmod(script.c_str(), 0755);
    return script.string();
}

bool python3_succeeds(const char* code, double timeout_s) {
    ProcessOptions po;
    po.argv = {"python3", "-c", code};
    po.timeout_s = timeout_s;
    return run_process(po).ok();
}

// Whether the plain python3 imports a real Triton (a GPU host's does; CI's does not).
bool python3_has_triton() {
    static const bool has = python3_succeeds("import triton", 60);
    return has;
}

bool have_python() { return python3_succeeds("print(1)", 30); }

#define REQUIRE_PYTHON() \
    if (!have_python()) GTEST_SKIP() << "python3 is not installed (scripts/install_deps.sh installs it)"

// The launch description errors tell what to write; each case names the snippet replaced in
// gelu_bias.py and a phrase the message must contain.
struct BadCase {
    const char* from;
    const char* to;
    const char* message;
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.message; }
class BadLaunch : public ::testing::TestWithParam<BadCase> {};

std::string replaced(std::string s, const std::string& from, const std::string& to) {
    size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    if (p != std::string::npos) s.replace(p, from.size(), to);
    return s;
}
}  // namespace

// ---- the launch description ---------------------------------------------------------------------

TEST(TritonLaunch, PythonLiteralsParseWithoutPython) {
    nlohmann::json j = parse_python_literal(R"PY({ "a": (1, 2,), 'b': [True, None, -3.5e2],  # comment
        "c": "x" 'y', "d": {}, "e": 0x10, "f": 1_000, })PY");
    EXPECT_EQ(j["a"], nlohmann::json::array({1, 2}));
    EXPECT_EQ(j["b"][0], true);
    EXPECT_TRUE(j["b"][1].is_null());
    EXPECT_DOUBLE_EQ(j["b"][2].get<double>(), -350.0);
    EXPECT_EQ(j["c"], "xy");
    EXPECT_EQ(j["e"], 16);
    EXPECT_EQ(j["f"], 1000);
    try {
        parse_python_literal("{\n\"a\": 1,\n\"b\": triton.cdiv(M, 4)}");
        FAIL() << "an expression outside a string must be refused";
    } catch (const LaunchError& e) {
        EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("in strings"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_python_literal("{\"a\": 1, \"a\": 2}"), LaunchError);
    EXPECT_THROW(parse_python_literal("[1, 2"), LaunchError);
}

TEST(TritonLaunch, TritonSourcesAreRecognized) {
    EXPECT_TRUE(is_triton_source(gelu_source()));
    EXPECT_TRUE(is_triton_source(read_file(kTriton / "row_softmax.py")));
    EXPECT_FALSE(is_triton_source(read_file(kData / "gelu_bias" / "kernels" / "good.cu")));
    CompileOptions o;
    EXPECT_EQ(candidate_backend(gelu_source(), o), "triton");
    EXPECT_EQ(candidate_backend("extern \"C\" int kevo_forward(...);", o), "cuda");
    o.backend = "cuda";
    EXPECT_EQ(candidate_backend(gelu_source(), o), "cuda");
    o.backend = "opencl";
    EXPECT_THROW(candidate_backend("", o), UsageError);
    try {
        compile_candidate(gelu_source(), o);
        ADD_FAILURE() << "an unknown backend must be refused";
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "unknown backend 'opencl' (expected cuda, triton or auto)");
    }
}

TEST(TritonLaunch, GeluDescriptionBindsTensorsDimensionsAndConstexprs) {
    std::vector<Launch> ls = parse_launches(gelu_source(), gelu_task());
    ASSERT_EQ(ls.size(), 1u);
    const Launch& L = ls[0];
    EXPECT_EQ(L.kernel, "gelu_bias_kernel");
    ASSERT_EQ(L.args.size(), 6u);
    EXPECT_EQ(L.args[0].kind, Arg::tensor);
    EXPECT_EQ(L.args[0].tensor_name, "x");
    EXPECT_TRUE(L.args[0].is_input);
    EXPECT_EQ(L.args[2].tensor_name, "y");
    EXPECT_FALSE(L.args[2].is_input);
    EXPECT_EQ(L.args[2].index, 0);
    EXPECT_EQ(L.args[3].kind, Arg::scalar);
    EXPECT_EQ(L.args[3].expr, "M * N");
    EXPECT_EQ(L.args[5].kind, Arg::constexpr_value);
    EXPECT_EQ(L.args[5].literal, "1024");
    EXPECT_EQ(L.num_warps, 4);
    EXPECT_EQ(L.num_stages, 1);
    EXPECT_EQ(L.grid, (std::vector<std::string>{"cdiv(M * N, BLOCK)", "1", "1"}));
    // Exactly what triton.tools.compile gets (and what the recorded output was made with).
    EXPECT_EQ(L.signature(true), "*fp32:16, *fp32:16, *fp32:16, i32:16, i32, 1024");
    EXPECT_EQ(L.signature(false), "*fp32, *fp32, *fp32, i32, i32, 1024");
}

TEST(TritonLaunch, ListsLaunchInOrderAndTypesFollowTheTask) {
    Task t = gelu_task();
    t.inputs[1].dtype = DType::BFLOAT16;
    std::string src = R"PY(
@triton.jit
def a(p, q, n: tl.int32, BLOCK: tl.constexpr = 128):
    pass

@triton.heuristics({})
@triton.jit
def b(p, EPS: tl.constexpr):
    pass

KEVO_LAUNCH = [
    {"kernel": "a", "args": {"p": "x", "q": "bias", "n": ("M * N", "i64"), "BLOCK": 128}, "grid": "cdiv(M, BLOCK)"},
    {"kernel": "b", "args": {"p": "y", "EPS": 1e-5}, "grid": ["M", "N", 2], "num_warps": 1, "num_stages": 1},

]
)PY";
    std::vector<Launch> ls = parse_launches(src, t);
    ASSERT_EQ(ls.size(), 2u);
    EXPECT_EQ(ls[0].signature(false), "*fp32, *bf16, i64, 128");
    EXPECT_EQ(ls[0].grid[0], "cdiv(M, BLOCK)");
    EXPECT_EQ(ls[1].signature(false), "*fp32, 1.0000000000000001e-05");
    EXPECT_EQ(ls[1].grid, (std::vector<std::string>{"M", "N", "2"}));
}

TEST(TritonLaunch, ExpressionsRenderAsCheckedC) {
    std::map<std::string, std::string> names = {{"M", "m"}, {"N", "n"}};
    EXPECT_EQ(expression_to_c("cdiv(M * N, 256)", names), "kevo_cdiv((m * n), INT64_C(256))");
    EXPECT_EQ(expression_to_c("triton.cdiv(N, 4) + M // 2 - (N % 3)", names),
              "((kevo_cdiv(n, INT64_C(4)) + kevo_div(m, INT64_C(2))) - kevo_mod(n, INT64_C(3)))");
    EXPECT_EQ(expression_to_c("max(M, -1)", names), "kevo_max(m, (-INT64_C(1)))");
    for (const char* bad : {"K * 2", "M +", "cdiv(M)", "M; system(1)", "open('x')", "99999999999999999999"})
        EXPECT_THROW(expression_to_c(bad, names), LaunchError) << bad;
    try {
        expression_to_c("K", names);
    } catch (const LaunchError& e) {
        EXPECT_NE(std::string(e.what()).find("unknown name 'K'"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("M, N"), std::string::npos) << "lists the names it knows";
    }
}

TEST_P(BadLaunch, SaysWhatToWrite) {
    const BadCase& c = GetParam();
    std::string src = replaced(gelu_source(), c.from, c.to);
    try {
        parse_launches(src, gelu_task());
        FAIL() << "accepted: " << c.message;
    } catch (const LaunchError& e) {
        EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadLaunch,
    ::testing::Values(
        BadCase{"\"N\": \"N\",", "", "gives no value to the parameter \"N\""},
        BadCase{"\"N\": \"N\",", "\"N\": \"N\", \"K\": 3,", "has no such parameter (its parameters: x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK)"},
        BadCase{"\"BLOCK\": 1024,", "\"BLOCK\": \"1024\",", "BLOCK is a tl.constexpr parameter"},
        BadCase{"\"x_ptr\": \"x\",", "\"x_ptr\": \"z\",", "unknown name 'z'"},
        BadCase{"\"kernel\": \"gelu_bias_kernel\"", "\"kernel\": \"gelu\"", "defines no function of that name"},
        BadCase{"@triton.jit\n", "\n", "is not decorated with @triton.jit"},
        BadCase{"\"grid\": (\"cdiv(M * N, BLOCK)\",)", "\"grid\": (\"cdiv(M * K, BLOCK)\",)", "unknown name 'K'"},
        BadCase{"\"grid\": (\"cdiv(M * N, BLOCK)\",),", "", "\"grid\" is missing"},
        BadCase{"\"num_warps\": 4", "\"num_warps\": 3", "\"num_warps\" must be a power of two"},
        BadCase{"\"num_stages\": 1", "\"num_stage\": 1", "unknown key \"num_stage\""},
        BadCase{"\"n_elements\": 16}", "\"n_elements\": 8}", "must be 16"},
        BadCase{"\"n_elements\": \"M * N\",", "\"n_elements\": (\"M * N\", \"u64\"),", "must be \"i32\" or \"i64\""},
        BadCase{"KEVO_LAUNCH = {", "LAUNCH = {", "has no KEVO_LAUNCH"}));

TEST(TritonLaunch, BadLaunchFixtureIsACompileErrorBeforeAnyTritonRuns) {
    CompileOptions o;
    o.task = std::make_shared<const Task>(gelu_task());
    o.python = "/nonexistent/python";  // never started: the description is checked first
    CompileResult r = compile_candidate(read_file(kTriton / "cheats" / "bad_launch.py"), o);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.backend, "triton");
    EXPECT_NE(r.log.find("gives no value to the parameter \"N\""), std::string::npos) << r.log;
}

// ---- the recorded AOT output and the generated wrapper -------------------------------------------

namespace {
std::vector<CompiledLaunch> recorded_gelu() {
    std::vector<CompiledLaunch> cl(1);
    cl[0].launch = parse_launches(gelu_source(), gelu_task())[0];
    for (const char* f : {"k0h.400c6aa7_0d1d2d3d45.c", "k0g.53df88cc_012345.c"})
        cl[0].specializations.push_back(parse_aot_source(read_file(kTriton / "aot" / f)));
    return cl;
}
}  // namespace

TEST(TritonAot, RecordedOutputParses) {
    AotKernel k = parse_aot_source(read_file(kTriton / "aot" / "k0h.400c6aa7_0d1d2d3d45.c"));
    EXPECT_EQ(k.launcher, "kevo_k0h_400c6aa7_0d1d2d3d45");
    EXPECT_EQ(k.cubin, "kevo_k0h_400c6aa7_0d1d2d3d45_cubin");
    EXPECT_EQ(k.module, "kevo_k0h_400c6aa7_0d1d2d3d45_mod");
    EXPECT_EQ(k.function, "kevo_k0h_400c6aa7_0d1d2d3d45_func");
    EXPECT_EQ(k.triton_kernel_name, "gelu_bias_kernel");
    EXPECT_EQ(k.shared, 0);
    using P = std::pair<std::string, std::string>;
    EXPECT_EQ(k.params, (std::vector<P>{{"CUdeviceptr", "x_ptr"}, {"CUdeviceptr", "bias_ptr"}, {"CUdeviceptr", "y_ptr"},
                                        {"int32_t", "n_elements"}, {"int32_t", "N"}}));
    EXPECT_THROW(parse_aot_source("int main() {}"), AotFormatError);
    // Without the CUBIN_NAME macro and the `int shared` line, the array and the launch still tell.
    std::string c = read_file(kTriton / "aot" / "k0h.400c6aa7_0d1d2d3d45.c");
    c = std::regex_replace(c, std::regex("#define CUBIN_NAME (\\w+)"), "");
    c = std::regex_replace(c, std::regex("CUBIN_NAME"), "kevo_k0h_400c6aa7_0d1d2d3d45_cubin");
    c = std::regex_replace(c, std::regex("int shared = 0;"), "");
    c = std::regex_replace(c, std::regex("4 \\* 32, 1, 1, 0, stream"), "4 * 32, 1, 1, 1024, stream");
    AotKernel k2 = parse_aot_source(c);
    EXPECT_EQ(k2.cubin, "kevo_k0h_400c6aa7_0d1d2d3d45_cubin");
    EXPECT_EQ(k2.shared, 1024);
}

TEST(TritonAot, WrapperDispatchesOnHintsAndCompilesWithNvcc) {
    std::string w = generate_wrapper(recorded_gelu(), gelu_task(), "test");
    // The hinted specialization only when every hint holds at run time, else the generic one.
    EXPECT_NE(w.find("if (((uintptr_t)in[0].data % 16 == 0) && ((uintptr_t)in[1].data % 16 == 0) && ((uintptr_t)out[0].data % 16 == 0) "
                     "&& (kevo_v_n_elements % 16 == 0)) r = kevo_aot_0::kevo_k0h_400c6aa7_0d1d2d3d45((CUstream)stream"),
              std::string::npos)
        << w;
    EXPECT_NE(w.find("else r = kevo_aot_1::kevo_k0g_53df88cc_012345((CUstream)stream, (CUdeviceptr)in[0].data, "
                     "(CUdeviceptr)in[1].data, (CUdeviceptr)out[0].data, (int32_t)kevo_v_n_elements, (int32_t)kevo_v_N)"),
              std::string::npos)
        << w;
    EXPECT_NE(w.find("kevo_cdiv((kevo_dim_M * kevo_dim_N), INT64_C(1024))"), std::string::npos);
    EXPECT_NE(w.find("if (in[1].sizes[0] != kevo_dim_N)"), std::string::npos) << "shared dimensions are checked";
    EXPECT_EQ(w.find("#include <cuda.h>\n#include <inttypes.h>"), w.find("#include <cuda.h>")) << "includes once, at the top";

    // The real nvcc builds it into a kernel-ABI shared object linked against the driver API only;
    // the AOT symbols stay internal, so several Triton kernels coexist in one binary.
    CompileOptions o;
    o.extra_flags = {"-ldl", "-Xlinker", "--no-undefined"};  // as compile_triton() builds it
    CompileResult r = compile_kernel(w, o);
    ASSERT_TRUE(r.ok) << r.log;
    ProcessOptions nm;
    nm.argv = {"nm", "-D", "--defined-only", r.library.string()};
    ProcessResult n = run_process(nm);
    ASSERT_TRUE(n.ok()) << n.describe();
    EXPECT_NE(n.out.find(" T kevo_forward"), std::string::npos) << n.out;
    EXPECT_EQ(n.out.find("kevo_k0h"), std::string::npos) << n.out;
    EXPECT_EQ(n.out.find("load_"), std::string::npos) << n.out;
    // The driver is opened at run time: no libcuda dependency, no undefined cu* symbol, so a
    // program built with the kernel starts (and falls back) on a machine without the driver.
    ProcessOptions rd;
    rd.argv = {"readelf", "-d", r.library.string()};
    ProcessResult d = run_process(rd);
    EXPECT_EQ(d.out.find("libcuda.so"), std::string::npos) << d.out;
    nm.argv = {"nm", "-u", r.library.string()};
    ProcessResult u = run_process(nm);
    EXPECT_FALSE(std::regex_search(u.out, std::regex(R"(\bcu[A-Z]\w*)"))) << u.out;
    EXPECT_NE(w.find("dlopen(\"libcuda.so.1\""), std::string::npos);
}

// The whole generated text, pinned: a change is deliberate (then bump kWrapperVersion in triton_compile.cpp
// and replace the file with the one this test writes). The recorded gelu launch (hinted + generic), and then
// also a second launch with no hints, an i64 scalar and more than 48 KiB of dynamic shared memory.
TEST(TritonAot, WrapperTextIsPinned) {
    std::vector<CompiledLaunch> two = recorded_gelu();
    CompiledLaunch second = two[0];
    for (Arg& a : second.launch.args) {
        a.hint = 0;
        if (a.param == "n_elements") a.triton_type = "i64";
    }
    second.specializations.erase(second.specializations.begin());
    second.specializations[0].shared = 60000;
    two.push_back(second);
    for (const auto& [file, launches] : {std::make_pair("gelu_bias.cu", recorded_gelu()), std::make_pair("two_launches.cu", two)}) {
        const std::string expected = fs::exists(kTriton / "wrapper" / file) ? read_file(kTriton / "wrapper" / file) : "";
        const std::string actual = generate_wrapper(launches, gelu_task(), file);
        if (actual == expected) continue;
        const fs::path written = fs::path(::testing::TempDir()) / (std::string("kevo-wrapper-") + file);  // kept after the test
        write_file_atomic(written, actual);
        auto differs = std::mismatch(actual.begin(), actual.end(), expected.begin(), expected.end()).first;
        ADD_FAILURE() << "the wrapper differs from tests/data/triton/wrapper/" << file << " from line "
                      << 1 + std::count(actual.begin(), differs, '\n') << "; it was written to " << written;
    }
}

TEST(TritonAot, LauncherThatDoesNotMatchTheDescriptionIsRefused) {
    auto cl = recorded_gelu();
    cl[0].specializations[1].params.pop_back();  // a Triton that dropped N
    EXPECT_THROW(generate_wrapper(cl, gelu_task(), "test"), AotFormatError);
}

// ---- the whole compile path with the stand-in triton package -------------------------------------

TEST(TritonCompile, RecordedTritonCompilesTheCandidateAndCachesTheWrapper) {
    REQUIRE_PYTHON();
    CompileOptions o;
    o.task = std::make_shared<const Task>(gelu_task());
    o.python = python_with("fake_triton");
    CompileResult r = compile_candidate(gelu_source(), o);
    ASSERT_TRUE(r.ok) << r.log;
    EXPECT_EQ(r.backend, "triton");
    EXPECT_EQ(r.backend_info["triton_version"], "3.6.0+recorded");
    EXPECT_EQ(r.backend_info["launches"][0]["specializations"].size(), 2u);
    EXPECT_NE(r.generated_source.find("extern \"C\" int kevo_forward("), std::string::npos);
    EXPECT_NE(r.generated_source.find("kevo_aot_1::kevo_k0g_53df88cc_012345"), std::string::npos);
    EXPECT_TRUE(fs::exists(r.library));
    // The same candidate again: no Triton, no nvcc.
    CompileResult again = compile_candidate(gelu_source(), o);
    ASSERT_TRUE(again.ok);
    EXPECT_TRUE(again.cached);
    EXPECT_EQ(again.library, r.library);
    // An edited candidate is compiled again (here: a signature the recording does not have).
    std::string edited = replaced(gelu_source(), "\"num_warps\": 4", "\"num_warps\": 8");
    CompileResult other = compile_candidate(edited, o);
    EXPECT_FALSE(other.ok);
    EXPECT_NE(other.log.find("Triton's compiler failed on gelu_bias_kernel"), std::string::npos) << other.log;
    EXPECT_NE(other.log.find("no recorded AOT output"), std::string::npos) << other.log;
    EXPECT_EQ(other.log.find("kernelevo-triton"), std::string::npos) << "temp paths are stripped: " << other.log;
}

TEST(TritonCompile, SetupProblemsSayWhatToDo) {
    REQUIRE_PYTHON();
    CompileOptions o;
    o.task = std::make_shared<const Task>(gelu_task());
    auto message = [&](const std::string& python) {
        o.python = python;
        try {
            compile_candidate(gelu_source(), o);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    std::string none = message("/nonexistent/python3");
    EXPECT_NE(none.find("cannot run Python (/nonexistent/python3)"), std::string::npos) << none;
    EXPECT_NE(none.find("KERNELEVO_PYTHON"), std::string::npos) << none;
    // A python3 without Triton (CI's): ModuleNotFoundError becomes an instruction.
    if (!python3_has_triton()) {
        std::string missing = message(python_with("no_such_dir"));
        EXPECT_NE(missing.find("Triton is not installed"), std::string::npos) << missing;
        EXPECT_NE(missing.find("pip install triton"), std::string::npos) << missing;
    }
    std::string old = message(python_with("old_triton"));
    EXPECT_NE(old.find("Triton 2.1.0"), std::string::npos) << old;
    EXPECT_NE(old.find("too old"), std::string::npos) << old;
    EXPECT_NE(old.find("--grid"), std::string::npos) << old;
}

// Triton's AOT compiler executes the candidate file: an LLM's Python. It runs in the compile
// sandbox: module-level code cannot write outside its work dir, cannot see the parent's secrets
// (environment, /proc of other processes, home directories), and a candidate that never finishes
// is stopped by the time limit (a compile_error naming it, not cached).
TEST(TritonSandbox, CandidateCodeRunsConfined) {
    REQUIRE_PYTHON();
    const SandboxLayers& layers = sandbox_layers();
    if (!layers.namespaces) GTEST_SKIP() << "bubblewrap cannot create namespaces here: " << layers.why_not;
    // Outside the work dir, in the build tree (a place the test process can write).
    TempDir outside_parent("kevo-triton-escape");
    const fs::path outside = fs::path(KEVO_BINARY_DIR) / "tests" / ("triton-escape-" + outside_parent.path().filename().string());
    fs::create_directories(outside);
    const std::string secret = "kevo-secret-" + outside_parent.path().filename().string();
    ::setenv("OPENROUTER_API_KEY", secret.c_str(), 1);
    ::setenv("KEVO_TEST_PARENT_ONLY", secret.c_str(), 1);
    std::string evil = gelu_source();
    evil = replaced(evil, "import triton\n", "import triton\nimport os, glob\n"
        "found = []\n"
        "for target in [" + std::string("'") + (outside / "pwned").string() + "', '" + (fs::path(KEVO_SOURCE_DIR) / "pwned").string() +
        "', os.path.expanduser('~root/pwned')]:\n"
        "    try:\n"
        "        open(target, 'w').write('x')\n"
        "        found.append('WROTE ' + target)\n"
        "    except OSError as e:\n"
        "        found.append('write refused ' + type(e).__name__)\n"
        // Verdicts, not dumps: a GPU host's environment is long enough to push a dump out of the
        // (tail-trimmed) log, and a leak must be seen wherever it is.
        "secret = '" + secret + "'\n"
        "found.append('env secret ' + ('LEAKED' if any(secret in v for v in os.environ.values()) else 'absent'))\n"
        "found.append('env parent-only ' + ('LEAKED' if 'KEVO_TEST_PARENT_ONLY' in os.environ else 'absent'))\n"
        "for f in ['/proc/%d/environ' % os.getppid(), '/proc/1/environ'] + glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        "        found.append(f + (' LEAKED' if secret in open(f, 'rb').read().decode('latin-1') else ' clean'))\n"
        "    except OSError as e:\n"
        "        found.append(f + ' refused')\n"
        "found.append('home ' + repr(os.path.isdir('/root') and os.listdir('/root')))\n"
        "raise SystemExit('FINDINGS ' + ' | '.join(found))\n");
    CompileOptions o;
    o.task = std::make_shared<const Task>(gelu_task());
    o.python = python_with("fake_triton");
    CompileResult r = compile_candidate(evil, o);
    ::unsetenv("OPENROUTER_API_KEY");
    ::unsetenv("KEVO_TEST_PARENT_ONLY");
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.log.find("FINDINGS"), std::string::npos) << "the candidate's module-level code ran: " << r.log;
    // A path outside what the sandbox shows does not exist there; a parent of a read-only mount
    // (the source tree above tests/data, /root above a pyenv Python) is a directory of the
    // sandbox's own throwaway root: a write there "succeeds" but never reaches this machine.
    EXPECT_NE(r.log.find("write refused"), std::string::npos) << r.log;
    EXPECT_FALSE(fs::exists(outside / "pwned"));
    EXPECT_FALSE(fs::exists(fs::path(KEVO_SOURCE_DIR) / "pwned")) << "the candidate wrote into the source tree";
    EXPECT_FALSE(fs::exists(fs::path("/root/pwned"))) << "the candidate wrote into a home directory";
    EXPECT_EQ(r.log.find("LEAKED"), std::string::npos) << "a secret of the parent reached the candidate: " << r.log;
    EXPECT_EQ(r.log.find("KEVO_TEST_PARENT_ONLY"), std::string::npos) << "the environment is an allowlist";
    fs::remove_all(outside);
}

TEST(TritonSandbox, ACandidateThatNeverFinishesHitsTheTimeLimitAndIsNotCached) {
    REQUIRE_PYTHON();
    std::string slow = replaced(gelu_source(), "import triton\n", "import triton\nwhile True:\n    pass\n");
    slow += "# " + std::to_string(::getpid()) + "\n";  // not served from an earlier run's cache
    CompileOptions o;
    o.task = std::make_shared<const Task>(gelu_task());
    o.python = python_with("fake_triton");
    o.timeout_s = 3;
    CompileResult r = compile_candidate(slow, o);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.limit_hit);
    EXPECT_NE(r.log.find("compile_error: the compilation hit the time limit (3 s)"), std::string::npos) << r.log;
    CompileResult again = compile_candidate(slow, o);
    EXPECT_FALSE(again.cached) << "a compile stopped by a limit is not a verdict";
    EXPECT_TRUE(again.limit_hit);
}

// A candidate that maps more than the AOT compile's address-space limit (16 GiB: the larger of
// CompileOptions::memory_bytes and Triton's own) is stopped by that limit, which the log names.
// The mapping is never touched, so without the limit it would simply succeed.
TEST(TritonSandbox, ACandidateOverTheMemoryLimitIsToldTheLimitAndIsNotCached) {
    REQUIRE_PYTHON();
    std::string big = replaced(gelu_source(), "import triton\n", "import triton\nimport mmap\nm = mmap.mmap(-1, 17 << 30)\n");
    big += "# " + std::to_string(::getpid()) + "\n";  // not served from an earlier run's cache
    CompileOptions o;
    o.task = std::make_shared<const Task>(gelu_task());
    o.python = python_with("fake_triton");
    CompileResult r = compile_candidate(big, o);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.limit_hit);
    EXPECT_NE(r.log.find("compile_error: the compiler hit the memory limit (16384 MiB of address space per process)"), std::string::npos)
        << r.log;
    EXPECT_NE(r.log.find("Cannot allocate memory"), std::string::npos) << r.log;
    CompileResult again = compile_candidate(big, o);
    EXPECT_FALSE(again.cached) << "a compile stopped by a limit is not a verdict";
    EXPECT_TRUE(again.limit_hit);
}

// The command line: `cache add` stores a Triton candidate as the generated .cu + the .py,
// `cache status` shows the backend and goes stale when the .py changes, and a missing Triton is a
// setup problem (exit 2) that says what to install.
TEST(TritonCli, CacheAddStatusAndSetupErrors) {
    REQUIRE_PYTHON();
    TempDir dir("kevo-triton-cli");
    const fs::path kernels = dir.path() / "kernels";
    const std::string task = (kData / "gelu_bias" / "task.json").string();
    auto kevo = [&](std::vector<std::string> args) {
        ProcessOptions po;
        po.argv = {KEVO_EXE};
        po.argv.insert(po.argv.end(), args.begin(), args.end());
        po.timeout_s = 300;
        return run_process(po);
    };
    ProcessResult add = kevo({"cache", "add", "--task", task, "--kernel", (kTriton / "gelu_bias.py").string(), "--arch", "sm_90",
                              "--cache-dir", kernels.string(), "--unvalidated", "--python", python_with("fake_triton")});
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_TRUE(fs::exists(kernels / "gelu_bias" / "sm_90.cu"));
    EXPECT_EQ(read_file(kernels / "gelu_bias" / "sm_90.py"), gelu_source());
    EXPECT_NE(read_file(kernels / "gelu_bias" / "sm_90.cu").find("kevo_forward"), std::string::npos);
    ProcessResult st = kevo({"cache", "status", "--cache-dir", kernels.string(), "--task", task});
    EXPECT_NE(st.out.find("BACKEND"), std::string::npos) << st.out;
    EXPECT_NE(st.out.find("triton 3.6.0+recorded"), std::string::npos) << st.out;
    ProcessResult js = kevo({"cache", "status", "--cache-dir", kernels.string(), "--task", task, "--json"});
    auto j = nlohmann::json::parse(js.out);
    EXPECT_EQ(j["entries"][0]["backend"], "triton") << js.out;
    {
        std::ofstream py(kernels / "gelu_bias" / "sm_90.py", std::ios::app);
        py << "# edited by hand\n";
    }
    st = kevo({"cache", "status", "--cache-dir", kernels.string(), "--task", task});
    EXPECT_EQ(st.exit_code, 1) << st.out;
    EXPECT_NE(st.out.find("stale"), std::string::npos) << st.out;
    EXPECT_NE(st.out.find("sm_90.py was edited"), std::string::npos) << st.out;

    if (!python3_has_triton()) {  // (a GPU host's python3 has the real one)
        ProcessResult none = kevo({"validate", "--task", task, "--kernel", (kTriton / "gelu_bias.py").string(), "--arch", "sm_90",
                                   "--python", python_with("no_such_dir")});
        EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
        EXPECT_NE(none.err.find("Triton is not installed"), std::string::npos) << none.err;
        EXPECT_NE(none.err.find("pip install triton"), std::string::npos) << none.err;
    }
    ProcessResult old = kevo({"cache", "add", "--task", task, "--kernel", (kTriton / "gelu_bias.py").string(), "--arch", "sm_90",
                              "--cache-dir", kernels.string(), "--unvalidated", "--python", python_with("old_triton")});
    EXPECT_EQ(old.exit_code, 2) << old.out << old.err;
    EXPECT_NE(old.err.find("too old"), std::string::npos) << old.err;
}

TEST(TritonCompile, KernelevoPythonSelectsTheInterpreter) {
    ::setenv("KERNELEVO_PYTHON", "/opt/py/bin/python3", 1);
    EXPECT_EQ(python_path(""), "/opt/py/bin/python3");
    EXPECT_EQ(python_path("/usr/bin/python3"), "/usr/bin/python3");
    ::unsetenv("KERNELEVO_PYTHON");
    EXPECT_EQ(python_path(""), "python3");
}

TEST(TritonCompile, PythonTracebacksKeepTheirEnd) {
    std::string log(10000, 'x');
    log += "\nNameError: name 'tl' is not defined\n";
    std::string t = trim_python_log(log, 200);
    EXPECT_LE(t.size(), 300u);
    EXPECT_NE(t.find("NameError: name 'tl' is not defined"), std::string::npos);
    EXPECT_NE(t.find("omitted"), std::string::npos);
}

// ---- cache entries ---------------------------------------------------------------------------------

TEST(TritonCache, EntryKeepsTheSourceAndGoesStaleWhenItChanges) {
    TempDir dir("kevo-triton-cache");
    const Task& t = gelu_task();
    cache::EntryMeta m;
    m.function = t.name;
    m.arch = "sm_90";
    m.task_hash = t.hash();
    m.reference_hash = t.reference_hash();
    m.facts = {{"triton_version", "3.6.0"}, {"launches", nlohmann::json::array()}};
    std::string py = gelu_source();
    cache::store(dir.path(), "// generated wrapper\n", m, &py);
    fs::path pyfile = cache::candidate_source_path(dir.path(), t.name, "sm_90", triton::language());
    EXPECT_EQ(read_file(pyfile), py);
    cache::Lookup l = cache::lookup(dir.path(), t.name, "sm_90", t.hash(), t.reference_hash());
    ASSERT_EQ(l.state, cache::State::valid) << l.reason;
    EXPECT_EQ(l.meta->backend, "triton");
    EXPECT_EQ(l.meta->facts["triton_version"], "3.6.0");
    EXPECT_EQ(l.meta->facts["source_file"], "sm_90.py");

    write_file_atomic(pyfile, py + "\n# tuned by hand\n");
    l = cache::lookup(dir.path(), t.name, "sm_90", t.hash(), t.reference_hash());
    EXPECT_EQ(l.state, cache::State::stale);
    EXPECT_NE(l.reason.find("sm_90.py was edited"), std::string::npos) << l.reason;
    fs::remove(pyfile);
    l = cache::lookup(dir.path(), t.name, "sm_90", t.hash(), t.reference_hash());
    EXPECT_EQ(l.state, cache::State::stale);
    EXPECT_NE(l.reason.find("is missing"), std::string::npos) << l.reason;

    // A CUDA kernel stored over it removes the old .py and is a plain entry again.
    cache::EntryMeta c = m;
    c.backend = "cuda";
    c.facts = nullptr;
    cache::store(dir.path(), "// cuda\n", c);
    EXPECT_FALSE(fs::exists(pyfile));
    l = cache::lookup(dir.path(), t.name, "sm_90", t.hash(), t.reference_hash());
    EXPECT_EQ(l.state, cache::State::valid) << l.reason;
    EXPECT_EQ(l.meta->backend, "cuda");
}
