// Issue 28, at the store: one writer per state (store/writer.h) on real SQLite files and a real
// redis-server, held by real child processes that are killed with SIGKILL; a stored LLM call is
// never stored (or counted) twice; a file that is not a KernelEvo state is refused by every way of
// opening it, byte for byte untouched.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "store/store.h"
#include "store/writer.h"
#include "store_backend.h"

namespace kevo::store {
namespace {

using kevo::testing::shared_redis;

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

std::string host() {
    char buf[256] = {};
    ::gethostname(buf, sizeof buf - 1);
    return buf;
}

// A child process that takes the writer lease of `location` and holds it until it is killed.
// Returns its pid once it holds the lease (-1: it could not take it).
// With `open`, it then opens the state for writing as a search does (making it when missing, or,
// with `fresh`, deleting and making it again as --fresh does).
pid_t hold_in_child(const std::string& location, double ttl_s = 20, const std::string& workers = "", bool open = false,
                    bool fresh = false) {
    int p[2];
    if (::pipe(p) != 0) return -1;
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(p[0]);
        char ok = '0';
        try {
            WriterOptions o;
            o.redis_ttl_s = ttl_s;
            o.workers = workers;
            auto lease = acquire_writer(location, o);
            if (fresh) remove_store(location);
            std::unique_ptr<Store> store = open ? open_store(location) : nullptr;
            ok = '1';
            (void)!::write(p[1], &ok, 1);
            for (;;) ::pause();
        } catch (...) {
        }
        (void)!::write(p[1], &ok, 1);
        ::_exit(1);
    }
    ::close(p[1]);
    char ok = '0';
    (void)!::read(p[0], &ok, 1);
    ::close(p[0]);
    if (ok == '1') return pid;
    ::waitpid(pid, nullptr, 0);
    return -1;
}

void kill9(pid_t pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

class Writer : public kevo::testing::BackendTest {};
KEVO_INSTANTIATE_BACKENDS(Writer);

TEST_P(Writer, ASecondWriterIsRefusedWithTheHolderAndAKilledHolderIsTakenOver) {
    const std::string where = location();
    const pid_t holder = hold_in_child(where, 1.5);
    ASSERT_GT(holder, 0);
    std::string e = error_of([&] { acquire_writer(where); });
    EXPECT_TRUE(contains(e, "the state " + parse_store_location(where).display() + " is in use")) << e;
    EXPECT_TRUE(contains(e, "kernelevo search (pid " + std::to_string(holder) + " on host " + host() + ", since 20")) << e;
    EXPECT_TRUE(contains(e, "Nothing was sent to the LLM and the state was not changed")) << e;
    if (redis()) EXPECT_TRUE(contains(e, "its lease expires at 20")) << e;
    EXPECT_FALSE(store_exists(where));  // the lease is not a state

    kill9(holder);  // no release: SQLite's lock goes with the process, a Redis lease expires
    std::vector<std::string> lines;
    WriterOptions o;
    o.log = [&](const std::string& l) { lines.push_back(l); };
    // At once: the lock went with the process; a Redis lease of a process of this machine that is
    // gone is not waited for.
    std::unique_ptr<WriterLease> lease = acquire_writer(where, o);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(contains(lines[0], "taking over the state")) << lines[0];
    EXPECT_TRUE(contains(lines[0], "pid " + std::to_string(holder))) << lines[0];
}

TEST_P(Writer, ACleanReleaseLetsTheNextOneInWithoutATakeOverLine) {
    const std::string where = location();
    std::vector<std::string> lines;
    WriterOptions o;
    o.log = [&](const std::string& l) { lines.push_back(l); };
    {
        auto lease = acquire_writer(where, o);
        // Not twice from one process either (fcntl locks are per process: checked apart).
        std::string e = error_of([&] { acquire_writer(where); });
        EXPECT_TRUE(contains(e, "in use")) << e;
        EXPECT_TRUE(contains(e, std::to_string(::getpid()))) << e;
    }
    { auto again = acquire_writer(where, o); }
    auto third = acquire_writer(where, o);
    EXPECT_TRUE(lines.empty()) << lines[0];
}

TEST_P(Writer, TwoWritersStoringTheSameCallKeepTheFirstAndCountItOnce) {
    // Defence in depth behind the lease: two stores on one state both answer the same request.
    auto a = open_store(location()), b = open_store(location());
    LlmCall c;
    c.key = "g0.seed.a0";
    c.kind = "seed";
    c.request = {{"model", "m"}};
    c.reply = "first";
    c.prompt_tokens = 10;
    c.completion_tokens = 5;
    c.cost_usd = 0.5;
    const int64_t first = a->add_llm_call(c);
    c.reply = "second";
    int64_t second = 0;
    EXPECT_NO_THROW(second = b->add_llm_call(c));
    EXPECT_EQ(second, first);
    EXPECT_EQ(b->find_llm_call("g0.seed.a0")->reply, "first");
    EXPECT_EQ(a->spent().calls, 1);
    EXPECT_EQ(a->spent().prompt_tokens, 10);
    EXPECT_DOUBLE_EQ(a->spent().cost_usd, 0.5);
    EXPECT_EQ(a->llm_calls().size(), 1u);
}

// ---- Redis: the lease key ------------------------------------------------------------------------

class RedisWriter : public ::testing::Test {
protected:
    void SetUp() override {
        if (!redis_supported()) GTEST_SKIP() << "kernelevo was built without hiredis";
        if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(shared_redis());
    }
    std::string url(const std::string& name) {
        return shared_redis()->url(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "." + name);
    }
};

TEST_F(RedisWriter, ALeaseOfAnotherMachineIsWaitedForUntilItExpires) {
    // A holder elsewhere cannot be seen to be dead: its lease is taken over once expired.
    const std::string where = shared_redis()->url("expiry");
    const std::string p = "{expiry}:";
    const std::string other = R"({"pid":4242,"host":"elsewhere","system":"another-boot/pid:[1]","since":1.0e9})";
    ASSERT_TRUE(shared_redis()->call({"SET", p + "writer", other, "PX", "1200"}));
    ASSERT_TRUE(shared_redis()->call({"SET", p + "writer:held", other}));
    std::string e = error_of([&] { acquire_writer(where); });
    EXPECT_TRUE(contains(e, "(pid 4242 on host elsewhere, since 2001-09-09 01:46:40 UTC) writes it (its lease expires at 20")) << e;
    std::vector<std::string> lines;
    WriterOptions o;
    o.log = [&](const std::string& l) { lines.push_back(l); };
    std::unique_ptr<WriterLease> lease;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!lease && std::chrono::steady_clock::now() < deadline) {
        try {
            lease = acquire_writer(where, o);
        } catch (const UsageError&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    ASSERT_TRUE(lease);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(contains(lines[0], "from kernelevo search (pid 4242 on host elsewhere")) << lines[0];
    EXPECT_TRUE(contains(lines[0], "whose lease expired without being released")) << lines[0];
}

TEST_F(RedisWriter, TheLeaseIsRenewedWhileHeldAndReleasedOnExit) {
    const std::string where = url("renew");
    {
        WriterOptions o;
        o.redis_ttl_s = 1;
        auto lease = acquire_writer(where, o);
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // 2.5 ttl
        EXPECT_TRUE(contains(error_of([&] { acquire_writer(where); }), "is in use"));
    }
    std::vector<std::string> pttl;
    ASSERT_TRUE(shared_redis()->call({"EXISTS", "{" + parse_store_location(where).prefix + "}:writer"}, &pttl));
    EXPECT_EQ(pttl.at(0), "0");
    EXPECT_NO_THROW(acquire_writer(where));
}

TEST_F(RedisWriter, AHolderThatLostItsLeaseToAnotherIsStopped) {
    const std::string where = url("lost");
    const std::string p = "{" + parse_store_location(where).prefix + "}:";
    std::atomic<bool> lost{false};
    std::string why;
    WriterOptions o;
    o.redis_ttl_s = 0.8;
    o.on_lost = [&](const std::string& w) {
        why = w;
        lost = true;
    };
    auto lease = acquire_writer(where, o);
    // It stalled past its ttl and another process took the state over meanwhile.
    const std::string other = R"({"pid":4242,"host":"elsewhere","since":1.0e9,"command":"kernelevo search"})";
    ASSERT_TRUE(shared_redis()->call({"SET", p + "writer", other, "PX", "60000"}));
    ASSERT_TRUE(shared_redis()->call({"SET", p + "writer:held", other}));
    for (int i = 0; i < 50 && !lost; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(lost);
    EXPECT_TRUE(contains(why, "pid 4242 on host elsewhere")) << why;
    lease.reset();  // does not delete the other holder's lease
    std::vector<std::string> v;
    ASSERT_TRUE(shared_redis()->call({"GET", p + "writer"}, &v));
    EXPECT_EQ(v.at(0), other);
}

TEST_F(RedisWriter, FreshDeletesTheRunButNotTheLeaseOfTheProcessThatRunsIt) {
    const std::string where = url("fresh");
    auto lease = acquire_writer(where);
    open_store(where)->put_meta("x", 1);
    remove_store(where);
    EXPECT_FALSE(store_exists(where));
    EXPECT_TRUE(contains(error_of([&] { acquire_writer(where); }), "is in use"));
}

TEST_F(RedisWriter, TheRefusalSaysHowToJoinARunThatUsesWorkers) {
    const std::string where = url("join");
    const std::string queue = "redis://queue.lan:6379/0?prefix=kernelevo";
    const pid_t holder = hold_in_child(where, 20, queue);
    ASSERT_GT(holder, 0);
    std::string e = error_of([&] { acquire_writer(where); });
    kill9(holder);
    EXPECT_TRUE(contains(e, "pid " + std::to_string(holder))) << e;
    EXPECT_TRUE(contains(e, "kernelevo worker --redis " + queue + " --gpu N")) << e;
}

// ---- SQLite: a state is its file, whatever its name (issue 37) -----------------------------------

void write_state(const fs::path& file);

// A second writer through a hard link or a symbolic link to a state another process writes is
// refused: the lease belongs to the file (its device and inode), not to the name given.
TEST(SqliteLinks, ASecondWriterThroughAHardLinkOrASymlinkIsRefused) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db", hard = dir.path() / "other" / "hard.db",
                   sym = dir.path() / "sym.db";
    write_state(state);
    fs::create_directories(hard.parent_path());
    fs::create_hard_link(state, hard);
    fs::create_symlink(state, sym);
    const pid_t holder = hold_in_child(state.string(), 20, "", true);
    ASSERT_GT(holder, 0);
    std::string e = error_of([&] { acquire_writer(hard.string()); });
    EXPECT_TRUE(contains(e, "the state " + hard.string() + " is in use: another process writes the same file")) << e;
    EXPECT_TRUE(contains(e, "hard link")) << e;
    EXPECT_TRUE(contains(e, "Nothing was sent to the LLM")) << e;
    std::vector<std::string> lines;
    WriterOptions o;
    o.log = [&](const std::string& l) { lines.push_back(l); };
    e = error_of([&] { acquire_writer(sym.string(), o); });
    EXPECT_TRUE(contains(e, "the state " + sym.string() + " is in use: kernelevo search (pid " + std::to_string(holder))) << e;
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0], "the state " + sym.string() + " is a symbolic link to " + fs::canonical(state).string() +
                            ": it is locked as that file");
    kill9(holder);
    // Free again: either name may write it, and the first to do so holds every name.
    auto lease = acquire_writer(hard.string());
    e = error_of([&] { acquire_writer(state.string()); });
    EXPECT_TRUE(contains(e, "another process writes the same file")) << e;  // (this process: one lease per file)
}

// The same for a state the holder made after taking its lease, and for one --fresh replaced.
TEST(SqliteLinks, AStateMadeOrReplacedUnderTheLeaseIsItsFileToo) {
    for (bool fresh : {false, true}) {
        TempDir dir;
        const fs::path state = dir.path() / "run.db", hard = dir.path() / "hard.db";
        if (fresh) write_state(state);
        const pid_t holder = hold_in_child(state.string(), 20, "", true, fresh);
        ASSERT_GT(holder, 0);
        ASSERT_TRUE(fs::exists(state));
        fs::create_hard_link(state, hard);
        std::string e = error_of([&] { acquire_writer(hard.string()); });
        EXPECT_TRUE(contains(e, "another process writes the same file")) << "fresh " << fresh << ": " << e;
        kill9(holder);
    }
}

// A symbolic link to a state: --fresh deletes the state it points to, not the link.
TEST(SqliteLinks, RemovingAStateThroughASymlinkRemovesItsFileAndKeepsTheLink) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db", sym = dir.path() / "sym.db";
    write_state(state);
    fs::create_symlink(state, sym);
    remove_store(sym.string());
    EXPECT_FALSE(fs::exists(state));
    EXPECT_TRUE(fs::is_symlink(sym));
}

