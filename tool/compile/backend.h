// The compile seam: a backend turns a candidate's source into a kernel-ABI shared object (a
// CompileResult). compile/ has one backend, CUDA (compile_kernel(): nvcc), and knows no other by
// name. Others live on a higher floor (tool/triton/: a Triton candidate is compiled ahead of time
// into a .cu that the CUDA backend builds) and are handed to choose_backend() in a list.
//
// The one entry point that compiles any candidate, compile_candidate() (tool/triton/backends.h),
// lives on the lowest floor that sees every backend; the validator and `cache add` go through it.
// compile_kernel() is for a source known to be CUDA (Triton's generated wrapper, tests).
//
// Plain objects handed over explicitly, no self-registration at static initialization: a static
// library drops an object file nothing references, and its registration with it.
#pragma once
#include <string>
#include <vector>

#include "compile/compile.h"

namespace kevo {

class CompileBackend {
public:
    virtual ~CompileBackend() = default;
    // "cuda", "triton": the value of CompileOptions::backend that picks it and of CompileResult::backend.
    virtual std::string name() const = 0;
    // Whether `source` is written for this backend: how backend "auto" chooses.
    virtual bool recognizes(const std::string& source) const = 0;
    virtual CompileResult compile(const std::string& source, const CompileOptions& options) const = 0;
};

// compile_kernel() behind the seam. It recognizes any source: listed last, it is "auto"'s fallback.
const CompileBackend& cuda_backend();

// The backend of `backends` that compiles `source`: the one options.backend names, or for "auto"
// (or empty) the first that recognizes the source (CUDA when none does). Throws UsageError on a name none of them has
// ("unknown backend 'x' (expected cuda, triton or auto)": the names in alphabetical order).
const CompileBackend& choose_backend(const std::vector<const CompileBackend*>& backends, const std::string& source,
                                     const CompileOptions& options);

}  // namespace kevo
