// The kernelevo command line through the real binary: search and llm before any request (no GPU, a
// bad or unreachable LLM), report of a run (never writing to it), and the files a user names.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cli/cli.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "compile/arch_support.h"
#include "llm/llm.h"
#include "../llm/loopback_server.h"
#include "cli_run.h"
#include "store/store.h"
#include "task/task.h"
#include "validate/validate.h"

namespace fs = std::filesystem;
using namespace kevo;
using nlohmann::json;

namespace {

using namespace kevo::clitest;

// ---- search: no GPU, unreachable LLM -------------------------------------------------------------

TEST(CliSearch, WithoutAGpuExitsTwoBeforeAnyRequestAndBeforeCreatingState) {
    if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
    llm::test::LoopbackServer server;
    TempDir dir;
    const fs::path state = dir.path() / "state.db", out = dir.path() / "kernels";
    auto t0 = std::chrono::steady_clock::now();
    auto r = kernelevo({"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out", out.string(), "--state",
                        state.string(), "--llm-url", server.base_url(), "--model", "m", "--json"},
                       {{"KERNELEVO_API_KEY", "sk-test-key"}});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "validates every candidate on the local GPU")) << r.err;
    EXPECT_TRUE(contains(r.err, "Nothing was sent to the LLM and no search state was created")) << r.err;
    EXPECT_FALSE(contains(r.err, "run again")) << r.err;
    EXPECT_TRUE(server.requests().empty());
    EXPECT_FALSE(fs::exists(state));
    EXPECT_FALSE(fs::exists(out));
}

TEST(CliSearch, ABadLlmConfigurationIsRejectedBeforeTheStateIsCreated) {
    TempDir dir;
    const fs::path state = dir.path() / "state.db";
    for (std::vector<std::string> bad : {std::vector<std::string>{"--llm-url", "ftp://example.org", "--model", "m"},
                                         {"--llm-url", "http://127.0.0.1:9/v1"}}) {  // no --model
        std::vector<std::string> args = {"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out",
                                         (dir.path() / "kernels").string(), "--state", state.string()};
        args.insert(args.end(), bad.begin(), bad.end());
        auto r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_FALSE(fs::exists(state)) << r.err;
    }
}

TEST(CliLlm, AnUnreachableUrlFailsWithinTheConnectTimeoutWithoutRetries) {
    std::string url;
    {
        llm::test::LoopbackServer closed;  // a port that was just free
        url = closed.base_url();
    }
    auto t0 = std::chrono::steady_clock::now();
    auto r = kernelevo({"llm", "check", "--llm-url", url, "--model", "m", "--llm-attempts", "6", "--llm-connect-timeout", "5"});
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_LT(took, 5.0);
    EXPECT_TRUE(contains(r.err, "not retried")) << r.err;
    EXPECT_FALSE(contains(r.err, "retrying")) << r.err;
}

TEST(CliLlm, CheckJsonReportsEveryModel) {
    llm::test::LoopbackServer server;
    server.push({200, {}, llm::test::chat_body("pong", "stop", 12, 1, 0.000042, "vendor/a-2025")});
    server.push({404, {}, R"({"error":{"message":"no such model"}})"});
    auto r = kernelevo({"llm", "check", "--llm-url", server.base_url(), "--model", "vendor/a", "--model", "vendor/b", "--json"},
                       {{"KERNELEVO_API_KEY", "sk-test-Zq8uV3rT5yW7"}});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    json j = json::parse(r.out);  // stdout is exactly one JSON object
    EXPECT_EQ(j["url"], server.base_url());
    EXPECT_EQ(j["key_source"], "KERNELEVO_API_KEY");
    EXPECT_EQ(j["ok"], false);
    ASSERT_EQ(j["models"].size(), 2u);
    EXPECT_EQ(j["models"][0]["model"], "vendor/a");
    EXPECT_EQ(j["models"][0]["status"], "ok");
    EXPECT_EQ(j["models"][0]["answered_by"], "vendor/a-2025");
    EXPECT_EQ(j["models"][0]["answer"], "pong");
    EXPECT_EQ(j["models"][0]["prompt_tokens"], 12);
    EXPECT_DOUBLE_EQ(j["models"][0]["cost_usd"].get<double>(), 0.000042);
    EXPECT_GT(j["models"][0]["latency_s"].get<double>(), 0);
    EXPECT_EQ(j["models"][1]["status"], "failed");
    EXPECT_TRUE(contains(j["models"][1]["error"].get<std::string>(), "404")) << j.dump(2);
    EXPECT_FALSE(contains(r.out + r.err, "sk-test-Zq8uV3rT5yW7"));
}

