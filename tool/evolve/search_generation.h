// Inside the search: generations. A generation's slots run in threads (SlotRunner); committing it
// puts its children into their islands' archives, migrates and restarts islands, and writes the
// islands' states with the history row in one store transaction. With a barrier (the default) one
// generation runs after the other; SteadyLoop (SearchConfig::steady) overlaps them.
#pragma once
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "evolve/search_slot.h"
#include "evolve/search_state.h"

namespace kevo::evolve::detail {

class Generations {
public:
    Generations(RunState& state, SlotRunner& runner) : s_(state), runner_(runner) {}
    // Generations with a barrier, from the one after the last committed, until a stop condition.
    void run_barrier();
    std::vector<Slot> slots_of(int gen) const;
    // Runs the slots in cfg.jobs threads (0: one per slot); rethrows the first error.
    std::vector<SlotResult> run_slots(const std::vector<Slot>& slots);
    // A finished slot's child enters its island's archive (called with islands_mu held).
    void apply(const Slot& slot, const SlotResult& result);
    // Commits generation `gen`: its children (unless `applied` already, as in steady state),
    // migration, restarts, and the islands' states with the history row in one store transaction.
    void commit(int gen, const std::vector<Slot>& slots, const std::vector<SlotResult>& results, bool applied = false);
    // Whether the run must stop before generation `gen` starts (records why).
    bool stop_before(int gen);

private:
    bool stop_before_barrier(int gen);
    void improve(Island& island, const store::Program& p, int generation);
    void migrate(int gen, std::vector<store::Event>& events);
    void restart_stagnant(int gen, std::vector<store::Event>& events);
    void store_generation(int gen, const std::vector<store::Event>& events);

    RunState& s_;
    SlotRunner& runner_;
};

// Steady state (SearchConfig::steady): generation 0 alone, then a pool of threads, each taking the
// next slot as soon as it is free; generations are committed in order as they finish.
class SteadyLoop {
public:
    SteadyLoop(RunState& state, Generations& generations, SlotRunner& runner)
        : s_(state), gens_(generations), runner_(runner) {}
    void run();

private:
    bool run_seed();            // generation 0; false when it did not complete
    std::optional<Slot> take();  // the next slot to run; none: this thread is done
    bool open(int gen);          // lays out generation `gen`'s slots (false: the run stops first)
    void work();                 // one thread of the pool
    void complete(const Slot& slot, const SlotResult& result);  // with smu_ held
    void commit_finished();      // commits the finished generations in order (smu_ held)

    RunState& s_;
    Generations& gens_;
    SlotRunner& runner_;
    std::mutex smu_;  // guards what follows; taken before islands_mu and mu
    std::condition_variable scv_;
    int committed_ = -1;
    // Generations past the last committed one that may run: at least two, so that the next
    // generation starts while the slowest slots of the current one finish.
    int ahead_ = 2;
    int next_gen_ = 0;
    size_t next_index_ = 0;
    std::map<int, std::vector<Slot>> slots_;
    std::map<int, std::vector<SlotResult>> results_;
    std::map<int, int> remaining_;
    bool broken_ = false;  // a slot did not complete (stop): later generations stay uncommitted
    std::exception_ptr error_;
};

}  // namespace kevo::evolve::detail
