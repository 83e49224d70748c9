// The search in batch mode (--llm-batch) on the CPU: requests written to Batch API files, replies
// imported, and batch files that belong to their run (issue 28). Scripted replies and evaluator.
#include <gtest/gtest.h>

#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "evolve/archive.h"
#include "evolve/batch_mode.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "llm/budget.h"
#include "scripted.h"
#include "search_run.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

using testing::kernel_reply;
using testing::prompt_kind;
using testing::ScriptedEvaluator;
using testing::ScriptedProvider;
using testing::user_prompt;

using testing::evolving;
using namespace search_testing;

// ---- Batch mode -------------------------------------------------------------------------------

namespace batch {

SearchConfig config(const fs::path& dir) {
    SearchConfig cfg = small(3);
    cfg.requests.model = "vendor/m";
    cfg.batch.enabled = true;
    cfg.batch.prefix = (dir / "gelu").string();
    cfg.batch.url = "https://api.openai.com/v1";
    return cfg;
}

std::vector<std::string> lines_of(const fs::path& file) {
    std::vector<std::string> out;
    std::istringstream in(read_file(file));
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(l);
    return out;
}

// Batch mode must never send a request itself.
std::string never(const llm::ChatRequest&) {
    ADD_FAILURE() << "a request was sent";
    return "";
}

}  // namespace batch

TEST(SearchBatch, WritesRequestsAndResumesFromTheRepliesToTheOutcomeOfAnOnlineRun) {
    SearchConfig online_cfg = small(3);
    online_cfg.requests.model = "vendor/m";
    SearchRun online;
    ScriptedProvider p0(evolving);
    ASSERT_EQ(online.run(online_cfg, p0).stop_reason, "generations");

    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    ScriptedProvider never(batch::never);
    SearchResult res = b.run(cfg, never);
    ASSERT_EQ(res.stop_reason, "batch");
    EXPECT_EQ(res.batch_written, 1);  // the seed
    EXPECT_EQ(res.batch_file, (b.dir.path() / "gelu-1.jsonl").string());
    // The Batch API input format, with the body HttpProvider would send to that URL.
    auto first = batch::lines_of(res.batch_file);
    ASSERT_EQ(first.size(), 1u);
    nlohmann::json line = nlohmann::json::parse(first[0]);
    // The custom_id names the run (its id in the state), the task and the architecture.
    const std::string run_id = b.store->get_meta("run_id").value_or("").get<std::string>();
    EXPECT_TRUE(std::regex_match(run_id, std::regex("r[0-9a-f]{8}"))) << run_id;
    EXPECT_EQ(line["custom_id"], run_id + ".gelu_bias.sm_90:b1:g0.seed.a0");
    EXPECT_EQ(line["method"], "POST");
    EXPECT_EQ(line["url"], "/v1/chat/completions");
    EXPECT_EQ(line["body"]["model"], "vendor/m");
    EXPECT_EQ(line["body"]["max_completion_tokens"], 8192);
    EXPECT_EQ(line["body"]["messages"].size(), 2u);
    EXPECT_TRUE(line["body"]["seed"].is_number_integer());
    // The store records which request went into which file.
    auto recorded = b.store->batch_requests();
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].key, "g0.seed.a0");
    EXPECT_EQ(recorded[0].file, res.batch_file);
    EXPECT_EQ(recorded[0].batch, 1);
    EXPECT_GT(recorded[0].reserved_tokens, 8192);

    // Rounds: answer each file and resume with every replies file so far (the earlier ones are
    // skipped, never counted twice). One line fails once, as in an expired batch.
    int rounds = 1;
    std::string failed_id;
    while (res.stop_reason == "batch") {
        ASSERT_LT(rounds, 80);
        std::vector<std::string> fail;
        auto requests = testing::batch_requests_of(read_file(res.batch_file));
        EXPECT_EQ(static_cast<int>(requests.size()), res.batch_written);
        if (failed_id.empty() && requests.size() >= 2) fail = {failed_id = requests[1].first};
        fs::path out = b.dir.path() / ("replies-" + std::to_string(rounds) + ".jsonl");
        write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), evolving, fail));
        cfg.batch.replies.push_back(out.string());
        res = b.run(cfg, never);
        ++rounds;
    }
    EXPECT_EQ(res.stop_reason, "generations");
    ASSERT_FALSE(failed_id.empty());
    EXPECT_EQ(outcome(b), outcome(online));
    EXPECT_EQ(b.store->spent().calls, online.store->spent().calls);
    EXPECT_EQ(b.store->spent().tokens(), online.store->spent().tokens());
    // The same requests as an online run asks (program ids in the prompts may differ: the slots
    // finish in another order); the reply names the model that answered.
    for (const auto& call : online.store->llm_calls()) {
        auto stored = b.store->find_llm_call(call.key);
        ASSERT_TRUE(stored) << call.key;
        for (const char* field : {"seed", "model", "max_tokens", "temperature"})
            EXPECT_EQ(stored->request[field], call.request[field]) << call.key << " " << field;
        EXPECT_EQ(stored->kind, call.kind) << call.key;
        EXPECT_EQ(stored->model, "vendor/m-2025");
    }
    // The failed line's request went into a later batch under a new custom_id.
    std::string failed_key = parse_batch_custom_id(failed_id).value().key;
    int failed = 0, again = 0;
    for (const auto& r : b.store->batch_requests()) {
        if (r.custom_id == failed_id) {
            EXPECT_NE(r.error.find("batch_expired"), std::string::npos) << r.error;
            ++failed;
        }
        if (r.key == failed_key && r.custom_id != failed_id && r.error.empty()) ++again;
    }
    EXPECT_EQ(failed, 1);
    EXPECT_EQ(again, 1);
    std::string text = report_text(*b.store);
    EXPECT_NE(text.find("Batches: " + std::to_string(rounds - 1) + " file(s), "), std::string::npos) << text;
    EXPECT_NE(text.find(" answered, 1 failed, 0 waiting (last: " + b.dir.path().string() + "/gelu-"), std::string::npos)
        << text;
}

