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
#include "common/hash.h"
#include "bench/plots.h"
#include "serve/page.h"

namespace kevo::bench {

namespace fs = std::filesystem;

namespace {

const double kFastP[] = {0, 1, 1.5, 2};

using detail::fmt;
using detail::tokens_str;


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

std::string us_str(double us) {
    if (us <= 0) return "-";
    if (us >= 1000) return fmt("%.3f ms", us / 1000);
    return fmt("%.1f us", us);
}

std::string p_label(double p) { return p == 0 ? "fast_0 (correct)" : "fast_" + fmt("%g", p); }

}  // namespace

std::vector<fs::path> suite_tasks(const fs::path& suite) {
    std::error_code ec;
    if (!fs::is_directory(suite, ec)) throw SettingError({settings::kSuite}, "{bench.suite} " + suite.string() + ": not a directory");
    if (fs::is_regular_file(suite / "task.json", ec)) return {suite / "task.json"};
    std::vector<fs::path> tasks;
    for (const auto& e : fs::directory_iterator(suite)) {
        // ".NAME.install-*" is what an interrupted import leaves; hidden folders are never tasks.
        if (e.path().filename().string().rfind('.', 0) == 0) continue;
        if (e.is_directory() && fs::is_regular_file(e.path() / "task.json", ec)) tasks.push_back(e.path() / "task.json");
    }
    std::sort(tasks.begin(), tasks.end());
    if (tasks.empty())
        throw SettingError({settings::kSuite},
                           "{bench.suite} " + suite.string() + ": no task folders (DIR/NAME/task.json), e.g. from `kernelevo import kernelbench`");
    return tasks;
}

fs::path find_kernel(const fs::path& dir, const std::string& folder, const std::string& name, const std::string& arch) {
    std::error_code ec;
    for (const std::string& n : {folder, name}) {
        if (fs::is_regular_file(dir / (n + ".cu"), ec)) return dir / (n + ".cu");
        for (const std::string& f : {arch + ".cu", std::string("kernel.cu")})
            if (fs::is_regular_file(dir / n / f, ec)) return dir / n / f;
        if (fs::is_directory(dir / n, ec)) {
            std::vector<fs::path> cus;
            for (const auto& e : fs::directory_iterator(dir / n))
                if (e.path().extension() == ".cu") cus.push_back(e.path());
            if (cus.size() == 1) return cus[0];
        }
    }
    return {};
}

std::vector<fs::path> kernel_candidates(const fs::path& dir, const std::string& folder, const std::string& name) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const std::string& n : {folder, name}) {
        if (fs::exists(dir / (n + ".cu"), ec)) out.push_back(dir / (n + ".cu"));
        if (fs::is_directory(dir / n, ec))
            for (const auto& e : fs::directory_iterator(dir / n, ec))
                if (e.path().extension() == ".cu") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string inputs_key(const std::vector<fs::path>& files) {
    std::string all;
    for (const auto& f : files) {
        std::error_code ec;
        // Only regular files are read: a FIFO named .cu would block the hash.
        const std::string h = fs::is_regular_file(f, ec) ? sha256_file(f) : fs::exists(f, ec) ? "not a regular file" : "absent";
        all += f.string() + '\0' + h + '\n';
    }
    return sha256_hex(all);
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
    if (!std::getline(in, line)) throw SettingError({settings::kBaseline}, "{bench.baseline} " + tsv.string() + ": empty file");
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
        throw SettingError({settings::kBaseline},
                           "{bench.baseline} " + tsv.string() + ": expected KernelBench's columns level, file and *_eager_mean_ms");
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
                     {"done", done},       {"correct", correct()},
                     {"speedup", no_kernel() ? nlohmann::json() : nlohmann::json(speedup)},
                     {"kernel_us", kernel_us}, {"reference_us", reference_us}, {"tokens", tokens},
                     {"cost_usd", cost_usd}, {"wall_s", wall_s},     {"kernel", kernel},
                     {"note", note},       {"inputs", inputs}};
    // The PyTorch baselines: a time, or null and the reason in torch.not_run; never a zero.
    j["torch"] = torch.to_json();
    j["torch_eager_us"] = torch.to_json()["eager_us"];
    j["torch_compile_us"] = torch.to_json()["compile_us"];
    nlohmann::json over = nlohmann::json::object();
    for (const auto& k : baseline::kinds()) {
        auto it = speedup_over.find(k);
        over[k] = it != speedup_over.end() && it->second > 0 ? nlohmann::json(it->second) : nlohmann::json();
    }
    j["speedup_over"] = over;
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
    r.speedup = j.contains("speedup") && j["speedup"].is_number() ? j["speedup"].get<double>() : 0.0;
    r.kernel_us = j.value("kernel_us", 0.0);
    r.reference_us = j.value("reference_us", 0.0);
    r.tokens = j.value("tokens", int64_t{0});
    r.cost_usd = j.value("cost_usd", 0.0);
    r.wall_s = j.value("wall_s", 0.0);
    r.kernel = j.value("kernel", "");
    r.note = j.value("note", "");
    r.inputs = j.value("inputs", "");
    if (j.contains("torch") && j["torch"].is_object()) r.torch = baseline::Result::from_json(j["torch"]);
    if (j.contains("speedup_over") && j["speedup_over"].is_object())
        for (auto it = j["speedup_over"].begin(); it != j["speedup_over"].end(); ++it)
            if (it.value().is_number()) r.speedup_over[it.key()] = it.value().get<double>();
    if (j.contains("baseline_eager_us") && j["baseline_eager_us"].is_number()) r.baseline_eager_us = j["baseline_eager_us"];
    if (j.contains("baseline_compile_us") && j["baseline_compile_us"].is_number()) r.baseline_compile_us = j["baseline_compile_us"];
    r.baseline_note = j.value("baseline_note", "");
    return r;
}

