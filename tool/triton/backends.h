// The one entry point that compiles a candidate, whatever it is written in: it picks the backend
// (CompileOptions::backend "cuda", "triton" or "auto") and compiles with it. The validator
// (Validator::compile, which the worker's compile jobs use too) and `cache add` go through it.
//
// It lives here because this is the lowest floor that sees every backend: compile/ (floor 3)
// defines the seam (compile/backend.h) and the CUDA backend and knows no other; triton/ (floor 4)
// adds Triton's. A further backend on a floor above would move this entry point up with it.
#pragma once
#include <string>
#include <vector>

#include "compile/backend.h"

namespace kevo {

// Every backend, in the order "auto" tries them: Triton (a source with KEVO_LAUNCH, launch.h),
// then CUDA (anything else).
const std::vector<const CompileBackend*>& candidate_backends();

// The name of the backend that compile_candidate() uses for `source`: options.backend, or for
// "auto" "triton" when the source is a Triton candidate, else "cuda". Throws UsageError on an
// unknown backend name.
std::string candidate_backend(const std::string& source, const CompileOptions& options);

// Compiles a candidate with that backend. A Triton candidate needs options.task.
CompileResult compile_candidate(const std::string& source, const CompileOptions& options);

namespace triton {
// compile_triton() behind the seam; recognizes a Triton candidate (is_triton_source).
const CompileBackend& backend();
}  // namespace triton

}  // namespace kevo
