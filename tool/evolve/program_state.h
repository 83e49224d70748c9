// The states a stored program's status holds besides a verdict (a kevo::Status name: "ok",
// "compile_error", ...): one table. The names are the store's column values (the SQLite and Redis
// backends also match "duplicate" when they claim a program), shown by `report` and `serve`.
#pragma once
#include "store/store.h"

namespace kevo::evolve {

// X(id, name): what the search wrote instead of a verdict.
#define KEVO_PROGRAM_STATE_LIST(X)                                                                  \
    X(pending, "pending")       /* claimed; its evaluation had not ended (a restart evaluates it) */ \
    X(duplicate, "duplicate")   /* the same normalized source as an earlier program: not evaluated */ \
    X(no_code, "no_code")       /* the model's reply held no usable kernel */                       \
    X(not_judged, "not_judged") /* the evaluator could not judge it, retries included */

enum class ProgramState {
#define KEVO_PROGRAM_STATE_ID(id, name) id,
    KEVO_PROGRAM_STATE_LIST(KEVO_PROGRAM_STATE_ID)
#undef KEVO_PROGRAM_STATE_ID
};

inline constexpr const char* kProgramStateNames[] = {
#define KEVO_PROGRAM_STATE_NAME(id, name) name,
    KEVO_PROGRAM_STATE_LIST(KEVO_PROGRAM_STATE_NAME)
#undef KEVO_PROGRAM_STATE_NAME
};

inline constexpr const char* program_state_name(ProgramState s) { return kProgramStateNames[static_cast<size_t>(s)]; }

// Whether the program's status is this state.
inline bool has_state(const store::Program& p, ProgramState s) { return p.status == program_state_name(s); }

}  // namespace kevo::evolve
