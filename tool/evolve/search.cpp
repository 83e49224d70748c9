#include "evolve/search.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "evolve/archive.h"
#include "evolve/prompt_text.h"
#include "tune/tune.h"
#include "evolve/batch_mode.h"
#include "llm/budget.h"
#include "llm/reply.h"
#include "triton/launch.h"

namespace kevo::evolve {
namespace {

// Deterministic random numbers for one slot: splitmix64 seeded by (run seed, slot key).
class Rng {
public:
    Rng(uint64_t seed, const std::string& key) : state_(seed) {
        for (unsigned char c : key) state_ = (state_ ^ c) * 0x100000001b3ULL;  // FNV-1a over the key
    }
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    uint64_t state_;
};

// Thrown inside a slot when the run must stop (interrupt, budget, time, LLM failure); the slot's
// generation is then left uncommitted and replayed on resume.
struct Stopped {};

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s.precision(digits);
    s << std::fixed << v;
    return s.str();
}

Elite elite_of(const store::Program& p) {
    return Elite{p.id, p.speedup, technique_of(p.source), static_cast<int64_t>(normalize_source(p.source).size())};
}

std::string backend_of(const std::string& source) { return triton::is_triton_source(source) ? "triton" : "cuda"; }
std::string fence_of(const std::string& backend) { return backend == "triton" ? "python" : "cuda"; }

// The evaluator could not judge the program (a busy GPU, evaluator.h's details "outside_kernel").
bool outside_kernel(const store::Program& p) {
    return p.details.is_object() && p.details.contains("outside_kernel") && p.details["outside_kernel"] == true;
}

bool counts_as_failed(const std::string& status) {
    return status != "ok" && status != "pending" && status != "duplicate";
}

struct Slot {
    std::string key;  // "g0.seed", "g3.i1.c0"
    int generation = 0, island = 0;
};

struct SlotResult {
    bool completed = false;
    std::optional<store::Program> child;  // the correct program the slot produced
    std::string feedback;                 // its latest validation feedback
};

}  // namespace

struct Search::Impl {
    const Task& task;
    SearchConfig cfg;
    Prompts prompts;
    llm::Provider& provider;
    Evaluator& evaluator;
    store::Store& store;

    std::string reference, task_text, gpu_text, arch, limits_text;
    std::vector<Island> islands;
    std::function<void(const Progress&)> progress_fn;

    std::mutex mu;  // guards progress, best_id, stop_reason, progress_fn calls
    Progress progress;
    int64_t best_id = 0;
    std::string stop_reason;
    std::atomic<bool> stopping_now{false};
    const std::atomic<bool>* stop_flag = nullptr;
    // Runs in flight at most evaluator.parallel_runs() (one candidate on a local GPU at a time).
    std::mutex gpu_mu;
    std::condition_variable gpu_cv;
    int gpu_busy = 0;
    // Guards `islands` where slots read them while others complete (steady state).
    std::mutex islands_mu;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    double elapsed_before = 0;  // time spent by earlier invocations of this run
    std::unique_ptr<llm::Budget> budget;  // the caps over the stored totals, with reservations
    std::unique_ptr<BatchMode> batch;

    Impl(const Task& t, SearchConfig c, Prompts p, llm::Provider& pr, Evaluator& ev, store::Store& st)
        : task(t), cfg(std::move(c)), prompts(std::move(p)), provider(pr), evaluator(ev), store(st) {}

