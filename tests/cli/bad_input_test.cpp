// Bad input that was once accepted silently (issue 37, item 8), through the real kernelevo binary:
// each gets one clear line and exit 2, and leaves nothing behind (no state, no file changed).
// Real SQLite files, a real redis-server (skipped only when none is installed), real files.
// And what a user following the README met in their own setup (issue 51 item 4): each says what it
// found, once, naming what it looked at.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "../store/redis_server.h"
#include "cli_run.h"
#include "common/fs.h"
#include "store/store.h"

namespace kevo::clitest {
namespace {

const std::string kTask = (kData / "gelu_bias" / "task.json").string();
const std::map<std::string, std::string> kEnv = {{"KERNELEVO_API_KEY", "sk-test-key-0123456789"}};

// A search that needs no GPU (batch mode writes its requests and stops, exit 3), plus `extra`.
std::vector<std::string> batch_search(const std::string& state, const fs::path& dir, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"search", "--task", kTask, "--out", (dir / "kernels").string(), "--state", state,
                                  "--arch", "sm_90", "--llm-batch", "--llm-batch-dir", dir.string(), "--model", "gpt-x",
                                  "--llm-url", "http://127.0.0.1:9/v1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// Exit 2 with one "kernelevo: error: " line holding `text`, and no internal error.
void expect_usage_error(const ProcessResult& r, const std::string& text, const std::string& what) {
    EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "kernelevo: error: ")) << what << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, text)) << what << "\n" << r.err;
    EXPECT_FALSE(contains(r.err, "internal error")) << what << "\n" << r.err;
}

// "llm.example.invalid" of "https://llm.example.invalid/v1".
std::string url_host_of(const std::string& url) {
    const size_t begin = url.find("://") + 3;
    return url.substr(begin, url.find('/', begin) - begin);
}

TEST(BadInput, AFlopsExpressionNestedTwentyThousandDeepIsAnErrorNotACrash) {
    TempDir dir;
    nlohmann::json task = nlohmann::json::parse(read_file(kTask));
    task["reference"]["source"] = (kData / "gelu_bias" / task["reference"]["source"].get<std::string>()).string();
    for (const std::string& flops : {std::string(20000, '(') + "M" + std::string(20000, ')'),
                                     std::string(2000, '(') + "M" + std::string(2000, ')')}) {
        task["flops"] = flops;
        write_file_atomic(dir.path() / "deep.json", task.dump());
        auto r = kernelevo({"cache", "hash", "--task", (dir.path() / "deep.json").string()});
        expect_usage_error(r, "deep.json: flops: ", "cache hash");
        EXPECT_LT(r.err.size(), 600u) << "the error quotes the whole expression";
    }
}

