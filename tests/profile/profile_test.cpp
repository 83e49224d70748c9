// Nsight Compute feedback: the parser on ncu CSV written by hand after ncu's documented formats
// (--page raw: one row per launch, a units row; --page details: one row per launch and metric),
// the summary, the command line, and the Profiler with a missing ncu and with a stand-in ncu script;
// the profiled run is sandboxed: a candidate whose static constructor writes outside its work dir
// never succeeds, neither in kernelevo-profile --confine nor through the Profiler.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>

#include "common/fs.h"
#include "common/process.h"
#include "compile/compile.h"
#include "profile/profile.h"
#include "sandbox/sandbox.h"
#include "task/task.h"

using namespace kevo;
using namespace kevo::profile;

namespace {
const char* kRaw =
    "==PROF== Connected to process 4242 (/opt/kernelevo/bin/kernelevo-runner)\n"
    "==PROF== Profiling \"gelu_bias_kernel\" - 0: 0%....50%....100% - 9 passes\n"
    "==PROF== Profiling \"gelu_bias_kernel\" - 1: 0%....50%....100% - 9 passes\n"
    "==PROF== Profiling \"tail_kernel\" - 2: 0%....50%....100% - 9 passes\n"
    "==PROF== Disconnected from process 4242\n"
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\","
    "\"Device\",\"CC\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\",\"gpu__time_duration.sum\","
    "\"launch__registers_per_thread\",\"sm__maximum_warps_per_active_cycle_pct\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\","
    "\"sm__warps_active.avg.pct_of_peak_sustained_active\","
    "\"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio\","
    "\"smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio\","
    "\"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio\","
    "\"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio\"\n"
    "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"%\",\"nsecond\",\"register/thread\",\"%\",\"%\",\"%\",\"inst\",\"inst\",\"inst\",\"inst\"\n"
    "\"0\",\"4242\",\"kernelevo-runner\",\"127.0.0.1\",\"gelu_bias_kernel(float const*, float const*, float*, long)\",\"1\",\"7\","
    "\"(256, 1, 1)\",\"(65536, 1, 1)\",\"0\",\"9.0\",\"90.10\",\"131,000\",\"32\",\"100\",\"22.50\",\"86.00\",\"12.40\",\"4.10\",\"1.20\",\"0\"\n"
    "\"1\",\"4242\",\"kernelevo-runner\",\"127.0.0.1\",\"gelu_bias_kernel(float const*, float const*, float*, long)\",\"1\",\"7\","
    "\"(256, 1, 1)\",\"(65536, 1, 1)\",\"0\",\"9.0\",\"91.90\",\"133,000\",\"32\",\"100\",\"23.50\",\"88.00\",\"12.60\",\"3.90\",\"1.40\",\"0\"\n"
    "\"2\",\"4242\",\"kernelevo-runner\",\"127.0.0.1\",\"tail_kernel(float*)\",\"1\",\"7\","
    "\"(32, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"0.50\",\"2,500\",\"16\",\"50\",\"0.10\",\"3.00\",\"0.2\",\"0\",\"5.5\",\"7.25\"\n";

const char* kDetails =
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\","
    "\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
    "\"0\",\"77\",\"kernelevo-runner\",\"127.0.0.1\",\"row_softmax\",\"1\",\"7\",\"(1024, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\","
    "\"GPU Speed Of Light Throughput\",\"DRAM Throughput\",\"%\",\"71.3\"\n"
    "\"0\",\"77\",\"kernelevo-runner\",\"127.0.0.1\",\"row_softmax\",\"1\",\"7\",\"(1024, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\","
    "\"GPU Speed Of Light Throughput\",\"Duration\",\"msecond\",\"1.25\"\n"
    "\"0\",\"77\",\"kernelevo-runner\",\"127.0.0.1\",\"row_softmax\",\"1\",\"7\",\"(1024, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\","
    "\"Occupancy\",\"sm__warps_active.avg.pct_of_peak_sustained_active\",\"%\",\"48.5\"\n"
    "\"0\",\"77\",\"kernelevo-runner\",\"127.0.0.1\",\"row_softmax\",\"1\",\"7\",\"(1024, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\","
    "\"Occupancy\",\"Block Limit Registers\",\"block\",\"n/a\"\n";
}  // namespace

