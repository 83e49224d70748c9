// Configure-time searches and the commands configure prints, through a real `cmake` configure of
// tests/cmake/project: a stand-in kernelevo records what a search was asked; the printed "Fill it
// with" command is pasted into a shell and run by the real kernelevo.
#include <gtest/gtest.h>

#include <regex>

#include "cmake_project.h"

using namespace kevo;
using namespace kevo::cmake_test;

namespace {

// A stand-in kernelevo: records its arguments in DIR/args.txt, prints progress, "finds" the staged
// kernel (DIR/staged) unless DIR/fail exists. `cache` commands go to the real kernelevo: configure asks
// `cache status` of KERNELEVO_EXECUTABLE for its verdict on the entries (749c18c).
fs::path stand_in(const fs::path& dir) {
    fs::path fake = dir / "kernelevo";
    write_file_atomic(fake, "#!/bin/sh\n[ \"$1\" = cache ] && exec '" + std::string(KEVO_EXE) + "' \"$@\"\n"
                            "echo \"$@\" > '" + (dir / "args.txt").string() + "'\n"
                            "echo 'fake search: generation 3/3, best 2.5x'\n"
                            "out=''; prev=''; for a in \"$@\"; do [ \"$prev\" = --out ] && out=$a; prev=$a; done\n"
                            "[ -f '" + dir.string() + "/fail' ] && exit 3\n"
                            "mkdir -p \"$out/scale\" && cp '" + (dir / "staged").string() + "'/scale/sm_90.* \"$out/scale/\"\n");
    fs::permissions(fake, fs::perms::owner_all);
    return fake;
}

size_t count(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
    return n;
}

TEST_F(CMakeProject, ConfigureTimeSearchRunsOnlyWhenAskedAndNeverFailsConfigure) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    store("sm_90", scale_kernel(2), tmp->path() / "staged");
    fs::path args = tmp->path() / "args.txt";
    fs::path fake = stand_in(tmp->path());

    // SEARCH off: the stand-in is not run.
    r = configure({"-DKERNELEVO_EXECUTABLE=" + fake.string()});
    EXPECT_FALSE(fs::exists(args));
    EXPECT_TRUE(contains(r.out, fake.string() + " search --task")) << r.out;

    // A failing search: configure still succeeds and falls back.
    write_file_atomic(tmp->path() / "fail", "");
    r = configure({"-DKERNELEVO_SEARCH=ON", "-DKERNELEVO_SEARCH_OPTIONS=--model;test/model;--budget-usd;2"});
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "the search failed (exit 3)")) << r.out;
    EXPECT_TRUE(contains(r.out, "fake search: generation 3/3")) << r.out;  // progress visible
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing -> reference")) << r.out;
    // The user's budget is kept; the default time cap is added and said.
    EXPECT_EQ(read_file(args), "search --task " + (build / "kernelevo" / "scale" / "task.json").string() + " --out " +
                                   cache_dir.string() + " --arch sm_90 --model test/model --budget-usd 2 --max-time 1h\n");
    EXPECT_TRUE(contains(r.out, "at most 2 USD and 1h")) << r.out;

    // The switch is one-shot: it reset itself, so the next configure (as an automatic re-run
    // after an edit would be) searches nothing.
    EXPECT_TRUE(contains(r.out, "KERNELEVO_SEARCH is reset to OFF")) << r.out;
    EXPECT_TRUE(contains(read_file(build / "CMakeCache.txt"), "KERNELEVO_SEARCH:BOOL=OFF"));
    fs::remove(args);
    fs::remove(tmp->path() / "fail");
    r = configure();
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(fs::exists(args)) << r.out;
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: missing -> reference")) << r.out;

    // Only a model among the options: the default budget and time cap.
    r = configure({"-DKERNELEVO_SEARCH=ON", "-DKERNELEVO_SEARCH_OPTIONS=--model=test/model"});
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(read_file(args), "--arch sm_90 --model=test/model --budget-usd 2 --max-time 1h\n")) << read_file(args);
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;
    EXPECT_TRUE(contains(read_file(build / "kernelevo" / "scale" / "dispatch.cpp"), "kevo_scale_sm90_forward"));

    // Once valid, no search runs, even when asked (and even without a model).
    fs::remove(args);
    r = configure({"-DKERNELEVO_SEARCH=ON", "-DKERNELEVO_SEARCH_OPTIONS="});
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(fs::exists(args)) << r.out;
}

