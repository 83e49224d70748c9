// Issue 50 items 11-15 ("trust boundaries, third pass"), through the real kernelevo binary: what a
// user types, a task file, a Batch API server and a full disk may hold. Each gets one clear line
// (exit 2 for bad input, 1 for a server that failed) and leaves nothing created or lost. Real
// processes, files, SQLite states and a real HTTP server on loopback.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../llm/loopback_server.h"
#include "cli_run.h"
#include "common/fs.h"

namespace kevo::clitest {
namespace {

using llm::test::LoopbackServer;

const std::string kTask = (kData / "gelu_bias" / "task.json").string();
const std::map<std::string, std::string> kEnv = {{"KERNELEVO_API_KEY", "sk-test-key-0123456789"}};

std::vector<std::string> batch_search(const std::string& state, const fs::path& dir,
                                      std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"search",
                                  "--task",
                                  kTask,
                                  "--out",
                                  (dir / "kernels").string(),
                                  "--state",
                                  state,
                                  "--arch",
                                  "sm_90",
                                  "--llm-batch",
                                  "--llm-batch-dir",
                                  dir.string(),
                                  "--model",
                                  "gpt-x",
                                  "--llm-url",
                                  "http://127.0.0.1:9/v1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// One "kernelevo: error: " line holding `text`, exit 2, no internal error, no crash.
void expect_usage_error(const ProcessResult& r, const std::string& text, const std::string& what) {
    EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.describe() << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "kernelevo: error: ")) << what << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, text)) << what << "\n" << r.err;
    EXPECT_FALSE(contains(r.err, "internal error")) << what << "\n" << r.err;
    EXPECT_FALSE(contains(r.err, "terminate called")) << what << "\n" << r.err;
}

// The gelu_bias task with `field` replaced by the raw JSON text `value`, written to DIR/task.json.
std::string task_with(const fs::path& dir, const std::string& field, const std::string& value) {
    nlohmann::json t = nlohmann::json::parse(read_file(kTask));
    t["reference"]["source"] = (kData / "gelu_bias" / "gelu_bias_ref.cpp").string();
    t[field] = "@@VALUE@@";
    std::string text = t.dump();
    text.replace(text.find("\"@@VALUE@@\""), 11, value);
    write_file_atomic(dir / "task.json", text);
    return (dir / "task.json").string();
}

// Item 11: --llm-parallel 100000 crashed search and llm check (std::terminate, exit 134).
TEST(TrustBoundaries, LlmParallelIsBoundedAndAThreadTheSystemRefusesIsAnError) {
    TempDir dir;
    const std::string state = (dir.path() / "state.db").string();
    for (const auto& args : {std::vector<std::string>{"llm", "check", "--model", "m", "--llm-url",
                                                      "http://127.0.0.1:9/v1", "--llm-parallel", "100000"},
                             batch_search(state, dir.path(), {"--llm-parallel", "100000"})}) {
        auto r = kernelevo(args, kEnv);
        expect_usage_error(r, "--llm-parallel: must be between 1 and 256, not 100000", args[0]);
        EXPECT_FALSE(fs::exists(state)) << "a state was created";
    }
    // Within the range, but the system refuses the threads (address space for their stacks).
    LoopbackServer server;
    ProcessOptions o;
    o.argv = {kExe, "llm", "check", "--model", "m", "--llm-url", server.base_url(), "--llm-parallel", "256"};
    o.env = kEnv;
    o.timeout_s = 60;
    o.max_address_space = 1200L << 20;
    ProcessResult r = run_process(o);
    expect_usage_error(r, "--llm-parallel 256: the system refused thread ", "llm check under a small address space");
    EXPECT_TRUE(server.requests().empty()) << "a request was sent";
}