    double invocation_s() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }

    // Returns true for the first reason given.
    bool request_stop(const std::string& reason) {
        std::lock_guard<std::mutex> lock(mu);
        bool first = stop_reason.empty();
        if (first) stop_reason = reason;
        stopping_now = true;
        return first;
    }
    // True once the run must stop; records why.
    bool should_stop() {
        if (stop_flag && stop_flag->load()) request_stop("interrupted");
        if (cfg.max_time_s > 0 && invocation_s() >= cfg.max_time_s) request_stop("time");
        return stopping_now.load();
    }
    void check_stop() {
        if (should_stop()) throw Stopped{};
    }
    bool budget_reached() { return budget->reached(); }

    void report() {
        // Called with `mu` held.
        progress.elapsed_s = elapsed_before + invocation_s();
        if (progress_fn) progress_fn(progress);
    }

    // ---- set-up and resume ----------------------------------------------------------------------

    void load_or_init() {
        nlohmann::json structure = {{"task_hash", task.hash()},     {"reference_hash", task.reference_hash()},
                                    {"arch", arch},                 {"islands", cfg.islands},
                                    {"children", cfg.children},     {"seed", cfg.seed},
                                    {"initial", !cfg.initial_source.empty()}};
        if (cfg.backend != "cuda") structure["backend"] = cfg.backend;  // absent in runs from before backends
        if (auto existing = store.get_meta("structure")) {
            for (auto& [k, v] : structure.items())
                if (existing->value(k, nlohmann::json()) != v)
                    throw UsageError("the state store belongs to another run (" + k + " was " +
                                     existing->value(k, nlohmann::json()).dump() + ", now " + v.dump() +
                                     "); use another --state, or --fresh to start over");
        } else {
            store.put_meta("structure", structure);
            store.put_meta("task_name", task.name);
        }
        store.put_meta("config", {{"generations", cfg.generations},
                                  {"repair_attempts", cfg.repair_attempts},
                                  {"migration_interval", cfg.migration_interval},
                                  {"restart_after", cfg.restart_after},
                                  {"temperature", cfg.temperature},
                                  {"mode", cfg.mode},
                                  {"model", cfg.model},
                                  {"backend", cfg.backend}});
        elapsed_before = store.get_meta("elapsed_s").value_or(0.0).get<double>();

        islands.clear();
        if (store.last_generation() >= 0) {
            for (const auto& j : store.islands()) islands.push_back(Island::from_json(j));
        } else {
            for (int i = 0; i < cfg.islands; ++i) islands.push_back(Island{i, {}, 0, 0, 0, 0, {}});
        }

        for (const store::Program& p : store.programs()) tally(p);
        store::Spent s = store.spent();
        budget = std::make_unique<llm::Budget>(llm::BudgetCaps{cfg.budget_tokens, cfg.budget_usd, cfg.price}, cfg.log);
        budget->add_spent({s.prompt_tokens, s.completion_tokens, s.cost_usd});
        batch = std::make_unique<BatchMode>(cfg, store, *budget);
        if (batch->load(cfg.log).calls > 0) s = store.spent();
        progress.tokens = s.tokens();
        progress.cost_usd = s.cost_usd;
    }

    // Counts an evaluated (or stored) program into the progress figures; the caller holds `mu`
    // where other threads may be counting too.
    void tally(const store::Program& p) {
        if (p.ok()) {
            ++progress.ok;
            progress.best_sol = std::max(progress.best_sol, sol_fraction_of(p.details));
            if (p.speedup > progress.best_speedup) {
                progress.best_speedup = p.speedup;
                best_id = p.id;
            }
        } else if (p.status == "duplicate") {
            ++progress.duplicates;
        } else if (counts_as_failed(p.status)) {
            ++progress.failed;
        }
    }

    // ---- one LLM call, one evaluation -----------------------------------------------------------

    store::LlmCall llm_call(const std::string& key, const std::string& kind, const std::vector<llm::Message>& messages) {
        if (auto done = store.find_llm_call(key)) return *done;  // paid for already
        check_stop();
        llm::ChatRequest req;
        req.model = cfg.model;
        req.messages = messages;
        req.temperature = cfg.llm_temperature;
        req.max_tokens = cfg.max_tokens;
        req.seed = static_cast<int64_t>(Rng(cfg.seed, key).next() >> 33);
        // Batch mode: the request waits in a batch file, or goes into the next one.
        if (batch->waiting(key)) throw Stopped{};
        if (cfg.llm_batch) {
            batch->defer(key, kind, req);  // (not when the budget cannot hold it: then the run stops for it)
            throw Stopped{};
        }
        llm::ChatResponse resp;
        try {
            llm::Reservation reservation = budget->reserve(req);
            try {
                resp = provider.chat(req);
            } catch (llm::TruncatedReply& e) {
                resp = e.response;  // paid for; extraction will tell the model what went wrong
            }
            resp.usage = budget->settle(reservation, resp.usage);
        } catch (const llm::BudgetExceeded& e) {
            if (request_stop("budget") && cfg.log) cfg.log(e.what());
            throw Stopped{};
        } catch (const llm::Cancelled&) {
            request_stop("interrupted");
            throw Stopped{};
        } catch (const llm::LlmError& e) {
            request_stop(std::string("error: LLM request failed: ") + e.what());
            throw Stopped{};
        }
        store::LlmCall call;
        call.key = key;
        call.kind = kind;
        call.request = nlohmann::json::parse(llm::request_json(req));
        call.reply = resp.content;
        call.model = resp.model;
        call.prompt_tokens = resp.usage.prompt_tokens;
        call.completion_tokens = resp.usage.completion_tokens;
        call.cost_usd = resp.usage.cost_usd;
        call.latency_s = resp.latency_s;
        call.id = store.add_llm_call(call);
        // The stored call is the one that stands: ours, or one a second writer stored first under
        // this key (the store keeps the first and never fails on the second).
        if (auto stored = store.find_llm_call(key)) call = *stored;
        std::lock_guard<std::mutex> lock(mu);
        progress.tokens += call.prompt_tokens + call.completion_tokens;
        progress.cost_usd += call.cost_usd;
        return call;
    }

    void evaluate(store::Program& p) {
        check_stop();
        CompileResult compiled = evaluator.compile(p.source);
        Evaluation ev;
        if (!compiled.ok) {
            ev.status = Status::compile_error;
            ev.feedback = compiled.log;
            ev.details = {{"status", "compile_error"}, {"log", compiled.log}, {"compile_s", compiled.seconds}};
        } else {
            GpuSlot slot(*this);
            check_stop();
            ev = evaluator.run(compiled);
            if (ev.ok() && cfg.profile_best && is_new_best(ev.speedup)) add_profile(ev, compiled);
        }
        if (ev.status == Status::no_device) {  // not the candidate's fault: stop, re-evaluate on resume
            request_stop("error: no GPU to validate on: " + ev.feedback);
            throw Stopped{};
        }
        p.status = status_name(ev.status);  // the store's column also holds the search's own states
        p.speedup = ev.ok() ? ev.speedup : 0;
        p.feedback = ev.feedback;
        p.details = ev.details;
    }

    bool is_new_best(double speedup) {
        std::lock_guard<std::mutex> lock(mu);
        return speedup > progress.best_speedup;
    }

    // What a profiler says about a new best kernel goes into its feedback, hence the next prompts.
    void add_profile(Evaluation& ev, const CompileResult& compiled) {
        std::string summary = evaluator.profile(compiled);
        if (summary.empty()) return;
        ev.feedback += "\nProfile (Nsight Compute): " + summary;
        if (ev.details.is_object()) ev.details["profile"] = summary;
    }

    // One of the evaluator's parallel_runs() slots, held while a candidate runs.
    struct GpuSlot {
        Impl& s;
        explicit GpuSlot(Impl& impl) : s(impl) {
            std::unique_lock<std::mutex> lock(s.gpu_mu);
            const int limit = std::max(1, s.evaluator.parallel_runs());
            s.gpu_cv.wait(lock, [&] { return s.gpu_busy < limit; });
            ++s.gpu_busy;
        }
        ~GpuSlot() {
            std::lock_guard<std::mutex> lock(s.gpu_mu);
            --s.gpu_busy;
            s.gpu_cv.notify_one();
        }
    };

    // The evaluator with every run in a GPU slot, for the tuner.
    struct LockedEvaluator : Evaluator {
        Evaluator& inner;
        Impl& impl;
        LockedEvaluator(Evaluator& e, Impl& i) : inner(e), impl(i) {}
        DeviceInfo device() override { return inner.device(); }
        std::string arch() override { return inner.arch(); }
        CompileResult compile(const std::string& source) override { return inner.compile(source); }
        Evaluation run(const CompileResult& compiled) override {
            GpuSlot slot(impl);
            if (impl.should_stop()) throw Stopped{};
            return inner.run(compiled);
        }
    };

    // Tunes a correct program that declares tunables and is within 10% of the best so far. The
    // better variant (if any) is stored under KEY.tune, so a resumed run replays it.
    std::optional<store::Program> tune_program(const store::Program& p, const std::string& key) {
        if (cfg.tune_evals <= 0) return std::nullopt;
        if (backend_of(p.source) != "cuda") return std::nullopt;  // the tuner edits CUDA sources (KEVO_TUNE macros)
        std::vector<tune::Tunable> tunables;
        try {
            tunables = tune::parse_tunables(p.source);
        } catch (const tune::TuneError&) {
            return std::nullopt;  // the compiler accepted it; the tuner cannot read it: leave it be
        }
        if (tunables.empty()) return std::nullopt;
        if (auto done = store.find_program(key)) {
            if (done->status != "pending") return done->ok() ? done : std::nullopt;
        }
        {
            std::lock_guard<std::mutex> lock(mu);
            if (p.speedup < 0.9 * progress.best_speedup) return std::nullopt;
        }
        tune::TuneOptions o;
        o.max_evals = cfg.tune_evals;
        o.seed = Rng(cfg.seed, key).next();
        LockedEvaluator locked(evaluator, *this);
        tune::TuneResult r = tune::tune(p.source, locked, o);
        const tune::Trial* best = r.best_trial();
        if (!best || best->point == tune::default_point(r.tunables) || best->speedup <= p.speedup) return std::nullopt;
        store::Program t;
        t.key = key;
        t.generation = p.generation;
        t.island = p.island;
        t.parent_id = p.id;
        t.origin = "tune";
        t.attempt = p.attempt;
        t.source = r.best_source;
        finish(t);  // validated once more, as every stored program is
        if (t.ok()) {
            t.feedback += "\nTuned without the LLM: " + tune::point_text(best->point) + " (" + std::to_string(r.trials.size()) +
                          " variants, strategy " + r.strategy + "; the untuned kernel: " + fixed(p.speedup, 3) + "x)";
            t.details["tune"] = r.to_json();
            store.put_program(t);
        }
        return t.ok() ? std::optional<store::Program>(t) : std::nullopt;
    }

    // ---- a slot: parent selection, mutation, repair loop -----------------------------------------

    std::string inspirations_text(const std::vector<store::Program>& insp) const {
        if (insp.empty()) return "(none yet)";
        std::string out;
        for (const auto& p : insp)
            out += "### Kernel #" + std::to_string(p.id) + ": speedup " + fixed(p.speedup, 2) + "x, technique " +
                   technique_of(p.source) + "\n\n```" + fence_of(backend_of(p.source)) + "\n" + p.source + "\n```\n\n";
        return out;
    }

    std::map<std::string, std::string> base_vars(const std::string& backend) const {
        const bool tr = backend == "triton";
        return {{"task_name", task.name}, {"task", task_text}, {"reference", reference},
                {"abi", prompts.text(tr ? "triton" : "abi")}, {"gpu", gpu_text}, {"speed_of_light", limits_text},
                {"language", tr ? "Triton" : "CUDA"}, {"fence", fence_of(backend)}};
    }
    // The backend an island writes in.
    std::string island_backend(int island) const {
        if (cfg.backend == "both") return island % 2 == 0 ? "triton" : "cuda";
        return cfg.backend;
    }

    std::vector<llm::Message> messages(const std::string& templ, const std::map<std::string, std::string>& vars) const {
        return {{"system", prompts.text("system")}, {"user", prompts.render(templ, vars)}};
    }

    SlotResult run_slot(const Slot& slot) {
        Rng rng(cfg.seed, slot.key);
        std::optional<store::Program> parent;
        std::vector<store::Program> insp;
        std::optional<Island> island;  // a snapshot: other slots may be changing the islands (steady state)
        if (slot.generation > 0) {
            std::lock_guard<std::mutex> lock(islands_mu);
            island = islands[slot.island];
        }
        if (island && !island->archive.empty()) {
            std::vector<Elite> elites = island->archive.elites();
            std::vector<double> speedups;
            for (const Elite& e : elites) speedups.push_back(e.speedup);
            size_t pick = select_index(speedups, cfg.temperature, rng.uniform());
            parent = store.get_program(elites[pick].id);
            // Inspirations: the island's fastest other program, then the most different ones.
            std::vector<store::Program> programs;
            std::vector<std::string> sources;
            std::vector<double> speeds;
            int parent_index = -1;
            for (size_t i = 0; i < elites.size(); ++i) {
                auto p = i == pick ? parent : store.get_program(elites[i].id);
                if (!p) continue;
                if (i == pick) parent_index = static_cast<int>(programs.size());
                programs.push_back(*p);
                sources.push_back(p->source);
                speeds.push_back(p->speedup);
            }
            for (size_t i : pick_inspirations(sources, speeds, parent_index, cfg.inspirations)) insp.push_back(programs[i]);
        }
        bool diff = parent && (cfg.mode == "diff" || (cfg.mode == "mixed" && rng.uniform() < cfg.diff_share));
        bool initial = slot.generation == 0 && !cfg.initial_source.empty();
        std::string kind = initial ? "initial" : parent ? "mutation" : "seed";
        const std::string backend = island_backend(slot.island);
        // A parent in the other backend (a migrant, or the seed on a CUDA island of a "both" run)
        // is translated: a full rewrite in this island's backend.
        const bool translate = parent && backend_of(parent->source) != backend;
        if (translate) diff = false;

        auto vars = base_vars(backend);
        std::vector<llm::Message> msgs;
        std::string edit_base;  // what SEARCH/REPLACE edits in the reply apply to
        if (parent) {
            vars["parent_code"] = parent->source;
            vars["parent_fence"] = fence_of(backend_of(parent->source));
            vars["parent_metrics"] = "speedup " + fixed(parent->speedup, 3) + "x over the reference";
            if (double f = sol_fraction_of(parent->details); f > 0)
                vars["parent_metrics"] += ", " + fixed(100 * f, 0) + "% of the speed of light";
            vars["inspirations"] = inspirations_text(insp);
            std::string fb = "Current kernel: " + parent->feedback;
            if (translate)
                fb = "The current kernel is written in " + std::string(backend == "triton" ? "CUDA" : "Triton") +
                     "; write the " + (backend == "triton" ? "Triton" : "CUDA") + " version of it (the same algorithm where it " +
                     "fits), in the " + (backend == "triton" ? "Triton" : "CUDA") + " kernel format above.\n\n" + fb;
            if (!island->last_feedback.empty() && island->last_feedback != parent->feedback)
                fb += "\n\nMost recent candidate on this island: " + island->last_feedback;
            vars["feedback"] = fb;
            msgs = messages(diff ? "mutate_diff" : "mutate_full", vars);
            if (diff) edit_base = parent->source;
        } else if (!initial) {
            msgs = messages("seed", vars);
        }

        SlotResult result;
        int64_t previous_id = parent ? parent->id : 0;
        for (int attempt = 0; attempt <= cfg.repair_attempts; ++attempt) {
            std::string key = slot.key + ".a" + std::to_string(attempt);
            store::Program p;
            auto existing = store.find_program(key);
            if (existing && existing->status != "pending") {
                p = *existing;  // done before a restart of the process: replay it
            } else {
                p.key = key;
                p.generation = slot.generation;
                p.island = slot.island;
                p.parent_id = previous_id;
                p.origin = attempt == 0 ? kind : "repair";
                p.attempt = attempt;
                if (attempt == 0 && initial) {
                    p.source = cfg.initial_source;
                } else {
                    store::LlmCall call = llm_call(key, attempt == 0 ? kind : "repair", msgs);
                    p.llm_call_id = call.id;
                    try {
                        p.source = llm::candidate_from_reply(call.reply, edit_base.empty() ? nullptr : &edit_base);
                    } catch (const llm::ReplyError& e) {
                        p.status = "no_code";
                        p.feedback = std::string("Your reply could not be used: ") + e.what();
                    }
                }
                finish(p);
            }
            if (p.ok()) {
                result.child = p;
                result.feedback = p.feedback;
                if (auto tuned = tune_program(p, p.key + ".tune")) {
                    result.child = tuned;
                    result.feedback = tuned->feedback;
                }
                break;
            }
            result.feedback = p.feedback;
            if (p.status == "duplicate" && p.details.value("status", "") == "ok") break;  // nothing new
            if (attempt == cfg.repair_attempts) break;
            // Ask for the smallest fix of what failed (or, for an unusable reply, of what it started from).
            std::string failing = p.source.empty() ? (edit_base.empty() && parent ? parent->source : edit_base) : p.source;
            // The repair keeps the failing code's backend (or the island's, when there is no code).
            for (auto& [k, v] : base_vars(failing.empty() ? backend : backend_of(failing))) vars[k] = v;
            vars["code"] = failing.empty() ? "(no kernel yet)" : failing;
            vars["error"] = (outside_kernel(p) ? std::string() : p.status + ": ") + p.feedback;  // "rejected" would blame the kernel
            msgs = messages("repair", vars);
            edit_base = failing;
            previous_id = p.id;
        }
        result.completed = true;
        return result;
    }

    // Stores an attempt: rejected as a duplicate, evaluated, or recorded as an unusable reply.
    void finish(store::Program& p) {
        if (p.status == "no_code") {
            p.id = store.put_program(p);
        } else {
            p.norm_hash = normalized_hash(p.source);
            p.status = "pending";
            store::Program claimed = store.claim_program(p);
            if (claimed.key != p.key) {
                p.status = "duplicate";
                p.speedup = claimed.speedup;
                p.feedback = claimed.feedback;
                p.details = {{"duplicate_of", claimed.id}, {"status", claimed.status}};
                p.id = store.put_program(p);
            } else {
                p.id = claimed.id;
                evaluate(p);
                // A failure outside the kernel (the judge could not attribute it) does not mark its
                // source: the same kernel sent again is evaluated again, not dropped as a duplicate.
                if (outside_kernel(p)) p.norm_hash.clear();
                store.put_program(p);
            }
        }
        std::lock_guard<std::mutex> lock(mu);
        tally(p);
        report();
    }

    // ---- a generation ---------------------------------------------------------------------------

    std::vector<SlotResult> run_slots(const std::vector<Slot>& slots) {
        std::vector<SlotResult> results(slots.size());
        std::atomic<size_t> next{0};
        std::exception_ptr error;
        std::mutex error_mu;
        auto worker = [&] {
            for (size_t i; (i = next++) < slots.size();) {
                try {
                    results[i] = run_slot(slots[i]);
                } catch (const Stopped&) {
                } catch (...) {
                    std::lock_guard<std::mutex> lock(error_mu);
                    if (!error) error = std::current_exception();
                    request_stop("error");
                }
            }
        };
        size_t n = cfg.jobs > 0 ? std::min(slots.size(), static_cast<size_t>(cfg.jobs)) : slots.size();
        std::vector<std::thread> threads;
        for (size_t i = 0; i < n; ++i) threads.emplace_back(worker);
        for (auto& t : threads) t.join();
        if (error) std::rethrow_exception(error);
        return results;
    }

    void improve(Island& island, const store::Program& p, int generation) {
        island.archive.insert(elite_of(p));
        if (p.speedup > island.best) {
            island.best = p.speedup;
            island.last_improvement = generation;
        }
    }

    // A finished slot's child enters its island's archive (called with islands_mu held).
    void apply(const Slot& slot, const SlotResult& result) {
        Island& island = islands[slot.island];
        if (!result.feedback.empty()) island.last_feedback = result.feedback;
        if (const auto& child = result.child) {
            improve(island, *child, slot.generation);
            if (island.seed_id == 0) island.seed_id = child->id;  // the island seeded itself
        }
    }

    // Commits generation `gen`: its children (unless `applied` already, as in steady state),
    // migration, restarts, and the islands' states with the history row in one store transaction.
    void commit(int gen, const std::vector<Slot>& slots, const std::vector<SlotResult>& results, bool applied = false) {
        std::lock_guard<std::mutex> islands_lock(islands_mu);
        std::vector<store::Event> events;
        if (gen == 0) {
            if (const auto& seed = results[0].child) {
                for (Island& island : islands) {
                    improve(island, *seed, gen);
                    island.seed_id = seed->id;
                }
                events.push_back({gen, "seed", {{"program", seed->id}, {"speedup", seed->speedup}}});
            }
        } else if (!applied) {
            for (size_t i = 0; i < slots.size(); ++i) apply(slots[i], results[i]);
        }
        if (cfg.migration_interval > 0 && islands.size() > 1 && gen > 0 && gen % cfg.migration_interval == 0) {
            // Ring migration of each island's best programs, from a snapshot taken before any arrive.
            std::vector<std::vector<Elite>> outgoing;
            for (const Island& island : islands) {
                std::vector<Elite> e = island.archive.elites();
                std::stable_sort(e.begin(), e.end(), [](const Elite& a, const Elite& b) { return a.speedup > b.speedup; });
                e.resize(std::min(e.size(), static_cast<size_t>(std::max(cfg.migrants, 0))));
                outgoing.push_back(e);
            }
            for (size_t from = 0; from < islands.size(); ++from) {
                size_t to = (from + 1) % islands.size();
                nlohmann::json ids = nlohmann::json::array();
                for (const Elite& e : outgoing[from]) {
                    if (auto p = store.get_program(e.id)) improve(islands[to], *p, gen);
                    ids.push_back(e.id);
                }
                if (!ids.empty()) events.push_back({gen, "migration", {{"from", from}, {"to", to}, {"programs", ids}}});
            }
        }
        if (cfg.restart_after > 0 && gen > 0) {
            for (Island& island : islands) {
                if (gen - island.last_improvement < cfg.restart_after) continue;
                island.archive.clear();
                island.best = 0;
                island.last_feedback.clear();
                if (island.seed_id)
                    if (auto seed = store.get_program(island.seed_id)) improve(island, *seed, gen);
                island.last_improvement = gen;
                ++island.restarts;
                events.push_back({gen, "restart", {{"island", island.index}, {"restarts", island.restarts}}});
            }
        }
        store::Generation row;
        std::vector<nlohmann::json> states;
        for (const Island& island : islands) states.push_back(island.to_json());
        {
            std::lock_guard<std::mutex> lock(mu);
            progress.generation = gen;
            progress.elapsed_s = elapsed_before + invocation_s();
            row = {gen, progress.best_speedup, best_id, progress.ok, progress.failed, progress.tokens, progress.cost_usd,
                   progress.elapsed_s};
        }
        store.commit_generation(row, states, events);
        store.put_meta("elapsed_s", row.elapsed_s);
        std::lock_guard<std::mutex> lock(mu);
        report();
    }

    std::vector<Slot> slots_of(int gen) const {
        if (gen == 0) return {Slot{"g0.seed", 0, 0}};
        std::vector<Slot> slots;
        for (int i = 0; i < static_cast<int>(islands.size()); ++i)
            for (int c = 0; c < cfg.children; ++c)
                slots.push_back(Slot{"g" + std::to_string(gen) + ".i" + std::to_string(i) + ".c" + std::to_string(c), gen, i});
        return slots;
    }

    // Whether the run must stop before generation `gen` starts (records why).
    bool stop_before(int gen) {
        if (gen > cfg.generations) {
            request_stop("generations");
        } else if (cfg.target_speedup > 0 && best_speedup() >= cfg.target_speedup) {
            request_stop("target");
        } else if (budget_reached()) {
            request_stop("budget");
        }
        return should_stop();
    }
    double best_speedup() {
        std::lock_guard<std::mutex> lock(mu);
        return progress.best_speedup;
    }

    // Steady state (SearchConfig::steady): generation 0 alone, then a pool of `cap` threads, each
    // taking the next slot as soon as it is free; generations are committed in order as they finish.
    void run_steady() {
        int committed = store.last_generation();
        if (committed < 0) {  // the seed: every island starts from it
            if (stop_before(0)) return;
            std::vector<Slot> slots = slots_of(0);
            std::vector<SlotResult> results = run_slots(slots);
            if (!results[0].completed) return;
            commit(0, slots, results);
            committed = 0;
        }
        const int per_gen = cfg.islands * cfg.children;
        const int cap = cfg.jobs > 0 ? cfg.jobs : std::max(per_gen, evaluator.capacity());
        // Generations past the last committed one that may run: at least two, so that the next
        // generation starts while the slowest slots of the current one finish.
        const int ahead = std::max(2, (cap + per_gen - 1) / per_gen + 1);

        std::mutex smu;  // guards what follows; taken before islands_mu and mu
        std::condition_variable scv;
        int next_gen = committed + 1;
        size_t next_index = 0;
        std::map<int, std::vector<Slot>> slots;
        std::map<int, std::vector<SlotResult>> results;
        std::map<int, int> remaining;
        bool broken = false;  // a slot did not complete (stop): later generations stay uncommitted
        std::exception_ptr error;

        auto take = [&]() -> std::optional<Slot> {
            std::unique_lock<std::mutex> lock(smu);
            while (true) {
                if (broken || error) return std::nullopt;
                if (next_gen > committed + ahead) {  // far enough ahead: wait for a commit
                    scv.wait_for(lock, std::chrono::milliseconds(100));
                    if (should_stop()) return std::nullopt;
                    continue;
                }
                if (next_gen > cfg.generations) {
                    if (committed >= cfg.generations) request_stop("generations");
                    return std::nullopt;
                }
                if (next_index == 0) {
                    if (stop_before(next_gen)) return std::nullopt;
                    slots[next_gen] = slots_of(next_gen);
                    results[next_gen].resize(slots[next_gen].size());
                    remaining[next_gen] = static_cast<int>(slots[next_gen].size());
                    std::lock_guard<std::mutex> plock(mu);
                    progress.generation = next_gen;
                } else if (should_stop()) {
                    return std::nullopt;
                }
                Slot s = slots[next_gen][next_index++];
                if (next_index == slots[next_gen].size()) {
                    ++next_gen;
                    next_index = 0;
                }
                return s;
            }
        };
        auto worker = [&] {
            while (std::optional<Slot> s = take()) {
                SlotResult r;
                try {
                    r = run_slot(*s);
                } catch (const Stopped&) {
                } catch (...) {
                    std::lock_guard<std::mutex> lock(smu);
                    if (!error) error = std::current_exception();
                    request_stop("error");
                }
                std::lock_guard<std::mutex> lock(smu);
                if (!r.completed) {
                    broken = true;
                    scv.notify_all();
                    continue;
                }
                {
                    std::lock_guard<std::mutex> ilock(islands_mu);
                    apply(*s, r);
                }
                const auto& gs = slots[s->generation];
                size_t index = 0;
                while (gs[index].key != s->key) ++index;
                results[s->generation][index] = r;
                --remaining[s->generation];
                while (!broken && remaining.count(committed + 1) && remaining[committed + 1] == 0) {
                    int g = committed + 1;
                    try {
                        commit(g, slots[g], results[g], true);
                    } catch (...) {
                        if (!error) error = std::current_exception();
                        request_stop("error");
                        break;
                    }
                    slots.erase(g);
                    results.erase(g);
                    remaining.erase(g);
                    committed = g;
                }
                scv.notify_all();
            }
        };
        std::vector<std::thread> threads;
        for (int i = 0; i < cap; ++i) threads.emplace_back(worker);
        for (auto& t : threads) t.join();
        if (error) std::rethrow_exception(error);
        if (committed >= cfg.generations) request_stop("generations");
    }

    SearchResult run() {
        load_or_init();
        int gen = store.last_generation() + 1;
        SearchResult result;
        if (cfg.steady) run_steady();
        while (!cfg.steady) {
            {
                std::lock_guard<std::mutex> lock(mu);
                progress.generation = gen;
            }
            if (gen > cfg.generations) {
                request_stop("generations");
            } else if (cfg.target_speedup > 0 && progress.best_speedup >= cfg.target_speedup) {
                request_stop("target");
            } else if (cfg.target_sol > 0 && progress.best_sol >= cfg.target_sol) {
                request_stop("target_sol");
            } else if (budget_reached()) {
                request_stop("budget");
            }
            if (should_stop()) break;
            std::vector<Slot> slots = slots_of(gen);
            std::vector<SlotResult> results = run_slots(slots);
            if (!std::all_of(results.begin(), results.end(), [](const SlotResult& r) { return r.completed; })) break;
            commit(gen, slots, results);
            ++gen;
        }
        if (std::lock_guard<std::mutex> lock(mu); stop_reason.empty())
            stop_reason = batch->finish(result);
        result.generations_committed = store.last_generation() + 1;
        {
            std::lock_guard<std::mutex> lock(mu);
            result.stop_reason = stop_reason;
            progress.elapsed_s = elapsed_before + invocation_s();
            result.progress = progress;
            if (best_id) result.best = store.get_program(best_id);
        }
        if (result.best)
            if (auto call = store.find_llm_call(result.best->key)) result.best_model = call->model;
        store.put_meta("elapsed_s", result.progress.elapsed_s);
        store.put_meta("stop_reason", result.stop_reason);
        return result;
    }
};

