// `kernelevo cache stats`, through the built binary, on real cache folders: fresh entries, a stale one
// (its task changed), an invalid one (binary metadata), an unvalidated one, two architectures; an
// empty and a missing cache folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "cache/cache.h"
#include "common/fs.h"
#include "common/process.h"
#include "task/task.h"

namespace fs = std::filesystem;
using namespace kevo;
using nlohmann::json;

namespace {

ProcessResult kernelevo(std::vector<std::string> args) {
    ProcessOptions o;
    o.argv = {KEVO_EXE};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = 120;
    return run_process(o);
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

const char* kKernel = "#include <kernelevo/abi.h>\nextern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }\n";

std::string task_json(const std::string& name, int n) {
    return R"({"name": ")" + name + R"(", "reference": {"source": "ref.cpp", "function": ")" + name + R"("},
        "inputs": [{"name": "x", "dtype": "float32", "shape": ["N"]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": ["N"]}], "shapes": [{"N": )" + std::to_string(n) + "}]}";
}

class CacheStats : public ::testing::Test {
protected:
    void SetUp() override {
        write_file_atomic(dir.path() / "ref.cpp",
                          "at::Tensor scale(const at::Tensor& x) { return x * 2; }\nat::Tensor shift(const at::Tensor& x) { return x + 1; }\n");
        write_file_atomic(scale_task, task_json("scale", 1000));
        write_file_atomic(shift_task, task_json("shift", 1000));
        const Task scale = load_task(scale_task), shift = load_task(shift_task);
        // scale: fresh on sm_80 (1.5x, 2026-11-01) and sm_90 (3x, 2026-12-01), unvalidated on sm_89.
        put(scale, "sm_80", 1.5, "2026-11-01T08:00:00Z", true);
        put(scale, "sm_90", 3.0, "2026-12-01T08:00:00Z", true);
        put(scale, "sm_89", 0.0, "2026-11-20T08:00:00Z", false);
        // shift: stored, then its task changes (stale); a second entry whose metadata is binary (invalid).
        put(shift, "sm_90", 2.0, "2026-10-01T08:00:00Z", true);
        put(shift, "sm_80", 4.0, "2026-10-02T08:00:00Z", true);
        write_file_atomic(cache_dir / "shift" / "sm_80.json", std::string("\xff\xfe\x00\x1b[2J\x80", 8));
        write_file_atomic(shift_task, task_json("shift", 2048));
    }
    void put(const Task& t, const std::string& arch, double speedup, const std::string& date, bool validated) {
        cache::EntryMeta m = cache::entry_from_validation(
            t, arch, validated ? json{{"status", "ok"}, {"speedup", speedup}, {"gpu", "NVIDIA H200"}} : json{{"status", "unvalidated"}});
        m.date = date;
        cache::store(cache_dir, kKernel, m);
    }
    json stats_json(std::vector<std::string> extra = {}) {
        std::vector<std::string> args{"cache", "stats", "--cache-dir", cache_dir.string(), "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        ProcessResult r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return json::parse(r.out);
    }
    TempDir dir{"kevo-cache-stats"};
    fs::path cache_dir = dir.path() / "kernels";
    fs::path scale_task = dir.path() / "scale.json", shift_task = dir.path() / "shift.json";
};

std::uintmax_t folder_bytes(const fs::path& root) {
    std::uintmax_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file()) n += e.file_size();
    return n;
}

}  // namespace

// Against the current tasks: fresh, stale and invalid counted apart, per architecture too; the
// speedups of the usable validated entries; the oldest and newest validation; the size on disk.
TEST_F(CacheStats, CountsStatesSpeedupsDatesAndSizeAgainstTheTasks) {
    json j = stats_json({"--task", scale_task.string(), "--task", shift_task.string()});
    const json& t = j["totals"];
    EXPECT_EQ(j["exists"], true);
    EXPECT_EQ(j["tasks_checked"], 2);
    EXPECT_EQ(t["entries"], 5);
    EXPECT_EQ(t["functions"], 2);
    EXPECT_EQ(t["fresh"], 3);  // scale sm_80, sm_89 (unvalidated, but unchanged), sm_90
    EXPECT_EQ(t["stale"], 1);
    EXPECT_EQ(t["invalid"], 1);
    EXPECT_EQ(t["unchecked"], 0);
    EXPECT_EQ(t["unvalidated"], 1);
    EXPECT_EQ(t["size_bytes"].get<std::uintmax_t>(), folder_bytes(cache_dir));
    EXPECT_EQ(t["files"], 10);
    // Usable and validated: scale sm_80 (1.5x) and sm_90 (3x); the stale 2x and the unvalidated one are not counted.
    EXPECT_EQ(j["speedup"]["count"], 2);
    EXPECT_DOUBLE_EQ(j["speedup"]["min"].get<double>(), 1.5);
    EXPECT_DOUBLE_EQ(j["speedup"]["max"].get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(j["speedup"]["median"].get<double>(), 2.25);
    EXPECT_NEAR(j["speedup"]["geomean"].get<double>(), std::sqrt(4.5), 1e-12);
    // The invalid entry's date cannot be read; the stale one was validated on 2026-10-01.
    EXPECT_EQ(j["last_validated"]["oldest"]["date"], "2026-10-01T08:00:00Z");
    EXPECT_EQ(j["last_validated"]["oldest"]["function"], "shift");
    EXPECT_EQ(j["last_validated"]["newest"]["date"], "2026-12-01T08:00:00Z");
    EXPECT_EQ(j["last_validated"]["newest"]["arch"], "sm_90");
    EXPECT_GT(j["last_validated"]["newest"]["days_ago"].get<long>(), 0);

    std::map<std::string, json> arch;
    for (const auto& a : j["architectures"]) arch[a["arch"]] = a;
    ASSERT_EQ(arch.size(), 3u);
    EXPECT_EQ(arch["sm_80"]["entries"], 2);
    EXPECT_EQ(arch["sm_80"]["fresh"], 1);
    EXPECT_EQ(arch["sm_80"]["invalid"], 1);
    EXPECT_EQ(arch["sm_90"]["stale"], 1);
    EXPECT_DOUBLE_EQ(arch["sm_90"]["speedup_geomean"].get<double>(), 3.0);
    EXPECT_EQ(arch["sm_89"]["unvalidated"], 1);
    EXPECT_TRUE(arch["sm_89"]["speedup_geomean"].is_null());

    // Every entry, with the state lookup() gave it and when it was last validated.
    std::map<std::string, json> entry;
    for (const auto& e : j["entries"]) entry[e["function"].get<std::string>() + " " + e["arch"].get<std::string>()] = e;
    ASSERT_EQ(entry.size(), 5u);
    EXPECT_EQ(entry["shift sm_90"]["state"], "stale");
    EXPECT_TRUE(contains(entry["shift sm_90"]["reason"], "the task changed"));
    EXPECT_EQ(entry["shift sm_80"]["state"], "invalid");
    EXPECT_TRUE(contains(entry["shift sm_80"]["reason"], "unreadable metadata"));
    EXPECT_TRUE(entry["shift sm_80"]["validated_at"].is_null());
    EXPECT_EQ(entry["scale sm_89"]["validated"], false);
    EXPECT_TRUE(entry["scale sm_89"]["validated_at"].is_null());
    EXPECT_EQ(entry["scale sm_80"]["validated_at"], "2026-11-01T08:00:00Z");
    for (const auto& [name, e] : entry) {  // one decision: the same as lookup() with the task's hashes
        const Task task = load_task(e["function"] == "scale" ? scale_task : shift_task);
        const cache::TaskHashes h = cache::TaskHashes::of(task);
        cache::State s = cache::lookup(cache_dir, e["function"], e["arch"], &h).state;
        EXPECT_EQ(e["state"], s == cache::State::valid ? "fresh" : cache::state_name(s)) << name;
    }
}

// Without tasks, readable unedited entries are "unchecked" (not called fresh); the invalid one is still invalid.
TEST_F(CacheStats, WithoutTasksReadableEntriesAreUnchecked) {
    json j = stats_json();
    EXPECT_EQ(j["tasks_checked"], 0);
    EXPECT_EQ(j["totals"]["unchecked"], 4);
    EXPECT_EQ(j["totals"]["fresh"], 0);
    EXPECT_EQ(j["totals"]["stale"], 0);
    EXPECT_EQ(j["totals"]["invalid"], 1);
    EXPECT_EQ(j["speedup"]["count"], 3);  // the 2x of shift sm_90 counts while nothing says it is stale
}

// The human summary: aligned like ccache -s, the per-architecture table, and -v lists every entry.
TEST_F(CacheStats, HumanSummaryIsAlignedAndVerboseListsEveryEntry) {
    ProcessResult r = kernelevo({"cache", "stats", "--cache-dir", cache_dir.string(), "--task", scale_task.string(), "--task",
                                 shift_task.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* line : {"Entries", "  fresh", "  stale", "  invalid", "  unvalidated", "Functions", "Size",
                             "  min / median / max", "  geometric mean", "Last validated, oldest", "ARCH"})
        EXPECT_TRUE(contains(r.out, std::string("\n") + line)) << line << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "1.50x / 2.25x / 3.00x")) << r.out;
    EXPECT_TRUE(contains(r.out, "2026-10-01T08:00:00Z")) << r.out;
    // Every "label  number" line ends in the same column.
    std::istringstream in(r.out);
    std::string line;
    std::set<size_t> ends;
    for (const char* label : {"Entries ", "  fresh ", "  stale ", "  invalid ", "Functions "})
        for (in.clear(), in.seekg(0); std::getline(in, line);)
            if (line.rfind(label, 0) == 0) ends.insert(line.size());
    EXPECT_EQ(ends.size(), 1u) << r.out;
    EXPECT_FALSE(contains(r.out, "shift      sm_80")) << "no per-entry list without -v";
    EXPECT_EQ(r.out.find("\x1b"), std::string::npos) << "the binary metadata's bytes must not reach the terminal";

    r = kernelevo({"cache", "stats", "--cache-dir", cache_dir.string(), "--task", shift_task.string(), "-v"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "FUNCTION")) << r.out;
    EXPECT_TRUE(contains(r.out, "never (unvalidated)")) << r.out;
    EXPECT_TRUE(contains(r.out, "the task changed")) << r.out;
    EXPECT_EQ(r.out.find("\x1b"), std::string::npos);
}

// An empty cache folder and one that does not exist yet: a clear line, exit 0, and JSON that says so;
// a file given as the cache folder: exit 2 through the one error prefix.
TEST_F(CacheStats, EmptyMissingAndNotAFolder) {
    fs::create_directories(dir.path() / "empty");
    ProcessResult r = kernelevo({"cache", "stats", "--cache-dir", (dir.path() / "empty").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "No kernels in")) << r.out;

    const fs::path missing = dir.path() / "not-yet";
    r = kernelevo({"cache", "stats", "--cache-dir", missing.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "No cache at " + missing.string())) << r.out;
    EXPECT_FALSE(fs::exists(missing)) << "stats creates nothing";
    r = kernelevo({"cache", "stats", "--cache-dir", missing.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["exists"], false);
    EXPECT_EQ(j["totals"]["entries"], 0);
    EXPECT_TRUE(j["speedup"]["min"].is_null());
    EXPECT_TRUE(j["last_validated"]["oldest"].is_null());

    r = kernelevo({"cache", "stats", "--cache-dir", scale_task.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "kernelevo: error: --cache-dir: " + scale_task.string() + " is not a directory")) << r.err;
}

// Stats reads; it never writes, renames or deletes anything in the cache.
TEST_F(CacheStats, LeavesTheCacheAsItWas) {
    std::map<std::string, std::string> before;
    for (const auto& e : fs::recursive_directory_iterator(cache_dir))
        if (e.is_regular_file()) before[e.path().string()] = read_file(e.path());
    stats_json({"--task", scale_task.string(), "--task", shift_task.string()});
    ProcessResult r = kernelevo({"cache", "stats", "--cache-dir", cache_dir.string(), "-v"});
    EXPECT_EQ(r.exit_code, 0);
    std::map<std::string, std::string> after;
    for (const auto& e : fs::recursive_directory_iterator(cache_dir))
        if (e.is_regular_file()) after[e.path().string()] = read_file(e.path());
    EXPECT_EQ(before, after);
}

// Issue 40: `cache status` treats a missing cache folder as an empty cache, as stats does (exit 0;
// something that is not a folder stays exit 2).
TEST_F(CacheStats, StatusOnAMissingCacheIsAnEmptyCacheLikeStats) {
    const fs::path missing = dir.path() / "not-yet";
    ProcessResult r = kernelevo({"cache", "status", "--cache-dir", missing.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(missing)) << "status creates nothing";
    r = kernelevo({"cache", "status", "--cache-dir", scale_task.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "is not a directory")) << r.err;
}

// Issue 40: the search command status suggests for what a build lacks names a model (search has no
// default): the one given to status, else NAME with a line saying how to fill it in.
TEST_F(CacheStats, StatusSuggestsASearchCommandWithAModel) {
    const fs::path build = dir.path() / "build";
    fs::create_directories(build / "kernelevo" / "scale");
    fs::copy_file(dir.path() / "ref.cpp", build / "kernelevo" / "scale" / "ref.cpp");
    write_file_atomic(build / "kernelevo" / "scale" / "task.json", task_json("scale", 1000));
    write_file_atomic(build / "kernelevo" / "scale" / "lookup.json", R"({"function": "scale", "architectures": [{"arch": "sm_75"}]})");
    ProcessResult r = kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.out, "--arch sm_75 --model NAME\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "pass --model NAME to cache status")) << r.out;
    r = kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string(), "--model", "z-ai/glm-5"});
    EXPECT_TRUE(contains(r.out, "--arch sm_75 --model z-ai/glm-5\n")) << r.out;
    EXPECT_FALSE(contains(r.out, "--model NAME")) << r.out;
}

// Issue 49: an entry measured slower than its reference shows as kept out (a build compiles in the
// reference there); --min-speedup moves the minimum; with --build-dir a function's minimum is the
// build's (lookup.json: KERNELEVO_MIN_SPEEDUP or MIN_SPEEDUP).
TEST_F(CacheStats, StatusShowsAnEntryMeasuredSlowerThanItsReferenceAsKeptOut) {
    fs::remove_all(cache_dir);
    put(load_task(scale_task), "sm_90", 0.91, "2026-12-01T08:00:00Z", true);
    const std::string why = "measured 0.91x over its reference: below the minimum speedup ";
    auto status = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"cache", "status", "--cache-dir", cache_dir.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return kernelevo(args);
    };
    ProcessResult r = status({"--task", scale_task.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    json row = json::parse(r.out)["entries"][0];
    EXPECT_EQ(row["state"], "valid");
    EXPECT_EQ(row["kept_out"], why + "1");
    EXPECT_EQ(row["min_speedup"], 1.0);
    r = status({"--task", scale_task.string()});
    EXPECT_TRUE(contains(r.out, "kept out")) << r.out;
    EXPECT_TRUE(contains(r.out, why + "1: the reference runs instead")) << r.out;
    r = status({"--task", scale_task.string(), "--min-speedup", "0.9", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(json::parse(r.out)["entries"][0]["kept_out"].is_null()) << r.out;
    for (const char* bad : {"-1", "nan", "fast"}) EXPECT_EQ(status({"--min-speedup", bad}).exit_code, 2) << bad;

    // A build: the minimum it kept kernels out under, unless --min-speedup is given.
    const fs::path build = dir.path() / "build", fn = build / "kernelevo" / "scale";
    fs::create_directories(fn);
    fs::copy_file(dir.path() / "ref.cpp", fn / "ref.cpp");
    write_file_atomic(fn / "task.json", task_json("scale", 1000));
    auto built_with = [&](const std::string& min, std::vector<std::string> extra = {}) {
        write_file_atomic(fn / "lookup.json", R"({"function": "scale", "min_speedup": )" + min +
                                                  R"(, "architectures": [{"arch": "sm_90"}]})");
        extra.insert(extra.begin(), {"--build-dir", build.string()});
        return status(extra);
    };
    r = built_with("0.5", {"--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["entries"][0]["min_speedup"], 0.5);
    EXPECT_EQ(built_with("0.5", {"--min-speedup", "1.2"}).exit_code, 1);
    r = built_with("1.5", {"--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(json::parse(r.out)["build_lacks"][0]["kept_out"], why + "1.5") << r.out;
    r = built_with("1.5");
    EXPECT_TRUE(contains(r.out, "  scale sm_90 (kept out): kernelevo search --task ")) << r.out;
}

// Issue 40: `cache objects stats|clean`, the compiled-object cache ($KERNELEVO_CACHE_HOME) like
// ccache -s/-C: clean deletes the objects, never what a link inside points to, keeps a file a running
// process is still writing (NAME.tmp.PID) and the search states beside the objects.
TEST(CacheObjects, StatsAndCleanStayInsideTheCache) {
    TempDir tmp("kevo-objects");
    const fs::path home = tmp.path() / "home", outside = tmp.path() / "outside";
    write_file_atomic(home / "kernels" / "ab" / "abcd.so", std::string(1000, 'x'));
    write_file_atomic(home / "kernels" / "ab" / "abcd.so.sha256", "digest\n");
    write_file_atomic(home / "references" / "cd" / "cdef.so", std::string(500, 'y'));
    write_file_atomic(home / "search" / "state.json", "{}");
    write_file_atomic(outside / "precious.so", "keep");
    write_file_atomic(outside / "dir" / "inner.so", "keep");
    fs::create_symlink(outside / "precious.so", home / "kernels" / "ab" / "link.so");
    fs::create_directories(home / "triton");
    fs::create_directories(home / "kernels" / "ef");
    fs::create_directory_symlink(outside / "dir", home / "triton" / "linked-dir");
    const std::string staged = "ef01.so.tmp." + std::to_string(::getpid());  // this test process: alive
    write_file_atomic(home / "kernels" / "ef" / staged, "partial");
    const auto run = [&](std::vector<std::string> args) {
        ProcessOptions o;
        o.argv = {KEVO_EXE};
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.env = {{"KERNELEVO_CACHE_HOME", home.string()}};
        o.timeout_s = 120;
        return run_process(o);
    };
    ProcessResult r = run({"cache", "objects", "stats", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["root"], home.string());
    EXPECT_EQ(j["areas"][0]["folder"], "kernels");
    EXPECT_EQ(j["areas"][0]["files"], 4);  // two files, the link itself, the staged file
    EXPECT_EQ(j["areas"][0]["size_bytes"], 1000 + 7 + 7);
    r = run({"cache", "objects", "clean"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Deleted 5 file(s)")) << r.out;
    EXPECT_TRUE(contains(r.out, "kept 1 being written")) << r.out;
    EXPECT_EQ(read_file(outside / "precious.so"), "keep");
    EXPECT_EQ(read_file(outside / "dir" / "inner.so"), "keep");
    EXPECT_FALSE(fs::exists(fs::symlink_status(home / "kernels" / "ab" / "link.so")));
    EXPECT_FALSE(fs::exists(home / "kernels" / "ab" / "abcd.so"));
    EXPECT_TRUE(fs::exists(home / "kernels" / "ef" / staged));
    EXPECT_TRUE(fs::exists(home / "search" / "state.json")) << "search states are not objects";
    r = run({"cache", "objects", "stats", "--json"});
    EXPECT_EQ(json::parse(r.out)["files"], 1);
    const fs::path missing = tmp.path() / "none";
    ProcessOptions o;
    o.argv = {KEVO_EXE, "cache", "objects", "stats"};
    o.env = {{"KERNELEVO_CACHE_HOME", missing.string()}};
    r = run_process(o);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "does not exist yet")) << r.out;
    EXPECT_FALSE(fs::exists(missing));
}
