// `kernelevo search --model-dir DIR`: an ordinary `kernelevo search` per region of a model folder
// (python/kernelevo/model_plan.md), as child processes of this executable (tool/model/jobs.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "commands/search_command.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/log.h"
#include "common/process.h"
#include "common/text.h"
#include "model/gains.h"
#include "model/jobs.h"
#include "model/plan.h"

namespace kevo {
namespace {

using model::RegionStatus;
using model::RunStatus;

std::atomic<int> g_model_sigints{0};
extern "C" void on_model_sigint(int) { g_model_sigints.fetch_add(1); }

// What a region's search gets from the user's command line: every option set on `search` (and
// --sandbox of kernelevo itself) except those the model search decides per region.
std::vector<std::string> passed_on_options(const CLI::App& cmd) {
    static const std::set<std::string> own = {"--model-dir", "--model-jobs", "--dry-run", "--region", "--out", "--state",
                                              "--max-time",  "--json",       "--help",    "--task",
                                              "--budget-usd", "--budget-tokens"};  // (split like the time)
    std::vector<std::string> args;
    for (const CLI::Option* o : cmd.get_options()) {
        if (o->count() == 0 || o->get_lnames().empty()) continue;
        const std::string name = "--" + o->get_lnames().front();
        if (own.count(name)) continue;
        if (o->get_expected_max() == 0) {
            for (size_t i = 0; i < o->count(); ++i) args.push_back(name);
            continue;
        }
        for (const auto& v : o->results()) {
            args.push_back(name);
            args.push_back(v);
        }
    }
    return args;
}

std::string clock_text(double s) {
    const long t = std::lround(s);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

// The last line of a region's log (its search's error, for a region that failed), at most 300 characters.
std::string last_log_line(const fs::path& log) {
    std::string text;
    try {
        text = read_file(log);
    } catch (const UsageError&) {
        return "";
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    const size_t nl = text.rfind('\n');
    std::string line = printable(nl == std::string::npos ? text : text.substr(nl + 1));
    return line.size() > 300 ? line.substr(0, 300) + " ..." : line;
}

std::string budget_text(long s) { return s > 0 ? std::to_string(s) + " s" : "no time limit"; }

// Whether the region's search left a best that entered the cache (a kernel the model can load).
bool cached_best(const model::RegionRun& r) { return r.best_speedup && r.not_cached.empty(); }

// "-" for a best that did not enter the cache: the table lists kernels the model can load.
std::string speedup_text(const model::RegionRun& r) {
    return cached_best(r) ? format_double("%.2fx", *r.best_speedup) : std::string("-");
}

// The region's record after its search: status, exit code, best speedups (from its --json output).
void record_end(model::RegionRun& run, const model::JobResult& r, const fs::path& json_file) {
    nlohmann::json j;
    try {
        if (fs::exists(json_file)) j = nlohmann::json::parse(read_file(json_file));
    } catch (const std::exception&) {
        j = nullptr;  // (a search that crashed may leave half a line)
    }
    run.status = model::region_status(r, j);
    run.exit_code = r.started ? (r.signal ? 128 + r.signal : r.exit_code) : kExitUsage;
    run.elapsed_s = r.seconds;
    run.stop_reason = j.is_object() ? j.value("stop_reason", "") : "";
    if (j.is_object() && j["best"].is_object()) {
        const auto& b = j["best"];
        run.best_speedup = b.value("speedup_over_reference", b.value("speedup", 0.0));
        run.not_cached = b.value("cached", true) ? "" : b.value("cache_refused", std::string("not written to the cache"));
        run.over = nlohmann::json::object();
        if (b.contains("baselines") && b["baselines"].is_object())
            for (const auto& [k, v] : b["baselines"].items())
                if (v.is_object() && v.contains("speedup") && v["speedup"].is_number()) run.over[k] = v["speedup"];
    } else if (run.status != RunStatus::done) {
        run.best_speedup.reset();  // (a region done before keeps its best; a rerun that failed says so)
    }
}

// The region's name in the table: "i2h (+31)" where 31 repeats run its kernel too (their share is in its own).
std::string region_label(const model::Plan& plan, const std::string& name) {
    const auto n = std::count_if(plan.regions.begin(), plan.regions.end(),
                                 [&](const auto& g) { return g.status == RegionStatus::repeat && g.same_as == name; });
    return printable_name(name) + (n ? " (+" + std::to_string(n) + ")" : "");
}

// The table of the regions; their names come from plan.json, which a problem file's import wrote:
// shown printable (common/text.h), no control character of theirs reaches the terminal.
void print_table(const model::Plan& plan, const model::Summary& s, std::ostream& shown) {
    std::ostringstream os;
    size_t w = 6;
    bool repeats = false;
    for (const auto& r : s.regions) {
        const std::string label = region_label(plan, r.name);
        w = std::max(w, label.size());
        repeats = repeats || label != r.name;
    }
    std::set<std::string> over;
    for (const auto& r : s.regions)
        for (const auto& [k, v] : r.over.items()) over.insert(k);
    auto pad = [](std::string t, size_t n) { return t.size() < n ? t + std::string(n - t.size(), ' ') : t; };
    os << pad("region", w) << "  share   budget     status   exit  best";
    for (const auto& k : over) os << "  over " << k;
    os << "\n";
    for (const auto& r : s.regions) {
        const model::Region* g = nullptr;
        for (const auto& x : plan.regions)
            if (x.task_name == r.task_name) g = &x;
        os << pad(region_label(plan, r.name), w) << "  " << pad(format_double("%.1f%%", 100 * (g ? g->share : 0)), 6) << "  "
           << pad(r.budget_s > 0 ? std::to_string(r.budget_s) + " s" : "-", 9) << "  "
           << pad(model::run_status_name(r.status), 7) << "  "
           << pad(r.exit_code ? std::to_string(*r.exit_code) : "-", 4) << "  " << pad(speedup_text(r), 6);
        for (const auto& k : over)
            os << "  " << pad(r.not_cached.empty() && r.over.contains(k) && r.over[k].is_number() ? format_double("%.2fx", r.over[k].get<double>()) : "-",
                              5 + k.size());
        os << "\n";
    }
    os << "best: the region's best kernel over the LibTorch reference (precision "
       << (plan.precision.empty() ? std::string("as each task says") : plan.precision) << ")"
       << (over.empty() ? "" : "; over X: over that PyTorch baseline of the region's module (eager, torch.compile)") << "\n";
    if (repeats) os << "(+N): N regions repeat the region (the same computation) and run its kernel too; its share includes theirs\n";
    for (const auto& r : s.regions)
        if (!r.not_cached.empty() && r.best_speedup)
            os << printable_name(r.name) << ": the search's best (" << format_double("%.2fx", *r.best_speedup)
               << " in the search) was not cached, so the model runs this region in PyTorch: " << r.not_cached << "\n";
    shown << printable(os.str());
}

// "[2/5] h.0.mlp": a region's search in the lines about it (its name from plan.json, printable).
std::string run_tag(size_t i, size_t n, const std::string& name) {
    return "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + printable_name(name);
}

struct Planned {
    std::vector<model::RegionRun> runs;  // every searched region, largest share first
    std::vector<size_t> to_run;          // indexes into runs
    std::vector<double> fraction;        // per to_run: its part of the budgets (time, USD, tokens)
    bool over_compile = false;           // split by the gain still possible over torch.compile (else eager share)
    // How the time is split, for the lines that say it.
    std::string basis() const {
        return over_compile ? "split by the gain still possible over torch.compile" : "split by time share";
    }
};

// --dry-run: each region's share and budget (`total_s` split by time share, 0: the same generations
// each), nothing run.
int print_dry_run(const model::Plan& plan, const Planned& p, const model::Summary& summary, long total_s, int jobs) {
    std::cout << printable_name(plan.model) << ": " << p.to_run.size() << " of " << p.runs.size()
              << " region search(es) to run, "
              << (total_s > 0 ? budget_text(total_s) + " " + p.basis() : "each for the same generations")
              << ", " << jobs << " at once\n";
    print_table(plan, summary, std::cout);
    return kExitSuccess;
}

// The regions --region names (by region or task name), every searched one when none is named.
std::vector<const model::Region*> chosen_regions(const model::Plan& plan, const std::vector<std::string>& only) {
    std::vector<const model::Region*> all = plan.searched(), out;
    if (only.empty()) return all;
    for (const std::string& want : only) {
        auto it = std::find_if(all.begin(), all.end(), [&](auto* g) { return g->name == want || g->task_name == want; });
        // A repeat runs its task region's kernel: searching it is searching that region.
        auto rep = std::find_if(plan.regions.begin(), plan.regions.end(), [&](const auto& g) {
            return g.status == RegionStatus::repeat && (g.name == want || g.task_name == want);
        });
        if (it == all.end() && rep != plan.regions.end()) {
            it = std::find_if(all.begin(), all.end(), [&](auto* g) { return g->name == rep->same_as; });
            if (it != all.end())
                std::cerr << "kernelevo: region " << want << " is a repeat of " << rep->same_as << " (it runs that region's kernel): searching "
                          << rep->same_as << "\n";
        }
        if (it == all.end()) {
            std::string names;
            for (auto* g : all) names += (names.empty() ? "" : ", ") + g->name;
            throw UsageError("--region " + want + ": " + plan.file.string() + " has no region of that name (or task name) to search (" +
                             names + ")");
        }
        if (std::find(out.begin(), out.end(), *it) == out.end()) out.push_back(*it);
    }
    return out;
}

Planned plan_runs(const model::Plan& plan, const model::Summary& before, long total_s, bool fresh,
                  const std::vector<std::string>& only) {
    std::vector<const model::Region*> regions = chosen_regions(plan, only);
    Planned p;
    p.over_compile = model::budgets_over_compile(regions);
    std::stable_sort(regions.begin(), regions.end(), [&](auto* x, auto* y) {
        return model::budget_weight(*x, p.over_compile) > model::budget_weight(*y, p.over_compile);
    });
    std::vector<double> shares;
    // Regions left out by --region keep their records from earlier runs.
    for (const auto& old : before.regions)
        if (std::none_of(regions.begin(), regions.end(), [&](auto* g) { return g->task_name == old.task_name; }) &&
            std::any_of(plan.regions.begin(), plan.regions.end(), [&](const auto& g) { return g.task_name == old.task_name; }))
            p.runs.push_back(old);
    for (const model::Region* g : regions) {
        model::RegionRun r;
        r.name = g->name;
        r.task_name = g->task_name;
        r.state = "search/" + g->task_name + ".db";
        r.log = "search/" + g->task_name + ".log";
        const model::RegionRun* old = before.find(g->task_name);
        if (old && old->status == RunStatus::done && !fresh && fs::exists(plan.dir / old->state)) {
            r = *old;  // done in an earlier run: skipped, its record kept
        } else {
            p.to_run.push_back(p.runs.size());
            shares.push_back(model::budget_weight(*g, p.over_compile));
        }
        p.runs.push_back(r);
    }
    std::vector<long> budgets = model::split_budget(shares, total_s);
    const long parts = 1000000;  // the same split, finer, for --budget-usd and --budget-tokens
    std::vector<long> fine = model::split_budget(shares, parts);
    for (size_t k = 0; k < p.to_run.size(); ++k) {
        p.runs[p.to_run[k]].budget_s = budgets[k];
        p.fraction.push_back(static_cast<double>(fine[k]) / parts);
    }
    return p;
}

// Each region's search: this executable, `search` on the region's task with the model's cache and the
// region's state and budget, and the options passed on.
std::vector<model::Job> region_jobs(const model::Plan& plan, const Planned& p, const fs::path& out, const CLI::App& cmd,
                                    const llm::LlmOptions& llm) {
    const fs::path search_dir = plan.dir / "search";
    const std::vector<std::string> passed = passed_on_options(cmd);
    std::vector<std::string> head = {model::self_executable().string()};
    if (const CLI::Option* sb = cmd.get_parent() ? cmd.get_parent()->get_option_no_throw("--sandbox") : nullptr)
        if (sb->count() > 0) head.insert(head.end(), {"--sandbox", sb->results().back()});
    std::vector<model::Job> jobs;
    for (size_t n = 0; n < p.to_run.size(); ++n) {
        const model::RegionRun& r = p.runs[p.to_run[n]];
        const model::Region* g = nullptr;
        for (const auto& x : plan.regions)
            if (x.task_name == r.task_name) g = &x;
        model::Job j;
        j.argv = head;
        j.argv.insert(j.argv.end(), {"search", "--task", g->task_file.string(), "--out", out.string(), "--state",
                                     (plan.dir / r.state).string(), "--json"});
        if (r.budget_s > 0) j.argv.insert(j.argv.end(), {"--max-time", std::to_string(r.budget_s)});
        // What users compare with: the fitness is the speedup over the region's torch.compile where the plan timed it.
        const bool baseline_given = cmd.get_option("--fitness-baseline")->count() > 0;
        if (g->compile_ms && !baseline_given && !cmd.get_option("--no-baselines")->count())
            j.argv.insert(j.argv.end(), {"--fitness-baseline", "compile"});
        const double f = p.fraction[n];
        if (llm.max_cost_usd > 0) j.argv.insert(j.argv.end(), {"--budget-usd", format_double("%.6f", llm.max_cost_usd * f)});
        if (llm.max_total_tokens > 0)
            j.argv.insert(j.argv.end(), {"--budget-tokens", std::to_string(std::max<int64_t>(
                                                               1, static_cast<int64_t>(static_cast<double>(llm.max_total_tokens) * f)))});
        j.argv.insert(j.argv.end(), passed.begin(), passed.end());
        j.out_file = search_dir / (r.task_name + ".json");
        j.log_file = plan.dir / r.log;
        jobs.push_back(std::move(j));
    }
    return jobs;
}

// A region's search that stopped with exit code 2 on an error that names no region of its own (no
// GPU, no model, a bad option passed on to every region): every other region would stop on the same,
// so it is said once (`first`, the first one's line) and no further region starts. An error that is
// the region's own (its task) counts as the region's failure.
bool is_setup_error(const model::JobResult& res, const std::string& line, std::string& first) {
    if (!res.started || res.signal || res.exit_code != kExitUsage || line.empty()) return false;
    if (first.empty() && line.rfind("kernelevo: error: ", 0) == 0 && line.find("regions/") == std::string::npos)
        first = line;
    return line == first;
}

// The end: the table (or --json), and the exit code: 0 when every region's search finished, else the
// worst region's (1 for one interrupted or never started).
int finish(const model::Plan& plan, const model::Summary& summary, bool json, bool interrupted) {
    if (interrupted)
        std::cerr << "kernelevo: interrupted: state saved; to continue, run the same command again\n";
    int rc = kExitSuccess;
    for (const auto& r : summary.regions)
        if (r.status != RunStatus::done) rc = std::max({rc, int(kExitFailed), r.exit_code.value_or(kExitFailed)});
    if (json) {
        nlohmann::json j = summary.to_json();
        j["model"] = plan.model;
        j["end_to_end"] = model::model_gains(plan, summary).to_json();
        j["exit_code"] = rc;
        std::cout << j.dump(2) << std::endl;
    } else {
        print_table(plan, summary, std::cout);
        std::cout << model::model_gains(plan, summary).text();
    }
    return rc;
}

// The end after a setup error (is_setup_error): the error once, no table of failures (--json still
// prints the summary), exit 2.
int setup_error_end(const model::Plan& plan, const model::Summary& summary, const std::vector<size_t>& to_run,
                    bool json, const std::string& error) {
    if (json) finish(plan, summary, true, false);
    const auto left = std::count_if(to_run.begin(), to_run.end(),
                                    [&](size_t k) { return summary.regions[k].status == RunStatus::pending; });
    std::cerr << error << " (every region's search stops on it: said once; " << left << " of " << to_run.size()
              << " region search(es) not started)\n";
    return kExitUsage;
}

}  // namespace

int run_model_search(const evolve::SearchArgs& a, const evolve::SearchConfig& cfg, const ModelSearchArgs& m,
                     const CLI::App& cmd) {
    if (cmd.get_option("--state")->count() > 0)
        throw UsageError("--state: with --model-dir each region's state is DIR/search/<task_name>.db");
    if (!a.initial.empty()) throw UsageError("--initial: a seed kernel is for one task, not with --model-dir");
    const bool by_time = !a.max_time.empty();
    if (!by_time && cmd.get_option("--generations")->count() == 0)
        throw UsageError("--model-dir needs --max-time (split over the regions by time share) or --generations (each region the same)");
    const long total_s = std::lround(cfg.stopping.max_time_s);
    if (by_time && total_s < 1) throw UsageError("--max-time " + a.max_time + ": at least one second to split over the regions");
    const model::Plan plan = model::load_plan(m.dir);
    if (plan.searched().empty())
        throw UsageError(plan.file.string() + ": no region has status \"task\": nothing to search (plan.md says why for each)");
    const fs::path search_dir = plan.dir / "search", summary_file = search_dir / "summary.json";
    const fs::path out = a.out.empty() ? plan.dir / "cache" : fs::absolute(a.out);
    Planned p = plan_runs(plan, model::read_summary(summary_file), total_s, a.fresh, m.regions);
    model::Summary summary;
    summary.precision = plan.precision;
    summary.regions = p.runs;

    if (m.dry_run) return print_dry_run(plan, p, summary, by_time ? total_s : 0, m.jobs);
    const std::vector<model::Job> jobs = region_jobs(plan, p, out, cmd, a.llm);
    for (const auto& r : p.runs)
        if (std::find(p.to_run.begin(), p.to_run.end(), static_cast<size_t>(&r - p.runs.data())) == p.to_run.end() && !quiet())
            std::cerr << "kernelevo: " << printable(r.name) << ": skipped: done in an earlier run (best "
                      << speedup_text(r) << "; --fresh searches it again)\n";
    write_summary(summary_file, summary);

    const size_t n = jobs.size();
    auto tag = [&](size_t i) { return run_tag(i, n, p.runs[p.to_run[i]].name); };
    model::JobEvents ev;
    ev.started = [&](size_t i) {
        model::RegionRun& r = summary.regions[p.to_run[i]];
        std::string line;
        for (const auto& w : jobs[i].argv) line += (line.empty() ? "" : " ") + shell_quote(w);
        try {  // the command at the head of its log
            static const std::regex userinfo("://[^/@\\s]*@");  // a password in --llm-url or --workers
            write_file_atomic(search_dir / (r.task_name + ".cmd"), std::regex_replace(redact(line), userinfo, "://***@") + "\n");
        } catch (const UsageError&) {
        }
        r.status = RunStatus::running;
        if (!quiet())
            std::cerr << "kernelevo: " << tag(i) << ": searching, budget " << budget_text(r.budget_s) << ", log "
                      << (plan.dir / r.log).string() << "\n";
    };
    std::string setup_error;  // the first region's setup error: every region's search would stop on it
    ev.ended = [&](size_t i, const model::JobResult& res) {
        model::RegionRun& r = summary.regions[p.to_run[i]];
        record_end(r, res, jobs[i].out_file);
        if (is_setup_error(res, last_log_line(jobs[i].log_file), setup_error)) {
            g_model_sigints.fetch_add(1);  // no further region starts
            write_summary(summary_file, summary);
            return;
        }
        std::cerr << "kernelevo: " << tag(i) << ": " << model::run_status_name(r.status) << " (" << res.describe()
                  << ") after " << clock_text(res.seconds) << ", best " << speedup_text(r)
                  << (cached_best(r) ? " over the LibTorch reference" : "")
                  << (r.not_cached.empty() ? "" : " (the search's best was not cached: " + r.not_cached + ")") << "\n";
        if (r.status == RunStatus::failed)
            std::cerr << "kernelevo: " << tag(i) << ": " << last_log_line(jobs[i].log_file) << " (log " << jobs[i].log_file.string() << ")\n";
        write_summary(summary_file, summary);
    };
    g_model_sigints = 0;
    auto old_handler = std::signal(SIGINT, on_model_sigint);
    if (!quiet())
        std::cerr << "kernelevo: " << plan.model << ": " << n << " region search(es), "
                  << (by_time ? budget_text(total_s) + " " + p.basis() : "by generations") << ", " << m.jobs
                  << " at once; summary " << summary_file.string() << "\n";
    model::run_jobs(jobs, m.jobs, g_model_sigints, ev);
    std::signal(SIGINT, old_handler);
    for (auto& r : summary.regions)
        if (r.status == RunStatus::running) r.status = RunStatus::stopped;
    write_summary(summary_file, summary);

    if (!setup_error.empty()) return setup_error_end(plan, summary, p.to_run, a.json, setup_error);
    return finish(plan, summary, a.json, g_model_sigints.load() > 0);
}

}  // namespace kevo
