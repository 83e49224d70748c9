// The judge's test hooks (tool/validate/runner/test_hooks.h) in the runner built for use: set in the
// environment, none is honoured, so neither a user's shell nor a candidate's can change a verdict.
// (validate_gpu_test's WallCheck tests run both runners on a GPU.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/settings.h"
#include "validate/runner/test_hooks.h"

namespace {

TEST(RunnerTestHooks, TheRunnerForUseIgnoresThemWhateverTheEnvironmentSays) {
    int hooks = 0;
    for (size_t i = 0; i < std::size(kevo::kEnvTable); ++i) {
        const kevo::Setting& e = *kevo::kEnvTable[i];
        if (e.kind != kevo::EnvKind::test_hook) continue;
        ++hooks;
        ::setenv(e.variable, "1", 1);
        EXPECT_FALSE(kevo_runner::test_hook(static_cast<kevo::EnvVar>(i))) << e.variable << " is honoured by the runner for use";
        ::unsetenv(e.variable);
    }
    EXPECT_EQ(hooks, 2);  // KEVO_FAULT_WALL_CHECK, KEVO_GATE_KERNEL
}

TEST(RunnerTestHooks, AVariableThatIsNotAHookIsNeverOne) {
    ::setenv("KERNELEVO_DEVICE", "0", 1);
    EXPECT_FALSE(kevo_runner::test_hook(kevo::EnvVar::kDevice));
    ::unsetenv("KERNELEVO_DEVICE");
}

}  // namespace
