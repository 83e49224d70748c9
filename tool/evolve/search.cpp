#include "evolve/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "evolve/archive.h"
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

std::string describe_task(const Task& t) {
    std::ostringstream s;
    auto shape = [](const TensorSpec& spec) {
        std::string r = std::string(dtype_name(spec.dtype)) + "[";
        for (size_t i = 0; i < spec.shape.size(); ++i)
            r += (i ? ", " : "") + (spec.shape[i].symbol.empty() ? std::to_string(spec.shape[i].value) : spec.shape[i].symbol);
        return r + "]";
    };
    s << "Reference function: `" << t.reference_function << "`\n\nInputs (in order):\n";
    for (const auto& in : t.inputs) s << "- " << in.name << ": " << shape(in) << " (values: " << in.init.kind << ")\n";
    s << "\nOutputs (in order):\n";
    for (const auto& out : t.outputs) s << "- " << out.name << ": " << shape(out) << "\n";
    if (!t.shapes.empty() && !t.shapes[0].empty()) {
        s << "\nShape sets (all are checked for correctness, the first is timed):\n";
        for (const auto& set : t.shapes) {
            s << "-";
            for (const auto& [sym, v] : set) s << " " << sym << "=" << v;
            s << "\n";
        }
    }
    s << "\nTolerance: atol " << t.atol << ", rtol " << t.rtol << ".";
    return s.str();
}

std::string describe_gpu(const DeviceInfo& d, const std::string& arch) {
    if (!d.present) return "Target architecture " + arch + " (no device details available).";
    std::ostringstream s;
    s << d.name << " (" << arch << ", compute capability " << d.cc_major << "." << d.cc_minor << "): " << d.sm_count
      << " SMs, about " << fixed(d.mem_bandwidth_gbs, 0) << " GB/s peak memory bandwidth, "
      << d.l2_bytes / (1024 * 1024) << " MiB L2 cache, " << d.smem_per_block / 1024
      << " KiB shared memory per block (up to " << d.smem_per_block_optin / 1024 << " KiB opt-in, "
      << d.smem_per_sm / 1024 << " KiB per SM), " << d.total_mem / (1024LL * 1024 * 1024) << " GiB device memory.";
    return s.str();
}

Elite elite_of(const store::Program& p) {
    return Elite{p.id, p.speedup, technique_of(p.source), static_cast<int64_t>(normalize_source(p.source).size())};
}

