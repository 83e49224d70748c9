// The one architecture parser (kernelevo/arch.h) as the tool sees it, and the compatibility rule
// the runtime and configure use.
#include <gtest/gtest.h>

#include "common/arch.h"
#include "common/error.h"
#include "kernelevo/arch.h"

using namespace kevo;

TEST(Arch, NormalizesEverySpelling) {
    EXPECT_EQ(normalize_arch("90"), "sm_90");
    EXPECT_EQ(normalize_arch("sm_90"), "sm_90");
    EXPECT_EQ(normalize_arch("SM90"), "sm_90");
    EXPECT_EQ(normalize_arch("sm90"), "sm_90");
    EXPECT_EQ(normalize_arch("compute_80"), "sm_80");
    EXPECT_EQ(normalize_arch("9.0"), "sm_90");
    EXPECT_EQ(normalize_arch("sm_90a"), "sm_90a");
    EXPECT_EQ(normalize_arch("90a"), "sm_90a");
    EXPECT_EQ(normalize_arch("sm_100f"), "sm_100f");
    EXPECT_EQ(normalize_arch("10.0"), "sm_100");
    EXPECT_EQ(normalize_arch("120"), "sm_120");
}

TEST(Arch, RefusesWhatNamesNoArchitecture) {
    for (const char* bad : {"hopper", "sm_9", "", "sm_", "9", "90-real", "sm_90b", "1000", "9.", "sm_90aa", "native"}) {
        EXPECT_THROW(normalize_arch(bad), UsageError) << bad;
        EXPECT_EQ(arch_cc(bad), 0) << bad;
    }
    try {
        normalize_arch("hopper");
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("'hopper'"), std::string::npos) << e.what();
    }
}

TEST(Arch, NormalizedNamesAreCacheFileNames) {
    EXPECT_TRUE(is_normalized_arch("sm_90"));
    EXPECT_TRUE(is_normalized_arch("sm_90a"));
    EXPECT_TRUE(is_normalized_arch("sm_100f"));
    EXPECT_FALSE(is_normalized_arch("90"));
    EXPECT_FALSE(is_normalized_arch("sm90"));
    EXPECT_FALSE(is_normalized_arch("sm_90A"));
    EXPECT_FALSE(is_normalized_arch("compute_90"));
    EXPECT_EQ(arch_cc("sm_90a"), 90);
    EXPECT_EQ(arch_cc("sm_86"), 86);
}

TEST(Arch, BinaryCompatibility) {
    auto runs = [](const char* kernel, int device) {
        kevo_arch a{};
        EXPECT_TRUE(kevo_arch_parse(kernel, &a)) << kernel;
        return kevo_arch_runs_on(a, device) != 0;
    };
    EXPECT_TRUE(runs("sm_80", 80));
    EXPECT_TRUE(runs("sm_80", 86));   // same major, newer minor
    EXPECT_TRUE(runs("sm_80", 89));
    EXPECT_FALSE(runs("sm_86", 80));  // never an older device
    EXPECT_FALSE(runs("sm_80", 90));  // never another major
    EXPECT_TRUE(runs("sm_90", 90));
    EXPECT_TRUE(runs("sm_90a", 90));  // arch-specific: exactly its own cc
    EXPECT_FALSE(runs("sm_86a", 89));
    EXPECT_TRUE(runs("sm_100f", 103));
    EXPECT_FALSE(runs("sm_90", 0));
}
