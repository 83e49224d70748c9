// The bench report's plots: inline SVG, no scripts (plots.h).
#include "bench/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/text.h"

namespace kevo::bench::detail {

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

namespace {

// Axes box: returns the SVG header part; px/py map data to pixels.
struct Box {
    double x0 = 60, y0 = 30, w = 640, h = 260;
};

std::string svg_open(double w, double h, const std::string& title) {
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h << "' viewBox='0 0 " << w << " " << h
      << "' font-family='sans-serif' font-size='11'>\n<text x='" << w / 2 << "' y='18' text-anchor='middle' font-weight='bold'>"
      << xml_escape(title) << "</text>\n";
    return s.str();
}

// Log2 axis for speedups: ticks at powers of two.
struct LogAxis {
    double lo, hi;
    LogAxis(double mn, double mx) {
        lo = std::floor(std::log2(std::max(mn, 1.0 / 64)));
        hi = std::ceil(std::log2(std::max(mx, 1.0)));
        if (lo > -1) lo = -1;
        if (hi < 1) hi = 1;
    }
    double frac(double v) const { return (std::log2(std::max(v, std::exp2(lo))) - lo) / (hi - lo); }
};

}  // namespace

std::string speedup_bars(const std::vector<TaskResult>& results) {
    std::vector<const TaskResult*> rs;
    for (const auto& r : results) rs.push_back(&r);
    std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) {
        double sa = a->correct() ? a->speedup : 0, sb = b->correct() ? b->speedup : 0;
        return sa > sb;
    });
    Box b;
    double mn = 1, mx = 1;
    for (auto* r : rs)
        if (r->correct()) mn = std::min(mn, r->speedup), mx = std::max(mx, r->speedup);
    LogAxis ax(mn, mx);
    auto py = [&](double v) { return b.y0 + b.h * (1 - ax.frac(v)); };
    std::ostringstream s;
    s << svg_open(b.x0 + b.w + 20, b.y0 + b.h + 50, "Speedup per task over LibTorch eager (sorted, log scale)");
    for (double e = ax.lo; e <= ax.hi; ++e) {
        double v = std::exp2(e);
        s << "<line x1='" << b.x0 << "' x2='" << b.x0 + b.w << "' y1='" << py(v) << "' y2='" << py(v) << "' stroke='"
          << (e == 0 ? "#444" : "#ddd") << "'/>\n<text x='" << b.x0 - 6 << "' y='" << py(v) + 4 << "' text-anchor='end'>"
          << fmt("%g", v) << "x</text>\n";
    }
    double bw = rs.empty() ? 0 : b.w / rs.size();
    for (size_t i = 0; i < rs.size(); ++i) {
        const auto* r = rs[i];
        double x = b.x0 + i * bw;
        if (r->correct()) {
            double y1 = py(r->speedup), y0 = py(1);
            s << "<rect x='" << x + bw * 0.1 << "' width='" << std::max(bw * 0.8, 0.5) << "' y='" << std::min(y0, y1)
              << "' height='" << std::max(std::fabs(y1 - y0), 0.5) << "' fill='" << (r->speedup >= 1 ? "#2a9d4b" : "#e08a1e")
              << "'><title>" << xml_escape(r->name) << ": " << fmt("%.3fx", r->speedup) << "</title></rect>\n";
        } else {
            s << "<rect x='" << x + bw * 0.1 << "' width='" << std::max(bw * 0.8, 0.5) << "' y='" << b.y0 + b.h - 6
              << "' height='6' fill='#bbb'><title>" << xml_escape(r->name) << ": " << xml_escape(r->status) << "</title></rect>\n";
        }
    }
    s << "<text x='" << b.x0 + b.w / 2 << "' y='" << b.y0 + b.h + 20 << "' text-anchor='middle'>" << rs.size()
      << " tasks, fastest first (grey: not correct)</text>\n</svg>\n";
    return s.str();
}

