// Real `cmake` configure + build of a small user project (tests/cmake/project) and of the example:
// cache hit / missing / stale reporting, the generated files, the task hashes computed in CMake
// agreeing with kevo::Task, required kernels (configure-time searches: cmake_search_test.cpp),
// add_subdirectory() mode, and adding an architecture rebuilding only that kernel.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "cache/cache.h"
#include "cmake_project.h"
#include "common/fs.h"
#include "common/process.h"
#include "task/task.h"

namespace fs = std::filesystem;
using namespace kevo;
using namespace kevo::cmake_test;

namespace {

TEST_F(CMakeProject, HashesAgreeWithTheToolAndHeadersHaveTheReferenceSignature) {
    Outcome r = configure({"-DKEVO_TEST_VARIANTS=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    for (const char* fn : {"scale", "mixed", "tol", "tiny"}) {
        SCOPED_TRACE(fn);
        Task t = task(fn);  // the tool's parser accepts what CMake wrote
        auto l = lookup(fn);
        EXPECT_EQ(l["task_hash"], t.hash()) << read_file(build / "kernelevo" / fn / "task.json");
        EXPECT_EQ(l["reference_hash"], t.reference_hash());
    }
    Task mixed = task("mixed");
    EXPECT_EQ(mixed.atol, 1e-2);  // float16 default
    EXPECT_EQ(mixed.shapes.size(), 2u);
    EXPECT_EQ(mixed.shapes[1].at("B"), 100);
    EXPECT_EQ(mixed.correctness_trials, 3);
    EXPECT_EQ(mixed.timed_sets(), (std::vector<int>{0, 1}));  // TIMING_WEIGHTS and FLOPS reach the task
    EXPECT_EQ(mixed.weights(), (std::vector<double>{3, 1.5}));
    EXPECT_EQ(mixed.flops, "2*B*4");
    EXPECT_TRUE(task("tiny").timing_sets.empty());  // TIMING_SHAPES naming every set is the default
    EXPECT_EQ(mixed.reference_function, "ref::deep::mixed_ref");
    Task tol = task("tol");
    EXPECT_EQ(tol.atol, 2.5e-7);
    EXPECT_EQ(tol.rtol, 0.123456789012);  // every digit kept (a tolerance of 1 or more is refused)
    // PRECISION reaches the task (and its hash, compared above); the default is left out.
    EXPECT_EQ(tol.precision.policy, KEVO_PRECISION_STRICT);
    EXPECT_EQ(task("tiny").precision.policy, KEVO_PRECISION_TF32);
    EXPECT_TRUE(mixed.precision.is_default());
    EXPECT_FALSE(contains(read_file(build / "kernelevo" / "mixed" / "task.json"), "precision"));
    // Architectures: explicit list normalized, one line each.
    EXPECT_TRUE(contains(r.out, "KernelEvo: mixed sm_90a: missing")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: mixed sm_80: missing")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: mixed sm_90: missing")) << r.out;

    std::string h = read_file(build / "kernelevo" / "include" / "kernelevo" / "scale.h");
    EXPECT_TRUE(contains(h, "namespace kernelevo {\nat::Tensor scale(const at::Tensor& x);")) << h;
    EXPECT_FALSE(contains(h, "ATen")) << "the header must stay torch-free";
    h = read_file(build / "kernelevo" / "include" / "kernelevo" / "mixed.h");
    EXPECT_TRUE(contains(h, "namespace evo::ops {\nstd::tuple<at::Tensor, at::Tensor> mixed(const at::Tensor& a, const at::Tensor& idx,"))
        << h;
    h = read_file(build / "kernelevo" / "include" / "kernelevo" / "tol.h");
    EXPECT_TRUE(contains(h, "std::vector<at::Tensor> tol(const at::Tensor& x, const at::Tensor& y);")) << h;
    std::string d = read_file(build / "kernelevo" / "mixed" / "dispatch.cpp");
    EXPECT_TRUE(contains(d, "namespace ref::deep {\nstd::tuple<at::Tensor, at::Tensor> mixed_ref(")) << d;
    EXPECT_TRUE(contains(d, "{\"s\", 6, 0, {0}}")) << d;  // 0-dim float64
    EXPECT_TRUE(contains(d, "{\"k\", 8, 1, {3}}")) << d;  // literal size

    // `kernelevo cache hash` agrees too, when the tool is built.
    fs::path exe = kBinary / "tool" / "cli" / "kernelevo";
    if (fs::exists(exe)) {
        Outcome hr = run({exe.string(), "cache", "hash", "--task", (build / "kernelevo" / "mixed" / "task.json").string(), "--json"});
        ASSERT_EQ(hr.rc, 0) << hr.out;
        EXPECT_EQ(nlohmann::json::parse(hr.out)["task_hash"], lookup("mixed")["task_hash"]);
    }
}

// KERNELEVO_PRECISION sets the policy of functions without PRECISION; an unknown policy, in the
// option or in a function, fails configure with the valid names (the table's, generated).
TEST_F(CMakeProject, PrecisionOptionAndUnknownPoliciesFailConfigure) {
    Outcome r = configure({"-DKERNELEVO_PRECISION=strict", "-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    Task scale = task("scale");
    EXPECT_EQ(scale.precision.policy, KEVO_PRECISION_STRICT);
    EXPECT_EQ(lookup("scale")["task_hash"], scale.hash());
    // CMake wraps an error's lines: compare with whitespace runs made one space.
    auto flat = [](const std::string& text) { return std::regex_replace(text, std::regex("\\s+"), " "); };
    r = configure({"-DKERNELEVO_PRECISION=half"});
    EXPECT_NE(r.rc, 0);
    EXPECT_TRUE(contains(flat(r.out), "KERNELEVO_PRECISION: unknown precision policy 'half' (expected one of: pytorch, strict, tf32, bf16)"))
        << r.out;
    r = configure({"-DKERNELEVO_PRECISION=pytorch", "-DKEVO_TEST_BAD_PRECISION=ON"});
    EXPECT_NE(r.rc, 0);
    EXPECT_TRUE(contains(flat(r.out), "kernelevo_optimize(bad_precision): PRECISION: unknown precision policy 'fp16' (expected one of: "
                                "pytorch, strict, tf32, bf16)")) << r.out;
    r = configure({"-DKEVO_TEST_BAD_PRECISION=OFF"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(task("scale").precision.is_default());
}

TEST_F(CMakeProject, ReportsMissingHitAndStale) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string task_file = (build / "kernelevo" / "scale" / "task.json").string();
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing -> reference. Fill it with: ")) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("kernelevo search --task " + task_file + " --out " + cache_dir.string() +
                                                    " --arch sm_90")))
        << r.out;
    EXPECT_FALSE(contains(read_file(build / "kernelevo" / "scale" / "dispatch.cpp"), "kevo_scale_sm90_forward"));
    EXPECT_EQ(lookup("scale")["architectures"][0]["state"], "missing");

    store("sm_90", scale_kernel(2));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel (2.5x vs reference, hand-written, 2026-12-02)")) << r.out;
    std::string d = read_file(build / "kernelevo" / "scale" / "dispatch.cpp");
    EXPECT_TRUE(contains(d, "{\"sm_90\", 90, &kevo_scale_sm90_forward}")) << d;
    EXPECT_EQ(lookup("scale")["architectures"][0]["state"], "valid");

    // Comment- and whitespace-only edits of the reference leave the entry valid.
    std::ofstream(src / "ref" / "scale.cpp", std::ios::app) << "// changed\n\n   /* a note */\n";
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;

    // A header the reference includes from the project changes: stale, reported, not compiled in.
    std::string header = read_file(src / "ref" / "scale_factor.h");
    write_file_atomic(src / "ref" / "scale_factor.h", std::regex_replace(header, std::regex("= 2;"), "= 3;"));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: stale (the reference source changed) -> reference. Refresh it with: ")) << r.out;
    EXPECT_FALSE(contains(read_file(build / "kernelevo" / "scale" / "dispatch.cpp"), "kevo_scale_sm90_forward"));
    // The tool agrees: its reference hash covers the header too.
    EXPECT_EQ(lookup("scale")["reference_hash"], task("scale").reference_hash());
    write_file_atomic(src / "ref" / "scale_factor.h", header);
    r = configure();
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;
    // So does an edit of the reference's code.
    std::string ref = read_file(src / "ref" / "scale.cpp");
    write_file_atomic(src / "ref" / "scale.cpp", std::regex_replace(ref, std::regex("x \\* kScaleFactor"), "x * kScaleFactor + 0"));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: stale (the reference source changed)")) << r.out;

    // Kernels required: configure fails, naming the gap.
    r = configure({"-DKERNELEVO_REQUIRE_KERNELS=ON"});
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "no valid cached kernel for sm_90")) << r.out;
    r = configure({"-DKERNELEVO_REQUIRE_KERNELS=OFF"});
    EXPECT_EQ(r.rc, 0) << r.out;

    // The task changes (new shape set): stale for that reason.
    fs::remove_all(cache_dir);
    r = configure();
    store("sm_90", scale_kernel(2));
    std::string cm = read_file(src / "CMakeLists.txt");
    cm.replace(cm.find("\"N=1000\" \"N=7\""), 14, "\"N=1000\" \"N=9\"");
    write_file_atomic(src / "CMakeLists.txt", cm);
    r = configure();
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: stale (the task changed")) << r.out;

    // A hand edit of the cached kernel is noticed.
    cm.replace(cm.find("\"N=1000\" \"N=9\""), 14, "\"N=1000\" \"N=7\"");
    write_file_atomic(src / "CMakeLists.txt", cm);
    std::ofstream(cache_dir / "scale" / "sm_90.cu", std::ios::app) << "// tweak\n";
    r = configure();
    EXPECT_TRUE(contains(r.out, "kernel source was edited")) << r.out;
}

