#include "triton/launch.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

namespace kevo::triton {

namespace {

// ---- expressions -----------------------------------------------------------------------------

class ExprParser {
public:
    ExprParser(const std::string& e, const std::map<std::string, std::string>& names) : e_(e), names_(names) {}
    std::string parse() {
        std::string r = sum();
        skip();
        if (pos_ < e_.size()) fail(std::string("unexpected '") + e_[pos_] + "'");
        return r;
    }

private:
    const std::string& e_;
    const std::map<std::string, std::string>& names_;
    size_t pos_ = 0;

    [[noreturn]] void fail(const std::string& what) const {
        std::string known;
        for (const auto& [k, v] : names_) known += (known.empty() ? "" : ", ") + k;
        throw LaunchError("expression \"" + e_ + "\": " + what + " (allowed: integers, " +
                          (known.empty() ? std::string("no names") : known) +
                          ", + - * // % ( ), cdiv(a, b), min(a, b), max(a, b))");
    }
    void skip() {
        while (pos_ < e_.size() && std::isspace(static_cast<unsigned char>(e_[pos_]))) ++pos_;
    }
    bool eat(const char* tok) {
        skip();
        size_t n = std::char_traits<char>::length(tok);
        if (e_.compare(pos_, n, tok) == 0) {
            pos_ += n;
            return true;
        }
        return false;
    }
    std::string sum() {
        std::string l = product();
        while (true) {
            if (eat("+")) l = "(" + l + " + " + product() + ")";
            else if (eat("-")) l = "(" + l + " - " + product() + ")";
            else return l;
        }
    }
    std::string product() {
        std::string l = unary();
        while (true) {
            if (eat("//")) l = "kevo_div(" + l + ", " + unary() + ")";
            else if (eat("/")) l = "kevo_div(" + l + ", " + unary() + ")";
            else if (eat("%")) l = "kevo_mod(" + l + ", " + unary() + ")";
            else if (eat("*")) l = "(" + l + " * " + unary() + ")";
            else return l;
        }
    }
    std::string unary() {
        if (eat("-")) return "(-" + unary() + ")";
        if (eat("+")) return unary();
        return primary();
    }
    std::string primary() {
        skip();
        if (pos_ >= e_.size()) fail("ends too early");
        char c = e_[pos_];
        if (eat("(")) {
            std::string r = sum();
            if (!eat(")")) fail("missing ')'");
            return r;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) {
            size_t b = pos_;
            while (pos_ < e_.size() && (std::isdigit(static_cast<unsigned char>(e_[pos_])) || e_[pos_] == '_')) ++pos_;
            std::string digits;
            for (char d : e_.substr(b, pos_ - b))
                if (d != '_') digits += d;
            if (digits.size() > 18) fail("the number " + digits + " is too large");
            return "INT64_C(" + digits + ")";
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            size_t b = pos_;
            while (pos_ < e_.size() && (std::isalnum(static_cast<unsigned char>(e_[pos_])) || e_[pos_] == '_' || e_[pos_] == '.')) ++pos_;
            std::string name = e_.substr(b, pos_ - b);
            for (const char* prefix : {"triton.", "tl."})
                if (name.rfind(prefix, 0) == 0) name = name.substr(std::char_traits<char>::length(prefix));
            if (name == "cdiv" || name == "min" || name == "max") {
                if (!eat("(")) fail(name + " needs two arguments: " + name + "(a, b)");
                std::string a = sum();
                if (!eat(",")) fail(name + " needs two arguments: " + name + "(a, b)");
                std::string b2 = sum();
                if (!eat(")")) fail("missing ')' after " + name + "(a, b");
                return "kevo_" + name + "(" + a + ", " + b2 + ")";
            }
            auto it = names_.find(name);
            if (it == names_.end()) fail("unknown name '" + name + "'");
            return it->second;
        }
        fail(std::string("unexpected '") + c + "'");
    }
};

std::string describe(const nlohmann::json& v) {
    std::string d = v.dump();
    return d.size() > 60 ? d.substr(0, 57) + "..." : d;
}

bool valid_identifier(const std::string& s) {
    static const std::regex re(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
    return std::regex_match(s, re);
}

}  // namespace

bool is_triton_source(const std::string& source) {
    static const std::regex jit(R"((^|\n)[ \t]*@(triton\.)?jit\b)");
    static const std::regex import(R"((^|\n)[ \t]*(import triton|from triton)\b)");
    return std::regex_search(source, jit) || (std::regex_search(source, import) && source.find("kevo_forward") == std::string::npos);
}

std::vector<KernelParam> kernel_params(const std::string& source, const std::string& name) {
    std::regex def_re("(^|\\n)([ \\t]*)def[ \\t]+" + name + "[ \\t]*\\(");
    std::smatch m;
    if (!valid_identifier(name) || !std::regex_search(source, m, def_re))
        throw LaunchError("KEVO_LAUNCH names the kernel \"" + name + "\", but the file defines no function of that name");
    size_t def_at = static_cast<size_t>(m.position(0)) + m[1].length();
    // The decorators right above the def must include @triton.jit (or @jit).
    std::vector<std::string> above;
    {
        std::istringstream in(source.substr(0, def_at));
        std::string line;
        while (std::getline(in, line)) above.push_back(line);
    }
    bool jitted = false;
    static const std::regex jit_re(R"(@(triton\.)?jit\b)");
    for (auto it = above.rbegin(); it != above.rend(); ++it) {
        size_t f = it->find_first_not_of(" \t");
        if (f == std::string::npos || (*it)[f] != '@') break;
        if (std::regex_search(*it, jit_re)) jitted = true;
    }
    if (!jitted) throw LaunchError("the function \"" + name + "\" named by KEVO_LAUNCH is not decorated with @triton.jit");
    size_t open = static_cast<size_t>(m.position(0) + m.length(0));
    int depth = 1;
    size_t i = open;
    std::vector<std::string> parts(1);
    for (; i < source.size() && depth > 0; ++i) {
        char c = source[i];
        if (c == '(' || c == '[' || c == '{') ++depth;
        if (c == ')' || c == ']' || c == '}') {
            if (--depth == 0) break;
        }
        if (c == '#') {
            while (i < source.size() && source[i] != '\n') ++i;
            continue;
        }
        if (c == ',' && depth == 1) parts.emplace_back();
        else parts.back() += c;
    }
    if (depth != 0) throw LaunchError("the parameter list of \"" + name + "\" is not closed");
    std::vector<KernelParam> params;
    for (std::string p : parts) {
        size_t b = p.find_first_not_of(" \t\r\n");
        if (b == std::string::npos) continue;  // a trailing comma
        p = p.substr(b);
        size_t end = 0;
        while (end < p.size() && (std::isalnum(static_cast<unsigned char>(p[end])) || p[end] == '_')) ++end;
        KernelParam kp;
        kp.name = p.substr(0, end);
        if (kp.name.empty())
            throw LaunchError("cannot read the parameter '" + p + "' of \"" + name + "\" (no *args/**kwargs in Triton kernels)");
        std::string rest = p.substr(end);
        size_t eq = rest.find('=');
        std::string annotation = rest.substr(0, eq);
        kp.constexpr_ = annotation.find("constexpr") != std::string::npos;
        params.push_back(kp);
    }
    return params;
}

std::string expression_to_c(const std::string& expr, const std::map<std::string, std::string>& name_to_c) {
    ExprParser p(expr, name_to_c);
    return p.parse();
}

std::string triton_dtype(DType d) {
    // Derived from the one dtype table (KEVO_DTYPE_LIST: name, size, floating): Triton spells
    // pointer element types fp32, fp16, bf16, fp64, i8, u8, i32, i64 and i1 (bool).
    const std::string name = dtype_name(d);
    const std::string bits = std::to_string(8 * dtype_size(d));
    if (name == "bool") return "i1";
    if (name.rfind("bfloat", 0) == 0) return "bf" + bits;
    if (is_floating(d)) return "fp" + bits;
    if (name.rfind("uint", 0) == 0) return "u" + bits;
    if (name.rfind("int", 0) == 0) return "i" + bits;
    throw LaunchError(std::string("Triton has no pointer type for dtype ") + name);
}

bool Launch::has_hints() const {
    for (const Arg& a : args)
        if (a.hint) return true;
    return false;
}

std::string Launch::signature(bool hints) const {
    std::string s;
    for (const Arg& a : args) {
        if (!s.empty()) s += ", ";
        if (a.kind == Arg::constexpr_value) s += a.literal;
        else s += a.triton_type + (hints && a.hint ? ":" + std::to_string(a.hint) : "");
    }
    return s;
}

namespace {

// The names of the task that a launch description may use.
struct TaskNames {
    std::map<std::string, std::string> dims;              // dimension -> its C variable in the wrapper
    std::map<std::string, std::pair<bool, int>> tensors;  // tensor -> (is_input, index)
};

TaskNames task_names(const Task& task) {
    TaskNames n;
    for (int io = 0; io < 2; ++io) {
        const auto& list = io == 0 ? task.inputs : task.outputs;
        for (size_t i = 0; i < list.size(); ++i) {
            n.tensors[list[i].name] = {io == 0, static_cast<int>(i)};
            for (const Dim& d : list[i].shape)
                if (!d.symbol.empty()) n.dims[d.symbol] = "kevo_dim_" + d.symbol;
        }
    }
    return n;
}

// A tl.constexpr parameter's value: a number (or bool) written as Triton's --signature takes it.
Arg constexpr_arg(const std::string& param, const nlohmann::json& v, const std::string& what) {
    if (!v.is_number() && !v.is_boolean())
        throw LaunchError(what + ": " + param + " is a tl.constexpr parameter, so its value must be a number written in "
                          "KEVO_LAUNCH (e.g. 1024), not " + describe(v));
    Arg a;
    a.param = param;
    a.kind = Arg::constexpr_value;
    if (v.is_boolean()) a.literal = v.get<bool>() ? "1" : "0";
    else if (v.is_number_integer()) a.literal = std::to_string(v.get<int64_t>());
    else {
        std::ostringstream s;
        s.precision(17);
        s << v.get<double>();
        a.literal = s.str();
        if (a.literal.find_first_of(".e") == std::string::npos) a.literal += ".0";
    }
    return a;
}

// A scalar parameter's value: an expression of the dimensions, or (expression, "i32"/"i64").
Arg scalar_arg(const std::string& param, const nlohmann::json& v, const std::string& what, const TaskNames& names) {
    Arg a;
    a.param = param;
    a.kind = Arg::scalar;
    a.triton_type = "i32";
    nlohmann::json e = v;
    if (v.is_array()) {
        if (v.size() != 2 || !v[1].is_string())
            throw LaunchError(what + ": write a scalar as an expression (\"M * N\") or as (expression, type) with type "
                              "\"i32\" or \"i64\", not " + describe(v));
        e = v[0];
        a.triton_type = v[1].get<std::string>();
        if (a.triton_type != "i32" && a.triton_type != "i64")
            throw LaunchError(what + ": the type of a scalar must be \"i32\" or \"i64\", not \"" + a.triton_type + "\"");
    }
    if (e.is_number_integer()) a.expr = std::to_string(e.get<int64_t>());
    else if (e.is_string()) a.expr = e.get<std::string>();
    else {
        std::string tensors;
        for (const auto& [n, x] : names.tensors) tensors += (tensors.empty() ? "" : ", ") + n;
        throw LaunchError(what + ": expected a task tensor (" + tensors +
                          "), an integer expression of the dimensions, or (expression, \"i64\"), not " + describe(v));
    }
    expression_to_c(a.expr, names.dims);  // checked now, rendered by the wrapper
    return a;
}

// "args": a value for every parameter of the kernel (and for nothing else), in the kernel's order.
std::vector<Arg> launch_args(const nlohmann::json& d, const std::string& where, const std::string& kernel,
                             const std::vector<KernelParam>& params, const Task& task, const TaskNames& names) {
    if (!d.contains("args") || !d["args"].is_object())
        throw LaunchError(where + ": \"args\" must be a dict giving every parameter of " + kernel +
                          " a value: a tensor name, an expression of the dimensions, or a number for a tl.constexpr");
    const nlohmann::json& args = d["args"];
    std::string param_list;
    for (const KernelParam& p : params) param_list += (param_list.empty() ? "" : ", ") + p.name;
    for (const auto& [k, v] : args.items())
        if (std::none_of(params.begin(), params.end(), [&](const KernelParam& p) { return p.name == k; }))
            throw LaunchError(where + ": \"args\" gives a value to \"" + k + "\", but " + kernel + " has no such parameter (its parameters: " +
                              param_list + ")");
    std::vector<Arg> out;
    for (const KernelParam& p : params) {
        if (!args.contains(p.name))
            throw LaunchError(where + ": \"args\" gives no value to the parameter \"" + p.name + "\" of " + kernel +
                              " (every parameter needs one, in the kernel's order)");
        const nlohmann::json& v = args[p.name];
        std::string what = where + ": args[\"" + p.name + "\"]";
        if (p.constexpr_) {
            out.push_back(constexpr_arg(p.name, v, what));
        } else if (v.is_string() && names.tensors.count(v.get<std::string>())) {
            Arg a;
            a.param = p.name;
            a.kind = Arg::tensor;
            a.tensor_name = v.get<std::string>();
            std::tie(a.is_input, a.index) = names.tensors.at(a.tensor_name);
            a.triton_type = "*" + triton_dtype((a.is_input ? task.inputs : task.outputs)[a.index].dtype);
            out.push_back(a);
        } else {
            out.push_back(scalar_arg(p.name, v, what, names));
        }
    }
    return out;
}

// "hints": {parameter: 16}, marking pointers and integers divisible by 16.
void apply_hints(const nlohmann::json& d, const std::string& where, Launch& L) {
    if (!d.contains("hints")) return;
    if (!d["hints"].is_object())
        throw LaunchError(where + ": \"hints\" must be a dict {parameter: 16} of pointers or integers that are multiples of 16");
    for (const auto& [k, v] : d["hints"].items()) {
        auto it = std::find_if(L.args.begin(), L.args.end(), [&](const Arg& a) { return a.param == k; });
        if (it == L.args.end()) throw LaunchError(where + ": \"hints\" names \"" + k + "\", which is not a parameter of " + L.kernel);
        if (it->kind == Arg::constexpr_value)
            throw LaunchError(where + ": hints[\"" + k + "\"]: a tl.constexpr parameter needs no hint (its value is known)");
        if (!v.is_number_integer() || v.get<int64_t>() != 16)
            throw LaunchError(where + ": hints[\"" + k + "\"] must be 16 (divisible by 16; the only hint supported), not " + describe(v));
        it->hint = 16;
    }
}

// "grid": 1 to 3 expressions of the dimensions and the integer constexprs, padded to 3 with "1".
std::vector<std::string> launch_grid(const nlohmann::json& d, const std::string& where, const Launch& L, const TaskNames& names) {
    std::map<std::string, std::string> grid_names = names.dims;
    for (const Arg& a : L.args)  // integer (and bool) constexprs; a float's literal has a '.' or an 'e'
        if (a.kind == Arg::constexpr_value && a.literal.find_first_of(".e") == std::string::npos)
            grid_names[a.param] = "INT64_C(" + a.literal + ")";
    if (!d.contains("grid"))
        throw LaunchError(where + ": \"grid\" is missing: give the number of programs, e.g. \"grid\": (\"cdiv(M * N, BLOCK)\",)");
    nlohmann::json g = d["grid"];
    if (!g.is_array()) g = nlohmann::json::array({g});
    if (g.empty() || g.size() > 3)
        throw LaunchError(where + ": \"grid\" must have 1 to 3 entries (x, y, z), e.g. (\"cdiv(N, BLOCK)\", \"M\")");
    std::vector<std::string> grid;
    for (const auto& e : g) {
        std::string expr;
        if (e.is_number_integer()) expr = std::to_string(e.get<int64_t>());
        else if (e.is_string()) expr = e.get<std::string>();
        else throw LaunchError(where + ": each grid entry must be an integer or an expression string, not " + describe(e));
        expression_to_c(expr, grid_names);
        grid.push_back(expr);
    }
    while (grid.size() < 3) grid.push_back("1");
    return grid;
}

// An optional integer setting ("num_warps", "num_stages") from lo to hi (a power of two when pow2).
int small_int(const nlohmann::json& d, const std::string& where, const char* key, int def, int lo, int hi, bool pow2) {
    if (!d.contains(key)) return def;
    const auto& v = d[key];
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi || (pow2 && (v.get<int64_t>() & (v.get<int64_t>() - 1)) != 0))
        throw LaunchError(where + ": \"" + key + "\" must be " + (pow2 ? "a power of two " : "an integer ") + "from " + std::to_string(lo) +
                          " to " + std::to_string(hi) + ", not " + describe(v));
    return static_cast<int>(v.get<int64_t>());
}

// One launch (`where` names it in errors: KEVO_LAUNCH or KEVO_LAUNCH[i]).
Launch parse_launch(const nlohmann::json& d, const std::string& where, const std::string& source, const Task& task, const TaskNames& names) {
    if (!d.is_object()) throw LaunchError(where + " must be a dict");
    static const std::set<std::string> known = {"kernel", "args", "hints", "grid", "num_warps", "num_stages"};
    for (const auto& [k, v] : d.items())
        if (!known.count(k))
            throw LaunchError(where + ": unknown key \"" + k + "\" (the keys are kernel, args, hints, grid, num_warps, num_stages)");
    Launch L;
    if (!d.contains("kernel") || !d["kernel"].is_string())
        throw LaunchError(where + ": \"kernel\" must name the @triton.jit function to launch, e.g. \"kernel\": \"my_kernel\"");
    L.kernel = d["kernel"].get<std::string>();
    L.args = launch_args(d, where, L.kernel, kernel_params(source, L.kernel), task, names);
    apply_hints(d, where, L);
    L.grid = launch_grid(d, where, L, names);
    L.num_warps = small_int(d, where, "num_warps", 4, 1, 32, true);
    L.num_stages = small_int(d, where, "num_stages", 3, 1, 8, false);
    return L;
}

}  // namespace

std::vector<Launch> parse_launches(const std::string& source, const Task& task) {
    nlohmann::json desc = find_assignment(source, "KEVO_LAUNCH");
    std::vector<nlohmann::json> items;
    if (desc.is_object()) items.push_back(desc);
    else if (desc.is_array() && !desc.empty()) items = desc.get<std::vector<nlohmann::json>>();
    else throw LaunchError("KEVO_LAUNCH must be a dict (one kernel launch) or a list of dicts (launched in order)");
    const TaskNames names = task_names(task);
    std::vector<Launch> out;
    for (size_t li = 0; li < items.size(); ++li) {
        std::string where = items.size() > 1 ? "KEVO_LAUNCH[" + std::to_string(li) + "]" : "KEVO_LAUNCH";
        out.push_back(parse_launch(items[li], where, source, task, names));
    }
    return out;
}

nlohmann::json launches_to_json(const std::vector<Launch>& launches) {
    nlohmann::json a = nlohmann::json::array();
    for (const Launch& L : launches) {
        nlohmann::json specs = nlohmann::json::array();
        if (L.has_hints()) specs.push_back(L.signature(true));
        specs.push_back(L.signature(false));
        a.push_back({{"kernel", L.kernel},
                     {"specializations", specs},
                     {"grid", L.grid},
                     {"num_warps", L.num_warps},
                     {"num_stages", L.num_stages}});
    }
    return a;
}

}  // namespace kevo::triton
