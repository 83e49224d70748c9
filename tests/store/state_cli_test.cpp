// Issue 28 through the kernelevo binary, no GPU needed: every command refuses a file that is not a
// KernelEvo state and leaves it byte for byte; two real `kernelevo search` processes on one state:
// the second is refused at once (exit 2) naming the first, sends no LLM request, and once the
// first is killed with SIGKILL the next search takes the state over, saying so.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/fs.h"
#include "common/process.h"
#include "llm/loopback_server.h"
#include "store/redis_server.h"
#include "store/store.h"
#include "store/writer.h"

namespace kevo {
namespace {

const std::string kExe = KEVO_EXE;
const std::string kTask = std::string(KEVO_TEST_DATA_DIR) + "/gelu_bias/task.json";
const std::string kKey = "sk-test-key-0123456789";
constexpr double kUntilTheTestEnds = 24 * 3600;  // a held reply: ~LoopbackServer releases it

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

ProcessResult kernelevo(const std::vector<std::string>& args, double timeout = 120) {
    ProcessOptions o;
    o.argv = {kExe};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = {{"KERNELEVO_API_KEY", kKey}};
    o.timeout_s = timeout;
    return run_process(o);
}

// A search that needs no GPU: batch mode writes its requests to a file and stops (exit 3).
std::vector<std::string> batch_search(const std::string& state, const fs::path& dir) {
    return {"search", "--task", kTask, "--out", (dir / "kernels").string(), "--state", state, "--arch", "sm_90",
            "--llm-batch", "--llm-batch-dir", dir.string(), "--model", "gpt-x", "--llm-url", "http://127.0.0.1:9/v1"};
}

int jsonl_files(const fs::path& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".jsonl";
    return n;
}

void sql(const fs::path& file, const char* statements) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, statements, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
}

TEST(StateCli, EveryCommandRefusesAFileThatIsNotAStateAndLeavesItByteForByte) {
    TempDir dir;
    const fs::path files = dir.path() / "files";
    fs::create_directories(files);
    sql(files / "users.db", "CREATE TABLE users(name TEXT); CREATE TABLE orders(id INTEGER); INSERT INTO users VALUES('ann');");
    write_file_atomic(files / "empty.db", "");
    write_file_atomic(files / "junk.db", std::string(8192, '\x17'));
    {
        auto s = store::open_store((files / "cut.db").string());
        for (int i = 0; i < 200; ++i) s->put_meta("k" + std::to_string(i), std::string(2000, 'q'));
    }
    fs::resize_file(files / "cut.db", fs::file_size(files / "cut.db") / 2);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"users.db", "is not a KernelEvo state: it has tables orders, users"},
        {"empty.db", "is an empty file, not a KernelEvo state"},
        {"junk.db", "malformed database, not a usable KernelEvo state (SQLite: file is not a database)"},
        {"cut.db", "malformed database, not a usable KernelEvo state (SQLite: "},
    };
    for (const auto& [name, reason] : cases) {
        const fs::path file = files / name;
        const std::string before = read_file(file);
        std::vector<std::vector<std::string>> commands = {batch_search(file.string(), dir.path()),
                                                          batch_search("sqlite:" + file.string(), dir.path()),
                                                          {"report", "--state", file.string()},
                                                          {"report", "--state", file.string(), "--json"}};
        commands.push_back(batch_search(file.string(), dir.path()));
        commands.back().push_back("--fresh");  // never deletes what is not a state
        for (const auto& args : commands) {
            auto r = kernelevo(args);
            const std::string what = name + ": kernelevo " + args[0] + (args.back() == "--fresh" ? " --fresh" : "");
            EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
            EXPECT_TRUE(contains(r.err, "kernelevo: error: ")) << what << "\n" << r.err;
            EXPECT_TRUE(contains(r.err, file.string())) << what << "\n" << r.err;
            EXPECT_TRUE(contains(r.err, reason)) << what << "\n" << r.err;
            if (args.back() == "--json")  // under --json the error is also on stdout, as JSON (issue 30)
                EXPECT_TRUE(contains(r.out, "\"exit_code\":2") && contains(r.out, "\"error\":")) << what << "\n" << r.out;
            else
                EXPECT_TRUE(r.out.empty()) << what << "\n" << r.out;
            ASSERT_TRUE(fs::exists(file)) << what;
            EXPECT_TRUE(read_file(file) == before) << what << ": the file changed";
        }
        for (const char* suffix : {"-wal", "-shm", "-journal", ".lock"})
            EXPECT_FALSE(fs::exists(file.string() + suffix)) << name << suffix;
    }
    EXPECT_EQ(jsonl_files(dir.path()), 0) << "a refused search wrote a batch file";
    // Only a missing path is created.
    auto r = kernelevo(batch_search((dir.path() / "new.db").string(), dir.path()));
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_TRUE(fs::exists(dir.path() / "new.db"));
}

