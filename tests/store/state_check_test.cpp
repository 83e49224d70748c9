// A search's start-up reads an existing state file's content once (issue 36, item 5): the check
// (every page, the schema version, the tables) that check_state() did is trusted by the open and
// the remove (--fresh) that follow while the file is the same, and done again when it is not.
// Real SQLite files; the count is store::state_content_checks().
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "common/fs.h"
#include "store/store.h"

namespace kevo::store {
namespace {

// A state with one metadata value, closed.
std::string make_state(const TempDir& dir) {
    const std::string path = (dir.path() / "run.db").string();
    open_store(path)->put_meta("x", 7);
    return path;
}

TEST(StateCheck, AResumeReadsTheFileOnce) {
    TempDir dir;
    const std::string path = make_state(dir);
    const int64_t before = state_content_checks();
    StateCheck checked = check_state(path);  // what workflows::run_search (tool/workflows/search.cpp) does before taking the lease
    auto store = open_store(path, Access::read_write, checked);
    EXPECT_EQ(state_content_checks() - before, 1);
    EXPECT_EQ(store->get_meta("x"), nlohmann::json(7));
    // Without the check's identity, an open reads it again (as every open did before).
    store.reset();
    open_store(path, Access::read_only);
    EXPECT_EQ(state_content_checks() - before, 2);
}

TEST(StateCheck, AFreshStartReadsTheOldFileOnce) {
    TempDir dir;
    const std::string path = make_state(dir);
    const int64_t before = state_content_checks();
    StateCheck checked = check_state(path);
    remove_store(path, checked);
    EXPECT_FALSE(fs::exists(path));
    auto store = open_store(path, Access::read_write, checked);  // a new file: nothing to check
    EXPECT_EQ(state_content_checks() - before, 1);
    EXPECT_FALSE(store->get_meta("x"));
}

TEST(StateCheck, AFileChangedAfterTheCheckIsCheckedAgainAndRefused) {
    TempDir dir;
    const std::string path = make_state(dir);
    StateCheck checked = check_state(path);
    {  // damaged after the check: the first page overwritten
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(0);
        f << std::string(100, 'x');
    }
    const int64_t before = state_content_checks();
    EXPECT_THROW(open_store(path, Access::read_write, checked), UsageError);
    EXPECT_THROW(remove_store(path, checked), UsageError);
    EXPECT_EQ(state_content_checks() - before, 2);
    EXPECT_TRUE(fs::exists(path));  // refused, left as it is
}

TEST(StateCheck, NothingToCheckForAMissingFileAndAForeignFileIsRefused) {
    TempDir dir;
    EXPECT_TRUE(check_state((dir.path() / "none.db").string()).path.empty());
    write_file_atomic(dir.path() / "junk.db", std::string(4096, 'x'));
    EXPECT_THROW(check_state((dir.path() / "junk.db").string()), UsageError);
}

}  // namespace
}  // namespace kevo::store
