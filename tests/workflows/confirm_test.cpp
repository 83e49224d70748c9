// confirm_and_cache(): the best is judged again through the Evaluator seam (whatever measures it:
// the local validator, the workers' queue) and enters a real cache folder only when the two agree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/fs.h"
#include "cache/cache.h"
#include "task/task.h"
#include "workflows/confirm.h"

namespace fs = std::filesystem;
using namespace kevo;

namespace {

// An evaluator whose runs are scripted (as a queue of workers answers: run() only, the seam's own
// confirm()); it counts what the use case asked of it.
class ScriptedEvaluator : public Evaluator {
public:
    bool present = true;
    Evaluation second;  // what run() answers
    int compiles = 0, runs = 0;
    DeviceInfo device() override {
        DeviceInfo d;
        d.present = present;
        return d;
    }
    std::string arch() override { return "sm_90"; }
    CompileResult compile(const std::string& source) override {
        ++compiles;
        CompileResult c;
        c.ok = source.find("does_not_compile") == std::string::npos;
        if (!c.ok) c.log = "error: expected ';'";
        return c;
    }
    Evaluation run(const CompileResult&) override {
        ++runs;
        return second;
    }
};

Evaluation ok_run(double speedup) {
    Evaluation e;
    e.status = Status::ok;
    e.speedup = speedup;
    e.details = {{"status", "ok"}, {"speedup", speedup}, {"kernel_us", 10.0}, {"reference_us", 10.0 * speedup}};
    return e;
}

class ConfirmAndCache : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::make_unique<TempDir>("kevo-workflows-test");
        write_file_atomic(dir->path() / "ref.cpp", "at::Tensor scale(const at::Tensor& x) { return x * 2; }\n");
        write_file_atomic(dir->path() / "task.json", R"({"name": "scale", "reference": {"source": "ref.cpp", "function": "scale"},
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["N"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["N"]}], "shapes": [{"N": 1000}]})");
        task = load_task(dir->path() / "task.json");
        best.id = 7;
        best.source = "extern \"C\" int kevo_scale() { return 0; }\n";
        best.status = store::ProgramStatus::ok;
        best.speedup = 2.0;
        best.details = ok_run(2.0).details;
        req.out = dir->path() / "kernels";
        req.arch = "sm_90";
        req.model = "m";
    }
    fs::path source() const { return cache::source_path(req.out, "scale", "sm_90"); }
    nlohmann::json metadata() const { return nlohmann::json::parse(read_file(cache::metadata_path(req.out, "scale", "sm_90"))); }

    std::unique_ptr<TempDir> dir;
    Task task;
    store::Program best;
    workflows::CacheRequest req;
    ScriptedEvaluator ev;
};

}  // namespace

TEST_F(ConfirmAndCache, ASecondJudgementThatAgreesWritesTheEntry) {
    ev.second = ok_run(2.1);
    workflows::CacheOutcome out = workflows::confirm_and_cache(ev, task, best, req);
    EXPECT_TRUE(out.written);
    EXPECT_TRUE(out.confirmed);
    EXPECT_EQ(ev.runs, 1);  // judged again through the seam (the queue's run(): a worker)
    EXPECT_EQ(out.source, source());
    EXPECT_EQ(read_file(source()), best.source);
    EXPECT_DOUBLE_EQ(metadata().value("speedup", 0.0), 2.0);
    EXPECT_EQ(metadata().value("origin", ""), "search");
}

TEST_F(ConfirmAndCache, SpeedupsApartWriteNothing) {
    ev.second = ok_run(1.2);
    workflows::CacheOutcome out = workflows::confirm_and_cache(ev, task, best, req);
    EXPECT_FALSE(out.written);
    EXPECT_NE(out.refused.find("measured 1.200x, the first 2.000x"), std::string::npos) << out.refused;
    EXPECT_FALSE(fs::exists(source()));
}

TEST_F(ConfirmAndCache, ASecondJudgementThatFailsWritesNothing) {
    ev.second.status = Status::mismatch;
    ev.second.feedback = "y[3]: 1.5 != 2";
    workflows::CacheOutcome out = workflows::confirm_and_cache(ev, task, best, req);
    EXPECT_FALSE(out.written);
    EXPECT_EQ(out.refused, "the second validation did not pass: mismatch: y[3]: 1.5 != 2");
    EXPECT_FALSE(fs::exists(source()));
}

TEST_F(ConfirmAndCache, ABestThatNoLongerCompilesIsNotWritten) {
    best.source = "does_not_compile";
    workflows::CacheOutcome out = workflows::confirm_and_cache(ev, task, best, req);
    EXPECT_FALSE(out.written);
    EXPECT_EQ(ev.runs, 0);
    EXPECT_NE(out.refused.find("expected ';'"), std::string::npos) << out.refused;
    EXPECT_FALSE(fs::exists(source()));
}

// No device to judge it on (a batch round without a GPU): written as the search judged it.
TEST_F(ConfirmAndCache, WithoutADeviceItIsWrittenUnconfirmed) {
    ev.present = false;
    workflows::CacheOutcome out = workflows::confirm_and_cache(ev, task, best, req);
    EXPECT_TRUE(out.written);
    EXPECT_FALSE(out.confirmed);
    EXPECT_EQ(ev.runs, 0);
    EXPECT_FALSE(out.not_confirmed.empty());
    EXPECT_TRUE(fs::exists(source()));
}

// The second judgement gave no verdict (the queue's wait gave up): not the kernel's fault.
TEST_F(ConfirmAndCache, NoVerdictIsWrittenUnconfirmed) {
    ev.second.status = Status::no_device;
    ev.second.feedback = "no live GPU worker for sm_90";
    workflows::CacheOutcome out = workflows::confirm_and_cache(ev, task, best, req);
    EXPECT_TRUE(out.written);
    EXPECT_FALSE(out.confirmed);
    EXPECT_NE(out.not_confirmed.find("no live GPU worker"), std::string::npos) << out.not_confirmed;
}