Search::Search(const Task& task, SearchConfig config, Prompts prompts, llm::Provider& provider, Evaluator& evaluator,
               store::Store& store)
    : impl_(std::make_unique<Impl>(task, std::move(config), std::move(prompts), provider, evaluator, store)) {
    const SearchConfig& c = impl_->cfg;
    if (c.islands < 1 || c.children < 1 || c.generations < 0 || c.repair_attempts < 0 || c.migrants < 0 ||
        c.inspirations < 0 || !(c.temperature > 0))
        throw UsageError("search: islands, children and temperature must be positive; generations, repair attempts, "
                         "migrants and inspirations must not be negative");
    if (c.target_sol < 0 || c.target_sol > 1 || c.tune_evals < 0)
        throw UsageError("search: the target fraction of the speed of light must be in (0, 1]; tune evaluations must not be negative");
    if (c.mode != "full" && c.mode != "diff" && c.mode != "mixed")
        throw UsageError("search: --mode must be full, diff or mixed, not " + c.mode);
    if (c.llm_batch && c.model.empty())
        throw UsageError("--llm-batch needs exactly one --model: a Batch API input file holds requests for one model");
    if (c.llm_batch && c.budget_usd > 0 && !c.price)
        throw UsageError("--llm-batch with --budget-usd needs --llm-price (the batch price): Batch API replies "
                         "report no cost, so the cap could not be kept");
    impl_->reference = describe_reference(task);
    impl_->task_text = describe_task(task);
    impl_->arch = evaluator.arch();
    const DeviceInfo device = evaluator.device();
    impl_->gpu_text = describe_gpu(device, impl_->arch);
    impl_->limits_text = describe_limits(task, device, evaluator.measured_bandwidth_gbs(), impl_->arch);
}

Search::~Search() = default;

void Search::on_progress(std::function<void(const Progress&)> fn) { impl_->progress_fn = std::move(fn); }

SearchResult Search::run(const std::atomic<bool>* stop) {
    impl_->stop_flag = stop;
    return impl_->run();
}

}  // namespace kevo::evolve