TEST(SearchBatch, RequestsWaitingInABatchAreNeverSentOnline) {
    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    ScriptedProvider never(batch::never);
    SearchResult res = b.run(cfg, never);
    ASSERT_EQ(res.stop_reason, "batch");

    // Online, without the replies: the seed waits for its batch.
    SearchConfig online = cfg;
    online.batch.enabled = false;
    ScriptedProvider p(evolving);
    SearchResult waiting = b.run(online, p);
    EXPECT_EQ(waiting.stop_reason, "batch");
    EXPECT_EQ(waiting.batch_waiting, 1);
    EXPECT_EQ(waiting.batch_written, 0);
    EXPECT_EQ(p.calls(), 0u);
    // Again in batch mode: nothing new to write, the same request is not written twice.
    SearchResult again = b.run(cfg, never);
    EXPECT_EQ(again.stop_reason, "batch");
    EXPECT_EQ(again.batch_written, 0);
    EXPECT_EQ(b.store->batch_requests().size(), 1u);

    // With the replies, the run goes on online.
    fs::path out = b.dir.path() / "replies.jsonl";
    write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), evolving));
    online.batch.replies = {out.string()};
    EXPECT_EQ(b.run(online, p).stop_reason, "generations");
    EXPECT_GT(p.calls(), 0u);
    for (const auto& q : p.requests()) EXPECT_NE(prompt_kind(q), "seed") << "the seed's reply was requested again";
}

