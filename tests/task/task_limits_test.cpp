// Task files a careless or hostile author may write: a "flops" expression nested deep enough to
// overflow the parser's stack, flops that are not a count (M/0, negative), a name too long for a
// file name, a key given twice. Each is refused at load with one line naming the file and field.
#include <gtest/gtest.h>

#include <string>

#include "task/expr.h"
#include "task/task_checks.h"
#include "task_fixture.h"

namespace kevo::tasktest {
namespace {

class TaskLimits : public TaskFileTest {
protected:
    nlohmann::json with_flops(const std::string& flops) const {
        nlohmann::json j = gelu_bias(nlohmann::json::array({{{"M", 4}, {"N", 8}}, {{"M", 16}, {"N", 1}}}));
        j["flops"] = flops;
        return j;
    }
    // Loads `text` as the task file (the path every command takes: cache hash, validate, search).
    std::string load_error(const std::string& text) const {
        write_file_atomic(file(), text);
        try {
            load_task(file());
        } catch (const TaskError& e) {
            return e.what();
        }
        return "(loaded)";
    }
};

TEST_F(TaskLimits, AFlopsExpressionNestedTwentyThousandDeepIsRefusedNotAStackOverflow) {
    const int n = 20000;
    for (const std::string& deep : {std::string(n, '(') + "M" + std::string(n, ')'), std::string(n, '-') + "M",
                                    [&] { std::string s = "M"; for (int i = 0; i < n / 2; ++i) s += "^M"; return s; }()}) {
        const std::string why = load_error(with_flops(deep).dump());
        EXPECT_NE(why.find(file().string() + ": flops: "), std::string::npos) << why.substr(0, 300);
        EXPECT_LT(why.size(), 400u) << "the message quotes the whole expression";
    }
    // 40 KB of parentheses is over the length bound; within it, the depth bound speaks.
    EXPECT_NE(load_error(with_flops(std::string(n, '(') + "M" + std::string(n, ')')).dump()).find("at most 4096"),
              std::string::npos);
    const std::string nested = std::string(200, '(') + "M" + std::string(200, ')');
    EXPECT_NE(load_error(with_flops(nested).dump()).find("nested more than 64 levels deep"), std::string::npos);
    EXPECT_NE(load_error(with_flops(std::string(100, '-') + "M").dump()).find("nested more than 64"), std::string::npos);
    // What a real task writes still reads, also nested a little.
    EXPECT_EQ(load_error(with_flops("2*((M*N) + (-(-N))^2)").dump()), "(loaded)");
    EXPECT_DOUBLE_EQ(parse_expr(std::string(60, '(') + "M" + std::string(60, ')')).eval({{"M", 3}}), 3);
}

TEST_F(TaskLimits, FlopsThatAreNotACountOfOperationsAreRefusedForTheGivenShapes) {
    expect_error(with_flops("M/0"), "flops", "is inf in shapes[0]; flops must be a finite count of operations, 0 or more");
    expect_error(with_flops("-M*N"), "flops", "is -32 in shapes[0]");
    expect_error(with_flops("M/(N-1)"), "flops", "is inf in shapes[1]");  // 16/0 in the second set only
    expect_error(with_flops("0/0*M"), "flops", "is not a number in shapes[0]");
    expect_error(with_flops("2^M^N^M"), "flops", "is inf");
    EXPECT_EQ(parse(with_flops("0*M")).flops, "0*M");  // zero is a count
    EXPECT_EQ(parse(with_flops("M*N - 1 + 1")).flops, "M*N - 1 + 1");
}

TEST_F(TaskLimits, ATaskNameTooLongForAFileNameIsRefusedAtLoad) {
    nlohmann::json j = gelu_bias(nlohmann::json::array({{{"M", 4}, {"N", 8}}}));
    j["name"] = std::string(300, 'a');
    expect_error(j, "name", "has 300 characters; a task name has at most 128 (letters, digits and _, not starting with a digit)");
    j["name"] = std::string(kMaxTaskNameChars, 'a');
    j["reference"]["function"] = "f";
    EXPECT_EQ(parse(j).name.size(), kMaxTaskNameChars);
    j["name"] = "gelu-bias";
    expect_error(j, "name", "'gelu-bias' is not a C identifier");
}

TEST_F(TaskLimits, AKeyGivenTwiceIsRefusedWhereverItIs) {
    const std::string shapes = R"("shapes": [{"M": 4, "N": 8}])";
    const std::string head = R"({"name": "gelu_bias", "reference": {"source": "ref.cpp", "function": "gelu_bias"},)";
    const std::string io = R"("inputs": [{"name": "x", "dtype": "float32", "shape": ["M", "N"]},
                                         {"name": "bias", "dtype": "float32", "shape": ["N"]}],
                              "outputs": [{"name": "y", "dtype": "float32", "shape": ["M", "N"]}],)";
    EXPECT_EQ(load_error(head + io + shapes + "}"), "(loaded)");
    EXPECT_EQ(load_error(head + io + R"("tolerance": {"atol": 1e-4, "atol": 1e-1},)" + shapes + "}"),
              file().string() + ": the key 'atol' is given twice in 'tolerance' (which one counts is not clear: give it once)");
    EXPECT_NE(load_error(head + io + R"("tolerance": 1e-4, "tolerance": 1,)" + shapes + "}").find("the key 'tolerance' is given twice at the top level"),
              std::string::npos);
    const std::string twice_in_input = R"("inputs": [{"name": "x", "dtype": "float32", "shape": ["M", "N"]},
                                         {"name": "bias", "dtype": "float32", "dtype": "float16", "shape": ["N"]}],
                              "outputs": [{"name": "y", "dtype": "float32", "shape": ["M", "N"]}],)";
    EXPECT_NE(load_error(head + twice_in_input + shapes + "}").find("the key 'dtype' is given twice in 'inputs[]'"), std::string::npos);
    EXPECT_NE(load_error(head + io + R"("shapes": [{"M": 4, "N": 8, "M": 5}]})").find("'M' is given twice in 'shapes[]'"),
              std::string::npos);
    // The same key in two objects is no duplicate.
    EXPECT_EQ(parse_json_unique_keys(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})").size(), 3u);
}

}  // namespace
}  // namespace kevo::tasktest