TEST(NcuCsv, RawPageAveragesLaunchesPerKernel) {
    auto k = parse_ncu_csv(kRaw);
    ASSERT_EQ(k.size(), 2u);
    EXPECT_EQ(k[0].name, "gelu_bias_kernel(float const*, float const*, float*, long)");
    EXPECT_EQ(k[0].launches, 2);
    EXPECT_EQ(k[0].grid, "(65536, 1, 1)");
    EXPECT_EQ(k[0].block, "(256, 1, 1)");
    EXPECT_DOUBLE_EQ(k[0].value("gpu__time_duration.sum"), 132.0);  // nanoseconds with thousands separators -> us
    EXPECT_DOUBLE_EQ(k[0].value("dram__throughput.avg.pct_of_peak_sustained_elapsed"), 91.0);
    EXPECT_DOUBLE_EQ(k[0].value("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"), 12.5);
    EXPECT_EQ(k[1].launches, 1);
    EXPECT_DOUBLE_EQ(k[1].value("gpu__time_duration.sum"), 2.5);
    EXPECT_EQ(k[1].value("no_such_metric"), -1);
}

TEST(NcuCsv, DetailsPage) {
    auto k = parse_ncu_csv(kDetails);
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0].name, "row_softmax");
    EXPECT_DOUBLE_EQ(k[0].value("gpu__time_duration.sum"), 1250.0);  // "Duration" in ms
    EXPECT_DOUBLE_EQ(k[0].value("sm__warps_active.avg.pct_of_peak_sustained_active"), 48.5);
    EXPECT_EQ(k[0].metrics.count("Block Limit Registers"), 0u);  // n/a is no number
}

TEST(NcuCsv, NoTableIsAClearError) {
    try {
        parse_ncu_csv("==PROF== Connected to process 1\n==ERROR== The application returned an error code (1).\n");
        FAIL();
    } catch (const ProfileError& e) {
        EXPECT_NE(std::string(e.what()).find("no ncu CSV table"), std::string::npos);
    }
    EXPECT_THROW(parse_ncu_csv(""), ProfileError);
}

TEST(NcuCsv, SummaryNamesThroughputOccupancyAndTopStalls) {
    std::string s = summarize(parse_ncu_csv(kRaw));
    EXPECT_EQ(s,
              "gelu_bias_kernel(float const*, float const*, float*, long) [grid (65536, 1, 1), block (256, 1, 1)]: 132 us; "
              "DRAM 91% of peak, SM 23%; achieved occupancy 87% (theoretical 100%); 32 registers/thread; "
              "top stalls (cycles per issued instruction): long_scoreboard 12.5, lg_throttle 4.0, wait 1.3\n"
              "tail_kernel(float*) [grid (1, 1, 1), block (32, 1, 1)]: 2.50 us; DRAM 0% of peak, SM 0%; achieved occupancy 3% "
              "(theoretical 50%); 16 registers/thread; top stalls (cycles per issued instruction): barrier 7.2, wait 5.5, "
              "long_scoreboard 0.2");
    EXPECT_NE(summarize(parse_ncu_csv(kRaw), 1).find("(1 more kernel(s) not shown)"), std::string::npos);
}

