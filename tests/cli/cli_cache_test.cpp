// The kernelevo command line through the real binary: cache status, remove and prune, and what a
// configured build wants from the cache.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cli/cli.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "compile/arch_support.h"
#include "llm/llm.h"
#include "../llm/loopback_server.h"
#include "cli_run.h"
#include "store/store.h"
#include "task/task.h"
#include "validate/validate.h"

namespace fs = std::filesystem;
using namespace kevo;
using nlohmann::json;

namespace {

using namespace kevo::clitest;

// ---- cache status / remove / prune ----------------------------------------------------------------

const char* kKernel = "#include <kernelevo/abi.h>\nextern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }\n";

class CliCache : public ::testing::Test {
protected:
    void SetUp() override {
        write_file_atomic(dir.path() / "ref.cpp", "at::Tensor scale(const at::Tensor& x) { return x * 2; }\n");
        write_task(2);
        cache_dir = dir.path() / "kernels";
    }
    void write_task(int n) {
        write_file_atomic(dir.path() / "task.json", R"({"name": "scale", "reference": {"source": "ref.cpp"},
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["N"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["N"]}], "shapes": [{"N": )" + std::to_string(1000 + n) + "}]}");
    }
    void store(const std::string& function, const std::string& arch, bool validated = true) {
        Task t = load_task(task_file());
        cache::EntryMeta m;
        m.function = function;
        m.arch = arch;
        m.task_hash = t.hash();
        m.reference_hash = t.reference_hash();
        m.origin = "manual";
        m.validated = validated;
        m.speedup = validated ? 2.0 : 0;
        cache::store(cache_dir, kKernel, m);
    }
    std::string task_file() const { return (dir.path() / "task.json").string(); }
    TempDir dir;
    fs::path cache_dir;
};

// A metadata file of binary bytes, or one whose text holds terminal escapes, and a cache folder
// whose name is not UTF-8: an invalid entry with its reason, JSON that parses, escapes never raw.
TEST_F(CliCache, StatusReportsABinaryMetadataFileAsAnInvalidEntry) {
    const fs::path odd = dir.path() / "kernels-\xff\xfe";   // a folder name that is not UTF-8
    cache_dir = odd;
    store("scale", "sm_90");
    write_file_atomic(odd / "scale" / "sm_80.cu", kKernel);
    write_file_atomic(odd / "scale" / "sm_80.json", std::string("\xff\xfe\x00\x01\x1b[2J\x80\x81binary", 14));
    cache::EntryMeta m;   // valid JSON whose text holds escapes (a file anyone could have committed)
    m.function = "scale";
    m.arch = "sm_75";
    m.origin = "\x1b]0;pwned\x07manual";
    m.date = "\x1b[2J2026";
    cache::store(odd, kKernel, m);

    auto r = kernelevo({"cache", "status", "--cache-dir", odd.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;   // an invalid entry is a problem, not a crash
    EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
    json j = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    ASSERT_EQ(j["entries"].size(), 3u) << j.dump(2);
    for (const auto& e : j["entries"]) {
        if (e["arch"] != "sm_80") continue;
        EXPECT_EQ(e["state"], "invalid");
        EXPECT_TRUE(contains(e["reason"].get<std::string>(), "unreadable metadata")) << e.dump();
    }

    r = kernelevo({"cache", "status", "--cache-dir", odd.string(), "--task", task_file()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_80 +invalid"))) << r.out;
    EXPECT_TRUE(contains(r.out, "unreadable metadata")) << r.out;
    for (const char* raw : {"\x1b", "\x07", "\x80"}) EXPECT_FALSE(contains(r.out + r.err, raw)) << r.out;
    EXPECT_TRUE(contains(r.out, "\\x1b]0;pwned\\x07manual")) << r.out;
}

TEST_F(CliCache, StatusMarksUnvalidatedEntries) {
    auto add = kernelevo({"cache", "add", "--task", task_file(), "--kernel", (kData / "gelu_bias" / "kernels" / "good.cu").string(),
                          "--arch", "sm_90", "--cache-dir", cache_dir.string(), "--unvalidated"});
    ASSERT_EQ(add.exit_code, 0) << add.err;
    store("scale", "sm_80");
    auto r = kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--task", task_file()});
    EXPECT_EQ(r.exit_code, 0) << r.out;  // (no speedup recorded: the minimum applies to measured ones only)
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_90 +unval\\. .*UNVALIDATED"))) << r.out;
    EXPECT_FALSE(contains(r.out, "kept out")) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_80 +valid "))) << r.out;
    EXPECT_TRUE(contains(r.out, "never checked against the reference")) << r.out;
    json j = json::parse(kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--json"}).out);
    for (const auto& e : j["entries"]) EXPECT_EQ(e["validated"], e["arch"] == "sm_80") << e.dump();
}

TEST_F(CliCache, RemoveDeletesEntriesAndSaysWhatIsNotThere) {
    store("scale", "sm_80");
    store("scale", "sm_90");
    auto r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale", "--arch", "80", "--dry-run"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "would remove")) << r.out;
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_80.cu"));

    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale", "--arch", "sm_80"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_80.cu"));
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_80.json"));
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_90.cu"));

    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale", "--arch", "sm_80"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "has no scale kernel for sm_80 (it has sm_90)")) << r.err;
    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scael"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "did you mean 'scale'?")) << r.err;

    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(cache_dir / "scale"));  // the emptied folder goes too
}

TEST_F(CliCache, PruneRemovesStaleEntriesAndKeepsHandEdits) {
    store("scale", "sm_80");
    store("scale", "sm_90");
    store("scale", "sm_86");
    write_task(3);  // the task changed: all three are stale now
    std::ofstream(cache_dir / "scale" / "sm_86.cu", std::ios::app) << "// tuned by hand\n";
    write_file_atomic(cache_dir / "scale" / "sm_75.cu", kKernel);  // a kernel without metadata (work in progress)

    auto r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "--build-dir BUILD or --task")) << r.err;

    r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file(), "--dry-run"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "would remove scale sm_80 (stale: the task changed")) << r.out;
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_80.cu"));

    r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_80.cu"));
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_90.json"));
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_86.cu"));   // edited by hand: kept
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_75.cu"));   // no metadata: kept
    EXPECT_TRUE(contains(r.out, "kept scale sm_86 (the kernel source was edited")) << r.out;
    EXPECT_TRUE(contains(r.out, "kept scale sm_75")) << r.out;
    EXPECT_TRUE(contains(r.out, "removed 2 entries, kept 2")) << r.out;
}

