// Trust boundaries of `kernelevo import kernelbench` (issue 50): what a problem file (untrusted Python,
// run in the sandbox) can no longer do. It sees no credential of the user's environment; the task the
// tool installs has the tool's tolerance bounds and trials, whatever the sandbox's result says; a
// malformed result fails its own problem only; it cannot fill the disk holding the suite or outlive
// its --timeout by more than a short grace; its control characters never reach the terminal (the
// import line, `search --model-dir --dry-run` on a forged plan, `report --state`). Real imports of
// the problem files in tests/data/kernelbench/hostile_*.py beside tests/data/kernelbench/honest_relu.py.
#include <gtest/gtest.h>

#include "../model/model_folder.h"
#include "kb_suite.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

extern char** environ;

namespace kevo {
namespace {

// Secrets in the user's environment under names and values the old deny-list let through.
const std::map<std::string, std::string> kSecrets = {
    {"NVIDIA_NGC_KEY", "ngc-secret-7f31c2"},
    {"KERNELEVO_LLM_KEY", "sk-llm-secret-90ab41"},
    {"TORCH_CREDENTIALS", "torch-cred-secret-55d0e8"},
    {"KERNELEVO_REDIS_URL", "redis://:redis-pw-c4e912@db.example:6379/0"},
};
const char* const kRedisPassword = "redis-pw-c4e912";

std::map<std::string, std::string> parent_env() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string kv(*e);
        auto eq = kv.find('=');
        if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return env;
}

struct Imported {
    ProcessResult run;
    nlohmann::json report;
    std::map<std::string, nlohmann::json> by_name;
};

// `kernelevo import kernelbench PROBLEMS --out OUT --jobs 1 --max-numel 4096 MORE`, `env` added to ours.
Imported import(const fs::path& out, const std::vector<std::string>& problems,
                const std::vector<std::string>& more = {}, const std::map<std::string, std::string>& env = {}) {
    ProcessOptions po;
    po.argv = {KEVO_EXE, "import", "kernelbench"};
    for (const auto& p : problems) po.argv.push_back((kbtest::problems() / p).string());
    po.argv.insert(po.argv.end(), {"--out", out.string(), "--jobs", "1", "--max-numel", "4096"});
    po.argv.insert(po.argv.end(), more.begin(), more.end());
    po.timeout_s = 1200;
    po.max_file_bytes = -1;
    auto all = parent_env();
    for (const auto& [k, v] : env) all[k] = v;
    po.exact_env = all;
    Imported r;
    r.run = run_process(po);
    try {
        r.report = nlohmann::json::parse(read_file(out / "import.json"));
        for (const auto& j : r.report["results"]) r.by_name[j.value("name", "")] = j;
    } catch (const std::exception&) {
    }
    return r;
}

std::string everything_under(const fs::path& dir) {
    std::string all;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && e.file_size() < (16 << 20)) all += read_file(e.path());
    return all;
}

#define SKIP_WITHOUT_BWRAP() \
    if (!sandbox_layers().namespaces) GTEST_SKIP() << "bubblewrap cannot run here: " << sandbox_layers().why_not

// The sandbox's environment is an allowlist by name and by value: none of the four reaches a child.
TEST(KernelBenchImportTrust, TheSandboxEnvironmentHoldsNoCredential) {
    for (const auto& [k, v] : kSecrets) setenv(k.c_str(), v.c_str(), 1);
    setenv("KERNELEVO_CACHE_HOME", "/tmp/kevo-cache-home", 1);  // a setting of the table: kept
    const auto env = sandbox_environment();
    for (const auto& [k, v] : kSecrets) {
        EXPECT_EQ(env.count(k), 0u) << k << " reached the sandbox";
        unsetenv(k.c_str());
    }
    EXPECT_EQ(env.count("PATH"), 1u);
    EXPECT_EQ(env.count("KERNELEVO_CACHE_HOME"), 1u);
}

TEST(KernelBenchImportTrust, AProblemSeesNoCredentialOfTheUsersEnvironment) {
    SKIP_WITHOUT_BWRAP();
    TempDir tmp("kevo-kb-trust");
    const fs::path out = tmp.path() / "suite";
    Imported r = import(out, {"hostile_environment.py"}, {}, kSecrets);
    ASSERT_EQ(r.by_name["kb_hostile_environment"].value("status", "missing"), "ok") << r.run.err;
    // What it saw: its buffer "environ", installed as a file input of its task.
    const Task t = load_task(out / "kb_hostile_environment" / "task.json");
    auto in = std::find_if(t.inputs.begin(), t.inputs.end(), [](const TensorSpec& s) { return s.name == "environ"; });
    ASSERT_NE(in, t.inputs.end());
    const auto seen = nlohmann::json::parse(read_file(out / "kb_hostile_environment" / in->init.path));
    EXPECT_TRUE(seen.contains("PATH")) << seen.dump();
    for (const auto& [k, v] : kSecrets) EXPECT_FALSE(seen.contains(k)) << k << " was visible: " << seen.dump();
    const std::string all = everything_under(out) + r.run.out + r.run.err;
    for (const auto& [k, v] : kSecrets) EXPECT_EQ(all.find(v), std::string::npos) << k << "'s value left the sandbox";
    EXPECT_EQ(all.find(kRedisPassword), std::string::npos);
}