// Item 13: every duration option has one checked range: finite, above 0, at most a week.
TEST(TrustBoundaries, EveryDurationOptionIsFiniteAboveZeroAndAtMostAWeek) {
    TempDir dir;
    const std::string state = (dir.path() / "state.db").string();
    write_file_atomic(dir.path() / "k.cu", "// not compiled\n");
    write_file_atomic(dir.path() / "p.py", "# not run\n");
    const std::string k = (dir.path() / "k.cu").string();
    const std::string why = "must be a number of seconds above 0, at most 604800 (a week), not '";
    const std::string nonfinite = "must be a finite number, not '";
    const std::vector<std::vector<std::string>> cases = {
        {"import", "kernelbench", (dir.path() / "p.py").string(), "--out", (dir.path() / "suite").string(), "--timeout",
         "1e308"},
        {"import", "kernelbench", (dir.path() / "p.py").string(), "--out", (dir.path() / "suite").string(), "--timeout",
         "1e10"},
        {"validate", "--task", kTask, "--kernel", k, "--timeout", "1e308"},
        {"validate", "--task", kTask, "--kernel", k, "--timeout", "1e10"},
        {"tune", "--task", kTask, "--kernel", k, "--timeout", "1e10"},
        {"worker", "--redis", "redis://127.0.0.1:9/0", "--lease", "nan"},
        {"worker", "--redis", "redis://127.0.0.1:9/0", "--max-job-time", "inf"},
        {"llm", "check", "--model", "m", "--llm-timeout", "1e308"},
        {"llm", "check", "--model", "m", "--llm-connect-timeout", "0"},
    };
    for (const auto& args : cases) {
        auto r = kernelevo(args, kEnv, 60);
        if (args[0] == "worker" && contains(r.err, "not a command")) continue;  // built without workers
        const bool finite = args.back() != "nan" && args.back() != "inf";
        expect_usage_error(r, args[args.size() - 2] + ": " + (finite ? why : nonfinite) + args.back() + "'",
                           args[0] + " " + args.back());
    }
    auto idle = kernelevo({"worker", "--redis", "redis://127.0.0.1:9/0", "--idle-exit", "nan"}, kEnv, 60);
    if (!contains(idle.err, "not a command"))
        expect_usage_error(idle, "--idle-exit: must be a finite number, not 'nan'", "--idle-exit");
    auto never = kernelevo({"worker", "--redis", "redis://127.0.0.1:9/0", "--idle-exit", "1e9"}, kEnv, 60);
    if (!contains(never.err, "not a command"))
        expect_usage_error(never, "--idle-exit: must be a number of seconds from 0 to 604800 (a week), not '1e9'",
                           "--idle-exit 1e9");
    auto search = kernelevo(batch_search(state, dir.path(), {"--timeout", "1e10"}), kEnv);
    expect_usage_error(search, "--timeout: " + why + "1e10'", "search --timeout");
    for (const std::string& limit : {"1e308", "inf", "200h"}) {
        auto r = kernelevo(batch_search(state, dir.path(), {"--max-time", limit}), kEnv);
        expect_usage_error(r, "--max-time: at most a week (604800 s), not '" + limit + "'", "--max-time " + limit);
    }
    EXPECT_FALSE(fs::exists(state));
    EXPECT_FALSE(fs::exists(dir.path() / "suite"));
}

// Item 14: a file created at --out during the download is not replaced (the check was only at
// the start); --force still replaces.
TEST(TrustBoundaries, BatchFetchLeavesAFileCreatedDuringTheDownload) {
    TempDir dir;
    const fs::path out = dir.path() / "replies.jsonl";
    LoopbackServer server;
    const std::string batch = R"({"id":"batch_1","status":"completed","output_file_id":"file-out"})";
    const std::string replies = R"({"custom_id":"r1","response":{"status_code":200,"body":{}}})";
    server.push({200, {}, batch});
    server.push({200, {}, replies, 2.0});  // the download takes 2 s
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        write_file_atomic(out, "written meanwhile\n");
    });
    auto r =
        kernelevo({"llm", "batch", "fetch", "batch_1", "--out", out.string(), "--llm-url", server.base_url()}, kEnv);
    writer.join();
    expect_usage_error(r, "--out " + out.string() + " appeared while the replies were downloaded; it was left as it is",
                       "fetch");
    EXPECT_EQ(read_file(out), "written meanwhile\n");
    size_t others = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) others += e.path() != out;
    EXPECT_EQ(others, 0u) << "a temp file was left";
    server.push({200, {}, batch});
    server.push({200, {}, replies});
    auto forced = kernelevo(
        {"llm", "batch", "fetch", "batch_1", "--out", out.string(), "--force", "--llm-url", server.base_url()}, kEnv);
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_EQ(read_file(out), replies + "\n");
}

