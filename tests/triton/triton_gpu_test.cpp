// The Triton backend for real: Triton's AOT compiler, the validator on the GPU, the cache. Skips
// (with the reason) where there is no CUDA device or no Triton; runs on the H200 host, where
// benchmarks/studies/triton_check.sh runs it (Python with Triton: $KERNELEVO_PYTHON, else python3).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cache/cache.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "llm/llm.h"
#include "store/store.h"
#include "task/task.h"
#include "triton/launch.h"
#include "triton/triton_compile.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR);
const fs::path kTriton = kData / "triton";

struct Setup {
    std::unique_ptr<Validator> gelu, softmax;
    std::string skip;  // why these tests cannot run here
};

Setup& setup() {
    static Setup* s = [] {
        auto* s = new Setup;
        auto make = [](const fs::path& task_file) {
            Task t = load_task(task_file);
            ValidateOptions o;
            o.timeout_s = 30;
            o.timing_trials = 30;
            o.warmup = 3;
            o.compile.task = std::make_shared<const Task>(t);
            return std::make_unique<Validator>(t, o);
        };
        s->gelu = make(kData / "gelu_bias" / "task.json");
        s->softmax = make(kTriton / "row_softmax_task.json");
        if (!s->gelu->device().present) {
            s->skip = "no CUDA device: " + s->gelu->device().error;
        } else {
            try {
                triton::TritonInfo info = triton::probe("");
                std::printf("[ triton   ] %s: Triton %s (--target %s)\n", info.python.c_str(), info.version.c_str(),
                            info.has_target ? "yes" : "no");
            } catch (const UsageError& e) {
                s->skip = std::string("no usable Triton: ") + e.what();
            }
        }
        return s;
    }();
    return *s;
}

#define REQUIRE_GPU_AND_TRITON() \
    if (!setup().skip.empty()) GTEST_SKIP() << setup().skip

ValidationResult validate(Validator& v, const fs::path& file) { return v.validate(read_file(file)); }

struct Case {
    const char* file;
    Status expected;
    const char* log_contains;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.file << " -> " << status_name(c.expected); }
class TritonCheats : public ::testing::TestWithParam<Case> {};
}  // namespace

TEST(TritonGpu, GeluCompiledAheadOfTimeIsCorrectAndTimed) {
    REQUIRE_GPU_AND_TRITON();
    CompileResult c = setup().gelu->compile(read_file(kTriton / "gelu_bias.py"));
    ASSERT_TRUE(c.ok) << c.log;
    EXPECT_EQ(c.backend, "triton");
    ValidationResult r = setup().gelu->run(c);
    ASSERT_EQ(r.status, Status::ok) << r.log;
    EXPECT_GE(r.trials, 5);
    EXPECT_GT(r.speedup, 0.5) << "a plain Triton GELU should not be much slower than LibTorch";
    std::printf("[ triton   ] gelu_bias: %.2f us vs reference %.2f us: %.2fx\n", r.kernel_us, r.reference_us, r.speedup);
}

TEST(TritonGpu, RowSoftmaxCompiledAheadOfTimeIsCorrect) {
    REQUIRE_GPU_AND_TRITON();
    ValidationResult r = validate(*setup().softmax, kTriton / "row_softmax.py");
    ASSERT_EQ(r.status, Status::ok) << r.log;
    std::printf("[ triton   ] row_softmax: %.2f us vs reference %.2f us: %.2fx\n", r.kernel_us, r.reference_us, r.speedup);
}

TEST_P(TritonCheats, AreCaught) {
    REQUIRE_GPU_AND_TRITON();
    const Case& c = GetParam();
    ValidationResult r = validate(*setup().gelu, kTriton / "cheats" / c.file);
    EXPECT_EQ(status_name(r.status), std::string(status_name(c.expected))) << c.file << ":\n" << r.log;
    EXPECT_NE(r.log.find(c.log_contains), std::string::npos) << c.file << ":\n" << r.log;
    ValidationResult good = validate(*setup().gelu, kTriton / "gelu_bias.py");
    EXPECT_EQ(good.status, Status::ok) << "after " << c.file << ": " << good.log;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TritonCheats,
                         ::testing::Values(Case{"no_store.py", Status::mismatch, ""},
                                           Case{"first_block_only.py", Status::mismatch, ""},
                                           Case{"writes_input.py", Status::rejected, ""},
                                           Case{"triton_error.py", Status::compile_error, "exp2x"},
                                           Case{"bad_launch.py", Status::compile_error, "gives no value to the parameter \"N\""}));