// ---- report ----------------------------------------------------------------------------------

// A small finished run written through the store API: 2 islands, 3 generations, a migration at
// generation 2 and a restart of island 1 at generation 2.
void write_run(const fs::path& file) {
    auto st = store::open_store(file.string());
    st->put_meta("task_name", "gelu_bias");
    st->put_meta("structure", json{{"arch", "sm_90"}, {"islands", 2}, {"children", 1}, {"seed", 0}});
    st->put_meta("stop_reason", "generations");
    st->put_meta("elapsed_s", 75.0);
    store::LlmCall call;
    call.key = "c1";
    call.kind = "seed";
    call.request = json::object();
    call.reply = "```cuda\n...\n```";
    call.model = "vendor/m";
    call.prompt_tokens = 1000;
    call.completion_tokens = 500;
    call.cost_usd = 0.01;
    st->add_llm_call(call);
    int n = 0;
    auto add = [&](int gen, int island, const std::string& status, double speedup, const std::string& origin) {
        store::Program p;
        p.key = "g" + std::to_string(gen) + ".i" + std::to_string(island) + "." + std::to_string(n++);
        p.generation = gen;
        p.island = island;
        p.origin = origin;
        p.source = "// kernel, with \"quotes\", commas\n";
        p.norm_hash = "h" + std::to_string(n);
        p.status = store::parse_program_status(status);
        p.speedup = speedup;
        p.feedback = status == "ok" ? "" : "error: x";
        p.details = status == "ok" ? json{{"kernel_us", 10.0 / speedup}, {"reference_us", 10.0}} : json::object();
        st->put_program(p);
    };
    add(0, 0, "ok", 1.0, "seed");
    add(0, 1, "compile_error", 0, "seed");
    add(0, 1, "ok", 1.1, "repair");
    add(1, 0, "ok", 1.4, "mutation");
    add(1, 1, "mismatch", 0, "mutation");
    add(2, 0, "ok", 1.9, "mutation");
    add(2, 1, "ok", 1.2, "mutation");
    auto gen = [](int g, double best, int64_t tokens) {
        store::Generation x;
        x.generation = g;
        x.best_speedup = best;
        x.tokens = tokens;
        return x;
    };
    st->commit_generation(gen(0, 1.1, 1500), {}, {});
    st->commit_generation(gen(1, 1.4, 3000), {}, {});
    st->commit_generation(gen(2, 1.9, 4500), {},
                          {{2, "migration", {{"from", 0}, {"to", 1}, {"programs", {6}}}},
                           {2, "restart", {{"island", 1}, {"restarts", 1}}}});
}

std::string sha_of(const fs::path& f) { return sha256_hex(read_file(f)); }

