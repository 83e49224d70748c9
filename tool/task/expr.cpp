#include "task/expr.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace kevo {

struct Expr::Node {
    char op = 0;  // 0: number, 'n': name, '+', '-', '*', '/', '^', 'u' (unary minus)
    double value = 0;
    std::string name;
    std::shared_ptr<const Node> a, b;
};

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;

// Bounds on what a task file may write: the parser and the evaluator recurse once per nesting
// level, so a deeply nested expression would otherwise overflow the stack.
constexpr size_t kMaxExprChars = 4096;
constexpr int kMaxExprDepth = 64;

class ExprParser {
public:
    ExprParser(const std::string& t, std::set<std::string>& names) : t_(t), names_(names) {}

    NodeP parse() {
        NodeP n = sum();
        skip();
        if (pos_ < t_.size()) fail("unexpected '" + std::string(1, t_[pos_]) + "'");
        return n;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        const std::string shown = t_.size() > 80 ? t_.substr(0, 80) + "..." : t_;
        throw ExprError("cannot read the expression '" + shown + "' at character " + std::to_string(pos_ + 1) + ": " + what);
    }
    // One more level of nesting (parentheses, unary signs, powers) while it lives.
    struct Nested {
        explicit Nested(ExprParser& p) : p_(p) {
            if (++p_.depth_ > kMaxExprDepth)
                p_.fail("nested more than " + std::to_string(kMaxExprDepth) + " levels deep");
        }
        ~Nested() { --p_.depth_; }
        ExprParser& p_;
    };
    void skip() {
        while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    }
    bool eat(char c) {
        skip();
        if (pos_ < t_.size() && t_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    static NodeP binary(char op, NodeP a, NodeP b) {
        auto n = std::make_shared<Expr::Node>();
        n->op = op;
        n->a = std::move(a);
        n->b = std::move(b);
        return n;
    }
    NodeP sum() {
        NodeP n = product();
        while (true) {
            if (eat('+')) n = binary('+', n, product());
            else if (eat('-')) n = binary('-', n, product());
            else return n;
        }
    }
    NodeP product() {
        NodeP n = power();
        while (true) {
            if (eat('*')) n = binary('*', n, power());
            else if (eat('/')) n = binary('/', n, power());
            else return n;
        }
    }
    NodeP power() {
        NodeP n = unary();
        if (eat('^')) {
            Nested level(*this);
            return binary('^', n, power());  // right-associative
        }
        return n;
    }
    NodeP unary() {
        if (eat('-')) {
            Nested level(*this);
            return binary('u', unary(), nullptr);
        }
        if (eat('+')) {
            Nested level(*this);
            return unary();
        }
        return atom();
    }
    NodeP atom() {
        skip();
        if (pos_ >= t_.size()) fail("expected a number, a dimension name or '('");
        if (eat('(')) {
            Nested level(*this);
            NodeP n = sum();
            if (!eat(')')) fail("expected ')'");
            return n;
        }
        char c = t_[pos_];
        auto n = std::make_shared<Expr::Node>();
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
            const char* begin = t_.c_str() + pos_;
            char* end = nullptr;
            n->value = std::strtod(begin, &end);
            if (end == begin) fail("bad number");
            pos_ += static_cast<size_t>(end - begin);
            return n;
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            size_t start = pos_;
            while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_')) ++pos_;
            n->op = 'n';
            n->name = t_.substr(start, pos_ - start);
            names_.insert(n->name);
            return n;
        }
        fail("unexpected '" + std::string(1, c) + "'");
    }

    const std::string& t_;
    std::set<std::string>& names_;
    size_t pos_ = 0;
    int depth_ = 0;
};

double eval_node(const Expr::Node& n, const std::map<std::string, int64_t>& dims) {
    switch (n.op) {
        case 0: return n.value;
        case 'n': {
            auto it = dims.find(n.name);
            if (it == dims.end()) throw ExprError("dimension '" + n.name + "' has no value");
            return static_cast<double>(it->second);
        }
        case 'u': return -eval_node(*n.a, dims);
        case '+': return eval_node(*n.a, dims) + eval_node(*n.b, dims);
        case '-': return eval_node(*n.a, dims) - eval_node(*n.b, dims);
        case '*': return eval_node(*n.a, dims) * eval_node(*n.b, dims);
        case '/': return eval_node(*n.a, dims) / eval_node(*n.b, dims);
        case '^': return std::pow(eval_node(*n.a, dims), eval_node(*n.b, dims));
    }
    return 0;
}

}  // namespace

double Expr::eval(const std::map<std::string, int64_t>& dims) const {
    if (!root_) throw ExprError("empty expression");
    return eval_node(*root_, dims);
}

Expr parse_expr(const std::string& text) {
    Expr e;
    e.text_ = text;
    bool blank = true;
    for (char c : text) blank = blank && std::isspace(static_cast<unsigned char>(c));
    if (blank) throw ExprError("the expression is empty");
    if (text.size() > kMaxExprChars)
        throw ExprError("the expression has " + std::to_string(text.size()) + " characters; at most " +
                        std::to_string(kMaxExprChars) + " are read");
    e.root_ = ExprParser(e.text_, e.names_).parse();
    return e;
}

}  // namespace kevo
