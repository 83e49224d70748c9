// The cache use cases called directly (not through the kernelevo binary), on a real cache folder
// filled by cache_add() with a real kernel (nvcc checks the architecture), a real build tree as
// kernelevo_optimize() leaves it (BUILD/kernelevo/NAME/task.json + lookup.json), real files removed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/fs.h"
#include "workflows/cache.h"

namespace fs = std::filesystem;
using namespace kevo;
using workflows::CacheInputError;

namespace {

class CacheUseCases : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::make_unique<TempDir>("kevo-workflows-cache");
        const fs::path data = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias";
        // A configured build: the task and the architectures its lookup wanted.
        build = dir->path() / "build";
        const fs::path t = build / "kernelevo" / "gelu_bias";
        fs::create_directories(t);
        for (const char* f : {"task.json", "gelu_bias_ref.cpp"}) fs::copy_file(data / f, t / f);
        write_file_atomic(t / "lookup.json", R"({"function": "gelu_bias", "architectures": [{"arch": "sm_90"}, {"arch": "sm_100"}]})");
        task = (t / "task.json").string();
        kernel = (data / "kernels" / "good.cu").string();
        cache_dir = (dir->path() / "cache").string();
    }
    workflows::CacheAddition add(const std::string& arch, bool unvalidated = true) {
        workflows::CacheAddRequest r;
        r.task = task;
        r.kernel = kernel;
        r.arch = arch;
        r.cache_dir = cache_dir;
        r.unvalidated = unvalidated;
        r.note = "from the workflows test";
        r.progress = [this](workflows::CacheAddRequest::Step s, const std::string&, const std::string&) { steps.push_back(s); };
        return workflows::cache_add(r);
    }
    fs::path entry(const std::string& arch) const { return fs::path(cache_dir) / "gelu_bias" / (arch + ".cu"); }

    std::unique_ptr<TempDir> dir;
    fs::path build;
    std::string task, kernel, cache_dir;
    std::vector<workflows::CacheAddRequest::Step> steps;
};

TEST_F(CacheUseCases, StatusStatsPruneAndRemoveOnARealCacheAndBuildTree) {
    for (const char* arch : {"90", "sm_80"}) {
        const workflows::CacheAddition a = add(arch);
        ASSERT_EQ(a.not_stored, workflows::CacheAddition::NotStored::none) << a.log;
        EXPECT_EQ(a.rc, 0);
        EXPECT_FALSE(a.meta.validated);
        EXPECT_EQ(a.meta.note, "from the workflows test");
        EXPECT_TRUE(fs::is_regular_file(a.source)) << a.source;
    }
    EXPECT_EQ(add("sm_90").arch, "sm_90");  // "90" was normalized: the same entry again
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.back(), workflows::CacheAddRequest::Step::storing_unvalidated);

    // Status against the build: it wants sm_90 (cached) and sm_100 (not): one row lacking.
    workflows::CacheStatusRequest sr;
    sr.cache_dir = cache_dir;
    sr.build_dir = build.string();
    sr.models = {"a/b"};
    const workflows::CacheStatus st = workflows::cache_status(sr);
    ASSERT_EQ(st.rows.size(), 3u);  // sm_100, sm_80, sm_90
    EXPECT_EQ(st.tasks, 1u);
    EXPECT_EQ(st.problems, 1);
    ASSERT_EQ(st.lacking.size(), 1u);
    EXPECT_EQ(st.lacking[0].arch, "sm_100");
    EXPECT_EQ(st.lacking[0].lookup.state, cache::State::missing);
    EXPECT_NE(st.lacking[0].search_command.find("--arch sm_100 --model a/b"), std::string::npos) << st.lacking[0].search_command;
    EXPECT_EQ(st.rows[1].to_json().value("wanted_by_build", true), false);  // sm_80: not wanted

    // Stats: two entries of one function, both unvalidated, none usable for speedups.
    workflows::CacheStatsRequest q;
    q.cache_dir = cache_dir;
    q.build_dir = build.string();
    const nlohmann::json stats = workflows::cache_stats(q);
    EXPECT_EQ(stats["totals"]["entries"], 2);
    EXPECT_EQ(stats["totals"]["fresh"], 2);
    EXPECT_EQ(stats["totals"]["unvalidated"], 2);
    EXPECT_EQ(stats["speedup"]["count"], 0);

    // Prune --unused: sm_80 is not wanted by the build; a dry run leaves it, a real one removes it.
    workflows::CachePruneRequest pr;
    pr.cache_dir = cache_dir;
    pr.build_dir = build.string();
    pr.unused = true;
    pr.dry_run = true;
    workflows::CachePrune p = workflows::cache_prune(pr);
    ASSERT_EQ(p.steps.size(), 1u);
    EXPECT_EQ(p.steps[0].arch, "sm_80");
    EXPECT_EQ(p.steps[0].why, "unused: the build does not target sm_80");
    EXPECT_TRUE(fs::exists(entry("sm_80")));
    pr.dry_run = false;
    p = workflows::cache_prune(pr);
    EXPECT_EQ(p.removed, 1);
    EXPECT_FALSE(fs::exists(entry("sm_80")));
    EXPECT_TRUE(fs::exists(entry("sm_90")));

    // Remove: a mistyped function is refused with the nearest name; the right one goes.
    workflows::CacheRemoveRequest rm;
    rm.cache_dir = cache_dir;
    rm.function = "gelu_bia";
    try {
        workflows::cache_remove(rm);
        FAIL() << "an unknown function was removed";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("did you mean 'gelu_bias'?"), std::string::npos) << e.what();
    }
    rm.function = "gelu_bias";
    const auto removed = workflows::cache_remove(rm);
    ASSERT_EQ(removed.size(), 1u);
    EXPECT_EQ(removed[0], entry("sm_90"));
    EXPECT_FALSE(fs::exists(entry("sm_90")));
    EXPECT_FALSE(fs::exists(fs::path(cache_dir) / "gelu_bias" / "sm_90.json"));
}