TEST(CliReport, NeverAltersAnEmptyOrForeignSqliteFile) {
    TempDir dir;
    const fs::path empty = dir.path() / "empty.db", foreign = dir.path() / "foreign.db";
    write_file_atomic(empty, "");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
        sqlite3_exec(db, "CREATE TABLE notes(t TEXT); INSERT INTO notes VALUES('mine');", nullptr, nullptr, nullptr);
        sqlite3_close(db);
    }
    const std::string foreign_sha = sha_of(foreign);
    for (const fs::path& f : {empty, foreign}) {
        auto r = kernelevo({"report", "--state", f.string(), "--json"});
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_TRUE(contains(r.err, "not a KernelEvo state")) << r.err;  // "...: it has tables notes", "an empty file, ..."
        EXPECT_EQ(json::parse(r.out, nullptr, false).value("exit_code", 0), 2) << r.out;  // under --json: only the error
        EXPECT_TRUE(contains(r.out, "not a KernelEvo state")) << r.out;
    }
    EXPECT_EQ(fs::file_size(empty), 0u);
    EXPECT_EQ(sha_of(foreign), foreign_sha);
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
        EXPECT_FALSE(fs::exists(empty.string() + suffix)) << suffix;
        EXPECT_FALSE(fs::exists(foreign.string() + suffix)) << suffix;
    }
    auto r = kernelevo({"report", "--state", (dir.path() / "none.db").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "no search state at")) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "none.db"));
}

TEST(CliReport, ReadsARunWithoutWritingToIt) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    write_run(state);
    const std::string before = sha_of(state);
    auto r = kernelevo({"report", "--state", state.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Task gelu_bias (sm_90), 3 generation(s) committed, stopped: generations")) << r.out;
    EXPECT_TRUE(contains(r.out, "Migrations: 1; restarts: 1 (island 1 at generation 2)")) << r.out;
    EXPECT_EQ(sha_of(state), before);
    for (const char* suffix : {"-wal", "-shm"}) EXPECT_FALSE(fs::exists(state.string() + suffix)) << suffix;

    // While a search has the state open (and writes to its WAL), the report sees what it committed.
    auto live = store::open_store(state.string());
    store::Generation g;
    g.generation = 3;
    g.best_speedup = 2.5;
    live->commit_generation(g, {}, {});
    r = kernelevo({"report", "--state", state.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["generations"].size(), 4u);
}

TEST(CliReport, JsonAndCandidateExports) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    write_run(state);
    auto r = kernelevo({"report", "--state", state.string(), "--json", "--candidates", (dir.path() / "c.csv").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["task"], "gelu_bias");
    EXPECT_EQ(j["arch"], "sm_90");
    EXPECT_EQ(j["islands"], 2);
    EXPECT_EQ(j["stop_reason"], "generations");
    EXPECT_EQ(j["candidates"]["ok"], 5);
    EXPECT_EQ(j["candidates"]["failed"], 2);
    EXPECT_EQ(j["candidates"]["repairs"], 1);
    EXPECT_EQ(j["llm"]["requests"], 1);
    EXPECT_EQ(j["llm"]["prompt_tokens"], 1000);
    EXPECT_DOUBLE_EQ(j["best"]["speedup"].get<double>(), 1.9);
    EXPECT_EQ(j["best"]["generation"], 2);
    ASSERT_EQ(j["generations"].size(), 3u);
    EXPECT_EQ(j["generations"][2]["tokens"], 4500);
    ASSERT_EQ(j["migrations"].size(), 1u);
    EXPECT_EQ(j["migrations"][0]["from"], 0);
    ASSERT_EQ(j["restarts"].size(), 1u);
    EXPECT_EQ(j["restarts"][0]["island"], 1);

    std::string csv = read_file(dir.path() / "c.csv");
    std::istringstream lines(csv);
    std::string header, line;
    std::getline(lines, header);
    EXPECT_EQ(header, "id,generation,island,origin,attempt,parent_id,status,speedup,kernel_us,reference_us,key,norm_hash,llm_call_id,created");
    int rows = 0;
    while (std::getline(lines, line)) ++rows;
    EXPECT_EQ(rows, 7);
    EXPECT_TRUE(contains(csv, ",compile_error,")) << csv;

    r = kernelevo({"report", "--state", state.string(), "--candidates", (dir.path() / "c.json").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json c = json::parse(read_file(dir.path() / "c.json"));
    ASSERT_EQ(c.size(), 7u);
    EXPECT_EQ(c[0]["status"], "ok");
    EXPECT_EQ(c[0]["source"], "// kernel, with \"quotes\", commas\n");
    EXPECT_EQ(c[1]["feedback"], "error: x");
    EXPECT_DOUBLE_EQ(c[5]["kernel_us"].get<double>(), 10.0 / 1.9);

    r = kernelevo({"report", "--state", state.string(), "--candidates", (dir.path() / "c.txt").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, ".csv, .json")) << r.err;
}

TEST(CliReport, PlotHasALegendIslandColoursAndMarks) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db", svg = dir.path() / "run.svg";
    write_run(state);
    auto r = kernelevo({"report", "--state", state.string(), "--plot", svg.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string s = read_file(svg);
    EXPECT_TRUE(contains(s, "class='legend'")) << s;
    for (const char* label : {">island 0<", ">island 1<", ">best so far<", ">migration<", ">restart (island colour)<"})
        EXPECT_TRUE(contains(s, label)) << label;
    // One colour per island: the dots of island 0 and island 1 differ.
    std::regex dot("class='candidate'[^>]*fill='(#[0-9a-f]{6})'");
    std::set<std::string> colours;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), dot); it != std::sregex_iterator(); ++it) colours.insert((*it)[1]);
    EXPECT_EQ(colours.size(), 2u) << s;
    EXPECT_EQ(std::count(s.begin(), s.end(), '\n') > 0, true);
    EXPECT_TRUE(contains(s, "class='migration'")) << s;
    EXPECT_TRUE(contains(s, "class='restart'")) << s;
    // Generation ticks are whole numbers, each shown once.
    std::regex tick("class='xtick'[^>]*>([^<]*)<");
    std::vector<std::string> gen_ticks;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), tick); it != std::sregex_iterator(); ++it) gen_ticks.push_back((*it)[1]);
    ASSERT_GE(gen_ticks.size(), 3u);
    EXPECT_EQ(std::vector<std::string>(gen_ticks.begin(), gen_ticks.begin() + 3), (std::vector<std::string>{"0", "1", "2"}));
}

