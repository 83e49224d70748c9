// Triton's language behind the candidate-language seam (compile/language.h): recognizing a Triton
// candidate (is_triton_source, launch.h), its fences, its prompt template, its archive techniques,
// the .py a cache entry keeps beside the generated .cu, and compile_triton() (triton_compile.h).
// The registry (language/registry.h) lists it with CUDA's.
#pragma once
#include <string>

#include "compile/backend.h"

namespace kevo {

namespace triton {
const CandidateLanguage& language();
inline const CompileBackend& backend() { return language(); }
}  // namespace triton

// Pending, for commands/cache_command.cpp until it moves to workflows/ (it includes this header):
// declared here, defined once in language/registry.cpp with the registry's list of languages.
// Everything else includes language/registry.h.
std::string candidate_backend(const std::string& source, const CompileOptions& options);
CompileResult compile_candidate(const std::string& source, const CompileOptions& options);

}  // namespace kevo
