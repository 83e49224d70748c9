#include "evolve/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <vector>

namespace kevo::evolve {
namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string tokens_str(double t) {
    if (t >= 1e6) return fmt("%.2fM", t / 1e6);
    if (t >= 1e3) return fmt("%.1fk", t / 1e3);
    return fmt("%.0f", t);
}

std::string duration_str(double s) {
    long t = std::lround(s);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '&': out += "&amp;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

// About five round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
    double span = std::max(hi - lo, 1e-9);
    double step = std::pow(10.0, std::floor(std::log10(span / 5)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (span / (step * m) <= 6) {
            step *= m;
            break;
        }
    std::vector<double> t;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-6; v += step) t.push_back(v);
    return t;
}

struct Series {
    std::vector<double> x, y;
};

// One chart: a step line (best so far) and optional dots, in a w x h box at (ox, oy).
std::string chart(double ox, double oy, double w, double h, const std::string& title, const std::string& xlabel,
                  const Series& line, const Series& dots, const std::function<std::string(double)>& xfmt) {
    const double left = 56, right = 16, top = 30, bottom = 44;
    double pw = w - left - right, ph = h - top - bottom;
    double xmax = 1, ymax = 1.0;
    for (double x : line.x) xmax = std::max(xmax, x);
    for (double x : dots.x) xmax = std::max(xmax, x);
    for (double y : line.y) ymax = std::max(ymax, y);
    for (double y : dots.y) ymax = std::max(ymax, y);
    ymax *= 1.1;
    auto px = [&](double x) { return ox + left + pw * x / xmax; };
    auto py = [&](double y) { return oy + top + ph * (1 - y / ymax); };
    std::ostringstream s;
    s << "<text x='" << ox + w / 2 << "' y='" << oy + 18 << "' text-anchor='middle' font-weight='bold'>"
      << xml_escape(title) << "</text>\n";
    for (double t : ticks(0, ymax)) {
        s << "<line x1='" << px(0) << "' x2='" << px(xmax) << "' y1='" << py(t) << "' y2='" << py(t)
          << "' stroke='#e4e4e4'/>\n<text x='" << px(0) - 6 << "' y='" << py(t) + 4 << "' text-anchor='end'>"
          << fmt("%.2gx", t) << "</text>\n";
    }
    for (double t : ticks(0, xmax))
        s << "<text x='" << px(t) << "' y='" << py(0) + 16 << "' text-anchor='middle'>" << xfmt(t) << "</text>\n";
    // The reference's speed (1x).
    s << "<line x1='" << px(0) << "' x2='" << px(xmax) << "' y1='" << py(1) << "' y2='" << py(1)
      << "' stroke='#999' stroke-dasharray='4 3'/>\n";
    s << "<line x1='" << px(0) << "' x2='" << px(0) << "' y1='" << py(0) << "' y2='" << py(ymax)
      << "' stroke='#333'/>\n<line x1='" << px(0) << "' x2='" << px(xmax) << "' y1='" << py(0) << "' y2='" << py(0)
      << "' stroke='#333'/>\n";
    s << "<text x='" << ox + left + pw / 2 << "' y='" << oy + h - 6 << "' text-anchor='middle'>" << xml_escape(xlabel)
      << "</text>\n<text transform='translate(" << ox + 14 << "," << oy + top + ph / 2
      << ") rotate(-90)' text-anchor='middle'>speedup over reference</text>\n";
    for (size_t i = 0; i < dots.x.size(); ++i)
        s << "<circle cx='" << px(dots.x[i]) << "' cy='" << py(dots.y[i]) << "' r='2.5' fill='#9ab' opacity='0.7'/>\n";
    if (!line.x.empty()) {
        s << "<polyline fill='none' stroke='#c33' stroke-width='2' points='";
        for (size_t i = 0; i < line.x.size(); ++i) {
            if (i) s << px(line.x[i]) << "," << py(line.y[i - 1]) << " ";
            s << px(line.x[i]) << "," << py(line.y[i]) << " ";
        }
        s << "'/>\n";
    }
    return s.str();
}

}  // namespace

std::string report_text(store::Store& st) {
    std::ostringstream s;
    auto history = st.history();
    auto events = st.events();
    auto programs = st.programs();
    store::Spent spent = st.spent();
    std::string name = st.get_meta("task_name").value_or("?").get<std::string>();
    nlohmann::json structure = st.get_meta("structure").value_or(nlohmann::json::object());
    std::string reason = st.get_meta("stop_reason").value_or("").get<std::string>();
    double elapsed = st.get_meta("elapsed_s").value_or(0.0).get<double>();

    int64_t ok = 0, failed = 0, dup = 0, repairs = 0;
    const store::Program* best = nullptr;
    for (const auto& p : programs) {
        if (p.ok()) {
            ++ok;
            if (!best || p.speedup > best->speedup) best = &p;
        } else if (p.status == "duplicate") {
            ++dup;
        } else if (p.status != "pending") {
            ++failed;
        }
        if (p.origin == "repair") ++repairs;
    }
    s << "Task " << name << " (" << structure.value("arch", "?") << "), " << history.size()
      << " generation(s) committed" << (reason.empty() ? "" : ", stopped: " + reason) << "\n";
    s << "Candidates: " << ok << " correct, " << failed << " failed, " << dup << " duplicates rejected, " << repairs
      << " repair attempts\n";
    s << "LLM: " << spent.calls << " requests, " << tokens_str(static_cast<double>(spent.tokens())) << " tokens ("
      << tokens_str(static_cast<double>(spent.prompt_tokens)) << " prompt), $" << fmt("%.4f", spent.cost_usd) << "; time "
      << duration_str(elapsed) << "\n";
    if (auto batched = st.batch_requests(); !batched.empty()) {
        // Batch mode: which requests went into which file, and what became of them.
        int files = 0, answered = 0, failed_lines = 0, waiting = 0;
        for (const auto& b : batched) {
            files = std::max(files, b.batch);
            if (!b.error.empty()) ++failed_lines;
            else if (st.find_llm_call(b.key)) ++answered;
            else ++waiting;
        }
        s << "Batches: " << files << " file(s), " << batched.size() << " requests: " << answered << " answered, "
          << failed_lines << " failed, " << waiting << " waiting (last: " << batched.back().file << ")\n";
    }
    if (best)
        s << "Best: " << fmt("%.3f", best->speedup) << "x (program #" << best->id << ", generation " << best->generation
          << ", island " << best->island << ", " << best->origin << ")\n";
    else
        s << "Best: no correct kernel yet\n";

    s << "\nBest speedup by generation:\n  gen     best   correct  failed    tokens      cost   elapsed\n";
    for (const auto& g : history) {
        char line[160];
        std::snprintf(line, sizeof line, "%5d  %6.3fx  %8lld  %6lld  %8s  %8s  %s\n", g.generation, g.best_speedup,
                      static_cast<long long>(g.ok), static_cast<long long>(g.failed),
                      tokens_str(static_cast<double>(g.tokens)).c_str(), ("$" + fmt("%.3f", g.cost_usd)).c_str(),
                      duration_str(g.elapsed_s).c_str());
        s << line;
    }
    s << "\nBest speedup by tokens spent (each improvement):\n     tokens     best  generation\n";
    double shown = -1;
    for (const auto& g : history) {
        if (g.best_speedup <= shown) continue;
        shown = g.best_speedup;
        char line[96];
        std::snprintf(line, sizeof line, "  %9s  %6.3fx  %10d\n", tokens_str(static_cast<double>(g.tokens)).c_str(),
                      g.best_speedup, g.generation);
        s << line;
    }
    int migrations = 0;
    std::vector<std::string> restarts;
    for (const auto& e : events) {
        if (e.kind == "migration") ++migrations;
        if (e.kind == "restart")
            restarts.push_back("island " + e.detail.value("island", nlohmann::json(0)).dump() + " at generation " +
                               std::to_string(e.generation));
    }
    s << "\nMigrations: " << migrations << "; restarts: " << restarts.size();
    for (size_t i = 0; i < restarts.size(); ++i) s << (i ? ", " : " (") << restarts[i] << (i + 1 == restarts.size() ? ")" : "");
    s << "\n";
    return s.str();
}

std::string report_svg(store::Store& st) {
    auto history = st.history();
    Series by_gen, by_tokens, dots;
    for (const auto& g : history) {
        by_gen.x.push_back(g.generation);
        by_gen.y.push_back(g.best_speedup);
        by_tokens.x.push_back(static_cast<double>(g.tokens));
        by_tokens.y.push_back(g.best_speedup);
    }
    for (const auto& p : st.programs())
        if (p.ok()) {
            dots.x.push_back(p.generation);
            dots.y.push_back(p.speedup);
        }
    std::string name = st.get_meta("task_name").value_or("?").get<std::string>();
    const double w = 480, h = 320;
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << 2 * w << "' height='" << h + 30 << "' viewBox='0 0 "
      << 2 * w << " " << h + 30 << "' font-family='sans-serif' font-size='12'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << w << "' y='18' text-anchor='middle' font-size='14'>KernelEvo search: " << xml_escape(name)
      << "</text>\n"
      << chart(0, 30, w, h, "Best speedup by generation", "generation", by_gen, dots,
               [](double v) { return fmt("%.0f", v); })
      << chart(w, 30, w, h, "Best speedup by tokens spent", "LLM tokens", by_tokens, Series{}, tokens_str)
      << "</svg>\n";
    return s.str();
}

std::string report_html(store::Store& st) {
    std::string name = st.get_meta("task_name").value_or("?").get<std::string>();
    return "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>KernelEvo search: " + xml_escape(name) +
           "</title></head>\n<body style='font-family:sans-serif'>\n" + report_svg(st) + "<pre>" +
           xml_escape(report_text(st)) + "</pre>\n</body></html>\n";
}

}  // namespace kevo::evolve