TEST(CliReport, ShortAndEmptyRunsPlotSanely) {
    TempDir dir;
    // A run that committed only generation 0: the generation axis reads 0, 1 (no repeated labels).
    const fs::path one = dir.path() / "one.db";
    {
        auto st = store::open_store(one.string());
        st->put_meta("task_name", "t");
        store::Program p;
        p.key = "g0.seed.a0";
        p.status = store::ProgramStatus::ok;
        p.speedup = 1.3;
        p.norm_hash = "h";
        st->put_program(p);
        store::Generation g;
        g.best_speedup = 1.3;
        st->commit_generation(g, {}, {});
    }
    auto r = kernelevo({"report", "--state", one.string(), "--plot", (dir.path() / "one.svg").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string s = read_file(dir.path() / "one.svg");
    std::regex tick("<text class='xtick'[^>]*>([^<]*)<");
    std::vector<std::string> labels;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), tick); it != std::sregex_iterator(); ++it) labels.push_back((*it)[1]);
    ASSERT_GE(labels.size(), 2u) << s;
    EXPECT_EQ(labels[0], "0");
    EXPECT_EQ(labels[1], "1");
    EXPECT_FALSE(contains(s, "no data")) << s;

    // A state with nothing committed says so instead of drawing an empty frame.
    const fs::path none = dir.path() / "none.db";
    store::open_store(none.string())->put_meta("task_name", "t");
    r = kernelevo({"report", "--state", none.string(), "--plot", (dir.path() / "none.html").string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string page = read_file(dir.path() / "none.html");
    EXPECT_TRUE(contains(page, "no candidate was evaluated")) << page;  // a sentence, not an empty chart
    EXPECT_FALSE(contains(page, "<canvas")) << page;
    EXPECT_FALSE(contains(page, "uPlot")) << page;
    json j = json::parse(r.out);
    EXPECT_TRUE(j["best"].is_null());
    EXPECT_TRUE(j["generations"].empty());
}

// ---- files the user names: --task, --kernel ------------------------------------------------------

// Runs `args` with a deadline far below the test's: a FIFO or a device must be refused, not read.
ProcessResult quick(std::vector<std::string> args) {
    auto t0 = std::chrono::steady_clock::now();
    ProcessResult r = kernelevo(std::move(args), {}, 20);
    EXPECT_FALSE(r.timed_out) << "blocked on a file it should have refused";
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);
    return r;
}