// `bench --fresh` deletes its states: never those a running bench (or search) holds.
TEST(StateCli, BenchFreshRefusesToDeleteAStateAnotherProcessWrites) {
    TempDir dir;
    const fs::path out = dir.path() / "report", state = out / "state" / "gelu_bias.db";
    fs::create_directories(state.parent_path());
    store::open_store(state.string())->put_meta("mine", 1);
    const std::string before = read_file(state);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    const pid_t holder = ::fork();
    if (holder == 0) {  // a child that holds the state's writer lease until killed
        ::close(p[0]);
        auto lease = store::acquire_writer(state.string());
        (void)!::write(p[1], "1", 1);
        for (;;) ::pause();
    }
    ::close(p[1]);
    char ok = 0;
    ASSERT_EQ(::read(p[0], &ok, 1), 1);
    ::close(p[0]);
    auto r = kernelevo({"bench", "--suite", std::string(KEVO_TEST_DATA_DIR) + "/gelu_bias", "--out", out.string(), "--fresh",
                        "--model", "m", "--llm-url", "http://127.0.0.1:9/v1"});
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "the state " + state.string() + " is in use: kernelevo search (pid " +
                                    std::to_string(holder))) << r.err;
    ASSERT_TRUE(fs::exists(state));
    EXPECT_TRUE(read_file(state) == before);
}

