// Child processes: watchdog, signals, output capture and limits, secret scrubbing.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/fs.h"
#include "common/process.h"

using namespace kevo;

TEST(Process, CapturesOutputAndExitCode) {
    ProcessOptions o;
    o.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
    auto r = run_process(o);
    EXPECT_TRUE(r.started);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(r.out, "out\n");
    EXPECT_EQ(r.err, "err\n");
    EXPECT_FALSE(r.ok());
}

TEST(Process, WatchdogKillsTheWholeGroup) {
    ProcessOptions o;
    o.argv = {"sh", "-c", "sleep 30 & sleep 30"};
    o.timeout_s = 0.5;
    auto r = run_process(o);
    EXPECT_TRUE(r.timed_out);
    EXPECT_LT(r.seconds, 5);
    EXPECT_NE(r.describe().find("timed out"), std::string::npos);
}

TEST(Process, ReportsSignals) {
    ProcessOptions o;
    o.argv = {"sh", "-c", "kill -SEGV $$"};
    auto r = run_process(o);
    EXPECT_EQ(r.term_signal, 11);
    EXPECT_NE(r.describe().find("signal 11"), std::string::npos);
}

TEST(Process, MissingProgramIsNotStarted) {
    ProcessOptions o;
    o.argv = {"/nonexistent/program"};
    auto r = run_process(o);
    EXPECT_FALSE(r.started);
    EXPECT_NE(r.error.find("/nonexistent/program"), std::string::npos);
}

TEST(Process, OutputIsCapped) {
    ProcessOptions o;
    o.argv = {"sh", "-c", "head -c 5000000 /dev/zero"};
    o.max_output_bytes = 1000;
    auto r = run_process(o);
    EXPECT_TRUE(r.ok());
    EXPECT_LT(r.out.size(), 1200u);
    EXPECT_NE(r.out.find("truncated"), std::string::npos);
}

// What a child wrote before it exited is all read, even when this process could not run between
// the child's last write and its exit (a loaded machine): the exit grace only ends the wait for a
// pipe that a daemon the child left holds open. The child stops this process (and waits until it
// is stopped), writes more than one read takes into enlarged pipes, and exits; a grandchild with no
// copy of the pipes continues this process once the child is gone. With no grace at all, the code
// before gave up after one 64 KiB read, as soon as it saw the child reaped.
TEST(Process, EverythingAChildWroteBeforeItExitedIsReadWhateverTheGrace) {
    const char* script = R"PY(
import fcntl, os, signal, time
parent, me = os.getppid(), os.getpid()
os.kill(parent, signal.SIGSTOP)
try:
    while open("/proc/%d/stat" % parent).read().rsplit(")", 1)[1].split()[0] != "T":
        time.sleep(0.001)
    for fd, n in ((1, 200000), (2, 100000)):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 262144)
        os.write(fd, b"x" * n)
finally:  # (whatever happened: this process must run again)
    if os.fork() == 0:
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        while os.getppid() == me:
            time.sleep(0.001)
        os.kill(parent, signal.SIGCONT)
        os._exit(0)
)PY";
    for (int round = 0; round < 3; ++round) {
        ProcessOptions o;
        o.argv = {"python3", "-c", script};
        o.exit_grace_s = 0;
        auto r = run_process(o);
        ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.err.substr(0, 2000);
        EXPECT_EQ(r.out.size(), 200000u);
        EXPECT_EQ(r.err.size(), 100000u);
    }
}

TEST(Process, SecretsNeverReachChildren) {
    setenv("KERNELEVO_API_KEY", "sk-test-secret-1234", 1);
    setenv("OPENROUTER_API_KEY", "sk-or-secret-5678", 1);
    setenv("KEVO_HARMLESS", "visible", 1);
    ProcessOptions o;
    o.argv = {"env"};
    auto r = run_process(o);
    EXPECT_EQ(r.out.find("sk-test-secret-1234"), std::string::npos);
    EXPECT_EQ(r.out.find("sk-or-secret-5678"), std::string::npos);
    EXPECT_NE(r.out.find("KEVO_HARMLESS=visible"), std::string::npos);
    EXPECT_TRUE(is_secret_env_name("MY_SERVICE_TOKEN"));
    EXPECT_FALSE(is_secret_env_name("PATH"));
}

TEST(Process, RedactReplacesRegisteredSecrets) {
    register_secret("sk-abcdef123456");
    EXPECT_EQ(redact("Authorization: Bearer sk-abcdef123456 and sk-abcdef123456"), "Authorization: Bearer *** and ***");
    EXPECT_EQ(redact("nothing here"), "nothing here");
}

TEST(Fs, AtomicWriteAndTempDir) {
    fs::path kept;
    {
        TempDir d("kevo-fs-test");
        kept = d.path();
        write_file_atomic(d.path() / "a" / "b.txt", "hello");
        EXPECT_EQ(read_file(d.path() / "a" / "b.txt"), "hello");
        write_file_atomic(d.path() / "a" / "b.txt", "world");
        EXPECT_EQ(read_file(d.path() / "a" / "b.txt"), "world");
        EXPECT_EQ(std::distance(fs::directory_iterator(d.path() / "a"), fs::directory_iterator()), 1);  // no temp left
    }
    EXPECT_FALSE(fs::exists(kept));
}

// A relative KERNELEVO_CACHE_HOME names one place for every process, wherever it runs: the
// profiler's sandboxed bench loads cached kernels from its own work directory.
TEST(CacheRoot, ARelativeCacheHomeIsMadeAbsolute) {
    const char* old = std::getenv("KERNELEVO_CACHE_HOME");
    const std::string saved = old ? old : "";
    setenv("KERNELEVO_CACHE_HOME", "rel/cache", 1);
    const fs::path root = kevo::cache_root();
    if (old) setenv("KERNELEVO_CACHE_HOME", saved.c_str(), 1); else unsetenv("KERNELEVO_CACHE_HOME");
    EXPECT_TRUE(root.is_absolute()) << root;
    EXPECT_EQ(root, fs::current_path() / "rel" / "cache");
}
