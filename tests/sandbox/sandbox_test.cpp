// The sandbox against a hostile candidate whose static constructor tries each escape (CPU: the
// validator loads every compiled candidate in the sandbox even without a GPU). Each attempt must
// fail, the validation must say so where the sandbox stopped it, and nothing may be left running.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>

#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "sandbox/sandbox.h"
#include "task/task.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = KEVO_TEST_DATA_DIR;

// The build tree holds the marker files: outside every sandbox's writable places.
fs::path scratch(const std::string& name) {
    fs::path d = fs::path(KEVO_BINARY_DIR) / "sandbox-test" / (name + "-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

ValidationResult attack(const std::string& kind, const std::string& arg) {
    setenv("KERNELEVO_TEST_ATTACK", kind.c_str(), 1);
    setenv("KERNELEVO_TEST_ARG", arg.c_str(), 1);
    Validator v(load_task(kData / "gelu_bias" / "task.json"), ValidateOptions{});
    ValidationResult r = v.validate(read_file(kData / "attacks" / "escape.cu"));
    unsetenv("KERNELEVO_TEST_ATTACK");
    unsetenv("KERNELEVO_TEST_ARG");
    return r;
}

std::string output_of(const ValidationResult& r) {
    return r.details.is_object() ? r.details.value("candidate_output", std::string()) : "(no details: " + r.log + ")";
}

bool gpu_present() {
    static int present = -1;
    if (present < 0) {
        Validator v(load_task(kData / "gelu_bias" / "task.json"), ValidateOptions{});
        present = v.device().present ? 1 : 0;
    }
    return present == 1;
}
}  // namespace

TEST(Sandbox, ReportsItsLayers) {
    const SandboxLayers& l = sandbox_layers();
    EXPECT_FALSE(l.describe().empty());
    if (std::getenv("KERNELEVO_BWRAP") == nullptr) EXPECT_TRUE(l.namespaces) << l.why_not;  // CI installs bubblewrap
}

TEST(Sandbox, EnvironmentIsAnAllowlist) {
    setenv("KEVO_TEST_PLAIN_VARIABLE", "visible?", 1);
    setenv("KERNELEVO_API_KEY", "sk-test-secret", 1);
    auto env = sandbox_environment();
    EXPECT_EQ(env.count("KEVO_TEST_PLAIN_VARIABLE"), 0u);  // not on the list
    EXPECT_EQ(env.count("KERNELEVO_API_KEY"), 0u);         // a secret, even with an allowed prefix
    EXPECT_EQ(env.count("PATH"), 1u);
    unsetenv("KERNELEVO_API_KEY");
    unsetenv("KEVO_TEST_PLAIN_VARIABLE");
}

// A read-only path reached through an absolute symlink (as /usr/local/cuda/bin/ncu is on many CUDA
// images) is visible in the sandbox; it once failed the whole sandbox with bwrap's "Can't mkdir".
TEST(Sandbox, ReadOnlyPathThroughAnAbsoluteSymlinkIsVisible) {
    if (!sandbox_layers().namespaces) GTEST_SKIP() << sandbox_layers().why_not;
    const fs::path d = scratch("symlinked");
    fs::create_directories(d / "real" / "bin");
    fs::create_directories(d / "via");
    std::ofstream(d / "real" / "bin" / "tool.txt") << "seen\n";
    fs::create_symlink(d / "real", d / "via" / "link");  // absolute target
    SandboxPolicy policy;
    policy.read_only = {d / "via", d / "via" / "link" / "bin"};
    std::vector<std::string> argv = sandbox_prefix(policy);
    ASSERT_FALSE(argv.empty());
    argv.insert(argv.end(), {"/bin/cat", (d / "via" / "link" / "bin" / "tool.txt").string()});
    ProcessOptions po;
    po.argv = argv;
    po.timeout_s = 30;
    ProcessResult r = run_process(po);
    EXPECT_TRUE(r.ok()) << r.describe() << ": " << r.err;
    EXPECT_EQ(r.out, "seen\n");
    fs::remove_all(d);
}

TEST(Sandbox, CandidateCannotWriteOutsideItsWorkDir) {
    fs::path target = scratch("write") / "pwned";
    ValidationResult r = attack("write", target.string());
    EXPECT_FALSE(fs::exists(target)) << output_of(r);
    EXPECT_NE(output_of(r).find("attack write: fd -1"), std::string::npos) << output_of(r);
}

TEST(Sandbox, CandidateCannotStartAShell) {
    fs::path target = scratch("exec") / "pwned";
    ValidationResult r = attack("exec", "/bin/sh -c 'touch " + target.string() + "'");
    EXPECT_FALSE(fs::exists(target));
    EXPECT_EQ(r.status, Status::rejected) << r.log;
    EXPECT_NE(r.log.find("forbidden system call"), std::string::npos) << r.log;
}

TEST(Sandbox, CandidateCannotReachTheNetwork) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(l, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(l, 4), 0);
    socklen_t len = sizeof addr;
    getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len);
    ValidationResult r = attack("connect", std::to_string(ntohs(addr.sin_port)));
    int c = accept(l, nullptr, nullptr);
    EXPECT_LT(c, 0) << "the candidate connected to a loopback listener";
    if (c >= 0) close(c);
    close(l);
    EXPECT_NE(output_of(r).find("attack connect: socket -1"), std::string::npos) << output_of(r);
}

