// Arithmetic over dimension names, as written in a task's "flops" field: numbers, names,
// + - * / ^ (power), unary minus and parentheses, e.g. "2*M*N*K" or "M*N*(5 + 2*N)".
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

namespace kevo {

struct ExprError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Expr {
public:
    struct Node;
    // The names the expression uses.
    const std::set<std::string>& names() const { return names_; }
    // Its value with each name bound in `dims`; throws ExprError for an unbound name.
    double eval(const std::map<std::string, int64_t>& dims) const;
    const std::string& text() const { return text_; }

private:
    friend Expr parse_expr(const std::string& text);
    std::shared_ptr<const Node> root_;
    std::set<std::string> names_;
    std::string text_;
};

// Throws ExprError saying where the text stops making sense.
Expr parse_expr(const std::string& text);

}  // namespace kevo