// Performance target: the AOT compile of a small candidate (Triton + the wrapper's nvcc) takes a
// median of at most 8 s. Each round is a fresh candidate (a distinct comment), so nothing is cached.
TEST(TritonGpu, AotCompileOfASmallCandidateTakesAtMost8s) {
    REQUIRE_GPU_AND_TRITON();
    std::vector<double> total, aot;
    const std::string base = read_file(kTriton / "gelu_bias.py");
    for (int i = 0; i < 3; ++i) {
        std::string src = base + "\n# round " + std::to_string(i) + " " +
                          std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "\n";
        CompileResult c = setup().gelu->compile(src);
        ASSERT_TRUE(c.ok) << c.log;
        ASSERT_FALSE(c.cached);
        total.push_back(c.seconds);
        aot.push_back(c.backend_info.value("aot_s", 0.0));
    }
    std::sort(total.begin(), total.end());
    std::sort(aot.begin(), aot.end());
    std::printf("[ triton   ] AOT compile (2 specializations in parallel + nvcc): median %.2f s (Triton alone %.2f s), max %.2f s\n",
                total[1], aot[1], total[2]);
    EXPECT_LE(total[1], 8.0);
}

TEST(TritonGpu, CacheAddStoresTheGeneratedWrapperAndTheSource) {
    REQUIRE_GPU_AND_TRITON();
    TempDir dir("kevo-triton-gpu-cache");
    const Task& t = setup().gelu->task();
    std::string py = read_file(kTriton / "gelu_bias.py");
    CompileResult c = setup().gelu->compile(py);
    ASSERT_TRUE(c.ok) << c.log;
    ValidationResult r = setup().gelu->run(c);
    ASSERT_TRUE(r.ok()) << r.log;
    cache::EntryMeta m;
    m.function = t.name;
    m.arch = r.arch;
    m.task_hash = t.hash();
    m.reference_hash = t.reference_hash();
    m.facts = c.backend_info;
    m.speedup = r.speedup;
    cache::store(dir.path(), c.generated_source, m, &py);
    cache::Lookup l = cache::lookup(dir.path(), t.name, r.arch, t.hash(), t.reference_hash());
    ASSERT_EQ(l.state, cache::State::valid) << l.reason;
    // The stored .cu is an ordinary kernel-ABI kernel now: it validates as CUDA, no Triton involved.
    CompileOptions plain;
    ValidationResult again = setup().gelu->validate(read_file(l.source));
    EXPECT_EQ(again.status, Status::ok) << again.log;
}

// A replayed `kernelevo search --backend both`: island 0 writes Triton (the seed and a variant),
// island 1 translates the seed into a (deliberately slow, one-block) CUDA kernel. The archive keeps
// both backends, and the best, a Triton kernel, lands in the cache as the generated .cu + the .py.
TEST(TritonGpu, ReplayedSearchWithBothBackendsKeepsATritonKernel) {
    REQUIRE_GPU_AND_TRITON();
    TempDir dir("kevo-triton-search");
    const std::string seed = read_file(kTriton / "gelu_bias.py");
    std::string variant = seed;
    variant.replace(variant.find("\"num_warps\": 4"), 14, "\"num_warps\": 8");
    const std::string slow_cuda = R"CU(#include "kernelevo/abi.h"
#include <cuda_runtime.h>
__global__ void gelu_one_block(const float* x, const float* b, float* y, long long n, long long cols) {
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        float v = x[i] + b[i % cols];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {
    long long n = kevo_numel(&in[0]);
    gelu_one_block<<<1, 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n, in[1].sizes[0]);
    return cudaGetLastError() != cudaSuccess;
}
)CU";
    {
        llm::Transcript t(dir.path() / "transcript.jsonl");
        std::vector<std::pair<std::string, std::string>> replies = {{"python", seed}, {"python", variant}, {"cuda", slow_cuda}};
        for (size_t i = 0; i < replies.size(); ++i) {
            llm::ChatRequest req;
            req.model = "replay-model";
            req.messages = {{"user", "request " + std::to_string(i)}};
            llm::ChatResponse resp;
            resp.content = "Here it is.\n\n```" + replies[i].first + "\n" + replies[i].second + "```\n";
            resp.finish_reason = "stop";
            resp.model = "replay-model";
            t.record(req, &resp, nullptr, 0.1);
        }
    }
    fs::path out = dir.path() / "kernels", state = dir.path() / "state.db";
    ProcessOptions po;
    po.argv = {KEVO_EXE, "search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out", out.string(), "--state",
               state.string(), "--replay", (dir.path() / "transcript.jsonl").string(), "--llm-replay-in-order", "--backend", "both",
               "--islands", "2", "--children", "1", "--jobs", "1", "--generations", "1", "--mode", "full", "--timing-trials", "20",
               // Serial and deterministic: no profiler run, no tuning, generation by generation.
               "--schedule", "generations", "--no-profile", "--tune-evals", "0"};
    po.timeout_s = 540;
    ProcessResult r = run_process(po);
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    auto store = store::open_store(state.string());
    int triton_ok = 0, cuda_ok = 0;
    for (const auto& p : store->programs()) {
        if (!p.ok()) continue;
        (triton::is_triton_source(p.source) ? triton_ok : cuda_ok)++;
    }
    EXPECT_GE(triton_ok, 2) << r.err;
    EXPECT_GE(cuda_ok, 1) << r.err;
    const std::string arch = setup().gelu->arch();
    auto meta = nlohmann::json::parse(read_file(out / "gelu_bias" / (arch + ".json")));
    EXPECT_EQ(meta.value("backend", ""), "triton") << meta.dump(2);
    EXPECT_TRUE(fs::exists(out / "gelu_bias" / (arch + ".py")));
    cache::Lookup l = cache::lookup(out, "gelu_bias", arch, setup().gelu->task().hash(), setup().gelu->task().reference_hash());
    EXPECT_EQ(l.state, cache::State::valid) << l.reason;
}

