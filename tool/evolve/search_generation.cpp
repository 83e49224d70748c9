#include "evolve/search_generation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace kevo::evolve::detail {

void Generations::run_barrier() {
    for (int gen = s_.store.last_generation() + 1;; ++gen) {
        if (stop_before_barrier(gen)) break;
        std::vector<Slot> slots = slots_of(gen);
        std::vector<SlotResult> results = run_slots(slots);
        if (!std::all_of(results.begin(), results.end(), [](const SlotResult& r) { return r.completed; })) break;
        commit(gen, slots, results);
    }
}

// stop_before() for the barrier loop, which also stops at the speed-of-light target.
bool Generations::stop_before_barrier(int gen) {
    {
        std::lock_guard<std::mutex> lock(s_.mu);
        s_.progress.generation = gen;
    }
    const SearchConfig& cfg = s_.cfg;
    if (gen > cfg.evolution.generations) {
        s_.request_stop(StopReason::generations);
    } else if (cfg.stopping.target_speedup > 0 && s_.progress.best_speedup >= cfg.stopping.target_speedup) {
        s_.request_stop(StopReason::target);
    } else if (cfg.stopping.target_sol > 0 && s_.progress.best_sol >= cfg.stopping.target_sol) {
        s_.request_stop(StopReason::target_sol);
    } else if (s_.budget_reached()) {
        s_.request_stop(StopReason::budget);
    }
    return s_.should_stop();
}

bool Generations::stop_before(int gen) {
    if (gen > s_.cfg.evolution.generations) {
        s_.request_stop(StopReason::generations);
    } else if (s_.cfg.stopping.target_speedup > 0 && s_.best_speedup() >= s_.cfg.stopping.target_speedup) {
        s_.request_stop(StopReason::target);
    } else if (s_.budget_reached()) {
        s_.request_stop(StopReason::budget);
    }
    return s_.should_stop();
}

std::vector<Slot> Generations::slots_of(int gen) const {
    if (gen == 0) return {Slot{"g0.seed", 0, 0}};
    std::vector<Slot> slots;
    for (int i = 0; i < static_cast<int>(s_.islands.size()); ++i)
        for (int c = 0; c < s_.cfg.structure.children; ++c)
            slots.push_back(Slot{"g" + std::to_string(gen) + ".i" + std::to_string(i) + ".c" + std::to_string(c), gen, i});
    return slots;
}

std::vector<SlotResult> Generations::run_slots(const std::vector<Slot>& slots) {
    std::vector<SlotResult> results(slots.size());
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mu;
    auto worker = [&] {
        for (size_t i; (i = next++) < slots.size();) {
            try {
                results[i] = runner_.run(slots[i]);
            } catch (const Stopped&) {
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mu);
                if (!error) error = std::current_exception();
                s_.request_stop(StopReason::error);
            }
        }
    };
    size_t n = s_.cfg.evolution.jobs > 0 ? std::min(slots.size(), static_cast<size_t>(s_.cfg.evolution.jobs)) : slots.size();
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
    return results;
}

void Generations::improve(Island& island, const store::Program& p, int generation) {
    island.archive.insert(elite_of(p));
    if (p.speedup > island.best) {
        island.best = p.speedup;
        island.last_improvement = generation;
    }
}

void Generations::apply(const Slot& slot, const SlotResult& result) {
    Island& island = s_.islands[slot.island];
    if (!result.feedback.empty()) island.last_feedback = result.feedback;
    if (const auto& child = result.child) {
        improve(island, *child, slot.generation);
        if (island.seed_id == 0) island.seed_id = child->id;  // the island seeded itself
    }
}

void Generations::commit(int gen, const std::vector<Slot>& slots, const std::vector<SlotResult>& results, bool applied) {
    std::lock_guard<std::mutex> islands_lock(s_.islands_mu);
    std::vector<store::Event> events;
    if (gen == 0) {
        if (const auto& seed = results[0].child) {
            for (Island& island : s_.islands) {
                improve(island, *seed, gen);
                island.seed_id = seed->id;
            }
            events.push_back({gen, "seed", {{"program", seed->id}, {"speedup", seed->speedup}}});
        }
    } else if (!applied) {
        for (size_t i = 0; i < slots.size(); ++i) apply(slots[i], results[i]);
    }
    if (s_.cfg.evolution.migration_interval > 0 && s_.islands.size() > 1 && gen > 0 && gen % s_.cfg.evolution.migration_interval == 0)
        migrate(gen, events);
    if (s_.cfg.evolution.restart_after > 0 && gen > 0) restart_stagnant(gen, events);
    store_generation(gen, events);
}

// Ring migration of each island's best programs, from a snapshot taken before any arrive.
void Generations::migrate(int gen, std::vector<store::Event>& events) {
    std::vector<std::vector<Elite>> outgoing;
    for (const Island& island : s_.islands) {
        std::vector<Elite> e = island.archive.elites();
        std::stable_sort(e.begin(), e.end(), [](const Elite& a, const Elite& b) { return a.speedup > b.speedup; });
        e.resize(std::min(e.size(), static_cast<size_t>(std::max(s_.cfg.evolution.migrants, 0))));
        outgoing.push_back(e);
    }
    for (size_t from = 0; from < s_.islands.size(); ++from) {
        size_t to = (from + 1) % s_.islands.size();
        nlohmann::json ids = nlohmann::json::array();
        for (const Elite& e : outgoing[from]) {
            if (auto p = s_.store.get_program(e.id)) improve(s_.islands[to], *p, gen);
            ids.push_back(e.id);
        }
        if (!ids.empty()) events.push_back({gen, "migration", {{"from", from}, {"to", to}, {"programs", ids}}});
    }
}

