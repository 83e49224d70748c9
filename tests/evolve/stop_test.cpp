// The search's stop reasons (evolve/stop.h) and its programs' stored verdicts (evolve/program_state.h):
// the names `search --json` prints and the state stores stay what they were when they were
// strings, and which stop reasons mean the run finished.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "evolve/program_state.h"
#include "evolve/stop.h"

namespace kevo::evolve {
namespace {

TEST(StopReason, NamesAreTheStoredAndPrintedOnes) {
    EXPECT_EQ((Stop{StopReason::generations, ""}.text()), "generations");
    EXPECT_EQ((Stop{StopReason::target_sol, ""}.text()), "target_sol");
    EXPECT_EQ((Stop{StopReason::batch, ""}.text()), "batch");
    EXPECT_EQ((Stop{StopReason::none, ""}.text()), "");
    // The two errors that carry what went wrong, as they were written before the enum.
    EXPECT_EQ((Stop{StopReason::llm_failed, "HTTP 401"}.text()), "error: LLM request failed: HTTP 401");
    EXPECT_EQ((Stop{StopReason::no_gpu, "no CUDA device"}.text()), "error: no GPU to validate on: no CUDA device");
    std::set<std::string> names;
    for (const StopReasonInfo& r : kStopReasons) EXPECT_TRUE(names.insert(r.name).second) << r.name;
}

TEST(StopReason, FinishedMeansTheRunDidWhatItWasAsked) {
    std::set<std::string> done;
    for (size_t i = 0; i < std::size(kStopReasons); ++i)
        if (finished(static_cast<StopReason>(i))) done.insert(kStopReasons[i].name);
    EXPECT_EQ(done, (std::set<std::string>{"generations", "target", "target_sol", "budget", "time"}));
}

// Each verdict is stored under its own name (store::ProgramStatus starts with the verdicts).
TEST(ProgramStatus, AVerdictIsStoredUnderItsName) {
#define KEVO_STATUS(id) Status::id,
    for (Status s : {KEVO_VERDICT_LIST(KEVO_STATUS)}) EXPECT_STREQ(store::program_status_name(stored_status(s)), status_name(s));
#undef KEVO_STATUS
}

}  // namespace
}  // namespace kevo::evolve
