// The task file's JSON Schema (tool/task/task.schema.json.in): its enums are the one tables', every
// task file in the repository follows it, the installed copy is the embedded one, and the parser's
// did-you-mean on field names and enum values comes from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <regex>
#include <set>

#include "common/fs.h"
#include "kernelevo/abi.h"
#include "task/init_kind.h"
#include "task/schema.h"
#include "task/task.h"
#include "task_fixture.h"

using namespace kevo;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

class SchemaTest : public tasktest::TaskFileTest {
protected:
    json base() const { return gelu_bias({{{"M", 64}, {"N", 32}}}); }
};

// A small validator for the keywords task.schema.json uses ($ref, type, enum, const, required,
// properties, additionalProperties, items, oneOf, minItems/maxItems, minimum/maximum,
// exclusiveMinimum, minLength, pattern). Returns the first violation ("" when `v` is valid), so that a test
// failure says where. Enough to keep the schema honest without a validator library.
std::string check(const ojson& s, const json& v, const std::string& at);

const ojson& resolve(const ojson& s) {
    if (!s.contains("$ref")) return s;
    std::string ref = s.at("$ref").get<std::string>();  // "#/$defs/..."
    return resolve(task_schema().at(ojson::json_pointer(ref.substr(1))));
}

bool has_type(const json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    return false;
}

std::string check(const ojson& schema, const json& v, const std::string& at) {
    const ojson& s = resolve(schema);
    if (s.contains("type") && !has_type(v, s.at("type").get<std::string>())) return at + ": not of type " + s.at("type").dump();
    if (s.contains("enum")) {
        bool found = false;
        for (const auto& e : s.at("enum")) found = found || json::parse(e.dump()) == v;
        if (!found) return at + ": " + v.dump() + " is not one of " + s.at("enum").dump();
    }
    if (s.contains("const") && json::parse(s.at("const").dump()) != v) return at + ": not " + s.at("const").dump();
    if (s.contains("oneOf")) {
        int matches = 0;
        for (const auto& alt : s.at("oneOf")) matches += check(alt, v, at).empty();
        if (matches != 1) return at + ": matches " + std::to_string(matches) + " of oneOf";
    }
    if (v.is_number()) {
        double x = v.get<double>();
        if (s.contains("minimum") && x < s.at("minimum").get<double>()) return at + ": below minimum";
        if (s.contains("maximum") && x > s.at("maximum").get<double>()) return at + ": above maximum";
        if (s.contains("exclusiveMinimum") && !(x > s.at("exclusiveMinimum").get<double>())) return at + ": not above exclusiveMinimum";
    }
    if (v.is_string() && s.contains("minLength") && v.get<std::string>().size() < s.at("minLength").get<size_t>())
        return at + ": too short";
    if (v.is_string() && s.contains("pattern") && !std::regex_search(v.get<std::string>(), std::regex(s.at("pattern").get<std::string>())))
        return at + ": does not match " + s.at("pattern").get<std::string>();
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s.at("minItems").get<size_t>()) return at + ": too few items";
        if (s.contains("maxItems") && v.size() > s.at("maxItems").get<size_t>()) return at + ": too many items";
        if (s.contains("items"))
            for (size_t i = 0; i < v.size(); ++i)
                if (auto e = check(s.at("items"), v[i], at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
    }
    if (v.is_object()) {
        if (s.contains("required"))
            for (const auto& r : s.at("required"))
                if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.get<std::string>();
        for (auto it = v.begin(); it != v.end(); ++it) {
            const std::string here = at + "." + it.key();
            if (s.contains("properties") && s.at("properties").contains(it.key())) {
                if (auto e = check(s.at("properties").at(it.key()), it.value(), here); !e.empty()) return e;
            } else if (s.contains("additionalProperties")) {
                const auto& extra = s.at("additionalProperties");
                if (extra.is_boolean() && !extra.get<bool>()) return here + ": unknown field";
                if (extra.is_object())
                    if (auto e = check(extra, it.value(), here); !e.empty()) return e;
            }
        }
    }
    return "";
}

