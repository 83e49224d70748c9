#include "triton/launch.h"

#include <cctype>
#include <regex>
#include <set>
#include <sstream>

namespace kevo::triton {

namespace {

int line_of(const std::string& text, size_t pos) {
    int line = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i)
        if (text[i] == '\n') ++line;
    return line;
}

// ---- Python literals --------------------------------------------------------------------------

class LiteralParser {
public:
    LiteralParser(const std::string& text, size_t pos, int first_line) : s_(text), pos_(pos), first_line_(first_line) {}

    nlohmann::json value() {
        skip();
        if (pos_ >= s_.size()) fail("expected a value, found the end of the file");
        char c = s_[pos_];
        if (c == '{') return container('{', '}');
        if (c == '[') return container('[', ']');
        if (c == '(') return container('(', ')');
        if (c == '"' || c == '\'') return string();
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') return number();
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::string w = word();
            if (w == "True") return true;
            if (w == "False") return false;
            if (w == "None") return nullptr;
            fail("'" + w + "' is not a literal (write numbers, strings, lists, tuples and dicts only; put expressions "
                 "of the task's dimensions in strings, e.g. \"cdiv(M, 64)\")");
        }
        fail(std::string("unexpected '") + c + "'");
    }
    size_t pos() const { return pos_; }

private:
    const std::string& s_;
    size_t pos_;
    int first_line_;