TEST_F(CMakeProject, AddSubdirectoryModeWorks) {
    Outcome r = configure({"-DKEVO_TEST_SUBDIR=" + kSource.string(), "-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing -> reference")) << r.out;
}

TEST_F(CMakeProject, OtherToolkitOrLibTorchVersionsAreReportedNotStale) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    Task t = task("scale");
    cache::EntryMeta m = cache::entry_from_validation(t, "sm_90", {{"status", "ok"}, {"speedup", 1.5}});
    m.toolkit = "nvcc 1.0";
    m.libtorch = "0.1.0";
    m.origin = "manual";
    cache::store(cache_dir, scale_kernel(2), m);
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel (1.5x vs reference, hand-written")) << r.out;
    EXPECT_TRUE(contains(r.out, "validated with nvcc 1.0, this build has nvcc ")) << r.out;
    EXPECT_TRUE(contains(r.out, "validated with LibTorch 0.1.0, this build has ")) << r.out;
    // What the builder records matches this build: nothing to report.
    cache::store(cache_dir, scale_kernel(2), cache::entry_from_validation(t, "sm_90", {{"status", "ok"}, {"speedup", 1.5}}));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(contains(r.out, "validated with")) << r.out;
}

// Issue 49: a kernel its entry measured slower than the reference is kept out: the reference is built,
// said once with the figure (and by `cache status` against the build); KERNELEVO_MIN_SPEEDUP and the
// function's MIN_SPEEDUP move the minimum; a malformed speedup is an invalid entry with the tool's
// reason, never a failed configure.
TEST_F(CMakeProject, AKernelMeasuredSlowerThanItsReferenceIsKeptOut) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKEVO_TEST_ARCHES=90;90a"});
    ASSERT_EQ(r.rc, 0) << r.out;
    auto put = [&](double speedup) {
        cache::EntryMeta m = manual_entry(task("scale"), "sm_90");
        m.speedup = speedup;
        cache::store(cache_dir, scale_kernel(2), m);
    };
    const fs::path dispatch = build / "kernelevo" / "scale" / "dispatch.cpp";
    auto compiled_in = [&] { return contains(read_file(dispatch), "kevo_scale_sm90_forward"); };
    auto kept = [](const std::string& minimum, const std::string& why) {
        return "KernelEvo: kernel for scale on sm_90 kept out (" + minimum + "): " + why + "; the reference is built";
    };
    put(0.91);
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string said =
        kept("KERNELEVO_MIN_SPEEDUP 1.0", "measured 0.91x over its reference: below the minimum speedup 1");
    EXPECT_TRUE(contains(r.out, said)) << r.out;
    EXPECT_EQ(r.out.find(said), r.out.rfind(said)) << "said once: " << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90a: missing -> reference")) << r.out;  // nor as a compatible one
    EXPECT_TRUE(contains(r.out, "0 cached, 0 using a compatible kernel, 1 missing, 0 stale, 0 invalid, "
                                "1 kept out (measured slower than the minimum speedup)")) << r.out;
    EXPECT_FALSE(compiled_in());
    EXPECT_EQ(lookup("scale")["architectures"][0]["state"], "kept_out");
    EXPECT_EQ(lookup("scale")["min_speedup"], 1.0);
    Outcome s = run({KEVO_EXE, "cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string(),
                     "--json"});
    EXPECT_EQ(s.rc, 1) << s.out;
    EXPECT_EQ(nlohmann::json::parse(s.out)["build_lacks"][0]["kept_out"],
              "measured 0.91x over its reference: below the minimum speedup 1") << s.out;

    put(1.3);
    r = configure();
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel (1.3x vs reference, hand-written")) << r.out;
    EXPECT_TRUE(compiled_in());
    // The minimum moved: the option for every function, MIN_SPEEDUP for one (over the option).
    r = configure({"-DKERNELEVO_MIN_SPEEDUP=1.5"});
    EXPECT_TRUE(contains(r.out, kept("KERNELEVO_MIN_SPEEDUP 1.5", "measured 1.3x over its reference: below the minimum "
                                                                  "speedup 1.5"))) << r.out;
    EXPECT_FALSE(compiled_in());
    r = configure({"-DKEVO_TEST_MIN_SPEEDUP=1.2"});
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel (1.3x")) << r.out;
    EXPECT_TRUE(compiled_in());
    r = configure({"-DKEVO_TEST_MIN_SPEEDUP=1.4"});
    EXPECT_TRUE(contains(r.out, kept("MIN_SPEEDUP 1.4", "measured 1.3x over its reference: below the minimum "
                                                        "speedup 1.4"))) << r.out;
    // (CMake wraps an error's lines: compared with whitespace runs made one space)
    auto flat = [](const std::string& text) { return std::regex_replace(text, std::regex("\\s+"), " "); };
    r = configure({"-DKEVO_TEST_MIN_SPEEDUP=fast"});
    EXPECT_NE(r.rc, 0);
    EXPECT_TRUE(contains(flat(r.out), "kernelevo_optimize(scale): MIN_SPEEDUP: 'fast' is not a number >= 0")) << r.out;
    r = configure({"-UKEVO_TEST_MIN_SPEEDUP", "-DKERNELEVO_MIN_SPEEDUP=-1"});
    EXPECT_NE(r.rc, 0);
    EXPECT_TRUE(contains(flat(r.out), "KernelEvo: KERNELEVO_MIN_SPEEDUP: '-1' is not a number >= 0")) << r.out;
    r = configure({"-DKERNELEVO_MIN_SPEEDUP=0"});
    EXPECT_TRUE(compiled_in()) << r.out;
    // An entry that records no speedup (stored unvalidated, or validated without timing): the minimum applies to
    // measured speedups only (as in Python's load_model), so it is compiled in under any minimum, said unmeasured.
    put(0);
    for (const char* minimum : {"1.0", "0"}) {
        r = configure({std::string("-DKERNELEVO_MIN_SPEEDUP=") + minimum});
        EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel (speedup not measured, hand-written, "
                                    "2026-12-02)")) << r.out;
        EXPECT_FALSE(contains(r.out, "kept out")) << r.out;
        EXPECT_TRUE(compiled_in()) << minimum;
        EXPECT_EQ(lookup("scale")["architectures"][0]["state"], "valid") << minimum;
    }
    // The verdicts are the tool's: a program that gives none leaves every architecture to the reference, said once.
    const fs::path fake = tmp->path() / "fake-kernelevo";
    write_file_atomic(fake, "#!/bin/sh\necho 'kernelevo: broken on purpose' >&2\nexit 2\n");
    fs::permissions(fake, fs::perms::owner_all);
    r = configure({"-DKERNELEVO_EXECUTABLE=" + fake.string()});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(flat(r.out), "KernelEvo: scale: the cached kernels in " + (cache_dir / "scale").string() +
                                          " cannot be checked: `kernelevo cache status` failed (exit 2): kernelevo: "
                                          "broken on purpose; every architecture runs the reference")) << r.out;
    EXPECT_EQ(lookup("scale")["architectures"][0]["state"], "unchecked");
    EXPECT_FALSE(compiled_in());
    put(1.3);
    r = configure({"-UKERNELEVO_EXECUTABLE", "-DKERNELEVO_MIN_SPEEDUP=1.0"});
    EXPECT_TRUE(compiled_in()) << r.out;

    // Malformed speedups: an invalid entry with the tool's reason, the reference; configure goes on.
    const fs::path meta = cache_dir / "scale" / "sm_90.json";
    const std::string text = read_file(meta), stored = "\"speedup\": 1.3";
    ASSERT_TRUE(contains(text, stored)) << text;
    for (const std::string bad : {"-1", "null", "\"fast\"", "NaN"}) {
        std::string t = text;
        write_file_atomic(meta, t.replace(t.find(stored), stored.size(), "\"speedup\": " + bad));
        r = configure();
        ASSERT_EQ(r.rc, 0) << r.out;
        EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: invalid (unreadable metadata")) << r.out;
        EXPECT_FALSE(compiled_in()) << bad;
        EXPECT_TRUE(contains(r.out, cache::lookup(cache_dir, "scale", "sm_90", nullptr).reason)) << r.out;
    }
}

