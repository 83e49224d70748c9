// tool/model/jobs.h: real child processes (/bin/sh), their output files, a Ctrl-C passed on, and
// what a region's search outcome means for the model's summary.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/fs.h"
#include "model/jobs.h"

using namespace kevo;
using nlohmann::json;

namespace {

model::Job sh(const std::string& script, const fs::path& dir, const std::string& name) {
    return {{"/bin/sh", "-c", script}, dir / (name + ".out"), dir / (name + ".log")};
}

TEST(ModelJobs, RunsEveryJobWithItsOutputAndLogFiles) {
    TempDir dir;
    write_file_atomic(dir.path() / "b.log", "earlier run\n");
    std::vector<model::Job> jobs = {sh("echo '{\"x\": 1}'; echo progress >&2", dir.path(), "a"),
                                    sh("echo again >&2; exit 3", dir.path(), "b"),
                                    {{"/nonexistent/kernelevo"}, dir.path() / "c.out", dir.path() / "c.log"}};
    std::atomic<int> interrupts{0};
    std::vector<size_t> started, ended;
    model::JobEvents ev;
    ev.started = [&](size_t i) { started.push_back(i); };
    ev.ended = [&](size_t i, const model::JobResult&) { ended.push_back(i); };
    auto r = model::run_jobs(jobs, 2, interrupts, ev);
    ASSERT_EQ(r.size(), 3u);
    for (const auto& x : r) ASSERT_TRUE(x.has_value());
    EXPECT_EQ(started, (std::vector<size_t>{0, 1, 2}));
    EXPECT_EQ(ended.size(), 3u);
    EXPECT_EQ(r[0]->exit_code, 0);
    EXPECT_EQ(read_file(dir.path() / "a.out"), "{\"x\": 1}\n");
    EXPECT_EQ(read_file(dir.path() / "a.log"), "progress\n");
    EXPECT_EQ(r[1]->exit_code, 3);
    EXPECT_EQ(read_file(dir.path() / "b.log"), "earlier run\nagain\n");  // a log continues
    EXPECT_EQ(r[2]->exit_code, 127);  // exec failed, said in its log
    EXPECT_NE(read_file(dir.path() / "c.log").find("cannot start"), std::string::npos);
    EXPECT_FALSE(r[0]->interrupted);
}

TEST(ModelJobs, ACtrlCIsPassedOnAndNoFurtherJobStarts) {
    TempDir dir;
    const fs::path ready = dir.path() / "ready";
    // The child exits 7 on SIGINT (as a search stops cleanly on its first Ctrl-C).
    std::vector<model::Job> jobs = {
        sh("trap 'echo stopping >&2; exit 7' INT; touch '" + ready.string() + "'; while :; do sleep 0.05; done", dir.path(), "a"),
        sh("echo never", dir.path(), "b")};
    std::atomic<int> interrupts{0};
    std::thread ctrl_c([&] {
        while (!fs::exists(ready)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        interrupts = 1;
    });
    auto r = model::run_jobs(jobs, 1, interrupts, {});
    ctrl_c.join();
    ASSERT_TRUE(r[0].has_value());
    EXPECT_EQ(r[0]->exit_code, 7);
    EXPECT_TRUE(r[0]->interrupted);
    EXPECT_EQ(read_file(dir.path() / "a.log"), "stopping\n");
    EXPECT_FALSE(r[1].has_value());  // never started
    EXPECT_FALSE(fs::exists(dir.path() / "b.out"));
}

TEST(ModelJobs, RegionStatusFromTheSearchOutcome) {
    model::JobResult ok;
    ok.started = true;
    ok.exit_code = 0;
    EXPECT_EQ(model::region_status(ok, {{"stop_reason", "generations"}}), model::RunStatus::done);
    model::JobResult no_kernel = ok;
    no_kernel.exit_code = 1;  // ran its whole time without a correct kernel: done all the same
    EXPECT_EQ(model::region_status(no_kernel, {{"stop_reason", "time"}}), model::RunStatus::done);
    EXPECT_EQ(model::region_status(no_kernel, {{"stop_reason", "interrupted"}}), model::RunStatus::stopped);
    model::JobResult batch = ok;
    batch.exit_code = 3;
    EXPECT_EQ(model::region_status(batch, {{"stop_reason", "batch"}}), model::RunStatus::stopped);
    model::JobResult setup = ok;
    setup.exit_code = 2;
    EXPECT_EQ(model::region_status(setup, nullptr), model::RunStatus::failed);
    EXPECT_EQ(model::region_status(setup, {{"stop_reason", "error: no GPU to validate on"}}), model::RunStatus::failed);
    model::JobResult killed = ok;
    killed.exit_code = -1;
    killed.signal = 9;
    EXPECT_EQ(model::region_status(killed, nullptr), model::RunStatus::failed);
    killed.interrupted = true;
    EXPECT_EQ(model::region_status(killed, nullptr), model::RunStatus::stopped);
    EXPECT_EQ(model::region_status(model::JobResult{}, nullptr), model::RunStatus::failed);  // never started
}

}  // namespace
