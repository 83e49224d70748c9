// `kernelevo import kernelbench` runs problem files (untrusted Python) in the sandbox: a hostile
// problem's writes to the home directory and outside the output dir, its shell command, its socket
// and its reading of secrets take no effect, a problem stopped by the sandbox is refused with that
// reason, and an honest problem of the same batch (the same Python process) still imports. Without
// bubblewrap the import is an error that says how to install it (or to opt out), never unconfined.
#include <algorithm>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kb_suite.h"
#include "sandbox/sandbox.h"

extern char** environ;

namespace kevo {
namespace {

const char* const kToken = "kevo-test-token-5f3a9c";      // in a variable whose name looks secret
const char* const kPlain = "postgres://kevo:pw-77e1b2@db";  // in one whose name does not (the allowlist's job)
const char* const kMark = "kevo_hostile_marker";

std::map<std::string, std::string> parent_env() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string kv(*e);
        auto eq = kv.find('=');
        if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return env;
}

ProcessResult import(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env) {
    ProcessOptions po;
    po.argv = {KEVO_EXE, "import", "kernelbench"};
    po.argv.insert(po.argv.end(), args.begin(), args.end());
    po.timeout_s = 1200;
    po.max_file_bytes = -1;
    auto env = parent_env();
    for (const auto& [k, v] : extra_env) env[k] = v;
    po.exact_env = env;  // the secrets reach kernelevo itself, as a user's shell would give them
    return run_process(po);
}

// Every place the hostile problem aims at, outside the sandbox's view.
std::vector<fs::path> escape_targets() {
    std::vector<fs::path> v;
    for (const char* home : {std::getenv("HOME"), getpwuid(getuid()) ? getpwuid(getuid())->pw_dir : nullptr})
        if (home && *home) {
            v.push_back(fs::path(home) / kMark);
            v.push_back(fs::path(home) / "kevo_hostile_denied_marker");
        }
    v.push_back(fs::path("/") / kMark);               // the root, where bwrap's own root is a tmpfs
    v.push_back(kbtest::problems() / kMark);           // beside the problem file (bound read-only)
    for (const char* dir : {"/tmp", "/var/tmp"}) {
        v.push_back(fs::path(dir) / kMark);
        v.push_back(fs::path(dir) / (std::string(kMark) + ".system"));
    }
    return v;
}

// A TCP listener on 127.0.0.1 that the hostile problem tries to reach; accept() never blocks.
struct Listener {
    int fd = -1;
    int port = 0;
    Listener() {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t n = sizeof a;
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 4) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0)
            return;
        port = ntohs(a.sin_port);
    }
    bool connected() const { return accept(fd, nullptr, nullptr) >= 0; }
    ~Listener() {
        if (fd >= 0) close(fd);
    }
};

