// The per-architecture kernel cache that users commit: CACHE_DIR/NAME/sm_XX.cu + sm_XX.json.
// (Interface sketch: the cache part owns this file and may extend it; keep these names stable,
// the search writes entries through store().)
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kevo::cache {

// The metadata JSON next to each kernel.
struct EntryMeta {
    std::string function, arch;               // "gelu_bias", "sm_90"
    std::string task_hash, reference_hash;     // Task::hash(), Task::reference_hash()
    std::string source_hash;                   // sha256 of the .cu (filled by store())
    std::string origin = "search";             // "search" | "manual"
    bool validated = true;                     // false: stored with --unvalidated
    double speedup = 0, kernel_us = 0, reference_us = 0;
    nlohmann::json validation;                 // ValidationResult::to_json() (status, max_abs_diff, ...)
    std::string toolkit, gpu, model;           // "nvcc 13.0", "NVIDIA H200", "google/gemini-3-flash"
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;
    std::string date;                          // ISO 8601 UTC
    std::string kernelevo_version;
    nlohmann::json to_json() const;
    static EntryMeta from_json(const nlohmann::json& j);  // throws UsageError on a broken file
};

enum class State { valid, missing, stale, invalid };
const char* state_name(State s);

struct Lookup {
    State state = State::missing;
    std::string reason;                        // why stale / invalid, for configure's message
    std::filesystem::path source, metadata;    // where the entry lives (or would)
    std::optional<EntryMeta> meta;
};

std::filesystem::path source_path(const std::filesystem::path& cache_dir, const std::string& function, const std::string& arch);
std::filesystem::path metadata_path(const std::filesystem::path& cache_dir, const std::string& function, const std::string& arch);

Lookup lookup(const std::filesystem::path& cache_dir, const std::string& function, const std::string& arch,
              const std::string& task_hash, const std::string& reference_hash);

// Writes both files atomically (source first, metadata last), filling meta.source_hash.
void store(const std::filesystem::path& cache_dir, const std::string& source, EntryMeta meta);

}  // namespace kevo::cache