TEST_F(CMakeProject, EveryArchitectureSpellingAndASummary) {
    // 90-virtual and 9.0 name sm_90; a list; a GPU-less native says so instead of vanishing.
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKEVO_TEST_ARCHES=90-virtual;80-real;9.0;native;hopper"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale: architectures sm_90 sm_80 (from ARCHITECTURES")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing -> reference")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_80: missing -> reference")) << r.out;
    EXPECT_TRUE(contains(r.out, "CMake Warning")) << r.out;  // gaps are warnings
    EXPECT_TRUE(contains(r.out, "'native' found no GPU on this machine")) << r.out;
    EXPECT_TRUE(contains(r.out, "'hopper' is not a CUDA architecture")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo summary: 1 function(s) x 2 architecture(s) (sm_90 sm_80): 0 cached, "
                                "0 using a compatible kernel, 2 missing, 0 stale, 0 invalid"))
        << r.out;

    // all and all-major expand to the CUDA compiler's lists (as CMake computed them).
    r = configure({"-DKEVO_TEST_ARCHES=all-major"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_80: missing")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing")) << r.out;
    EXPECT_FALSE(contains(r.out, "KernelEvo: scale sm_86:")) << r.out;
    r = configure({"-DKEVO_TEST_ARCHES=all"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_86: missing")) << r.out;

    // CMAKE_CUDA_ARCHITECTURES itself: where the list came from is said.
    r = configure({"-UKEVO_TEST_ARCHES", "-DCMAKE_CUDA_ARCHITECTURES=80-real;90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "architectures sm_80 sm_90 (from CMAKE_CUDA_ARCHITECTURES: 80-real;90)")) << r.out;
}

TEST_F(CMakeProject, TheDefaultArchitectureTakenIsSaid) {
    Outcome r = configure();  // no CMAKE_CUDA_ARCHITECTURES anywhere
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "which none set: CMake's default for NVIDIA")) << r.out;
    r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(contains(r.out, "which none set")) << r.out;
    EXPECT_TRUE(contains(r.out, "(from CMAKE_CUDA_ARCHITECTURES: 90)")) << r.out;
}

TEST_F(CMakeProject, AnArchitectureWithoutItsOwnEntryUsesTheClosestCompatibleOne) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKEVO_TEST_ARCHES=86;90a;75"});
    ASSERT_EQ(r.rc, 0) << r.out;
    store("sm_80", scale_kernel(2));
    store("sm_90", scale_kernel(3));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_86: missing -> uses the sm_80 kernel (binary compatible;")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90a: missing -> uses the sm_90 kernel (binary compatible;")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_75: missing -> reference")) << r.out;  // no compatible entry
    EXPECT_TRUE(contains(r.out, "1 function(s) x 3 architecture(s) (sm_86 sm_90a sm_75): 0 cached, 2 using a compatible kernel, 1 missing"))
        << r.out;
    std::string d = read_file(build / "kernelevo" / "scale" / "dispatch.cpp");
    EXPECT_TRUE(contains(d, "{\"sm_80\", 80, &kevo_scale_sm80_forward}")) << d;
    EXPECT_TRUE(contains(d, "{\"sm_90\", 90, &kevo_scale_sm90_forward}")) << d;
    EXPECT_EQ(lookup("scale")["architectures"][0]["state"], "compatible");

    // A dedicated entry always wins.
    store("sm_86", scale_kernel(4));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_86: cached kernel")) << r.out;
    d = read_file(build / "kernelevo" / "scale" / "dispatch.cpp");
    EXPECT_TRUE(contains(d, "&kevo_scale_sm86_forward")) << d;
    EXPECT_FALSE(contains(d, "&kevo_scale_sm80_forward")) << d;
}

