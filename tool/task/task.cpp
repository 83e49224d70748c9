#include "task/task.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "task/expr.h"
#include "common/process.h"
#include "common/suggest.h"
#include "task/init_kind.h"
#include "task/schema.h"
#include "task/task_checks.h"

namespace kevo {

namespace {

// A list of names for messages: "a, b or c".
template <class NameOf>
std::string choices(int count, NameOf name_of) {
    std::string out;
    for (int k = 0; k < count; ++k) out += std::string(k == 0 ? "" : k + 1 == count ? " or " : ", ") + name_of(k);
    return out;
}

bool is_identifier(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
}

class Parser {
public:
    explicit Parser(std::string file) : file_(std::move(file)) {}
    [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
        throw TaskError(file_, shown_value(field), msg);
    }

    const nlohmann::json& require(const nlohmann::json& obj, const std::string& key, const std::string& path) const {
        if (!obj.contains(key)) fail(path.empty() ? key : path + "." + key, "missing (required)");
        return obj.at(key);
    }
    std::string string_at(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_string()) fail(field, "expected a string, got " + std::string(v.type_name()));
        // A NUL would cut the text where C strings read it ("M\u0000..." read as "M").
        if (v.get_ref<const std::string&>().find('\0') != std::string::npos)
            fail(field, "a string with a NUL character (" + shown_json(v) + ")");
        return v.get<std::string>();
    }
    double number_at(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_number()) fail(field, "expected a number, got " + std::string(v.type_name()));
        return v.get<double>();
    }
    int64_t int_at(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_number_integer()) fail(field, "expected an integer, got " + shown_json(v));
        return v.get<int64_t>();
    }
    // Every field of `obj` must be a property of the schema object at `schema` (a JSON pointer
    // into task.schema.json): the one list of what task.json may hold.
    void only_keys(const nlohmann::json& obj, const std::string& path, const std::string& schema) const {
        const std::vector<std::string> known = schema_fields(schema);
        for (auto it = obj.begin(); it != obj.end(); ++it)
            if (std::find(known.begin(), known.end(), it.key()) == known.end())
                fail(path.empty() ? it.key() : path + "." + it.key(), unknown("field", it.key(), known));
    }
    // A value that must be one of the schema's enum at `schema`.
    void one_of(const std::string& value, const std::string& field, const char* what, const std::string& schema) const {
        const std::vector<std::string> names = schema_enum(schema);
        if (std::find(names.begin(), names.end(), value) == names.end()) fail(field, unknown(what, value, names));
    }
    // "unknown field 'tolerence'; did you mean 'tolerance'?", or the list when nothing is close.
    static std::string unknown(const std::string& what, const std::string& word, const std::vector<std::string>& names) {
        std::string msg = "unknown " + what + " '" + shown_value(word) + "'";
        auto near = closest(word, names);
        if (!near.empty()) return msg + "; did you mean '" + near.front() + "'?";
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        return msg + " (expected one of: " + list + ")";
    }

    Init parse_init(const nlohmann::json& v, const std::string& field, DType dtype, const std::filesystem::path& base) const {
        Init init;
        if (!is_floating(dtype)) {
            init.kind = kevo_init_kind_name(KEVO_INIT_RANDINT);
            init.a = dtype == DType::BOOL ? 0 : (dtype == DType::UINT8 ? 0 : -100);
            init.b = dtype == DType::BOOL ? 2 : 100;
        }
        if (v.is_null()) return init;
        nlohmann::json o = v;
        if (v.is_string()) o = nlohmann::json{{"kind", v}};
        if (!o.is_object()) fail(field, "expected a string or an object such as {\"kind\": \"rand\", \"low\": 0, \"high\": 1}");
        only_keys(o, field, "/$defs/init");
        init.kind = string_at(require(o, "kind", field), field + ".kind");
        one_of(init.kind, field + ".kind", "init", "/$defs/init_kind");
        if (init.kind != "file" && o.contains("path")) fail(field + ".path", "only the file init takes a path");
        if (init.kind != "file" && o.contains("parameter")) fail(field + ".parameter", "only a file init can be a parameter");
        const std::string& k = init.kind;
        auto num = [&](const char* key, double def) {
            return o.contains(key) ? number_at(o.at(key), field + "." + key) : def;
        };
        const int kind = kevo_init_kind_from_name(k.c_str());
        switch (kind) {
            case KEVO_INIT_RANDN:
                if (!is_floating(dtype)) fail(field + ".kind", "randn needs a floating dtype; use randint for " + std::string(dtype_name(dtype)));
                init.a = num("mean", 0);
                init.b = num("std", 1);
                if (!(init.b > 0)) fail(field + ".std", "must be > 0");
                break;
            case KEVO_INIT_RAND:
            case KEVO_INIT_RANDINT:
                if (kind == KEVO_INIT_RAND && !is_floating(dtype)) fail(field + ".kind", "rand needs a floating dtype; use randint for " + std::string(dtype_name(dtype)));
                init.a = num("low", kind == KEVO_INIT_RAND ? 0 : init.a);
                init.b = num("high", kind == KEVO_INIT_RAND ? 1 : init.b);
                if (!(init.b > init.a)) fail(field + ".high", "must be greater than low");
                if (kind == KEVO_INIT_RANDINT && (init.a != std::floor(init.a) || init.b != std::floor(init.b)))
                    fail(field, "randint bounds must be integers");
                break;
            case KEVO_INIT_ONES:
            case KEVO_INIT_ZEROS:
            case KEVO_INIT_ARANGE: break;
            case KEVO_INIT_FULL: init.a = number_at(require(o, "value", field), field + ".value"); break;
            case KEVO_INIT_FILE: {
                init.path = string_at(require(o, "path", field), field + ".path");
                if (init.path.empty()) fail(field + ".path", "empty path");
                std::filesystem::path f(init.path);
                if (f.is_relative()) f = base / f;
                init.file = f.lexically_normal();
                std::error_code ec;
                if (!std::filesystem::is_regular_file(init.file, ec)) fail(field + ".path", "file not found: " + init.file.string());
                init.file_sha256 = sha256_file(init.file);
                if (o.contains("parameter")) {
                    if (!o.at("parameter").is_boolean()) fail(field + ".parameter", "expected true or false");
                    init.parameter = o.at("parameter").get<bool>();
                }
                break;
            }
            default:
                fail(field + ".kind", "unknown init '" + k + "' (expected " + choices(KEVO_INIT_COUNT, kevo_init_kind_name) + ")");
        }
        return init;
    }

    TensorSpec parse_tensor(const nlohmann::json& v, const std::string& path, bool is_input,
                            const std::filesystem::path& base) const {
        if (!v.is_object()) fail(path, "expected an object with name, dtype and shape");
        only_keys(v, path, is_input ? "/$defs/input" : "/$defs/output");
        TensorSpec t;
        t.name = string_at(require(v, "name", path), path + ".name");
        if (!is_identifier(t.name)) fail(path + ".name", "'" + shown_value(t.name) + "' is not a C identifier");
        std::string dt = string_at(require(v, "dtype", path), path + ".dtype");
        auto d = parse_dtype(dt);  // the names of the schema's dtype enum (tests/task/schema_test)
        if (!d) fail(path + ".dtype", unknown("dtype", dt, schema_enum("/$defs/dtype")));
        t.dtype = *d;
        const auto& shape = require(v, "shape", path);
        if (!shape.is_array()) fail(path + ".shape", "expected an array of integers and names, e.g. [\"M\", 128]");
        if (shape.size() > 8) fail(path + ".shape", "at most 8 dimensions (the kernel ABI's limit)");
        for (size_t i = 0; i < shape.size(); ++i) {
            std::string f = path + ".shape[" + std::to_string(i) + "]";
            Dim dim;
            if (shape[i].is_string()) {
                dim.symbol = shape[i].get<std::string>();
                if (!is_identifier(dim.symbol))
                    fail(f, "'" + shown_value(dim.symbol) + "' is not a valid dimension name");
            } else if (shape[i].is_number_integer()) {
                dim.value = shape[i].get<int64_t>();
                if (dim.value <= 0) fail(f, "sizes must be positive");
            } else {
                fail(f, "expected an integer or a dimension name, got " + shown_json(shape[i]));
            }
            t.shape.push_back(dim);
        }
        if (is_input) t.init = parse_init(v.contains("init") ? v.at("init") : nlohmann::json(), path + ".init", t.dtype, base);
        return t;
    }

