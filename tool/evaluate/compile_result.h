// What compiling a candidate gives (compile/ builds it, a language compiled ahead of time fills its own fields, the
// validator and the queue carry it): the library, its hashes, the log, and what ptxas said about
// each kernel.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kevo {

// What ptxas says about one kernel it compiled (nvcc -Xptxas -v; parsed by compile/ptxas.h).
struct KernelResources {
    std::string name;     // demangled, e.g. "gelu_kernel(float const*, float*, int)"
    std::string mangled;  // as ptxas prints it
    std::string arch;     // "sm_90"
    int registers = 0;    // per thread
    int barriers = 0;
    int64_t smem_bytes = 0;  // static shared memory
    int64_t stack_bytes = 0, spill_stores = 0, spill_loads = 0;
    nlohmann::json to_json() const;
    static KernelResources from_json(const nlohmann::json& j);
};

struct CompileResult {
    bool ok = false;
    std::filesystem::path library;  // the .so (in the cache) when ok
    std::string library_sha256;     // its content hash, checked before every use
    std::string log;                // nvcc's output, trimmed (errors verbatim for the repair loop)
    double seconds = 0;             // wall time of this call
    bool cached = false;            // served from the content-hash cache
    bool limit_hit = false;         // killed by a time or memory limit (never cached as a verdict)
    std::string source_hash;        // sha256 of the source + flags + arch + nvcc version
    std::string arch;
    std::vector<KernelResources> kernels;  // registers, spills, shared memory per __global__ (ptxas -v)
    std::string backend = "cuda";   // the candidate's language (CandidateLanguage::name(), compile/language.h)
    std::string generated_source;   // a language compiled ahead of time: the kernel-ABI .cu built from it (what a cache entry stores)
    nlohmann::json backend_info;    // that language's facts: its version, launches (specializations), aot_s
};

// A compile result as it travels from a compile worker to the search (worker/): one list of the
// fields, so the two sides cannot drift apart. `library` and `library_sha256` stay out: they name a
// file on the compiling host (the object travels through the queue's object store instead).
#define KEVO_COMPILE_RESULT_WIRE_FIELDS(X) \
    X(ok) X(log) X(seconds) X(cached) X(limit_hit) X(source_hash) X(arch) X(backend) X(generated_source) X(backend_info)
nlohmann::json compile_result_to_json(const CompileResult& c);  // the fields above and `kernels`
// Fields absent from `j` keep their defaults.
CompileResult compile_result_from_json(const nlohmann::json& j);

}  // namespace kevo