TEST(SearchBatch, RefusesRepliesThatAreNotThisRunsAndBadSettings) {
    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    ScriptedProvider never(batch::never);
    ASSERT_EQ(b.run(cfg, never).stop_reason, "batch");
    fs::path other = b.dir.path() / "other.jsonl";
    write_file_atomic(other, R"({"id":"x","custom_id":"b1:g7.i0.c0.a0","response":{"status_code":200,"body":{}},"error":null})"
                             "\n");
    cfg.batch.replies = {other.string()};
    try {
        b.run(cfg, never);
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("other.jsonl:1: custom_id 'b1:g7.i0.c0.a0' has no run id"),
                  std::string::npos) << e.what();
    }
    write_file_atomic(other, "not json\n");
    EXPECT_THROW(b.run(cfg, never), UsageError);
    EXPECT_TRUE(b.store->llm_calls().empty());

    SearchConfig no_model = batch::config(b.dir.path());
    no_model.requests.model.clear();
    EXPECT_THROW(validate(no_model), UsageError);  // the search's caller checks it (workflows::search_config)
    SearchConfig no_price = batch::config(b.dir.path());
    no_price.stopping.budget_usd = 1;
    EXPECT_THROW(validate(no_price), UsageError);
}

TEST(SearchBatch, ImportedRepliesCountTheReportedCostElseThePrice) {
    for (double reported : {0.0125, -1.0}) {
        SearchRun b;
        SearchConfig cfg = batch::config(b.dir.path());
        cfg.requests.price = llm::Price{1, 2};   // 100 * 1e-6 + 50 * 2e-6 = $0.0002 per reply
        ScriptedProvider never(batch::never);
        SearchResult res = b.run(cfg, never);
        ASSERT_EQ(res.stop_reason, "batch");
        fs::path out = b.dir.path() / "replies.jsonl";
        write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), evolving, {}, reported));
        cfg.batch.replies = {out.string()};
        b.run(cfg, never);
        auto call = b.store->find_llm_call("g0.seed.a0");
        ASSERT_TRUE(call);
        EXPECT_DOUBLE_EQ(call->cost_usd, reported >= 0 ? reported : 0.0002);
        EXPECT_EQ(call->prompt_tokens, 100);
        EXPECT_EQ(call->completion_tokens, 50);
    }
}

TEST(SearchBatch, TheBudgetHoldsWhatIsDeferred) {
    SearchRun b;
    SearchConfig cfg = batch::config(b.dir.path());
    cfg.stopping.budget_tokens = 1000;  // less than one request may use
    ScriptedProvider never(batch::never);
    SearchResult res = b.run(cfg, never);
    EXPECT_EQ(res.stop_reason, "budget");
    EXPECT_TRUE(res.batch_file.empty());
    EXPECT_TRUE(b.store->batch_requests().empty());
}

// ---- Batch files belong to their run (issue 28) ------------------------------------------------

namespace batch {

// Everything an import could change, read back through the store (and, for the file on disk,
// through a second, read-only connection).
std::string fingerprint(store::Store& s) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& c : s.llm_calls())
        j["calls"].push_back({c.key, c.kind, c.reply, c.model, c.prompt_tokens, c.completion_tokens, c.cost_usd});
    for (const auto& b : s.batch_requests()) j["batch"].push_back({b.custom_id, b.key, b.file, b.error});
    store::Spent spent = s.spent();
    j["spent"] = {spent.calls, spent.prompt_tokens, spent.completion_tokens, spent.cost_usd};
    for (const auto& p : s.programs()) j["programs"].push_back({p.key, p.status});
    j["run_id"] = s.get_meta("run_id").value_or(nullptr);
    j["generation"] = s.last_generation();
    return j.dump();
}
std::string on_disk(const fs::path& state) {
    return fingerprint(*store::open_store(state.string(), store::Access::read_only));
}

// A batch-mode run of `task` on `arch` that wrote its first batch file (the seed's request).
struct BatchRun {
    explicit BatchRun(const std::string& task_dir = "gelu_bias", const std::string& arch = "sm_90")
        : task(load_task(fs::path(KEVO_TEST_DATA_DIR) / task_dir / "task.json")), evaluator(arch) {
        cfg = config(dir.path());
        first = run();
    }
    SearchResult run() {
        ScriptedProvider p(never);
        Search search(task, cfg, Prompts(), p, evaluator, *store);
        return search.run();
    }
    // Answers the batch file `input` as the provider would, with `respond`.
    fs::path answer(const std::string& input, const ScriptedProvider::Respond& respond, const std::string& name) {
        fs::path out = dir.path() / name;
        write_file_atomic(out, testing::answer_batch(read_file(input), respond));
        return out;
    }
    std::string run_id() { return store->get_meta("run_id").value_or("").get<std::string>(); }
    // The message the run is refused with ("" when it is not).
    std::string refusal() {
        try {
            run();
        } catch (const UsageError& e) {
            return e.what();
        }
        return "";
    }
    fs::path state() const { return dir.path() / "state.db"; }