TEST_F(CacheUseCases, WrongInputsSayWhatIsWrongWithoutNamingOptions) {
    auto kind_of = [](auto&& call) {
        try {
            call();
        } catch (const CacheInputError& e) {
            EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
            return e.kind;
        }
        ADD_FAILURE() << "accepted";
        return CacheInputError::Kind::cache_not_a_directory;
    };
    workflows::CacheStatusRequest sr;
    sr.cache_dir = task;  // a file
    EXPECT_EQ(kind_of([&] { workflows::cache_status(sr); }), CacheInputError::Kind::cache_not_a_directory);
    sr.cache_dir = cache_dir;  // missing: an empty cache
    sr.build_dir = (dir->path() / "nobuild").string();
    EXPECT_EQ(kind_of([&] { workflows::cache_status(sr); }), CacheInputError::Kind::no_build_tree);
    write_file_atomic(build / "kernelevo" / "gelu_bias" / "lookup.json", "garbage");
    sr.build_dir = build.string();
    EXPECT_EQ(kind_of([&] { workflows::cache_status(sr); }), CacheInputError::Kind::unreadable_lookup);

    fs::create_directories(cache_dir);
    workflows::CachePruneRequest pr;
    pr.cache_dir = cache_dir;
    EXPECT_EQ(kind_of([&] { workflows::cache_prune(pr); }), CacheInputError::Kind::prune_without_tasks);
    pr.tasks = {task};
    pr.unused = true;
    EXPECT_EQ(kind_of([&] { workflows::cache_prune(pr); }), CacheInputError::Kind::unused_without_build);
}

TEST_F(CacheUseCases, AValidatedAddIsJudgedBeforeItIsStored) {
    const workflows::CacheAddition a = add("sm_90", /*unvalidated=*/false);
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.front(), workflows::CacheAddRequest::Step::validating);
    if (a.not_stored == workflows::CacheAddition::NotStored::validation && a.status == Status::no_device) {
        EXPECT_EQ(a.rc, 2);  // no GPU here: nothing stored, unvalidated or not
        EXPECT_FALSE(fs::exists(entry("sm_90")));
        return;
    }
    // On a GPU host of this architecture: validated, confirmed, stored with its figures.
    ASSERT_EQ(a.not_stored, workflows::CacheAddition::NotStored::none) << a.log;
    EXPECT_TRUE(a.meta.validated);
    EXPECT_GT(a.meta.speedup, 0);
    EXPECT_EQ(steps.at(1), workflows::CacheAddRequest::Step::confirming);
    EXPECT_TRUE(fs::is_regular_file(entry("sm_90")));
}

TEST_F(CacheUseCases, ObjectCacheStatsCountTheObjectsOfEachArea) {
    // A compiled-object cache of its own ($KERNELEVO_CACHE_HOME): two objects, 3 + 5 bytes.
    const char* was = std::getenv("KERNELEVO_CACHE_HOME");
    const std::string saved = was ? was : "";
    const fs::path root = dir->path() / "objects";
    ::setenv("KERNELEVO_CACHE_HOME", root.c_str(), 1);
    const std::string area = cache::object_areas().front().folder;
    write_file_atomic(root / area / "a.o", "abc");
    write_file_atomic(root / area / "sub" / "b.o", "defgh");
    const workflows::ObjectCacheStats s = workflows::object_cache_stats();
    if (was) ::setenv("KERNELEVO_CACHE_HOME", saved.c_str(), 1);
    else ::unsetenv("KERNELEVO_CACHE_HOME");
    EXPECT_EQ(s.root, fs::absolute(root));
    EXPECT_EQ(s.files, 2u);
    EXPECT_EQ(s.bytes, 8u);
    ASSERT_EQ(s.areas.size(), cache::object_areas().size());
    EXPECT_EQ(s.areas.front().files, 2u);
}

}  // namespace