TEST(NcuCommand, WrapsTheProgram) {
    ProfileOptions o;
    o.launch_skip = 10;
    o.launch_count = 2;
    o.kernel_regex = "^(?!kevo_flush)";
    auto argv = ncu_command("/usr/local/cuda/bin/ncu", {"/bin/runner", "--job", "j.json"}, o);
    ASSERT_GE(argv.size(), 9u);
    EXPECT_EQ(argv[0], "/usr/local/cuda/bin/ncu");
    EXPECT_EQ(std::vector<std::string>(argv.begin() + 1, argv.begin() + 4), (std::vector<std::string>{"--csv", "--page", "raw"}));
    EXPECT_EQ(argv[4], "--metrics");
    EXPECT_NE(argv[5].find("dram__throughput.avg.pct_of_peak_sustained_elapsed,"), std::string::npos);
    EXPECT_NE(argv[5].find("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"), std::string::npos);
    std::string all;
    for (const auto& a : argv) all += a + " ";
    EXPECT_NE(all.find("--launch-skip 10 --launch-count 2 --kernel-name regex:^(?!kevo_flush) /bin/runner --job j.json"),
              std::string::npos)
        << all;
}

TEST(Profiler, WithoutNcuSaysSoOnceAndGoesOn) {
    std::vector<std::string> said;
    ProfileOptions o;
    o.ncu = "/nonexistent/ncu";
    Profiler p(o, [&](const std::string& m) { said.push_back(m); });
    EXPECT_FALSE(p.available());
    EXPECT_EQ(p.profile({"/bin/true"}), "");
    EXPECT_EQ(p.profile({"/bin/true"}), "");
    ASSERT_EQ(said.size(), 1u);
    EXPECT_NE(said[0].find("ncu) not found"), std::string::npos);
}

TEST(Profiler, RunsNcuAndSummarizes) {
    if (std::string why = sandbox_refusal(); !why.empty()) GTEST_SKIP() << "no sandbox for ncu here: " << why;
    // A stand-in ncu: checks that it wraps the program, then prints the recorded CSV.
    TempDir dir("kevo-profile-test");
    write_file_atomic(dir.path() / "out.csv", kRaw);
    const fs::path fake = dir.path() / "ncu";
    write_file_atomic(fake, "#!/bin/sh\n"
                            "for last; do :; done\n"
                            "[ \"$1\" = --csv ] && [ \"$last\" = program-arg ] || { echo 'bad command line' >&2; exit 3; }\n"
                            "cat '" + (dir.path() / "out.csv").string() + "'\n");
    ::chmod(fake.c_str(), 0755);
    ProfileOptions o;
    o.ncu = fake.string();
    Profiler p(o);
    ASSERT_TRUE(p.available());
    std::string s = p.profile({"/bin/runner", "program-arg"});
    EXPECT_EQ(s.rfind("gelu_bias_kernel(", 0), 0u) << s;
    EXPECT_NE(s.find("DRAM 91% of peak"), std::string::npos) << s;
    // An ncu without a stall metric: retried with the core metrics only.
    write_file_atomic(fake, "#!/bin/sh\n"
                            "case \"$*\" in *stalled*) echo '==ERROR== Failed to find metric smsp__x' >&2; exit 1;; esac\n"
                            "cat '" + (dir.path() / "out.csv").string() + "'\n");
    ::chmod(fake.c_str(), 0755);
    EXPECT_EQ(p.profile({"/bin/runner", "program-arg"}).rfind("gelu_bias_kernel(", 0), 0u);
    write_file_atomic(fake, "#!/bin/sh\necho 'bad command line' >&2; exit 3\n");
    ::chmod(fake.c_str(), 0755);
    std::string failed = p.profile({"/bin/runner", "other"});
    EXPECT_EQ(failed.rfind("profile failed: ncu exit code 3", 0), 0u) << failed;
    EXPECT_NE(failed.find("bad command line"), std::string::npos) << failed;
    // No access to the counters: said once, then profiling is off.
    write_file_atomic(fake, "#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission' >&2; exit 1\n");
    ::chmod(fake.c_str(), 0755);
    EXPECT_NE(p.profile({"/bin/runner", "x"}).find("ERR_NVGPUCTRPERM"), std::string::npos);
    EXPECT_FALSE(p.available());
    EXPECT_EQ(p.profile({"/bin/runner", "x"}), "");
}

