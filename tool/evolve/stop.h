// Why a search stopped: one table of reasons (their names are what `search --json` prints as
// stop_reason, what the state stores as meta "stop_reason" and what `report` shows), and whether
// each means the run did what it was asked.
#pragma once
#include <string>

namespace kevo::evolve {

// X(id, name, finished, takes a detail)
#define KEVO_STOP_REASON_LIST(X)                              \
    X(none, "", false, false)                                 \
    X(generations, "generations", true, false)                \
    X(target, "target", true, false)                          \
    X(target_sol, "target_sol", true, false)                  \
    X(budget, "budget", true, false)                          \
    X(time, "time", true, false)                              \
    X(interrupted, "interrupted", false, false)               \
    X(batch, "batch", false, false)                           \
    X(error, "error", false, false)                           \
    X(no_gpu, "error: no GPU to validate on", false, true)    \
    X(llm_failed, "error: LLM request failed", false, true)

enum class StopReason {
#define KEVO_STOP_ID(id, name, finished, detail) id,
    KEVO_STOP_REASON_LIST(KEVO_STOP_ID)
#undef KEVO_STOP_ID
};

struct StopReasonInfo {
    const char* name;
    bool finished;     // generations, target, target_sol, budget, time: the run did what it was asked
    bool has_detail;   // the name is followed by ": " and what went wrong
};

inline constexpr StopReasonInfo kStopReasons[] = {
#define KEVO_STOP_ROW(id, name, finished, detail) {name, finished, detail},
    KEVO_STOP_REASON_LIST(KEVO_STOP_ROW)
#undef KEVO_STOP_ROW
};

inline constexpr const StopReasonInfo& stop_info(StopReason r) { return kStopReasons[static_cast<size_t>(r)]; }
inline constexpr const char* stop_reason_name(StopReason r) { return stop_info(r).name; }
inline constexpr bool finished(StopReason r) { return stop_info(r).finished; }

// A reason with its detail (the failure's message, for the reasons that take one).
struct Stop {
    StopReason reason = StopReason::none;
    std::string detail;
    // As printed and stored: "budget", "error: LLM request failed: <detail>".
    std::string text() const { return stop_reason_name(reason) + (stop_info(reason).has_detail ? ": " + detail : std::string()); }
};

}  // namespace kevo::evolve