// An island without improvement for restart_after generations starts again from its seed.
void Generations::restart_stagnant(int gen, std::vector<store::Event>& events) {
    for (Island& island : s_.islands) {
        if (gen - island.last_improvement < s_.cfg.evolution.restart_after) continue;
        island.archive.clear();
        island.best = 0;
        island.last_feedback.clear();
        if (island.seed_id)
            if (auto seed = s_.store.get_program(island.seed_id)) improve(island, *seed, gen);
        island.last_improvement = gen;
        ++island.restarts;
        events.push_back({gen, "restart", {{"island", island.index}, {"restarts", island.restarts}}});
    }
}

// The islands' states, the history row and the events in one transaction (islands_mu held).
void Generations::store_generation(int gen, const std::vector<store::Event>& events) {
    store::Generation row;
    std::vector<nlohmann::json> states;
    for (const Island& island : s_.islands) states.push_back(island.to_json());
    {
        std::lock_guard<std::mutex> lock(s_.mu);
        s_.progress.generation = gen;
        s_.progress.elapsed_s = s_.elapsed_before + s_.invocation_s();
        row = {gen, s_.progress.best_speedup, s_.best_id, s_.progress.ok, s_.progress.failed, s_.progress.tokens,
               s_.progress.cost_usd, s_.progress.elapsed_s};
    }
    s_.store.commit_generation(row, states, events);
    s_.store.put_meta("elapsed_s", row.elapsed_s);
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.report();
}

// ---- steady state -------------------------------------------------------------------------------

void SteadyLoop::run() {
    committed_ = s_.store.last_generation();
    if (committed_ < 0) {  // the seed: every island starts from it
        if (!run_seed()) return;
        committed_ = 0;
    }
    const int per_gen = s_.cfg.structure.islands * s_.cfg.structure.children;
    const int cap = s_.cfg.evolution.jobs > 0 ? s_.cfg.evolution.jobs : std::max(per_gen, s_.evaluator.capacity());
    ahead_ = std::max(2, (cap + per_gen - 1) / per_gen + 1);
    next_gen_ = committed_ + 1;
    std::vector<std::thread> threads;
    for (int i = 0; i < cap; ++i) threads.emplace_back([this] { work(); });
    for (auto& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);
    if (committed_ >= s_.cfg.evolution.generations) s_.request_stop(StopReason::generations);
}

bool SteadyLoop::run_seed() {
    if (gens_.stop_before(0)) return false;
    std::vector<Slot> slots = gens_.slots_of(0);
    std::vector<SlotResult> results = gens_.run_slots(slots);
    if (!results[0].completed) return false;
    gens_.commit(0, slots, results);
    return true;
}

std::optional<Slot> SteadyLoop::take() {
    std::unique_lock<std::mutex> lock(smu_);
    while (true) {
        if (broken_ || error_) return std::nullopt;
        if (next_gen_ > committed_ + ahead_) {  // far enough ahead: wait for a commit
            scv_.wait_for(lock, std::chrono::milliseconds(100));
            if (s_.should_stop()) return std::nullopt;
            continue;
        }
        if (next_gen_ > s_.cfg.evolution.generations) {
            if (committed_ >= s_.cfg.evolution.generations) s_.request_stop(StopReason::generations);
            return std::nullopt;
        }
        if (next_index_ == 0) {
            if (!open(next_gen_)) return std::nullopt;
        } else if (s_.should_stop()) {
            return std::nullopt;
        }
        Slot s = slots_[next_gen_][next_index_++];
        if (next_index_ == slots_[next_gen_].size()) {
            ++next_gen_;
            next_index_ = 0;
        }
        return s;
    }
}

bool SteadyLoop::open(int gen) {
    if (gens_.stop_before(gen)) return false;
    slots_[gen] = gens_.slots_of(gen);
    results_[gen].resize(slots_[gen].size());
    remaining_[gen] = static_cast<int>(slots_[gen].size());
    std::lock_guard<std::mutex> plock(s_.mu);
    s_.progress.generation = gen;
    return true;
}

void SteadyLoop::work() {
    while (std::optional<Slot> s = take()) {
        SlotResult r;
        try {
            r = runner_.run(*s);
        } catch (const Stopped&) {
        } catch (...) {
            std::lock_guard<std::mutex> lock(smu_);
            if (!error_) error_ = std::current_exception();
            s_.request_stop(StopReason::error);
        }
        std::lock_guard<std::mutex> lock(smu_);
        if (!r.completed) {
            broken_ = true;
            scv_.notify_all();
            continue;
        }
        complete(*s, r);
        scv_.notify_all();
    }
}

void SteadyLoop::complete(const Slot& slot, const SlotResult& result) {
    {
        std::lock_guard<std::mutex> ilock(s_.islands_mu);
        gens_.apply(slot, result);
    }
    const auto& gs = slots_[slot.generation];
    size_t index = 0;
    while (gs[index].key != slot.key) ++index;
    results_[slot.generation][index] = result;
    --remaining_[slot.generation];
    commit_finished();
}

void SteadyLoop::commit_finished() {
    while (!broken_ && remaining_.count(committed_ + 1) && remaining_[committed_ + 1] == 0) {
        int g = committed_ + 1;
        try {
            gens_.commit(g, slots_[g], results_[g], true);
        } catch (...) {
            if (!error_) error_ = std::current_exception();
            s_.request_stop(StopReason::error);
            break;
        }
        slots_.erase(g);
        results_.erase(g);
        remaining_.erase(g);
        committed_ = g;
    }
}

}  // namespace kevo::evolve::detail
