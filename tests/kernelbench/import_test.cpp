// `kernelevo import kernelbench` on the CPU: a dozen problems of different kinds import and pass
// their self-verification (the C++ TorchScript reference against the Python model), the tasks
// hold what KernelBench's model holds, and problems that cannot be imported are refused with a reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <unistd.h>

#include "kb_suite.h"
#include "reference/reference.h"
#include "task/task.h"

namespace kevo {
namespace {

using kbtest::cpu_import;

const nlohmann::json& result(const std::string& name) {
    static const nlohmann::json none;
    auto it = cpu_import().by_name.find(name);
    return it == cpu_import().by_name.end() ? none : it->second;
}

// Where the self-verification runs: the GPU when this kernelevo's LibTorch has CUDA, else the CPU.
std::string check_device() { return reference_support().cuda ? "cuda" : "cpu"; }

Task task_of(const std::string& name) { return load_task(cpu_import().out / name / "task.json"); }

const TensorSpec& input(const Task& t, const std::string& name) {
    for (const auto& i : t.inputs)
        if (i.name == name) return i;
    throw std::runtime_error("no input " + name + " in " + t.name);
}

// Shrunk (--max-numel 4096) so that it runs on a CPU machine; on a GPU host it verifies on the GPU.
TEST(KernelBenchImport, ADozenProblemsImportAndVerify) {
    const auto& imp = cpu_import();
    ASSERT_TRUE(imp.run.started) << imp.run.error;
    ASSERT_FALSE(imp.report.is_null()) << imp.run.describe() << "\n" << imp.run.err;
    EXPECT_EQ(imp.run.exit_code, 1) << "one problem crashed the importer: " << imp.run.err;
    EXPECT_EQ(imp.report["imported"], 12) << imp.run.err;
    EXPECT_EQ(imp.report["device"], check_device());
    for (const auto& f : kbtest::dozen()) {
        std::string stem = fs::path(f).stem().string();
        std::string name = "kb" + f.substr(5, 1) + "_" + stem;
        while (!name.empty() && name.back() == '_') name.pop_back();
        const auto& r = result(name);
        ASSERT_EQ(r.value("status", "missing"), "ok") << name << ": " << r.dump();
        const auto& v = r["verify"];
        EXPECT_TRUE(v.value("ok", false)) << name;
        EXPECT_EQ(v.value("device", ""), check_device()) << name;
        ASSERT_TRUE(v["max_abs_diff"].is_number()) << name;
        EXPECT_LE(v["max_abs_diff"].get<double>(), 1e-4) << name;
        // The progress line reports the difference.
        EXPECT_NE(imp.run.err.find(name + ": ok (C++ reference on the " + check_device() + " vs Python: max |diff| "),
                  std::string::npos)
            << name;
        // The task loads, and names the suite's one generic reference.
        Task t = load_task(r["task"].get<std::string>());
        EXPECT_EQ(t.reference_source, fs::absolute(imp.out / "kernelbench_reference.cpp").lexically_normal());
        EXPECT_EQ(t.reference_signature, "vector");
        EXPECT_EQ(t.reference_arg, fs::absolute(imp.out / name / "model.pt").lexically_normal());
        EXPECT_TRUE(fs::exists(imp.out / name / "problem.py"));
    }
}

TEST(KernelBenchImport, RefusesWithAOneLineReasonAndGoesOn) {
    const auto& imp = cpu_import();
    struct Case {
        const char* name;
        const char* reason;
    };
    for (const Case& c : {Case{"kb1_33_BatchNorm", "BatchNorm in training mode"},
                          Case{"kb2_66_Matmul_Dropout_Softmax", "Dropout (p=0.2) in training mode"},
                          Case{"kb1_901_DataDependentBranch", "data-dependent control flow at line 9"},
                          Case{"kb1_902_NotAProblem", "the file defines no Model"}}) {
        const auto& r = result(c.name);
        EXPECT_EQ(r.value("status", "missing"), "refused") << c.name << ": " << r.dump();
        std::string reason = r.value("reason", "");
        EXPECT_NE(reason.find(c.reason), std::string::npos) << c.name << ": " << reason;
        EXPECT_EQ(reason.find('\n'), std::string::npos) << "one line: " << reason;
        EXPECT_NE(imp.run.err.find(std::string(c.name) + ": refused: " + c.reason), std::string::npos) << imp.run.err;
        EXPECT_FALSE(fs::exists(imp.out / c.name)) << "no task folder for a refused problem";
    }
    EXPECT_EQ(imp.report["refused"], 4);
    EXPECT_EQ(imp.report["failed"], 1);
    EXPECT_NE(imp.run.err.find("imported 12/17 (4 refused, 1 failed)"), std::string::npos) << imp.run.err;
}

// A problem that kills the Python process fails alone; the rest of its batch goes on (a new process).
TEST(KernelBenchImport, AProblemThatCrashesTheImporterFailsAlone) {
    const auto& r = result("kb1_903_Crashes");
    EXPECT_EQ(r.value("status", "missing"), "failed") << r.dump();
    EXPECT_NE(r.value("reason", "").find("the importer stopped (killed by signal 11"), std::string::npos) << r.dump();
    EXPECT_EQ(r.value("reason", "").find('\n'), std::string::npos);
    EXPECT_EQ(r.value("reason", "").find("out-of-memory"), std::string::npos) << "a crash is not a kill: " << r.dump();
    EXPECT_GT(r.value("seconds", 0.0), 0.0) << "the time it ran, measured by the tool: " << r.dump();
    EXPECT_EQ(result("kb1_50_conv_standard_2D__square_input__square_kernel").value("status", ""), "ok");
}

// A problem whose Python is killed (SIGKILL, as the out-of-memory killer does; a model's weights
// alone can be gigabytes) fails with the likely cause and what to change, and the time it ran.
TEST(KernelBenchImport, AKilledImporterSaysItIsMostOftenOutOfMemory) {
    TempDir dir("kevo-kb-killed");
    fs::create_directories(dir.path() / "level1");
    write_file_atomic(dir.path() / "level1" / "904_Killed.py",
                      "import os, signal\nimport torch.nn as nn\nclass Model(nn.Module):\n    pass\n"
                      "def get_inputs():\n    os.kill(os.getpid(), signal.SIGKILL)\ndef get_init_inputs():\n    return []\n");
    const auto run = kbtest::kernelevo({"import", "kernelbench", (dir.path() / "level1" / "904_Killed.py").string(), "--out",
                                        (dir.path() / "suite").string(), "--jobs", "2"});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    const auto report = nlohmann::json::parse(read_file(dir.path() / "suite" / "import.json"));
    ASSERT_EQ(report["results"].size(), 1u) << report.dump();
    const auto& r = report["results"][0];
    EXPECT_EQ(r.value("status", ""), "failed");
    const std::string reason = r.value("reason", "");
    EXPECT_NE(reason.find("the importer stopped (killed by signal 9"), std::string::npos) << reason;
    EXPECT_NE(reason.find("most often the out-of-memory killer: this machine has "), std::string::npos) << reason;
    EXPECT_NE(reason.find("(--jobs 1: one at a time)"), std::string::npos) << reason;
    EXPECT_GT(r.value("seconds", 0.0), 0.0) << r.dump();
}

TEST(KernelBenchImport, WeightsBecomeFileInputsWithTheModelsValues) {
    Task conv = task_of("kb1_50_conv_standard_2D__square_input__square_kernel");
    ASSERT_GE(conv.inputs.size(), 3u);
    EXPECT_EQ(conv.inputs[0].name, "x");
    const TensorSpec& w = input(conv, "conv1_weight");
    EXPECT_EQ(w.init.kind, "file");
    EXPECT_EQ(w.shape.size(), 4u);
    EXPECT_EQ(input(conv, "conv1_bias").init.kind, "file");
    // nn.Parameters are marked so: the judge varies them after each set's first trial.
    EXPECT_TRUE(w.init.parameter);
    EXPECT_TRUE(input(conv, "conv1_bias").init.parameter);
    // The stored weight is nn.Conv2d's default init after torch.manual_seed(42): uniform in +-1/sqrt(fan_in).
    std::string bytes = read_file(w.init.file);
    ASSERT_EQ(bytes.size() % 4, 0u);
    std::vector<float> vals(bytes.size() / 4);
    std::memcpy(vals.data(), bytes.data(), bytes.size());
    int64_t fan_in = 1;
    for (size_t d = 1; d < w.shape.size(); ++d) fan_in *= conv.concrete_shape(w, 0)[d];
    float bound = 1.0f / std::sqrt(static_cast<float>(fan_in)), mx = 0;
    std::set<float> distinct;
    for (float v : vals) mx = std::max(mx, std::fabs(v)), distinct.insert(v);
    EXPECT_LE(mx, bound * 1.0001f);
    EXPECT_GT(mx, bound * 0.5f);
    EXPECT_GT(distinct.size(), vals.size() / 2) << "real random values, not a constant";

    Task ln = task_of("kb1_40_LayerNorm");
    EXPECT_EQ(input(ln, "ln_weight").init.kind, "file");
    EXPECT_EQ(input(ln, "ln_bias").init.kind, "file");
    EXPECT_TRUE(input(ln, "ln_weight").init.parameter) << "all ones at init: the judge perturbs them";
    Task gemm = task_of("kb2_12_Gemm_Multiply_LeakyReLU");
    EXPECT_EQ(input(gemm, "gemm_weight").init.kind, "file");
}

TEST(KernelBenchImport, RandomInputsKeepKernelBenchsDistribution) {
    Task relu = task_of("kb1_19_ReLU");  // torch.rand
    EXPECT_EQ(relu.inputs[0].init.kind, "rand");
    EXPECT_EQ(relu.inputs[0].init.a, 0);
    EXPECT_EQ(relu.inputs[0].init.b, 1);
    Task mm = task_of("kb1_1_Square_matrix_multiplication");  // torch.rand, two inputs
    ASSERT_EQ(mm.inputs.size(), 2u);
    EXPECT_EQ(mm.inputs[0].name, "A");
    EXPECT_EQ(mm.inputs[1].name, "B");
    EXPECT_EQ(mm.inputs[1].init.kind, "rand");
    Task ce = task_of("kb1_95_CrossEntropyLoss");  // torch.randint(0, num_classes, ...)
    ASSERT_EQ(ce.inputs.size(), 2u);
    EXPECT_EQ(ce.inputs[1].dtype, DType::INT64);
    EXPECT_EQ(ce.inputs[1].init.kind, "randint");
    EXPECT_EQ(ce.inputs[1].init.a, 0);
    EXPECT_EQ(ce.inputs[1].init.b, ce.concrete_shape(ce.inputs[0], 0)[1]) << "high = num_classes";
    EXPECT_EQ(ce.outputs[0].shape.size(), 0u) << "a loss is a 0-dim output";
    Task hinge = task_of("kb1_100_HingeLoss");  // targets = randint(0, 2).float() * 2 - 1: computed
    EXPECT_EQ(hinge.inputs[0].init.kind, "rand");
    EXPECT_EQ(hinge.inputs[1].init.kind, "file");
    EXPECT_FALSE(hinge.inputs[1].init.parameter) << "an input stored as a file keeps its values (+-1 targets)";
}

TEST(KernelBenchImport, RepeatedSizesGetNames) {
    Task mm = task_of("kb1_1_Square_matrix_multiplication");
    // N x N times N x N: one name, bound in the shape set.
    ASSERT_EQ(mm.inputs[0].shape.size(), 2u);
    EXPECT_EQ(mm.inputs[0].shape[0].symbol, "N");
    EXPECT_EQ(mm.inputs[1].shape[1].symbol, "N");
    EXPECT_EQ(mm.outputs[0].shape[0].symbol, "N");
    ASSERT_EQ(mm.shapes.size(), 1u);
    EXPECT_GT(mm.shapes[0].at("N"), 1);
    Task gemm = task_of("kb2_12_Gemm_Multiply_LeakyReLU");
    EXPECT_FALSE(gemm.inputs[0].shape[0].symbol.empty()) << "batch size shared by x and the output";
}

// One generic reference for the whole suite: every imported task's reference build is the same
// cached library (its wrapper does not depend on the task).
TEST(KernelBenchImport, OneReferenceBuildServesEveryTask) {
    const auto& imp = cpu_import();
    std::string lib = imp.report.value("reference_library", "");
    ASSERT_FALSE(lib.empty());
    Task a = task_of("kb1_19_ReLU"), b = task_of("kb2_12_Gemm_Multiply_LeakyReLU");
    EXPECT_EQ(reference_wrapper_source(a), reference_wrapper_source(b));
    EXPECT_EQ(reference_wrapper_source(a).find("kb1_19_ReLU"), std::string::npos);
    EXPECT_NE(reference_wrapper_source(a).find("kevo_ref_setup"), std::string::npos);
    ReferenceBuild rb = build_reference(b);
    ASSERT_TRUE(rb.ok) << rb.log;
    EXPECT_TRUE(rb.cached);
    EXPECT_EQ(rb.library.string(), lib);
    // Different models, so different reference hashes (a stale cache entry is noticed).
    EXPECT_NE(a.reference_hash(), b.reference_hash());
}

TEST(KernelBenchImport, BadUsageIsExitTwoWithAClearMessage) {
    auto r = kbtest::kernelevo({"import", "kernelbench", "/nonexistent/problem.py", "--out", "/tmp/kevo-kb-never"}, 120);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("/nonexistent/problem.py: no such problem file or folder"), std::string::npos) << r.err;
    r = kbtest::kernelevo({"import", "kernelbench", (kbtest::problems() / "level1" / "19_ReLU.py").string(), "--out",
                           "/tmp/kevo-kb-never", "--python", "/nonexistent/python3"}, 120);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--python /nonexistent/python3: cannot import torch there"), std::string::npos) << r.err;
    r = kbtest::kernelevo({"import", "kernelbench", (kbtest::problems() / "level1" / "19_ReLU.py").string()}, 120);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE((r.out + r.err).find("--out"), std::string::npos);
}


// ---- what the importer writes for the model to see (issue 27: 1-4, 6), its Python run directly ----

struct DirectImport {
    fs::path out;
    ProcessResult run;
    std::map<std::string, nlohmann::json> by_name;
};

// The importer's Python on small fixtures (no C++ driver, no C++ check): a conv whose batch size
// equals its height, width and output channels; an integer output; a matmul shrunk by --max-numel.
const DirectImport& direct_import() {
    static const DirectImport d = [] {
        DirectImport d;
        d.out = fs::path(KEVO_BINARY_DIR) / "test-cache" / ("kernelbench-direct-" + std::to_string(::getpid()));
        std::error_code ec;
        fs::remove_all(d.out, ec);
        fs::create_directories(d.out);
        static fs::path remove_at_exit = d.out;  // one folder per test process: gone when it ends
        std::atexit([] {
            std::error_code e;
            fs::remove_all(remove_at_exit, e);
        });
        std::string python = "/usr/bin/python3";
        for (const char* cand : {"python3", "/usr/bin/python3"}) {
            ProcessOptions probe;
            probe.argv = {cand, "-c", "import torch"};
            probe.timeout_s = 120;
            if (run_process(probe).ok()) {
                python = cand;
                break;
            }
        }
        const fs::path kb = fs::path(KEVO_SOURCE_DIR) / "tool" / "kernelbench";
        ProcessOptions po;
        po.argv = {python, (kb / "import_kernelbench.py").string(), "--out", d.out.string(), "--reference-source",
                   (kb / "jit_reference.cpp").string(), "--max-numel", "65536",
                   (kbtest::problems() / "fixtures" / "conv_batch_equals_height.py").string(),
                   (kbtest::problems() / "fixtures" / "argmax_int_output.py").string(),
                   (kbtest::problems() / "level1" / "1_Square_matrix_multiplication_.py").string(),
                   (kbtest::problems() / "level2" / "12_Gemm_Multiply_LeakyReLU.py").string(),
                   (kbtest::problems() / "level1" / "24_LogSoftmax.py").string(),
                   (kbtest::problems() / "fixtures" / "wide_linear_weight.py").string()};
        po.timeout_s = 600;
        d.run = run_process(po);
        std::istringstream lines(d.run.out);
        for (std::string line; std::getline(lines, line);) {
            try {
                auto j = nlohmann::json::parse(line);
                if (j.contains("name")) d.by_name[j["name"].get<std::string>()] = j;
            } catch (const std::exception&) {
            }
        }
        return d;
    }();
    return d;
}

nlohmann::json direct_task(const std::string& name) {
    const auto& r = direct_import().by_name;
    auto it = r.find(name);
    if (it == r.end() || it->second.value("status", "") != "ok")
        throw std::runtime_error(name + " did not import: " + (it == r.end() ? direct_import().run.err : it->second.dump()));
    return nlohmann::json::parse(read_file(direct_import().out / name / "task.json"));
}

std::vector<std::string> shape_names(const nlohmann::json& spec) {
    std::vector<std::string> v;
    for (const auto& d : spec["shape"]) v.push_back(d.is_string() ? d.get<std::string>() : std::to_string(d.get<int64_t>()));
    return v;
}

TEST(KernelBenchImportModel, GraphPyShowsTheComputationWithTheTasksInputNames) {
    auto t = direct_task("kb_conv_batch_equals_height");
    const fs::path dir = direct_import().out / "kb_conv_batch_equals_height";
    ASSERT_TRUE(fs::exists(dir / "graph.py"));
    std::string g = read_file(dir / "graph.py");
    // The arguments in task order (inputs, then parameters), named as the task names them.
    ASSERT_EQ(t["inputs"].size(), 3u);
    std::string sig = "def forward(self,";
    for (const auto& i : t["inputs"]) sig += "\n    " + i["name"].get<std::string>() + ": Tensor,";
    sig.pop_back();
    EXPECT_NE(g.find(sig), std::string::npos) << g;
    EXPECT_NE(g.find("#   x: float32[batch_size, in_channels, height, width]  (input)"), std::string::npos) << g;
    EXPECT_NE(g.find("#   conv_weight: float32[out_channels, in_channels, kernel_size, kernel_size]"), std::string::npos) << g;
    EXPECT_NE(g.find("#   out: float32[batch_size, out_channels, 7, 7]"), std::string::npos) << g;
    EXPECT_NE(g.find("torch._convolution(x, conv_weight, conv_bias"), std::string::npos) << g;
    EXPECT_NE(g.find("0.375"), std::string::npos) << "the subtracted constant is visible: " << g;
    EXPECT_EQ(g.find("CONSTANTS.c0)"), std::string::npos) << g;
    // The task says what to show the model.
    const auto& show = t["reference"]["show"];
    ASSERT_EQ(show.size(), 2u);
    EXPECT_EQ(show[0]["file"], "problem.py");
    EXPECT_EQ(show[1]["file"], "graph.py");
    EXPECT_EQ(show[1]["language"], "python");
    EXPECT_FALSE(show[1].value("title", "").empty());
    EXPECT_TRUE(fs::exists(dir / "problem.py"));
}

TEST(KernelBenchImportModel, EqualSizesOfDifferentRolesKeepTheirOwnNames) {
    auto t = direct_task("kb_conv_batch_equals_height");
    EXPECT_EQ(shape_names(t["inputs"][0]), (std::vector<std::string>{"batch_size", "in_channels", "height", "width"}));
    EXPECT_EQ(shape_names(t["inputs"][1]),
              (std::vector<std::string>{"out_channels", "in_channels", "kernel_size", "kernel_size"}));
    EXPECT_EQ(shape_names(t["outputs"][0]), (std::vector<std::string>{"batch_size", "out_channels", "7", "7"}));
    const auto& sizes = t["shapes"][0];
    for (const char* n : {"batch_size", "height", "width", "out_channels"}) EXPECT_EQ(sizes.value(n, 0), 16) << n;
    EXPECT_EQ(sizes.value("in_channels", 0), 3);
    // Shrunk by --max-numel, the square matmul keeps its one size name; the GEMM its three.
    auto mm = direct_task("kb1_1_Square_matrix_multiplication");
    EXPECT_EQ(shape_names(mm["inputs"][0]), (std::vector<std::string>{"N", "N"}));
    auto gemm = direct_task("kb2_12_Gemm_Multiply_LeakyReLU");
    EXPECT_EQ(shape_names(gemm["inputs"][1]), (std::vector<std::string>{"out_features", "in_features"}));
    EXPECT_EQ(shape_names(gemm["outputs"][0]), (std::vector<std::string>{"batch_size", "out_features"}));
}

// Issue 40: --max-numel shrinks the batch first (down to 2) and keeps the row a softmax reduces over
// as long as it can; before, batch_size (matched as a structural "_size") stayed at 4096 and the
// row of 393216 went down to 12.
TEST(KernelBenchImportModel, MaxNumelShrinksTheBatchBeforeTheReducedRow) {
    auto t = direct_task("kb1_24_LogSoftmax");
    const auto& shrunk = direct_import().by_name.at("kb1_24_LogSoftmax")["shrunk"];
    EXPECT_EQ(shrunk, (nlohmann::json{{"batch_size", 2}, {"dim", 24576}})) << shrunk.dump();
    const auto& sizes = t["shapes"][0];
    EXPECT_EQ(sizes.value("batch_size", 0), 2) << sizes.dump();
    EXPECT_EQ(sizes.value("dim", 0), 24576) << sizes.dump();
}

// Issue 51: --max-numel bounds the weights too. Before, only the inputs counted: the batch went to 16
// and the 4096 x 4096 weight stayed (KernelBench's 56_Matmul_Sigmoid_Sum wrote a 4.1 GB weight file).
// Now the features the weight shares with the input are halved too, until both hold at most the limit.
TEST(KernelBenchImportModel, MaxNumelBoundsTheWeightsWithTheInputs) {
    auto t = direct_task("kb_wide_linear_weight");
    const auto& r = direct_import().by_name.at("kb_wide_linear_weight");
    EXPECT_EQ(r["shrunk"], (nlohmann::json{{"batch_size", 2}, {"in_features", 128}, {"out_features", 128}}))
        << r["shrunk"].dump();
    const auto& numel = r["shrunk_numel"];
    ASSERT_TRUE(numel.is_object()) << r.dump();
    EXPECT_EQ(numel.value("inputs", 0), 2 * 128);
    EXPECT_EQ(numel.value("parameters", 0), 128 * 128 + 128);
    EXPECT_EQ(numel.value("limit", 0), 65536);
    const auto& sizes = t["shapes"][0];
    EXPECT_EQ(sizes.value("in_features", 0), 128) << sizes.dump();
    EXPECT_EQ(sizes.value("out_features", 0), 128) << sizes.dump();
}

TEST(KernelBenchImportModel, ToleranceComesFromTheModelsOwnErrorAgainstFp64) {
    for (const char* name : {"kb_conv_batch_equals_height", "kb1_1_Square_matrix_multiplication"}) {
        auto t = direct_task(name);
        const auto& tol = t["tolerance"];
        ASSERT_TRUE(tol["atol"].is_number()) << name << tol.dump();
        double atol = tol["atol"].get<double>();
        EXPECT_GE(atol, 1e-4) << name;
        EXPECT_LE(atol, 1e-2) << name << ": never looser than KernelBench's 1e-2";
        EXPECT_EQ(tol["rtol"].get<double>(), atol);
        EXPECT_NE(tol.value("policy", "").find("fp64"), std::string::npos) << tol.dump();
        const auto& v = direct_import().by_name.at(name)["verify"];
        ASSERT_TRUE(v["fp64_allclose_t"].is_number()) << v.dump();
        EXPECT_LT(v["fp64_allclose_t"].get<double>(), 1e-4) << "strict fp32 is within 1e-4 of fp64 here";
    }
    auto argmax = direct_task("kb_argmax_int_output");
    EXPECT_FALSE(argmax["tolerance"].contains("atol")) << "integer outputs compare exactly";
    EXPECT_NE(argmax["tolerance"].value("policy", "").find("exactly"), std::string::npos);
}

TEST(KernelBenchImportModel, FlopsOfConvolutionsAndMatmuls) {
    // Conv at Winograd's limit (tool/sol/sol.h: the fewest FLOPs of the known algorithms, so that the
    // compute floor is a lower bound for Winograd and FFT kernels): 2 * output elements * in_channels
    // = 2 * (16*16*14*14) * 3, the direct count 2 * (16*16*14*14) * 3 * 9 over the 3x3 window.
    EXPECT_EQ(direct_task("kb_conv_batch_equals_height").value("flops", ""), std::to_string(2LL * 16 * 16 * 14 * 14 * 3));
    auto mm = direct_task("kb1_1_Square_matrix_multiplication");
    int64_t n = mm["shapes"][0]["N"].get<int64_t>();
    EXPECT_EQ(mm.value("flops", ""), std::to_string(2 * n * n * n));
    auto gemm = direct_task("kb2_12_Gemm_Multiply_LeakyReLU");
    const auto& s = gemm["shapes"][0];
    EXPECT_EQ(gemm.value("flops", ""), std::to_string(2 * s["batch_size"].get<int64_t>() * s["in_features"].get<int64_t>() *
                                                       s["out_features"].get<int64_t>()));
    EXPECT_FALSE(direct_task("kb_argmax_int_output").contains("flops"));
    const auto& by_kind = direct_import().by_name.at("kb_conv_batch_equals_height")["flops"]["by_kind"];
    EXPECT_EQ(by_kind.value("conv", 0LL), 2LL * 16 * 16 * 14 * 14 * 3);
}

TEST(KernelBenchImportModel, OneProgressLinePerPhase) {
    const auto& out = direct_import().run.out;
    for (const char* phase : {"load", "build", "inputs", "eager", "trace", "check", "fp64", "write"}) {
        std::string line = std::string("{\"progress\": {\"name\": \"kb_conv_batch_equals_height\", \"phase\": \"") + phase +
                           "\", \"seconds\": ";
        EXPECT_NE(out.find(line), std::string::npos) << phase << "\n" << out;
    }
    EXPECT_TRUE(direct_import().by_name.at("kb_conv_batch_equals_height")["phases"].contains("fp64"));
}

}  // namespace
}  // namespace kevo