// ---- SQLite: files that are not a KernelEvo state -----------------------------------------------

void sql(const fs::path& file, const char* statements) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, statements, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
}

// A real state of some size, checkpointed into its file (no -wal left).
void write_state(const fs::path& file) {
    auto s = open_store(file.string());
    for (int i = 0; i < 300; ++i) {
        Program p;
        p.key = "g" + std::to_string(i);
        p.origin = "mutation";
        p.source = std::string(3000, static_cast<char>('a' + i % 26));
        p.norm_hash = "h" + std::to_string(i);
        s->put_program(p);
    }
}

struct NotAState {
    std::string name, reason;
};

// Every kind of file that is not a state, made in `dir`, with the reason each must be refused for.
std::vector<NotAState> not_states(const fs::path& dir) {
    std::vector<NotAState> out;
    sql(dir / "foreign.db", "CREATE TABLE users(name TEXT); CREATE TABLE orders(id INTEGER); INSERT INTO users VALUES('ann');");
    out.push_back({"foreign.db", "is not a KernelEvo state: it has tables orders, users"});
    sql(dir / "meta_only.db", "CREATE TABLE meta(key TEXT, value TEXT); INSERT INTO meta VALUES('owner','someone');");
    out.push_back({"meta_only.db", "is not a KernelEvo state: it has tables meta"});
    sql(dir / "other_meta.db", "CREATE TABLE meta(name TEXT); CREATE TABLE posts(t TEXT);");
    out.push_back({"other_meta.db", "is not a KernelEvo state: it has tables meta, posts"});
    sql(dir / "no_tables.db", "PRAGMA user_version=3;");
    out.push_back({"no_tables.db", "is an SQLite database without tables, not a KernelEvo state"});
    write_file_atomic(dir / "empty.db", "");
    out.push_back({"empty.db", "is an empty file, not a KernelEvo state"});
    write_file_atomic(dir / "junk.db", std::string(4096, 'x'));
    out.push_back({"junk.db", "malformed database, not a usable KernelEvo state (SQLite: file is not a database)"});
    write_state(dir / "truncated.db");
    fs::resize_file(dir / "truncated.db", fs::file_size(dir / "truncated.db") / 2);
    out.push_back({"truncated.db", "malformed database, not a usable KernelEvo state (SQLite: "});
    write_state(dir / "overwritten.db");
    {
        std::string bytes = read_file(dir / "overwritten.db");
        for (size_t i = 4096 * 3; i < 4096 * 6; ++i) bytes[i] = static_cast<char>(i * 7);  // pages 4-6: garbage
        write_file_atomic(dir / "overwritten.db", bytes);
    }
    out.push_back({"overwritten.db", "malformed database, not a usable KernelEvo state (SQLite: "});
    sql(dir / "future.db", "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES('schema_version','7');");
    out.push_back({"future.db", "has schema version 7, this kernelevo reads version 1"});
    return out;
}