TEST(BadInput, SearchRefusesAStateMissingATableAsReportDoes) {
    TempDir dir;
    const fs::path state = dir.path() / "state.db";
    ASSERT_EQ(kernelevo(batch_search(state.string(), dir.path()), kEnv).exit_code, 3);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(state.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE programs", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    const std::string before = read_file(state);
    const std::string why = state.string() + " is a damaged KernelEvo state: its table(s) programs are missing";
    for (const auto& args : {batch_search(state.string(), dir.path()), batch_search(state.string(), dir.path(), {"--fresh"}),
                             std::vector<std::string>{"report", "--state", state.string()}}) {
        expect_usage_error(kernelevo(args, kEnv), why, args[0] + " " + args.back());
        EXPECT_TRUE(read_file(state) == before) << args[0] << " changed the state";
    }
}

TEST(BadInput, ARedisPrefixHoldingAnotherApplicationsKeysIsNoState) {
    if (!testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
    testing::RedisServer server;
    ASSERT_TRUE(server.start()) << server.error();
    ASSERT_TRUE(server.call({"SET", "{shop}:users:1", "ann"}));
    TempDir dir;
    for (bool fresh : {false, true}) {
        auto r = kernelevo(batch_search(server.url("shop"), dir.path(), fresh ? std::vector<std::string>{"--fresh"}
                                                                              : std::vector<std::string>{}), kEnv);
        expect_usage_error(r, "the prefix {shop}: holds keys that are not a KernelEvo state ({shop}:users:1, and no {shop}:meta)",
                           fresh ? "--fresh" : "search");
        std::vector<std::string> value, meta;
        ASSERT_TRUE(server.call({"GET", "{shop}:users:1"}, &value));
        EXPECT_EQ(value, std::vector<std::string>{"ann"}) << "another application's key was changed";
        ASSERT_TRUE(server.call({"EXISTS", "{shop}:meta"}, &meta));
        EXPECT_EQ(meta, std::vector<std::string>{"0"}) << "a state was created among them";
    }
    // An empty prefix on the same server becomes a state as before.
    EXPECT_EQ(kernelevo(batch_search(server.url("mine"), dir.path()), kEnv).exit_code, 3);
}

TEST(BadInput, ABatchReplyLargerThanAnyReplyOnlineIsRefusedWhole) {
    TempDir dir;
    const std::string state = (dir.path() / "state.db").string();
    ASSERT_EQ(kernelevo(batch_search(state, dir.path()), kEnv).exit_code, 3);
    const fs::path big = dir.path() / "replies.jsonl";
    write_file_atomic(big, R"({"custom_id": "x", "response": {"status_code": 200, "body": {"content": ")" +
                               std::string(65u << 20, 'a') + "\"}}}\n");
    // What the state holds: its LLM calls and batch records (the file's bytes may change: SQLite).
    auto holdings = [&] {
        auto s = store::open_store(state, store::Access::read_only);
        std::string all;
        for (const auto& c : s->llm_calls()) all += c.key + "\n";
        for (const auto& b : s->batch_requests()) all += b.custom_id + " " + b.error + "\n";
        return all;
    };
    const std::string before = holdings();
    auto r = kernelevo(batch_search(state, dir.path(), {"--llm-batch-replies", big.string()}), kEnv);
    expect_usage_error(r, big.string() + ":1: a reply line of 65 MB; a reply is at most 64 MB, in a file as online", "import");
    EXPECT_EQ(holdings(), before) << "the refused import changed the state";
}

TEST(BadInput, OutOfRangeAndNonFiniteOptionsAreRefusedBeforeAnyState) {
    TempDir dir;
    write_file_atomic(dir.path() / "a.jsonl", "");
    write_file_atomic(dir.path() / "b.jsonl", "");
    const std::string state = (dir.path() / "state.db").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--seed", "-1"}, "--seed: must be a whole number from 0 to 9223372036854775807, not '-1'"},
        {{"--seed", "1e23"}, "--seed: must be a whole number from 0 to 9223372036854775807, not '1e23'"},
        {{"--seed", "9223372036854775808"}, "--seed: must be a whole number"},
        {{"--llm-temperature", "nan"}, "--llm-temperature: must be a finite number, not 'nan'"},
        {{"--llm-temperature", "-3"}, "--llm-temperature: "},
        {{"--timeout", "nan"}, "--timeout: must be a finite number, not 'nan'"},
        {{"--timeout", "inf"}, "--timeout: must be a finite number, not 'inf'"},
        {{"--temperature", "nan"}, "--temperature: must be a finite number"},
        {{"--llm-timeout", "nan"}, "--llm-timeout: must be a finite number"},
        {{"--budget-usd", "nan"}, "--budget-usd: must be a finite number"},
        {{"--target-sol", "nan"}, "--target-sol: must be a finite number"},
        {{"--llm-replay", (dir.path() / "a.jsonl").string(), "--replay", (dir.path() / "b.jsonl").string()}, "--llm-replay excludes --replay"},
        {{"--llm-url", "http://127.0.0.1:9/v1\r\nX-Injected: 1"}, "--llm-url: must not contain control characters (\\x0d at character 22)"},
        {{"--llm-url", "http://127.0.0.1:9/v1\n"}, "--llm-url: must not contain control characters (\\x0a"},
        {{"--llm-replay", (dir.path() / "a.jsonl").string(), "--llm-replay", (dir.path() / "b.jsonl").string()},
         "--llm-replay is given 2 times: give it once"},
        {{"--seed", "1", "--seed", "2"}, "--seed is given 2 times: give it once"},
    };
    for (const auto& [extra, why] : cases) {
        auto r = kernelevo(batch_search(state, dir.path(), extra), kEnv);
        expect_usage_error(r, why, extra[0] + " " + extra[1]);
        EXPECT_FALSE(fs::exists(state)) << extra[0] << " " << extra[1] << ": a state was created";
    }
    // --state '' is not "the default state".
    auto empty = kernelevo(batch_search("", dir.path()), kEnv);
    expect_usage_error(empty, "--state: must not be empty", "--state ''");
    expect_usage_error(kernelevo({"report", "--state", ""}), "--state: must not be empty", "report --state ''");
    // The same checks on the other commands' seeds and timeouts.
    expect_usage_error(kernelevo({"validate", "--task", kTask, "--kernel", "k.cu", "--seed", "1e23"}), "--seed: must be a whole number", "validate");
    expect_usage_error(kernelevo({"tune", "--task", kTask, "--kernel", "k.cu", "--seed", "-1"}), "--seed: must be a whole number", "tune");
    expect_usage_error(kernelevo({"validate", "--task", kTask, "--kernel", "k.cu", "--timeout", "nan"}), "--timeout: must be a finite number", "validate");
    expect_usage_error(kernelevo({"llm", "check", "--model", "m", "--llm-url", "http://h/v1\r\n"}), "--llm-url: must not contain control characters", "llm check");
    // Problems imported at once (issue 48): each its own Python, at most 64.
    expect_usage_error(kernelevo({"import", "kernelbench", "p.py", "--out", (dir.path() / "suite").string(), "--jobs", "65"}),
                       "--jobs: must be between 0 and 64, not 65", "import --jobs 65");
    EXPECT_FALSE(fs::exists(dir.path() / "suite")) << "import --jobs 65 created its suite";
}