    [[noreturn]] void fail(const std::string& what) const {
        throw LaunchError("KEVO_LAUNCH, line " + std::to_string(line_of(s_, pos_) + first_line_ - 1) + ": " + what);
    }
    void skip() {
        while (pos_ < s_.size()) {
            char c = s_[pos_];
            if (c == '#') {
                while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
            } else if (c == '\\' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') {
                pos_ += 2;
            } else if (std::isspace(static_cast<unsigned char>(c))) {
                ++pos_;
            } else {
                break;
            }
        }
    }
    std::string word() {
        size_t b = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
        return s_.substr(b, pos_ - b);
    }
    nlohmann::json string() {
        char q = s_[pos_];
        if (s_.compare(pos_, 3, std::string(3, q)) == 0) fail("triple-quoted strings are not supported here");
        ++pos_;
        std::string out;
        while (true) {
            if (pos_ >= s_.size() || s_[pos_] == '\n') fail("unterminated string");
            char c = s_[pos_++];
            if (c == q) break;
            if (c == '\\') {
                if (pos_ >= s_.size()) fail("unterminated string");
                char e = s_[pos_++];
                switch (e) {
                    case 'n': out += '\n'; break;
                    case 't': out += '\t'; break;
                    case '\\': out += '\\'; break;
                    case '\'': out += '\''; break;
                    case '"': out += '"'; break;
                    default: out += '\\'; out += e;
                }
            } else {
                out += c;
            }
        }
        // Adjacent string literals concatenate, as in Python.
        size_t save = pos_;
        skip();
        if (pos_ < s_.size() && (s_[pos_] == '"' || s_[pos_] == '\'')) return out + string().get<std::string>();
        pos_ = save;
        return out;
    }
    nlohmann::json number() {
        size_t b = pos_;
        if (s_[pos_] == '-' || s_[pos_] == '+') ++pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' || s_[pos_] == '_' ||
                                    ((s_[pos_] == '-' || s_[pos_] == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
            ++pos_;
        std::string t;
        for (char c : s_.substr(b, pos_ - b))
            if (c != '_') t += c;
        try {
            size_t used = 0;
            bool is_float = t.find_first_of(".eE") != std::string::npos && t.find("0x") == std::string::npos;
            if (!is_float) {
                long long v = std::stoll(t, &used, 0);
                if (used == t.size()) return v;
            } else {
                double v = std::stod(t, &used);
                if (used == t.size()) return v;
            }
        } catch (const std::exception&) {
        }
        pos_ = b;
        fail("'" + t + "' is not a number");
    }
    nlohmann::json container(char open, char close) {
        ++pos_;
        bool dict = open == '{';
        nlohmann::json out = dict ? nlohmann::json::object() : nlohmann::json::array();
        while (true) {
            skip();
            if (pos_ >= s_.size()) fail(std::string("missing '") + close + "'");
            if (s_[pos_] == close) {
                ++pos_;
                return out;
            }
            if (dict) {
                nlohmann::json key = value();
                if (!key.is_string()) fail("dict keys must be strings, e.g. \"num_warps\"");
                skip();
                if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after the key \"" + key.get<std::string>() + "\"");
                ++pos_;
                std::string k = key.get<std::string>();
                if (out.contains(k)) fail("the key \"" + k + "\" appears twice");
                out[k] = value();
            } else {
                out.push_back(value());
            }
            skip();
            if (pos_ < s_.size() && s_[pos_] == ',') {
                ++pos_;
                continue;
            }
            skip();
            if (pos_ < s_.size() && s_[pos_] == close) continue;
            fail(std::string("expected ',' or '") + close + "'");
        }
    }
};

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

nlohmann::json parse_python_literal(const std::string& text) {
    LiteralParser p(text, 0, 1);
    nlohmann::json v = p.value();
    return v;
}

nlohmann::json find_assignment(const std::string& source, const std::string& name) {
    std::regex re("(^|\\n)" + name + "[ \\t]*(:[^=\\n]*)?=[ \\t]*");
    std::smatch m;
    if (!std::regex_search(source, m, re))
        throw LaunchError("the file has no " + name + " = {...} at the top level: a Triton candidate must describe how to launch "
                          "its kernel (see the launch description in the prompt)");
    size_t start = static_cast<size_t>(m.position(0) + m.length(0));
    LiteralParser p(source, start, 1);
    return p.value();
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

std::vector<Launch> parse_launches(const std::string& source, const Task& task) {
    nlohmann::json desc = find_assignment(source, "KEVO_LAUNCH");
    std::vector<nlohmann::json> items;
    if (desc.is_object()) items.push_back(desc);
    else if (desc.is_array() && !desc.empty()) items = desc.get<std::vector<nlohmann::json>>();
    else throw LaunchError("KEVO_LAUNCH must be a dict (one kernel launch) or a list of dicts (launched in order)");

    // Names usable in expressions: the task's dimension names.
    std::map<std::string, std::string> dims;
    std::map<std::string, std::pair<bool, int>> tensors;  // name -> (is_input, index)
    for (int io = 0; io < 2; ++io) {
        const auto& list = io == 0 ? task.inputs : task.outputs;
        for (size_t i = 0; i < list.size(); ++i) {
            tensors[list[i].name] = {io == 0, static_cast<int>(i)};
            for (const Dim& d : list[i].shape)
                if (!d.symbol.empty()) dims[d.symbol] = "kevo_dim_" + d.symbol;
        }
    }
    auto tensor_spec = [&](const std::string& name) -> const TensorSpec& {
        auto [is_in, idx] = tensors.at(name);
        return is_in ? task.inputs[idx] : task.outputs[idx];
    };

    std::vector<Launch> out;
    for (size_t li = 0; li < items.size(); ++li) {
        const nlohmann::json& d = items[li];
        std::string where = items.size() > 1 ? "KEVO_LAUNCH[" + std::to_string(li) + "]" : "KEVO_LAUNCH";
        if (!d.is_object()) throw LaunchError(where + " must be a dict");
        static const std::set<std::string> known = {"kernel", "args", "hints", "grid", "num_warps", "num_stages"};
        for (const auto& [k, v] : d.items())
            if (!known.count(k))
                throw LaunchError(where + ": unknown key \"" + k + "\" (the keys are kernel, args, hints, grid, num_warps, num_stages)");
        Launch L;
        if (!d.contains("kernel") || !d["kernel"].is_string())
            throw LaunchError(where + ": \"kernel\" must name the @triton.jit function to launch, e.g. \"kernel\": \"my_kernel\"");
        L.kernel = d["kernel"].get<std::string>();
        std::vector<KernelParam> params = kernel_params(source, L.kernel);
        if (!d.contains("args") || !d["args"].is_object())
            throw LaunchError(where + ": \"args\" must be a dict giving every parameter of " + L.kernel +
                              " a value: a tensor name, an expression of the dimensions, or a number for a tl.constexpr");
        const nlohmann::json& args = d["args"];
        std::set<std::string> param_names;
        for (const KernelParam& p : params) param_names.insert(p.name);
        for (const auto& [k, v] : args.items())
            if (!param_names.count(k)) {
                std::string list;
                for (const KernelParam& p : params) list += (list.empty() ? "" : ", ") + p.name;
                throw LaunchError(where + ": \"args\" gives a value to \"" + k + "\", but " + L.kernel + " has no such parameter (its parameters: " +
                                  list + ")");
            }
        std::map<std::string, std::string> constexprs;  // usable in the grid
        for (const KernelParam& p : params) {
            if (!args.contains(p.name))
                throw LaunchError(where + ": \"args\" gives no value to the parameter \"" + p.name + "\" of " + L.kernel +
                                  " (every parameter needs one, in the kernel's order)");
            const nlohmann::json& v = args[p.name];
            Arg a;
            a.param = p.name;
            std::string what = where + ": args[\"" + p.name + "\"]";
            if (p.constexpr_) {
                if (!v.is_number() && !v.is_boolean())
                    throw LaunchError(what + ": " + p.name + " is a tl.constexpr parameter, so its value must be a number written in "
                                      "KEVO_LAUNCH (e.g. 1024), not " + describe(v));
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
                if (v.is_number_integer() || v.is_boolean()) constexprs[p.name] = "INT64_C(" + a.literal + ")";
            } else if (v.is_string() && tensors.count(v.get<std::string>())) {
                a.kind = Arg::tensor;
                a.tensor_name = v.get<std::string>();
                std::tie(a.is_input, a.index) = tensors[a.tensor_name];
                a.triton_type = "*" + triton_dtype(tensor_spec(a.tensor_name).dtype);
            } else {
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
                else
                    throw LaunchError(what + ": expected a task tensor (" + [&] {
                        std::string l;
                        for (const auto& [n, x] : tensors) l += (l.empty() ? "" : ", ") + n;
                        return l;
                    }() + "), an integer expression of the dimensions, or (expression, \"i64\"), not " + describe(v));
                expression_to_c(a.expr, dims);  // checked now, rendered by the wrapper
            }
            L.args.push_back(a);
        }
        if (d.contains("hints")) {
            if (!d["hints"].is_object())
                throw LaunchError(where + ": \"hints\" must be a dict {parameter: 16} of pointers or integers that are multiples of 16");
            for (const auto& [k, v] : d["hints"].items()) {
                auto it = std::find_if(L.args.begin(), L.args.end(), [&](const Arg& a) { return a.param == k; });
                if (it == L.args.end())
                    throw LaunchError(where + ": \"hints\" names \"" + k + "\", which is not a parameter of " + L.kernel);
                if (it->kind == Arg::constexpr_value)
                    throw LaunchError(where + ": hints[\"" + k + "\"]: a tl.constexpr parameter needs no hint (its value is known)");
                if (!v.is_number_integer() || v.get<int64_t>() != 16)
                    throw LaunchError(where + ": hints[\"" + k + "\"] must be 16 (divisible by 16; the only hint supported), not " + describe(v));
                it->hint = 16;
            }
        }
        std::map<std::string, std::string> grid_names = dims;
        for (const auto& [k, v] : constexprs) grid_names[k] = v;
        if (!d.contains("grid"))
            throw LaunchError(where + ": \"grid\" is missing: give the number of programs, e.g. \"grid\": (\"cdiv(M * N, BLOCK)\",)");
        nlohmann::json g = d["grid"];
        if (!g.is_array()) g = nlohmann::json::array({g});
        if (g.empty() || g.size() > 3)
            throw LaunchError(where + ": \"grid\" must have 1 to 3 entries (x, y, z), e.g. (\"cdiv(N, BLOCK)\", \"M\")");
        for (const auto& e : g) {
            std::string expr;
            if (e.is_number_integer()) expr = std::to_string(e.get<int64_t>());
            else if (e.is_string()) expr = e.get<std::string>();
            else throw LaunchError(where + ": each grid entry must be an integer or an expression string, not " + describe(e));
            expression_to_c(expr, grid_names);
            L.grid.push_back(expr);
        }
        while (L.grid.size() < 3) L.grid.push_back("1");
        auto small_int = [&](const char* key, int def, int lo, int hi, bool pow2) {
            if (!d.contains(key)) return def;
            const auto& v = d[key];
            if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi ||
                (pow2 && (v.get<int64_t>() & (v.get<int64_t>() - 1)) != 0))
                throw LaunchError(where + ": \"" + key + "\" must be " + (pow2 ? "a power of two " : "an integer ") + "from " +
                                  std::to_string(lo) + " to " + std::to_string(hi) + ", not " + describe(v));
            return static_cast<int>(v.get<int64_t>());
        };
        L.num_warps = small_int("num_warps", 4, 1, 32, true);
        L.num_stages = small_int("num_stages", 3, 1, 8, false);
        out.push_back(std::move(L));
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