TEST(SqliteNotAState, EveryWayOfOpeningRefusesItWithTheReasonAndLeavesItByteForByte) {
    TempDir dir;
    for (const NotAState& n : not_states(dir.path())) {
        const fs::path file = dir.path() / n.name;
        const std::string before = read_file(file);
        const std::vector<std::pair<std::string, std::function<void()>>> ways = {
            {"read-write", [&] { open_store(file.string()); }},
            {"sqlite:", [&] { open_store("sqlite:" + file.string()); }},
            {"read-only", [&] { open_store(file.string(), Access::read_only); }},
            {"remove (--fresh)", [&] { remove_store(file.string()); }},
        };
        for (const auto& [way, open] : ways) {
            std::string e = error_of(open);
            EXPECT_TRUE(contains(e, file.string())) << n.name << ", " << way << ": " << e;
            EXPECT_TRUE(contains(e, n.reason)) << n.name << ", " << way << ": " << e;
            ASSERT_TRUE(fs::exists(file)) << n.name << ", " << way;
            EXPECT_TRUE(read_file(file) == before) << n.name << ", " << way << ": the file changed";
            for (const char* suffix : {"-wal", "-shm", "-journal"})
                EXPECT_FALSE(fs::exists(file.string() + suffix)) << n.name << ", " << way << ": " << suffix;
        }
    }
}

TEST(SqliteNotAState, ADirectoryIsRefusedToo) {
    TempDir dir;
    fs::create_directories(dir.path() / "d.db");
    std::string e = error_of([&] { open_store((dir.path() / "d.db").string()); });
    EXPECT_TRUE(contains(e, "is not a regular file, not a KernelEvo state")) << e;
}

TEST(SqliteCreate, ANewStateAppearsWholeAndLeavesNoTemporaryFile) {
    TempDir dir;
    const fs::path file = dir.path() / "new.db";
    { open_store(file.string())->put_meta("x", 1); }
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"new.db"});
    EXPECT_EQ(open_store(file.string(), Access::read_only)->get_meta("x"), nlohmann::json(1));
}

}  // namespace
}  // namespace kevo::store
