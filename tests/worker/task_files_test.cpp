// Imported tasks travel to remote workers (issue 36, item 5): the files a task names beside itself
// (reference.arg, e.g. an imported KernelBench task's model.pt, and inputs read from files, e.g. its
// weights) are published with it by content hash, and a worker writes them beside its own copy of the
// task, checked (sha256, size, a path that stays inside the task's folder). Against a real
// redis-server; the worker's side is the real ValidatorHandler in a cache folder of its own, so the
// task it loads has nothing of the search's folder to fall back on.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "../store/redis_server.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "task/task.h"
#include "worker/queue.h"
#include "worker/worker.h"

namespace kevo::worker {
namespace {

void write(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

class TaskFiles : public ::testing::Test {
protected:
    void SetUp() override {
        if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(server.start()) << server.error();
        url = server.url("taskfiles");
        // The search's task: a reference with a setup file and a weight read from a file.
        const fs::path t = search.path() / "suite" / "kb_task";
        fs::create_directories(t);
        fs::copy_file(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "gelu_bias_ref.cpp", t.parent_path() / "ref.cpp",
                      fs::copy_options::overwrite_existing);
        model = std::string(3000, '\0');
        for (size_t i = 0; i < model.size(); ++i) model[i] = static_cast<char>(i * 13 + 1);
        write(t / "model.pt", model);
        weights = std::string(64 * 4, '\x3f');
        write(t / "weights" / "bias.bin", weights);
        write(t / "task.json", R"({"name": "kb_task",
  "reference": {"source": "../ref.cpp", "function": "gelu_bias", "setup": "kevo_setup", "arg": "model.pt"},
  "inputs": [{"name": "x", "dtype": "float32", "shape": ["M", 64]},
             {"name": "bias", "dtype": "float32", "shape": [64], "init": {"kind": "file", "path": "weights/bias.bin"}}],
  "outputs": [{"name": "y", "dtype": "float32", "shape": ["M", 64]}],
  "shapes": [{"M": 8}]})");
        task = std::make_unique<Task>(load_task(t / "task.json"));
        // The worker's cache: another folder (a worker on another host has none of the above).
        ::setenv("KERNELEVO_CACHE_HOME", (worker_home.path() / "cache").c_str(), 1);
    }
    void TearDown() override { ::unsetenv("KERNELEVO_CACHE_HOME"); }

    // Has a compile-only ValidatorHandler take a job of an unknown kind for the task: it installs
    // and loads the task first (throwing what that threw), then refuses the kind.
    std::string worker_loads(Queue& q) {
        WorkerOptions o;
        o.compile_only = true;
        o.archs = {"sm_90"};
        ValidatorHandler h(o);
        Claimed c;
        c.id = "job";
        c.spec = JobSpec{"probe", "sm_90", task->hash(), task->reference_hash(), "", ""};
        try {
            h.handle(c, q, [](const std::string&) {});
        } catch (const std::exception& e) {
            return e.what();
        }
        return "no error";
    }
    fs::path worker_task_dir() { return worker_home.path() / "cache" / "worker" / "tasks" / task->hash().substr(0, 32); }

    kevo::testing::RedisServer server;
    std::string url, model, weights;
    TempDir search, worker_home;
    std::unique_ptr<Task> task;
};

TEST_F(TaskFiles, AWorkerElsewhereGetsTheModelAndWeightsBesideTheTask) {
    Queue q(url);
    q.publish_task(*task);
    nlohmann::json files = q.task_files(task->hash());
    ASSERT_EQ(files.size(), 2u) << files.dump();
    EXPECT_EQ(files[0]["path"], "model.pt");
    EXPECT_EQ(files[0]["sha256"], sha256_hex(model));
    EXPECT_EQ(files[1]["path"], "weights/bias.bin");
    EXPECT_EQ(files[1]["bytes"], weights.size());

    // The task loaded (its files found), then the job's kind refused: the loading succeeded.
    EXPECT_NE(worker_loads(q).find("unknown job kind"), std::string::npos);
    EXPECT_EQ(slurp(worker_task_dir() / "model.pt"), model);
    EXPECT_EQ(slurp(worker_task_dir() / "weights" / "bias.bin"), weights);
    // The worker's copy is the same task: the same reference hash (model.pt's content is in it).
    Task copy = load_task(worker_task_dir() / "task.json");
    EXPECT_EQ(copy.reference_hash(), task->reference_hash());
    EXPECT_EQ(copy.hash(), task->hash());
}

TEST_F(TaskFiles, ATamperedFileIsRefusedAndNotWritten) {
    Queue q(url);
    q.publish_task(*task);
    ASSERT_TRUE(server.call({"SET", q.key_prefix() + "obj:" + sha256_hex(model), "not the model"}));
    std::string err = worker_loads(q);
    EXPECT_NE(err.find("does not match its sha256"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(worker_task_dir() / "model.pt"));
}

TEST_F(TaskFiles, APathOutsideTheTasksFolderIsRefused) {
    Queue q(url);
    q.publish_task(*task);
    nlohmann::json files = nlohmann::json::array({{{"path", "../../escape.pt"}, {"sha256", sha256_hex(model)}, {"bytes", model.size()}}});
    ASSERT_TRUE(server.call({"HSET", q.key_prefix() + "task:" + task->hash(), "files", files.dump()}));
    std::string err = worker_loads(q);
    EXPECT_NE(err.find("outside its folder"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(worker_home.path() / "cache" / "worker" / "escape.pt"));
}

TEST_F(TaskFiles, AFileWhosePublishedSizeDiffersIsRefused) {
    Queue q(url);
    q.publish_task(*task);
    nlohmann::json files = nlohmann::json::array({{{"path", "model.pt"}, {"sha256", sha256_hex(model)}, {"bytes", 12}}});
    ASSERT_TRUE(server.call({"HSET", q.key_prefix() + "task:" + task->hash(), "files", files.dump()}));
    std::string err = worker_loads(q);
    EXPECT_NE(err.find("published size"), std::string::npos) << err;
}

}  // namespace
}  // namespace kevo::worker
