#include "common/text.h"
#include "evolve/report.h"
#include "evolve/waste.h"
#include "sol/sol.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

namespace kevo::evolve {
namespace {


std::string duration_str(double s) {
    long t = std::lround(s);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}


// About five round tick values covering [lo, hi]; whole numbers only when `integer`.
std::vector<double> ticks(double lo, double hi, bool integer = false) {
    double span = std::max(hi - lo, 1e-9);
    double step = std::pow(10.0, std::floor(std::log10(span / 5)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (span / (step * m) <= 6) {
            step *= m;
            break;
        }
    if (integer) step = std::max(1.0, std::round(step));
    std::vector<double> t;
    for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-6; v += step)
        t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);  // never "-0"
    return t;
}

// One colour per island (cycled past ten).
const char* island_colour(int island) {
    static const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    return kColours[static_cast<unsigned>(island) % 10];
}
const char* kBestColour = "#222";

struct Series {
    std::vector<double> x, y;
};
struct Dot {
    double x, y;
    int island;
};
struct Mark {
    double x;
    int island;   // -1: all islands (a migration)
};

// One chart: the best-so-far step line, candidates as dots coloured by island, migrations as
// dashed vertical lines and restarts as triangles on the x axis, in a w x h box at (ox, oy).
std::string chart(double ox, double oy, double w, double h, const std::string& title, const std::string& xlabel,
                  const Series& line, const std::vector<Dot>& dots, const std::vector<Mark>& migrations,
                  const std::vector<Mark>& restarts, bool integer_x, const std::function<std::string(double)>& xfmt) {
    const double left = 56, right = 16, top = 30, bottom = 44;
    double pw = w - left - right, ph = h - top - bottom;
    double xmax = 1, ymax = 1.0;
    for (double x : line.x) xmax = std::max(xmax, x);
    for (const Dot& d : dots) xmax = std::max(xmax, d.x);
    for (double y : line.y) ymax = std::max(ymax, y);
    for (const Dot& d : dots) ymax = std::max(ymax, d.y);
    ymax *= 1.1;
    auto px = [&](double x) { return ox + left + pw * x / xmax; };
    auto py = [&](double y) { return oy + top + ph * (1 - y / ymax); };
    std::ostringstream s;
    s << "<text x='" << ox + w / 2 << "' y='" << oy + 18 << "' text-anchor='middle' font-weight='bold'>"
      << xml_escape(title) << "</text>\n";
    for (double t : ticks(0, ymax)) {
        s << "<line x1='" << px(0) << "' x2='" << px(xmax) << "' y1='" << py(t) << "' y2='" << py(t)
          << "' stroke='#e4e4e4'/>\n<text x='" << px(0) - 6 << "' y='" << py(t) + 4 << "' text-anchor='end'>"
          << format_double("%.2gx", t) << "</text>\n";
    }
    for (double t : ticks(0, xmax, integer_x))
        s << "<text class='xtick' x='" << px(t) << "' y='" << py(0) + 16 << "' text-anchor='middle'>" << xfmt(t)
          << "</text>\n";
    // The reference's speed (1x).
    s << "<line x1='" << px(0) << "' x2='" << px(xmax) << "' y1='" << py(1) << "' y2='" << py(1)
      << "' stroke='#999' stroke-dasharray='4 3'/>\n";
    s << "<line x1='" << px(0) << "' x2='" << px(0) << "' y1='" << py(0) << "' y2='" << py(ymax)
      << "' stroke='#333'/>\n<line x1='" << px(0) << "' x2='" << px(xmax) << "' y1='" << py(0) << "' y2='" << py(0)
      << "' stroke='#333'/>\n";
    s << "<text x='" << ox + left + pw / 2 << "' y='" << oy + h - 6 << "' text-anchor='middle'>" << xml_escape(xlabel)
      << "</text>\n<text transform='translate(" << ox + 14 << "," << oy + top + ph / 2
      << ") rotate(-90)' text-anchor='middle'>speedup over reference</text>\n";
    if (line.x.empty() && dots.empty()) {
        s << "<text class='nodata' x='" << ox + left + pw / 2 << "' y='" << oy + top + ph / 2
          << "' text-anchor='middle' fill='#888' font-size='14'>no data yet: no generation committed</text>\n";
        return s.str();
    }
    for (const Mark& m : migrations)
        s << "<line class='migration' x1='" << px(m.x) << "' x2='" << px(m.x) << "' y1='" << py(0) << "' y2='"
          << py(ymax) << "' stroke='#6a6' stroke-dasharray='2 3'/>\n";
    for (const Mark& m : restarts) {
        double x = px(m.x), y = py(0);
        s << "<path class='restart' d='M" << x << "," << y - 9 << " l-5,9 l10,0 z' fill='" << island_colour(m.island)
          << "' stroke='#000' stroke-width='0.5'><title>island " << m.island << " restarted</title></path>\n";
    }
    for (const Dot& d : dots)
        s << "<circle class='candidate' cx='" << px(d.x) << "' cy='" << py(d.y) << "' r='3' fill='"
          << island_colour(d.island) << "' opacity='0.75'/>\n";
    if (!line.x.empty()) {
        s << "<polyline class='best' fill='none' stroke='" << kBestColour << "' stroke-width='2' points='";
        for (size_t i = 0; i < line.x.size(); ++i) {
            if (i) s << px(line.x[i]) << "," << py(line.y[i - 1]) << " ";
            s << px(line.x[i]) << "," << py(line.y[i]) << " ";
        }
        s << "'/>\n";
    }
    return s.str();
}

// What the marks and colours mean, in one row below the charts.
std::string legend(double x, double y, int islands, bool any_migration, bool any_restart) {
    std::ostringstream s;
    s << "<g class='legend'>\n";
    auto item = [&](const std::string& symbol, const std::string& label) {
        s << symbol << "<text x='" << x + 16 << "' y='" << y + 4 << "'>" << xml_escape(label) << "</text>\n";
        x += 24 + 7.0 * static_cast<double>(label.size());
    };
    item("<line x1='" + std::to_string(x) + "' x2='" + std::to_string(x + 12) + "' y1='" + std::to_string(y) +
             "' y2='" + std::to_string(y) + "' stroke='" + kBestColour + "' stroke-width='2'/>",
         "best so far");
    // Colours repeat after ten islands; so does the legend stop there.
    for (int i = 0; i < std::min(islands, 10); ++i)
        item("<circle cx='" + std::to_string(x + 6) + "' cy='" + std::to_string(y) + "' r='4' fill='" +
                 island_colour(i) + "'/>",
             "island " + std::to_string(i) + (islands > 10 && i == 9 ? " (colours repeat)" : ""));
    if (any_migration)
        item("<line x1='" + std::to_string(x + 6) + "' x2='" + std::to_string(x + 6) + "' y1='" +
                 std::to_string(y - 7) + "' y2='" + std::to_string(y + 7) + "' stroke='#6a6' stroke-dasharray='2 3'/>",
             "migration");
    if (any_restart)
        item("<path d='M" + std::to_string(x + 6) + "," + std::to_string(y - 5) + " l-5,9 l10,0 z' fill='#fff' stroke='#000'/>",
             "restart (island colour)");
    item("<line x1='" + std::to_string(x) + "' x2='" + std::to_string(x + 12) + "' y1='" + std::to_string(y) +
             "' y2='" + std::to_string(y) + "' stroke='#999' stroke-dasharray='4 3'/>",
         "reference (1x)");
    s << "</g>\n";
    return s.str();
}

// The candidates by outcome (pending ones in no count) and the fastest correct one.
struct Tally {
    int64_t ok = 0, failed = 0, duplicates = 0, repairs = 0, not_judged = 0;
    const store::Program* best = nullptr;
};

Tally tally_programs(const std::vector<store::Program>& programs) {
    Tally t;
    for (const auto& p : programs) {
        if (p.ok()) {
            ++t.ok;
            if (!t.best || p.speedup > t.best->speedup) t.best = &p;
        } else if (p.status == store::ProgramStatus::duplicate) {
            ++t.duplicates;
        } else if (not_judged(p)) {
            ++t.not_judged;
        } else if (p.status != store::ProgramStatus::pending) {
            ++t.failed;
        }
        if (p.origin == "repair") ++t.repairs;
    }
    return t;
}

}  // namespace

nlohmann::json best_baselines(store::Store& st, int64_t best_program) {
    nlohmann::json stored = st.get_meta(kBestBaselinesMeta).value_or(nlohmann::json::object());
    if (!stored.is_object()) stored = nlohmann::json::object();
    if (best_program > 0 && stored.value("program", int64_t{0}) == best_program) {
        stored.erase("program");
        return stored;
    }
    if (best_program > 0 && stored.contains("not_run") && !stored.contains("program")) return stored;
    return {{"not_run", best_program > 0 ? "this state records no PyTorch baseline times for its best program (a search "
                                           "that timed none, or one from before they were stored)"
                                         : "no correct kernel yet"}};
}

namespace {
// What a program's speedup is over: the fitness's baseline (search --fitness-baseline) or the reference.
std::string over_what(const store::Program& p) {
    const nlohmann::json& d = p.details;
    if (d.is_object() && d.contains("fitness_baseline") && d["fitness_baseline"].is_object())
        return d["fitness_baseline"].value("label", std::string("the fitness baseline"));
    return "the LibTorch reference";
}

// "PyTorch baselines (precision P, PyTorch V): PyTorch eager 1.234x (56.7 us), torch.compile ... not run: WHY\n"
std::string baselines_line(const nlohmann::json& b) {
    if (b.contains("not_run") && b["not_run"].is_string()) return "PyTorch baselines: not run: " + b["not_run"].get<std::string>() + "\n";
    std::string line = "PyTorch baselines (precision " + b.value("precision", std::string("?")) + ", PyTorch " +
                       b.value("torch_version", std::string("?")) + "):";
    bool first = true;
    for (const auto& [kind, v] : b.items()) {
        if (!v.is_object() || !v.contains("label")) continue;
        line += (first ? " " : "; ") + v.value("label", kind) + " ";
        first = false;
        if (v.contains("speedup") && v["speedup"].is_number())
            line += format_double("%.3f", v["speedup"].get<double>()) + "x (" + format_double("%.2f", v.value("us", 0.0)) + " us)";
        else
            line += "not run: " + (v.contains("not_run") && v["not_run"].is_string() ? v["not_run"].get<std::string>()
                                                                                  : std::string("no speedup on the timed shapes"));
    }
    return line + "\n";
}

// Batch mode: which requests went into which file, and what became of them ("" without batches).
std::string batches_line(store::Store& st) {
    auto batched = st.batch_requests();
    if (batched.empty()) return "";
    int files = 0, answered = 0, failed_lines = 0, waiting = 0;
    for (const auto& b : batched) {
        files = std::max(files, b.batch);
        if (!b.error.empty()) ++failed_lines;
        else if (st.find_llm_call(b.key)) ++answered;
        else ++waiting;
    }
    std::ostringstream s;
    s << "Batches: " << files << " file(s), " << batched.size() << " requests: " << answered << " answered, "
      << failed_lines << " failed, " << waiting << " waiting (last: " << batched.back().file << ")\n";
    return s.str();
}

// The two tables: best speedup by generation, and by tokens spent (each improvement).
std::string history_tables(const std::vector<store::Generation>& history) {
    std::ostringstream s;
    s << "\nBest speedup by generation:\n  gen     best   correct  failed    tokens      cost   elapsed\n";
    for (const auto& g : history) {
        char line[160];
        std::snprintf(line, sizeof line, "%5d  %6.3fx  %8lld  %6lld  %8s  %8s  %s\n", g.generation, g.best_speedup,
                      static_cast<long long>(g.ok), static_cast<long long>(g.failed),
                      tokens_str(static_cast<double>(g.tokens)).c_str(), ("$" + format_double("%.3f", g.cost_usd)).c_str(),
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
    return s.str();
}

// "\nMigrations: N; restarts: M (island I at generation G, ...)\n"
std::string events_line(const std::vector<store::Event>& events) {
    int migrations = 0;
    std::vector<std::string> restarts;
    for (const auto& e : events) {
        if (e.kind == "migration") ++migrations;
        if (e.kind == "restart")
            restarts.push_back("island " + e.detail.value("island", nlohmann::json(0)).dump() + " at generation " +
                               std::to_string(e.generation));
    }
    std::ostringstream s;
    s << "\nMigrations: " << migrations << "; restarts: " << restarts.size();
    for (size_t i = 0; i < restarts.size(); ++i) s << (i ? ", " : " (") << restarts[i] << (i + 1 == restarts.size() ? ")" : "");
    s << "\n";
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

    const Tally tally = tally_programs(programs);
    const int64_t ok = tally.ok, failed = tally.failed, dup = tally.duplicates, repairs = tally.repairs;
    const store::Program* best = tally.best;
    s << "Task " << name << " (" << structure.value("arch", "?") << "), " << history.size()
      << " generation(s) committed" << (reason.empty() ? "" : ", stopped: " + reason) << "\n";
    s << "Candidates: " << ok << " correct, " << failed << " failed, " << dup << " duplicates rejected, " << repairs
      << " repair attempts\n";
    s << "LLM: " << spent.calls << " requests, " << tokens_str(static_cast<double>(spent.tokens())) << " tokens ("
      << tokens_str(static_cast<double>(spent.prompt_tokens)) << " prompt), $" << format_double("%.4f", spent.cost_usd) << "; time "
      << duration_str(elapsed) << "\n";
    s << waste_of(st).text();
    s << batches_line(st);
    // Over what, at which precision: the judge's words for the timed reference ("precision pytorch (cuDNN TF32 on, ...)").
    const nlohmann::json* rp = best && best->details.contains("reference_precision") ? &best->details["reference_precision"] : nullptr;
    std::string timed = rp && rp->is_object() ? rp->value("timing", std::string()) : std::string();
    // Over the fitness's baseline (search --fitness-baseline): its precision, not the reference's.
    const nlohmann::json* fb = best && best->details.is_object() && best->details.contains("fitness_baseline")
                                   ? &best->details["fitness_baseline"] : nullptr;
    if (fb && fb->is_object()) timed = "precision " + fb->value("precision", std::string("?"));
    if (best)
        s << "Best: " << format_double("%.3f", best->speedup) << "x over " << over_what(*best) << (timed.empty() ? "" : " (" + timed + ")")
          << " (program #" << best->id << ", generation " << best->generation
          << ", island " << best->island << ", " << best->origin << ")"
          << (sol::result_summary(best->details).empty() ? "" : ": " + sol::result_summary(best->details)) << "\n";
    else
        s << "Best: no correct kernel yet\n";
    if (best) s << baselines_line(best_baselines(st, best->id));

    s << history_tables(history) << events_line(events);
    return s.str();
}

std::string report_svg(store::Store& st) {
    auto history = st.history();
    Series by_gen, by_tokens;
    for (const auto& g : history) {
        by_gen.x.push_back(g.generation);
        by_gen.y.push_back(g.best_speedup);
        by_tokens.x.push_back(static_cast<double>(g.tokens));
        by_tokens.y.push_back(g.best_speedup);
    }
    std::vector<Dot> dots;
    int islands = st.get_meta("structure").value_or(nlohmann::json::object()).value("islands", 0);
    for (const auto& p : st.programs()) {
        islands = std::max(islands, p.island + 1);
        if (p.ok()) dots.push_back({static_cast<double>(p.generation), p.speedup, p.island});
    }
    std::vector<Mark> migrations, restarts;
    for (const auto& e : st.events()) {
        if (e.kind == "migration" && (migrations.empty() || migrations.back().x != e.generation))
            migrations.push_back({static_cast<double>(e.generation), -1});
        if (e.kind == "restart")
            restarts.push_back({static_cast<double>(e.generation), e.detail.value("island", 0)});
    }
    std::string name = st.get_meta("task_name").value_or("?").get<std::string>();
    const double w = 480, h = 320, legend_h = 30;
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << 2 * w << "' height='" << h + 30 + legend_h
      << "' viewBox='0 0 " << 2 * w << " " << h + 30 + legend_h << "' font-family='sans-serif' font-size='12'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << w << "' y='18' text-anchor='middle' font-size='14'>KernelEvo search: " << xml_escape(name)
      << "</text>\n"
      << chart(0, 30, w, h, "Best speedup by generation", "generation", by_gen, dots, migrations, restarts, true,
               [](double v) { return format_double("%.0f", v); })
      << chart(w, 30, w, h, "Best speedup by tokens spent", "LLM tokens", by_tokens, {}, {}, {}, true, tokens_str)
      << legend(60, h + 30 + legend_h / 2, islands, !migrations.empty(), !restarts.empty()) << "</svg>\n";
    return s.str();
}

namespace {
// "Best speedup by generation": the best-so-far step line and every correct candidate as a dot (one
// series per island; the k-th dot of a generation sits 1e-6 * k right of it, so that dots of one
// generation share its column), migrations as dashed lines.
nlohmann::json generation_chart(store::Store& st, const std::vector<store::Program>& programs) {
    const std::string title = "Best speedup by generation";
    int64_t judged = 0, correct = 0;
    for (const auto& p : programs) {
        using S = store::ProgramStatus;
        if (p.status != S::pending && p.status != S::duplicate && !not_judged(p)) ++judged;
        if (p.ok()) ++correct;
    }
    const auto history = st.history();
    if (judged == 0) return {{"title", title}, {"empty", "no candidate was evaluated"}};
    if (correct == 0 && history.empty())
        return {{"title", title}, {"empty", "no correct candidate yet (" + std::to_string(judged) + " evaluated)"}};
    std::map<double, std::map<std::string, double>> points;  // x -> series label -> y
    for (const auto& g : history)
        if (g.best_speedup > 0) points[g.generation]["best so far"] = g.best_speedup;  // 0: none correct yet
    std::map<int, int> in_generation;
    std::vector<std::string> labels = {"best so far"};
    for (const auto& p : programs) {
        if (!p.ok()) continue;
        const std::string label = p.island < 10 ? "island " + std::to_string(p.island) : "islands 10 and above";
        if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
        points[p.generation + 1e-6 * ++in_generation[p.generation]][label] = p.speedup;
    }
    std::sort(labels.begin() + 1, labels.end());
    nlohmann::json xs = nlohmann::json::array(), series = nlohmann::json::array();
    for (const auto& [x, ys] : points) xs.push_back(x);
    for (const auto& label : labels) {
        nlohmann::json data = nlohmann::json::array();
        for (const auto& [x, ys] : points) data.push_back(ys.count(label) ? nlohmann::json(ys.at(label)) : nlohmann::json());
        const bool best = label == "best so far";
        const int island = best || label.find("above") != std::string::npos ? 7 : std::stoi(label.substr(7));
        series.push_back({{"label", label}, {"color", best ? kBestColour : island_colour(island)},
                          {"kind", best ? "step" : "points"}, {"data", data}});
    }
    nlohmann::json vlines = nlohmann::json::array();
    std::vector<std::string> restarts;
    for (const auto& e : st.events()) {
        if (e.kind == "migration" && (vlines.empty() || vlines.back() != e.generation)) vlines.push_back(e.generation);
        if (e.kind == "restart")
            restarts.push_back("island " + e.detail.value("island", nlohmann::json(0)).dump() + " at generation " +
                               std::to_string(e.generation));
    }
    std::string caption = "Dashed grey: the reference (1x). " +
                          (vlines.empty() ? std::string() : "Dashed green: migrations. ") +
                          (correct ? "" : "No candidate is correct yet. ");
    for (size_t i = 0; i < restarts.size(); ++i) caption += (i ? ", " : "Restarts: ") + restarts[i];
    return {{"title", title}, {"xlabel", "generation"}, {"ylabel", "speedup over reference"}, {"x", "int"}, {"ref", 1},
            {"xs", xs}, {"series", series}, {"vlines", vlines}, {"caption", caption}};
}

// "Best speedup by LLM tokens spent": the best-so-far step line over the cumulative tokens.
nlohmann::json tokens_chart(store::Store& st) {
    const std::string title = "Best speedup by LLM tokens spent";
    const auto history = st.history();
    if (history.empty()) return {{"title", title}, {"empty", "no generation committed yet"}};
    if (history.back().tokens == 0) return {{"title", title}, {"empty", "no LLM tokens were spent"}};
    nlohmann::json xs = nlohmann::json::array(), ys = nlohmann::json::array();
    for (const auto& g : history) {
        if (!xs.empty() && xs.back() == g.tokens) ys.back() = g.best_speedup > 0 ? nlohmann::json(g.best_speedup) : nlohmann::json();
        else xs.push_back(g.tokens), ys.push_back(g.best_speedup > 0 ? nlohmann::json(g.best_speedup) : nlohmann::json());
    }
    return {{"title", title}, {"xlabel", "LLM tokens (cumulative)"}, {"ylabel", "speedup over reference"}, {"x", "tokens"},
            {"ref", 1}, {"xs", xs},
            {"series", {{{"label", "best so far"}, {"color", kBestColour}, {"kind", "step"}, {"data", ys}}}}};
}
}  // namespace

nlohmann::json report_charts(store::Store& st) {
    const auto programs = st.programs();
    return {generation_chart(st, programs), tokens_chart(st)};
}

nlohmann::json report_json(store::Store& st) {
    auto programs = st.programs();
    store::Spent spent = st.spent();
    nlohmann::json structure = st.get_meta("structure").value_or(nlohmann::json::object());
    const Tally tally = tally_programs(programs);
    const int64_t ok = tally.ok, failed = tally.failed, dup = tally.duplicates, repairs = tally.repairs;
    const store::Program* best = tally.best;
    nlohmann::json generations = nlohmann::json::array();
    for (const auto& g : st.history())
        generations.push_back({{"generation", g.generation}, {"best_speedup", g.best_speedup},
                               {"best_program", g.best_program}, {"ok", g.ok}, {"failed", g.failed},
                               {"tokens", g.tokens}, {"cost_usd", g.cost_usd}, {"elapsed_s", g.elapsed_s}});
    nlohmann::json migrations = nlohmann::json::array(), restarts = nlohmann::json::array();
    for (const auto& e : st.events()) {
        if (e.kind == "migration")
            migrations.push_back({{"generation", e.generation}, {"from", e.detail.value("from", -1)},
                                  {"to", e.detail.value("to", -1)},
                                  {"programs", e.detail.value("programs", nlohmann::json::array())}});
        if (e.kind == "restart")
            restarts.push_back({{"generation", e.generation}, {"island", e.detail.value("island", -1)}});
    }
    nlohmann::json best_json = nullptr;
    if (best)
        best_json = {{"program", best->id}, {"speedup", best->speedup}, {"generation", best->generation},
                     {"island", best->island}, {"origin", best->origin}, {"baselines", best_baselines(st, best->id)}};
    return {{"task", st.get_meta("task_name").value_or("").get<std::string>()},
            {"arch", structure.value("arch", "")},
            {"islands", structure.value("islands", 0)},
            {"stop_reason", st.get_meta("stop_reason").value_or("").get<std::string>()},
            {"elapsed_s", st.get_meta("elapsed_s").value_or(0.0).get<double>()},
            {"candidates", {{"ok", ok}, {"failed", failed}, {"duplicates", dup}, {"repairs", repairs},
                            {"not_judged", tally.not_judged}}},
            {"llm", {{"requests", spent.calls}, {"prompt_tokens", spent.prompt_tokens},
                     {"completion_tokens", spent.completion_tokens}, {"cost_usd", spent.cost_usd}}},
            {"waste", waste_of(st).to_json()},
            {"best", best_json},
            {"generations", generations},
            {"migrations", migrations},
            {"restarts", restarts}};
}

namespace {
const char* kCandidateColumns[] = {"id", "generation", "island", "origin", "attempt", "parent_id", "status",
                                   "speedup", "kernel_us", "reference_us", "key", "norm_hash", "llm_call_id", "created"};

nlohmann::json candidate_row(const store::Program& p) {
    auto num = [&](const char* k) {
        return p.details.is_object() && p.details.contains(k) && p.details[k].is_number() ? p.details[k].get<double>() : 0.0;
    };
    return {{"id", p.id}, {"generation", p.generation}, {"island", p.island}, {"origin", p.origin},
            {"attempt", p.attempt}, {"parent_id", p.parent_id}, {"status", p.status}, {"speedup", p.speedup},
            {"kernel_us", num("kernel_us")}, {"reference_us", num("reference_us")}, {"key", p.key},
            {"norm_hash", p.norm_hash}, {"llm_call_id", p.llm_call_id}, {"created", p.created}};
}

std::string csv_field(const nlohmann::json& v) {
    if (!v.is_string()) return v.dump();
    const std::string& t = v.get_ref<const std::string&>();
    if (t.find_first_of(",\"\r\n") == std::string::npos) return t;
    std::string out = "\"";
    for (char c : t) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}
}  // namespace

std::string candidates_csv(store::Store& st) {
    std::ostringstream s;
    for (size_t i = 0; i < std::size(kCandidateColumns); ++i) s << (i ? "," : "") << kCandidateColumns[i];
    s << "\n";
    for (const auto& p : st.programs()) {
        nlohmann::json row = candidate_row(p);
        for (size_t i = 0; i < std::size(kCandidateColumns); ++i) s << (i ? "," : "") << csv_field(row[kCandidateColumns[i]]);
        s << "\n";
    }
    return s.str();
}

nlohmann::json candidates_json(store::Store& st) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : st.programs()) {
        nlohmann::json row = candidate_row(p);
        row["feedback"] = p.feedback;
        row["source"] = p.source;
        out.push_back(std::move(row));
    }
    return out;
}


}  // namespace kevo::evolve