// A problem that wraps the importer to install atol = rtol = 0.9 and one trial gets the tool's bounds.
TEST(KernelBenchImportTrust, TheToolSetsTheTolerancesBoundsAndTheTrialsNotTheProblem) {
    SKIP_WITHOUT_BWRAP();
    TempDir tmp("kevo-kb-trust");
    const fs::path out = tmp.path() / "suite";
    Imported r = import(out, {"hostile_tolerance.py"});
    const auto& res = r.by_name["kb_hostile_tolerance"];
    ASSERT_EQ(res.value("status", "missing"), "ok") << res.dump() << "\n" << r.run.err;
    const Task t = load_task(out / "kb_hostile_tolerance" / "task.json");
    EXPECT_LE(t.atol, 1e-2);
    EXPECT_LE(t.rtol, 1e-2);
    EXPECT_GE(t.atol, 1e-4);
    EXPECT_EQ(t.correctness_trials, 5) << "the problem chose its trials";
    EXPECT_NE(t.tolerance_policy.find("kernelevo clamped it to [0.0001, 0.01]"), std::string::npos)
        << t.tolerance_policy;
    const auto written = nlohmann::json::parse(read_file(out / "kb_hostile_tolerance" / "task.json"));
    EXPECT_FALSE(written.contains("trials")) << written.dump(2);
    // The report says the tolerance installed, not the one the sandbox claimed.
    EXPECT_LE(res["tolerance"].value("atol", 1.0), 1e-2) << res.dump();
}

// verify.device = 123 once aborted the whole import (type_error.302, exit 134, no import.json).
TEST(KernelBenchImportTrust, AMalformedResultFailsItsOwnProblemAndTheOthersImport) {
    SKIP_WITHOUT_BWRAP();
    TempDir tmp("kevo-kb-trust");
    const fs::path out = tmp.path() / "suite";
    Imported r = import(out, {"hostile_result.py", "honest_relu.py"});
    ASSERT_TRUE(r.run.started) << r.run.error;
    EXPECT_EQ(r.run.exit_code, 1) << r.run.describe() << "\n" << r.run.err;
    EXPECT_EQ(r.run.err.find("terminate called"), std::string::npos) << r.run.err;
    ASSERT_TRUE(fs::exists(out / "import.json")) << r.run.err;
    EXPECT_EQ(r.by_name["kb_honest_relu"].value("status", "missing"), "ok") << r.run.err;
    const auto& bad = r.by_name["kb_hostile_result"];
    EXPECT_EQ(bad.value("status", "missing"), "failed") << bad.dump();
    EXPECT_EQ(bad.value("reason", ""), "the importer's result is malformed: verify.device is a number, not a string")
        << bad.dump();
    EXPECT_FALSE(fs::exists(out / "kb_hostile_result")) << "a malformed result was installed";
    EXPECT_NE(r.run.err.find("imported 1/2 (0 refused, 1 failed)"), std::string::npos) << r.run.err;
}

// Its private folder lies on the suite's disk: what it writes there is bounded, the problem fails.
TEST(KernelBenchImportTrust, AProblemThatWritesPastItsOutputBoundFailsWithTheReason) {
    SKIP_WITHOUT_BWRAP();
    TempDir tmp("kevo-kb-trust");
    const fs::path out = tmp.path() / "suite";
    // 16 MiB. The problem never ends by itself, so only the bound can stop it before its --timeout.
    Imported r = import(out, {"hostile_fill.py", "honest_relu.py"}, {"--max-output-gib", "0.015625", "--timeout", "600"});
    ASSERT_TRUE(fs::exists(out / "import.json")) << r.run.describe() << "\n" << r.run.err;
    const auto& fill = r.by_name["kb_hostile_fill"];
    EXPECT_EQ(fill.value("status", "missing"), "failed") << fill.dump();
    // Killed while it ran ("killed:"), not found over its bound after it ended ("stopped:") nor at its
    // --timeout ("timed out"). (No clock: a loaded machine only makes it reach its bound later.)
    EXPECT_NE(fill.value("reason", "").find("the importer stopped (killed: it wrote more than 16.0 MiB to its private "
                                            "folder"),
              std::string::npos)
        << fill.dump();
    EXPECT_NE(fill.value("reason", "").find("--max-output-gib"), std::string::npos) << fill.dump();
    EXPECT_EQ(r.by_name["kb_honest_relu"].value("status", "missing"), "ok") << r.run.err;
    // Nothing of it is left: no private folder, no task.
    for (const auto& e : fs::directory_iterator(out))
        EXPECT_EQ(e.path().filename().string().find(".import-"), std::string::npos) << e.path();
    EXPECT_FALSE(fs::exists(out / "kb_hostile_fill"));
}