TEST(ProfileProgram, CommandDescribesTheTaskTensorsByTheirTables) {
    Task t = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto argv = profile_program_command("/opt/kernelevo-profile", "/cache/k.so", t, 1, 2, 1);
    EXPECT_EQ(argv, (std::vector<std::string>{"/opt/kernelevo-profile", "--kernel", "/cache/k.so", "--warmup", "2", "--calls", "1", "--confine",
                                              "--in", "0:33,1001:0:0:1",  // float32, randn (mean 0, std 1)
                                              "--in", "0:1001:0:0:1", "--out", "0:33,1001"}));
    ProfileOptions o = profile_program_options();
    auto ncu = ncu_command("ncu", argv, o);
    std::string all;
    for (const auto& a : ncu) all += a + " ";
    EXPECT_NE(all.find(" --profile-from-start off "), std::string::npos) << all;  // only the program's profiled calls
    EXPECT_EQ(all.find("--launch-count"), std::string::npos) << all;           // every launch in them
}

// $KERNELEVO_PROFILE names the program; the old $KERNELEVO_BENCH (the program was kernelevo-bench)
// still does while the new one is unset, and says once on stderr that it is deprecated.
TEST(ProfileProgram, TheEnvironmentNamesItAndTheOldNameIsDeprecated) {
    ::unsetenv("KERNELEVO_PROFILE");
    ::unsetenv("KERNELEVO_BENCH");
    const fs::path built = default_profile_program();
    EXPECT_EQ(built.filename(), "kernelevo-profile");
    EXPECT_TRUE(fs::exists(built)) << built;
    ::setenv("KERNELEVO_BENCH", "/opt/old/kernelevo-bench", 1);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(default_profile_program(), "/opt/old/kernelevo-bench");
    EXPECT_EQ(default_profile_program(), "/opt/old/kernelevo-bench");
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("KERNELEVO_BENCH is deprecated"), std::string::npos) << said;
    EXPECT_NE(said.find("set KERNELEVO_PROFILE instead"), std::string::npos) << said;
    EXPECT_EQ(said.find("deprecated"), said.rfind("deprecated")) << "said once: " << said;
    ::setenv("KERNELEVO_PROFILE", "/opt/new/kernelevo-profile", 1);
    EXPECT_EQ(default_profile_program(), "/opt/new/kernelevo-profile") << "the new name wins";
    ::unsetenv("KERNELEVO_PROFILE");
    ::unsetenv("KERNELEVO_BENCH");
    EXPECT_EQ(default_profile_program(), built);
}

TEST(ProfileProgram, RejectsBadUsageAndLoadsARealCandidate) {
    ProcessOptions po;
    po.argv = {default_profile_program().string(), "--kernel", "k.so", "--out", "99:4"};
    po.timeout_s = 60;
    ProcessResult bad = run_process(po);
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("unknown dtype in '99:4'"), std::string::npos) << bad.err;
    po.argv = {default_profile_program().string(), "--kernel", "/nonexistent/k.so", "--out", "0:4"};
    ProcessResult missing = run_process(po);
    EXPECT_EQ(missing.exit_code, 3) << missing.err;

    // A real candidate built by nvcc: it loads; without a GPU the first CUDA call fails cleanly.
    TempDir cache("kevo-profile-program-test");
    CompileOptions co;
    co.cache_dir = cache.path();
    CompileResult c = compile_kernel(read_file(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "kernels" / "good.cu"), co);
    ASSERT_TRUE(c.ok) << c.log;
    Task t = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    po.argv = profile_program_command(default_profile_program(), c.library, t, 1);
    ProcessResult r = run_process(po);
    if (r.exit_code == 0) GTEST_SKIP() << "a GPU ran it (profiled on the GPU host by kevo_search_gpu_test)";
    EXPECT_EQ(r.exit_code, 4) << r.describe() << " " << r.err;
    EXPECT_NE(r.err.find("kernelevo-profile: cudaMalloc: "), std::string::npos) << r.err;
}