TEST(BadInput, CacheAddUnvalidatedRefusesAnEmptyOrBinaryKernel) {
    TempDir dir;
    const fs::path cache = dir.path() / "kernels";
    fs::create_directories(cache);
    const std::vector<std::pair<std::string, std::string>> kernels = {
        {"", "is empty, not a kernel file"}, {"\n  \n", "is blank, not a kernel file"},
        {std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10), "is a binary file (a NUL byte at offset 7)"}};
    for (const auto& [bytes, why] : kernels) {
        write_file_atomic(dir.path() / "k.cu", bytes);
        auto r = kernelevo({"cache", "add", "--task", kTask, "--kernel", (dir.path() / "k.cu").string(), "--arch", "sm_90",
                            "--cache-dir", cache.string(), "--unvalidated"});
        expect_usage_error(r, "--kernel: " + (dir.path() / "k.cu").string() + " " + why, why);
        EXPECT_TRUE(fs::is_empty(cache)) << why << ": something was stored";
    }
}

// The search's settings are checked once, in the library (evolve::validate(), whose messages name
// them in words); the command shows each under its flag, as it always did, before any state.
TEST(BadInput, TheSearchsSettingsAreNamedByTheirFlags) {
    TempDir dir;
    const std::string state = (dir.path() / "state.db").string();
    write_file_atomic(dir.path() / "not_a_dir", "");
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--islands", "65"}, "--islands: must be between 1 and 64, not 65"},
        {{"--repair-attempts", "51"}, "--repair-attempts: must be between 0 and 50, not 51"},
        {{"--generations", "-1"}, "--generations: must be 0 or more, not -1"},
        {{"--temperature", "0"}, "--temperature: must be a positive number, not 0"},
        {{"--llm-temperature", "2.5"}, "--llm-temperature: must be between 0 and 2, not 2.5"},
        {{"--max-tokens", "0"}, "--max-tokens: must be a positive number, not 0"},
        {{"--target-sol", "1.5"}, "--target-sol: must be between 0 and 1, not 1.5"},
        {{"--max-time", "5x"}, "--max-time: cannot read '5x' (use e.g. 900, 30m or 2h)"},
        {{"--backend", "both", "--islands", "1"}, "--backend both needs at least 2 islands (island 0 writes Triton, island 1 CUDA, and so on in turn)"},
        {{"--model", "other"}, "--llm-batch needs exactly one --model: a Batch API input file holds requests for one model"},
        {{"--budget-usd", "2"}, "--llm-batch with --budget-usd needs --llm-price (the batch price): Batch API replies report no cost"},
        {{"--prompts", (dir.path() / "not_a_dir").string()}, "--prompts: " + (dir.path() / "not_a_dir").string() + " is not a directory"},
    };
    for (const auto& [extra, why] : cases) {
        auto r = kernelevo(batch_search(state, dir.path(), extra), kEnv);
        expect_usage_error(r, "kernelevo: error: " + why, extra[0] + " " + extra[1]);
        EXPECT_FALSE(contains(r.err, "the number of")) << r.err;  // the library's words are not shown
        EXPECT_FALSE(fs::exists(state)) << extra[0] << " " << extra[1] << ": a state was created";
    }
    // The same under --json, and with --model-dir (checked before any region's search starts).
    auto json = kernelevo(batch_search(state, dir.path(), {"--islands", "0", "--json"}), kEnv);
    EXPECT_TRUE(contains(json.out, "\"error\":\"--islands: must be between 1 and 64, not 0\"")) << json.out;
    auto model = kernelevo({"search", "--model-dir", dir.path().string(), "--max-time", "1h", "--children", "0"});
    expect_usage_error(model, "--children: must be between 1 and 64, not 0", "--model-dir --children 0");
}