// A problem that ignores SIGALRM ran until 3 x --timeout + 120 s; now --timeout + kTimeoutGrace (30 s).
TEST(KernelBenchImportTrust, AProblemThatIgnoresItsAlarmIsKilledAtItsTimeoutPlusAShortGrace) {
    SKIP_WITHOUT_BWRAP();
    TempDir tmp("kevo-kb-trust");
    const fs::path out = tmp.path() / "suite";
    Imported r = import(out, {"hostile_alarm.py"}, {"--timeout", "3"});
    const auto& a = r.by_name["kb_hostile_alarm"];
    EXPECT_EQ(a.value("status", "missing"), "failed") << a.dump() << "\n" << r.run.err;
    EXPECT_NE(a.value("reason", "").find("timed out: still running 30 s after its 3 s (--timeout), killed"),
              std::string::npos)
        << a.dump();
    // Never before its deadline (a loaded machine only makes the kill later); and before the old limit,
    // 3 x 3 + 120 s. (A bound of 33 + 10 s measured the machine's load as well: the sandbox's start and
    // the killed Python's end are inside the measured time.)
    ASSERT_TRUE(a.contains("seconds") && a["seconds"].is_number()) << a.dump();
    EXPECT_GE(a["seconds"].get<double>(), 33 - 1) << a.dump();
    EXPECT_LT(a["seconds"].get<double>(), 3 * 3 + 120) << a.dump();
}

bool has_control(const std::string& s) {
    return std::any_of(s.begin(), s.end(), [](char c) { return c == '\x1b' || c == '\x07'; });
}

TEST(KernelBenchImportTrust, AProblemsControlCharactersNeverReachTheImportLine) {
    SKIP_WITHOUT_BWRAP();
    TempDir tmp("kevo-kb-trust");
    const fs::path out = tmp.path() / "suite";
    Imported r = import(out, {"hostile_escape_codes.py"});
    const auto& e = r.by_name["kb_hostile_escape_codes"];
    ASSERT_EQ(e.value("status", "missing"), "refused") << e.dump() << "\n" << r.run.err;
    EXPECT_FALSE(has_control(r.run.err)) << r.run.err;
    EXPECT_FALSE(has_control(r.run.out)) << r.run.out;
    const std::string shown =
        "kb_hostile_escape_codes: refused: cannot load the problem: Refused: \\x1b]0;kevo-pwned-title\\x07";
    EXPECT_NE(r.run.err.find(shown), std::string::npos) << r.run.err;
}

// A forged plan.json (a model folder is what an import of a level-3 problem writes).
TEST(KernelBenchImportTrust, ARegionNameOfAForgedPlanIsPrintedEscapedByADryRun) {
    TempDir dir("kevo-kb-trust");
    nlohmann::json plan = model_test::good_plan();
    plan["model"] = "Blk\x1b]0;kevo-pwned-title\x07";
    plan["regions"][0]["name"] = "h.0.a\x1b[2J\x07\nfake.row  100.0%";  // a newline would fake a row
    model_test::make_model_folder(dir.path(), plan);
    ProcessResult r =
        kbtest::kernelevo({"search", "--model-dir", dir.path().string(), "--max-time", "20m", "--dry-run"}, 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(has_control(r.out)) << r.out;
    EXPECT_FALSE(has_control(r.err)) << r.err;
    EXPECT_NE(r.out.find("Blk\\x1b]0;kevo-pwned-title\\x07: 2 of 2 region search(es)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("h.0.a\\x1b[2J\\x07\\x0afake.row  100.0%"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\nfake.row"), std::string::npos) << r.out;
}

TEST(KernelBenchImportTrust, AStatesTaskNameAndStopReasonArePrintedEscapedByReport) {
    TempDir dir("kevo-kb-trust");
    const std::string db = (dir.path() / "state.db").string();
    {
        auto st = store::open_store(db);
        st->put_meta("task_name", "kb1_x\x1b]0;kevo-pwned-title\x07");
        st->put_meta("stop_reason", "budget\x1b[2J\x07");
    }
    ProcessResult r = kbtest::kernelevo({"report", "--state", db}, 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(has_control(r.out)) << r.out;
    EXPECT_NE(r.out.find("Task kb1_x\\x1b]0;kevo-pwned-title\\x07"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("stopped: budget\\x1b[2J\\x07"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kevo
