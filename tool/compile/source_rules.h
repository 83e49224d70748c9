// What a CUDA candidate's source may not call, checked before nvcc runs: making its own cuBLAS or
// cuBLASLt handle or its own stream. The caller provides the handles, their workspace and the one
// stream (kernelevo/abi.h, ABI version 2). This is a guide for the author (an LLM repairing its
// code reads the message), not the defence: the judge's runner still confines the process and
// times whatever work the call leaves behind, whichever way a stream was made.
#pragma once
#include <string>

namespace kevo {

// The link libraries every candidate may use (nvcc -l...); part of the compile cache key.
const char* const kCandidateLinkLibraries[] = {"cublas", "cublasLt"};

// The first forbidden call in `source` (comments and string literals ignored) as a one-line
// message naming it, its line and what to use instead; empty when there is none.
std::string forbidden_call_in_source(const std::string& source);

}  // namespace kevo
