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

}  // namespace kevo