// Item 14: replies for a state that does not exist yet (or that --fresh empties) are refused
// before the state and its lock are made.
TEST(TrustBoundaries, RepliesForANewOrFreshStateAreRefusedBeforeAnythingIsCreated) {
    TempDir dir;
    const fs::path state = dir.path() / "state.db";
    const fs::path replies = dir.path() / "replies.jsonl";
    write_file_atomic(replies, R"({"custom_id":"r0.gelu_bias.sm_90:b1:g0.seed.a0","response":{}})"
                               "\n");
    auto r = kernelevo(batch_search(state.string(), dir.path(), {"--llm-batch-replies", replies.string()}), kEnv);
    expect_usage_error(r, "--llm-batch-replies " + replies.string() + ": there is no state at " + state.string(),
                       "new");
    for (const auto& e : fs::directory_iterator(dir.path())) EXPECT_EQ(e.path(), replies) << "created: " << e.path();
    ASSERT_EQ(kernelevo(batch_search(state.string(), dir.path()), kEnv).exit_code, 3);
    const std::string before = read_file(state);
    auto fresh =
        kernelevo(batch_search(state.string(), dir.path(), {"--fresh", "--llm-batch-replies", replies.string()}), kEnv);
    expect_usage_error(fresh, "--llm-batch-replies " + replies.string() + " with --fresh: ", "--fresh");
    EXPECT_EQ(read_file(state), before) << "--fresh emptied the state";
}

// Item 14: a full disk while `cache add` writes an entry leaves the entry as it was: never a new .cu
// beside no .json or an old one, and no temp file. The disk: a real 64 KiB tmpfs where the test may
// mount one (as root), else a file-size limit on the process (bash's ulimit -f).
TEST(TrustBoundaries, CacheAddOnAFullDiskLeavesNoHalfEntry) {
    TempDir dir;
    const fs::path cache = dir.path() / "kernels";
    fs::create_directories(cache);
    struct Disk {
        explicit Disk(const fs::path& at)
            : at(at), mounted(::mount("tmpfs", at.c_str(), "tmpfs", 0, "size=64k") == 0) {}
        ~Disk() {
            if (mounted) ::umount2(at.c_str(), MNT_DETACH);
        }
        fs::path at;
        bool mounted;
    } disk(cache);
    const fs::path good = kData / "gelu_bias" / "kernels" / "good.cu", other = dir.path() / "other.cu";
    write_file_atomic(other, read_file(good) + "// another kernel\n");
    ASSERT_LT(fs::file_size(other), 12000u);
    auto add = [&](const fs::path& kernel, size_t note_chars) {
        std::string cmd = "trap '' XFSZ; " + std::string(disk.mounted ? "" : "ulimit -f 16; ") + "exec '" + kExe +
                          "' cache add --task '" + kTask + "' --kernel '" + kernel.string() +
                          "' --arch sm_90 --cache-dir '" + cache.string() + "' --unvalidated --note '" +
                          std::string(note_chars, 'n') + "'";
        ProcessOptions o;
        o.argv = {"/bin/bash", "-c", cmd};
        o.timeout_s = 60;
        return run_process(o);
    };
    std::cout << "the full disk: " << (disk.mounted ? "a 64 KiB tmpfs" : "ulimit -f 16") << "\n";
    const std::string full = disk.mounted ? "No space left on device" : "File too large";
    const fs::path cu = cache / "gelu_bias" / "sm_90.cu", meta = cache / "gelu_bias" / "sm_90.json";
    // No entry before: nothing at all after (the .json, 70 KB of note, does not fit).
    auto first = add(other, 70000);
    expect_usage_error(first, full, "cache add, no entry before");
    EXPECT_FALSE(fs::exists(cu)) << "a .cu without its .json";
    EXPECT_FALSE(fs::exists(meta));
    // An entry before: it stays, byte for byte, not another kernel's .cu beside its .json.
    ASSERT_EQ(add(good, 5).exit_code, 0);
    const std::string cu_before = read_file(cu), meta_before = read_file(meta);
    auto second = add(other, 70000);
    expect_usage_error(second, full, "cache add over an entry");
    EXPECT_TRUE(contains(second.err, "the cache entry was left as it was")) << second.err;
    EXPECT_EQ(read_file(cu), cu_before);
    EXPECT_EQ(read_file(meta), meta_before);
    for (const auto& e : fs::directory_iterator(cache / "gelu_bias"))
        EXPECT_TRUE(e.path() == cu || e.path() == meta) << "left behind: " << e.path();
}

// Item 15: a server-chosen batch id "--force" is refused, never printed as an option to paste.
TEST(TrustBoundaries, ABatchIdStartingWithADashIsRefused) {
    TempDir dir;
    const fs::path input = dir.path() / "batch.jsonl";
    write_file_atomic(input, R"({"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}})"
                             "\n");
    LoopbackServer server;
    server.push({200, {}, R"({"id":"file-1","object":"file"})"});
    server.push({200, {}, R"({"id":"--force","status":"validating"})"});
    auto r = kernelevo({"llm", "batch", "submit", input.string(), "--llm-url", server.base_url()}, kEnv);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_FALSE(contains(r.out, "--force")) << r.out;
    EXPECT_TRUE(contains(r.err, "kernelevo: llm batch submit: ")) << r.err;
    EXPECT_TRUE(contains(r.err,
                         "gives a batch id that is not one (letters, digits, - _ . : only, not starting with -): "
                         "'--force'"))
        << r.err;
    EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
}