private:
    std::string file_;
};

std::string join_names(const std::set<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

// "timing": {"shapes": "all" | [ascending indices], "weights": [one positive number per timed set]}.
// The canonical form leaves out what is the default: every set, weight 1.
void parse_timing(const Parser& p, const nlohmann::json& v, Task& t) {
    if (!v.is_object()) p.fail("timing", "expected an object such as {\"shapes\": [0, 2], \"weights\": [2, 1]}");
    p.only_keys(v, "timing", "/$defs/timing");
    const int n = static_cast<int>(t.shapes.size());
    if (v.contains("shapes")) {
        const auto& s = v.at("shapes");
        if (s.is_string() && s.get<std::string>() == "all") {
        } else if (s.is_array() && !s.empty()) {
            for (size_t i = 0; i < s.size(); ++i) {
                std::string f = "timing.shapes[" + std::to_string(i) + "]";
                int64_t k = p.int_at(s[i], f);
                if (k < 0 || k >= n)
                    p.fail(f, "no shape set " + std::to_string(k) + " (the task has " + std::to_string(n) + ", numbered from 0)");
                if (!t.timing_sets.empty() && k <= t.timing_sets.back())
                    p.fail(f, "list shape sets once each, in ascending order");
                t.timing_sets.push_back(static_cast<int>(k));
            }
            if (static_cast<int>(t.timing_sets.size()) == n) t.timing_sets.clear();  // that is "all"
        } else {
            p.fail("timing.shapes", "expected \"all\" or a non-empty array of shape-set indices, e.g. [0, 2]");
        }
    }
    if (v.contains("weights")) {
        const auto& w = v.at("weights");
        size_t timed = t.timing_sets.empty() ? static_cast<size_t>(n) : t.timing_sets.size();
        if (!w.is_array() || w.size() != timed)
            p.fail("timing.weights", "expected an array of " + std::to_string(timed) + " positive numbers (one per timed shape set)");
        for (size_t i = 0; i < w.size(); ++i) {
            std::string f = "timing.weights[" + std::to_string(i) + "]";
            double x = p.number_at(w[i], f);
            if (!(x > 0) || !std::isfinite(x)) p.fail(f, "must be a positive number");
            t.timing_weights.push_back(x);
        }
        if (std::all_of(t.timing_weights.begin(), t.timing_weights.end(), [](double x) { return x == 1.0; }))
            t.timing_weights.clear();
    }
}

}  // namespace

