// Building a task's LibTorch reference into a shared object with a torch-free C entry point, so the
// (torch-free) runner can call it exactly like a candidate kernel. Builds are cached by content hash.
//
// The generated wrapper exports:
//   int  kevo_ref_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s);
//        runs the reference and copies its results into `out` (checking count, shape and dtype)
//   int  kevo_ref_call(const kevo_tensor* in, int n_in, cudaStream_t s);
//        runs the reference and keeps its results (what timing measures: the plain LibTorch call)
//   int  kevo_ref_call_strict(const kevo_tensor* in, int n_in, cudaStream_t s);
//        kevo_ref_call in strict fp32 (TF32 off, restored after): the judge times it too where the
//        defaults differ; libraries built before it lack it (the judge then reports no strict time)
//   void kevo_ref_release(void);   poisons and drops kept results
//   const char* kevo_ref_error(void);
//   const char* kevo_ref_precision(void);   LibTorch's TF32 defaults, "cuDNN TF32 on, cuBLAS TF32 off":
//        what kevo_ref_call runs with; kevo_ref_forward runs in strict fp32 (TF32 off, restored after)
//   int  kevo_ref_setup(const char* arg);   only when the task names reference.setup: calls
//        setup(arg) once; the runner passes the task's reference.arg (absolute path) before any call
// A reference with signature "vector" gets a wrapper independent of the task: every task with the
// same source (e.g. all imported KernelBench tasks) shares one cached build.
#pragma once
#include <filesystem>
#include <string>

#include "task/task.h"

namespace kevo {

struct ReferenceBuild {
    bool ok = false;
    std::filesystem::path library;
    std::string log;    // compiler output when the build failed
    bool cached = false;
    double seconds = 0;
};

// The LibTorch version references are built against ("1.13.1"; "" when unknown), for metadata.
std::string libtorch_version();

// Whether this kernelevo can build references at all (built with LibTorch), and whether they run
// on the GPU (LibTorch with CUDA) or on the CPU.
struct ReferenceSupport {
    bool available = false;
    bool cuda = false;
};
ReferenceSupport reference_support();

std::string reference_wrapper_source(const Task& task);
ReferenceBuild build_reference(const Task& task, double timeout_s = 900);

}  // namespace kevo