TEST_F(CMakeProject, AKernelAddedToACacheDirThatDidNotExistIsPickedUpByTheNextBuild) {
    cache_dir = src / "new" / "kernels";  // neither folder exists at configure time
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing")) << r.out;
    store("sm_90", scale_kernel(2));  // what `kernelevo cache add` does
    // The next build re-runs configure (ninja's regeneration step alone: no compile needed).
    r = run({KEVO_MAKE_PROGRAM, "-C", build.string(), "build.ninja"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;
    EXPECT_TRUE(contains(read_file(build / "kernelevo" / "scale" / "dispatch.cpp"), "kevo_scale_sm90_forward"));
}

TEST_F(CMakeProject, AsASubprojectOnlyTheRuntimeAndTheUsersTargetsAreBuilt) {
    // The tool enabled (its default), no build type given: the subproject builds only what the
    // user's project needs and leaves the parent's build type alone.
    std::vector<std::string> argv = {KEVO_CMAKE_COMMAND, "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                                     "-DCMAKE_MAKE_PROGRAM=" KEVO_MAKE_PROGRAM, "-DCMAKE_CUDA_COMPILER=" KEVO_CUDA_COMPILER,
                                     "-DKEVO_TEST_SUBDIR=" + kSource.string(), "-DKERNELEVO_BUILD_TOOL=ON",
                                     "-DCMAKE_CUDA_ARCHITECTURES=90", "-DKEVO_TEST_CACHE_DIR=" + cache_dir.string()};
    Outcome r = run(argv);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(read_file(build / "CMakeCache.txt"), "CMAKE_BUILD_TYPE:STRING=\n")) << "the subproject set the build type";
    // What `all` would build (a dry run): the runtime, the function's library and the app; no tool.
    r = run({KEVO_MAKE_PROGRAM, "-C", build.string(), "-n", "all"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "libkernelevo_runtime.a")) << r.out;
    EXPECT_TRUE(contains(r.out, "libkernelevo_scale.a")) << r.out;
    EXPECT_TRUE(contains(r.out, "Linking CXX executable app")) << r.out;
    EXPECT_FALSE(contains(r.out, "kernelevo-runner")) << r.out;
    EXPECT_FALSE(contains(r.out, "tool/cli/kernelevo")) << r.out;
    EXPECT_FALSE(contains(r.out, "kevo_llm")) << r.out;
}

fs::file_time_type mtime(const fs::path& p) { return fs::last_write_time(p); }

fs::path find_object(const fs::path& build, const std::string& dir, const std::string& name = "") {
    if (!fs::exists(build / "CMakeFiles" / dir)) return {};
    for (const auto& e : fs::recursive_directory_iterator(build / "CMakeFiles" / dir))
        if (e.path().extension() == ".o" && (name.empty() || e.path().filename() == name)) return e.path();
    return {};
}

// A Triton entry: the generated .cu (here a stand-in that, like the real one, opens the CUDA driver
// with dlopen) plus its .py. CMake checks the .py's hash like the tool does, links libdl (never
// libcuda), and the program starts and falls back where there is no driver.
TEST_F(CMakeProject, TritonEntryIsCheckedAgainstItsSourceAndNeedsNoDriverToStart) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    std::string cu = scale_kernel(2);
    cu.replace(cu.find("#include <cuda_runtime.h>"), 25, "#include <dlfcn.h>\n#include <cuda_runtime.h>");
    cu.replace(cu.find("  long long n"), 0, "  if (!dlopen(\"libcuda.so.1\", RTLD_NOW | RTLD_LOCAL)) return 13;\n");
    cache::EntryMeta m = manual_entry(task("scale"), "sm_90");
    m.facts = {{"triton_version", "3.6.0"}};
    const std::string py = "import triton\n# the candidate the .cu was generated from\n";
    cache::store(cache_dir, cu, m, &py);
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel (2.5x vs reference")) << r.out;
    r = build_all();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(contains(read_file(build / "build.ninja"), "libcuda.so")) << "nothing links the driver";
    Outcome app = run({(build / "app").string()});
    EXPECT_EQ(app.rc, 0) << app.out;
    EXPECT_TRUE(contains(app.out, "impl=reference")) << app.out;

    std::ofstream(cache_dir / "scale" / "sm_90.py", std::ios::app) << "# tuned\n";
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: stale (the Triton source sm_90.py was edited after it was stored")) << r.out;
    fs::remove(cache_dir / "scale" / "sm_90.py");
    r = configure();
    EXPECT_TRUE(contains(r.out, "the Triton source sm_90.py is missing")) << r.out;
}

TEST_F(CMakeProject, BuildsRunsAndAddingAnArchitectureRebuildsOnlyThatKernel) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    // Both kernels define __global__ scale_kernel: the renaming lets them coexist.
    store("sm_90", scale_kernel(2));
    store("sm_80", scale_kernel(2));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(contains(r.out, "scale sm_80")) << r.out;
    r = build_all();
    ASSERT_EQ(r.rc, 0) << r.out;
    Outcome app = run({(build / "app").string()});
    ASSERT_EQ(app.rc, 0) << app.out;
    EXPECT_TRUE(contains(app.out, "impl=reference sum=20 reason=the tensors are not on a CUDA device")) << app.out;
    app = run({(build / "app").string()}, {}, {{"KERNELEVO_DISABLE", "1"}});
    EXPECT_TRUE(contains(app.out, "KERNELEVO_DISABLE")) << app.out;

    const fs::path obj90 = find_object(build, "kevo_scale_sm90.dir");
    ASSERT_FALSE(obj90.empty());
    const fs::path main_obj = find_object(build, "app.dir", "main.cpp.o");
    ASSERT_FALSE(main_obj.empty());
    const auto t90 = mtime(obj90), tmain = mtime(main_obj);
    const auto ttask = mtime(build / "kernelevo" / "scale" / "task.json");
    const auto theader = mtime(build / "kernelevo" / "include" / "kernelevo" / "scale.h");

    r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90;80"});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_80: cached kernel")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;
    r = build_all();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "kevo_scale_sm80")) << r.out;
    EXPECT_FALSE(contains(r.out, "kevo_scale_sm90.dir")) << r.out;
    EXPECT_FALSE(find_object(build, "kevo_scale_sm80.dir").empty());
    EXPECT_EQ(mtime(obj90), t90) << "the sm_90 kernel was recompiled";
    EXPECT_EQ(mtime(main_obj), tmain) << "user code was recompiled";
    EXPECT_EQ(mtime(build / "kernelevo" / "scale" / "task.json"), ttask);
    EXPECT_EQ(mtime(build / "kernelevo" / "include" / "kernelevo" / "scale.h"), theader);
    std::string d = read_file(build / "kernelevo" / "scale" / "dispatch.cpp");
    EXPECT_TRUE(contains(d, "&kevo_scale_sm80_forward") && contains(d, "&kevo_scale_sm90_forward")) << d;
    app = run({(build / "app").string()});
    EXPECT_EQ(app.rc, 0) << app.out;
}