std::string TaskResult::status_text() const { return no_kernel() ? "no kernel" : status; }

double TaskResult::over(const std::string& kind) const {
    auto it = speedup_over.find(kind);
    return it == speedup_over.end() ? 0 : it->second;
}

namespace {

double geomean(const std::vector<double>& v) {
    double lg = 0;
    for (double x : v) lg += std::log(std::max(x, 1e-12));
    return v.empty() ? 0 : std::exp(lg / v.size());
}

// fast_p and the geometric mean over one baseline, among the tasks where it has a time.
OverBaseline over_baseline(const std::vector<TaskResult>& results, const std::string& kind) {
    OverBaseline o;
    o.kind = kind;
    std::vector<double> sp;
    for (const auto& r : results) {
        if (!r.torch.ran(kind)) {
            if (o.not_run.empty()) o.not_run = r.torch.why_not(kind);
            continue;
        }
        ++o.measured;
        if (r.correct() && r.over(kind) > 0) ++o.correct, sp.push_back(r.over(kind));
    }
    for (double p : kFastP) {
        int n = 0;
        for (double v : sp) n += p == 0 || v > p;
        o.fast_p.emplace_back(p, o.measured ? static_cast<double>(n) / o.measured : 0);
    }
    o.geomean_speedup = geomean(sp);
    if (o.measured) o.not_run.clear();
    return o;
}

}  // namespace

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
        if (r.no_kernel()) ++s.no_kernel;
        s.tokens += r.tokens;
        s.cost_usd += r.cost_usd;
        s.wall_s += r.wall_s;
    }
    for (double p : kFastP) {
        int n = 0;
        for (const auto& r : results) n += r.correct() && (p == 0 || r.speedup > p);
        s.fast_p.emplace_back(p, s.tasks ? static_cast<double>(n) / s.tasks : 0);
    }
    for (const auto& k : baseline::kinds()) s.baselines.push_back(over_baseline(results, k));
    for (const auto& r : results) {
        const std::string p = r.torch.precision.empty() ? "" : r.torch.precision;
        if (p.empty()) continue;
        s.precision = s.precision.empty() || s.precision == p ? p : "mixed (per task)";
    }
    if (!sp.empty()) {
        s.geomean_speedup = geomean(sp);
        std::sort(sp.begin(), sp.end());
        s.median_speedup = sp.size() % 2 ? sp[sp.size() / 2] : (sp[sp.size() / 2 - 1] + sp[sp.size() / 2]) / 2;
    }
    return s;
}

