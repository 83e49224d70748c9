// The compile side of the candidate-language seam (compile/language.h): CUDA's language and the
// choice of a candidate's language. compile/ has one language, CUDA (compile_kernel(): nvcc), and
// knows no other by name; the others live on higher floors and are handed to choose_backend() in a
// list. The registry (language/registry.h) holds that list and compile_candidate(), the one entry
// point that compiles any candidate; the validator and `cache add` go through it.
// compile_kernel() is for a source known to be CUDA (a generated wrapper, tests).
#pragma once
#include <string>
#include <vector>

#include "compile/compile.h"
#include "compile/language.h"

namespace kevo {

// The compile seam's earlier name: a language, seen as what compiles it.
using CompileBackend = CandidateLanguage;

// CUDA: compile_kernel() behind the seam. It recognizes any source: "auto"'s fallback.
const CandidateLanguage& cuda_language();
inline const CompileBackend& cuda_backend() { return cuda_language(); }

// The language of `backends` that compiles `source`: the one options.backend names, or for "auto"
// (or empty) the first other than CUDA that recognizes the source (CUDA when none does). Throws
// UsageError on a name none of them has ("unknown backend 'x' (expected a, b or auto)": the names
// in alphabetical order).
const CompileBackend& choose_backend(const std::vector<const CompileBackend*>& backends, const std::string& source,
                                     const CompileOptions& options);

}  // namespace kevo
