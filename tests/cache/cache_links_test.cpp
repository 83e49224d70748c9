// Issue 37, through the built binary on real folders, links and files: `cache prune` and `cache
// remove` never delete through a symbolic link out of the cache (an entry folder that is a link is
// kept, with the reason; a file that is a link is removed itself, not what it points to), and what
// `cache status` and `cache prune` print from a metadata file reaches the terminal escaped.
#include <gtest/gtest.h>

#include <filesystem>

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

class CacheLinks : public ::testing::Test {
protected:
    void SetUp() override {
        write_file_atomic(dir.path() / "ref.cpp", "at::Tensor scale(const at::Tensor& x) { return x * 2; }\n");
        write_file_atomic(task_file, task_json("scale", 1000));
        const Task t = load_task(task_file);
        cache::EntryMeta m = cache::entry_from_validation(t, "sm_90", json{{"status", "ok"}, {"speedup", 2.0}});
        // Someone's files outside the cache, shaped like an entry of `scale`, stale once the task changes.
        cache::store(outside, kKernel, m);
        write_file_atomic(task_file, task_json("scale", 2048));
        fs::create_directories(cache_dir);
        fs::create_directory_symlink(outside / "scale", cache_dir / "scale");
    }
    TempDir dir{"kevo-cache-links"};
    fs::path cache_dir = dir.path() / "kernels", outside = dir.path() / "elsewhere";
    fs::path task_file = dir.path() / "scale.json";
};

TEST_F(CacheLinks, PruneKeepsAnEntryWhoseFolderIsALinkAndDeletesNothingThroughIt) {
    auto r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(outside / "scale" / "sm_90.cu")) << "prune deleted a file outside the cache";
    EXPECT_TRUE(fs::exists(outside / "scale" / "sm_90.json")) << "prune deleted a file outside the cache";
    EXPECT_TRUE(fs::is_symlink(cache_dir / "scale"));
    EXPECT_TRUE(contains(r.out, "kept scale sm_90 (stale: the task changed")) << r.out;
    EXPECT_TRUE(contains(r.out, "scale is a symbolic link (to " + (outside / "scale").string() + ")")) << r.out;
    EXPECT_TRUE(contains(r.out, "kernelevo never deletes through a link")) << r.out;
}

TEST_F(CacheLinks, RemoveRefusesAnEntryWhoseFolderIsALink) {
    auto r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale"});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "is a symbolic link")) << r.err;
    EXPECT_TRUE(fs::exists(outside / "scale" / "sm_90.cu"));
    EXPECT_TRUE(fs::exists(outside / "scale" / "sm_90.json"));
}

TEST_F(CacheLinks, AFileThatIsALinkIsRemovedItselfNotWhatItPointsTo) {
    fs::remove(cache_dir / "scale");
    fs::create_directories(cache_dir / "scale");
    for (const char* f : {"sm_90.cu", "sm_90.json"}) fs::create_symlink(outside / "scale" / f, cache_dir / "scale" / f);
    auto r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "removed scale sm_90 (stale")) << r.out;
    EXPECT_FALSE(fs::exists(cache_dir / "scale"));
    EXPECT_TRUE(fs::exists(outside / "scale" / "sm_90.cu"));
    EXPECT_TRUE(fs::exists(outside / "scale" / "sm_90.json"));
}

// A metadata file's names reach the terminal escaped (an ESC sequence could retitle the terminal,
// clear it or hide text), in `cache status` and in `cache prune`'s "kept" lines.
TEST_F(CacheLinks, NamesFromAMetadataFileArePrintedEscaped) {
    fs::remove(cache_dir / "scale");
    fs::create_directories(cache_dir / "scale");
    fs::copy_file(outside / "scale" / "sm_90.cu", cache_dir / "scale" / "sm_90.cu");
    json j = json::parse(read_file(outside / "scale" / "sm_90.json"));
    j["function"] = "x\x1b]0;owned\x07\x1b[2J";
    write_file_atomic(cache_dir / "scale" / "sm_90.json", j.dump());
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"cache", "status", "--cache-dir", cache_dir.string()},
          {"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file.string()}}) {
        auto r = kernelevo(args);
        EXPECT_EQ((r.out + r.err).find('\x1b'), std::string::npos) << args[1] << ": a raw ESC reached the terminal";
        EXPECT_EQ((r.out + r.err).find('\x07'), std::string::npos) << args[1] << ": a raw BEL reached the terminal";
        EXPECT_TRUE(contains(r.out, "the metadata describes x\\x1b]0;owned\\x07\\x1b[2J sm_90")) << args[1] << ": " << r.out;
    }
}

}  // namespace