namespace {

// The summary's rows, for the Markdown table and the page alike: over the reference, then over each
// PyTorch baseline (among the tasks with its time; "not run: <reason>" when none has one).
std::vector<std::pair<std::string, std::string>> metric_rows(const Summary& s) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (auto [p, share] : s.fast_p)
        rows.emplace_back(p_label(p), fmt("%.3f", share) + " (" + std::to_string(std::lround(share * s.tasks)) + "/" + std::to_string(s.tasks) +
                                          (s.not_run ? " tasks; " + std::to_string(std::lround(share * s.tasks)) + " of " +
                                                           std::to_string(s.tasks - s.not_run) + " run" : "") + ")");
    rows.emplace_back("geomean speedup (correct tasks)", s.correct ? fmt("%.3fx", s.geomean_speedup) : "-");
    rows.emplace_back("median speedup (correct tasks)", s.correct ? fmt("%.3fx", s.median_speedup) : "-");
    const std::string prec = s.precision.empty() ? "" : ", precision " + s.precision;
    for (const auto& b : s.baselines) {
        const std::string over = " over " + baseline::label(b.kind) + prec;
        if (!b.measured) {
            rows.emplace_back("speedup" + over, b.not_run.empty() ? "not run: no task" : b.not_run);
            continue;
        }
        for (auto [p, share] : b.fast_p)
            rows.emplace_back(p_label(p) + over, fmt("%.3f", share) + " (" + std::to_string(std::lround(share * b.measured)) + "/" +
                                                     std::to_string(b.measured) + " tasks with its time)");
        rows.emplace_back("geomean speedup" + over + " (correct tasks)", b.correct ? fmt("%.3fx", b.geomean_speedup) : "-");
    }
    rows.emplace_back("tokens", tokens_str(static_cast<double>(s.tokens)));
    rows.emplace_back("cost", "$" + fmt("%.4f", s.cost_usd));
    rows.emplace_back("wall time", duration(s.wall_s));
    return rows;
}

const char* const kExplained =
    "Speedup = LibTorch reference time / kernel time, both measured by kernelevo's validator in this run; over PyTorch eager, "
    "torch.compile (Inductor, default mode) and AOTInductor (with --aoti): their time / the kernel's, timed in the same run on the validator's inputs "
    "under the task's precision policy. fast_p = share of all tasks (of those with the baseline's time, for a baseline) "
    "that are correct and more than p times faster.";

// One task's row (plain text; the caller escapes): its headers first.
std::vector<std::string> task_header(bool published) {
    std::vector<std::string> h = {"task", "status", "speedup", "kernel", "LibTorch reference", "precision"};
    for (const auto& k : baseline::kinds()) h.push_back(baseline::label(k)), h.push_back("speedup over " + baseline::column(k));
    if (published) h.push_back("baseline eager"), h.push_back("baseline compile");
    for (const char* t : {"tokens", "cost", "wall", "note"}) h.push_back(t);
    return h;
}

std::vector<std::string> task_cells(const TaskResult& r, bool published) {
    std::vector<std::string> c = {r.name, r.status_text(), r.correct() ? fmt("%.3fx", r.speedup) : "-", us_str(r.kernel_us), us_str(r.reference_us),
                                  r.torch.precision.empty() ? "-" : r.torch.precision};
    for (const auto& k : baseline::kinds()) {
        c.push_back(r.torch.ran(k) ? us_str(r.torch.us(k)) : r.torch.why_not(k).substr(0, 160));
        c.push_back(!r.torch.ran(k) ? "not run" : r.correct() && r.over(k) > 0 ? fmt("%.3fx", r.over(k)) : "-");
    }
    if (published) c.push_back(us_str(r.baseline_eager_us)), c.push_back(us_str(r.baseline_compile_us));
    c.push_back(tokens_str(static_cast<double>(r.tokens)));
    c.push_back("$" + fmt("%.4f", r.cost_usd));
    c.push_back(duration(r.wall_s));
    c.push_back((r.note + (r.baseline_note.empty() ? "" : (r.note.empty() ? "" : "; ") + ("baseline: " + r.baseline_note))).substr(0, 300));
    return c;
}

bool any_published(const std::vector<TaskResult>& results) {
    for (const auto& r : results)
        if (r.baseline_eager_us >= 0) return true;
    return false;
}