// Item 12: a Batch API server's request counts that are no counts.
TEST(TrustBoundaries, RequestCountsThatAreNoCountsAreAMalformedReply) {
    for (const std::string& total :
         {std::string("\"many\""), std::string("1e300"), std::string("-1"), std::string("2.5")}) {
        LoopbackServer server;
        server.push({200,
                     {},
                     R"({"id":"batch_1","status":"in_progress","request_counts":{"total":)" + total +
                         R"(,"completed":0,"failed":0}})"});
        auto r = kernelevo({"llm", "batch", "status", "batch_1", "--llm-url", server.base_url()}, kEnv);
        EXPECT_EQ(r.exit_code, 1) << total << "\n" << r.out << r.err;
        EXPECT_TRUE(contains(r.err, "kernelevo: llm batch status: the reply from ")) << total << "\n" << r.err;
        const std::string shown = total == "1e300" ? "1e+300" : total;
        EXPECT_TRUE(contains(r.err, "gives request_counts.total that is not a count: " + shown)) << r.err;
        EXPECT_FALSE(contains(r.out + r.err, "-9223372036854775808")) << r.out;
        EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
    }
}

// Item 12: a task file's values that once gave an internal error, were echoed whole, or were cut.
TEST(TrustBoundaries, TaskFileValuesGiveOneLineNamingTheFileAndField) {
    TempDir dir;
    const std::string task = task_with(dir.path(), "tolerance", R"({"atol": 1e999, "rtol": 1e-4})");
    expect_usage_error(kernelevo({"cache", "hash", "--task", task}), task + ": not valid JSON: ", "atol 1e999");
    const std::string huge = std::string(5000000, 'p');
    task_with(dir.path(), "precision", "\"" + huge + "\"");
    auto r = kernelevo({"cache", "hash", "--task", task});
    expect_usage_error(r, task + ": precision: unknown precision policy 'ppppp", "precision of 5 MB");
    EXPECT_LT(r.err.size(), 1000u) << "the value was echoed whole";
    task_with(dir.path(), "flops", R"("M\u0000 * 1e300")");
    expect_usage_error(kernelevo({"cache", "hash", "--task", task}), task + ": flops: a string with a NUL character",
                       "flops NUL");
    task_with(dir.path(), "precision", R"("fp32\u0000junk")");
    expect_usage_error(kernelevo({"cache", "hash", "--task", task}),
                       task + ": precision: unknown precision policy 'fp32\\x00junk'", "precision NUL");
}

// Item 12: import --out naming a regular file; a state whose metadata holds a raw ESC.
TEST(TrustBoundaries, AnImportOutThatIsAFileAndAStatesBrokenMetadataAreNamed) {
    TempDir dir;
    const fs::path file = dir.path() / "suite";
    write_file_atomic(file, "not a folder\n");
    write_file_atomic(dir.path() / "p.py", "# not run\n");
    auto r = kernelevo({"import", "kernelbench", (dir.path() / "p.py").string(), "--out", file.string()});
    expect_usage_error(r, "--out: " + file.string() + " exists and is not a folder", "import --out FILE");
    EXPECT_EQ(read_file(file), "not a folder\n");
    // The same for bench's report folder (it was "internal error: filesystem error").
    r = kernelevo({"bench", "--suite", dir.path().string(), "--out", file.string()});
    expect_usage_error(r, "--out: " + file.string() + " exists and is not a folder", "bench --out FILE");
    EXPECT_EQ(read_file(file), "not a folder\n");

    const std::string state = (dir.path() / "state.db").string();
    ASSERT_EQ(kernelevo(batch_search(state, dir.path()), kEnv).exit_code, 3);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(state.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value = '\"gelu\x1b[2J\"' WHERE key = 'task_name'", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    auto report = kernelevo({"report", "--state", state});
    expect_usage_error(report, state + " is a damaged KernelEvo state: its metadata 'task_name' is not valid JSON",
                       "report");
    EXPECT_FALSE(contains(report.err, "\x1b")) << "a raw ESC reached the terminal";
}

}  // namespace
}  // namespace kevo::clitest
