// `kernelevo serve`: the JSON API over a real SQLite run and a real Redis queue with worker
// processes, the token rule, the embedded page, and the page in a real headless browser
// (Debian's chromium): it loads, shows the run and its workers, keeps updating, and a screenshot
// is written to BUILD/serve-page.png.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "../store/redis_server.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "evolve/search.h"
#include "scripted.h"
#include "serve/serve.h"
#include "serve_support.h"
#include "store/store.h"
#include "worker/queue.h"

namespace kevo::serve {
namespace {

class Child {
public:
    explicit Child(const std::vector<std::string>& args) {
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            std::vector<char*> argv;
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            int null = ::open("/dev/null", O_WRONLY);
            ::dup2(null, 2);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~Child() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }

private:
    pid_t pid_ = -1;
};

using test_support::search;

nlohmann::json get_json(int port, const std::string& path, int* status = nullptr) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get(path.c_str());
    if (!r) throw std::runtime_error("no reply for " + path);
    if (status) *status = r->status;
    return nlohmann::json::parse(r->body);
}

TEST(LineDiff, MarksAddedAndRemovedLines) {
    EXPECT_EQ(line_diff("a\nb\nc\n", "a\nB\nc\nd\n"), "  a\n- b\n+ B\n  c\n+ d\n");
    EXPECT_EQ(line_diff("", "x\n"), "+ x\n");
    EXPECT_EQ(line_diff("same\n", "same\n"), "  same\n");
}

TEST(Serve, OtherAddressesNeedAToken) {
    ServeOptions o;
    o.listen = "0.0.0.0:0";
    o.scan_cache = false;
    try {
        Server s(o);
        FAIL() << "listening on 0.0.0.0 without a token was accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("KERNELEVO_SERVE_TOKEN"), std::string::npos) << e.what();
    }
    o.listen = "127.0.0.1";
    EXPECT_THROW(Server{o}, UsageError);
    o.listen = "0.0.0.0:0";
    o.token = "0123456789abcdef-token";
    Server s(o);
    int port = s.start();
    int status = 0;
    get_json(port, "/api/overview", &status);
    EXPECT_EQ(status, 401);
    get_json(port, "/api/overview?token=wrong", &status);
    EXPECT_EQ(status, 401);
    get_json(port, "/api/overview?token=0123456789abcdef-token", &status);
    EXPECT_EQ(status, 200);
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/api/overview", {{"Authorization", "Bearer 0123456789abcdef-token"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    r = c.Get("/");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);  // the page too
}

TEST(ServeCli, RefusesAnOpenAddressWithoutATokenAndAMalformedOne) {
    ProcessOptions o;
    o.argv = {KEVO_EXE, "serve", "--listen", "0.0.0.0:0"};
    o.timeout_s = 30;
    ProcessResult r = run_process(o);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("KERNELEVO_SERVE_TOKEN"), std::string::npos) << r.err;
    o.argv = {KEVO_EXE, "serve", "--listen", "localhost"};
    r = run_process(o);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("expected HOST:PORT"), std::string::npos) << r.err;
}

// A candidate the judge could not place (GPU memory taken by others) is counted as not judged, not
// as a failed kernel; so is one stored as a failure marked outside_kernel (states from before).
TEST(ServeOverview, CountsNotJudgedCandidatesApartFromFailures) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    search(state, 1);
    ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.states = {state.string()};
    o.scan_cache = false;
    const nlohmann::json before = Server(o).overview()["runs"][0];
    {
        auto store = store::open_store(state.string());
        store::Program p;
        p.key = "extra.not_judged";
        p.source = "// not judged";
        p.norm_hash = "nj1";
        p.status = store::ProgramStatus::not_judged;
        store->put_program(p);
        p.key = "extra.outside_kernel";
        p.norm_hash = "nj2";
        p.status = store::ProgramStatus::runtime_error;
        p.details = {{"outside_kernel", true}};
        store->put_program(p);
    }
    const nlohmann::json after = Server(o).overview()["runs"][0];
    EXPECT_EQ(after.value("failed", -1), before.value("failed", -1)) << after.dump(2);
    EXPECT_EQ(after.value("not_judged", -1), before.value("not_judged", 0) + 2) << after.dump(2);
}

