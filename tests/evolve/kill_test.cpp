// Kill -9 in the middle of a search, then run the same search again: nothing committed is lost,
// no stored reply is requested again, no evaluated candidate is evaluated again, and the outcome
// equals that of an uninterrupted run. Run on the SQLite file and on a Redis server
// (SearchKill/Backends.*/sqlite and .../redis).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "../store/store_backend.h"
#include "common/fs.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo {
namespace {

// A program the evaluator judged (not claimed only, a duplicate, or a reply without code).
bool was_evaluated(const store::Program& p) {
    using S = store::ProgramStatus;
    return p.status != S::pending && p.status != S::duplicate && p.status != S::no_code;
}

std::vector<std::string> lines(const fs::path& p) {
    std::vector<std::string> out;
    std::ifstream in(p);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(l);
    return out;
}

pid_t spawn(const std::vector<std::string>& args) {
    pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

int wait_exit(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::vector<std::string> driver(const std::string& state, const fs::path& dir, const std::string& delay,
                                bool steady = false) {
    std::vector<std::string> a{KEVO_SEARCH_DRIVER, state, "6", delay, (dir / "llm.log").string(), (dir / "eval.log").string()};
    if (steady) a.push_back("steady");
    return a;
}

std::vector<std::tuple<std::string, std::string, std::string>> outcome(store::Store& s) {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const auto& p : s.programs()) out.emplace_back(p.key, p.source, store::program_status_name(p.status));
    std::sort(out.begin(), out.end());
    return out;
}

class SearchKill : public testing::BackendTest {};
KEVO_INSTANTIATE_BACKENDS(SearchKill);

TEST_P(SearchKill, ResumesAfterKill9WithoutRepayingOrReevaluating) {
    TempDir straight, killed;
    // Both runs' states: files in their directories, or two prefixes on one Redis server.
    std::string straight_state = redis() ? location("straight") : (straight.path() / "state.db").string();
    std::string killed_state = redis() ? location("killed") : (killed.path() / "state.db").string();
    ASSERT_EQ(wait_exit(spawn(driver(straight_state, straight.path(), "0"))), 0);

    // Each evaluation takes 50 ms; kill while generation 3 or so is being evaluated.
    pid_t pid = spawn(driver(killed_state, killed.path(), "0.05"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (lines(killed.path() / "eval.log").size() < 12 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_exit(pid), -SIGKILL);

    // What the killed process had committed.
    std::set<std::string> paid_seeds, evaluated;
    int committed_generations;
    {
        auto s = store::open_store(killed_state);
        committed_generations = s->last_generation() + 1;
        for (const auto& p : s->programs())
            if (was_evaluated(p)) evaluated.insert(p.norm_hash);
        ASSERT_FALSE(evaluated.empty());
    }
    {
        // Seeds of committed LLM calls, from the store's own record of each request.
        auto s = store::open_store(killed_state);
        for (const auto& c : s->llm_calls()) paid_seeds.insert(std::to_string(c.request.at("seed").get<int64_t>()));
    }
    ASSERT_GT(committed_generations, 0);
    ASSERT_LT(committed_generations, 7) << "the run finished before it was killed";
    size_t llm_before = lines(killed.path() / "llm.log").size();
    size_t eval_before = lines(killed.path() / "eval.log").size();

    ASSERT_EQ(wait_exit(spawn(driver(killed_state, killed.path(), "0"))), 0);

    auto llm_after = lines(killed.path() / "llm.log");
    auto eval_after = lines(killed.path() / "eval.log");
    for (size_t i = llm_before; i < llm_after.size(); ++i)
        EXPECT_FALSE(paid_seeds.count(llm_after[i])) << "a stored reply was requested again";
    for (size_t i = eval_before; i < eval_after.size(); ++i)
        EXPECT_FALSE(evaluated.count(eval_after[i])) << "an evaluated candidate was evaluated again";

    auto a = store::open_store(straight_state);
    auto b = store::open_store(killed_state);
    EXPECT_EQ(outcome(*b), outcome(*a));
    EXPECT_EQ(b->spent().calls, a->spent().calls);
    EXPECT_EQ(b->history().size(), 7u);
    // Requests repeated after the kill are only those whose replies had not been committed yet.
    EXPECT_LE(llm_after.size(), lines(straight.path() / "llm.log").size() + 4);
}

// Batch mode, killed with kill -9 while it evaluates the candidates of an imported batch, then
// run again with the same replies: no reply is imported (or counted) twice, nothing evaluated is
// evaluated again, no request is ever sent, and the outcome equals that of an uninterrupted run.
TEST_P(SearchKill, ResumesAfterKill9InTheMiddleOfABatchRound) {
    struct Run {
        TempDir dir;
        std::string state;
        std::vector<std::string> replies;
        std::vector<std::string> args(const std::string& delay) {
            std::vector<std::string> a = {KEVO_SEARCH_DRIVER, state, "3", delay, (dir.path() / "llm.log").string(),
                                          (dir.path() / "eval.log").string(), (dir.path() / "gelu").string()};
            a.insert(a.end(), replies.begin(), replies.end());
            return a;
        }
        // Answers the run's newest batch file; returns its number.
        int answer() {
            auto s = store::open_store(state);
            store::BatchRequest newest;
            for (const auto& b : s->batch_requests()) newest = b;
            fs::path out = dir.path() / ("replies-" + std::to_string(newest.batch) + ".jsonl");
            write_file_atomic(out, evolve::testing::answer_batch(read_file(newest.file), evolve::testing::evolving));
            replies.push_back(out.string());
            return newest.batch;
        }
    };
    Run straight, killed;
    straight.state = redis() ? location("straight") : (straight.dir.path() / "state.db").string();
    killed.state = redis() ? location("killed") : (killed.dir.path() / "state.db").string();
    int rounds = 0;
    for (int rc; (rc = wait_exit(spawn(straight.args("0")))) != 0; ++rounds) {
        ASSERT_EQ(rc, 3) << "the driver failed";
        ASSERT_LT(rounds, 40);
        straight.answer();
    }
    ASSERT_GE(rounds, 3);

    // The killed run: the seed's batch, then the first generation's, killed while evaluating.
    ASSERT_EQ(wait_exit(spawn(killed.args("0"))), 3);
    killed.answer();
    ASSERT_EQ(wait_exit(spawn(killed.args("0"))), 3);
    ASSERT_EQ(killed.answer(), 2);
    size_t evals_before = lines(killed.dir.path() / "eval.log").size();
    pid_t pid = spawn(killed.args("0.05"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (lines(killed.dir.path() / "eval.log").size() < evals_before + 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_exit(pid), -SIGKILL);
    std::set<std::string> evaluated;
    int64_t calls_at_kill;
    {
        auto s = store::open_store(killed.state);
        for (const auto& p : s->programs())
            if (was_evaluated(p)) evaluated.insert(p.norm_hash);
        calls_at_kill = s->spent().calls;
        ASSERT_EQ(s->last_generation(), 0) << "the round finished before it was killed";
    }
    size_t evals_at_kill = lines(killed.dir.path() / "eval.log").size();
    ASSERT_GT(evals_at_kill, evals_before);

    // The same command again, then the remaining rounds.
    int rc = wait_exit(spawn(killed.args("0")));
    {
        auto s = store::open_store(killed.state);
        EXPECT_EQ(s->spent().calls, calls_at_kill) << "replies were imported twice";
    }
    auto evals = lines(killed.dir.path() / "eval.log");
    for (size_t i = evals_at_kill; i < evals.size(); ++i)
        EXPECT_FALSE(evaluated.count(evals[i])) << "an evaluated candidate was evaluated again";
    for (int more = 0; rc != 0; ++more) {
        ASSERT_EQ(rc, 3);
        ASSERT_LT(more, 40);
        killed.answer();
        rc = wait_exit(spawn(killed.args("0")));
    }

    auto a = store::open_store(straight.state);
    auto b = store::open_store(killed.state);
    EXPECT_EQ(outcome(*b), outcome(*a));
    EXPECT_EQ(b->spent().calls, a->spent().calls);
    EXPECT_EQ(b->spent().tokens(), a->spent().tokens());
    EXPECT_EQ(b->batch_requests().size(), a->batch_requests().size());
    EXPECT_EQ(b->history().size(), 4u);
    EXPECT_TRUE(lines(killed.dir.path() / "llm.log").empty()) << "batch mode sent a request";
}

// The same in steady state (the default of `kernelevo search`): no reply paid twice, no candidate
// evaluated twice, every generation committed. (Steady state is not reproducible, so the outcome
// is not compared with an uninterrupted run.)
TEST_P(SearchKill, SteadyStateResumesAfterKill9WithoutRepayingOrReevaluating) {
    TempDir dir;
    std::string state = redis() ? location("steady") : (dir.path() / "state.db").string();
    pid_t pid = spawn(driver(state, dir.path(), "0.05", true));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (lines(dir.path() / "eval.log").size() < 12 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_exit(pid), -SIGKILL);
    std::set<std::string> paid, evaluated;
    {
        auto s = store::open_store(state);
        ASSERT_LT(s->last_generation(), 6) << "the run finished before it was killed";
        for (const auto& p : s->programs())
            if (was_evaluated(p)) evaluated.insert(p.norm_hash);
        for (const auto& c : s->llm_calls()) paid.insert(std::to_string(c.request.at("seed").get<int64_t>()));
    }
    size_t llm_before = lines(dir.path() / "llm.log").size(), eval_before = lines(dir.path() / "eval.log").size();
    ASSERT_EQ(wait_exit(spawn(driver(state, dir.path(), "0", true))), 0);
    auto llm_after = lines(dir.path() / "llm.log");
    auto eval_after = lines(dir.path() / "eval.log");
    for (size_t i = llm_before; i < llm_after.size(); ++i) EXPECT_FALSE(paid.count(llm_after[i])) << "a stored reply was requested again";
    for (size_t i = eval_before; i < eval_after.size(); ++i)
        EXPECT_FALSE(evaluated.count(eval_after[i])) << "an evaluated candidate was evaluated again";
    auto s = store::open_store(state);
    EXPECT_EQ(s->history().size(), 7u);
    for (const auto& p : s->programs()) EXPECT_NE(p.status, store::ProgramStatus::pending) << p.key;
}

}  // namespace
}  // namespace kevo