TEST(BadInput, BatchFetchDoesNotOverwriteAnExistingFileUnlessForced) {
    TempDir dir;
    const fs::path out = dir.path() / "replies.jsonl";
    write_file_atomic(out, "replies fetched before\n");
    auto r = kernelevo({"llm", "batch", "fetch", "batch_1", "--out", out.string(), "--llm-url", "http://127.0.0.1:9/v1"}, kEnv);
    expect_usage_error(r, "--out " + out.string() + " exists: give another file, or --force to replace it", "fetch");
    EXPECT_EQ(read_file(out), "replies fetched before\n");
    // With --force it goes on (and here fails to reach the server: not the file's fault).
    auto forced = kernelevo({"llm", "batch", "fetch", "batch_1", "--out", out.string(), "--force", "--llm-url",
                             "http://127.0.0.1:9/v1", "--llm-attempts", "1"}, kEnv);
    EXPECT_NE(forced.exit_code, 0);
    EXPECT_FALSE(contains(forced.err, "--force to replace it")) << forced.err;
    EXPECT_EQ(read_file(out), "replies fetched before\n");
}

// Issue 51 item 4a: python3 on PATH without torch, /usr/bin/python3 with it: `import kernelbench`
// uses /usr/bin/python3, and doctor reports that one (kernelbench::find_python, the one choice).
TEST(OwnSetup, DoctorReportsThePythonTheImportUses) {
    ProcessOptions probe;
    probe.argv = {"/usr/bin/python3", "-c", "import torch"};
    if (!run_process(probe).ok()) GTEST_SKIP() << "/usr/bin/python3 has no torch here";
    TempDir dir;
    const fs::path bin = dir.path() / "bin";
    fs::create_directories(bin);
    // python3 without its site packages: no torch.
    write_file_atomic(bin / "python3", "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n");
    fs::permissions(bin / "python3", fs::perms::owner_all);
    const std::map<std::string, std::string> env = {{"PATH", bin.string() + ":/usr/bin:/bin"},
                                                    {"KERNELEVO_PYTHON", ""}};
    auto r = kernelevo({"doctor", "--json"}, env);
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe() << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["python"].value("command", ""), "/usr/bin/python3") << j["python"].dump();
    EXPECT_TRUE(j["python"].contains("torch")) << "pytorch missing, the import finds it: " << j["python"].dump();
    // Triton candidates use python3 (no KERNELEVO_PYTHON): the wrapper, probed on its own.
    EXPECT_EQ(j["triton_python"].value("command", ""), "python3") << j["triton_python"].dump();
    auto text = kernelevo({"doctor"}, env);
    EXPECT_FALSE(contains(text.out, "pytorch   missing")) << text.out;
    EXPECT_TRUE(contains(text.out, "(/usr/bin/python3")) << text.out;
}

// Issue 51 item 4f: `llm check` without a key for a hosted provider stops before sending (exit 2),
// naming the variables it looked at; a server on this machine may take no key and is asked.
TEST(OwnSetup, LlmCheckWithoutAKeyNamesTheVariablesAndSendsNothing) {
    struct Case {
        std::string url, vars;
    };
    for (const Case& c : {Case{"https://openrouter.ai/api/v1", "$KERNELEVO_API_KEY and $OPENROUTER_API_KEY"},
                          Case{"https://llm.example.invalid/v1", "$KERNELEVO_API_KEY and $OPENAI_API_KEY"}}) {
        auto r = kernelevo({"llm", "check", "--model", "m", "--llm-url", c.url, "--llm-attempts", "1"}, {}, 60);
        expect_usage_error(r, "no API key for " + url_host_of(c.url) + ": " + c.vars + " are unset or empty", c.url);
        EXPECT_TRUE(contains(r.err, "Nothing was sent")) << r.err;
        EXPECT_FALSE(contains(r.out, "model:")) << "a request was sent: " << r.out;
    }
    // OPENROUTER_API_KEY is never sent to another host: said, with how to send it anyway.
    auto r = kernelevo({"llm", "check", "--model", "m", "--llm-url", "https://llm.example.invalid/v1"},
                       {{"OPENROUTER_API_KEY", "sk-or-test-0123456789"}}, 60);
    expect_usage_error(r, "$OPENROUTER_API_KEY is set, but it is sent only to openrouter.ai", "withheld");
    // A local server: asked without a key (here nothing listens: the request fails, exit 1).
    auto local = kernelevo({"llm", "check", "--model", "m", "--llm-url", "http://127.0.0.1:9/v1", "--llm-attempts", "1"},
                           {}, 60);
    EXPECT_EQ(local.exit_code, 1) << local.err;
    EXPECT_TRUE(contains(local.out, "key:      none ($KERNELEVO_API_KEY and $OPENAI_API_KEY are unset")) << local.out;
}

}  // namespace
}  // namespace kevo::clitest
