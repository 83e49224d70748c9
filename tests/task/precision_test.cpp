// task.json's "precision" (tool/task/precision.h, KEVO_PRECISION_LIST): names from the one table,
// the default (pytorch with PyTorch's own TF32 flags) left out of the hash so existing tasks keep
// theirs, every other policy hashed, and one-line errors that list the valid names.
#include <gtest/gtest.h>

#include <set>

#include "task/precision.h"
#include "task/schema.h"
#include "task/task.h"
#include "task_fixture.h"

using namespace kevo;
using nlohmann::json;

namespace {

class PrecisionTest : public tasktest::TaskFileTest {
protected:
    json base() const { return gelu_bias({{{"M", 64}, {"N", 32}}}); }
    json with(const json& precision) const {
        json j = base();
        j["precision"] = precision;
        return j;
    }
};

TEST_F(PrecisionTest, DefaultIsPytorchWithPytorchsFlagsAndKeepsTheHash) {
    const Task plain = parse(base());
    EXPECT_EQ(plain.precision.policy, KEVO_PRECISION_PYTORCH);
    EXPECT_STREQ(plain.precision.name(), "pytorch");
    EXPECT_TRUE(plain.precision.cudnn_tf32);    // torch.backends.cudnn.allow_tf32's default
    EXPECT_FALSE(plain.precision.matmul_tf32);  // torch.backends.cuda.matmul.allow_tf32's default
    EXPECT_FALSE(plain.to_json().contains("precision"));
    // Spelled out, the default is the same task: committed caches of existing tasks stay valid.
    EXPECT_EQ(parse(with("pytorch")).hash(), plain.hash());
    EXPECT_EQ(parse(with({{"policy", "pytorch"}, {"cudnn_tf32", true}, {"matmul_tf32", false}})).hash(), plain.hash());
}

TEST_F(PrecisionTest, EveryOtherPolicyAndRecordedFlagsAreADifferentTask) {
    const std::string plain = parse(base()).hash();
    std::set<std::string> hashes{plain};
    for (const json& p : {json("strict"), json("tf32"), json("bf16"), json{{"policy", "pytorch"}, {"matmul_tf32", true}},
                          json{{"policy", "pytorch"}, {"cudnn_tf32", false}}}) {
        const Task t = parse(with(p));
        EXPECT_TRUE(hashes.insert(t.hash()).second) << p << ": a kernel validated under one policy is not valid under another";
        ASSERT_TRUE(t.to_json().contains("precision")) << p;
        // The canonical form parses back to the same task.
        EXPECT_EQ(parse(with(t.to_json()["precision"])).hash(), t.hash()) << p;
    }
    const Task strict = parse(with("strict"));
    EXPECT_EQ(strict.to_json()["precision"], "strict");
    EXPECT_FALSE(strict.precision.cudnn_tf32 || strict.precision.matmul_tf32);
    const Task tf32 = parse(with("tf32"));
    EXPECT_TRUE(tf32.precision.cudnn_tf32 && tf32.precision.matmul_tf32);
    const Task user = parse(with({{"policy", "pytorch"}, {"matmul_tf32", true}}));
    EXPECT_TRUE(user.precision.cudnn_tf32 && user.precision.matmul_tf32);
    EXPECT_EQ(user.to_json()["precision"], (json{{"policy", "pytorch"}, {"cudnn_tf32", true}, {"matmul_tf32", true}}));
}

TEST_F(PrecisionTest, DescriptionNamesThePolicyTheTimedFlagsAndTheStrictCheck) {
    const std::string d = parse(base()).precision.describe();
    EXPECT_EQ(d.rfind("pytorch: as PyTorch and LibTorch run it by default", 0), 0u) << d;
    EXPECT_NE(d.find("cuDNN TF32 on, cuBLAS TF32 off"), std::string::npos) << d;
    EXPECT_NE(d.find("judged against the reference in strict fp32"), std::string::npos) << d;
    const std::string s = parse(with("strict")).precision.describe();
    EXPECT_EQ(s.rfind("strict: strict fp32 everywhere", 0), 0u) << s;
    EXPECT_NE(s.find("cuDNN TF32 off, cuBLAS TF32 off"), std::string::npos) << s;
}

TEST_F(PrecisionTest, BadPoliciesGetOneLineErrorsListingTheValidOnes) {
    const std::string all = "(expected one of: pytorch, strict, tf32 or bf16)";
    expect_error(with("fp16"), "precision", "unknown precision policy 'fp16' " + all);
    expect_error(with("strcit"), "precision", "did you mean 'strict'? " + all);
    expect_error(with(3), "precision", "expected a policy name (pytorch, strict, tf32 or bf16)");
    expect_error(with({{"policy", "half"}}), "precision.policy", "unknown precision policy 'half'");
    expect_error(with({{"matmul_tf32", true}}), "precision.policy", "missing (required)");
    expect_error(with({{"policy", "pytorch"}, {"matmul_tf23", true}}), "precision.matmul_tf23", "did you mean 'matmul_tf32'?");
    expect_error(with({{"policy", "pytorch"}, {"matmul_tf32", "yes"}}), "precision.matmul_tf32", "expected true or false");
    expect_error(with({{"policy", "strict"}, {"matmul_tf32", true}}), "precision.matmul_tf32",
                 "only the pytorch policy records the user's TF32 flags; strict fixes them (cuDNN TF32 off, cuBLAS TF32 off)");
    for (const auto& bad : {json("fp16"), json({{"policy", "strict"}, {"cudnn_tf32", false}})}) {
        try {
            parse(with(bad));
        } catch (const TaskError& e) {
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        }
    }
}

// The names are the table's, in the schema too (filled from KEVO_PRECISION_LIST at build time).
TEST_F(PrecisionTest, NamesComeFromTheTable) {
    std::vector<std::string> names;
    for (int k = 0; k < KEVO_PRECISION_COUNT; ++k) names.push_back(kevo_precision_name(k));
    EXPECT_EQ(schema_enum("/$defs/precision_policy"), names);
    EXPECT_EQ(precision_choices(), "pytorch, strict, tf32 or bf16");
    for (int k = 0; k < KEVO_PRECISION_COUNT; ++k) {
        EXPECT_EQ(kevo_precision_from_name(kevo_precision_name(k)), k);
        EXPECT_EQ(static_cast<int>(parse(with(names[k])).precision.policy), k) << names[k];
    }
    EXPECT_EQ(kevo_precision_from_name("PyTorch"), -1);
    EXPECT_EQ(std::string(kevo_precision_name(0)), "pytorch") << "the first is the default (CMake reads it so)";
}

}  // namespace