std::string speedup_histogram(const std::vector<TaskResult>& results) {
    const std::vector<std::pair<std::string, std::pair<double, double>>> bins = {
        {"<0.5x", {0, 0.5}}, {"0.5-0.8x", {0.5, 0.8}}, {"0.8-1x", {0.8, 1}}, {"1-1.5x", {1, 1.5}},
        {"1.5-2x", {1.5, 2}}, {"2-4x", {2, 4}},         {">=4x", {4, 1e300}}};
    std::vector<int> count(bins.size() + 1, 0);
    for (const auto& r : results) {
        if (!r.correct()) {
            ++count.back();
            continue;
        }
        for (size_t i = 0; i < bins.size(); ++i)
            if (r.speedup >= bins[i].second.first && r.speedup < bins[i].second.second) ++count[i];
    }
    Box b;
    int mx = std::max(1, *std::max_element(count.begin(), count.end()));
    std::ostringstream s;
    s << svg_open(b.x0 + b.w + 20, b.y0 + b.h + 50, "Speedup distribution");
    double bw = b.w / count.size();
    for (size_t i = 0; i < count.size(); ++i) {
        double hgt = b.h * count[i] / mx, x = b.x0 + i * bw;
        std::string label = i < bins.size() ? bins[i].first : "not correct";
        std::string color = i == bins.size() ? "#bbb" : bins[i].second.first >= 1 ? "#2a9d4b" : "#e08a1e";
        s << "<rect x='" << x + bw * 0.1 << "' width='" << bw * 0.8 << "' y='" << b.y0 + b.h - hgt << "' height='" << hgt
          << "' fill='" << color << "'/>\n<text x='" << x + bw / 2 << "' y='" << b.y0 + b.h - hgt - 4
          << "' text-anchor='middle'>" << count[i] << "</text>\n<text x='" << x + bw / 2 << "' y='" << b.y0 + b.h + 16
          << "' text-anchor='middle'>" << xml_escape(label) << "</text>\n";
    }
    s << "<line x1='" << b.x0 << "' x2='" << b.x0 + b.w << "' y1='" << b.y0 + b.h << "' y2='" << b.y0 + b.h
      << "' stroke='#444'/>\n</svg>\n";
    return s.str();
}

std::string speedup_vs_tokens(const std::vector<TaskResult>& results) {
    Box b;
    double tmax = 1, mn = 1, mx = 1;
    for (const auto& r : results) {
        tmax = std::max(tmax, static_cast<double>(r.tokens));
        if (r.correct()) mn = std::min(mn, r.speedup), mx = std::max(mx, r.speedup);
    }
    LogAxis ax(mn, mx);
    auto px = [&](double t) { return b.x0 + b.w * t / (tmax * 1.05); };
    auto py = [&](double v) { return b.y0 + b.h * (1 - ax.frac(v)); };
    std::ostringstream s;
    s << svg_open(b.x0 + b.w + 20, b.y0 + b.h + 50, "Best speedup vs tokens spent (per task)");
    for (double e = ax.lo; e <= ax.hi; ++e) {
        double v = std::exp2(e);
        s << "<line x1='" << b.x0 << "' x2='" << b.x0 + b.w << "' y1='" << py(v) << "' y2='" << py(v) << "' stroke='"
          << (e == 0 ? "#444" : "#ddd") << "'/>\n<text x='" << b.x0 - 6 << "' y='" << py(v) + 4 << "' text-anchor='end'>"
          << fmt("%g", v) << "x</text>\n";
    }
    for (int i = 0; i <= 4; ++i) {
        double t = tmax * 1.05 * i / 4;
        s << "<text x='" << px(t) << "' y='" << b.y0 + b.h + 16 << "' text-anchor='middle'>" << tokens_str(t) << "</text>\n";
    }
    for (const auto& r : results) {
        double y = r.correct() ? py(r.speedup) : b.y0 + b.h;
        s << "<circle cx='" << px(static_cast<double>(r.tokens)) << "' cy='" << y << "' r='4' fill='"
          << (r.correct() ? (r.speedup >= 1 ? "#2a9d4b" : "#e08a1e") : "#bbb") << "' fill-opacity='0.8'><title>" << xml_escape(r.name)
          << ": " << (r.correct() ? fmt("%.3fx", r.speedup) : xml_escape(r.status)) << ", " << tokens_str(static_cast<double>(r.tokens))
          << " tokens</title></circle>\n";
    }
    s << "<text x='" << b.x0 + b.w / 2 << "' y='" << b.y0 + b.h + 34 << "' text-anchor='middle'>tokens"
      << (tmax <= 1 ? " (none spent: ready kernels)" : "") << "</text>\n</svg>\n";
    return s.str();
}

}  // namespace kevo::bench::detail
