// A program's status (store::ProgramStatus): one table of names, the stored ones; a name a state
// file holds that the table lacks is a clear error.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <set>
#include <string>

#include "common/error.h"
#include "common/fs.h"
#include "store/store.h"

namespace kevo::store {
namespace {

TEST(ProgramStatus, EveryValueRoundTripsThroughItsName) {
    size_t n = 0;
#define KEVO_ROUND_TRIP(id)                                                               \
    EXPECT_STREQ(program_status_name(ProgramStatus::id), #id);                          \
    EXPECT_EQ(parse_program_status(program_status_name(ProgramStatus::id)), ProgramStatus::id); \
    ++n;
    KEVO_PROGRAM_STATUS_LIST(KEVO_ROUND_TRIP)
#undef KEVO_ROUND_TRIP
    EXPECT_EQ(n, 11u);
}

// The names states of every version hold: renaming a value would leave old states unreadable.
TEST(ProgramStatus, TheStoredNamesAreTheOnesOfEveryVersion) {
    for (const char* name : {"ok", "compile_error", "runtime_error", "mismatch", "timeout", "rejected", "no_device",
                             "pending", "duplicate", "no_code", "not_judged"})
        EXPECT_STREQ(program_status_name(parse_program_status(name)), name);
    EXPECT_EQ(Program{}.status, ProgramStatus::pending);
    EXPECT_EQ(nlohmann::json(ProgramStatus::not_judged), "not_judged");  // JSON shows the name
}

TEST(ProgramStatus, AnUnknownNameIsAClearError) {
    for (const char* name : {"", "OK", "okay", "ok ", "pending\n"}) {
        try {
            parse_program_status(name);
            ADD_FAILURE() << "'" << name << "' was accepted";
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("which this kernelevo does not know (ok, compile_error,"), std::string::npos)
                << e.what();
        }
    }
}

// A state file whose program has a status no kernelevo wrote: reading it is one error naming the
// status, never a value out of the enum's range.
TEST(ProgramStatus, AStateFileWithAnUnknownStatusIsRefusedWhenRead) {
    TempDir dir("kevo-status");
    const std::string file = (dir.path() / "run.db").string();
    {
        auto s = open_store(file);
        Program p;
        p.key = "g0.i0.c0.a0";
        p.status = ProgramStatus::mismatch;
        s->put_program(p);
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE programs SET status='exploded'", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    auto s = open_store(file, Access::read_only);
    try {
        s->programs();
        ADD_FAILURE() << "the unknown status was read";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("a program of status 'exploded', which this kernelevo does not know"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(s->find_program("g0.i0.c0.a0"), UsageError);
}

}  // namespace
}  // namespace kevo::store
