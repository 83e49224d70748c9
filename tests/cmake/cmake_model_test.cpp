// kernelevo_optimize_model() and kernelevo_optimize(NAME TASK ...) through a real configure and build
// (tests/cmake/model_project): a two-Linear model exported by the real kernelevo.export_model becomes
// two functions of one library; the user's program calls them (each region's reference is its own
// TorchScript file, and the calls switch between them) and gets LibTorch's results; a kernel stored
// for a region is looked up and compiled in; misuse is one configure error; without the tool's task
// hashes every architecture runs the reference, with a warning that says why.
#include "cmake_project.h"

namespace kevo::cmake_test {

namespace {
// CMake wraps a configure error's text: compared with runs of whitespace as one space.
std::string squashed(const std::string& s) {
    std::string out;
    for (char c : s) {
        const bool space = c == ' ' || c == '\n' || c == '\t';
        if (space && !out.empty() && out.back() == ' ') continue;
        out += space ? ' ' : c;
    }
    return out;
}

class CMakeModel : public ::testing::Test {
protected:
    void SetUp() override {
        python = python_with_torch(torch_prefix);
        if (python.empty()) GTEST_SKIP() << "no python3 that imports torch (set KEVO_PYTHON): export_model makes the model folder";
        tmp = std::make_unique<TempDir>("kevo-cmake-model");
        src = tmp->path() / "src";
        build = tmp->path() / "build";
        model = tmp->path() / "tiny";
        fs::copy(kSource / "tests" / "cmake" / "model_project", src, fs::copy_options::recursive);
        const std::string script =
            "import sys, torch, torch.nn as nn\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "import kernelevo\n"
            "class Tiny(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.fc1 = nn.Linear(8, 16)\n"
            "        self.fc2 = nn.Linear(16, 4)\n"
            "    def forward(self, x):\n"
            "        return self.fc2(torch.relu(self.fc1(x)))\n"
            "torch.manual_seed(0)\n"
            "kernelevo.export_model(Tiny().eval(), (torch.randn(3, 8),), sys.argv[2], name='tiny', threshold=0.0, quiet=True)\n";
        Outcome r = run({python, "-c", script, (kSource / "python").string(), model.string()});
        ASSERT_EQ(r.rc, 0) << r.out;
        ASSERT_TRUE(fs::exists(model / "regions" / "tiny_fc1" / "task.json")) << r.out;
    }
    Outcome configure(std::vector<std::string> extra = {}) {
        std::vector<std::string> argv = configure_command(src, build);
        argv.insert(argv.end(), {"-DMODEL_DIR=" + model.string(), "-DKERNELEVO_EXECUTABLE=" KEVO_EXE});
        // LibTorch of the Python that exported the model (on a GPU host: PyTorch's pip package).
        if (!torch_prefix.empty()) argv.push_back("-DCMAKE_PREFIX_PATH=" + torch_prefix);
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run(argv);
    }
    std::string python, torch_prefix;
    std::unique_ptr<TempDir> tmp;
    fs::path src, build, model;
};
}  // namespace

TEST_F(CMakeModel, RegionsAreFunctionsOfOneLibraryThatRunTheirReferences) {
    // A repeat of fc1 (as export_model writes one: no task, same_as): no function of its own; the
    // header says which function it runs.
    nlohmann::json plan = nlohmann::json::parse(read_file(model / "plan.json"));
    nlohmann::json again = plan["regions"][0];
    again["name"] = "fc1_again";
    again["task_name"] = "tiny_fc1_again";
    again["status"] = "repeat";
    again["same_as"] = "fc1";
    again["task"] = nullptr;
    plan["regions"].push_back(again);
    write_file_atomic(model / "plan.json", plan.dump(2));
    Outcome r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: model tiny: 2 region function(s)")) << r.out;
    EXPECT_TRUE(contains(r.out, "test: functions tiny_fc1;tiny_fc2; regions fc1;fc2")) << r.out;
    // Nothing cached yet: each says so, with the search command on the region's own task file.
    EXPECT_TRUE(contains(r.out, "tiny_fc1 sm_90: missing -> reference")) << r.out;
    EXPECT_TRUE(contains(r.out, "search --task " + (model / "regions" / "tiny_fc1" / "task.json").string())) << r.out;
    const std::string header = read_file(build / "kernelevo" / "include" / "kernelevo" / "model_tiny.h");
    EXPECT_TRUE(contains(header, "#include \"kernelevo/tiny_fc1.h\"  // region fc1")) << header;
    EXPECT_TRUE(contains(header, "// region fc1_again: a repeat of region fc1: the same function, on its own inputs and weights"))
        << header;
    r = run({KEVO_CMAKE_COMMAND, "--build", build.string(), "--", "-j2"});
    ASSERT_EQ(r.rc, 0) << r.out;
    Outcome app = run({(build / "app").string()});
    EXPECT_EQ(app.rc, 0) << app.out;
    EXPECT_TRUE(contains(app.out, "tiny_fc1=reference tiny_fc2=reference")) << app.out;
}

TEST_F(CMakeModel, AStoredKernelIsCheckedWithTheToolsHashesAndCompiledIn) {
    ASSERT_EQ(configure().rc, 0);
    cache::store(model / "cache", scale_kernel(1), manual_entry(load_task(model / "regions" / "tiny_fc1" / "task.json"), "sm_90"));
    Outcome r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "tiny_fc1 sm_90: cached kernel")) << r.out;
    EXPECT_TRUE(contains(r.out, "tiny_fc2 sm_90: missing -> reference")) << r.out;
    r = run({KEVO_CMAKE_COMMAND, "--build", build.string(), "--", "-j2"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(read_file(build / "kernelevo" / "tiny_fc1" / "dispatch.cpp"), "kevo_tiny_fc1_sm90_forward"));
    // A task file edited after the kernel was stored: the entry is stale, by the tool's own hash.
    std::string task = read_file(model / "regions" / "tiny_fc1" / "task.json");
    const size_t at = task.find("0.0001", task.find("\"rtol\""));
    ASSERT_NE(at, std::string::npos) << task;
    task.replace(at, 6, "0.0002");
    write_file_atomic(model / "regions" / "tiny_fc1" / "task.json", task);
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "tiny_fc1 sm_90: stale")) << r.out;
}

