// What ptxas says about each kernel it compiles (nvcc -Xptxas -v): registers per thread, spills,
// static shared memory, stack, barriers. compile_kernel() passes -Xptxas -v, keeps these lines out
// of the log a human or the repair loop reads, and stores them beside the cached .so.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "evaluate/compile_result.h"  // KernelResources

namespace kevo {

// The entry functions (__global__ kernels) of a ptxas -v log, in the order ptxas compiled them.
std::vector<KernelResources> parse_ptxas_info(const std::string& log);
// The log without ptxas's informational lines (errors and warnings stay).
std::string strip_ptxas_info(const std::string& log);
// One line per kernel, for prompts and reports:
// "gelu_kernel(float const*, float*, int): 18 registers, 4096 B shared memory, no spills".
std::string resources_summary(const std::vector<KernelResources>& kernels);

// The sidecar beside a cached kernel library (so a cache hit knows its resources too).
void save_kernel_resources(const std::filesystem::path& library, const std::vector<KernelResources>& kernels);
std::vector<KernelResources> load_kernel_resources(const std::filesystem::path& library);  // empty when absent

}  // namespace kevo
