#include "task/task_checks.h"

#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "common/text.h"

namespace kevo {

nlohmann::json parse_json_unique_keys(const std::string& text) {
    // The containers being read, outermost first: where each is ("tolerance", "inputs[]"), and
    // for an object the keys seen so far and the last one.
    struct Open {
        bool object = false;
        std::string where, key;
        std::set<std::string> keys;
    };
    std::vector<Open> open;
    auto cb = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (ev == E::object_start || ev == E::array_start) {
            std::string where;
            if (!open.empty()) where = open.back().object ? (open.back().where.empty() ? "" : open.back().where + ".") + open.back().key
                                                          : open.back().where + "[]";
            open.push_back({ev == E::object_start, where, "", {}});
        } else if (ev == E::object_end || ev == E::array_end) {
            if (!open.empty()) open.pop_back();
        } else if (ev == E::key && !open.empty()) {
            Open& o = open.back();
            o.key = parsed.get<std::string>();
            if (!o.keys.insert(o.key).second)
                throw std::runtime_error("the key '" + o.key + "' is given twice" +
                                         (o.where.empty() ? std::string(" at the top level") : " in '" + o.where + "'") +
                                         " (which one counts is not clear: give it once)");
        }
        return true;
    };
    return nlohmann::json::parse(text, cb);
}

std::string shown_value(const std::string& text) {
    constexpr size_t kShown = 60;
    return printable(text.size() > kShown ? text.substr(0, kShown) : text) + (text.size() > kShown ? "..." : "");
}

std::string shown_json(const nlohmann::json& v) {
    return shown_value(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string task_name_problem(const std::string& name) {
    bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    const std::string shown = name.size() > 40 ? name.substr(0, 40) + "..." : name;
    if (!ok) return "'" + shown + "' is not a C identifier (letters, digits, _)";
    if (name.size() > kMaxTaskNameChars)
        return "'" + shown + "' has " + std::to_string(name.size()) + " characters; a task name has at most " +
               std::to_string(kMaxTaskNameChars) + " (letters, digits and _, not starting with a digit)";
    return "";
}

std::string flops_value_problem(const Expr& flops, const std::vector<ShapeSet>& shapes) {
    const std::vector<ShapeSet> sets = shapes.empty() ? std::vector<ShapeSet>{ShapeSet{}} : shapes;
    for (size_t s = 0; s < sets.size(); ++s) {
        const double v = flops.eval(sets[s]);
        if (std::isfinite(v) && v >= 0) continue;
        std::ostringstream why;
        why << "'" << (flops.text().size() > 80 ? flops.text().substr(0, 80) + "..." : flops.text()) << "' is ";
        if (std::isnan(v)) why << "not a number";
        else why << v;
        if (!shapes.empty()) why << " in shapes[" << s << "]";
        why << "; flops must be a finite count of operations, 0 or more";
        return why.str();
    }
    return "";
}

}  // namespace kevo
