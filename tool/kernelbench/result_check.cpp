// The importer's result line, checked field by field (internal/result_check.h).
#include "kernelbench/internal/result_check.h"

#include <set>
#include <stdexcept>
#include <utility>

namespace kevo::kernelbench {

namespace {

using nlohmann::json;

struct Malformed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string type_words(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "a list";
        case json::value_t::object: return "an object";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float: return "a number";
        default: return "of another kind";
    }
}

[[noreturn]] void wrong(const std::string& field, const json& v, const std::string& want) {
    throw Malformed(field + " is " + type_words(v) + ", not " + want);
}

bool plain(const json& v) { return v.is_null() || v.is_boolean() || v.is_number() || v.is_string(); }

void string_field(const std::string& f, const json& v) {
    if (!v.is_string()) wrong(f, v, "a string");
}
void number_field(const std::string& f, const json& v) {
    if (!v.is_number()) wrong(f, v, "a number");
}
void count_field(const std::string& f, const json& v) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) wrong(f, v, "a count");
}
void object_field(const std::string& f, const json& v) {
    if (!v.is_object()) wrong(f, v, "an object");
}
void strings_field(const std::string& f, const json& v) {
    if (!v.is_array()) wrong(f, v, "a list of strings");
    for (const auto& x : v)
        if (!x.is_string()) wrong(f + "[]", x, "a string");
}
void numbers_field(const std::string& f, const json& v) {
    if (!v.is_object()) wrong(f, v, "an object of numbers");
    for (const auto& [k, x] : v.items())
        if (!x.is_number()) wrong(f + "." + k, x, "a number");
}
// The sizes --max-numel shrank: a number or a list of numbers each.
void shrunk_field(const std::string& f, const json& v) {
    if (!v.is_object()) wrong(f, v, "an object");
    for (const auto& [k, x] : v.items()) {
        if (x.is_number()) continue;
        if (!x.is_array()) wrong(f + "." + k, x, "a number or a list of numbers");
        for (const auto& n : x)
            if (!n.is_number()) wrong(f + "." + k + "[]", n, "a number");
    }
}
// The self-check's figures: plain values or lists of them; the ones the import line shows, of their type.
void verify_field(const std::string& f, const json& v) {
    if (!v.is_object()) wrong(f, v, "an object");
    for (const auto& [k, x] : v.items()) {
        const std::string field = f + "." + k;
        if (k == "device" && !x.is_string()) wrong(field, x, "a string");
        if (k == "max_abs_diff" && !x.is_number() && !x.is_null()) wrong(field, x, "a number");
        if (k == "ok" && !x.is_boolean()) wrong(field, x, "a boolean");
        if (x.is_array()) {
            for (const auto& e : x)
                if (!plain(e)) wrong(field + "[]", e, "a plain value");
        } else if (!plain(x)) {
            wrong(field, x, "a plain value or a list of them");
        }
    }
}
void flops_field(const std::string& f, const json& v) {
    if (!v.is_object()) wrong(f, v, "an object");
    if (v.contains("total")) number_field(f + ".total", v["total"]);
    if (v.contains("by_kind")) numbers_field(f + ".by_kind", v["by_kind"]);
    for (const auto& [k, x] : v.items())
        if (k != "total" && k != "by_kind") wrong(f + "." + k, x, "a field of flops (total, by_kind)");
}

using Check = void (*)(const std::string&, const json&);
const std::pair<const char*, Check> kFields[] = {
    {"status", string_field},   {"reason", string_field},   {"trace", string_field},  {"kind", string_field},
    {"plan", string_field},     {"seconds", number_field},  {"inputs", count_field},  {"parameters", count_field},
    {"outputs", count_field},   {"notes", strings_field},   {"phases", numbers_field}, {"shrunk", shrunk_field},
    {"verify", verify_field},   {"flops", flops_field},     {"task_json", object_field},
    {"shrunk_numel", numbers_field},  // the inputs' and the parameters' elements once shrunk, and the limit
};

}  // namespace

json checked_result(const json& raw, const std::string& src) {
    try {
        if (!raw.is_object()) wrong("the result", raw, "an object");
        json j = json::object();
        for (const auto& [key, check] : kFields) {
            if (!raw.contains(key)) continue;
            check(key, raw[key]);
            j[key] = raw[key];
        }
        static const std::set<std::string> statuses = {"ok", "refused", "failed"};
        if (!j.contains("status") || !statuses.count(j["status"].get<std::string>()))
            throw Malformed("it has no valid status (ok, refused or failed)");
        j["source"] = src;
        return j;
    } catch (const Malformed& e) {
        return {{"source", src},
                {"status", "failed"},
                {"reason", std::string("the importer's result is malformed: ") + e.what()}};
    }
}

}  // namespace kevo::kernelbench
