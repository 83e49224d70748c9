// Checks of a task file that guard the rest of the tool against what a careless or hostile file
// may hold: JSON with a key given twice (which value counts?), a name too long to become a file
// name, a "flops" expression whose value is not a count of operations.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/expr.h"
#include "task/task.h"

namespace kevo {

// The longest task name: it becomes file names (NAME/sm_90.cu, NAME-sm_90-HASH.db,
// NAME-sm_90-batch-N.jsonl), which a file system limits to 255 bytes.
constexpr size_t kMaxTaskNameChars = 128;

// JSON text parsed as nlohmann does, except that an object with the same key twice is refused:
// throws std::runtime_error naming the key and where it is ("'atol' twice in 'tolerance'").
// Parse errors are nlohmann::json::parse_error as usual.
nlohmann::json parse_json_unique_keys(const std::string& text);

// A value or key of the file as an error quotes it: printable (a control character or NUL as \xNN)
// and at most 60 characters ("..." after). A 5 MB value is never echoed whole.
std::string shown_value(const std::string& text);
// A JSON value as an error quotes it, the same way (a string with its quotes).
std::string shown_json(const nlohmann::json& v);

// "" when `name` can name a task (a C identifier of at most kMaxTaskNameChars), else why not.
std::string task_name_problem(const std::string& name);

// "" when `flops` gives a finite, non-negative count in every shape set of `shapes` (or, with no
// shape sets, with no dimension bound), else why not, naming the set.
std::string flops_value_problem(const Expr& flops, const std::vector<ShapeSet>& shapes);

}  // namespace kevo