    struct ArchEvaluator : ScriptedEvaluator {
        explicit ArchEvaluator(std::string a) : arch_(std::move(a)) {}
        std::string arch() override { return arch_; }
        std::string arch_;
    };
    TempDir dir;
    Task task;
    std::unique_ptr<store::Store> store = store::open_store((dir.path() / "state.db").string());
    ArchEvaluator evaluator;
    SearchConfig cfg;
    SearchResult first;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(l);
    return out;
}

}  // namespace batch

TEST(SearchBatch, CustomIdsNameTheRunAndFitBatchApiLimits) {
    const std::string tag = batch_run_tag("r0123abcd", "gelu_bias", "sm_90");
    EXPECT_EQ(tag, "r0123abcd.gelu_bias.sm_90");
    EXPECT_EQ(batch_custom_id(tag, 3, "g12.i1.c0.a2"), "r0123abcd.gelu_bias.sm_90:b3:g12.i1.c0.a2");
    auto id = parse_batch_custom_id("r0123abcd.gelu_bias.sm_90:b3:g12.i1.c0.a2");
    ASSERT_TRUE(id);
    EXPECT_EQ(id->run, "r0123abcd");
    EXPECT_EQ(id->task, "gelu_bias");
    EXPECT_EQ(id->arch, "sm_90");
    EXPECT_EQ(id->batch, 3);
    EXPECT_EQ(id->key, "g12.i1.c0.a2");
    auto old = parse_batch_custom_id("b2:g0.seed.a1");   // written before run ids
    ASSERT_TRUE(old);
    EXPECT_EQ(old->run, "");
    EXPECT_EQ(old->batch, 2);
    EXPECT_EQ(old->key, "g0.seed.a1");
    for (const char* bad : {"", "x", "b:k", "bx:k", "b1:", "r0123abcd:b1:k", "r0123abcd.t.a:b1:", "R0123abcd.t.a:b1:k",
                            "r0123abcd.t.a.b:b1:k", "r0123abcd.t/x.a:b1:k", "r0123abcd.t.a:1:k", "r0123abcd.t.a:b99999999999:k"})
        EXPECT_FALSE(parse_batch_custom_id(bad)) << bad;

    // A long task name, an odd architecture and a long key still fit the 64 characters that
    // Batch APIs accept, in their characters, and stay unique per key.
    const std::string long_tag = batch_run_tag("rffffffff", "kernelbench_L2_57_conv2d_relu_hardswish", "sm_100a/x");
    std::set<std::string> ids;
    for (const std::string& key : std::vector<std::string>{"g0.seed.a0", "g123456.i99.c99.a99", std::string(80, 'k'),
                                                           std::string(80, 'k') + "2", "g1 i0"}) {
        std::string cid = batch_custom_id(long_tag, 123456, key);
        EXPECT_LE(cid.size(), kMaxBatchCustomId) << cid;
        EXPECT_EQ(cid.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-"), std::string::npos) << cid;
        EXPECT_TRUE(parse_batch_custom_id(cid)) << cid;
        EXPECT_TRUE(ids.insert(cid).second) << cid;
    }
}

// The issue's case: a replies file of another run of the same task and architecture used to be
// imported (same custom ids in every run), and the run's own reply then skipped.
TEST(SearchBatch, RepliesOfAnotherRunAreRefusedWithNothingChangedThenItsOwnImport) {
    batch::BatchRun a, b;
    ASSERT_EQ(a.first.stop_reason, "batch");
    ASSERT_EQ(b.first.stop_reason, "batch");
    ASSERT_NE(a.run_id(), b.run_id());
    fs::path of_a = a.answer(a.first.batch_file, [](const llm::ChatRequest&) { return testing::kernel_reply(999, 1.0); },
                             "replies-a.jsonl");
    fs::path of_b = b.answer(b.first.batch_file, evolving, "replies-b.jsonl");
    const std::string before = batch::fingerprint(*b.store), disk_before = batch::on_disk(b.state());

    // A's file, alone or next to B's own (every file is checked before anything is stored).
    for (const std::vector<std::string>& files : {std::vector<std::string>{of_a.string()},
                                                  std::vector<std::string>{of_b.string(), of_a.string()}}) {
        b.cfg.batch.replies = files;
        std::string why = b.refusal();
        EXPECT_TRUE(batch::contains(why, of_a.string() + ":1: the replies of another run of gelu_bias on sm_90 (run " +
                                             a.run_id() + "); this state is run " + b.run_id() + " of gelu_bias on sm_90."))
            << why;
        EXPECT_TRUE(batch::contains(why, "Nothing was imported")) << why;
        EXPECT_EQ(batch::fingerprint(*b.store), before);
        EXPECT_EQ(batch::on_disk(b.state()), disk_before);
    }

    // B's own file: imported, the reply is B's; given again (alone and twice in one run), it is
    // skipped, never counted twice.
    std::vector<std::string> log;
    b.cfg.log = [&log](const std::string& line) { log.push_back(line); };
    b.cfg.batch.replies = {of_b.string()};
    ASSERT_EQ(b.run().stop_reason, "batch");
    auto seed = b.store->find_llm_call("g0.seed.a0");
    ASSERT_TRUE(seed);
    EXPECT_EQ(seed->reply, evolving(testing::batch_requests_of(read_file(b.first.batch_file)).at(0).second));
    EXPECT_FALSE(batch::contains(seed->reply, "999"));
    EXPECT_EQ(b.store->spent().calls, 1);
    EXPECT_NE(std::find(log.begin(), log.end(), "imported 1 replies from " + of_b.string()), log.end());
    const std::string after = batch::fingerprint(*b.store);
    b.cfg.batch.replies = {of_b.string(), of_b.string()};
    log.clear();
    EXPECT_EQ(b.run().stop_reason, "batch");
    EXPECT_EQ(b.store->spent().calls, 1);
    EXPECT_EQ(std::count(log.begin(), log.end(), "imported 0 replies from " + of_b.string() + ", 1 imported before"), 2);
    // (the import's run wrote the next round's batch; the runs given the file again add nothing)
    EXPECT_EQ(batch::fingerprint(*b.store), after);
}

TEST(SearchBatch, RepliesOfAnotherTaskOrArchitectureAreRefused) {
    batch::BatchRun b;
    batch::BatchRun conv("matmul", "sm_90"), ampere("gelu_bias", "sm_80");
    ASSERT_EQ(conv.first.stop_reason, "batch");
    ASSERT_EQ(ampere.first.stop_reason, "batch");
    fs::path of_conv = conv.answer(conv.first.batch_file, evolving, "replies-conv.jsonl");
    fs::path of_ampere = ampere.answer(ampere.first.batch_file, evolving, "replies-sm80.jsonl");
    const std::string before = batch::fingerprint(*b.store);
    const std::string self = "; this state is run " + b.run_id() + " of gelu_bias on sm_90.";
    b.cfg.batch.replies = {of_conv.string()};
    std::string why = b.refusal();
    EXPECT_TRUE(batch::contains(why, of_conv.string() + ":1: the replies of a run of another task or architecture (run " +
                                         conv.run_id() + " of matmul on sm_90)" + self)) << why;
    b.cfg.batch.replies = {of_ampere.string()};
    why = b.refusal();
    EXPECT_TRUE(batch::contains(why, of_ampere.string() + ":1: the replies of a run of another task or architecture (run " +
                                         ampere.run_id() + " of gelu_bias on sm_80)" + self)) << why;
    EXPECT_EQ(batch::fingerprint(*b.store), before);
    // And the other way round: B's file is no reply for them either.
    fs::path of_b = b.answer(b.first.batch_file, evolving, "replies-b.jsonl");
    conv.cfg.batch.replies = {of_b.string()};
    EXPECT_TRUE(batch::contains(conv.refusal(), "(run " + b.run_id() + " of gelu_bias on sm_90); this state is run " +
                                                    conv.run_id() + " of matmul on sm_90.")) << conv.refusal();
}

// A file cut short, with a custom_id twice, a request this run never wrote, an input file given
// as replies, an empty file: each refused whole, naming the line, with nothing stored; then the
// run's own file imports.
TEST(SearchBatch, BrokenRepliesFilesAreRefusedWholeWithNothingChanged) {
    batch::BatchRun b;
    // Round 2 has several requests (the first generation's mutations).
    b.cfg.batch.replies = {b.answer(b.first.batch_file, evolving, "replies-1.jsonl").string()};
    SearchResult second = b.run();
    ASSERT_EQ(second.stop_reason, "batch");
    ASSERT_GE(second.batch_written, 3);
    const std::string good = testing::answer_batch(read_file(second.batch_file), evolving);
    std::vector<std::string> lines = batch::split(good);
    const std::string before = batch::fingerprint(*b.store), disk_before = batch::on_disk(b.state());
    const fs::path file = b.dir.path() / "replies-2.jsonl";
    auto refused = [&](const std::string& text) {
        write_file_atomic(file, text);
        b.cfg.batch.replies = {b.cfg.batch.replies[0], file.string()};
        std::string why = b.refusal();
        EXPECT_TRUE(batch::contains(why, "Nothing was imported")) << why;
        EXPECT_EQ(batch::fingerprint(*b.store), before) << why;
        EXPECT_EQ(batch::on_disk(b.state()), disk_before) << why;
        b.cfg.batch.replies.pop_back();
        return why;
    };
    // Cut in the middle of its second line: the complete first line is not imported either.
    std::string why = refused(lines[0] + "\n" + lines[1].substr(0, lines[1].size() / 2));
    EXPECT_TRUE(batch::contains(why, file.string() + ":2: the file ends in the middle of this line (cut short")) << why;
    why = refused(lines[0] + "\n" + lines[1] + "\n" + lines[0] + "\n");
    EXPECT_TRUE(batch::contains(why, file.string() + ":3: custom_id '" +
                                         nlohmann::json::parse(lines[0])["custom_id"].get<std::string>() +
                                         "' is in the file twice (lines 1 and 3)")) << why;
    // A reply under this run's id for a request it never wrote.
    nlohmann::json invented = nlohmann::json::parse(lines[1]);
    const std::string cid = invented["custom_id"];
    invented["custom_id"] = cid.substr(0, cid.rfind(':') + 1) + "g7.i0.c0.a0";
    why = refused(lines[0] + "\n" + invented.dump() + "\n");
    EXPECT_TRUE(batch::contains(why, file.string() + ":2: custom_id '" + invented["custom_id"].get<std::string>() +
                                         "' names this run, but this run never wrote that request")) << why;
    why = refused(read_file(second.batch_file));
    EXPECT_TRUE(batch::contains(why, file.string() + ":1: a Batch API input line (a request), not a reply")) << why;
    why = refused("");
    EXPECT_TRUE(batch::contains(why, file.string() + ": no replies in the file (it is empty)")) << why;
    why = refused("\n{\"custom_id\": \"x\\u001b[31m\", \"response\": null, \"error\": {\"message\": \"m\"}}\n");
    EXPECT_TRUE(batch::contains(why, "custom_id 'x\\x1b[31m' was not written by kernelevo search --llm-batch")) << why;

    // The whole file, in an order of its own: imported.
    std::string shuffled = lines[2] + "\n" + lines[0] + "\n" + lines[1] + "\n";
    for (size_t i = 3; i < lines.size(); ++i) shuffled += lines[i] + "\n";
    write_file_atomic(file, shuffled);
    b.cfg.batch.replies.push_back(file.string());
    b.run();
    EXPECT_EQ(b.store->spent().calls, 1 + second.batch_written);
}

// A state written before run ids (custom ids "b<n>:<key>", no run_id in its metadata) imports its
// own replies; its next batch carries the run id it gets then.
TEST(SearchBatch, AStateOfAnOlderVersionImportsItsOwnReplies) {
    batch::BatchRun now;   // the same first round, turned into what the older version wrote
    TempDir dir;
    const fs::path state = dir.path() / "old.db";
    {
        auto old = store::open_store(state.string());
        for (const char* key : {"structure", "task_name", "config", "elapsed_s", "stop_reason"})
            if (auto v = now.store->get_meta(key)) old->put_meta(key, *v);
        std::vector<store::BatchRequest> rows = now.store->batch_requests();
        std::string input;
        for (store::BatchRequest& r : rows) {
            r.custom_id = "b" + std::to_string(r.batch) + ":" + r.key;
            r.file = (dir.path() / "gelu-1.jsonl").string();
        }
        for (const std::string& line : batch::lines_of(now.first.batch_file)) {
            nlohmann::json j = nlohmann::json::parse(line);
            j["custom_id"] = "b1:" + parse_batch_custom_id(j["custom_id"]).value().key;
            input += j.dump() + "\n";
        }
        old->add_batch(rows);
        write_file_atomic(dir.path() / "gelu-1.jsonl", input);
        EXPECT_FALSE(old->get_meta("run_id"));
    }
    write_file_atomic(dir.path() / "replies-1.jsonl", testing::answer_batch(read_file(dir.path() / "gelu-1.jsonl"), evolving));
    SearchConfig cfg = batch::config(dir.path());
    cfg.batch.replies = {(dir.path() / "replies-1.jsonl").string()};
    std::vector<std::string> log;
    cfg.log = [&log](const std::string& line) { log.push_back(line); };
    auto store = store::open_store(state.string());
    ScriptedEvaluator evaluator;
    ScriptedProvider never(batch::never);
    SearchResult res = Search(now.task, cfg, Prompts(), never, evaluator, *store).run();
    EXPECT_EQ(res.stop_reason, "batch");
    EXPECT_TRUE(store->find_llm_call("g0.seed.a0"));
    EXPECT_NE(std::find(log.begin(), log.end(), "imported 1 replies from " + (dir.path() / "replies-1.jsonl").string()), log.end());
    // Its new batch names the run id the state got now.
    const std::string run_id = store->get_meta("run_id").value_or("").get<std::string>();
    ASSERT_FALSE(run_id.empty());
    for (const auto& [id, request] : testing::batch_requests_of(read_file(res.batch_file)))
        EXPECT_EQ(id.rfind(run_id + ".gelu_bias.sm_90:b2:", 0), 0u) << id;
    // A reply under an old-style id this state never wrote: refused (whose it is cannot be told).
    fs::path unknown = dir.path() / "unknown.jsonl";
    write_file_atomic(unknown, R"({"custom_id":"b1:g9.i0.c0.a0","response":null,"error":{"code":"x","message":"y"}})" "\n");
    SearchConfig with_unknown = cfg;
    with_unknown.batch.replies.push_back(unknown.string());
    try {
        Search(now.task, with_unknown, Prompts(), never, evaluator, *store).run();
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_TRUE(batch::contains(e.what(), unknown.string() + ":1: custom_id 'b1:g9.i0.c0.a0' is not a request of this "
                                              "run's batch files")) << e.what();
    }
    // A file of another (new) run is refused here too.
    fs::path other = now.answer(now.first.batch_file, evolving, "replies-now.jsonl");
    cfg.batch.replies.push_back(other.string());
    try {
        Search(now.task, cfg, Prompts(), never, evaluator, *store).run();
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_TRUE(batch::contains(e.what(), "the replies of another run of gelu_bias on sm_90 (run " + now.run_id())) << e.what();
    }
}

}  // namespace
}  // namespace kevo::evolve
