// Islands and their MAP-Elites archives. A cell is (speedup bin, technique tag); each cell keeps its
// fastest program, so an island holds a ladder of speedups across different coding techniques
// instead of many near-copies of its best.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kevo::evolve {

// The source with comments removed and whitespace reduced to what separates tokens, so that
// reformatting or re-commenting a kernel does not make it "new".
std::string normalize_source(const std::string& source);
std::string normalized_hash(const std::string& source);

// The most advanced technique a kernel uses, by the techniques of its language
// (CandidateLanguage::techniques(), language/registry.h): for CUDA "tensor_core", "warp_shuffle",
// "shared_memory", "vectorized" or "plain". Tags differ across languages, so programs of two
// languages never compete for one cell.
std::string technique_of(const std::string& source);

// Speedup bins: quarter octaves (1.0, 1.19, 1.41, 1.68, 2.0, ...), clamped to [-16, 32].
int speedup_bin(double speedup);

struct Elite {
    int64_t id = 0;
    double speedup = 0;
    std::string technique;
    int64_t size = 0;  // normalized source length (a shorter kernel wins a tie)
};

class Archive {
public:
    // True when `e` takes a cell: an empty one, or one whose elite is slower (or equally fast and longer).
    bool insert(const Elite& e);
    // All elites, in cell order (deterministic).
    std::vector<Elite> elites() const;
    std::optional<Elite> best() const;
    bool empty() const { return cells_.empty(); }
    bool contains(int64_t id) const;
    void clear() { cells_.clear(); }
    nlohmann::json to_json() const;
    static Archive from_json(const nlohmann::json& j);

private:
    std::map<std::pair<int, std::string>, Elite> cells_;
};

struct Island {
    int index = 0;
    Archive archive;
    double best = 0;            // best speedup since the last restart
    int last_improvement = 0;   // generation of the last improvement (or restart)
    int restarts = 0;
    int64_t seed_id = 0;        // the program a restart starts from again (0: none yet)
    std::string last_feedback;  // the latest validation feedback, shown in the next prompts
    nlohmann::json to_json() const;
    static Island from_json(const nlohmann::json& j);
};

// Fitness-proportional choice with a temperature: weight_i = speedup_i^(1/temperature), so 1 is
// plain fitness-proportional, smaller is greedier, larger is closer to uniform. `u` is uniform in
// [0, 1). Returns an index into `speedups` (which must not be empty).
size_t select_index(const std::vector<double>& speedups, double temperature, double u);

}  // namespace kevo::evolve