// A candidate of kernel ABI version 2 (cuBLAS through the caller's handle) loads too: the program
// exports kevo_cublas_handle and the like, and the candidate's cuBLAS loads beside it.
TEST(ProfileProgram, LoadsACandidateThatCallsCublas) {
    TempDir cache("kevo-profile-program-test");
    CompileOptions co;
    co.cache_dir = cache.path();
    CompileResult c = compile_kernel(read_file(fs::path(KEVO_TEST_DATA_DIR) / "matmul" / "kernels" / "cublas_sgemm.cu"), co);
    ASSERT_TRUE(c.ok) << c.log;
    ProcessOptions po;
    po.argv = profile_program_command(default_profile_program(), c.library, load_task(fs::path(KEVO_TEST_DATA_DIR) / "matmul" / "task.json"), 1);
    po.timeout_s = 60;
    ProcessResult r = run_process(po);
    if (r.exit_code == 0) GTEST_SKIP() << "a GPU ran it (profiled on the GPU host by kevo_search_gpu_test)";
    EXPECT_EQ(r.exit_code, 4) << r.describe() << " " << r.err;  // 3 would be: the kernel could not be loaded
    EXPECT_NE(r.err.find("kernelevo-profile: cudaMalloc: "), std::string::npos) << r.err;
}

// ---- the profiled run is sandboxed ----------------------------------------------------------------

namespace {
// A hostile "candidate" (built by the host compiler: no GPU code needed) whose static constructor
// writes `target`; it has no kevo_forward, so a kernelevo-profile that loads it exits 3 right after.
fs::path build_escaping_library(const fs::path& dir, const fs::path& target) {
    write_file_atomic(dir / "escape.cpp", "#include <cstdio>\n"
                                          "__attribute__((constructor)) static void escape() {\n"
                                          "    if (FILE* f = std::fopen(\"" + target.string() + "\", \"w\")) { std::fputs(\"escaped\", f); std::fclose(f); }\n"
                                          "}\n");
    ProcessOptions po;
    po.argv = {"c++", "-shared", "-fPIC", "-o", (dir / "escape.so").string(), (dir / "escape.cpp").string()};
    po.timeout_s = 120;
    ProcessResult r = run_process(po);
    EXPECT_TRUE(r.ok()) << r.describe() << " " << r.err;
    return dir / "escape.so";
}

// A directory outside /tmp: the confined program may write to /tmp, which in the profiler's sandbox is
// a private one. The build tree, unless it lies under /tmp itself (a CI clone may), else /var/tmp.
fs::path outside_dir() {
    const std::string name = "profile-escape-" + std::to_string(::getpid());
    const std::string bin = fs::weakly_canonical(KEVO_BINARY_DIR).string();
    fs::path d = bin.rfind("/tmp/", 0) == 0 ? fs::path("/var/tmp") / name : fs::path(bin) / "tests" / name;
    fs::create_directories(d);
    return d;
}
}  // namespace