TEST(Sandbox, CandidateCannotReadTheParentsSecrets) {
    const std::string secret = "sk-or-v1-kevo-sandbox-test-0123456789";
    setenv("OPENROUTER_API_KEY", secret.c_str(), 1);
    register_secret(secret);
    ValidationResult r = attack("environ", "");
    unsetenv("OPENROUTER_API_KEY");
    EXPECT_NE(output_of(r).find("attack environ"), std::string::npos) << output_of(r);
    EXPECT_EQ(output_of(r).find(secret), std::string::npos) << "the key leaked into the sandbox";
    EXPECT_EQ(output_of(r).find("***"), std::string::npos) << "the key was seen (then redacted)";
}

// The confinement covers every thread of the candidate process, the ones CUDA started before it
// included (with a GPU there are several): none may run without the system-call filter.
TEST(Sandbox, EveryThreadOfTheCandidateProcessIsConfined) {
    ValidationResult r = attack("threads", "");
    const std::string out = output_of(r);
    int threads = 0;
    for (size_t at = out.find("attack threads: "); at != std::string::npos; at = out.find("attack threads: ", at + 1)) {
        ++threads;
        std::string line = out.substr(at, out.find('\n', at) - at);
        EXPECT_NE(line.find("seccomp\t2"), std::string::npos) << "a thread without the seccomp filter: " << line;
        EXPECT_NE(line.find("no_new_privs\t1"), std::string::npos) << line;
    }
    EXPECT_GE(threads, 1) << out;
    std::cout << threads << " threads in the candidate process\n";
}

// Nothing of the candidate may run after kevo_forward returns (validate/runner/context_fence.h): a
// thread or a timer's signal handler could launch work that no timed call's end waits for.
TEST(Sandbox, CandidateCannotStartAThreadOrATimer) {
    ValidationResult r = attack("later", "");
    const std::string out = output_of(r);
    const size_t at = out.find("attack later: ");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string line = out.substr(at, out.find('\n', at) - at);
    EXPECT_EQ(line.find("pthread_create 0 "), std::string::npos) << "a thread was started: " << line;
    EXPECT_NE(line.find("setitimer -1 "), std::string::npos) << line;
    EXPECT_NE(line.find("timer_create -1"), std::string::npos) << line;
}

TEST(Sandbox, CandidateCannotLeaveADaemonBehind) {
    fs::path target = scratch("daemon") / "alive";
    auto t0 = std::chrono::steady_clock::now();
    ValidationResult r = attack("daemon", target.string());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, Status::rejected) << r.log;
    EXPECT_LT(s, 20) << "the validation waited for the daemon";
    std::this_thread::sleep_for(std::chrono::seconds(4));  // the daemon would have written by now
    EXPECT_FALSE(fs::exists(target)) << "a process of the candidate outlived its validation";
}

TEST(Sandbox, ForgedChannelMessagesDoNotPass) {
    ValidationResult r = attack("channel", "");
    // Without a GPU a candidate that loads is "no_device"; a forged message must never make it "ok".
    EXPECT_NE(r.status, Status::ok) << r.log;
    if (!gpu_present()) EXPECT_NE(r.status, Status::no_device) << "a forged message was taken for the loader's answer";
}

TEST(Sandbox, UnresolvedSymbolsAreACompileErrorWithoutAGpu) {
    if (gpu_present()) GTEST_SKIP() << "the GPU path reports the same at load time";
    Validator v(load_task(kData / "gelu_bias" / "task.json"), ValidateOptions{});
    ValidationResult r = v.validate(read_file(kData / "attacks" / "unresolved.cu"));
    EXPECT_EQ(r.status, Status::compile_error) << r.log;
    EXPECT_NE(r.log.find("kevo_missing_helper"), std::string::npos) << r.log;
}

TEST(Sandbox, HostileIncludeHitsTheCompilerLimitAndIsNotCached) {
    CompileOptions co;
    co.memory_bytes = 2L << 30;
    co.timeout_s = 60;
    co.cache_dir = scratch("compile-cache");
    std::string src = read_file(kData / "attacks" / "dev_zero.cu");
    CompileResult a = compile_kernel(src, co);
    EXPECT_FALSE(a.ok);
    EXPECT_TRUE(a.limit_hit) << a.log;
    EXPECT_NE(a.log.find("limit"), std::string::npos) << a.log;
    CompileResult b = compile_kernel(src, co);
    EXPECT_FALSE(b.cached) << "a compile stopped by a limit was cached as a permanent verdict";
}

TEST(Sandbox, SwappedCachedLibraryIsNotReused) {
    CompileOptions co;
    co.cache_dir = scratch("swap-cache");
    std::string src = read_file(kData / "gelu_bias" / "kernels" / "good.cu");
    CompileResult a = compile_kernel(src, co);
    ASSERT_TRUE(a.ok) << a.log;
    fs::permissions(a.library, fs::perms::owner_all);
    { std::ofstream(a.library, std::ios::trunc) << "not the library that was built"; }
    CompileResult b = compile_kernel(src, co);
    ASSERT_TRUE(b.ok) << b.log;
    EXPECT_FALSE(b.cached) << "a modified cached .so was reused";
    EXPECT_NE(read_file(b.library), "not the library that was built");
    EXPECT_EQ(sha256_hex(read_file(b.library)), b.library_sha256);
}

TEST(ProcessTest, NeverWaitsOnAPipeADaemonHolds) {
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c", "(setsid sleep 30 &) ; echo done"};
    o.timeout_s = 20;
    auto t0 = std::chrono::steady_clock::now();
    ProcessResult r = run_process(o);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(r.ok()) << r.describe();
    EXPECT_FALSE(r.timed_out);
    EXPECT_LT(s, 5) << "run_process waited for the daemon's end of the pipe";
    EXPECT_NE(r.out.find("done"), std::string::npos);
}
