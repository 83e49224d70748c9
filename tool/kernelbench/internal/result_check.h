// The importer's result line for one problem, as the tool keeps it (kernelbench.cpp): it comes from
// the sandbox, so every field the tool reads or reports is checked for its type first.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kevo::kernelbench {

// The result `raw` for the problem `src`, holding only the fields the importer writes, each of its
// type: status (ok, refused or failed), reason, trace, kind and plan strings, seconds a number, verify
// an object of plain values (device a string, max_abs_diff a number), counts whole numbers, notes a
// list of strings, flops, phases and shrunk objects of numbers, task_json an object (install.h checks
// it). Anything else is left out (the tolerance is the installed task's). A field of another type
// makes the problem "failed", its reason naming the field: "the importer's result is malformed:
// verify.device is a number, not a string"; the other problems of the import go on.
nlohmann::json checked_result(const nlohmann::json& raw, const std::string& src);

}  // namespace kevo::kernelbench