// A real configure of the CMake test project: what the build wants is what status compares with.
class CliCacheBuild : public ::testing::Test {
protected:
    void SetUp() override {
        src = dir.path() / "src";
        build = dir.path() / "build";
        cache_dir = dir.path() / "kernels";
        fs::copy(kSource / "tests" / "cmake" / "project", src, fs::copy_options::recursive);
        ProcessOptions o;
        o.argv = {KEVO_CMAKE_COMMAND, "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                  "-DCMAKE_MAKE_PROGRAM=" KEVO_MAKE_PROGRAM, "-DCMAKE_CUDA_COMPILER=" KEVO_CUDA_COMPILER,
                  "-DCMAKE_BUILD_TYPE=Release", "-DKernelEvo_DIR=" + kBinary.string(),
                  "-DKEVO_TEST_CACHE_DIR=" + cache_dir.string(), "-DCMAKE_CUDA_ARCHITECTURES=80;90"};
        o.timeout_s = 600;
        ProcessResult r = run_process(o);
        ASSERT_TRUE(r.ok()) << r.out << r.err;
    }
    TempDir dir;
    fs::path src, build, cache_dir;
};

TEST_F(CliCacheBuild, StatusListsTheArchitecturesTheBuildWantsThatTheCacheLacks) {
    Task t = load_task(build / "kernelevo" / "scale" / "task.json");
    cache::EntryMeta m;
    m.function = "scale";
    m.arch = "sm_90";
    m.task_hash = t.hash();
    m.reference_hash = t.reference_hash();
    m.origin = "manual";
    m.speedup = 2.0;
    cache::store(cache_dir, kKernel, m);
    m.arch = "sm_75";  // cached, but not a target of this build
    cache::store(cache_dir, kKernel, m);

    auto r = kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // a gap the build would fill with the reference
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_80 +MISSING"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_90 +valid"))) << r.out;
    EXPECT_TRUE(contains(r.out, "wants 1 kernel(s) the cache lacks")) << r.out;
    EXPECT_TRUE(contains(r.out, "scale sm_80 (missing): kernelevo search --task ")) << r.out;

    json j = json::parse(kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string(), "--json"}).out);
    ASSERT_EQ(j["build_lacks"].size(), 1u) << j.dump(2);
    EXPECT_EQ(j["build_lacks"][0]["arch"], "sm_80");
    for (const auto& e : j["entries"]) EXPECT_EQ(e["wanted_by_build"], e["arch"] != "sm_75") << e.dump();

    // prune --unused drops what the build does not target; the build's own entries stay.
    r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--build-dir", build.string(), "--unused"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "removed scale sm_75 (unused: the build does not target sm_75)")) << r.out;
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_75.cu"));
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_90.cu"));
}

}  // namespace
