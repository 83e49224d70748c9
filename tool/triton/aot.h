// What Triton's ahead-of-time compiler (python -m triton.tools.compile) writes, and the kernel-ABI
// wrapper generated around it.
//
// compile.py writes OUT.<sig hash>_<suffix>.c (and a .h) per specialization: the cubin as a byte
// array NAME_cubin, globals NAME_mod / NAME_func, load_NAME() / unload_NAME() and the launcher
//     CUresult NAME(CUstream stream, CUdeviceptr x_ptr, int32_t n, ...)
// whose grid is the C text given with --grid. The tool passes `kevo_grid_x,kevo_grid_y,kevo_grid_z`
// there and the wrapper sets those (thread-local) before each call.
//
// The wrapper is ONE .cu translation unit: the kernel ABI's kevo_forward, which reads the task's
// dimensions from the tensors, computes the scalars and the grid, picks the hinted specialization
// when its divisibility hints hold (else the generic one: the same rule as triton.tools.link) and
// calls the launcher; plus every AOT .c, each in its own namespace inside an anonymous one, so
// several Triton kernels (and several architectures) coexist in one binary. Modules are loaded by
// the wrapper itself (load_NAME() calls exit() on a driver error). The driver API is opened at run
// time (dlopen libcuda.so.1, every cu* call of the AOT code redirected to that table), so nothing
// links libcuda: a program built with the kernel still starts, and falls back, without the driver.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "task/task.h"
#include "triton/launch.h"

namespace kevo::triton {

// Triton's output is not in the format this tool knows (a Triton version it does not support).
struct AotFormatError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct AotKernel {
    std::string c_source;                                  // the .c file as written
    std::string launcher;                                  // NAME
    std::vector<std::pair<std::string, std::string>> params;  // (C type, parameter name) after the stream
    std::string cubin, module, function;                   // NAME_cubin, NAME_mod, NAME_func
    std::string triton_kernel_name;                        // the entry point inside the cubin
    long long shared = 0;                                  // dynamic shared memory in bytes
};

// Reads one .c written by triton.tools.compile. Throws AotFormatError naming what is missing.
AotKernel parse_aot_source(const std::string& c_source);

// One launch and its compiled specializations: the hinted one first (when the launch has hints),
// then the generic one.
struct CompiledLaunch {
    Launch launch;
    std::vector<AotKernel> specializations;
};

// The .cu defining kevo_forward around the AOT sources. `header_comment` goes on top (provenance).
// Throws AotFormatError when a launcher's parameters do not match the launch description.
std::string generate_wrapper(const std::vector<CompiledLaunch>& launches, const Task& task, const std::string& header_comment);

}  // namespace kevo::triton
