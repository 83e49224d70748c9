// test_hooks.h: compiled twice, into kevo_runner_hooks (the runner for use: every hook off) and, in
// a build with tests, into kevo_runner_test_hooks (KEVO_TEST_HOOKS: the environment decides).
#include "test_hooks.h"

namespace kevo_runner {

bool test_hook(kevo::EnvVar hook) {
    if (kevo::env_info(hook).kind != kevo::EnvKind::test_hook) return false;
#ifdef KEVO_TEST_HOOKS
    return kevo::env(hook) != nullptr;
#else
    return false;
#endif
}

}  // namespace kevo_runner