std::string validate(const json& task) { return check(task_schema(), task, "task"); }

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

}  // namespace

// The schema's dtype and init-kind enums are the tables' (generated from them at build time): every
// name and alias the parser accepts, nothing else.
TEST(TaskSchema, EnumsAreTheOneTables) {
    std::set<std::string> dtypes;
#define KEVO_TEST_DTYPE_(e, v, n, sz, fl, at) dtypes.insert(n);
    KEVO_DTYPE_LIST(KEVO_TEST_DTYPE_)
#undef KEVO_TEST_DTYPE_
#define KEVO_TEST_ALIAS_(alias, e) dtypes.insert(alias);
    KEVO_DTYPE_ALIAS_LIST(KEVO_TEST_ALIAS_)
#undef KEVO_TEST_ALIAS_
    EXPECT_EQ(as_set(schema_enum("/$defs/dtype")), dtypes);
    for (const auto& d : dtypes) EXPECT_TRUE(parse_dtype(d).has_value()) << d;
    std::set<std::string> kinds;
    for (int k = 0; k < KEVO_INIT_COUNT; ++k) kinds.insert(kevo_init_kind_name(k));
    EXPECT_EQ(as_set(schema_enum("/$defs/init_kind")), kinds);
}

TEST(TaskSchema, IsDraft2020AndTheInstalledCopyIsTheEmbeddedOne) {
    EXPECT_EQ(task_schema().at("$schema"), "https://json-schema.org/draft/2020-12/schema");
    EXPECT_EQ(as_set(schema_required("")), (std::set<std::string>{"name", "reference", "inputs", "outputs"}));
    // What `cmake --install` copies to share/kernelevo/task.schema.json.
    const fs::path built = fs::path(KEVO_BINARY_DIR) / "share" / "kernelevo" / "task.schema.json";
    ASSERT_TRUE(fs::is_regular_file(built)) << built;
    EXPECT_EQ(read_file(built), std::string(task_schema_text()));
    // Every property has a type, an enum, a $ref or alternatives, and every $ref resolves.
    std::function<void(const ojson&, const std::string&)> walk = [&](const ojson& s, const std::string& at) {
        if (s.is_object()) {
            if (s.contains("$ref")) EXPECT_NO_THROW(resolve(s)) << at;
            for (const auto& [k, v] : s.items()) walk(v, at + "/" + k);
        } else if (s.is_array()) {
            for (const auto& v : s) walk(v, at + "[]");
        }
    };
    walk(task_schema(), "");
}

// Every task file in the repository follows the schema, and the parser accepts it.
TEST(TaskSchema, EveryTaskFileInTheRepositoryValidates) {
    int n = 0;
    for (const fs::path root : {fs::path(KEVO_TEST_DATA_DIR), fs::path(KEVO_SOURCE_DIR) / "examples"}) {
        for (const auto& e : fs::recursive_directory_iterator(root)) {
            if (e.path().extension() != ".json" || !e.is_regular_file()) continue;
            json j;
            try {
                j = json::parse(read_file(e.path()));
            } catch (const std::exception&) {
                continue;  // not JSON (a test's broken file on purpose)
            }
            if (!j.is_object() || !j.contains("reference") || !j.contains("inputs")) continue;  // not a task file
            ++n;
            EXPECT_EQ(validate(j), "") << e.path();
            EXPECT_NO_THROW(parse_task(j, e.path())) << e.path();
        }
    }
    EXPECT_GE(n, 7);
}

