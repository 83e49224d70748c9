// The task file's JSON Schema (tool/task/task.schema.json.in, its dtype and init-kind enums filled
// from KEVO_DTYPE_LIST and KEVO_INIT_KIND_LIST at build time), embedded in the binary and installed
// as share/kernelevo/task.schema.json. The parser takes the field names it accepts and the enum
// values it suggests from here, so the published schema and the parser cannot disagree.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kevo {

// The schema's text, as installed.
std::string_view task_schema_text();
// The parsed schema (ordered as written).
const nlohmann::ordered_json& task_schema();

// The property names of the schema object at `pointer` (a JSON pointer into the schema, e.g.
// "/$defs/input" or "" for the root), in the schema's order.
std::vector<std::string> schema_fields(const std::string& pointer);
// The "enum" values at `pointer` (e.g. "/$defs/dtype").
std::vector<std::string> schema_enum(const std::string& pointer);
// The properties that object requires.
std::vector<std::string> schema_required(const std::string& pointer);

}  // namespace kevo