std::string backend_of(const std::string& source) { return triton::is_triton_source(source) ? "triton" : "cuda"; }
std::string fence_of(const std::string& backend) { return backend == "triton" ? "python" : "cuda"; }

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

    std::string reference, task_text, gpu_text, arch;
    std::vector<Island> islands;
    std::function<void(const Progress&)> progress_fn;

    std::mutex mu;  // guards progress, best_id, stop_reason, progress_fn calls
    Progress progress;
    int64_t best_id = 0;
    std::string stop_reason;
    std::atomic<bool> stopping_now{false};
    const std::atomic<bool>* stop_flag = nullptr;
    std::mutex gpu;  // one candidate on the GPU at a time
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    double elapsed_before = 0;  // time spent by earlier invocations of this run

    Impl(const Task& t, SearchConfig c, Prompts p, llm::Provider& pr, Evaluator& ev, store::Store& st)
        : task(t), cfg(std::move(c)), prompts(std::move(p)), provider(pr), evaluator(ev), store(st) {}

    double invocation_s() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }

    void request_stop(const std::string& reason) {
        std::lock_guard<std::mutex> lock(mu);
        if (stop_reason.empty()) stop_reason = reason;
        stopping_now = true;
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
    bool budget_reached() {
        store::Spent s = store.spent();
        return (cfg.budget_tokens > 0 && s.tokens() >= cfg.budget_tokens) ||
               (cfg.budget_usd > 0 && s.cost_usd >= cfg.budget_usd);
    }

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
        progress.tokens = s.tokens();
        progress.cost_usd = s.cost_usd;
    }

    // Counts an evaluated (or stored) program into the progress figures; the caller holds `mu`
    // where other threads may be counting too.
    void tally(const store::Program& p) {
        if (p.ok()) {
            ++progress.ok;
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
        if (budget_reached()) {
            request_stop("budget");
            throw Stopped{};
        }
        llm::ChatRequest req;
        req.model = cfg.model;
        req.messages = messages;
        req.temperature = cfg.llm_temperature;
        req.max_tokens = cfg.max_tokens;
        req.seed = static_cast<int64_t>(Rng(cfg.seed, key).next() >> 33);
        llm::ChatResponse resp;
        try {
            resp = provider.chat(req);
        } catch (llm::TruncatedReply& e) {
            resp = e.response;  // paid for; extraction will tell the model what went wrong
        } catch (const llm::BudgetExceeded&) {
            request_stop("budget");
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
            ev.status = "compile_error";
            ev.feedback = compiled.log;
            ev.details = {{"status", "compile_error"}, {"log", compiled.log}, {"compile_s", compiled.seconds}};
        } else {
            std::lock_guard<std::mutex> lock(gpu);
            check_stop();
            ev = evaluator.run(compiled);
        }
        if (ev.status == "no_device") {  // not the candidate's fault: stop, re-evaluate on resume
            request_stop("error: no GPU to validate on: " + ev.feedback);
            throw Stopped{};
        }
        p.status = ev.status;
        p.speedup = ev.ok() ? ev.speedup : 0;
        p.feedback = ev.feedback;
        p.details = ev.details;
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
                {"abi", prompts.text(tr ? "triton" : "abi")}, {"gpu", gpu_text},
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
        const Island* island = slot.generation > 0 ? &islands[slot.island] : nullptr;
        if (island && !island->archive.empty()) {
            std::vector<Elite> elites = island->archive.elites();
            std::vector<double> speedups;
            for (const Elite& e : elites) speedups.push_back(e.speedup);
            size_t pick = select_index(speedups, cfg.temperature, rng.uniform());
            parent = store.get_program(elites[pick].id);
            // Inspirations: the island's best (unless it is the parent), then random other elites.
            std::vector<Elite> others;
            for (size_t i = 0; i < elites.size(); ++i)
                if (i != pick) others.push_back(elites[i]);
            std::stable_sort(others.begin(), others.end(),
                             [](const Elite& a, const Elite& b) { return a.speedup > b.speedup; });
            for (size_t i = 1; i < others.size(); ++i)  // Fisher-Yates on everything after the best
                std::swap(others[i], others[i + static_cast<size_t>(rng.uniform() * static_cast<double>(others.size() - i))]);
            for (size_t i = 0; i < others.size() && static_cast<int>(insp.size()) < cfg.inspirations; ++i)
                if (auto p = store.get_program(others[i].id)) insp.push_back(*p);
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
            vars["error"] = p.status + ": " + p.feedback;
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

    void commit(int gen, const std::vector<Slot>& slots, const std::vector<SlotResult>& results) {
        std::vector<store::Event> events;
        if (gen == 0) {
            if (const auto& seed = results[0].child) {
                for (Island& island : islands) {
                    improve(island, *seed, gen);
                    island.seed_id = seed->id;
                }
                events.push_back({gen, "seed", {{"program", seed->id}, {"speedup", seed->speedup}}});
            }
        } else {
            for (size_t i = 0; i < slots.size(); ++i) {
                Island& island = islands[slots[i].island];
                if (!results[i].feedback.empty()) island.last_feedback = results[i].feedback;
                if (const auto& child = results[i].child) {
                    improve(island, *child, gen);
                    if (island.seed_id == 0) island.seed_id = child->id;  // the island seeded itself
                }
            }
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

    SearchResult run() {
        load_or_init();
        int gen = store.last_generation() + 1;
        SearchResult result;
        while (true) {
            {
                std::lock_guard<std::mutex> lock(mu);
                progress.generation = gen;
            }
            if (gen > cfg.generations) {
                request_stop("generations");
            } else if (cfg.target_speedup > 0 && progress.best_speedup >= cfg.target_speedup) {
                request_stop("target");
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
    if (c.mode != "full" && c.mode != "diff" && c.mode != "mixed")
        throw UsageError("search: --mode must be full, diff or mixed, not " + c.mode);
    impl_->reference = read_file(task.reference_source);
    impl_->task_text = describe_task(task);
    impl_->arch = evaluator.arch();
    impl_->gpu_text = describe_gpu(evaluator.device(), impl_->arch);
}

Search::~Search() = default;

void Search::on_progress(std::function<void(const Progress&)> fn) { impl_->progress_fn = std::move(fn); }

SearchResult Search::run(const std::atomic<bool>* stop) {
    impl_->stop_flag = stop;
    return impl_->run();
}

}  // namespace kevo::evolve
