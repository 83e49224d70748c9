// The judge's test hooks: the rows of common/settings.h whose kind is test_hook (KEVO_FAULT_WALL_CHECK,
// KEVO_GATE_KERNEL). Only the tests' runner (kernelevo-runner-test-hooks, test_hooks.cpp compiled
// with KEVO_TEST_HOOKS) honours them; the kernelevo-runner that is built for use and installed links
// test_hooks.cpp without it, so neither a user's shell nor anything a candidate sets can change how
// the judge judges.
#pragma once
#include "common/settings.h"

namespace kevo_runner {

// Whether the hook is set and this runner honours hooks (false for a row that is not a test hook).
bool test_hook(kevo::EnvVar hook);

}  // namespace kevo_runner