// `kernelevo search` in the background (its own process group), its stderr in a file.
class Background {
public:
    Background(const std::vector<std::string>& args, const fs::path& err) : err_(err) {
        std::vector<std::string> all{kExe};
        all.insert(all.end(), args.begin(), args.end());
        ::setenv("KERNELEVO_API_KEY", kKey.c_str(), 1);  // (before fork: the child only execs)
        pid_ = ::fork();
        if (pid_ == 0) {
            ::setpgid(0, 0);
            int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> argv;
            for (auto& a : all) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~Background() { kill9(); }
    pid_t pid() const { return pid_; }
    bool running() {
        if (pid_ <= 0) return false;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
        pid_ = -1;
        return false;
    }
    void kill9() {
        if (pid_ <= 0) return;
        ::kill(-pid_, SIGKILL);
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    std::string err() const { return fs::exists(err_) ? read_file(err_) : std::string(); }

private:
    pid_t pid_ = -1;
    fs::path err_;
};

// A first search that holds its state for as long as the test wants: its validations go through
// a Redis queue (so no local GPU is needed) and the LLM does not answer its first request before
// the test ends (the server's stop releases the held reply; the client's read timeout is a day).
// No clock decides anything: however slow a loaded machine is, the first search is still inside
// that request while the test runs the others, and a second search that waited for the first to
// end instead of being refused would wait until run_process kills it (exit -1, not 2).
class TwoSearches : public ::testing::Test {
protected:
    void SetUp() override {
        if (!store::redis_supported()) GTEST_SKIP() << "kernelevo was built without hiredis";
        if (!testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(redis.start()) << redis.error();
        llm.set_default({200, {}, llm::test::chat_body("no code today"), kUntilTheTestEnds});
    }
    std::vector<std::string> search(const std::string& state) {
        return {"search", "--task", kTask, "--out", (dir.path() / "kernels").string(), "--state", state, "--arch",
                "sm_90", "--workers", queue(), "--model", "m", "--llm-url", llm.base_url(), "--llm-timeout", "86400"};
    }
    std::string queue() const { return redis.url("q"); }
    // Starts the first search and waits until it is in the middle of its first LLM request.
    std::unique_ptr<Background> start_first(const std::string& state) {
        auto first = std::make_unique<Background>(search(state), dir.path() / "first.err");
        // The condition is the event; the limit only ends a search that never gets there.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
        while (llm.requests().empty() && first->running() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_EQ(llm.requests().size(), 1u) << "the first search did not reach its first LLM request:\n" << first->err();
        return first;
    }

    testing::RedisServer redis;
    llm::test::LoopbackServer llm;
    TempDir dir;
};

TEST_F(TwoSearches, OnAnSqliteFileTheSecondIsRefusedAtOnceAndAKilledFirstIsTakenOver) {
    const std::string state = (dir.path() / "run.db").string();
    auto first = start_first(state);
    ASSERT_TRUE(first->running()) << first->err();
    const std::string pid = std::to_string(first->pid());

    for (bool fresh : {false, true}) {
        std::vector<std::string> args = search(state);
        if (fresh) args.push_back("--fresh");  // must not delete what the first one writes
        auto r = kernelevo(args);  // refused while the first still runs: it never waits for it to end
        EXPECT_EQ(r.exit_code, 2) << r.describe() << "\n" << r.err;
        EXPECT_TRUE(contains(r.err, "kernelevo: error: the state " + state + " is in use: kernelevo search")) << r.err;
        EXPECT_TRUE(contains(r.err, "(pid " + pid + " on host ")) << r.err;
        EXPECT_TRUE(contains(r.err, ", since 20")) << r.err;
        EXPECT_TRUE(contains(r.err, "Wait for it to finish")) << r.err;
        EXPECT_TRUE(contains(r.err, "Nothing was sent to the LLM")) << r.err;
        EXPECT_EQ(llm.requests().size(), 1u) << "the refused search sent an LLM request";
        EXPECT_TRUE(fs::exists(state));
    }
    EXPECT_TRUE(first->running()) << first->err();
    EXPECT_NO_THROW(store::open_store(state, store::Access::read_only));

    first->kill9();  // SIGKILL: no chance to release anything
    auto r = kernelevo(batch_search(state, dir.path()));
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_TRUE(contains(r.err, "taking over the state " + state + " from kernelevo search")) << r.err;
    EXPECT_TRUE(contains(r.err, "(pid " + pid + " on host ")) << r.err;
    EXPECT_TRUE(contains(r.err, "which ended without releasing it")) << r.err;
    // And a clean end leaves nothing to take over.
    r = kernelevo(batch_search(state, dir.path()));
    EXPECT_FALSE(contains(r.err, "taking over")) << r.err;
}

// Issue 37: a state is its file. A second search through a hard link or a symbolic link to the
// state of a running search is refused at once, sends nothing and leaves the state as it was.
TEST_F(TwoSearches, ThroughAHardLinkOrASymlinkTheSecondIsRefusedToo) {
    const std::string state = (dir.path() / "run.db").string();
    auto first = start_first(state);
    ASSERT_TRUE(first->running()) << first->err();
    const fs::path hard = dir.path() / "elsewhere" / "hard.db", sym = dir.path() / "sym.db";
    fs::create_directories(hard.parent_path());
    fs::create_hard_link(state, hard);
    fs::create_symlink(state, sym);
    for (bool fresh : {false, true}) {
        std::vector<std::string> args = search(hard.string());
        if (fresh) args.push_back("--fresh");
        auto r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_TRUE(contains(r.err, "the state " + hard.string() + " is in use: another process writes the same file")) << r.err;
        args = search(sym.string());
        if (fresh) args.push_back("--fresh");
        r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_TRUE(contains(r.err, "is a symbolic link to " + fs::canonical(state).string())) << r.err;
        EXPECT_TRUE(contains(r.err, "the state " + sym.string() + " is in use: kernelevo search (pid " +
                                        std::to_string(first->pid()))) << r.err;
        EXPECT_EQ(llm.requests().size(), 1u) << "a refused search sent an LLM request";
        EXPECT_TRUE(fs::is_regular_file(state));
        EXPECT_TRUE(fs::is_symlink(sym));
    }
    EXPECT_TRUE(first->running()) << first->err();
    EXPECT_NO_THROW(store::open_store(state, store::Access::read_only));
}

TEST_F(TwoSearches, OnARedisPrefixTheSecondIsRefusedWithTheLeaseAndHowToJoinAsAWorker) {
    const std::string state = redis.url("run");
    auto first = start_first(state);
    ASSERT_TRUE(first->running()) << first->err();
    auto r = kernelevo(search(state));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "the state " + state + " is in use: kernelevo search")) << r.err;
    EXPECT_TRUE(contains(r.err, "(pid " + std::to_string(first->pid()) + " on host ")) << r.err;
    EXPECT_TRUE(contains(r.err, "its lease expires at 20")) << r.err;
    EXPECT_TRUE(contains(r.err, "kernelevo worker --redis " + queue() + " --gpu N")) << r.err;
    EXPECT_EQ(llm.requests().size(), 1u) << "the refused search sent an LLM request";
    EXPECT_TRUE(first->running()) << first->err();

    // Killed on this machine: its lease is taken over at once, not after it expires.
    const std::string pid = std::to_string(first->pid());
    first->kill9();
    r = kernelevo(batch_search(state, dir.path()));
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_TRUE(contains(r.err, "taking over the state " + state + " from kernelevo search (pid " + pid)) << r.err;
    EXPECT_TRUE(contains(r.err, "whose process is gone")) << r.err;
}

}  // namespace
}  // namespace kevo