// KERNELEVO_SEARCH=ON with no model anywhere: one configure error saying what to set, before any
// search (each search would stop with "no model"); the switch stays ON for the configure that
// follows the fix, which then searches.
TEST_F(CMakeProject, ASearchWithoutAModelIsOneConfigureError) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKEVO_TEST_ARCHES=80;90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    store("sm_90", scale_kernel(2), tmp->path() / "staged");
    fs::path args = tmp->path() / "args.txt";
    fs::path fake = stand_in(tmp->path());
    r = configure({"-DKERNELEVO_EXECUTABLE=" + fake.string(), "-DKERNELEVO_SEARCH=ON", "-DKERNELEVO_SEARCH_OPTIONS=--budget-usd;1"});
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_EQ(count(r.out, "CMake Error"), 1u) << r.out;
    EXPECT_TRUE(contains(r.out, "KERNELEVO_SEARCH is ON and scale sm_80 is missing, but no model is configured")) << r.out;
    EXPECT_TRUE(contains(r.out, "Set -DKERNELEVO_SEARCH_OPTIONS=\"--model;NAME\"")) << r.out;
    EXPECT_TRUE(contains(r.out, "or -DKERNELEVO_SEARCH=OFF")) << r.out;
    EXPECT_FALSE(fs::exists(args)) << "no search may start";
    EXPECT_TRUE(contains(read_file(build / "CMakeCache.txt"), "KERNELEVO_SEARCH:BOOL=ON"));

    r = configure({"-DKERNELEVO_SEARCH_OPTIONS=--model;test/model"});
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(read_file(args), "--model test/model")) << read_file(args);
    EXPECT_TRUE(contains(r.out, "KernelEvo: scale sm_90: cached kernel")) << r.out;
}

// The line after "Fill it with: " up to the explanation, if any.
std::string printed_command(const std::string& out) {
    std::smatch m;
    if (!std::regex_search(out, m, std::regex("Fill it with: ([^\n]*?)( \\(MODEL: [^\n]*)?\n"))) return "";
    return m[1];
}

// The printed command works when pasted: without a model configured it shows where one goes and
// says how to set it; with one it carries it, and the real kernelevo, run by a shell on the pasted
// line, goes past the model (here it stops at the GPU: none is visible to it).
TEST_F(CMakeProject, TheFillCommandWorksWhenPasted) {
    const fs::path exe = kBinary / "tool" / "cli" / "kernelevo";
    if (!fs::exists(exe)) GTEST_SKIP() << "kernelevo is not built";
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKERNELEVO_EXECUTABLE=" + exe.string()});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "--arch sm_90 --model MODEL --budget-usd 2 --max-time 1h (MODEL: the LLM that writes the kernels, "
                                "e.g. google/gemini-3-flash; -DKERNELEVO_SEARCH_OPTIONS=\"--model;MODEL\" puts it")) << r.out;

    r = configure({"-DKERNELEVO_SEARCH_OPTIONS=--model;google/gemini-3-flash;--llm-price;0.30:2.50"});
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string cmd = printed_command(r.out);
    ASSERT_FALSE(cmd.empty()) << r.out;
    EXPECT_FALSE(contains(r.out, "--model MODEL") || contains(r.out, "(MODEL:")) << r.out;
    EXPECT_TRUE(contains(cmd, "--arch sm_90 --model google/gemini-3-flash --llm-price 0.30:2.50 --budget-usd 2 --max-time 1h")) << cmd;
    Outcome pasted = run({"/bin/sh", "-c", cmd}, tmp->path(), {{"CUDA_VISIBLE_DEVICES", ""}});
    EXPECT_EQ(pasted.rc, 2) << pasted.out;
    EXPECT_FALSE(contains(pasted.out, "no model")) << pasted.out;
    EXPECT_TRUE(contains(pasted.out, "validates every candidate on the local GPU")) << pasted.out;
}

// A path with a space or a quote is quoted so that the shell reads it back as one word.
TEST_F(CMakeProject, ThePrintedCommandQuotesWordsTheShellWouldSplit) {
    cache_dir = src / "my kernels";
    fs::path fake = stand_in(tmp->path());
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90", "-DKERNELEVO_EXECUTABLE=" + fake.string(),
                           "-DKERNELEVO_SEARCH_OPTIONS=--model;it's/a model"});
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string cmd = printed_command(r.out);
    ASSERT_FALSE(cmd.empty()) << r.out;
    Outcome pasted = run({"/bin/sh", "-c", cmd}, tmp->path());
    EXPECT_EQ(read_file(tmp->path() / "args.txt"), "search --task " + (build / "kernelevo" / "scale" / "task.json").string() + " --out " +
                                                       cache_dir.string() + " --arch sm_90 --model it's/a model --budget-usd 2 --max-time 1h\n")
        << cmd;
}

}  // namespace