const char* dtype_name(DType d) { return kevo_dtype_name(static_cast<int32_t>(d)); }
int dtype_size(DType d) { return kevo_dtype_size(static_cast<int32_t>(d)); }
bool is_floating(DType d) { return kevo_dtype_is_floating(static_cast<int32_t>(d)) != 0; }
int dtype_abi(DType d) { return static_cast<int>(d); }

std::string dtype_choices() {
    return choices(KEVO_DTYPE_COUNT, [](int k) { return kevo_dtype_name(k); });
}

std::optional<DType> parse_dtype(const std::string& name) {
    const int32_t d = kevo_dtype_from_name(name.c_str());
    if (d < 0) return std::nullopt;
    return static_cast<DType>(d);
}

std::vector<int64_t> Task::concrete_shape(const TensorSpec& t, size_t set) const {
    std::vector<int64_t> out;
    for (const auto& d : t.shape) out.push_back(d.symbol.empty() ? d.value : shapes.at(set).at(d.symbol));
    return out;
}

int64_t Task::bytes(const TensorSpec& t, size_t set) const {
    int64_t n = dtype_size(t.dtype);
    for (int64_t v : concrete_shape(t, set)) n *= v;
    return n;
}

nlohmann::json Task::to_json() const {
    auto tensor = [](const TensorSpec& t, bool with_init) {
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : t.shape) shape.push_back(d.symbol.empty() ? nlohmann::json(d.value) : nlohmann::json(d.symbol));
        nlohmann::json j{{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", shape}};
        if (with_init) {
            nlohmann::json init{{"kind", t.init.kind}};
            const kevo_init_kind kind = t.init.id();
            if (kind == KEVO_INIT_RANDN) init["mean"] = t.init.a, init["std"] = t.init.b;
            if (kind == KEVO_INIT_RAND || kind == KEVO_INIT_RANDINT) init["low"] = t.init.a, init["high"] = t.init.b;
            if (kind == KEVO_INIT_FULL) init["value"] = t.init.a;
            if (kind == KEVO_INIT_FILE) init["path"] = t.init.path;
            if (kind == KEVO_INIT_FILE && t.init.parameter) init["parameter"] = true;  // absent: old hashes stay
            j["init"] = init;
        }
        return j;
    };
    nlohmann::json j;
    j["name"] = name;
    std::string ref = reference_source.string();
    if (!file.empty()) {
        std::error_code ec;
        auto rel = std::filesystem::relative(reference_source, std::filesystem::absolute(file).parent_path(), ec);
        if (!ec && !rel.empty()) ref = rel.generic_string();
    }
    j["reference"] = {{"source", ref}, {"function", reference_function}};
    // Written only when not the default, so that the canonical JSON (and the hash CMake computes
    // over it) of a plain task stays as it was.
    if (reference_signature != "tensors") j["reference"]["signature"] = reference_signature;
    if (!reference_setup.empty()) j["reference"]["setup"] = reference_setup;
    if (!reference_arg_written.empty()) j["reference"]["arg"] = reference_arg_written;
    for (const auto& f : reference_show)
        j["reference"]["show"].push_back({{"file", f.written}, {"language", f.language}, {"title", f.title}});
    j["inputs"] = nlohmann::json::array();
    for (const auto& t : inputs) j["inputs"].push_back(tensor(t, true));
    j["outputs"] = nlohmann::json::array();
    for (const auto& t : outputs) j["outputs"].push_back(tensor(t, false));
    j["shapes"] = shapes;
    j["tolerance"] = {{"atol", atol}, {"rtol", rtol}};
    if (!tolerance_policy.empty()) j["tolerance"]["policy"] = tolerance_policy;
    j["trials"] = correctness_trials;
    // Written only when given, so that tasks without them keep their hash (cmake/KernelEvo.cmake
    // computes the same canonical JSON and writes neither).
    if (!timing_sets.empty() || !timing_weights.empty()) {
        nlohmann::json timing;
        timing["shapes"] = timing_sets.empty() ? nlohmann::json("all") : nlohmann::json(timing_sets);
        if (!timing_weights.empty()) timing["weights"] = timing_weights;
        j["timing"] = timing;
    }
    if (!flops.empty()) j["flops"] = flops;
    if (!precision.is_default()) j["precision"] = precision.to_json();  // the default keeps old hashes
    return j;
}

std::vector<int> Task::timed_sets() const {
    if (!timing_sets.empty()) return timing_sets;
    std::vector<int> all;
    for (size_t i = 0; i < std::max<size_t>(shapes.size(), 1); ++i) all.push_back(static_cast<int>(i));
    return all;
}

std::vector<double> Task::weights() const {
    if (!timing_weights.empty()) return timing_weights;
    return std::vector<double>(timed_sets().size(), 1.0);
}

namespace {
// Why a tolerance is no check (empty: it is one). At 1 or more, atol or rtol lets an all-zero output
// pass the judge's rule (tool/device/tolerance.h: |0 - y| = |y| <= rtol * |y|, and atol applies up to
// atol times the output's scale), so the task is refused rather than judged by it.
std::string tolerance_problem(double atol, double rtol) {
    for (const auto& [name, v] : {std::pair<std::string, double>{"atol", atol}, {"rtol", rtol}}) {
        const std::string s = name + " " + (std::isinf(v) ? std::string("infinity") : nlohmann::json(v).dump());
        if (std::isnan(v)) return name + " is not a number; atol and rtol must be >= 0 and below 1";
        if (v < 0) return s + ": atol and rtol must be >= 0";
        if (v >= 1)
            return s + " would admit a constant output (at 1 or more an all-zero output passes); atol and rtol must be below 1 "
                       "(KernelBench checks at 1e-2; the defaults are 1e-4, 1e-2 for float16/bfloat16)";
    }
    return "";
}

// reference.show: the files the prompt shows beside the reference, resolved beside the task file.
void parse_shown(const Parser& p, const nlohmann::json& show, const std::filesystem::path& task_file, Task& t) {
    if (!show.is_array() || show.empty())
        p.fail("reference.show", "expected a list of {\"file\": \"problem.py\", \"language\": \"python\", \"title\": \"...\"}");
    for (size_t i = 0; i < show.size(); ++i) {
        const std::string at = "reference.show[" + std::to_string(i) + "]";
        if (!show[i].is_object()) p.fail(at, "expected {\"file\": ..., \"language\": ..., \"title\": ...}");
        p.only_keys(show[i], at, "/$defs/reference/properties/show/items");
        Task::ShownFile f;
        f.written = p.string_at(p.require(show[i], "file", at), at + ".file");
        if (f.written.empty()) p.fail(at + ".file", "empty path");
        std::filesystem::path fp(f.written);
        if (fp.is_relative()) fp = std::filesystem::absolute(task_file).parent_path() / fp;
        f.path = fp.lexically_normal();
        std::error_code ec;
        if (!std::filesystem::is_regular_file(f.path, ec)) p.fail(at + ".file", "file not found: " + f.path.string());
        f.language = show[i].contains("language") ? p.string_at(show[i].at("language"), at + ".language") : "";
        f.title = show[i].contains("title") ? p.string_at(show[i].at("title"), at + ".title") : f.written;
        t.reference_show.push_back(std::move(f));
    }
}

// A C++ function name, possibly namespace-qualified.
void check_function_name(const Parser& p, const std::string& f, const std::string& field) {
    size_t pos = 0;
    bool ok = !f.empty();
    while (ok && pos <= f.size()) {
        size_t next = f.find("::", pos);
        std::string part = f.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
        ok = is_identifier(part);
        if (next == std::string::npos) break;
        pos = next + 2;
    }
    if (!ok) p.fail(field, "'" + shown_value(f) + "' is not a C++ function name");
}

// "reference": a source file (a string, the function named as the task) or its object form.
void parse_reference(const Parser& p, const nlohmann::json& j, const std::filesystem::path& task_file, Task& t) {
    const auto& ref = p.require(j, "reference", "");
    std::string source;
    if (ref.is_string()) {
        source = ref.get<std::string>();
        t.reference_function = t.name;
    } else if (ref.is_object()) {
        p.only_keys(ref, "reference", "/$defs/reference");
        source = p.string_at(p.require(ref, "source", "reference"), "reference.source");
        t.reference_function = ref.contains("function") ? p.string_at(ref.at("function"), "reference.function") : t.name;
        if (ref.contains("signature")) {
            t.reference_signature = p.string_at(ref.at("signature"), "reference.signature");
            p.one_of(t.reference_signature, "reference.signature", "signature", "/$defs/reference/properties/signature");
        }
        if (ref.contains("setup")) t.reference_setup = p.string_at(ref.at("setup"), "reference.setup");
        if (ref.contains("arg")) {
            t.reference_arg_written = p.string_at(ref.at("arg"), "reference.arg");
            if (t.reference_setup.empty()) p.fail("reference.arg", "given without reference.setup (the function that receives it)");
            if (t.reference_arg_written.empty()) p.fail("reference.arg", "empty path");
            std::filesystem::path a(t.reference_arg_written);
            if (a.is_relative()) a = std::filesystem::absolute(task_file).parent_path() / a;
            t.reference_arg = a.lexically_normal();
            std::error_code ec;
            if (!std::filesystem::is_regular_file(t.reference_arg, ec))
                p.fail("reference.arg", "file not found: " + t.reference_arg.string());
        }
        if (ref.contains("show")) parse_shown(p, ref.at("show"), task_file, t);
    } else {
        p.fail("reference", "expected {\"source\": \"file.cpp\", \"function\": \"name\"}");
    }
    if (source.empty()) p.fail("reference.source", "empty path");
    std::filesystem::path src(source);
    if (src.is_relative()) src = std::filesystem::absolute(task_file).parent_path() / src;
    t.reference_source = src.lexically_normal();
    if (!std::filesystem::is_regular_file(t.reference_source))
        p.fail("reference.source", "file not found: " + t.reference_source.string());
    check_function_name(p, t.reference_function, "reference.function");
    if (!t.reference_setup.empty()) check_function_name(p, t.reference_setup, "reference.setup");
}

// "inputs" and "outputs" (names unique among both); returns the dimension names they use.
std::set<std::string> parse_tensors(const Parser& p, const nlohmann::json& j, const std::filesystem::path& task_file, Task& t) {
    auto tensors = [&](const char* key, bool is_input) {
        const auto& arr = p.require(j, key, "");
        if (!arr.is_array() || arr.empty()) p.fail(key, "expected a non-empty array of tensors");
        std::vector<TensorSpec> out;
        for (size_t i = 0; i < arr.size(); ++i)
            out.push_back(p.parse_tensor(arr[i], std::string(key) + "[" + std::to_string(i) + "]", is_input,
                                         std::filesystem::absolute(task_file).parent_path()));
        return out;
    };
    t.inputs = tensors("inputs", true);
    t.outputs = tensors("outputs", false);
    if (t.inputs.size() > 64 || t.outputs.size() > 64) p.fail("inputs", "at most 64 inputs and 64 outputs");
    std::set<std::string> names;
    for (size_t i = 0; i < t.inputs.size() + t.outputs.size(); ++i) {
        bool in = i < t.inputs.size();
        const auto& ts = in ? t.inputs[i] : t.outputs[i - t.inputs.size()];
        std::string field = std::string(in ? "inputs[" : "outputs[") + std::to_string(in ? i : i - t.inputs.size()) + "].name";
        if (!names.insert(ts.name).second) p.fail(field, "duplicate tensor name '" + shown_value(ts.name) + "'");
    }
    std::set<std::string> symbols;
    for (const auto* list : {&t.inputs, &t.outputs})
        for (const auto& ts : *list)
            for (const auto& d : ts.shape)
                if (!d.symbol.empty()) symbols.insert(d.symbol);
    return symbols;
}

// "shapes": the sets of dimension values, each binding every dimension the tensors use.
void parse_shapes(const Parser& p, const nlohmann::json& j, const std::set<std::string>& symbols, Task& t) {
    if (j.contains("shapes")) {
        const auto& arr = j.at("shapes");
        if (!arr.is_array() || arr.empty()) p.fail("shapes", "expected a non-empty array of objects such as {\"M\": 4096}");
        for (size_t i = 0; i < arr.size(); ++i) {
            std::string f = "shapes[" + std::to_string(i) + "]";
            if (!arr[i].is_object()) p.fail(f, "expected an object mapping dimension names to sizes");
            ShapeSet set;
            for (auto it = arr[i].begin(); it != arr[i].end(); ++it) {
                if (!symbols.count(it.key()))
                    p.fail(f + "." + it.key(), "no input or output uses dimension '" + shown_value(it.key()) + "'");
                int64_t v = p.int_at(it.value(), f + "." + it.key());
                if (v <= 0) p.fail(f + "." + it.key(), "sizes must be positive");
                set[it.key()] = v;
            }
            for (const auto& s : symbols)
                if (!set.count(s)) p.fail(f, "dimension '" + s + "' is not bound");
            t.shapes.push_back(set);
        }
    } else {
        if (!symbols.empty()) p.fail("shapes", "missing: dimension '" + *symbols.begin() + "' needs a value in every shape set");
        t.shapes.push_back({});
    }
}

// Sizes that fit the device and the int64 element count; file inputs that hold exactly their bytes.
void check_sizes(const Parser& p, const Task& t) {
    for (size_t s = 0; s < t.shapes.size(); ++s)
        for (const auto* list : {&t.inputs, &t.outputs})
            for (const auto& ts : *list) {
                long double n = 1;
                for (auto v : t.concrete_shape(ts, s)) n *= v;
                if (n * dtype_size(ts.dtype) > (long double)(1LL << 40))
                    p.fail("shapes[" + std::to_string(s) + "]", "tensor '" + ts.name + "' would exceed 1 TiB");
            }
    // A file input holds exactly the tensor's bytes, in every shape set.
    for (size_t i = 0; i < t.inputs.size(); ++i) {
        const auto& in = t.inputs[i];
        if (in.init.kind != "file") continue;
        std::error_code ec;
        auto bytes = std::filesystem::file_size(in.init.file, ec);
        for (size_t s = 0; s < t.shapes.size() && !ec; ++s) {
            long double n = dtype_size(in.dtype);
            for (auto v : t.concrete_shape(in, s)) n *= v;
            if (n != (long double)bytes)
                p.fail("inputs[" + std::to_string(i) + "].init.path",
                       in.init.file.string() + " holds " + std::to_string(bytes) + " bytes, but '" + in.name + "' in shapes[" +
                           std::to_string(s) + "] needs " + std::to_string((unsigned long long)n) + " (numel x " +
                           std::to_string(dtype_size(in.dtype)) + ", raw row-major)");
        }
    }
}

// "tolerance" (a number or {atol, rtol, policy}); the default follows the tensors' precision.
void parse_tolerance(const Parser& p, const nlohmann::json& j, Task& t) {
    bool low_precision = false;
    for (const auto& o : t.outputs) low_precision = low_precision || o.dtype == DType::FLOAT16 || o.dtype == DType::BFLOAT16;
    for (const auto& in : t.inputs) low_precision = low_precision || in.dtype == DType::FLOAT16 || in.dtype == DType::BFLOAT16;
    t.atol = t.rtol = low_precision ? 1e-2 : 1e-4;
    if (j.contains("tolerance")) {
        const auto& tol = j.at("tolerance");
        t.tolerance_given = true;
        if (tol.is_number()) {
            t.atol = t.rtol = p.number_at(tol, "tolerance");
        } else if (tol.is_object()) {
            p.only_keys(tol, "tolerance", "/$defs/tolerance");
            if (tol.contains("policy")) t.tolerance_policy = p.string_at(tol.at("policy"), "tolerance.policy");
            if (tol.contains("atol")) t.atol = p.number_at(tol.at("atol"), "tolerance.atol");
            if (tol.contains("rtol")) t.rtol = p.number_at(tol.at("rtol"), "tolerance.rtol");
        } else {
            p.fail("tolerance", "expected a number or {\"atol\": 1e-4, \"rtol\": 1e-4}");
        }
        if (const std::string why = tolerance_problem(t.atol, t.rtol); !why.empty()) p.fail("tolerance", why);
    }
}

// "flops": an expression over the tensors' dimensions, with a usable value in every shape set.
void parse_flops(const Parser& p, const nlohmann::json& v, const std::set<std::string>& symbols, Task& t) {
    t.flops = p.string_at(v, "flops");
    try {
        Expr e = parse_expr(t.flops);
        for (const auto& name : e.names())
            if (!symbols.count(name))
                p.fail("flops", "'" + name + "' is not a dimension of any input or output (dimensions: " +
                                    (symbols.empty() ? std::string("none") : join_names(symbols)) + ")");
        if (const std::string why = flops_value_problem(e, t.shapes); !why.empty()) p.fail("flops", why);
    } catch (const ExprError& e) {
        p.fail("flops", e.what());
    }
}
}  // namespace

Task parse_task(const nlohmann::json& j, const std::filesystem::path& task_file) {
    const std::string label = task_file.empty() ? std::string("<task>") : task_file.string();
    Parser p(label);
    if (!j.is_object()) p.fail("", "a task file must hold one JSON object");
    p.only_keys(j, "", "");  // "$schema" and "description" are accepted and ignored
    Task t;
    t.file = task_file;
    t.name = p.string_at(p.require(j, "name", ""), "name");
    if (const std::string why = task_name_problem(t.name); !why.empty()) p.fail("name", why);

    parse_reference(p, j, task_file, t);
    const std::set<std::string> symbols = parse_tensors(p, j, task_file, t);
    parse_shapes(p, j, symbols, t);
    check_sizes(p, t);
    parse_tolerance(p, j, t);
    if (j.contains("precision")) t.precision = parse_precision(j.at("precision"), label);
    if (j.contains("trials")) {
        int64_t n = p.int_at(j.at("trials"), "trials");
        if (n < 1 || n > 1000) p.fail("trials", "must be between 1 and 1000");
        t.correctness_trials = static_cast<int>(n);
    }
    if (j.contains("timing")) parse_timing(p, j.at("timing"), t);
    if (j.contains("flops")) parse_flops(p, j.at("flops"), symbols, t);
    return t;
}

Task load_task(const std::filesystem::path& task_file) {
    std::error_code ec;
    if (std::filesystem::is_directory(task_file, ec)) {
        // The folder a task lives in is an easy mistake: name the file that was meant.
        const auto inside = task_file / "task.json";
        throw TaskError(task_file.string(), "",
                        std::filesystem::is_regular_file(inside, ec)
                            ? "this is a directory; give its task.json (" + inside.string() + ")"
                            : "this is a directory, not a task file (and it holds no task.json)");
    }
    std::string text;
    try {
        // Capped and regular files only: /dev/zero or a FIFO must not be read into memory forever.
        text = read_input_file(task_file, "a task file");
    } catch (const UsageError& e) {
        // The reason without the path TaskError already names: "X: is a FIFO (named pipe), not a task file ...".
        std::string why = e.what();
        const std::string name = task_file.string();
        if (why.compare(0, name.size() + 1, name + " ") == 0) why = why.substr(name.size() + 1);
        else if (why.compare(0, 12 + name.size() + 2, "cannot read " + name + ": ") == 0)
            why = "cannot read the task file: " + why.substr(12 + name.size() + 2);
        throw TaskError(name, "", why);
    }
    nlohmann::json j;
    try {
        j = parse_json_unique_keys(text);
    } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number beyond a double (1e999)
        throw TaskError(task_file.string(), "", std::string("not valid JSON: ") + e.what());
    } catch (const std::runtime_error& e) {  // a key given twice
        throw TaskError(task_file.string(), "", e.what());
    }
    return parse_task(j, task_file);
}

}  // namespace kevo
