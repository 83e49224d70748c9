// The Python literal reader of the launch description (python_literal.h).
#include "triton/python_literal.h"

#include <cctype>
#include <regex>

namespace kevo::triton {

namespace {

int line_of(const std::string& text, size_t pos) {
    int line = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i)
        if (text[i] == '\n') ++line;
    return line;
}

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

}  // namespace

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

}  // namespace kevo::triton
