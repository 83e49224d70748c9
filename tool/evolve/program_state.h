// A verdict's stored status: store::ProgramStatus starts with the verdicts (KEVO_VERDICT_LIST) in
// kevo::Status's order, so each verdict is stored under its own name.
#pragma once
#include "evaluate/status.h"
#include "store/store.h"

namespace kevo::evolve {

inline store::ProgramStatus stored_status(Status s) { return static_cast<store::ProgramStatus>(s); }

}  // namespace kevo::evolve
