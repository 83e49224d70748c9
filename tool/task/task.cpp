#include "task/task.h"

#include <cctype>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "task/init_kind.h"

namespace kevo {

namespace {

struct DTypeInfo {
    DType d;
    const char* name;
    int size;
    bool floating;
    int abi;
};
const DTypeInfo kDTypes[] = {
    {DType::float32, "float32", 4, true, 0},  {DType::float16, "float16", 2, true, 1},
    {DType::bfloat16, "bfloat16", 2, true, 2}, {DType::int32, "int32", 4, false, 3},
    {DType::int64, "int64", 8, false, 4},     {DType::boolean, "bool", 1, false, 5},
    {DType::float64, "float64", 8, true, 6},  {DType::int8, "int8", 1, false, 7},
    {DType::uint8, "uint8", 1, false, 8},
};
const DTypeInfo& info(DType d) {
    for (const auto& i : kDTypes)
        if (i.d == d) return i;
    return kDTypes[0];
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
    [[noreturn]] void fail(const std::string& field, const std::string& msg) const { throw TaskError(file_, field, msg); }

    const nlohmann::json& require(const nlohmann::json& obj, const std::string& key, const std::string& path) const {
        if (!obj.contains(key)) fail(path.empty() ? key : path + "." + key, "missing (required)");
        return obj.at(key);
    }
    std::string string_at(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_string()) fail(field, "expected a string, got " + std::string(v.type_name()));
        return v.get<std::string>();
    }
    double number_at(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_number()) fail(field, "expected a number, got " + std::string(v.type_name()));
        return v.get<double>();
    }
    int64_t int_at(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_number_integer()) fail(field, "expected an integer, got " + v.dump());
        return v.get<int64_t>();
    }
    void only_keys(const nlohmann::json& obj, const std::string& path, std::initializer_list<const char*> keys) const {
        for (auto it = obj.begin(); it != obj.end(); ++it) {
            bool known = false;
            for (const char* k : keys) known = known || it.key() == k;
            if (!known) {
                std::string list;
                for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
                fail(path.empty() ? it.key() : path + "." + it.key(), "unknown field (expected one of: " + list + ")");
            }
        }
    }

    // Every init kind of the one table, for messages: "randn, rand, ..., file".
    static std::string init_kind_list() {
        std::string list;
        for (int k = 0; k < KEVO_INIT_COUNT; ++k) list += std::string(list.empty() ? "" : ", ") + kevo_init_kind_name(k);
        return list;
    }

    Init parse_init(const nlohmann::json& v, const std::string& field, DType dtype, const std::filesystem::path& base) const {
        Init init;
        if (!is_floating(dtype)) {
            init.kind = "randint";
            init.a = dtype == DType::boolean ? 0 : (dtype == DType::uint8 ? 0 : -100);
            init.b = dtype == DType::boolean ? 2 : 100;
        }
        if (v.is_null()) return init;
        nlohmann::json o = v;
        if (v.is_string()) o = nlohmann::json{{"kind", v}};
        if (!o.is_object()) fail(field, "expected a string or an object such as {\"kind\": \"rand\", \"low\": 0, \"high\": 1}");
        only_keys(o, field, {"kind", "mean", "std", "low", "high", "value", "path"});
        init.kind = string_at(require(o, "kind", field), field + ".kind");
        if (kevo_init_kind_from_name(init.kind.c_str()) < 0)
            fail(field + ".kind", "unknown init '" + init.kind + "' (expected one of: " + init_kind_list() + ")");
        if (init.kind != "file" && o.contains("path")) fail(field + ".path", "only the file init takes a path");
        const std::string& k = init.kind;
        auto num = [&](const char* key, double def) {
            return o.contains(key) ? number_at(o.at(key), field + "." + key) : def;
        };
        if (k == "randn") {
            if (!is_floating(dtype)) fail(field + ".kind", "randn needs a floating dtype; use randint for " + std::string(dtype_name(dtype)));
            init.a = num("mean", 0);
            init.b = num("std", 1);
            if (!(init.b > 0)) fail(field + ".std", "must be > 0");
        } else if (k == "rand" || k == "randint") {
            if (k == "rand" && !is_floating(dtype)) fail(field + ".kind", "rand needs a floating dtype; use randint for " + std::string(dtype_name(dtype)));
            init.a = num("low", k == "rand" ? 0 : init.a);
            init.b = num("high", k == "rand" ? 1 : init.b);
            if (!(init.b > init.a)) fail(field + ".high", "must be greater than low");
            if (k == "randint" && (init.a != std::floor(init.a) || init.b != std::floor(init.b)))
                fail(field, "randint bounds must be integers");
        } else if (k == "ones" || k == "zeros" || k == "arange") {
        } else if (k == "full") {
            init.a = number_at(require(o, "value", field), field + ".value");
        } else if (k == "file") {
            init.path = string_at(require(o, "path", field), field + ".path");
            if (init.path.empty()) fail(field + ".path", "empty path");
            std::filesystem::path f(init.path);
            if (f.is_relative()) f = base / f;
            init.file = f.lexically_normal();
            std::error_code ec;
            if (!std::filesystem::is_regular_file(init.file, ec)) fail(field + ".path", "file not found: " + init.file.string());
            init.file_sha256 = sha256_file(init.file);
        } else {
            fail(field + ".kind", "unknown init '" + k + "' (expected one of: " + init_kind_list() + ")");
        }
        return init;
    }

    TensorSpec parse_tensor(const nlohmann::json& v, const std::string& path, bool is_input,
                            const std::filesystem::path& base) const {
        if (!v.is_object()) fail(path, "expected an object with name, dtype and shape");
        if (is_input) only_keys(v, path, {"name", "dtype", "shape", "init"});
        else only_keys(v, path, {"name", "dtype", "shape"});
        TensorSpec t;
        t.name = string_at(require(v, "name", path), path + ".name");
        if (!is_identifier(t.name)) fail(path + ".name", "'" + t.name + "' is not a C identifier");
        std::string dt = string_at(require(v, "dtype", path), path + ".dtype");
        auto d = parse_dtype(dt);
        if (!d) fail(path + ".dtype", "unknown dtype '" + dt + "' (expected float32, float16, bfloat16, float64, int8, uint8, int32, int64 or bool)");
        t.dtype = *d;
        const auto& shape = require(v, "shape", path);
        if (!shape.is_array()) fail(path + ".shape", "expected an array of integers and names, e.g. [\"M\", 128]");
        if (shape.size() > 8) fail(path + ".shape", "at most 8 dimensions (the kernel ABI's limit)");
        for (size_t i = 0; i < shape.size(); ++i) {
            std::string f = path + ".shape[" + std::to_string(i) + "]";
            Dim dim;
            if (shape[i].is_string()) {
                dim.symbol = shape[i].get<std::string>();
                if (!is_identifier(dim.symbol)) fail(f, "'" + dim.symbol + "' is not a valid dimension name");
            } else if (shape[i].is_number_integer()) {
                dim.value = shape[i].get<int64_t>();
                if (dim.value <= 0) fail(f, "sizes must be positive");
            } else {
                fail(f, "expected an integer or a dimension name, got " + shape[i].dump());
            }
            t.shape.push_back(dim);
        }
        if (is_input) t.init = parse_init(v.contains("init") ? v.at("init") : nlohmann::json(), path + ".init", t.dtype, base);
        return t;
    }

