#include "common/text.h"
#include "bench/bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"

namespace kevo::bench {

namespace fs = std::filesystem;

namespace {

const double kFastP[] = {0, 1, 1.5, 2};

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}


std::string md_cell(std::string s) {
    for (auto& c : s)
        if (c == '|' || c == '\n') c = ' ';
    return s;
}

std::string duration(double s) {
    long t = std::lround(s);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

std::string tokens_str(double t) {
    if (t >= 1e6) return fmt("%.2fM", t / 1e6);
    if (t >= 1e3) return fmt("%.1fk", t / 1e3);
    return fmt("%.0f", t);
}

std::string us_str(double us) {
    if (us <= 0) return "-";
    if (us >= 1000) return fmt("%.3f ms", us / 1000);
    return fmt("%.1f us", us);
}

std::string p_label(double p) { return p == 0 ? "fast_0 (correct)" : "fast_" + fmt("%g", p); }

}  // namespace

std::vector<fs::path> suite_tasks(const fs::path& suite) {
    std::error_code ec;
    if (!fs::is_directory(suite, ec)) throw UsageError("--suite " + suite.string() + ": not a directory");
    if (fs::is_regular_file(suite / "task.json", ec)) return {suite / "task.json"};
    std::vector<fs::path> tasks;
    for (const auto& e : fs::directory_iterator(suite))
        if (e.is_directory() && fs::is_regular_file(e.path() / "task.json", ec)) tasks.push_back(e.path() / "task.json");
    std::sort(tasks.begin(), tasks.end());
    if (tasks.empty())
        throw UsageError("--suite " + suite.string() + ": no task folders (DIR/NAME/task.json), e.g. from `kernelevo import kernelbench`");
    return tasks;
}

std::map<std::string, Baseline> load_baseline(const fs::path& tsv) {
    std::istringstream in(read_file(tsv));
    std::string line;
    auto split = [](const std::string& l) {
        std::vector<std::string> f;
        std::string cell;
        std::istringstream ls(l);
        while (std::getline(ls, cell, '\t')) f.push_back(cell);
        if (!l.empty() && l.back() == '\t') f.push_back("");
        return f;
    };
    if (!std::getline(in, line)) throw UsageError("--baseline " + tsv.string() + ": empty file");
    auto head = split(line);
    int level = -1, file = -1, eager = -1, compile = -1, notes = -1;
    for (int i = 0; i < static_cast<int>(head.size()); ++i) {
        const std::string& h = head[i];
        if (h == "level") level = i;
        if (h == "file") file = i;
        if (h == "notes") notes = i;
        if (eager < 0 && h.find("_eager_mean_ms") != std::string::npos) eager = i;
        if (compile < 0 && h.find("_compile_default_mean_ms") != std::string::npos) compile = i;
    }
    if (level < 0 || file < 0 || eager < 0)
        throw UsageError("--baseline " + tsv.string() + ": expected KernelBench's columns level, file and *_eager_mean_ms");
    std::map<std::string, Baseline> out;
    while (std::getline(in, line)) {
        auto f = split(line);
        if (static_cast<int>(f.size()) <= std::max({level, file, eager})) continue;
        std::string stem = fs::path(f[file]).stem().string(), name = "kb" + f[level] + "_";
        for (char c : stem) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        name = std::regex_replace(name, std::regex("_+$"), "");
        Baseline b;
        try {
            b.eager_us = std::stod(f[eager]) * 1000;
            if (compile >= 0 && compile < static_cast<int>(f.size()) && !f[compile].empty()) b.compile_us = std::stod(f[compile]) * 1000;
        } catch (const std::exception&) {
            continue;
        }
        if (notes >= 0 && notes < static_cast<int>(f.size())) b.note = f[notes];
        out[name] = b;
    }
    return out;
}

nlohmann::json TaskResult::to_json() const {
    nlohmann::json j{{"name", name},       {"task", task},           {"status", status},
                     {"done", done},       {"correct", correct()},   {"speedup", speedup},
                     {"kernel_us", kernel_us}, {"reference_us", reference_us}, {"tokens", tokens},
                     {"cost_usd", cost_usd}, {"wall_s", wall_s},     {"kernel", kernel},
                     {"note", note}};
    j["torch_compile_us"] = torch_compile_us >= 0 ? nlohmann::json(torch_compile_us) : nlohmann::json();
    j["torch_eager_us"] = torch_eager_us >= 0 ? nlohmann::json(torch_eager_us) : nlohmann::json();
    if (baseline_eager_us >= 0) {
        j["baseline_eager_us"] = baseline_eager_us;
        j["baseline_compile_us"] = baseline_compile_us >= 0 ? nlohmann::json(baseline_compile_us) : nlohmann::json();
        if (!baseline_note.empty()) j["baseline_note"] = baseline_note;
    }
    return j;
}

TaskResult TaskResult::from_json(const nlohmann::json& j) {
    TaskResult r;
    r.name = j.value("name", "");
    r.task = j.value("task", "");
    r.status = j.value("status", "error");
    r.done = j.value("done", false);
    r.speedup = j.value("speedup", 0.0);
    r.kernel_us = j.value("kernel_us", 0.0);
    r.reference_us = j.value("reference_us", 0.0);
    r.tokens = j.value("tokens", int64_t{0});
    r.cost_usd = j.value("cost_usd", 0.0);
    r.wall_s = j.value("wall_s", 0.0);
    r.kernel = j.value("kernel", "");
    r.note = j.value("note", "");
    if (j.contains("torch_compile_us") && j["torch_compile_us"].is_number()) r.torch_compile_us = j["torch_compile_us"];
    if (j.contains("torch_eager_us") && j["torch_eager_us"].is_number()) r.torch_eager_us = j["torch_eager_us"];
    if (j.contains("baseline_eager_us") && j["baseline_eager_us"].is_number()) r.baseline_eager_us = j["baseline_eager_us"];
    if (j.contains("baseline_compile_us") && j["baseline_compile_us"].is_number()) r.baseline_compile_us = j["baseline_compile_us"];
    r.baseline_note = j.value("baseline_note", "");
    return r;
}

Summary summarize(const std::vector<TaskResult>& results) {
    Summary s;
    s.tasks = static_cast<int>(results.size());
    std::vector<double> sp;
    for (const auto& r : results) {
        if (r.correct()) {
            ++s.correct;
            sp.push_back(r.speedup);
        }
        if (r.status == "no_device") ++s.not_run;
        s.tokens += r.tokens;
        s.cost_usd += r.cost_usd;
        s.wall_s += r.wall_s;
    }
    for (double p : kFastP) {
        int n = 0;
        for (const auto& r : results) n += r.correct() && (p == 0 || r.speedup > p);
        s.fast_p.emplace_back(p, s.tasks ? static_cast<double>(n) / s.tasks : 0);
    }
    if (!sp.empty()) {
        double lg = 0;
        for (double v : sp) lg += std::log(std::max(v, 1e-12));
        s.geomean_speedup = std::exp(lg / sp.size());
        std::sort(sp.begin(), sp.end());
        s.median_speedup = sp.size() % 2 ? sp[sp.size() / 2] : (sp[sp.size() / 2 - 1] + sp[sp.size() / 2]) / 2;
    }
    return s;
}

std::string report_markdown(const std::vector<TaskResult>& results, const ReportInfo& info) {
    Summary s = summarize(results);
    std::ostringstream o;
    o << "# kernelevo bench: " << md_cell(info.suite) << "\n\n";
    o << "Mode: " << info.mode << "; GPU: " << (info.gpu.empty() ? "none" : info.gpu) << " (" << info.arch << "); " << info.date
      << "\n\n";
    if (s.not_run)
        o << "**" << s.not_run << " of " << s.tasks << " task(s) not run: no GPU of this architecture here** (the figures below count them as not correct).\n\n";
    o << "| metric | value |\n| --- | --- |\n";
    for (auto [p, share] : s.fast_p)
        o << "| " << p_label(p) << " | " << fmt("%.3f", share) << " (" << std::lround(share * s.tasks) << "/" << s.tasks << ") |\n";
    o << "| geomean speedup (correct tasks) | " << (s.correct ? fmt("%.3fx", s.geomean_speedup) : "-") << " |\n";
    o << "| median speedup (correct tasks) | " << (s.correct ? fmt("%.3fx", s.median_speedup) : "-") << " |\n";
    o << "| tokens | " << tokens_str(static_cast<double>(s.tokens)) << " |\n";
    o << "| cost | $" << fmt("%.4f", s.cost_usd) << " |\n";
    o << "| wall time | " << duration(s.wall_s) << " |\n\n";
    o << "Speedup = LibTorch eager time / kernel time, both measured by kernelevo's validator in this run. "
         "fast_p = share of all tasks that are correct and more than p times faster.\n\n";
    bool any_compile = false, any_base = false;
    for (const auto& r : results) any_compile = any_compile || r.torch_compile_us >= 0, any_base = any_base || r.baseline_eager_us >= 0;
    o << "| task | status | speedup | kernel | LibTorch eager |" << (any_compile ? " PyTorch eager | torch.compile |" : "")
      << (any_base ? " baseline eager | baseline compile |" : "") << " tokens | cost | wall | note |\n";
    o << "| --- | --- | ---: | ---: | ---: |" << (any_compile ? " ---: | ---: |" : "") << (any_base ? " ---: | ---: |" : "")
      << " ---: | ---: | ---: | --- |\n";
    for (const auto& r : results) {
        o << "| " << md_cell(r.name) << " | " << r.status << " | " << (r.correct() ? fmt("%.3fx", r.speedup) : "-") << " | "
          << us_str(r.kernel_us) << " | " << us_str(r.reference_us) << " |";
        if (any_compile) o << " " << us_str(r.torch_eager_us) << " | " << us_str(r.torch_compile_us) << " |";
        if (any_base) o << " " << us_str(r.baseline_eager_us) << " | " << us_str(r.baseline_compile_us) << " |";
        o << " " << tokens_str(static_cast<double>(r.tokens)) << " | $" << fmt("%.4f", r.cost_usd) << " | "
          << duration(r.wall_s) << " | "
          << md_cell((r.note + (r.baseline_note.empty() ? "" : (r.note.empty() ? "" : "; ") + ("baseline: " + r.baseline_note))).substr(0, 200))
          << " |\n";
    }
    return o.str();
}

nlohmann::json report_json(const std::vector<TaskResult>& results, const ReportInfo& info) {
    Summary s = summarize(results);
    nlohmann::json fp = nlohmann::json::object();
    for (auto [p, share] : s.fast_p) fp[fmt("%g", p)] = share;
    nlohmann::json tasks = nlohmann::json::array();
    for (const auto& r : results) tasks.push_back(r.to_json());
    return {{"suite", info.suite},
            {"mode", info.mode},
            {"gpu", info.gpu},
            {"arch", info.arch},
            {"date", info.date},
            {"tasks", s.tasks},
            {"correct", s.correct},
            {"not_run_no_gpu", s.not_run},
            {"fast_p", fp},
            {"geomean_speedup", s.correct ? nlohmann::json(s.geomean_speedup) : nlohmann::json()},
            {"median_speedup", s.correct ? nlohmann::json(s.median_speedup) : nlohmann::json()},
            {"tokens", s.tokens},
            {"cost_usd", s.cost_usd},
            {"wall_s", s.wall_s},
            {"results", tasks}};
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

}  // namespace

std::string report_html(const std::vector<TaskResult>& results, const ReportInfo& info) {
    Summary s = summarize(results);
    std::ostringstream o;
    o << "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>kernelevo bench: " << xml_escape(info.suite)
      << "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;margin:12px 0}"
         "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}td.n{text-align:right}th{background:#f3f3f3}"
         ".bad{color:#a00}.warn{background:#fff3cd;padding:8px}</style></head><body>\n";
    o << "<h1>kernelevo bench</h1>\n<p>Suite <code>" << xml_escape(info.suite) << "</code>; mode " << xml_escape(info.mode) << "; GPU "
      << xml_escape(info.gpu.empty() ? "none" : info.gpu) << " (" << xml_escape(info.arch) << "); " << xml_escape(info.date) << "</p>\n";
    if (s.not_run)
        o << "<p class='warn'>" << s.not_run << " of " << s.tasks
          << " task(s) not run: no GPU of this architecture here (counted as not correct).</p>\n";
    o << "<table><tr><th>metric</th><th>value</th></tr>\n";
    for (auto [p, share] : s.fast_p)
        o << "<tr><td>" << p_label(p) << "</td><td class='n'>" << fmt("%.3f", share) << " (" << std::lround(share * s.tasks)
          << "/" << s.tasks << ")</td></tr>\n";
    o << "<tr><td>geomean speedup (correct tasks)</td><td class='n'>" << (s.correct ? fmt("%.3fx", s.geomean_speedup) : "-")
      << "</td></tr>\n<tr><td>median speedup (correct tasks)</td><td class='n'>"
      << (s.correct ? fmt("%.3fx", s.median_speedup) : "-") << "</td></tr>\n<tr><td>tokens</td><td class='n'>"
      << tokens_str(static_cast<double>(s.tokens)) << "</td></tr>\n<tr><td>cost</td><td class='n'>$" << fmt("%.4f", s.cost_usd)
      << "</td></tr>\n<tr><td>wall time</td><td class='n'>" << duration(s.wall_s) << "</td></tr></table>\n";
    o << "<p>Speedup = LibTorch eager time / kernel time, both measured by kernelevo's validator in this run; fast_p = "
         "share of all tasks correct and more than p&times; faster.</p>\n";
    o << "<div>" << speedup_bars(results) << "</div>\n<div>" << speedup_histogram(results) << "</div>\n<div>"
      << speedup_vs_tokens(results) << "</div>\n";
    bool any_compile = false, any_base = false;
    for (const auto& r : results) any_compile = any_compile || r.torch_compile_us >= 0, any_base = any_base || r.baseline_eager_us >= 0;
    o << "<h2>Tasks</h2>\n<table><tr><th>task</th><th>status</th><th>speedup</th><th>kernel</th><th>LibTorch eager</th>"
      << (any_compile ? "<th>PyTorch eager</th><th>torch.compile</th>" : "")
      << (any_base ? "<th>baseline eager</th><th>baseline compile</th>" : "")
      << "<th>tokens</th><th>cost</th><th>wall</th><th>note</th></tr>\n";
    for (const auto& r : results) {
        o << "<tr><td>" << xml_escape(r.name) << "</td><td" << (r.correct() ? "" : " class='bad'") << ">" << xml_escape(r.status)
          << "</td><td class='n'>" << (r.correct() ? fmt("%.3fx", r.speedup) : "-") << "</td><td class='n'>"
          << us_str(r.kernel_us) << "</td><td class='n'>" << us_str(r.reference_us) << "</td>";
        if (any_compile)
            o << "<td class='n'>" << us_str(r.torch_eager_us) << "</td><td class='n'>" << us_str(r.torch_compile_us) << "</td>";
        if (any_base)
            o << "<td class='n'>" << us_str(r.baseline_eager_us) << "</td><td class='n'>" << us_str(r.baseline_compile_us) << "</td>";
        o << "<td class='n'>" << tokens_str(static_cast<double>(r.tokens)) << "</td><td class='n'>$" << fmt("%.4f", r.cost_usd)
          << "</td><td class='n'>" << duration(r.wall_s) << "</td><td>" << xml_escape(r.note.substr(0, 300)) << "</td></tr>\n";
    }
    o << "</table>\n</body></html>\n";
    return o.str();
}

}  // namespace kevo::bench