// On a GPU host: tiny_fc1's kernel (tests/data/model_proof/linear_act_cublas.cu, cuBLAS + bias + ReLU),
// validated by `kernelevo cache add` into the model's cache, runs for CUDA tensors; tiny_fc2, with
// nothing cached, runs its reference; both agree with LibTorch.
TEST_F(CMakeModel, OnAGpuTheRegionsCachedKernelRunsAndTheOtherItsReference) {
    ProcessOptions probe;
    probe.argv = {python, "-c", "import torch,sys;sys.exit(0 if torch.cuda.is_available() else 1)"};
    probe.timeout_s = 120;
    if (!run_process(probe).ok()) GTEST_SKIP() << "no CUDA device for this PyTorch";
    Outcome add = run({KEVO_EXE, "cache", "add", "--task", (model / "regions" / "tiny_fc1" / "task.json").string(), "--kernel",
                       (kSource / "tests" / "data" / "model_proof" / "linear_act_cublas.cu").string(), "--arch", "sm_90",
                       "--cache-dir", (model / "cache").string()});
    ASSERT_EQ(add.rc, 0) << add.out;
    Outcome r = configure({"-DCMAKE_PREFIX_PATH=" + torch_prefix});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "tiny_fc1 sm_90: cached kernel")) << r.out;
    r = run({KEVO_CMAKE_COMMAND, "--build", build.string(), "--", "-j8"});
    ASSERT_EQ(r.rc, 0) << r.out;
    Outcome app = run({(build / "app").string(), "cuda"});
    EXPECT_EQ(app.rc, 0) << app.out;
    EXPECT_TRUE(contains(app.out, "tiny_fc1=sm_90 tiny_fc2=reference")) << app.out;
}

TEST_F(CMakeModel, MisuseIsOneConfigureErrorAndNoToolMeansTheReference) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"name", "TASK " + (model / "regions" / "tiny_fc1" / "task.json").string() + " is the task 'tiny_fc1'"},
        {"inputs", "INPUTS is the task file's with TASK"},
        {"dir", "plan.json does not exist (MODEL_DIR must be a model folder)"},
    };
    for (const auto& [misuse, message] : cases) {
        Outcome r = configure({"-DKEVO_TEST_MISUSE=" + misuse});
        EXPECT_NE(r.rc, 0) << misuse;
        EXPECT_TRUE(contains(squashed(r.out), message)) << misuse << ": " << r.out;
    }
    // A plan whose region names a task outside the model folder (a hostile or broken plan.json): refused.
    const std::string plan = read_file(model / "plan.json");
    std::string bad = plan;
    const std::string good_task = "\"regions/tiny_fc1\"";
    ASSERT_NE(bad.find(good_task), std::string::npos) << plan;
    bad.replace(bad.find(good_task), good_task.size(), "\"../tiny/regions/tiny_fc1\"");
    write_file_atomic(model / "plan.json", bad);
    Outcome escaped = configure({"-DKEVO_TEST_MISUSE="});
    EXPECT_NE(escaped.rc, 0);
    EXPECT_TRUE(contains(squashed(escaped.out), "region fc1: its task '../tiny/regions/tiny_fc1' is not a task folder inside"))
        << escaped.out;
    write_file_atomic(model / "plan.json", plan);
    // A kernelevo that cannot give the task's hashes: a warning naming why, every architecture the reference.
    const fs::path fake = tmp->path() / "fake-kernelevo";
    write_file_atomic(fake, "#!/bin/sh\necho 'kernelevo: broken on purpose' >&2\nexit 1\n");
    fs::permissions(fake, fs::perms::owner_all);
    Outcome r = configure({"-DKEVO_TEST_MISUSE=", "-DKERNELEVO_EXECUTABLE=" + fake.string()});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "cached kernels cannot be checked against")) << r.out;
    EXPECT_TRUE(contains(r.out, "kernelevo: broken on purpose")) << r.out;
    EXPECT_TRUE(contains(read_file(build / "kernelevo" / "tiny_fc1" / "lookup.json"), "\"unchecked\"")) << r.out;
}

}  // namespace kevo::cmake_test
