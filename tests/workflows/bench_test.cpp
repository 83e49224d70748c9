// run_bench() called directly (not through the kernelevo binary): a real suite of two tasks copied
// from tests/data, a real report folder, the real validator (here without a GPU; on the GPU host
// the kernel is judged).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/fs.h"
#include "task/task.h"
#include "validate/validate.h"
#include "workflows/bench.h"

namespace fs = std::filesystem;
using namespace kevo;

namespace {

class BenchUseCase : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::make_unique<TempDir>("kevo-workflows-bench");
        const fs::path data = KEVO_TEST_DATA_DIR;
        suite = dir->path() / "suite";
        fs::create_directories(suite / "gelu_bias");
        fs::create_directories(suite / "kb_relu");
        fs::create_directories(dir->path() / "kernels");
        for (const char* f : {"task.json", "gelu_bias_ref.cpp"}) fs::copy_file(data / "gelu_bias" / f, suite / "gelu_bias" / f);
        for (const char* f : {"task.json", "relu_ref.cpp"}) fs::copy_file(data / "kb_relu" / f, suite / "kb_relu" / f);
        fs::copy_file(data / "gelu_bias" / "kernels" / "good.cu", dir->path() / "kernels" / "gelu_bias.cu");
        req.suite = suite.string();
        req.out = (dir->path() / "report").string();
        req.search.no_baselines = true;  // PyTorch is not what this test is about
        req.progress = [this](const std::string& line) { lines.push_back(line); };
    }
    bool has_gpu() const { return Validator(load_task(suite / "gelu_bias" / "task.json"), ValidateOptions{}).device().present; }
    bool said(const std::string& text) const {
        for (const auto& l : lines)
            if (l.find(text) != std::string::npos) return true;
        return false;
    }

    std::unique_ptr<TempDir> dir;
    fs::path suite;
    workflows::BenchRequest req;
    std::vector<std::string> lines;
};

TEST_F(BenchUseCase, ASearchWithoutAGpuIsRefusedWithTheDevicesReasonBeforeAnyTaskRuns) {
    if (has_gpu()) GTEST_SKIP() << "a GPU is here: the search would run (and ask an LLM)";
    req.search.llm.models = {"no-such-model"};
    const workflows::BenchOutcome o = workflows::run_bench(req);
    EXPECT_EQ(o.refused, workflows::BenchRefusal::no_gpu);
    EXPECT_EQ(o.rc, 2);
    EXPECT_FALSE(o.device_error.empty());
    EXPECT_NE(o.why.find(o.device_error), std::string::npos) << o.why;
    EXPECT_EQ(o.why.find("--"), std::string::npos) << "the use case names no option: " << o.why;
    EXPECT_TRUE(o.results.empty());
    EXPECT_TRUE(lines.empty());
    EXPECT_FALSE(fs::exists(fs::path(req.out) / "bench.json"));  // nothing ran, nothing to resume
}

TEST_F(BenchUseCase, ReadyKernelsAreJudgedResumedAndAnotherModeIsRefused) {
    req.kernels = (dir->path() / "kernels").string();
    workflows::BenchOutcome o = workflows::run_bench(req);
    ASSERT_EQ(o.refused, workflows::BenchRefusal::none) << o.why;
    EXPECT_EQ(o.mode, "kernels");
    ASSERT_EQ(o.results.size(), 2u);
    EXPECT_EQ(o.results[0].name, "gelu_bias");
    EXPECT_EQ(o.results[1].name, "kb_relu");
    EXPECT_EQ(o.results[1].status, "missing");  // no kernel for it in the folder
    EXPECT_TRUE(o.results[1].done);
    EXPECT_EQ(o.results[0].torch.not_run.at("eager"), "--no-baselines");
    if (!has_gpu()) {
        EXPECT_EQ(o.results[0].status, "no_device");
        EXPECT_FALSE(o.results[0].done);  // run again where there is a GPU
        EXPECT_EQ(o.summary.not_run, 1);
    }
    EXPECT_EQ(o.rc, 0);
    EXPECT_TRUE(said("[2/2] kb_relu: no kernel")) << lines.size();  // (issue 51 item 4d: not "run")
    for (const char* f : {"bench.json", "report.md", "report.json", "report.html"})
        EXPECT_TRUE(fs::is_regular_file(fs::path(req.out) / f)) << f;

    // The same request again resumes: the finished task is kept, not judged again.
    lines.clear();
    o = workflows::run_bench(req);
    ASSERT_EQ(o.refused, workflows::BenchRefusal::none) << o.why;
    EXPECT_TRUE(said("resuming the bench in")) << (lines.empty() ? "" : lines[0]);
    EXPECT_TRUE(said("[2/2] kb_relu: done earlier (no kernel)"));

    // A search into the folder of a bench of ready kernels: refused, saying what the folder holds.
    workflows::BenchRequest search = req;
    search.kernels.clear();
    o = workflows::run_bench(search);
    EXPECT_EQ(o.refused, workflows::BenchRefusal::other_bench);
    EXPECT_EQ(o.held_mode, "kernels");
    EXPECT_EQ(o.held_suite, fs::absolute(suite).lexically_normal().string());
    EXPECT_EQ(o.rc, 2);
    EXPECT_EQ(o.why.find("--"), std::string::npos) << o.why;

    // An unreadable state is refused as such; a fresh start discards it.
    write_file_atomic(fs::path(req.out) / "bench.json", "garbage");
    o = workflows::run_bench(req);
    EXPECT_EQ(o.refused, workflows::BenchRefusal::unreadable_state);
    EXPECT_EQ(o.state_file, fs::path(req.out) / "bench.json");
    // Issue 50's attacks: JSON of another form is no state either (it was an internal error), and a
    // FIFO in its place is one error, never a hang.
    for (const char* form : {"[[[]]]", "{\"suite\": 5}", "{\"results\": 7}", "{\"results\": {\"a\": 7}}"}) {
        write_file_atomic(fs::path(req.out) / "bench.json", form);
        o = workflows::run_bench(req);
        EXPECT_EQ(o.refused, workflows::BenchRefusal::unreadable_state) << form;
    }
    fs::remove(fs::path(req.out) / "bench.json");
    ASSERT_EQ(mkfifo((fs::path(req.out) / "bench.json").c_str(), 0600), 0);
    EXPECT_THROW(workflows::run_bench(req), std::exception);
    fs::remove(fs::path(req.out) / "bench.json");
    req.fresh = true;
    lines.clear();
    o = workflows::run_bench(req);
    EXPECT_EQ(o.refused, workflows::BenchRefusal::none) << o.why;
    EXPECT_FALSE(said("resuming"));
    EXPECT_EQ(o.results.size(), 2u);
}

TEST_F(BenchUseCase, AModelFolderWithoutATaskRegionHasNothingToBench) {
    const fs::path model = dir->path() / "model";
    fs::create_directories(model);
    write_file_atomic(model / "plan.json", R"({"format": "kernelevo-model-plan/1", "model": "m", "regions": []})");
    try {
        workflows::model_suite(model.string());
        FAIL() << "a model folder without task regions was accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("nothing to bench"), std::string::npos) << e.what();
    }
}

}  // namespace