TEST(ProfileProgram, ConfinedCandidateCannotWriteOutsideItsWorkDir) {
    if (!sandbox_layers().landlock) GTEST_SKIP() << "no Landlock in this kernel: " << sandbox_layers().why_not;
    TempDir dir("kevo-profile-escape");
    const fs::path out = outside_dir();
    const fs::path target = out / "escaped.txt";
    const fs::path lib = build_escaping_library(dir.path(), target);
    fs::create_directories(dir.path() / "work");
    ProcessOptions po;
    po.cwd = dir.path() / "work";
    po.timeout_s = 60;
    // Unconfined, the constructor does write there: the test's candidate really escapes.
    po.argv = {default_profile_program().string(), "--kernel", lib.string(), "--out", "0:4"};
    ProcessResult free_run = run_process(po);
    EXPECT_EQ(free_run.exit_code, 3) << free_run.err;  // loaded, no kevo_forward
    EXPECT_TRUE(fs::exists(target));
    fs::remove(target);
    // Confined (as the profiler runs it), the same constructor cannot.
    po.argv = {default_profile_program().string(), "--kernel", lib.string(), "--out", "0:4", "--confine"};
    ProcessResult confined = run_process(po);
    EXPECT_EQ(confined.exit_code, 3) << confined.describe() << " " << confined.err;  // loaded, constructor ran
    EXPECT_FALSE(fs::exists(target)) << "the candidate's static constructor wrote outside its work dir";
    fs::remove_all(out);
}

TEST(Profiler, RunsTheProgramInsideTheSandbox) {
    TempDir dir("kevo-profile-sandbox");
    const fs::path out = outside_dir();
    const fs::path target = out / "escaped.txt";
    const fs::path lib = build_escaping_library(dir.path(), target);
    write_file_atomic(dir.path() / "out.csv", kRaw);
    // A stand-in ncu that runs the program it wraps (kernelevo-profile) and prints the recorded CSV when
    // the program got as far as loading the candidate (exit 3: no kevo_forward); it also reports whether
    // a secret of the parent's environment reached it.
    const fs::path fake = dir.path() / "ncu";
    const std::string program = default_profile_program().string();
    write_file_atomic(fake, "#!/bin/sh\n"
                            "while [ $# -gt 0 ] && [ \"$1\" != '" + program + "' ]; do shift; done\n"
                            "[ -n \"$OPENAI_API_KEY\" ] && { echo 'secret in the environment' >&2; exit 7; }\n"
                            "\"$@\"; rc=$?\n"
                            "[ $rc = 3 ] || { echo \"kernelevo-profile exit $rc\" >&2; exit 9; }\n"
                            "cat '" + (dir.path() / "out.csv").string() + "'\n");
    ::chmod(fake.c_str(), 0755);
    ::setenv("OPENAI_API_KEY", "sk-test-not-a-secret", 1);
    std::vector<std::string> said;
    ProfileOptions o = profile_program_options();
    o.ncu = fake.string();
    Profiler p(o, [&](const std::string& m) { said.push_back(m); });
    Task t = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    const std::string why = sandbox_refusal();
    std::string s = p.profile(profile_program_command(default_profile_program(), lib, t, 1), {lib});
    ::unsetenv("OPENAI_API_KEY");
    if (!why.empty()) {  // no sandbox for it here: skipped, said once, nothing run
        EXPECT_EQ(s, "");
        ASSERT_EQ(said.size(), 1u);
        EXPECT_EQ(said[0], "profiling skipped: " + why);
    } else {
        EXPECT_EQ(s.rfind("gelu_bias_kernel(", 0), 0u) << s;  // the program ran and loaded the candidate
        EXPECT_TRUE(said.empty());
    }
    EXPECT_FALSE(fs::exists(target)) << "the candidate's static constructor wrote outside its work dir";
    fs::remove_all(out);
}

TEST(Profiler, WithTheSandboxOffNothingIsProfiled) {
    const SandboxMode before = sandbox_mode();
    set_sandbox_mode(SandboxMode::off);
    std::vector<std::string> said;
    ProfileOptions o;
    o.ncu = "/bin/true";  // an "ncu" that exists: only the sandbox stops it
    Profiler p(o, [&](const std::string& m) { said.push_back(m); });
    EXPECT_FALSE(p.available());
    EXPECT_EQ(p.profile({"/bin/true"}), "");
    set_sandbox_mode(before);
    ASSERT_EQ(said.size(), 1u);
    EXPECT_EQ(said[0], "profiling skipped: the sandbox is off (--sandbox off), and a candidate is never profiled outside it");
}
