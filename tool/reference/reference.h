// Building a task's LibTorch reference into a shared object with a torch-free C entry point, so the
// (torch-free) runner can call it exactly like a candidate kernel. Builds are cached by content hash.
//
// The generated wrapper exports:
//   int  kevo_ref_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s);
//        runs the reference in strict fp32 (TF32 off, restored after) and copies its results into
//        `out` (checking count, shape and dtype): the outputs correctness is judged against
//   int  kevo_ref_forward_policy(same);   the same under the task's precision policy: its distance
//        from kevo_ref_forward's is the policy's own error on the problem
//   int  kevo_ref_call(const kevo_tensor* in, int n_in, cudaStream_t s);
//        runs the reference under the task's precision policy (task.json "precision": the TF32
//        flags PyTorch's or the user's code runs with, restored after) and keeps its results: what
//        timing measures
//   int  kevo_ref_call_strict(const kevo_tensor* in, int n_in, cudaStream_t s);
//        kevo_ref_call in strict fp32: the judge times it too where the policy turns TF32 on
//   void kevo_ref_release(void);   poisons and drops kept results
//   const char* kevo_ref_error(void);
//   const char* kevo_ref_precision(void);   the policy and its flags, "pytorch (cuDNN TF32 on, cuBLAS
//        TF32 off)": what kevo_ref_call runs with
//   int  kevo_ref_setup(const char* arg);   only when the task names reference.setup: calls
//        setup(arg) once; the runner passes the task's reference.arg (absolute path) before any call
// A reference with signature "vector" gets a wrapper independent of the task but for its precision
// policy: every task with the same source and policy (e.g. all imported KernelBench tasks) shares
// one cached build.
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
// Builds (or finds in the cache) the task's reference library. A generated reference source may have
// its bytes' hash recorded beside it (write_reference_sha256); it is then built only while it has
// them, else TaskError (reference.source) says it changed since it was generated.
ReferenceBuild build_reference(const Task& task, double timeout_s = 900);

// The record of a generated reference source's bytes: SOURCE.sha256 beside it, in sha256sum's format
// ("<hex>  <file name>", so `sha256sum -c` checks it too), written by the tool that generated the
// source (kernelevo import kernelbench) and checked by build_reference before every build.
std::filesystem::path reference_sha256_file(const std::filesystem::path& source);
void write_reference_sha256(const std::filesystem::path& source, const std::string& text);

}  // namespace kevo