TEST(KernelBenchImportSandbox, HostileProblemTakesNoEffectAndTheBatchGoesOn) {
    if (!sandbox_layers().namespaces) GTEST_SKIP() << "bubblewrap cannot run here: " << sandbox_layers().why_not;
    for (const auto& t : escape_targets()) fs::remove(t);
    TempDir tmp("kevo-kb-sandbox");
    const fs::path out = tmp.path() / "suite";
    fs::create_directories(out);
    Listener listener;
    ASSERT_GT(listener.port, 0);
    const fs::path dir = kbtest::problems();
    const std::string problem_bytes = read_file(dir / "hostile_escape.py");
    ProcessResult r = import({(dir / "hostile_escape.py").string(), (dir / "hostile_denied.py").string(),
                              (dir / "hostile_network.py").string(), (dir / "honest_relu.py").string(),
                              "--out", out.string(), "--jobs", "1", "--max-numel", "4096"},
                             {{"KEVO_TEST_API_TOKEN", kToken}, {"KEVO_HOSTILE_DB_URL", kPlain},
                              {"KERNELEVO_TEST_HOSTILE_PORT", std::to_string(listener.port)}});
    ASSERT_TRUE(r.started) << r.error;
    // The forged fatal line it printed did not stop the batch.
    EXPECT_EQ(r.err.find("forged by a"), std::string::npos) << r.err;
    ASSERT_TRUE(fs::exists(out / "import.json")) << r.describe() << "\n" << r.err;
    const auto report = nlohmann::json::parse(read_file(out / "import.json"));
    EXPECT_NE(report.value("sandbox", "").find("bwrap"), std::string::npos) << report.dump(2);
    std::map<std::string, nlohmann::json> by_name;
    for (const auto& j : report["results"]) by_name[j.value("name", "")] = j;

    EXPECT_EQ(report.dump().find("forged"), std::string::npos) << "a problem's print was taken for the importer's";
    EXPECT_EQ(r.err.find("kb_honest_relu: forged"), std::string::npos) << "a problem's print was taken for progress";
    // The honest problem imports beside the hostile ones (same Python process: --jobs 1).
    EXPECT_EQ(by_name["kb_honest_relu"].value("status", "missing"), "ok") << by_name["kb_honest_relu"].dump() << "\n" << r.err;
    // The problems that did not catch the denial are refused, with what they tried and the sandbox named.
    const auto& denied = by_name["kb_hostile_denied"];
    EXPECT_EQ(denied.value("status", "missing"), "refused") << denied.dump();
    EXPECT_NE(denied.value("reason", "").find("denied by the import sandbox"), std::string::npos) << denied.dump();
    EXPECT_NE(denied.value("reason", "").find("kevo_hostile_denied_marker"), std::string::npos) << denied.dump();
    EXPECT_NE(denied.value("reason", "").find("home directory"), std::string::npos) << denied.dump();
    const auto& network = by_name["kb_hostile_network"];
    EXPECT_EQ(network.value("status", "missing"), "refused") << network.dump();
    EXPECT_NE(network.value("reason", "").find("tried to use the network"), std::string::npos) << network.dump();
    EXPECT_NE(network.value("reason", "").find("--no-sandbox"), std::string::npos) << network.dump();

    // Nothing the hostile problem aimed at exists outside, checked on the host: what a write inside
    // seemed to do depends on where the checkout lives (under /tmp, the folders holding the problem
    // file's bind lie in the sandbox's own /tmp, where a write succeeds and vanishes with it).
    for (const auto& t : escape_targets()) EXPECT_FALSE(fs::exists(t)) << t << " was written by a problem file";
    EXPECT_FALSE(fs::exists(tmp.path() / kMark)) << "a problem wrote beside the output dir";
    EXPECT_FALSE(fs::exists(out / kMark)) << "a problem wrote into the suite";
    EXPECT_FALSE(fs::exists(out / "hostile_probe.json")) << "a file of the problem's own choosing reached the suite";
    EXPECT_EQ(read_file(dir / "hostile_escape.py"), problem_bytes) << "the problem file was changed";
    EXPECT_FALSE(listener.connected()) << "a problem reached 127.0.0.1";

    // What it saw inside (only it can tell): the bytes of its "probe" buffer, a file input of its task.
    ASSERT_EQ(by_name["kb_hostile_escape"].value("status", "missing"), "ok") << by_name["kb_hostile_escape"].dump();
    const Task escape = load_task(out / "kb_hostile_escape" / "task.json");
    auto in = std::find_if(escape.inputs.begin(), escape.inputs.end(), [](const TensorSpec& t) { return t.name == "probe"; });
    ASSERT_NE(in, escape.inputs.end()) << "no probe input";
    const auto probe = nlohmann::json::parse(read_file(out / "kb_hostile_escape" / in->init.path));
    EXPECT_NE(probe.value("socket", ""), "done") << probe.dump();
    EXPECT_TRUE(probe["secret_token"].is_null()) << "secret visible";
    EXPECT_TRUE(probe["secret_plain"].is_null()) << "a variable outside the allowlist is visible";
    EXPECT_NE(probe.value("home", ""), std::string(std::getenv("HOME") ? std::getenv("HOME") : "")) << "the real HOME";
    EXPECT_FALSE(fs::exists(out / kMark)) << "HOME pointed into the output dir";

    // No secret in any output: the report, the tasks, the import's own output.
    std::string all = r.out + r.err;
    for (const auto& e : fs::recursive_directory_iterator(out))
        if (e.is_regular_file() && e.file_size() < (1 << 20)) all += read_file(e.path());
    EXPECT_EQ(all.find(kToken), std::string::npos);
    EXPECT_EQ(all.find(kPlain), std::string::npos);
}

TEST(KernelBenchImportSandbox, WithoutBubblewrapItIsAnErrorThatSaysHowToInstallOrOptOut) {
    TempDir tmp("kevo-kb-sandbox");
    ProcessResult r = import({(kbtest::problems() / "honest_relu.py").string(), "--out", (tmp.path() / "suite").string()},
                             {{"KERNELEVO_BWRAP", "/nonexistent/bwrap"}});
    ASSERT_TRUE(r.started) << r.error;
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("bubblewrap"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("apt-get install bubblewrap"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--no-sandbox"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "suite" / "kb_honest_relu" / "task.json"));
}

}  // namespace
}  // namespace kevo
