// `kernelevo serve` against careless and hostile clients, with real sockets on ephemeral ports and
// real SQLite files: one server per port, the Host/Origin check (DNS rebinding), request bodies
// refused unread, slow and idle connections dropped while others are served, a state file that is
// continued, deleted and replaced under a running serve, and files that are not states left byte
// for byte as they were (by the built kernelevo binary).
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "../store/redis_server.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "serve/serve.h"
#include "serve_support.h"
#include "store/store.h"

namespace kevo::serve {
namespace {

using Clock = std::chrono::steady_clock;
using test_support::search;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A raw TCP connection to 127.0.0.1:port (what a hostile client controls: every byte).
class Raw {
public:
    explicit Raw(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    ~Raw() { ::close(fd_); }
    bool connected() const { return connected_; }
    // Bytes the kernel took (at most n); -1 once the server has closed or reset the connection.
    ssize_t send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL); }
    // Reads until the server closes the connection or `timeout_s` passes; `closed` says which.
    std::string read_all(double timeout_s, bool* closed = nullptr) {
        std::string out;
        auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
        if (closed) *closed = false;
        while (Clock::now() < end) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            char buf[4096];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) {
                if (closed) *closed = true;
                break;
            }
            out.append(buf, static_cast<size_t>(n));
        }
        return out;
    }

private:
    int fd_ = -1;
    bool connected_ = false;
};

int status_of(const std::string& reply) {
    std::smatch m;
    return std::regex_search(reply, m, std::regex("^HTTP/1\\.1 ([0-9]{3})")) ? std::stoi(m[1]) : 0;
}

std::string host_of(int port) { return "127.0.0.1:" + std::to_string(port); }

ServeOptions loopback(std::vector<std::string> states = {}) {
    ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.states = std::move(states);
    o.scan_cache = false;
    return o;
}

TEST(ServeHardening, ASecondServerOnThePortIsRefusedAndTheFirstKeepsEveryRequest) {
    Server first(loopback());
    const int port = first.start();
    ServeOptions o = loopback();
    o.listen = host_of(port);
    Server second(o);
    try {
        second.start();
        FAIL() << "a second server bound " << o.listen;
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(o.listen + " is in use"), std::string::npos) << e.what();
    }
    // The built binary, as a user runs it: the port is taken, exit 2, the CLI's one prefix.
    ProcessOptions p;
    p.argv = {KEVO_EXE, "serve", "--listen", o.listen, "--no-cache-runs"};
    p.timeout_s = 30;
    ProcessResult r = run_process(p);
    EXPECT_EQ(r.exit_code, 2) << r.describe() << r.err;
    EXPECT_NE(r.err.find("kernelevo: error: " + o.listen + " is in use"), std::string::npos) << r.err;
    // Every request reaches the first server (with SO_REUSEPORT the kernel would have spread them).
    for (int i = 0; i < 20; ++i) {
        httplib::Client c("127.0.0.1", port);
        auto res = c.Get("/api/overview");
        ASSERT_TRUE(res) << i;
        EXPECT_EQ(res->status, 200);
    }
    // Once it stops, the port can be bound again at once (its closed connections in TIME_WAIT).
    first.stop();
    Server third(o);
    EXPECT_EQ(third.start(), port);
}

