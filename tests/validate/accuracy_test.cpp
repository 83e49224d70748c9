// details.accuracy and details.kernelbench_check from the judge's per-trial figures (accuracy.h): the
// worst trial per output, a warning for an output right only to about its tolerance (no GPU).
#include <gtest/gtest.h>

#include "validate/accuracy.h"

using nlohmann::json;

namespace {
json output(const char* name, double max_abs, double rel_l2, double used, const char* kernelbench) {
    return {{"output", name}, {"pass", true}, {"max_abs_diff", max_abs}, {"rel_l2", rel_l2}, {"rel_l2_bound", 1e-4},
            {"scale", 1.2e-4}, {"atol_effective", 1.2e-8}, {"rtol", 1e-4}, {"tolerance_used", used}, {"near_tolerance", used > 0.5},
            {"kernelbench_check", kernelbench}};
}
}  // namespace

TEST(Accuracy, WorstTrialPerOutputAndKernelBenchBeside) {
    json details = {{"checks", json::array({{{"outputs", json::array({output("y", 1e-9, 1e-6, 0.01, "pass"),
                                                                      output("z", 0, 0, 0, "pass")})}},
                                            {{"outputs", json::array({output("y", 3e-9, 4e-6, 0.04, "pass"),
                                                                      output("z", 0, 0, 0, "fail")})}}})}};
    auto warnings = kevo::summarize_accuracy(details);
    EXPECT_TRUE(warnings.empty());
    const json& y = details["accuracy"]["y"];
    EXPECT_DOUBLE_EQ(y["max_abs_diff"].get<double>(), 3e-9);
    EXPECT_DOUBLE_EQ(y["rel_l2"].get<double>(), 4e-6);
    EXPECT_DOUBLE_EQ(y["tolerance_used"].get<double>(), 0.04);
    EXPECT_DOUBLE_EQ(y["atol_effective"].get<double>(), 1.2e-8);
    EXPECT_EQ(y["trials"], 2);
    EXPECT_EQ(y["near_tolerance"], false);
    EXPECT_EQ(y["kernelbench_check"], "pass");
    EXPECT_EQ(details["accuracy"]["z"]["kernelbench_check"], "fail");
    EXPECT_EQ(details["kernelbench_check"], "fail");  // reported; the verdict is the judge's
}

TEST(Accuracy, RightOnlyToAboutTheToleranceIsSaid) {
    json details = {{"checks", json::array({{{"outputs", json::array({output("y", 1e-8, 7e-5, 0.7, "pass")})}}})}};
    auto warnings = kevo::summarize_accuracy(details);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("output 'y' is right only to about its tolerance: it used 70%"), std::string::npos) << warnings[0];
    EXPECT_EQ(details["accuracy"]["y"]["near_tolerance"], true);
    EXPECT_EQ(details["kernelbench_check"], "pass");
}

TEST(Accuracy, InfiniteFiguresAndNoChecks) {
    json o = output("y", 1, 1, 0, "fail");
    o["pass"] = false;
    o["rel_l2"] = nullptr;  // the judge writes what is not finite as null
    o["tolerance_used"] = nullptr;
    json details = {{"checks", json::array({{{"outputs", json::array({o})}}})}};
    EXPECT_TRUE(kevo::summarize_accuracy(details).empty());  // failed: no warning about room
    EXPECT_TRUE(details["accuracy"]["y"]["rel_l2"].is_null());
    EXPECT_EQ(details["accuracy"]["y"]["pass"], false);
    json none = json::object();
    kevo::summarize_accuracy(none);
    EXPECT_FALSE(none.contains("accuracy"));
}
