// `kernelevo search` (and run_search(), which `kernelevo bench` runs too).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <fstream>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "baseline/baseline.h"
#include "cache/cache.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/commands.h"
#include "commands/llm_options.h"
#include "commands/search_command.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/process.h"
#include "common/text.h"
#include "compile/arch_support.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "llm/budget.h"
#include "llm/options.h"
#include "store/writer.h"
#include "triton/launch.h"
#include "triton/triton_compile.h"
#include "validate/validator_evaluator.h"
#ifdef KEVO_WITH_WORKERS
#include "worker/remote_evaluator.h"
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

using evolve::SearchArgs;

std::string format_progress(const evolve::Progress& p) {
    char buf[200];
    long t = static_cast<long>(p.elapsed_s);
    char sol[32] = "";
    if (p.best_sol > 0) std::snprintf(sol, sizeof sol, " (%.0f%% SOL)", 100 * p.best_sol);
    std::snprintf(buf, sizeof buf, "gen %d | best %.3fx%s | ok %lld failed %lld dup %lld | %.1fk tokens | $%.4f | %ld:%02ld:%02ld",
                  p.generation, p.best_speedup, sol, static_cast<long long>(p.ok), static_cast<long long>(p.failed),
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

// Every candidate is validated on this machine's GPU: without one that can run `arch`, no LLM
// request is worth its money and no state is worth creating. (A search whose validations run on
// remote workers skips this check.)
void require_local_gpu(Validator& validator, const std::string& arch) {
    const DeviceInfo& d = validator.device();
    const std::string nothing_done = " Nothing was sent to the LLM and no search state was created.";
    if (!d.present)
        throw UsageError("kernelevo search validates every candidate on the local GPU, and there is none that can run " +
                         arch + " kernels: " + (d.error.empty() ? std::string("no CUDA device") : d.error) + "." + nothing_done);
    if (d.arch() != arch && d.arch() + "a" != arch)
        throw UsageError("--arch " + arch + ": the GPU here is " + d.name + " (" + d.arch() +
                         "), which cannot run " + arch + " kernels; search on a machine with such a GPU, or pass --arch " +
                         d.arch() + "." + nothing_done);
}

// The final summary, --json: see README.md ("JSON output").
nlohmann::json summary_json(const Task& task, const std::string& arch, const store::StoreLocation& where,
                            const evolve::SearchResult& result, const std::string& out_dir, store::Store& store,
                            bool resumable, int rc) {
    const evolve::Progress& p = result.progress;
    store::Spent spent = store.spent();
    nlohmann::json best = nullptr;
    if (result.best)
        best = {{"speedup", result.best->speedup},
                {"program", result.best->id},
                {"generation", result.best->generation},
                {"island", result.best->island},
                {"model", result.best_model},
                {"kernel_us", result.best->details.value("kernel_us", 0.0)},
                {"reference_us", result.best->details.value("reference_us", 0.0)},
                {"source", cache::source_path(out_dir, task.name, arch).string()},
                {"metadata", cache::metadata_path(out_dir, task.name, arch).string()}};
    return {{"task", task.name},
            {"arch", arch},
            {"state", where.display()},
            {"stop_reason", result.stop_reason},
            {"generations", result.generations_committed},
            {"best", best},
            {"candidates", {{"ok", p.ok}, {"failed", p.failed}, {"duplicates", p.duplicates}, {"not_judged", p.not_judged}}},
            {"llm", {{"requests", spent.calls}, {"prompt_tokens", spent.prompt_tokens},
                     {"completion_tokens", spent.completion_tokens}, {"cost_usd", spent.cost_usd}}},
            {"waste", result.waste.to_json()},
            {"elapsed_s", p.elapsed_s},
            {"resumable", resumable},
            {"exit_code", rc}};
}

// A run that stopped for a batch: what it wrote and how to continue.
void report_batch_stop(const evolve::SearchResult& result, const llm::LlmOptions& llm) {
    std::string url = llm.url == llm::kDefaultLlmUrl ? "" : " --llm-url " + shell_quote(llm::display_url(llm.url)) + llm::url_credentials_note(llm.url);
    if (!result.batch_file.empty())
        std::cerr << "kernelevo: wrote " << result.batch_written << " LLM request(s) to " << result.batch_file
                  << " (OpenAI Batch API input); none was sent\n"
                  << "kernelevo: submit it:      kernelevo llm batch submit " << shell_quote(result.batch_file) << url
                  << "\n"
                  << "kernelevo: once it is done: kernelevo llm batch fetch BATCH_ID --out REPLIES.jsonl" << url << "\n";
    if (result.batch_waiting > 0)
        std::cerr << "kernelevo: " << result.batch_waiting
                  << " request(s) wait for replies in batch files written before (they are never sent again)\n";
    std::cerr << "kernelevo: state saved; to continue, run again with the replies: " << redact(command_line_hint())
              << " --llm-batch-replies REPLIES.jsonl" << llm::url_credentials_note(llm.url) << "\n";
}

// issue 35 (tool/baseline): the task's PyTorch baselines, timed once on this host's GPU (in the
// import's sandbox, under the GPU lock), or "not run: --no-baselines".
baseline::Result measure_torch_baselines(const evolve::SearchArgs& a, const Task& task, Validator& validator) {
    baseline::Options o;
    o.python = a.python;
    o.trials = a.timing_trials;
    if (a.aoti || a.fitness_baseline == "aoti") o.which = baseline::asked({"aoti"});
    if (!quiet() && baseline::no_module_reason(task.file.parent_path()).empty())
        std::cerr << "kernelevo: timing the PyTorch baselines (" << baseline::columns(o.which) << ") ...\n";
    return baseline::measure(task, o, validator.device());
}

baseline::Result no_torch_baselines(const Task& task) {
    baseline::Result b;
    b.precision = baseline::task_precision(task);
    for (const auto& k : baseline::kinds()) b.not_run[k] = "--no-baselines";
    return b;
}

// For `kernelevo report`: the best's speedups over the PyTorch baselines timed here, or why none
// were (kept when an earlier invocation stored them for this same best).
void store_best_baselines(store::Store& st, const store::Program& best, const std::optional<baseline::Result>& b,
                          const evolve::SearchArgs& a, bool batch) {
    nlohmann::json j;
    if (b) {
        j = baseline::speedups_json(*b, ValidationResult::from_json(best.details).shapes);
        j["program"] = best.id;
    } else {
        auto stored = st.get_meta(evolve::kBestBaselinesMeta);
        if (stored && stored->is_object() && stored->value("program", int64_t{0}) == best.id) return;
        j = {{"not_run", a.no_baselines ? "--no-baselines"
                         : !a.workers.empty() ? "the candidates were judged by workers (PyTorch is timed on this host's GPU only)"
                         : batch ? "a batch round judges no candidate here (PyTorch is timed by a search that does)"
                                 : "no GPU here to time PyTorch on"}};
    }
    st.put_meta(evolve::kBestBaselinesMeta, j);
}
}  // namespace

double evolve::parse_duration(const std::string& s) {
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

evolve::SearchOutcome evolve::run_search(SearchArgs& a, const std::string& progress_prefix) {
    evolve::SearchOutcome outcome;
    int rc = 1;
    Task task = load_task(a.task);
    evolve::SearchConfig cfg = a.cfg;
    cfg.mode = a.mode;
    cfg.profile_best = !a.no_profile;
    cfg.steady = a.schedule == "steady";
    cfg.max_time_s = parse_duration(a.max_time);
    if (!a.initial.empty()) cfg.initial_source = read_kernel_file(a.initial, "--initial");
    evolve::Prompts prompts;
    if (!a.prompts.empty()) prompts.load_overrides(a.prompts);

    // The budgets are enforced by the search against the stored totals, which survive a resume.
    cfg.budget_tokens = a.llm.max_total_tokens;
    cfg.budget_usd = a.llm.max_cost_usd;
    a.llm.max_total_tokens = 0;
    a.llm.max_cost_usd = 0;
    a.llm.model_seed = cfg.seed;
    if (a.llm.models.size() == 1) cfg.model = llm::parse_model_choice(a.llm.models[0]).name;
    if (!a.llm.price.empty()) cfg.price = llm::parse_price(a.llm.price);
    cfg.log = [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; };

    // Usage and setup errors (exit 2) come before any LLM request and before the state store is
    // touched: the LLM configuration (URL, models, key), the architecture, the GPU.
    auto log = [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; };
    std::shared_ptr<llm::Provider> provider;
    std::unique_ptr<llm::Client> client;
    if (!a.llm.replay.empty()) {
        provider = llm::make_provider(a.llm, log);
    } else {
        client = llm::make_client(a.llm, log);
        provider = std::make_shared<ClientProvider>(*client);
    }

    if (cfg.backend == "both" && cfg.islands < 2)
        throw UsageError("--backend both needs at least 2 islands (even islands write Triton, odd ones CUDA)");
    if (cfg.backend != "cuda" && a.workers.empty()) {  // with --workers, the compile workers' Triton compiles
        triton::TritonInfo ti = triton::probe(a.python);  // a missing Triton stops here (exit 2), not mid-run
        std::cerr << "kernelevo: Triton " << ti.version << " (" << ti.python << ") compiles the Triton candidates ahead of time\n";
    }
    ValidateOptions vo;
    vo.arch = a.arch.empty() ? std::string() : normalize_arch(a.arch);
    vo.timeout_s = a.timeout;
    vo.timing_trials = a.timing_trials;
    vo.compile.python = a.python;
    vo.compile.task = std::make_shared<const Task>(task);
    Validator validator(task, vo);
    std::unique_ptr<Evaluator> evaluator;
    if (!a.workers.empty()) {
#ifdef KEVO_WITH_WORKERS
        store::parse_store_location(a.workers);  // registers a Redis password before anything is printed
        evaluator = std::make_unique<worker::RemoteEvaluator>(
            a.workers, task, vo, [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; });
#else
        throw UsageError("--workers: this kernelevo was built without Redis support (install libhiredis-dev and rebuild)");
#endif
    } else {
        auto local = std::make_unique<ValidatorEvaluator>(validator);
        local->log = [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; };
        if (cfg.profile_best) {  // new best kernels run once more, alone, under ncu (kernelevo-bench)
            local->profile_options = profile::bench_profile_options();
            local->profile_command = [&task, bench = profile::default_bench()](const CompileResult& c) {
                return profile::bench_command(bench, c.library, task, static_cast<size_t>(task.timed_sets().front()));
            };
        }
        evaluator = std::move(local);
    }
    std::string arch = evaluator->arch();
    require_toolkit_arch(arch, vo.compile);
    // Workers validate on their own GPUs. A batch round may need no validation at all (it writes
    // requests, or imports replies without code); one that does stops with "no GPU" and resumes.
    const bool validates_here = a.workers.empty() && !cfg.llm_batch;
    if (validates_here) require_local_gpu(validator, arch);
    // --fitness-baseline compile|eager (issue 35, tool/baseline): measured once, here, on the timed
    // shapes; the search then optimizes and reports the speedup over it.
    // Without it they are still timed here, before the judge holds GPU memory, for the summary.
    std::optional<baseline::Result> torch_baselines;
    std::unique_ptr<Evaluator> fitness_evaluator;
    if (a.fitness_baseline == "reference" && validates_here && !a.no_baselines) torch_baselines = measure_torch_baselines(a, task, validator);
    if (a.fitness_baseline != "reference") {
        if (!a.workers.empty())
            throw UsageError("--fitness-baseline " + a.fitness_baseline + " times PyTorch on this host's GPU: not with --workers");
        torch_baselines = measure_torch_baselines(a, task, validator);
        if (!torch_baselines->ran(a.fitness_baseline))
            throw UsageError("--fitness-baseline " + a.fitness_baseline + ": " + baseline::label(a.fitness_baseline) + " " +
                             torch_baselines->why_not(a.fitness_baseline));
        fitness_evaluator = baseline::fitness_over(*evaluator, *torch_baselines, a.fitness_baseline);
        cfg.speedup_label = baseline::label(a.fitness_baseline);  // what the prompts say the speedup is over
        std::cerr << "kernelevo: fitness: speedup over " << baseline::label(a.fitness_baseline) << ", "
                  << torch_baselines->us(a.fitness_baseline) << " us (precision " << torch_baselines->precision << ", PyTorch "
                  << torch_baselines->torch_version << ")\n";
    }
    // Batch mode: files named after the task and architecture, in the dialect of --llm-url.
    if (cfg.llm_batch && a.llm.models.size() != 1)
        throw UsageError("--llm-batch needs exactly one --model: a Batch API input file holds requests for one model");
    cfg.batch_prefix = (fs::path(a.batch_dir) / (task.name + "-" + arch + "-batch")).string();
    cfg.batch_url = a.llm.url;

    // An SQLite file (default: one per task and architecture under the cache) or a Redis URL.
    std::string state = a.state.empty() ? (cache_root() / "search" /
                                           (task.name + "-" + arch + "-" + task.hash().substr(0, 12) +
                                            // a fitness over another baseline: another run (issue 35)
                                            (a.fitness_baseline == "reference" ? "" : "-over-" + a.fitness_baseline) + ".db"))
                                              .string()
                                        : a.state;
    store::StoreLocation where = store::parse_store_location(state);  // registers a Redis password
    // Whether a state is there is asked once (a Redis round trip), for this check and the message
    // below. A file that is not a KernelEvo state (foreign, empty, damaged) is refused as it is,
    // before even a lock file appears beside it.
    const bool existed = store::store_exists(state);
    // Its content is read once (store::check_state): the remove (--fresh) and the open below trust
    // that check while the file is the same.
    const store::StateCheck checked = !where.redis && existed ? store::check_state(state) : store::StateCheck{};
    if (!where.redis && fs::path(where.path).has_parent_path()) fs::create_directories(fs::path(where.path).parent_path());
    // One writer per state (store/writer.h): a second search on it stops here, before any LLM
    // request, and before its --fresh could delete what the first one writes. Held until return.
    store::WriterOptions writer;
    writer.what = progress_prefix.empty() ? "kernelevo search" : "kernelevo bench";  // (bench's searches have a prefix)
    writer.command = redact(command_line_hint());
    if (!a.workers.empty()) writer.workers = store::parse_store_location(a.workers).display();
    writer.log = log;
    auto lease = store::acquire_writer(state, writer);
    if (a.fresh) {
        store::remove_store(state, checked);
    } else if (existed && !quiet()) {
        std::cerr << "kernelevo: resuming the run in " << where.display() << "\n";
    }
    auto store = store::open_store(state, store::Access::read_write, checked);
#ifdef KEVO_WITH_WORKERS
    if (auto* remote = dynamic_cast<worker::RemoteEvaluator*>(evaluator.get())) remote->register_run(where.display());
#endif

    evolve::Search search(task, cfg, prompts, *provider, fitness_evaluator ? *fitness_evaluator : *evaluator, *store);
    const bool tty = ::isatty(STDERR_FILENO) && !verbose();
    // A live line on a terminal; in a log, one line per generation; --verbose: a line per
    // evaluation; --quiet: none.
    search.on_progress([tty, shown = -1, &progress_prefix](const evolve::Progress& p) mutable {
        if (quiet()) return;
        if (verbose()) {
            std::cerr << "kernelevo: " << progress_prefix << format_progress(p) << "\n";
        } else if (tty) {
            std::cerr << "\r\033[K" << progress_prefix << format_progress(p) << std::flush;
        } else if (p.generation != shown) {
            std::cerr << "kernelevo: " << progress_prefix << format_progress(p) << "\n";
            shown = p.generation;
        }
    });
    if (!quiet())
        std::cerr << "kernelevo: searching " << task.name << " for " << arch << " (" << cfg.islands << " islands, "
                  << a.schedule << ", state " << where.display()
                  << (a.workers.empty() ? std::string() : ", validating through " + store::parse_store_location(a.workers).display())
                  << ")\n";

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
#ifdef KEVO_WITH_WORKERS
    // A wait for a worker honours the stop too (issue 37): given up when no live worker serves the
    // job once the search stops (Ctrl-C, --max-time), and at once on a second Ctrl-C.
    if (auto* remote = dynamic_cast<worker::RemoteEvaluator*>(evaluator.get())) {
        const auto t0 = std::chrono::steady_clock::now();
        const double max_time = cfg.max_time_s;
        remote->stop_when([&stop, t0, max_time] {
            if (g_sigints.load() >= 2) return 2;
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return stop.load() || (max_time > 0 && s > max_time + 1) ? 1 : 0;  // (+1: after the search's own deadline)
        });
    }
#endif
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
    if (tty && !quiet()) std::cerr << "\n";

#ifdef KEVO_WITH_WORKERS
    if (auto* remote = dynamic_cast<worker::RemoteEvaluator*>(evaluator.get())) {
        std::vector<double> o = remote->overhead_ms(), w = remote->queued_ms();
        if (!o.empty() && w.size() == o.size()) {
            std::sort(o.begin(), o.end());
            std::sort(w.begin(), w.end());
            std::fprintf(stderr, "kernelevo: queue overhead per job (submit to result, waiting for a free worker and the work excluded): "
                         "median %.1f ms, p90 %.1f ms over %zu jobs; waiting for a free worker: median %.0f ms, p90 %.0f ms\n",
                         o[o.size() / 2], o[o.size() * 9 / 10], o.size(), w[w.size() / 2], w[w.size() * 9 / 10]);
        }
    }
#endif
    const evolve::Progress& p = result.progress;
    // --quiet: the stop line only when there is no best kernel to report (it then says why).
    if (!quiet() || !result.best)
        std::cerr << "kernelevo: stopped (" << result.stop_reason << ") after " << result.generations_committed
                  << " generation(s): " << format_progress(p) << "\n";
    if (!quiet()) {
        std::istringstream lines(result.waste.text());
        for (std::string line; std::getline(lines, line);) std::cerr << "kernelevo: " << line << "\n";
    }
    if (result.best) {
        const store::Program& best = *result.best;
        // What enters a cache is validated twice: the best again, in a fresh sandbox with new seeds
        // and a re-measured reference, and the two speedups must agree. (With --workers the worker
        // validated it; this host may have no GPU.)
        nlohmann::json details = best.details;
        std::string refused;
        if (a.workers.empty() && validator.device().present) {
            if (!quiet()) std::cerr << "kernelevo: confirming the best kernel in a fresh sandbox with new seeds ...\n";
            ValidationResult confirmed = validator.confirm(validator.compile(best.source), ValidationResult::from_json(best.details));
            if (confirmed.ok()) details["confirmation"] = confirmed.details.value("confirmation", nlohmann::json());
            else refused = confirmed.log;
        }
        if (!refused.empty()) {
            std::cerr << "kernelevo: the best kernel (program #" << best.id << ", " << best.speedup
                      << "x) was not written to the cache: " << refused << "\n";
        } else {
            cache::EntryMeta meta = cache::entry_from_validation(task, arch, details);
            meta.origin = "search";
            meta.model = result.best_model;
            store::Spent spent = store->spent();
            meta.prompt_tokens = spent.prompt_tokens;
            meta.completion_tokens = spent.completion_tokens;
            meta.cost_usd = spent.cost_usd;
            // A Triton kernel is stored as the .cu generated from it, with the .py beside it (compiled
            // before: served from the compile cache, here or, with --workers, the queue's stored result).
            CompileResult compiled;
            if (triton::is_triton_source(best.source)) {
                compiled = evaluator->compile(best.source);
                if (!compiled.ok || compiled.generated_source.empty())
                    throw UsageError("the best kernel (program #" + std::to_string(best.id) + ", Triton) does not compile again here: " + compiled.log);
            }
            cache::store_candidate(a.out, best.source, compiled, meta);
            std::cerr << "kernelevo: best kernel " << best.speedup << "x (program #" << best.id << ") written to "
                      << cache::source_path(a.out, task.name, arch).string() << "\n";
        }
        // The best beside the PyTorch baselines (issue 35), each labelled, or why one was not run.
        if (!torch_baselines) torch_baselines = a.no_baselines ? no_torch_baselines(task) : measure_torch_baselines(a, task, validator);
        if (!quiet())
            std::cerr << "kernelevo: the best kernel over the LibTorch reference (precision " << task.precision.label() << "): "
                      << best.details.value("speedup", best.speedup) << "x; over the PyTorch baselines:\n"
                      << baseline::speedup_lines(*torch_baselines, ValidationResult::from_json(best.details).shapes, "kernelevo:   ");
    } else {
        std::cerr << "kernelevo: no correct kernel found yet\n";
    }
    bool finished = evolve::finished(result.stop);
    if (result.stop == evolve::StopReason::batch) {
        report_batch_stop(result, a.llm);
        outcome.rc = 3;
        outcome.stop_reason = result.stop_reason;
        outcome.stop = result.stop;
        return outcome;
    }
    const bool resumable = !finished || result.stop == evolve::StopReason::budget || result.stop == evolve::StopReason::time;
    // No request of this run (or of the runs it resumes) was ever answered: a wrong --llm-url,
    // model or key, or no network. A setup problem, not a search that got somewhere.
    const bool llm_never_answered = result.stop == evolve::StopReason::llm_failed && store->spent().calls == 0;
    if (llm_never_answered)
        std::cerr << "kernelevo: the LLM never answered: check --llm-url, --model and the API key (kernelevo llm check "
                     "tests them), then run the same command again\n";
    else if (resumable)
        std::cerr << "kernelevo: state saved; to continue, run again: " << redact(command_line_hint())
                  << (finished ? " (with a larger budget or time limit)" : "") << llm::url_credentials_note(a.llm.url)
                  << (where.redis && !where.password.empty()
                          ? " (the Redis password shows as ***: give it again, or in $KERNELEVO_REDIS_PASSWORD)"
                          : "")
                  << "\n";
    rc = result.stop == evolve::StopReason::no_gpu || llm_never_answered ? 2 : finished && result.best ? 0 : 1;
    if (result.best) store_best_baselines(*store, *result.best, torch_baselines, a, cfg.llm_batch);
    if (a.json) {
        nlohmann::json summary = summary_json(task, arch, where, result, a.out, *store, resumable, rc);
        if (result.best && torch_baselines) {  // issue 35: the fitness's baseline and the best over each
            summary["best"]["speedup_over_reference"] = result.best->details.value("speedup", result.best->speedup);
            summary["best"]["fitness_baseline"] = a.fitness_baseline;
            summary["best"]["baselines"] = baseline::speedups_json(*torch_baselines, ValidationResult::from_json(result.best->details).shapes);
        }
        std::cout << summary.dump(2) << std::endl;
    }
    outcome.rc = rc;
    outcome.stop_reason = result.stop_reason;
    outcome.stop = result.stop;
    outcome.finished = finished;
    outcome.found = result.best.has_value();
    outcome.speedup = result.best ? result.best->speedup : 0;
    if (result.best) outcome.best_details = result.best->details;
    if (torch_baselines) outcome.baselines = torch_baselines->to_json();
    store::Spent spent_total = store->spent();
    outcome.tokens = spent_total.prompt_tokens + spent_total.completion_tokens;
    outcome.cost_usd = spent_total.cost_usd;
    outcome.arch = arch;
    outcome.generations = result.generations_committed;
    return outcome;
}


}  // namespace kevo
