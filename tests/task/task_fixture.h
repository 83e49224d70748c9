// Shared by the tests that parse task files (task_test, sol_test): a temporary directory holding a
// reference, the issue's gelu_bias task as JSON, and the parser's error assertion.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "common/fs.h"
#include "task/task.h"

namespace kevo::tasktest {

class TaskFileTest : public ::testing::Test {
protected:
    TempDir dir{"kevo-task-test"};
    fs::path file() const { return dir.path() / "t.json"; }
    void SetUp() override { write_file_atomic(dir.path() / "ref.cpp", "// reference\n"); }
    // The issue's example: y = gelu(x + bias) over the given shape sets.
    static nlohmann::json gelu_bias(const nlohmann::json& shapes) {
        nlohmann::json j = nlohmann::json::parse(R"({
          "name": "gelu_bias",
          "reference": {"source": "ref.cpp", "function": "gelu_bias"},
          "inputs":  [{"name": "x", "dtype": "float32", "shape": ["M", "N"]},
                      {"name": "bias", "dtype": "float32", "shape": ["N"]}],
          "outputs": [{"name": "y", "dtype": "float32", "shape": ["M", "N"]}]
        })");
        j["shapes"] = shapes;
        return j;
    }
    Task parse(const nlohmann::json& j) const { return parse_task(j, file()); }
    // Asserts that parsing fails with a message naming the file and `field`, containing `text`.
    void expect_error(const nlohmann::json& j, const std::string& field, const std::string& text) const {
        try {
            parse(j);
            ADD_FAILURE() << "no error for field " << field;
        } catch (const TaskError& e) {
            EXPECT_EQ(e.field(), field) << e.what();
            EXPECT_EQ(e.file(), file().string());
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
            EXPECT_EQ(std::string(e.what()).rfind(file().string() + ": " + field, 0), 0u) << e.what();
        }
    }
};

}  // namespace kevo::tasktest
