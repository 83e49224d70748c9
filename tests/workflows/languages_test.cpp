// The use cases reach a candidate language through the registry alone: a third language added
// here (tests/language/fake_language.h) is checked before a search that writes it starts, and
// `cache status` shows its version under the fact's own key, and `cache objects` counts and cleans
// its compiled objects' folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cache/cache.h"
#include "cache/objects.h"
#include "common/error.h"
#include "common/fs.h"
#include "fake_language.h"
#include "language/registry.h"
#include "workflows/cache.h"
#include "workflows/search.h"

namespace fs = std::filesystem;
using namespace kevo;

namespace {

class UseCaseLanguages : public ::testing::Test {
protected:
    void SetUp() override { language::add(fake); }
    void TearDown() override { language::remove(fake.name()); }
    testing_fake::FakeLanguage fake;
    TempDir dir{"kevo-workflows-languages"};
};

TEST_F(UseCaseLanguages, ASearchChecksItsLanguagesToolchainBeforeAnythingIsStored) {
    workflows::SearchArgs a;
    a.task = (fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json").string();
    a.out = (dir.path() / "kernels").string();
    a.state = (dir.path() / "state.db").string();
    a.python = "/opt/fake/bin/python";
    a.no_baselines = true;
    a.llm.url = "http://127.0.0.1:9/v1";  // never asked: the run stops before any request
    a.llm.models = {"no-such-model"};
    a.cfg.structure.backend = "fakelang";
    fake.missing = true;
    try {
        workflows::run_search(a, workflows::search_config(a));
        FAIL() << "a language whose toolchain is missing must stop the search before it starts";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), "fakec is not installed for /opt/fake/bin/python");
    }
    EXPECT_EQ(fake.preflights, 1);
    EXPECT_FALSE(fs::exists(a.state)) << "the state was touched before the check";
    EXPECT_FALSE(fs::exists(a.out));
}

TEST_F(UseCaseLanguages, CacheStatusShowsTheEntrysLanguageVersion) {
    const fs::path cache_dir = dir.path() / "cache";
    cache::EntryMeta meta;
    meta.function = "fake_op";
    meta.arch = "sm_90";
    cache::store_candidate(cache_dir, testing_fake::kFake, compile_candidate(testing_fake::kFake, CompileOptions{}), meta);
    workflows::CacheStatusRequest r;
    r.cache_dir = cache_dir.string();
    const workflows::CacheStatus st = workflows::cache_status(r);
    ASSERT_EQ(st.rows.size(), 1u);
    const nlohmann::json row = st.rows[0].to_json();
    EXPECT_EQ(row["backend"], "fakelang");
    EXPECT_EQ(row.value("fake_version", ""), "0.1") << row.dump();
    EXPECT_FALSE(row.contains("triton_version")) << row.dump();
}

TEST_F(UseCaseLanguages, CacheObjectsCountsAndCleansTheLanguagesObjects) {
    language::remove(fake.name());
    const size_t before = cache::object_areas().size();  // asked before the language is added
    language::add(fake);
    EXPECT_EQ(cache::object_areas().size(), before + 1);
    bool listed = false;
    for (const auto& a : cache::object_areas()) listed = listed || (a.folder == "fake" && a.what == "Fake kernels");
    EXPECT_TRUE(listed) << "a language added after the first call is missing from cache objects";
    const fs::path root = dir.path() / "objects";
    fs::create_directories(root / "fake" / "ab");
    write_file_atomic(root / "fake" / "ab" / "k.so", "12345");
    bool counted = false;
    for (const auto& s : cache::object_stats(root)) counted = counted || (s.folder == "fake" && s.files == 1 && s.bytes == 5);
    EXPECT_TRUE(counted);
    EXPECT_EQ(cache::clean_objects(root, false).files, 1u);
    EXPECT_FALSE(fs::exists(root / "fake" / "ab" / "k.so"));
}

}  // namespace
