// Which GPU architectures the installed CUDA toolkit can compile for. An architecture it cannot
// compile is a setup error (exit 2) for every command that takes --arch, not a failed candidate.
// Takes a normalized "sm_XX" string (see normalize_arch() in compile/compile.h).
#pragma once
#include <string>
#include <vector>

#include "common/setting_error.h"
#include "compile/compile.h"

namespace kevo {

// The real architectures nvcc lists (`nvcc --list-gpu-code`: "sm_75", ..., "sm_121"), cached per
// nvcc. Empty when that nvcc cannot list them.
std::vector<std::string> toolkit_arches(const CompileOptions& options);

// Whether nvcc accepts `-gencode arch=compute_XX,code=sm_XX` for `arch` (asked with --dryrun, which
// compiles nothing, so it also answers for the a/f suffixes that --list-gpu-code omits). Cached per
// nvcc and architecture.
bool toolkit_supports_arch(const std::string& arch, const CompileOptions& options);

// Throws UsageError naming the toolkit and the architectures it supports when `arch` is not one of
// them, or when nvcc cannot be run at all.
void require_toolkit_arch(const std::string& arch, const CompileOptions& options);

}  // namespace kevo
