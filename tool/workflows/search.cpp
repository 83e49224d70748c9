// run_search(): `kernelevo search` from its request to its outcome (workflows/search.h).
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "baseline/baseline.h"
#include "cache/cache.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/process.h"
#include "common/text.h"
#include "compile/arch_support.h"
#include "evolve/report.h"
#include "evolve/search.h"
#include "language/registry.h"
#include "llm/budget.h"
#include "llm/options.h"
#include "common/setting_error.h"
#include "store/writer.h"
#include "workflows/confirm.h"
#include "workflows/search.h"
#include "workflows/search_parts.h"

namespace kevo::workflows {

baseline::Result time_torch_baselines(const Task& task, baseline::Options o, const DeviceInfo& device, bool progress) {
    if (progress && baseline::no_module_reason(task.file.parent_path()).empty())
        std::cerr << "kernelevo: timing the PyTorch baselines (" << baseline::columns(o.which) << ") ...\n";
    o.note = [progress](const std::string& line) {
        if (progress) std::cerr << "kernelevo: " << line << "\n";
    };
    return baseline::measure(task, o, device);
}

baseline::Result no_torch_baselines(const Task& task) {
    baseline::Result b;
    b.precision = baseline::task_precision(task);
    for (const auto& k : baseline::kinds()) b.not_run[k] = "--no-baselines";
    return b;
}

namespace {

// A Client (model choice, transcript, in-flight limit) seen as a Provider by the search.
class ClientProvider : public llm::Provider {
public:
    explicit ClientProvider(llm::Client& c) : c_(c) {}
    llm::ChatResponse chat(const llm::ChatRequest& r) override { return c_.chat(r); }
    void cancel() override { c_.cancel(); }

private:
    llm::Client& c_;
};

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
        throw SettingError({settings::kArch}, "{request.arch} " + arch + ": the GPU here is " + d.name + " (" + d.arch() +
                                                  "), which cannot run " + arch + " kernels; search on a machine with such a "
                                                  "GPU, or pass {request.arch} " + d.arch() + "." + nothing_done);
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
baseline::Result measure_torch_baselines(const SearchArgs& a, const Task& task, Validator& validator) {
    baseline::Options o;
    o.python = a.python;
    o.trials = a.timing_trials;
    if (a.aoti || a.fitness_baseline == "aoti") o.which = baseline::asked({"aoti"});
    return time_torch_baselines(task, o, validator.device(), !quiet());
}

// For `kernelevo report`: the best's speedups over the PyTorch baselines timed here, or why none
// were (kept when an earlier invocation stored them for this same best).
void store_best_baselines(store::Store& st, const store::Program& best, const std::optional<baseline::Result>& b,
                          const SearchArgs& a, bool batch) {
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

// The configuration of the search that runs: search_config()'s plus the seed kernel's text and the
// log; the budgets move from the LLM options into it (the search enforces them against the stored
// totals, which survive a resume).
void complete_config(SearchArgs& a, evolve::SearchConfig& cfg) {
    if (!a.initial.empty()) cfg.structure.initial_source = read_kernel_file(a.initial, "--initial");
    a.llm.max_total_tokens = 0;
    a.llm.max_cost_usd = 0;
    a.llm.model_seed = cfg.structure.seed;
    cfg.log = [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; };
}

// The LLM: a replay transcript, or a client (model choice, transcript, in-flight limit).
struct LlmLink {
    std::shared_ptr<llm::Provider> provider;
    std::unique_ptr<llm::Client> client;
};
LlmLink connect_llm(const llm::LlmOptions& o) {
    auto log = [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; };
    LlmLink l;
    if (!o.replay.empty()) {
        l.provider = llm::make_provider(o, log);
    } else {
        l.client = llm::make_client(o, log);
        l.provider = std::make_shared<ClientProvider>(*l.client);
    }
    return l;
}

ValidateOptions validate_options(const SearchArgs& a, const evolve::SearchConfig& cfg, const Task& task) {
    ValidateOptions vo;
    vo.arch = a.arch.empty() ? std::string() : normalize_arch(a.arch);
    vo.timeout_s = a.timeout;
    vo.timing_trials = a.timing_trials;
    vo.compile.python = a.python;
    vo.compile.task = std::make_shared<const Task>(task);
    if (a.workers.empty())  // with --workers the workers compile: their toolchains, not this host's
        for (const std::string& name : evolve::languages_of(cfg.structure.backend))
            if (const CandidateLanguage* l = language::named(name))  // a missing toolchain stops here (exit 2), not mid-run
                if (const std::string found = l->preflight(vo.compile); !found.empty()) std::cerr << "kernelevo: " << found << "\n";
    return vo;
}

// --fitness-baseline compile|eager (issue 35, tool/baseline): measured once, here, on the timed
// shapes; the search then optimizes and reports the speedup over it. Without it they are still
// timed here, before the judge holds GPU memory, for the summary.
struct Fitness {
    std::optional<baseline::Result> torch_baselines;
    std::unique_ptr<Evaluator> evaluator;  // null: the search's evaluator as it is
};
Fitness fitness_of(const SearchArgs& a, const Task& task, Validator& validator, Evaluator& evaluator,
                   evolve::SearchConfig& cfg, bool validates_here) {
    Fitness f;
    if (a.fitness_baseline == "reference" && validates_here && !a.no_baselines) f.torch_baselines = measure_torch_baselines(a, task, validator);
    if (a.fitness_baseline == "reference") return f;
    if (!a.workers.empty())
        throw SettingError({settings::kFitnessBaseline, settings::kWorkers},
                           "{request.fitness_baseline} " + a.fitness_baseline + " times PyTorch on this host's GPU: not with "
                           "{request.workers}");
    f.torch_baselines = measure_torch_baselines(a, task, validator);
    if (!f.torch_baselines->ran(a.fitness_baseline))
        throw SettingError({settings::kFitnessBaseline}, "{request.fitness_baseline} " + a.fitness_baseline + ": " +
                                                              baseline::label(a.fitness_baseline) + " " +
                                                              f.torch_baselines->why_not(a.fitness_baseline));
    f.evaluator = baseline::fitness_over(evaluator, *f.torch_baselines, a.fitness_baseline);
    cfg.evolution.speedup_label = baseline::label(a.fitness_baseline);  // what the prompts say the speedup is over
    std::cerr << "kernelevo: fitness: speedup over " << baseline::label(a.fitness_baseline) << ", "
              << f.torch_baselines->us(a.fitness_baseline) << " us (precision " << f.torch_baselines->precision << ", PyTorch "
              << f.torch_baselines->torch_version << ")\n";
    return f;
}

// The state (an SQLite file, default one per task and architecture under the cache, or a Redis
// URL), its one-writer lease (held as long as this lives) and the store opened on it.
struct State {
    store::StoreLocation where;
    std::unique_ptr<store::WriterLease> lease;
    std::unique_ptr<store::Store> store;
};
// Batch API replies answer the batch files a state wrote: a new state (or one --fresh empties)
// wrote none, so their import would be refused after the state and its lock were made. Refused
// before anything is created or removed.
void refuse_replies_for_new_state(const SearchArgs& a, const store::StoreLocation& where, bool existed) {
    if (a.cfg.batch.replies.empty() || (existed && !a.fresh)) return;
    using settings::kBatchReplies;
    using settings::kFresh;
    const std::string file = printable(a.cfg.batch.replies.front());
    if (!existed)
        throw SettingError({kBatchReplies, settings::kState},
                           "{batch.replies} " + file + ": there is no state at " + printable(where.display()) +
                               ", so no batch of it can have been answered; give the {store.state} of the run that "
                               "wrote the batch");
    throw SettingError({kBatchReplies, kFresh}, "{batch.replies} " + file + " with {search.fresh}: emptying the state "
                                                    "drops the batches these replies answer; nothing was changed");
}

State open_state(const SearchArgs& a, const Task& task, const std::string& arch, const std::string& progress_prefix) {
    std::string state = a.state.empty() ? (cache_root() / "search" /
                                           (task.name + "-" + arch + "-" + task.hash().substr(0, 12) +
                                            // a fitness over another baseline: another run (issue 35)
                                            (a.fitness_baseline == "reference" ? "" : "-over-" + a.fitness_baseline) + ".db"))
                                              .string()
                                        : a.state;
    State s;
    s.where = store::parse_store_location(state);  // registers a Redis password
    // Whether a state is there is asked once (a Redis round trip), for this check and the message
    // below. A file that is not a KernelEvo state (foreign, empty, damaged) is refused as it is,
    // before even a lock file appears beside it.
    const bool existed = store::store_exists(state);
    refuse_replies_for_new_state(a, s.where, existed);
    // Its content is read once (store::check_state): the remove (--fresh) and the open below trust
    // that check while the file is the same.
    const store::StateCheck checked = !s.where.redis && existed ? store::check_state(state) : store::StateCheck{};
    if (!s.where.redis && fs::path(s.where.path).has_parent_path()) fs::create_directories(fs::path(s.where.path).parent_path());
    // One writer per state (store/writer.h): a second search on it stops here, before any LLM
    // request, and before its --fresh could delete what the first one writes.
    store::WriterOptions writer;
    writer.what = progress_prefix.empty() ? "kernelevo search" : "kernelevo bench";  // (bench's searches have a prefix)
    writer.command = redact(command_line_hint());
    if (!a.workers.empty()) writer.workers = store::parse_store_location(a.workers).display();
    writer.log = [](const std::string& line) { std::cerr << "\nkernelevo: " << printable(line) << "\n"; };
    s.lease = store::acquire_writer(state, writer);
    if (a.fresh) {
        store::remove_store(state, checked);
    } else if (existed && !quiet()) {
        std::cerr << "kernelevo: resuming the run in " << s.where.display() << "\n";
    }
    s.store = store::open_store(state, store::Access::read_write, checked);
    return s;
}

// A live line on a terminal; in a log, one line per generation; --verbose: a line per evaluation;
// --quiet: none.
void show_progress(evolve::Search& search, bool tty, const std::string& progress_prefix) {
    search.on_progress([tty, shown = -1, progress_prefix](const evolve::Progress& p) mutable {
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
}

// The best, confirmed through the evaluator and written to the cache (or why not), then beside
// the PyTorch baselines (issue 35), each labelled, or why one was not run.
CacheOutcome report_best(const SearchArgs& a, const Task& task, const std::string& arch, Evaluator& evaluator,
                         Validator& validator, const evolve::SearchResult& result, store::Store& store,
                         std::optional<baseline::Result>& torch_baselines) {
    const store::Program& best = *result.best;
    CacheRequest req;
    req.out = a.out;
    req.arch = arch;
    req.model = result.best_model;
    req.spent = store.spent();
    // What enters a cache is validated twice: the best again, in a fresh sandbox with new seeds and
    // a re-measured reference (through the workers with --workers), and the two speedups must agree.
    if (!quiet() && evaluator.device().present)
        std::cerr << "kernelevo: confirming the best kernel in a fresh sandbox with new seeds ...\n";
    CacheOutcome cached = confirm_and_cache(evaluator, task, best, req);
    if (!cached.written)
        std::cerr << "kernelevo: the best kernel (program #" << best.id << ", " << best.speedup
                  << "x) was not written to the cache: " << cached.refused << "\n";
    else
        std::cerr << "kernelevo: best kernel " << best.speedup << "x (program #" << best.id << ") written to "
                  << cached.source.string() << "\n";
    if (!torch_baselines) torch_baselines = a.no_baselines ? no_torch_baselines(task) : measure_torch_baselines(a, task, validator);
    // A best that was not cached is named as the search's measurement: its second judgement
    // disagreed or failed, so the figure is not a kernel anyone gets.
    if (!quiet())
        std::cerr << "kernelevo: " << (cached.written ? "the best kernel" : "the search's best (not cached, see above)")
                  << " over the LibTorch reference (precision " << task.precision.label() << "): "
                  << best.details.value("speedup", best.speedup) << "x; over the PyTorch baselines:\n"
                  << baseline::speedup_lines(*torch_baselines, ValidationResult::from_json(best.details).shapes, "kernelevo:   ");
    return cached;
}

// Everything a search's end reports: the stop line and the waste, the best (confirm_and_cache), the
// batch stop or how to resume, the exit code and the outcome (with --json its summary).
SearchOutcome finish(const SearchArgs& a, const Task& task, const std::string& arch, Evaluator& evaluator,
                     Validator& validator, const evolve::SearchResult& result, State& st,
                     std::optional<baseline::Result>& torch_baselines, bool batch) {
    SearchOutcome outcome;
    outcome.stop_reason = result.stop_reason;
    outcome.stop = result.stop;
    // --quiet: the stop line only when there is no best kernel to report (it then says why).
    if (!quiet() || !result.best)
        std::cerr << "kernelevo: stopped (" << result.stop_reason << ") after " << result.generations_committed
                  << " generation(s): " << format_progress(result.progress) << "\n";
    if (!quiet()) {
        std::istringstream lines(result.waste.text());
        for (std::string line; std::getline(lines, line);) std::cerr << "kernelevo: " << line << "\n";
    }
    std::optional<CacheOutcome> cached;
    if (result.best) cached = report_best(a, task, arch, evaluator, validator, result, *st.store, torch_baselines);
    else std::cerr << "kernelevo: no correct kernel found yet\n";
    if (result.stop == evolve::StopReason::batch) {
        report_batch_stop(result, a.llm);
        outcome.rc = kExitBatchPending;
        return outcome;
    }
    const bool finished = evolve::finished(result.stop);
    const bool resumable = !finished || result.stop == evolve::StopReason::budget || result.stop == evolve::StopReason::time;
    // No request of this run (or of the runs it resumes) was ever answered: a wrong --llm-url,
    // model or key, or no network. A setup problem, not a search that got somewhere.
    const bool llm_never_answered = result.stop == evolve::StopReason::llm_failed && st.store->spent().calls == 0;
    if (llm_never_answered)
        std::cerr << "kernelevo: the LLM never answered: check --llm-url, --model and the API key (kernelevo llm check "
                     "tests them), then run the same command again\n";
    else if (resumable)
        std::cerr << "kernelevo: state saved; to continue, run again: " << redact(command_line_hint())
                  << (finished ? " (with a larger budget or time limit)" : "") << llm::url_credentials_note(a.llm.url)
                  << (st.where.redis && !st.where.password.empty()
                          ? " (the Redis password shows as ***: give it again, or in $KERNELEVO_REDIS_PASSWORD)"
                          : "")
                  << "\n";
    outcome.rc = exit_code_of(finished && result.best, result.stop == evolve::StopReason::no_gpu || llm_never_answered);
    if (result.best) store_best_baselines(*st.store, *result.best, torch_baselines, a, batch);
    if (a.json) {
        outcome.summary = summary_json(task, arch, st.where, result, a.out, *st.store, resumable, outcome.rc);
        if (result.best && torch_baselines) {  // issue 35: the fitness's baseline and the best over each
            outcome.summary["best"]["speedup_over_reference"] = result.best->details.value("speedup", result.best->speedup);
            outcome.summary["best"]["fitness_baseline"] = a.fitness_baseline;
            outcome.summary["best"]["baselines"] = baseline::speedups_json(*torch_baselines, ValidationResult::from_json(result.best->details).shapes);
        }
        if (cached) {  // whether the best entered the cache (--out), and why not
            outcome.summary["best"]["cached"] = cached->written;
            if (!cached->written) outcome.summary["best"]["cache_refused"] = cached->refused;
        }
    }
    outcome.finished = finished;
    outcome.found = result.best.has_value();
    outcome.speedup = result.best ? result.best->speedup : 0;
    if (result.best) outcome.best_details = result.best->details;
    if (torch_baselines) outcome.baselines = torch_baselines->to_json();
    const store::Spent spent = st.store->spent();
    outcome.tokens = spent.prompt_tokens + spent.completion_tokens;
    outcome.cost_usd = spent.cost_usd;
    outcome.arch = arch;
    outcome.generations = result.generations_committed;
    return outcome;
}
}  // namespace

evolve::SearchConfig search_config(const SearchArgs& a) {
    evolve::SearchConfig cfg = a.cfg;
    cfg.evolution.profile_best = !a.no_profile;
    cfg.evolution.steady = a.schedule == "steady";
    cfg.stopping.max_time_s = evolve::parse_duration(a.max_time);
    cfg.stopping.budget_tokens = a.llm.max_total_tokens;
    cfg.stopping.budget_usd = a.llm.max_cost_usd;
    if (a.llm.models.size() == 1) cfg.requests.model = llm::parse_model_choice(a.llm.models[0]).name;
    if (!a.llm.price.empty()) cfg.requests.price = llm::parse_price(a.llm.price);
    evolve::validate(cfg);
    return cfg;
}

SearchOutcome run_search(const SearchArgs& args, evolve::SearchConfig cfg, const std::string& progress_prefix) {
    SearchArgs a = args;
    std::atomic<bool> stop{false};  // set by Ctrl-C; outlives the evaluator, whose waits (the confirmation's too) ask it
    complete_config(a, cfg);
    Task task = load_task(a.task);
    evolve::Prompts prompts;
    if (!a.prompts.empty()) prompts.load_overrides(a.prompts);
    // Usage and setup errors (exit 2) come before any LLM request and before the state store is
    // touched: the LLM configuration (URL, models, key), the architecture, the GPU.
    LlmLink llm = connect_llm(a.llm);
    const ValidateOptions vo = validate_options(a, cfg, task);
    Validator validator(task, vo);
    Evaluators ev = make_evaluators(a, task, vo, validator, cfg.evolution.profile_best);
    const std::string arch = ev.evaluator->arch();
    require_toolkit_arch(arch, vo.compile);
    // Workers validate on their own GPUs. A batch round may need no validation at all (it writes
    // requests, or imports replies without code); one that does stops with "no GPU" and resumes.
    const bool validates_here = a.workers.empty() && !cfg.batch.enabled;
    if (validates_here) require_local_gpu(validator, arch);
    Fitness fitness = fitness_of(a, task, validator, *ev.evaluator, cfg, validates_here);
    // The prompts' time to beat (issue 49): torch.compile's times and Inductor's code, where they were measured.
    if (fitness.torch_baselines) cfg.evolution.to_beat = baseline::to_beat_section(*fitness.torch_baselines);
    // Batch mode: files named after the task and architecture, in the dialect of --llm-url.
    cfg.batch.prefix = (fs::path(a.batch_dir) / (task.name + "-" + arch + "-batch")).string();
    cfg.batch.url = a.llm.url;
    State st = open_state(a, task, arch, progress_prefix);
    ev.register_run(st.where.display());

    evolve::Search search(task, cfg, prompts, *llm.provider, fitness.evaluator ? *fitness.evaluator : *ev.evaluator, *st.store);
    const bool tty = ::isatty(STDERR_FILENO) && !verbose();
    show_progress(search, tty, progress_prefix);
    if (!quiet())
        std::cerr << "kernelevo: searching " << task.name << " for " << arch << " (" << cfg.structure.islands << " islands, "
                  << a.schedule << ", state " << st.where.display()
                  << (a.workers.empty() ? std::string() : ", validating through " + store::parse_store_location(a.workers).display())
                  << ")\n";
    evolve::SearchResult result = run_interruptibly(search, *llm.provider, ev, cfg.stopping.max_time_s, stop);
    if (tty && !quiet()) std::cerr << "\n";
    ev.report_overhead();
    return finish(a, task, arch, *ev.evaluator, validator, result, st, fitness.torch_baselines, cfg.batch.enabled);
}

}  // namespace kevo::workflows