// The user's path end to end with Triton kernels: the example project (examples/fused_ops, a copy
// with an empty cache) is configured, `kernelevo cache add` validates the Triton GELU and row
// softmax against its tasks and stores them (the generated .cu + the .py), `cache status` shows the
// backend, and the rebuilt program dispatches to both kernels and matches the references.
TEST(TritonGpu, ExampleProjectBuildsAndDispatchesTheTritonKernels) {
    REQUIRE_GPU_AND_TRITON();
    TempDir dir("kevo-triton-example");
    const fs::path src = dir.path() / "fused_ops", build = dir.path() / "build", kernels = src / "kernels";
    fs::copy(fs::path(KEVO_SOURCE_DIR) / "examples" / "fused_ops", src, fs::copy_options::recursive);
    fs::remove_all(kernels);
    fs::create_directories(kernels);
    auto run = [](std::vector<std::string> argv, double timeout_s = 600) {
        ProcessOptions po;
        po.argv = std::move(argv);
        po.timeout_s = timeout_s;
        return run_process(po);
    };
    std::vector<std::string> configure = {KEVO_CMAKE_COMMAND, "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                                          "-DCMAKE_MAKE_PROGRAM=" KEVO_MAKE_PROGRAM, "-DCMAKE_CUDA_COMPILER=" KEVO_CUDA_COMPILER,
                                          "-DCMAKE_BUILD_TYPE=Release", "-DKernelEvo_DIR=" KEVO_BINARY_DIR};
    if (std::string(KEVO_TORCH_DIR).size()) configure.push_back("-DTorch_DIR=" KEVO_TORCH_DIR);
    ProcessResult r = run(configure);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string arch = setup().gelu->arch();
    for (const char* fn : {"gelu_bias", "row_softmax"}) {
        r = run({KEVO_EXE, "cache", "add", "--task", (build / "kernelevo" / fn / "task.json").string(), "--kernel",
                 (kTriton / (std::string(fn) + ".py")).string(), "--arch", arch, "--cache-dir", kernels.string()});
        ASSERT_EQ(r.exit_code, 0) << fn << ": " << r.out << r.err;
        EXPECT_TRUE(fs::exists(kernels / fn / (arch + ".py"))) << fn;
    }
    r = run({KEVO_EXE, "cache", "status", "--cache-dir", kernels.string(), "--build-dir", build.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("triton"), std::string::npos) << r.out;
    r = run(configure);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("KernelEvo: gelu_bias " + arch + ": cached kernel"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("KernelEvo: row_softmax " + arch + ": cached kernel"), std::string::npos) << r.out;
    r = run({KEVO_CMAKE_COMMAND, "--build", build.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    r = run({(build / "fused_ops").string()}, 300);
    std::printf("%s\n", r.out.c_str());
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // 0: every result matched its reference
    EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(" reference  "), std::string::npos) << "a call fell back to the reference:\n" << r.out;
    EXPECT_NE(r.out.find("gelu_bias    4096x4096   ran the evolved " + arch), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("row_softmax  4096x4096   ran the evolved " + arch), std::string::npos) << r.out;
}