private:
    std::string file_;
};

}  // namespace

const char* dtype_name(DType d) { return info(d).name; }
int dtype_size(DType d) { return info(d).size; }
bool is_floating(DType d) { return info(d).floating; }
int dtype_abi(DType d) { return info(d).abi; }

std::optional<DType> parse_dtype(const std::string& name) {
    static const std::map<std::string, DType> aliases = {
        {"float", DType::float32}, {"half", DType::float16}, {"bf16", DType::bfloat16}, {"fp32", DType::float32},
        {"fp16", DType::float16}, {"double", DType::float64}, {"int", DType::int32}, {"long", DType::int64},
        {"boolean", DType::boolean}};
    for (const auto& i : kDTypes)
        if (name == i.name) return i.d;
    auto it = aliases.find(name);
    if (it != aliases.end()) return it->second;
    return std::nullopt;
}

std::vector<int64_t> Task::concrete_shape(const TensorSpec& t, size_t set) const {
    std::vector<int64_t> out;
    for (const auto& d : t.shape) out.push_back(d.symbol.empty() ? d.value : shapes.at(set).at(d.symbol));
    return out;
}

nlohmann::json Task::to_json() const {
    auto tensor = [](const TensorSpec& t, bool with_init) {
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : t.shape) shape.push_back(d.symbol.empty() ? nlohmann::json(d.value) : nlohmann::json(d.symbol));
        nlohmann::json j{{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", shape}};
        if (with_init) {
            nlohmann::json init{{"kind", t.init.kind}};
            if (t.init.kind == "randn") init["mean"] = t.init.a, init["std"] = t.init.b;
            if (t.init.kind == "rand" || t.init.kind == "randint") init["low"] = t.init.a, init["high"] = t.init.b;
            if (t.init.kind == "full") init["value"] = t.init.a;
            if (t.init.kind == "file") init["path"] = t.init.path;
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
    j["inputs"] = nlohmann::json::array();
    for (const auto& t : inputs) j["inputs"].push_back(tensor(t, true));
    j["outputs"] = nlohmann::json::array();
    for (const auto& t : outputs) j["outputs"].push_back(tensor(t, false));
    j["shapes"] = shapes;
    j["tolerance"] = {{"atol", atol}, {"rtol", rtol}};
    j["trials"] = correctness_trials;
    return j;
}

std::string Task::hash() const {
    nlohmann::json j = to_json();
    j["reference"].erase("source");  // where the file lives does not change the task; its content is hashed separately
    // The values of a file input are part of the task.
    for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].init.kind == "file") j["inputs"][i]["init"]["sha256"] = inputs[i].init.file_sha256;
    return sha256_hex(j.dump());
}

std::string Task::reference_hash() const {
    std::string h = sha256_file(reference_source);
    // The setup argument (e.g. a TorchScript model) is part of the reference.
    if (!reference_arg.empty()) h = sha256_hex(h + "\x1e" + sha256_file(reference_arg));
    return h;
}

Task parse_task(const nlohmann::json& j, const std::filesystem::path& task_file) {
    const std::string label = task_file.empty() ? std::string("<task>") : task_file.string();
    Parser p(label);
    if (!j.is_object()) p.fail("", "a task file must hold one JSON object");
    p.only_keys(j, "", {"name", "reference", "inputs", "outputs", "shapes", "tolerance", "trials", "description"});
    Task t;
    t.file = task_file;
    t.name = p.string_at(p.require(j, "name", ""), "name");
    if (!is_identifier(t.name)) p.fail("name", "'" + t.name + "' is not a C identifier (letters, digits, _)");

    const auto& ref = p.require(j, "reference", "");
    std::string source;
    if (ref.is_string()) {
        source = ref.get<std::string>();
        t.reference_function = t.name;
    } else if (ref.is_object()) {
        p.only_keys(ref, "reference", {"source", "function", "signature", "setup", "arg"});
        source = p.string_at(p.require(ref, "source", "reference"), "reference.source");
        t.reference_function = ref.contains("function") ? p.string_at(ref.at("function"), "reference.function") : t.name;
        if (ref.contains("signature")) {
            t.reference_signature = p.string_at(ref.at("signature"), "reference.signature");
            if (t.reference_signature != "tensors" && t.reference_signature != "vector")
                p.fail("reference.signature", "expected \"tensors\" (one at::Tensor parameter per input) or \"vector\" "
                                              "(one std::vector<at::Tensor>), got '" + t.reference_signature + "'");
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
    } else {
        p.fail("reference", "expected {\"source\": \"file.cpp\", \"function\": \"name\"}");
    }
    if (source.empty()) p.fail("reference.source", "empty path");
    std::filesystem::path src(source);
    if (src.is_relative()) src = std::filesystem::absolute(task_file).parent_path() / src;
    t.reference_source = src.lexically_normal();
    if (!std::filesystem::is_regular_file(t.reference_source))
        p.fail("reference.source", "file not found: " + t.reference_source.string());
    auto check_function_name = [&](const std::string& f, const std::string& field) {
        // A C++ function name, possibly namespace-qualified.
        size_t pos = 0;
        bool ok = !f.empty();
        while (ok && pos <= f.size()) {
            size_t next = f.find("::", pos);
            std::string part = f.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
            ok = is_identifier(part);
            if (next == std::string::npos) break;
            pos = next + 2;
        }
        if (!ok) p.fail(field, "'" + f + "' is not a C++ function name");
    };
    check_function_name(t.reference_function, "reference.function");
    if (!t.reference_setup.empty()) check_function_name(t.reference_setup, "reference.setup");

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
        if (!names.insert(ts.name).second) p.fail(field, "duplicate tensor name '" + ts.name + "'");
    }

    std::set<std::string> symbols;
    for (const auto* list : {&t.inputs, &t.outputs})
        for (const auto& ts : *list)
            for (const auto& d : ts.shape)
                if (!d.symbol.empty()) symbols.insert(d.symbol);

    if (j.contains("shapes")) {
        const auto& arr = j.at("shapes");
        if (!arr.is_array() || arr.empty()) p.fail("shapes", "expected a non-empty array of objects such as {\"M\": 4096}");
        for (size_t i = 0; i < arr.size(); ++i) {
            std::string f = "shapes[" + std::to_string(i) + "]";
            if (!arr[i].is_object()) p.fail(f, "expected an object mapping dimension names to sizes");
            ShapeSet set;
            for (auto it = arr[i].begin(); it != arr[i].end(); ++it) {
                if (!symbols.count(it.key())) p.fail(f + "." + it.key(), "no input or output uses dimension '" + it.key() + "'");
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
    // Sizes must fit the device and the int64 element count.
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

    bool low_precision = false;
    for (const auto& o : t.outputs) low_precision = low_precision || o.dtype == DType::float16 || o.dtype == DType::bfloat16;
    for (const auto& in : t.inputs) low_precision = low_precision || in.dtype == DType::float16 || in.dtype == DType::bfloat16;
    t.atol = t.rtol = low_precision ? 1e-2 : 1e-4;
    if (j.contains("tolerance")) {
        const auto& tol = j.at("tolerance");
        t.tolerance_given = true;
        if (tol.is_number()) {
            t.atol = t.rtol = p.number_at(tol, "tolerance");
        } else if (tol.is_object()) {
            p.only_keys(tol, "tolerance", {"atol", "rtol"});
            if (tol.contains("atol")) t.atol = p.number_at(tol.at("atol"), "tolerance.atol");
            if (tol.contains("rtol")) t.rtol = p.number_at(tol.at("rtol"), "tolerance.rtol");
        } else {
            p.fail("tolerance", "expected a number or {\"atol\": 1e-4, \"rtol\": 1e-4}");
        }
        if (!(t.atol >= 0) || !(t.rtol >= 0)) p.fail("tolerance", "atol and rtol must be >= 0");
    }
    if (j.contains("trials")) {
        int64_t n = p.int_at(j.at("trials"), "trials");
        if (n < 1 || n > 1000) p.fail("trials", "must be between 1 and 1000");
        t.correctness_trials = static_cast<int>(n);
    }
    return t;
}

Task load_task(const std::filesystem::path& task_file) {
    std::string text;
    try {
        text = read_file(task_file);
    } catch (const UsageError&) {
        throw TaskError(task_file.string(), "", "cannot read the task file");
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw TaskError(task_file.string(), "", std::string("not valid JSON: ") + e.what());
    }
    return parse_task(j, task_file);
}

}  // namespace kevo
