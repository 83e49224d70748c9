// Compiling a candidate kernel (.cu, kernel ABI) into a shared object with nvcc, in a private temp
// dir, cached by content hash. Thread-safe: compiles may run in parallel on the CPU cores.
// CUDA's compile step of the candidate-language seam (compile/language.h); a candidate in any
// language is compiled through compile_candidate() (language/registry.h).
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/arch.h"  // normalize_arch()
#include "compile/ptxas.h"
#include "evaluate/compile_result.h"  // CompileResult, what compile_kernel() returns
#include "task/task.h"

namespace kevo {

struct CompileOptions {
    std::string arch = "sm_90";                // normalized "sm_XX"
    std::vector<std::string> extra_flags;      // appended to nvcc's command line
    double timeout_s = 180;                    // a compile that takes longer is killed
    long memory_bytes = 8L << 30;              // address-space limit of each compiler process
    std::filesystem::path cache_dir;           // empty: cache_root()/kernels
    std::string nvcc;                          // empty: $KERNELEVO_NVCC, else nvcc on PATH / CUDA's bin
    // Read by compile_candidate() and the languages compiled through Python only. They stay here, in
    // the one options struct that the validator, the worker queue and the commands carry without
    // knowing languages: a per-language options type would have to travel through all of them.
    std::string backend = "auto";              // a CandidateLanguage::name(), or "auto": the language that recognizes the source
    std::string python;                        // a Python-compiled language: empty: $KERNELEVO_PYTHON, else python3
    std::shared_ptr<const Task> task;          // the task whose tensors and dimensions a launch description binds
};

// CUDA's compile: nvcc. options.backend, python and task are not read (a candidate in another
// language goes through compile_candidate(), language/registry.h).
CompileResult compile_kernel(const std::string& source, const CompileOptions& options);

// The nvcc used (for metadata): its path and "release X.Y" line.
std::string nvcc_path(const CompileOptions& options);
std::string nvcc_version(const CompileOptions& options);
// The folder of the toolkit's cuBLAS and cuBLASLt that candidates link with (found beside nvcc's
// real binary or as `nvcc --dryrun` reports it); empty when the toolkit has none.
std::string candidate_library_dir(const CompileOptions& options);
// The kernel ABI header's text (embedded at build time), written next to each compiled source.
const std::string& abi_header_text();
// Trims a compiler log for humans and LLMs: drops noise, keeps the first errors verbatim, caps size.
std::string trim_compiler_log(const std::string& log, size_t max_bytes = 6000);

}  // namespace kevo