TEST(ServeHardening, OnlyThisServersHostAndOriginAreAnswered) {
    Server s(loopback());
    const int port = s.start();
    const std::string p = std::to_string(port);
    auto get = [&](const std::string& path, httplib::Headers h) {
        httplib::Client c("127.0.0.1", port);
        auto res = c.Get(path.c_str(), h);
        return res ? res->status : 0;
    };
    // A DNS-rebinding page names its own site in Host: refused, for the API and the page alike.
    for (const std::string& host : std::vector<std::string>{"evil.example:" + p, "evil.example",
                                                            "127.0.0.1:" + std::to_string(port + 1),
                                                            "127.0.0.1.evil.example:" + p, "localhost"})
        for (const char* path : {"/api/overview", "/"}) EXPECT_EQ(get(path, {{"Host", host}}), 421) << host << path;
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/api/overview", {{"Host", "evil.example:" + p}});
    ASSERT_TRUE(res);
    EXPECT_NE(res->body.find("kernelevo serve at 127.0.0.1:" + p), std::string::npos) << res->body;
    EXPECT_EQ(get("/api/overview", {{"Host", "\xff\xfe.example:" + p}}), 421);  // not UTF-8: still a plain refusal
    // The names of this loopback address.
    for (const std::string& host : std::vector<std::string>{"127.0.0.1:" + p, "localhost:" + p, "LOCALHOST:" + p, "[::1]:" + p})
        EXPECT_EQ(get("/api/overview", {{"Host", host}}), 200) << host;
    // No Host at all (HTTP/1.1 requires one).
    Raw raw(port);
    ASSERT_TRUE(raw.connected());
    raw.send("GET /api/overview HTTP/1.1\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(status_of(raw.read_all(5)), 421);
    // Cross-origin requests.
    EXPECT_EQ(get("/api/overview", {{"Origin", "http://evil.example"}}), 403);
    EXPECT_EQ(get("/api/overview", {{"Origin", "null"}}), 403);
    EXPECT_EQ(get("/api/overview", {{"Origin", "http://127.0.0.1:" + p + ".evil.example"}}), 403);
    EXPECT_EQ(get("/api/overview", {{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Mode", "cors"}}), 403);
    EXPECT_EQ(get("/api/overview", {{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Mode", "no-cors"}}), 403);
    EXPECT_EQ(get("/", {{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Mode", "navigate"}}), 200);  // a link here
    EXPECT_EQ(get("/api/overview", {{"Origin", "http://127.0.0.1:" + p}}), 200);
    EXPECT_EQ(get("/api/overview", {{"Sec-Fetch-Site", "same-origin"}}), 200);
}

TEST(ServeHardening, RequestBodiesAreRefusedWithoutBeingRead) {
    Server s(loopback());
    const int port = s.start();
    const std::string head = "GET /api/overview HTTP/1.1\r\nHost: " + host_of(port) + "\r\n";
    {
        // A 200 MB GET body: 413 once the headers are in, then the connection is closed. What the
        // client manages to push before that is bounded by the socket buffers, not 200 MB.
        Raw raw(port);
        ASSERT_TRUE(raw.connected());
        ASSERT_GT(raw.send(head + "Content-Length: 200000000\r\n\r\n"), 0);
        std::string reply = raw.read_all(3);
        EXPECT_EQ(status_of(reply), 413) << reply;
        EXPECT_NE(reply.find("no request body"), std::string::npos);
        const std::string chunk(1 << 20, 'x');
        size_t sent = 0;
        auto t0 = Clock::now();
        while (sent < 200u << 20 && seconds_since(t0) < 20) {
            ssize_t n = raw.send(chunk);
            if (n < 0) break;
            sent += static_cast<size_t>(n);
        }
        EXPECT_LT(sent, 48u << 20) << "the server kept reading the body";
    }
    {
        Raw raw(port);  // chunked, no length
        raw.send(head + "Transfer-Encoding: chunked\r\n\r\n100000\r\n" + std::string(4096, 'y'));
        EXPECT_EQ(status_of(raw.read_all(3)), 413);
    }
    {
        Raw raw(port);  // the body is announced with Expect: refused before it is sent
        raw.send(head + "Content-Length: 200000000\r\nExpect: 100-continue\r\n\r\n");
        std::string reply = raw.read_all(3);
        EXPECT_EQ(status_of(reply), 413) << reply;
        EXPECT_EQ(reply.find("100 Continue"), std::string::npos);
    }
    for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH"}) {
        Raw raw(port);
        raw.send(std::string(method) + " /api/overview HTTP/1.1\r\nHost: " + host_of(port) +
                 "\r\nContent-Length: 5\r\n\r\nhello");
        EXPECT_EQ(status_of(raw.read_all(3)), 405) << method;
    }
    {
        // A request line of 8 MB without an end: cut at the server's budget, not kept in memory.
        Raw raw(port);
        raw.send("GET /");
        const std::string chunk(1 << 20, 'a');
        size_t sent = 0;
        for (int i = 0; i < 8; ++i) {
            ssize_t n = raw.send(chunk);
            if (n < 0) break;
            sent += static_cast<size_t>(n);
        }
        bool closed = false;
        raw.read_all(5, &closed);
        EXPECT_TRUE(closed);
    }
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/api/overview");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
}

TEST(ServeHardening, FiftySlowConnectionsDoNotBlockOthersAndAreDropped) {
    Server s(loopback());
    const int port = s.start();
    std::vector<std::unique_ptr<Raw>> idle, drip;
    for (int i = 0; i < 25; ++i) idle.push_back(std::make_unique<Raw>(port));  // open, send nothing
    for (int i = 0; i < 25; ++i) {                                               // headers, a byte at a time
        drip.push_back(std::make_unique<Raw>(port));
        drip.back()->send("GET /api/overview HTTP/1.1\r\nHost: " + host_of(port) + "\r\nX-Slow: ");
    }
    std::atomic<bool> stop{false};
    std::thread dripper([&] {
        while (!stop) {
            for (auto& d : drip) d->send("a");
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto t0 = Clock::now();
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    auto res = c.Get("/api/overview");
    const double took = seconds_since(t0);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_LT(took, 2.0) << "a normal request waited behind the slow connections";
    // The slow ones are closed by the server within its limits (5 s idle, 5 s for a request's headers).
    size_t closed_count = 0;
    for (auto* group : {&idle, &drip})
        for (auto& r : *group) {
            bool closed = false;
            r->read_all(std::max(0.1, 12.0 - seconds_since(t0)), &closed);
            closed_count += closed;
        }
    stop = true;
    dripper.join();
    EXPECT_EQ(closed_count, 50u);
}

// The one run a serve over `state` shows.
nlohmann::json the_run(Server& s) {
    nlohmann::json o = s.overview();
    EXPECT_EQ(o["runs"].size(), 1u) << o.dump(2);
    return o["runs"][0];
}

TEST(ServeHardening, FollowsAStateThatIsContinuedDeletedAndReplaced) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    search(state, 2);
    Server s(loopback({state.string()}));
    const int port = s.start();
    nlohmann::json run = the_run(s);
    ASSERT_EQ(run.value("generation", -1), 2) << run.dump(2);
    const std::string id = run["id"];
    const size_t programs = s.programs(id).size();

    search(state, 4);  // the same run goes on (serve read it while no writer had it open)
    EXPECT_EQ(the_run(s).value("generation", -1), 4);
    EXPECT_GT(s.programs(id).size(), programs);

    store::remove_store(state.string());  // what `search --fresh` does first
    run = the_run(s);
    EXPECT_EQ(run.value("error", ""), "no state there (yet)") << run.dump(2);
    EXPECT_FALSE(run.contains("generation"));
    EXPECT_THROW(s.programs(id), UsageError);

    search(state, 1);  // ... and then a new run at the same path
    run = the_run(s);
    EXPECT_EQ(run.value("generation", -1), 1) << run.dump(2);
    EXPECT_FALSE(run.contains("error"));
    const size_t fresh = s.programs(id).size();
    EXPECT_LT(fresh, programs);

    // Another run moved over it (rename: atomic replacement), with the old one still open here.
    const fs::path other = dir.path() / "other.db";
    search(other, 3);
    fs::rename(other, state);
    EXPECT_EQ(the_run(s).value("generation", -1), 3);
    // Through HTTP, as the page reads it.
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/api/overview");
    ASSERT_TRUE(res);
    EXPECT_EQ(nlohmann::json::parse(res->body)["runs"][0].value("generation", -1), 3) << res->body;
}

TEST(ServeHardening, FollowsARedisStateThatIsDeletedAndStartedAgain) {
    if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
    kevo::testing::RedisServer redis;
    ASSERT_TRUE(redis.start()) << redis.error();
    const std::string state = redis.url("serve-follow");
    search(state, 2);
    Server s(loopback({state}));
    s.start();
    EXPECT_EQ(the_run(s).value("generation", -1), 2);
    store::remove_store(state);  // `search --fresh` on a Redis prefix
    EXPECT_EQ(the_run(s).value("error", ""), "no state there (yet)");
    search(state, 1);
    nlohmann::json run = the_run(s);
    EXPECT_EQ(run.value("generation", -1), 1) << run.dump(2);
    EXPECT_FALSE(run.contains("error"));
}

// Another application's SQLite database: a table `users`, in `journal` mode.
void foreign_database(const fs::path& path, const char* journal) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string sql = std::string("PRAGMA journal_mode=") + journal +
                      "; CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES('ada');";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
}

TEST(ServeHardening, FilesThatAreNotStatesAreShownAsErrorsAndLeftAsTheyWere) {
    TempDir dir;
    const fs::path foreign = dir.path() / "app.db", foreign_wal = dir.path() / "app-wal.db",
                   empty = dir.path() / "empty.db", corrupt = dir.path() / "corrupt.db";
    foreign_database(foreign, "DELETE");
    foreign_database(foreign_wal, "WAL");
    write_file_atomic(empty, "");
    std::string junk = "SQLite format 3";
    junk.push_back('\0');
    for (int i = 0; i < 8192; ++i) junk.push_back(static_cast<char>((i * 7919) % 251));
    write_file_atomic(corrupt, junk);
    std::map<fs::path, std::string> before;
    for (const auto& f : {foreign, foreign_wal, empty, corrupt}) before[f] = read_file(f);
    auto listing = [&] {
        std::set<std::string> names;
        for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename().string());
        return names;
    };
    const std::set<std::string> files = listing();

    // The built binary, as a user runs it, polled as the page polls it.
    ProcessOptions o;
    o.argv = {KEVO_EXE,          "serve",           "--listen",      "127.0.0.1:0",   "--no-cache-runs",
              "--state",         foreign.string(),  "--state",       foreign_wal.string(), "--state",
              empty.string(),    "--state",         corrupt.string()};
    Subprocess serve(o);
    int port = 0;
    std::smatch m;
    for (auto t0 = Clock::now(); port == 0 && seconds_since(t0) < 20;) {
        std::string line;
        serve.read_line(line, 0.1);  // reads its stderr too
        std::string err = serve.err_tail(4096);
        if (std::regex_search(err, m, std::regex("http://127\\.0\\.0\\.1:([0-9]+)/"))) port = std::stoi(m[1]);
    }
    ASSERT_GT(port, 0) << serve.err_tail(4096);
    httplib::Client c("127.0.0.1", port);
    for (int poll = 0; poll < 3; ++poll) {
        auto res = c.Get("/api/overview");
        ASSERT_TRUE(res);
        ASSERT_EQ(res->status, 200);
        nlohmann::json o = nlohmann::json::parse(res->body);
        ASSERT_EQ(o["runs"].size(), 4u);
        for (const auto& run : o["runs"]) {
            EXPECT_FALSE(run.value("error", "").empty()) << run.dump(2);
            EXPECT_FALSE(run.contains("generation")) << run.dump(2);
            if (run["state"] == foreign.string()) EXPECT_NE(run["error"].get<std::string>().find("KernelEvo"), std::string::npos);
            EXPECT_EQ(c.Get(("/api/runs/" + run["id"].get<std::string>() + "/programs").c_str())->status >= 400, true);
        }
    }
    serve.kill_now();
    for (const auto& [path, bytes] : before) EXPECT_TRUE(read_file(path) == bytes) << path << " was changed";
    EXPECT_EQ(listing(), files) << "files appeared beside them (-wal, -shm, -journal)";
}

// Two Host headers (which one did a proxy check?) are refused as a bad request, and a program id
// too large for any program is "no program", not an internal error.
TEST(ServeHardening, TwoHostHeadersAndAnIdBeyondAnyProgramAreRefusedPlainly) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    search(state, 1);
    Server s(loopback({state.string()}));
    const int port = s.start();
    const std::string id = the_run(s)["id"];
    Raw raw(port);
    ASSERT_TRUE(raw.connected());
    raw.send("GET /api/overview HTTP/1.1\r\nHost: " + host_of(port) + "\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
    const std::string reply = raw.read_all(5);
    EXPECT_EQ(status_of(reply), 400) << reply;
    EXPECT_NE(reply.find("exactly one Host header"), std::string::npos) << reply;

    httplib::Client c("127.0.0.1", port);
    for (const std::string big : {"99999999999999999999999", "9223372036854775808"}) {
        auto res = c.Get(("/api/runs/" + id + "/programs/" + big).c_str());
        ASSERT_TRUE(res) << big;
        EXPECT_EQ(res->status, 404) << big << res->body;
        EXPECT_NE(res->body.find("no program " + big + " in run " + id), std::string::npos) << res->body;
    }
    auto ok = c.Get(("/api/runs/" + id + "/programs/1").c_str());
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
}

}  // namespace
}  // namespace kevo::serve
