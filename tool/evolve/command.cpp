// `kernelevo search` and `kernelevo report`.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <cstdio>
#include <iostream>
#include <thread>

#include "cache/cache.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "evolve/validator_evaluator.h"
#include "llm/options.h"
#include "triton/launch.h"
#include "triton/triton_compile.h"

#ifndef KEVO_VERSION
#define KEVO_VERSION "0.0.0"
#endif

namespace kevo {
namespace {

std::atomic<int> g_sigints{0};
extern "C" void on_sigint(int) { g_sigints.fetch_add(1); }

// A Client (model choice, transcript, in-flight limit) seen as a Provider by the search.
class ClientProvider : public llm::Provider {
public:
    explicit ClientProvider(llm::Client& c) : c_(c) {}
    llm::ChatResponse chat(const llm::ChatRequest& r) override { return c_.chat(r); }
    void cancel() override { c_.cancel(); }

private:
    llm::Client& c_;
};

struct SearchArgs {
    std::string task, out, arch, state, initial, prompts, mode = "mixed", max_time, python;
    bool fresh = false;
    double timeout = 30;
    int timing_trials = 100;
    evolve::SearchConfig cfg;
    llm::LlmOptions llm;
};

// "90", "90s", "30m", "2h" -> seconds.
double parse_duration(const std::string& s) {
    if (s.empty()) return 0;
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(s, &used);
    } catch (const std::exception&) {
        throw UsageError("--max-time: cannot read '" + s + "' (use e.g. 900, 30m or 2h)");
    }
    std::string unit = s.substr(used);
    double mult = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
    if (mult < 0 || v < 0) throw UsageError("--max-time: cannot read '" + s + "' (use e.g. 900, 30m or 2h)");
    return v * mult;
}

std::string format_progress(const evolve::Progress& p) {
    char buf[200];
    long t = static_cast<long>(p.elapsed_s);
    std::snprintf(buf, sizeof buf, "gen %d | best %.3fx | ok %lld failed %lld dup %lld | %.1fk tokens | $%.4f | %ld:%02ld:%02ld",
                  p.generation, p.best_speedup, static_cast<long long>(p.ok), static_cast<long long>(p.failed),
                  static_cast<long long>(p.duplicates), static_cast<double>(p.tokens) / 1000, p.cost_usd, t / 3600,
                  t / 60 % 60, t % 60);
    return buf;
}

std::string command_line_hint() {
    std::string s;
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string arg;
    while (std::getline(in, arg, '\0')) s += (s.empty() ? "" : " ") + shell_quote(arg);
    return s.empty() ? "the same kernelevo search command" : s;
}

void run_search(SearchArgs& a, int& rc) {
    Task task = load_task(a.task);
    evolve::SearchConfig cfg = a.cfg;
    cfg.mode = a.mode;
    cfg.max_time_s = parse_duration(a.max_time);
    if (!a.initial.empty()) cfg.initial_source = read_file(a.initial);
    evolve::Prompts prompts;
    if (!a.prompts.empty()) prompts.load_overrides(a.prompts);

    // The budgets are enforced by the search against the stored totals, which survive a resume.
    cfg.budget_tokens = a.llm.max_total_tokens;
    cfg.budget_usd = a.llm.max_cost_usd;
    a.llm.max_total_tokens = 0;
    a.llm.max_cost_usd = 0;
    a.llm.model_seed = cfg.seed;
    if (a.llm.models.size() == 1) cfg.model = llm::parse_model_choice(a.llm.models[0]).name;

    if (cfg.backend == "both" && cfg.islands < 2)
        throw UsageError("--backend both needs at least 2 islands (even islands write Triton, odd ones CUDA)");
    if (cfg.backend != "cuda") {
        triton::TritonInfo ti = triton::probe(a.python);  // a missing Triton stops here (exit 2), not mid-run
        std::cerr << "kernelevo: Triton " << ti.version << " (" << ti.python << ") compiles the Triton candidates ahead of time\n";
    }
    ValidateOptions vo;
    vo.arch = a.arch;
    vo.timeout_s = a.timeout;
    vo.timing_trials = a.timing_trials;
    vo.compile.python = a.python;
    vo.compile.task = std::make_shared<const Task>(task);
    Validator validator(task, vo);
    evolve::ValidatorEvaluator evaluator(validator);
    std::string arch = validator.arch();

    // An SQLite file (default: one per task and architecture under the cache) or a Redis URL.
    std::string state = a.state.empty() ? (cache_root() / "search" /
                                           (task.name + "-" + arch + "-" + task.hash().substr(0, 12) + ".db"))
                                              .string()
                                        : a.state;
    store::StoreLocation where = store::parse_store_location(state);  // registers a Redis password
    if (a.fresh) {
        store::remove_store(state);
    } else if (store::store_exists(state)) {
        std::cerr << "kernelevo: resuming the run in " << where.display() << "\n";
    }
    if (!where.redis && fs::path(where.path).has_parent_path()) fs::create_directories(fs::path(where.path).parent_path());
    auto store = store::open_store(state);

    auto log = [](const std::string& line) { std::cerr << "\nkernelevo: " << line << "\n"; };
    std::shared_ptr<llm::Provider> provider;
    std::unique_ptr<llm::Client> client;
    if (!a.llm.replay.empty()) {
        provider = llm::make_provider(a.llm, log);
    } else {
        client = llm::make_client(a.llm, log);
        provider = std::make_shared<ClientProvider>(*client);
    }

    evolve::Search search(task, cfg, prompts, *provider, evaluator, *store);
    const bool tty = ::isatty(STDERR_FILENO);
    // A live line on a terminal; in a log, one line per generation.
    search.on_progress([tty, shown = -1](const evolve::Progress& p) mutable {
        if (tty) {
            std::cerr << "\r\033[K" << format_progress(p) << std::flush;
        } else if (p.generation != shown) {
            std::cerr << "kernelevo: " << format_progress(p) << "\n";
            shown = p.generation;
        }
    });
    std::cerr << "kernelevo: searching " << task.name << " for " << arch << " (" << cfg.islands << " islands, state "
              << where.display() << ")\n";

    // Ctrl-C: the first stops cleanly after what is in flight; the second also aborts LLM requests.
    std::atomic<bool> stop{false}, done{false};
    g_sigints = 0;
    auto old_handler = std::signal(SIGINT, on_sigint);
    std::thread watcher([&] {
        int seen = 0;
        while (!done) {
            int n = g_sigints.load();
            if (n > seen) {
                if (seen == 0) {
                    stop = true;
                    std::cerr << "\nkernelevo: stopping after the work in flight (Ctrl-C again to abort LLM requests)\n";
                } else {
                    provider->cancel();
                }
                seen = n;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    evolve::SearchResult result;
    try {
        result = search.run(&stop);
    } catch (...) {
        done = true;
        watcher.join();
        std::signal(SIGINT, old_handler);
        throw;
    }
    done = true;
    watcher.join();
    std::signal(SIGINT, old_handler);
    if (tty) std::cerr << "\n";

    const evolve::Progress& p = result.progress;
    std::cerr << "kernelevo: stopped (" << result.stop_reason << ") after " << result.generations_committed
              << " generation(s): " << format_progress(p) << "\n";
    if (result.best) {
        const store::Program& best = *result.best;
        cache::EntryMeta meta;
        meta.function = task.name;
        meta.arch = arch;
        meta.task_hash = task.hash();
        meta.reference_hash = task.reference_hash();
        meta.origin = "search";
        meta.speedup = best.speedup;
        meta.kernel_us = best.details.value("kernel_us", 0.0);
        meta.reference_us = best.details.value("reference_us", 0.0);
        meta.validation = best.details;
        meta.toolkit = nvcc_version(CompileOptions{});
        meta.gpu = best.details.value("gpu", std::string());
        meta.model = result.best_model;
        store::Spent spent = store->spent();
        meta.prompt_tokens = spent.prompt_tokens;
        meta.completion_tokens = spent.completion_tokens;
        meta.cost_usd = spent.cost_usd;
        meta.kernelevo_version = KEVO_VERSION;
        if (triton::is_triton_source(best.source)) {
            // Stored as the .cu generated from it (compiled before: served from the compile cache).
            CompileResult c = validator.compile(best.source);
            if (!c.ok) throw UsageError("the best Triton kernel no longer compiles: " + c.log);
            meta.backend = "triton";
            meta.triton = c.backend_info;
            meta.triton.erase("aot_s");
            cache::store(a.out, c.generated_source, meta, &best.source);
        } else {
            cache::store(a.out, best.source, meta);
        }
        std::cerr << "kernelevo: best kernel " << best.speedup << "x (program #" << best.id << ") written to "
                  << cache::source_path(a.out, task.name, arch).string() << "\n";
    } else {
        std::cerr << "kernelevo: no correct kernel found yet\n";
    }
    bool finished = result.stop_reason == "generations" || result.stop_reason == "target" ||
                    result.stop_reason == "budget" || result.stop_reason == "time";
    if (!finished || result.stop_reason == "budget" || result.stop_reason == "time")
        std::cerr << "kernelevo: state saved; to continue, run again: " << redact(command_line_hint())
                  << (finished ? " (with a larger budget or time limit)" : "")
                  << (where.redis && !where.password.empty()
                          ? " (the Redis password shows as ***: give it again, or in $KERNELEVO_REDIS_PASSWORD)"
                          : "")
                  << "\n";
    rc = result.stop_reason.rfind("error: no GPU", 0) == 0 ? 2 : finished && result.best ? 0 : 1;
}

}  // namespace

void register_search_command(CLI::App& app, int& rc) {
    auto a = std::make_shared<SearchArgs>();
    CLI::App* cmd = app.add_subcommand("search", "Search for a fast kernel with an LLM-driven evolution (resumable)");
    cmd->add_option("--task", a->task, "Task file (JSON)")->required();
    cmd->add_option("--out", a->out, "Cache directory to write the best kernel to (NAME/sm_XX.cu + .json)")->required();
    cmd->add_option("--arch", a->arch, "Target architecture, e.g. sm_90 (default: the local GPU's, else sm_90)");
    cmd->add_option("--state", a->state,
                    "State store: an SQLite file, or redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME] "
                    "for a run that spans machines (port 6379, DB 0 and prefix kernelevo by default; every key "
                    "of the run starts with {NAME}:, so runs with different prefixes share a server; password "
                    "also from $KERNELEVO_REDIS_PASSWORD). Rerunning with the same state resumes "
                    "(default: a file per task and architecture under the kernelevo cache)");
    cmd->add_flag("--fresh", a->fresh,
                  "Discard the state store's previous run and start over (Redis: deletes the prefix's keys)");
    cmd->add_option("--initial", a->initial, "Seed kernel (.cu, or a Triton .py); default: the LLM writes a straightforward one");
    cmd->add_option("--backend", a->cfg.backend,
                    "What the LLM writes: cuda (a .cu on the kernel ABI), triton (Triton kernels compiled ahead of time into "
                    "a .cu; needs Triton 3.x on this host), or both (islands alternate; the archive keeps the best of each)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cuda", "triton", "both"}));
    cmd->add_option("--python", a->python, "Triton: the Python that has Triton (default: $KERNELEVO_PYTHON, else python3)");
    cmd->add_option("--generations", a->cfg.generations, "Evolution generations after the seed")->capture_default_str()->check(CLI::NonNegativeNumber);
    cmd->add_option("--islands", a->cfg.islands, "Islands (independent populations)")->capture_default_str()->check(CLI::Range(1, 64));
    cmd->add_option("--children", a->cfg.children, "Candidates per island per generation")->capture_default_str()->check(CLI::Range(1, 64));
    cmd->add_option("--repair-attempts", a->cfg.repair_attempts, "Repair attempts for a failing candidate")->capture_default_str()->check(CLI::Range(0, 50));
    cmd->add_option("--migration-interval", a->cfg.migration_interval, "Generations between migrations (0: never)")->capture_default_str()->check(CLI::NonNegativeNumber);
    cmd->add_option("--migrants", a->cfg.migrants, "Programs each island sends to the next at a migration")->capture_default_str()->check(CLI::NonNegativeNumber);
    cmd->add_option("--restart-after", a->cfg.restart_after, "Restart an island after this many generations without improvement (0: never)")->capture_default_str()->check(CLI::NonNegativeNumber);
    cmd->add_option("--temperature", a->cfg.temperature, "Parent selection temperature (1: fitness-proportional; lower: greedier)")->capture_default_str()->check(CLI::PositiveNumber);
    cmd->add_option("--mode", a->mode, "Mutation: full (rewrite), diff (SEARCH/REPLACE edits) or mixed")->capture_default_str()->check(CLI::IsMember({"full", "diff", "mixed"}));
    cmd->add_option("--inspirations", a->cfg.inspirations, "Other programs shown in each mutation prompt")->capture_default_str()->check(CLI::NonNegativeNumber);
    cmd->add_option("--seed", a->cfg.seed, "Random seed (selection, model choice, request seeds)")->capture_default_str();
    cmd->add_option("--max-time", a->max_time, "Stop after this wall time (e.g. 900, 30m, 2h)");
    cmd->add_option("--target-speedup", a->cfg.target_speedup, "Stop once a kernel is this much faster than the reference")->check(CLI::PositiveNumber);
    cmd->add_option("--prompts", a->prompts, "Directory overriding prompt templates (system.md abi.md triton.md seed.md mutate_full.md mutate_diff.md repair.md)");
    cmd->add_option("--jobs", a->cfg.jobs, "Candidates in progress at once (0: all of a generation)")->capture_default_str()->check(CLI::NonNegativeNumber);
    cmd->add_option("--llm-temperature", a->cfg.llm_temperature, "Sampling temperature of the LLM")->capture_default_str();
    cmd->add_option("--max-tokens", a->cfg.max_tokens, "Completion token limit per LLM request")->capture_default_str()->check(CLI::PositiveNumber);
    cmd->add_option("--timeout", a->timeout, "Watchdog for running one candidate, in seconds")->capture_default_str()->check(CLI::PositiveNumber);
    cmd->add_option("--timing-trials", a->timing_trials, "Timed trials per implementation")->capture_default_str()->check(CLI::Range(1, 100000));
    llm::add_llm_options(*cmd, a->llm);
    cmd->add_option("--replay", a->llm.replay, "Answer LLM requests from a recorded transcript (same as --llm-replay)");
    cmd->callback([a, &rc] { run_search(*a, rc); });

    auto r = std::make_shared<std::pair<std::string, std::string>>();
    CLI::App* rep = app.add_subcommand("report", "Print a search's history and plot it");
    rep->add_option("--state", r->first, "The search's state store: SQLite file or redis://... URL (as for search)")
        ->required();
    rep->add_option("--plot", r->second, "Write a plot: FILE.svg, or FILE.html with the report");
    rep->callback([r, &rc] {
        if (!store::store_exists(r->first))
            throw UsageError("--state: no search state at " + store::parse_store_location(r->first).display());
        auto store = store::open_store(r->first);
        std::cout << evolve::report_text(*store);
        if (!r->second.empty()) {
            fs::path plot = r->second;
            bool html = plot.extension() == ".html" || plot.extension() == ".htm";
            write_file_atomic(plot, html ? evolve::report_html(*store) : evolve::report_svg(*store));
            std::cerr << "kernelevo: plot written to " << plot.string() << "\n";
        }
        rc = 0;
    });
}

}  // namespace kevo
