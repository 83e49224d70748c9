// Tolerances that cannot be gamed (issue 35), on a real GPU: six kernels for a task whose outputs
// are all about 6e-5 (a softmax over 16384 columns, KernelBench L2-99's shape) are each rejected,
// and the honest one passes with room to spare. Every attack passed the judge's earlier rule (an
// absolute atol of 1e-4 beside rtol 1e-4: no element of theirs is 1e-4 from the reference), and
// KernelBench's own check (allclose at 1e-2) passes every one of them as well: it is reported in
// details.kernelbench_check, never the verdict. The rule itself: tool/device/tolerance.h; on the
// host: tests/device/tolerance_test.cpp. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <string>

#include "common/fs.h"
#include "task/task.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kDir = fs::path(KEVO_TEST_DATA_DIR) / "attacks" / "small_softmax";

Validator& validator() {
    static Validator* v = [] {
        ValidateOptions o;
        o.time_kernels = false;  // correctness is what is tested
        o.timeout_s = 30;
        return new Validator(load_task(kDir / "task.json"), o);
    }();
    return *v;
}

// kernel.cu with one of its VARIANTs selected (empty: the honest kernel).
ValidationResult validate_variant(const std::string& variant) {
    std::string src = read_file(kDir / "kernel.cu");
    if (!variant.empty()) src = "#define VARIANT " + variant + "\n" + src;
    return validator().validate(src);
}

#define REQUIRE_GPU()                                                                              \
    do {                                                                                           \
        if (!validator().device().present) GTEST_SKIP() << "no CUDA device: " << validator().device().error; \
    } while (0)

class Attack : public ::testing::TestWithParam<const char*> {};
}  // namespace

TEST(Attacks, HonestKernelPassesWithRoomToSpare) {
    REQUIRE_GPU();
    ValidationResult r = validate_variant("");
    ASSERT_EQ(r.status, Status::ok) << r.log;
    const auto& y = r.details["accuracy"]["y"];
    EXPECT_LT(y["tolerance_used"].get<double>(), 0.05) << y.dump();
    EXPECT_FALSE(y["near_tolerance"].get<bool>()) << y.dump();
    EXPECT_LT(y["scale"].get<double>(), 1e-4) << y.dump();  // the outputs are smaller than the old atol
    EXPECT_LT(y["atol_effective"].get<double>(), 1e-7) << y.dump();
    EXPECT_EQ(r.details["kernelbench_check"], "pass");
    EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;
}

TEST_P(Attack, IsRejected) {
    REQUIRE_GPU();
    ValidationResult r = validate_variant(GetParam());
    EXPECT_EQ(r.status, Status::mismatch) << r.log;
    EXPECT_NE(r.log.find("output 'y' differs from the reference in shape set 0"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("relative L2 error"), std::string::npos) << r.log;
    // On the trial that failed, every element was within the old absolute atol ...
    const auto& check = r.details["checks"].back();
    EXPECT_LE(check["max_abs_diff"].get<double>(), 1e-4) << check.dump();
    // ... and KernelBench's own check passed it.
    EXPECT_EQ(r.details["kernelbench_check"], "pass") << r.details["accuracy"].dump();
    EXPECT_FALSE(r.details["accuracy"]["y"]["pass"].get<bool>());
}

INSTANTIATE_TEST_SUITE_P(SmallOutputs, Attack,
                         ::testing::Values("CONSTANT", "ZEROS", "SKIP_K_TILE", "SKIP_BIAS", "WRONG_ROWS", "BF16"),
                         [](const auto& info) { return std::string(info.param); });

// A model's parameters (task.json "init": {"kind": "file", "parameter": true}) are varied by the judge
// after each set's first trial (device/fill.h): a kernel that keeps the weights it saw first, or reads
// their initial values as constants (a bias of 0.5 everywhere), is wrong for any other weights, and
// fails. The same kernels on the same task with the bias as a plain file input (a buffer, whose values
// stay as the file holds them) pass: the variation is what catches them.
namespace {
const fs::path kParamDir = fs::path(KEVO_TEST_DATA_DIR) / "parameter_bias";

ValidationResult validate_param(const char* task_file, const fs::path& kernel) {
    ValidateOptions o;
    o.time_kernels = false;
    o.timeout_s = 30;
    Validator v(load_task(kParamDir / task_file), o);
    if (!v.device().present) return ValidationResult{};
    return v.validate(read_file(kernel));
}

class WeightAttack : public ::testing::TestWithParam<const char*> {};
}  // namespace

TEST(WeightAttacks, HonestKernelPassesWithVariedParameters) {
    REQUIRE_GPU();
    ValidationResult r = validate_param("task.json", fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "kernels" / "good.cu");
    EXPECT_EQ(r.status, Status::ok) << r.log;
}

TEST_P(WeightAttack, FailsOnlyWhenTheWeightsVary) {
    REQUIRE_GPU();
    const fs::path kernel = kParamDir / "kernels" / GetParam();
    ValidationResult fixed = validate_param("task_buffer.json", kernel);
    EXPECT_EQ(fixed.status, Status::ok) << fixed.log;
    ValidationResult varied = validate_param("task.json", kernel);
    EXPECT_EQ(varied.status, Status::mismatch) << varied.log;
    EXPECT_NE(varied.log.find("output 'y' differs from the reference"), std::string::npos) << varied.log;
    // The first trial, on the file's own values, passed: the failure is on a varied draw.
    ASSERT_GE(varied.details["checks"].size(), 2u) << varied.details.dump();
    EXPECT_TRUE(varied.details["checks"][0]["pass"].get<bool>()) << varied.details["checks"].dump();
}

INSTANTIATE_TEST_SUITE_P(Parameters, WeightAttack, ::testing::Values("cache_bias.cu", "const_bias.cu"),
                         [](const auto& info) { return std::string(info.param).substr(0, std::string(info.param).find('.')); });