TEST(CliInputFiles, ATaskThatIsADirectoryAFifoADeviceOrHugeIsRefusedWithTheReason) {
    TempDir dir("kevo-cli-inputs");
    const std::string task = (kData / "gelu_bias" / "task.json").string();
    const std::string good_kernel = (kData / "gelu_bias" / "kernels" / "good.cu").string();
    const fs::path fifo = dir.path() / "task.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const fs::path big = dir.path() / "big.json";
    write_file_atomic(big, "{\"name\": \"" + std::string(17u << 20, 'x') + "\"}");
    const fs::path empty_dir = dir.path() / "empty";
    fs::create_directories(empty_dir);

    struct Case {
        std::string task, expect;
    };
    const std::vector<Case> cases = {
        {(kData / "gelu_bias").string(), "is a directory; give its task.json (" + (kData / "gelu_bias" / "task.json").string() + ")"},
        {empty_dir.string(), "is a directory, not a task file (and it holds no task.json)"},
        {fifo.string(), "is a FIFO (named pipe), not a task file"},
        {"/dev/zero", "is a character device, not a task file"},
        {big.string(), "is too large for a task file (17.0 MB; at most 16.0 MB)"},
    };
    for (const auto& c : cases)
        for (std::vector<std::string> args : {std::vector<std::string>{"cache", "hash", "--task", c.task},
                                              std::vector<std::string>{"validate", "--task", c.task, "--kernel", good_kernel}}) {
            SCOPED_TRACE(args[0] + " --task " + c.task);
            ProcessResult r = quick(args);
            EXPECT_EQ(r.exit_code, 2) << r.err;
            EXPECT_TRUE(contains(r.err, "kernelevo: error: " + c.task + ": ")) << r.err;
            EXPECT_TRUE(contains(r.err, c.expect)) << r.err;
            EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
            EXPECT_FALSE(contains(r.err, "not valid JSON")) << r.err;
        }
}

TEST(CliInputFiles, AKernelThatIsADirectoryAFifoADeviceOrHugeIsRefusedWithTheReason) {
    TempDir dir("kevo-cli-inputs");
    const std::string task = (kData / "gelu_bias" / "task.json").string();
    const fs::path fifo = dir.path() / "kernel.cu";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const fs::path big = dir.path() / "big.cu";
    write_file_atomic(big, std::string(17u << 20, '/'));
    const std::vector<std::pair<std::string, std::string>> cases = {
        {dir.path().string(), "--kernel: " + dir.path().string() + " is a directory, not a kernel file (.cu, or a Triton .py)"},
        {fifo.string(), "--kernel: " + fifo.string() + " is a FIFO (named pipe), not a kernel file"},
        {"/dev/zero", "--kernel: /dev/zero is a character device, not a kernel file"},
        {big.string(), "--kernel: " + big.string() + " is too large for a kernel file (17.0 MB; at most 16.0 MB)"},
        {(dir.path() / "none.cu").string(), "--kernel: cannot read " + (dir.path() / "none.cu").string() + ": No such file"},
    };
    for (const auto& [kernel, expect] : cases)
        for (std::vector<std::string> args :
             {std::vector<std::string>{"validate", "--task", task, "--kernel", kernel},
              std::vector<std::string>{"cache", "add", "--task", task, "--kernel", kernel, "--arch", "sm_90", "--cache-dir",
                                       (dir.path() / "cache").string(), "--unvalidated"}}) {
            SCOPED_TRACE(args[0] + " --kernel " + kernel);
            ProcessResult r = quick(args);
            EXPECT_EQ(r.exit_code, 2) << r.err;
            EXPECT_TRUE(contains(r.err, "kernelevo: error: " + expect)) << r.err;
        }
    EXPECT_FALSE(fs::exists(dir.path() / "cache"));
}

}  // namespace