// The validator above is not vacuous: what the parser refuses for its shape, it refuses too.
TEST_F(SchemaTest, TheValidatorRejectsWhatTheParserRejects) {
    EXPECT_EQ(validate(base()), "");
    json j = base(); j["tolerence"] = 1e-3;                EXPECT_NE(validate(j), "");
    j = base(); j["inputs"][0]["dtype"] = "flaot32";       EXPECT_NE(validate(j), "");
    j = base(); j["inputs"][0]["init"] = "gaussian";       EXPECT_NE(validate(j), "");
    j = base(); j.erase("outputs");                        EXPECT_NE(validate(j), "");
    j = base(); j["trials"] = 0;                           EXPECT_NE(validate(j), "");
    j = base(); j["inputs"][0]["shape"][0] = "a-b";        EXPECT_NE(validate(j), "");
    j = base(); j["outputs"][0]["init"] = "ones";          EXPECT_NE(validate(j), "");
    j = base(); j["$schema"] = "share/kernelevo/task.schema.json"; EXPECT_EQ(validate(j), "");
}

// A mistyped field name or enum value gets the CLI's did-you-mean, not a list.
TEST_F(SchemaTest, TyposGetDidYouMean) {
    json j = base(); j["tolerence"] = 1e-3;
    expect_error(j, "tolerence", "unknown field 'tolerence'; did you mean 'tolerance'?");
    j = base(); j["inputs"][0]["dtyp"] = "float32";
    expect_error(j, "inputs[0].dtyp", "unknown field 'dtyp'; did you mean 'dtype'?");
    j = base(); j["reference"]["sigature"] = "vector";
    expect_error(j, "reference.sigature", "did you mean 'signature'?");
    j = base(); j["inputs"][0]["dtype"] = "flaot32";
    expect_error(j, "inputs[0].dtype", "unknown dtype 'flaot32'; did you mean 'float32'?");
    j = base(); j["inputs"][0]["init"] = "randm";
    expect_error(j, "inputs[0].init.kind", "unknown init 'randm'; did you mean 'randn'?");
    j = base(); j["inputs"][0]["init"] = {{"kind", "rand"}, {"hihg", 2}};
    expect_error(j, "inputs[0].init.hihg", "did you mean 'high'?");
    j = base(); j["reference"]["signature"] = "vectr";
    expect_error(j, "reference.signature", "unknown signature 'vectr'; did you mean 'vector'?");
    j = base(); j["tolerance"] = {{"atoll", 1e-3}};
    expect_error(j, "tolerance.atoll", "did you mean 'atol'?");
    j = base(); j["timing"] = {{"weight", {1}}};
    expect_error(j, "timing.weight", "did you mean 'weights'?");
    // Nothing close: the list of what is accepted, from the schema.
    j = base(); j["colour"] = "red";
    expect_error(j, "colour", "unknown field 'colour' (expected one of: $schema, name, description, reference");
}

// "$schema" lets editors validate a task file; the parser ignores it (same task, same hash).
TEST_F(SchemaTest, DollarSchemaIsAcceptedAndIgnored) {
    json j = base();
    const std::string plain = parse(j).hash();
    j["$schema"] = "https://kernelevo.dev/schemas/task.schema.json";
    Task t = parse(j);
    EXPECT_EQ(t.hash(), plain);
    EXPECT_FALSE(t.to_json().contains("$schema"));
}

// "precision": a policy name or {"policy", "cudnn_tf32", "matmul_tf32"}; the schema and the parser
// accept the same forms.
TEST_F(SchemaTest, PrecisionFormsValidateAsTheParserAcceptsThem) {
    for (const json& ok : {json("pytorch"), json("strict"), json("tf32"), json("bf16"),
                           json{{"policy", "pytorch"}, {"matmul_tf32", true}, {"cudnn_tf32", false}}}) {
        json j = base();
        j["precision"] = ok;
        EXPECT_EQ(validate(j), "") << ok;
        EXPECT_NO_THROW(parse(j)) << ok;
    }
    for (const json& bad : {json("fp16"), json(1), json{{"matmul_tf32", true}}, json{{"policy", "pytorch"}, {"tf32", true}},
                            json{{"policy", "pytorch"}, {"matmul_tf32", 1}}}) {
        json j = base();
        j["precision"] = bad;
        EXPECT_NE(validate(j), "") << bad;
        EXPECT_THROW(parse(j), TaskError) << bad;
    }
}
