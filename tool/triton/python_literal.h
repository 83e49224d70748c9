// The Python literal reader of a Triton candidate's launch description (launch.h): dicts, lists,
// tuples, strings, numbers, True/False/None, read without running Python. Below launch.cpp, which
// reads KEVO_LAUNCH through it; it calls nothing of launch.cpp.
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kevo::triton {

// A candidate's mistake in its launch description (not a setup problem): a compile_error for the
// validator.
struct LaunchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Parses a Python literal (dict, list, tuple, str, int, float, True/False/None; comments and
// trailing commas allowed) into JSON: tuples become arrays. Throws LaunchError with the line.
nlohmann::json parse_python_literal(const std::string& text);

// The value assigned to `name` at the top level of a Python file (`NAME = {...}`), parsed with
// parse_python_literal. Throws LaunchError when it is absent or not a literal.
nlohmann::json find_assignment(const std::string& source, const std::string& name);

}  // namespace kevo::triton