// kernelevo_torch_library(): the functions as PyTorch operators, loaded from Python with
// torch.ops.load_library and checked there (torch_op_check.py): CPU = the reference, CUDA (where a
// GPU is) = the cached kernel, gradients = the reference's, Meta shapes, torch.compile where the
// torch has it. A reference that only the user's target compiles is linked into the module too.
TEST_F(CMakeProject, FunctionsArePyTorchOperatorsLoadableFromPython) {
    std::string prefix;
    const std::string python = python_with_torch(prefix);
    if (python.empty()) GTEST_SKIP() << "no python3 that imports torch (set KEVO_PYTHON)";
    std::vector<std::string> args = {"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKEVO_TEST_TORCH_OP=ON"};
    if (!prefix.empty() && fs::exists(prefix)) args.push_back("-DCMAKE_PREFIX_PATH=" + prefix);
    Outcome r = configure(args);
    ASSERT_EQ(r.rc, 0) << r.out;
    store("sm_90", scale_kernel(2));  // the CUDA path of scale runs it on an sm_90 GPU
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;
    const std::string op = read_file(build / "kernelevo" / "pair" / "torch_op.inc");
    EXPECT_TRUE(contains(op, "m.def(\"pair(Tensor x, Tensor w) -> (Tensor, Tensor)\")")) << op;
    EXPECT_TRUE(contains(op, "TORCH_LIBRARY_FRAGMENT(kernelevo, m)")) << "several functions share the namespace";
    r = run({KEVO_CMAKE_COMMAND, "--build", build.string(), "--target", "kevo_test_ops", "--", "-j2"});
    ASSERT_EQ(r.rc, 0) << r.out;
    const fs::path lib = build / "libkevo_test_ops.so";
    ASSERT_TRUE(fs::exists(lib));
    Outcome py = run({python, (kSource / "tests" / "cmake" / "torch_op_check.py").string(), lib.string(), "--kernels", "sm_90"});
    EXPECT_EQ(py.rc, 0) << py.out;
    EXPECT_TRUE(contains(py.out, "PASS cpu pair gradients equal the reference's")) << py.out;
    EXPECT_TRUE(contains(py.out, "PASS cpu pair gradcheck (float64)")) << py.out;
    EXPECT_TRUE(contains(py.out, "PASS meta pair shapes")) << py.out;
    EXPECT_TRUE(contains(py.out, "PASS all")) << py.out;
    EXPECT_FALSE(contains(py.out, "FAIL")) << py.out;
    std::printf("%s", py.out.c_str());  // which parts ran (CUDA, torch.compile) or were skipped
}

// The example's committed cache must match its kernelevo_optimize() calls (hashes), i.e. hit.
TEST(Example, CommittedCacheIsValidForTheExampleTasks) {
    TempDir tmp("kevo-example-test");
    Outcome r = run({KEVO_CMAKE_COMMAND, "-S", (kSource / "examples" / "fused_ops").string(), "-B", (tmp.path() / "b").string(), "-G",
                 "Ninja", "-DCMAKE_MAKE_PROGRAM=" KEVO_MAKE_PROGRAM, "-DCMAKE_CUDA_COMPILER=" KEVO_CUDA_COMPILER,
                 "-DKernelEvo_DIR=" + kBinary.string()});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: gelu_bias sm_90: cached kernel")) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: row_softmax sm_90: cached kernel")) << r.out;
}

}  // namespace