bool numeric(const std::string& cell) {
    return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '$' || cell == "-");
}

}  // namespace

std::string report_markdown(const std::vector<TaskResult>& results, const ReportInfo& info) {
    Summary s = summarize(results);
    std::ostringstream o;
    o << "# kernelevo bench: " << md_cell(info.suite) << "\n\n";
    o << "Mode: " << info.mode << "; GPU: " << (info.gpu.empty() ? "none" : info.gpu) << " (" << info.arch << "); " << info.date
      << "\n\n";
    if (s.not_run)
        o << "**" << s.not_run << " of " << s.tasks << " task(s) not run: no GPU of this architecture here** (fast_p below is over all tasks; the counts say how many of those run).\n\n";
    o << "| metric | value |\n| --- | --- |\n";
    for (const auto& [k, v] : metric_rows(s)) o << "| " << md_cell(k) << " | " << md_cell(v) << " |\n";
    o << "\n" << kExplained << "\n\n";
    const bool published = any_published(results);
    const auto head = task_header(published);
    o << "|";
    for (const auto& h : head) o << " " << h << " |";
    o << "\n|";
    for (size_t i = 0; i < head.size(); ++i) o << (i < 2 || head[i] == "precision" || head[i] == "note" ? " --- |" : " ---: |");
    o << "\n";
    for (const auto& r : results) {
        o << "|";
        for (const auto& c : task_cells(r, published)) o << " " << md_cell(c) << " |";
        o << "\n";
    }
    return o.str();
}

nlohmann::json report_json(const std::vector<TaskResult>& results, const ReportInfo& info) {
    Summary s = summarize(results);
    nlohmann::json fp = nlohmann::json::object();
    for (auto [p, share] : s.fast_p) fp[fmt("%g", p)] = share;
    nlohmann::json tasks = nlohmann::json::array();
    for (const auto& r : results) tasks.push_back(r.to_json());
    // Per PyTorch baseline: fast_p and the geometric mean among the tasks with its time, or why none has one.
    nlohmann::json over = nlohmann::json::object();
    for (const auto& b : s.baselines) {
        nlohmann::json bfp = nlohmann::json::object();
        for (auto [p, share] : b.fast_p) bfp[fmt("%g", p)] = share;
        over[b.kind] = b.measured ? nlohmann::json{{"label", baseline::label(b.kind)}, {"tasks_measured", b.measured}, {"correct", b.correct},
                                                   {"fast_p", bfp}, {"geomean_speedup", b.correct ? nlohmann::json(b.geomean_speedup) : nlohmann::json()}}
                                  : nlohmann::json{{"label", baseline::label(b.kind)}, {"tasks_measured", 0}, {"not_run", b.not_run}};
    }
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
            {"over_baselines", over},
            {"precision", s.precision},
            {"tokens", s.tokens},
            {"cost_usd", s.cost_usd},
            {"wall_s", s.wall_s},
            {"results", tasks}};
}


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
          << " task(s) not run: no GPU of this architecture here (fast_p is over all tasks; the counts say how many of those run; the charts show them as not run).</p>\n";
    o << "<table><tr><th>metric</th><th>value</th></tr>\n";
    for (const auto& [k, v] : metric_rows(s))
        o << "<tr><td>" << xml_escape(k) << "</td><td class='n'>" << xml_escape(v) << "</td></tr>\n";
    o << "</table>\n<p>" << xml_escape(kExplained) << "</p>\n";
    o << serve::charts_html(detail::charts(results));
    const bool published = any_published(results);
    o << "<h2>Tasks</h2>\n<table><tr>";
    for (const auto& h : task_header(published)) o << "<th>" << xml_escape(h) << "</th>";
    o << "</tr>\n";
    for (const auto& r : results) {
        o << "<tr>";
        const auto cells = task_cells(r, published);
        for (size_t i = 0; i < cells.size(); ++i)
            o << "<td" << (i == 1 && !r.correct() ? " class='bad'" : i > 1 && numeric(cells[i]) ? " class='n'" : "") << ">"
              << xml_escape(cells[i]) << "</td>";
        o << "</tr>\n";
    }
    o << "</table>\n</body></html>\n";
    return o.str();
}

}  // namespace kevo::bench