class ServeRun : public ::testing::Test {
protected:
    void SetUp() override {
        if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(redis.start()) << redis.error();
        url = redis.url("serve");
        state = dir.path() / "gelu.db";
        search(state, 2);
        for (const char* name : {"page-gpu0", "page-cpu1"}) {
            std::vector<std::string> a{KEVO_WORKER_DRIVER, "--redis", url, "--name", name};
            if (std::string(name).find("cpu") != std::string::npos) a.push_back("--compile-only");
            workers.push_back(std::make_unique<Child>(a));
        }
        worker::Queue q(url);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (q.workers().size() < 2 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        // A few finished jobs for the queue's table.
        for (int i = 0; i < 3; ++i) q.submit({"compile", "sm_90", "t", "r", "kernel " + std::to_string(i), ""}, "page");
        for (int got = 0; got < 3 && std::chrono::steady_clock::now() < deadline;) got += q.wait_replies("page", 0.5).size();
        ServeOptions o;
        o.listen = "127.0.0.1:0";
        o.queue_url = url;
        o.states = {state.string()};
        o.scan_cache = false;
        server = std::make_unique<Server>(o);
        port = server->start();
    }
    kevo::testing::RedisServer redis;
    std::string url;
    TempDir dir;
    fs::path state;
    std::vector<std::unique_ptr<Child>> workers;
    std::unique_ptr<Server> server;
    int port = 0;
};

TEST_F(ServeRun, TheApiShowsRunsQueueWorkersAndCandidates) {
    nlohmann::json o = get_json(port, "/api/overview");
    ASSERT_EQ(o["runs"].size(), 1u) << o.dump(2);
    const auto& run = o["runs"][0];
    EXPECT_EQ(run["task"], "gelu_bias");
    EXPECT_EQ(run["arch"], "sm_90");
    EXPECT_EQ(run["generation"], 2);
    EXPECT_GT(run["best_speedup"].get<double>(), 1.0);
    EXPECT_GT(run["tokens"].get<int64_t>(), 0);
    EXPECT_FALSE(run["timeline"].empty());
    EXPECT_EQ(run["history"].size(), 3u);
    ASSERT_EQ(o["workers"].size(), 2u);
    EXPECT_EQ(o["workers"][0]["name"], "page-cpu1");
    EXPECT_EQ(o["workers"][1]["device"]["name"], "Scripted GPU");
    EXPECT_EQ(o["queue"]["stats"]["done"], 3);
    EXPECT_EQ(o["queue"]["recent"].size(), 3u);

    std::string id = run["id"];
    nlohmann::json programs = get_json(port, "/api/runs/" + id + "/programs");
    ASSERT_FALSE(programs.empty());
    int64_t child = 0;
    for (const auto& p : programs)
        if (p["parent_id"].get<int64_t>() > 0) child = p["id"];
    ASSERT_GT(child, 0);
    nlohmann::json p = get_json(port, "/api/runs/" + id + "/programs/" + std::to_string(child));
    EXPECT_NE(p["source"].get<std::string>().find("kevo_forward"), std::string::npos);
    EXPECT_NE(p["diff"].get<std::string>().find("\n+ "), std::string::npos) << p["diff"];
    EXPECT_TRUE(p.contains("log"));
    int status = 0;
    get_json(port, "/api/runs/" + id + "/programs/999999", &status);
    EXPECT_EQ(status, 404);
    get_json(port, "/api/runs/abcdef/programs", &status);
    EXPECT_EQ(status, 404);

    httplib::Client c("127.0.0.1", port);
    auto page = c.Get("/");
    ASSERT_TRUE(page);
    EXPECT_NE(page->body.find("<title>KernelEvo</title>"), std::string::npos);
    auto js = c.Get("/vendor/uplot/uPlot.iife.min.js");
    ASSERT_TRUE(js);
    EXPECT_EQ(js->body, read_file(fs::path(KEVO_SOURCE_DIR) / "tool/serve/web/vendor/uplot/uPlot.iife.min.js"));
    EXPECT_EQ(c.Get("/nothing.js")->status, 404);
}

std::string chromium_binary() {
    for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
        if (::access(p, X_OK) == 0) return p;
    return {};
}

ProcessResult chromium(const fs::path& profile, std::vector<std::string> args) {
    ProcessOptions o;
    o.argv = {chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--user-data-dir=" + profile.string()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = 120;
    o.max_file_bytes = 64L << 20;
    return run_process(o);
}

TEST_F(ServeRun, ThePageInAHeadlessBrowserShowsTheRunAndItsWorkersAndUpdates) {
    if (chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    std::string page = "http://127.0.0.1:" + std::to_string(port) + "/";
    TempDir profile;
    ProcessResult r = chromium(profile.path(), {"--virtual-time-budget=8000", "--dump-dom", page});
    ASSERT_TRUE(r.ok()) << r.describe() << r.err;
    const std::string& dom = r.out;
    EXPECT_NE(dom.find("gelu_bias"), std::string::npos) << dom.substr(0, 3000);
    EXPECT_NE(dom.find("page-gpu0"), std::string::npos);
    EXPECT_NE(dom.find("page-cpu1"), std::string::npos);
    EXPECT_NE(dom.find("Scripted GPU"), std::string::npos);
    EXPECT_NE(dom.find("uplot"), std::string::npos) << "the chart was not drawn";
    std::smatch m;
    ASSERT_TRUE(std::regex_search(dom, m, std::regex("data-refreshes=\"([0-9]+)\""))) << dom.substr(0, 2000);
    EXPECT_GE(std::stoi(m[1]), 2) << "the page did not poll again";
    EXPECT_NE(dom.find("<td>2 / 2</td>"), std::string::npos);  // generation 2 of 2

    // The run goes on: the page shows it.
    search(state, 4);
    r = chromium(profile.path(), {"--virtual-time-budget=5000", "--dump-dom", page});
    ASSERT_TRUE(r.ok()) << r.err;
    EXPECT_NE(r.out.find("<td>4 / 4</td>"), std::string::npos) << r.out.substr(0, 3000);

    fs::path shot = fs::path(KEVO_BINARY_DIR) / "serve-page.png";
    fs::remove(shot);
    r = chromium(profile.path(), {"--virtual-time-budget=5000", "--window-size=1400,1900", "--screenshot=" + shot.string(), page});
    ASSERT_TRUE(r.ok()) << r.err;
    ASSERT_TRUE(fs::exists(shot));
    EXPECT_GT(fs::file_size(shot), 20000u);
    std::cout << "screenshot: " << shot.string() << "\n";
}

}  // namespace
}  // namespace kevo::serve
