// The per-architecture kernel cache that users commit: CACHE_DIR/NAME/sm_XX.cu + sm_XX.json.
// The search writes entries through store(); `kernelevo cache` and the CMake module read them.
//
// Staleness: an entry records Task::hash() and Task::reference_hash() of the task it was found for
// (the reference hash covers the project headers it includes and ignores comments and whitespace)
// and the sha256 of its .cu. lookup() reports it stale when either hash differs from the current
// task's, or when the .cu was edited after it was stored. The CMake module takes its verdicts from
// here too (cmake/KernelEvoCache.cmake runs `kernelevo cache status --json`).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compile.h"
#include "compile/language.h"
#include "task/task.h"

namespace kevo::cache {

// The metadata JSON next to each kernel.
struct EntryMeta {
    std::string function, arch;               // "gelu_bias", "sm_90"
    std::string task_hash, reference_hash;     // Task::hash(), Task::reference_hash()
    std::string source_hash;                   // sha256 of the .cu (filled by store())
    std::string origin = "search";             // "search" | "manual"
    bool validated = true;                     // false: stored with --unvalidated
    double speedup = 0;                        // over the reference: > 0 measured, 0 none (from_json refuses others)
    double kernel_us = 0, reference_us = 0;
    nlohmann::json validation;                 // ValidationResult::to_json() (status, max_abs_diff, ...)
    std::string toolkit, gpu, model;           // "nvcc 13.0", "NVIDIA H200", "google/gemini-3-flash"
    std::string libtorch;                      // the LibTorch of the reference it was validated against
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;
    std::string date;                          // ISO 8601 UTC (filled by store() when empty)
    std::string kernelevo_version;
    std::string note;                          // free text ("hand-written: float4 loads, one pass")
    std::string backend = "cuda";              // the candidate's language (language/registry.h)
    // A language whose candidate is not the .cu (CandidateLanguage::keeps_source(): the .cu was
    // generated from NAME/sm_XX.<cache_source_extension()>): its facts, under its
    // cache_metadata_key() in the file: source_hash (of that source), source_file, its version
    // (version_fact()), launches. Null for a CUDA entry.
    nlohmann::json facts;
    nlohmann::json to_json() const;
    // Throws UsageError on a broken file, a speedup that is negative, infinite, NaN or not a number included.
    static EntryMeta from_json(const nlohmann::json& j);
};

// The least speedup over its reference, measured when its entry was validated, at which a kernel is
// used: one measured slower is kept out and the reference runs (Python's load_model(min_speedup=1.0);
// `kernelevo cache status --min-speedup`, which the CMake module asks for KERNELEVO_MIN_SPEEDUP and
// MIN_SPEEDUP).
inline constexpr double kDefaultMinSpeedup = 1.0;
// "" or why `m`'s kernel is kept out under `min_speedup`: its speedup was measured and is below it
// ("measured 0.91x over its reference: below ..."). The minimum applies to measured speedups only, as in
// Python's load_model: an entry that records none (0: stored with `cache add --unvalidated`, a user's
// deliberate choice, or validated without timing) is not kept out.
std::string kept_out(const EntryMeta& m, double min_speedup);

// The one builder of an entry's metadata from a validation, used by `kernelevo search` and
// `kernelevo cache add`: the task's hashes, the figures of `validation` (ValidationResult::to_json(),
// as the search stores it with each program: speedup, kernel_us, reference_us, gpu; validated when
// its status is "ok"), the toolkit, the LibTorch version and this kernelevo's version. The caller adds origin, model,
// tokens and note. Throws UsageError for an architecture that is not one.
EntryMeta entry_from_validation(const Task& task, const std::string& arch, const nlohmann::json& validation);

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
// The candidate source of an entry in `language`, kept beside the generated .cu: NAME/sm_XX.<ext>.
std::filesystem::path candidate_source_path(const std::filesystem::path& cache_dir, const std::string& function,
                                            const std::string& arch, const CandidateLanguage& language);

// task_hash / reference_hash empty: not checked (state is valid unless the entry is broken or
// its source was edited). An entry recording legacy_reference_hash (Task::reference_file_hash():
// entries stored before the reference hash covered includes) also matches the reference.
Lookup lookup(const std::filesystem::path& cache_dir, const std::string& function, const std::string& arch,
              const std::string& task_hash, const std::string& reference_hash,
              const std::string& legacy_reference_hash = "");

// A task's hashes as lookup() compares them: Task::hash(), reference_hash() and
// reference_file_hash() (computed once: reference_hash() runs the compiler's preprocessor).
struct TaskHashes {
    std::string task, reference, legacy_reference;
    static TaskHashes of(const Task& t);
};
// lookup() against `task`'s hashes; nullptr: not checked against a task (valid unless broken or edited).
Lookup lookup(const std::filesystem::path& cache_dir, const std::string& function, const std::string& arch,
              const TaskHashes* task);

// Writes both files atomically (source first, metadata last), filling meta.source_hash (and
// meta.date when empty). Throws UsageError when function/arch are not valid names.
// With `candidate_source` (in meta.backend's language, or else the language that recognizes it;
// `source` is then the .cu generated from it), also writes NAME/sm_XX.<ext> and records its hash:
// editing it makes the entry stale. Any other language's source file of the entry is removed.
void store(const std::filesystem::path& cache_dir, const std::string& source, EntryMeta meta,
           const std::string* candidate_source = nullptr);

// Stores a candidate with its metadata: a CUDA .cu as it is; a candidate in a language that
// keeps_source() (compiled.backend) as the .cu generated from it (compiled.generated_source)
// with its source beside it and its compile's facts (version, specializations). Throws UsageError
// when such a candidate did not compile.
void store_candidate(const std::filesystem::path& cache_dir, const std::string& source, const CompileResult& compiled, EntryMeta meta);

// Every entry under cache_dir: (function, arch) pairs for which a .cu or a .json exists, sorted.
struct EntryName {
    std::string function, arch;
};
std::vector<EntryName> list_entries(const std::filesystem::path& cache_dir);

// "" or, when the entry folder cache_dir/function is a symbolic link, why nothing is deleted
// through it ("DIR/NAME is a symbolic link (to TARGET)"): the cache never follows a link out of it.
std::string linked_folder(const std::filesystem::path& cache_dir, const std::string& function);
// Deletes one entry's files (NAME/sm_XX.cu, .json and any language's candidate source) and NAME/ when left
// empty. Never through a symbolic link: a file that is a link is removed itself, not what it points
// to, and an entry whose folder is a link is refused (UsageError, linked_folder()'s reason).
void remove_entry(const std::filesystem::path& cache_dir, const std::string& function, const std::string& arch);

// One entry as the cache commands see it: its lookup() against its function's task (when
// `tasks` has one) and the bytes of its files (.cu, .json and any language's candidate source).
struct EntryReport {
    std::string function, arch;
    Lookup lookup;
    bool checked = false;  // compared with the current task
    std::uintmax_t bytes = 0;
    int files = 0;
};
// Every entry of list_entries(), checked; an empty list when cache_dir does not exist.
std::vector<EntryReport> scan(const std::filesystem::path& cache_dir, const std::map<std::string, TaskHashes>& tasks);

// The current UTC time as "2026-12-02T10:11:12Z".
std::string utc_now();

}  // namespace kevo::cache
