/* KernelEvo kernel ABI — the contract between every candidate / cached kernel and its caller.
 *
 * A kernel is ONE .cu file that includes this header and defines
 *
 *   extern "C" int kevo_forward(const kevo_tensor* in, int n_in,
 *                               kevo_tensor* out, int n_out, cudaStream_t stream);
 *
 * - `in` holds the task's inputs in order; `out` its outputs, preallocated and contiguous by the
 *   caller. Strides are in elements, not bytes.
 * - All work must be enqueued on `stream` (no other stream, no host thread that outlives the call).
 * - Inputs must not be modified. Return 0 on success, non-zero on failure.
 * - ABI version 2 adds cuBLAS and cuBLASLt, set up by the caller (see kevo_cublas_handle() below):
 *   a kernel never creates a handle, a stream or a thread of its own. A kernel that does not call
 *   them is a version-1 kernel and runs under every caller.
 *
 * This header is C-compatible and torch-free on purpose: a kernel compiles in about a second.
 */
#ifndef KERNELEVO_ABI_H
#define KERNELEVO_ABI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__) || defined(KEVO_HAVE_CUDA_RUNTIME)
#include <cuda_runtime_api.h>
#else
/* Allows host code without the CUDA headers to include the ABI; identical to CUDA's definition. */
typedef struct CUstream_st* cudaStream_t;
#endif

#define KEVO_ABI_VERSION 2
#define KEVO_MAX_DIMS 8

/* The one dtype table. Every side (the tool, the runner, the runtime, the generated code and,
 * through a list generated at build time, CMake) expands this X-macro instead of keeping its own
 * copy. Values are part of the ABI: never renumber, only append.
 *   X(ENUM, value, task-file name, size in bytes, is floating point, ATen ScalarType name) */
#define KEVO_DTYPE_LIST(X)                      \
    X(FLOAT32,  0, "float32",  4, 1, Float)     \
    X(FLOAT16,  1, "float16",  2, 1, Half)      \
    X(BFLOAT16, 2, "bfloat16", 2, 1, BFloat16)  \
    X(INT32,    3, "int32",    4, 0, Int)       \
    X(INT64,    4, "int64",    8, 0, Long)      \
    X(BOOL,     5, "bool",     1, 0, Bool)      \
    X(FLOAT64,  6, "float64",  8, 1, Double)    \
    X(INT8,     7, "int8",     1, 0, Char)      \
    X(UINT8,    8, "uint8",    1, 0, Byte)

/* Other spellings the task file and kernelevo_optimize() accept (torch's names).
 *   X(alias, ENUM) */
#define KEVO_DTYPE_ALIAS_LIST(X) \
    X("float",   FLOAT32)        \
    X("fp32",    FLOAT32)        \
    X("half",    FLOAT16)        \
    X("fp16",    FLOAT16)        \
    X("bf16",    BFLOAT16)       \
    X("double",  FLOAT64)        \
    X("int",     INT32)          \
    X("long",    INT64)          \
    X("boolean", BOOL)

typedef enum kevo_dtype {
#define KEVO_DTYPE_ENUM_(e, v, n, sz, fl, at) KEVO_##e = v,
    KEVO_DTYPE_LIST(KEVO_DTYPE_ENUM_)
#undef KEVO_DTYPE_ENUM_
#define KEVO_DTYPE_ONE_(e, v, n, sz, fl, at) +1
    KEVO_DTYPE_COUNT = 0 KEVO_DTYPE_LIST(KEVO_DTYPE_ONE_)
#undef KEVO_DTYPE_ONE_
} kevo_dtype;

typedef struct kevo_tensor {
    void* data;                        /* device pointer */
    int32_t ndim;                      /* 0 .. KEVO_MAX_DIMS */
    int32_t dtype;                     /* a kevo_dtype value */
    int64_t sizes[KEVO_MAX_DIMS];      /* sizes[0..ndim) */
    int64_t strides[KEVO_MAX_DIMS];    /* in elements */
} kevo_tensor;

#ifdef __cplusplus
extern "C" {
#endif

/* Element size in bytes of a kevo_dtype (0 for an unknown value). */
static inline int kevo_dtype_size(int32_t dtype) {
    switch (dtype) {
#define KEVO_DTYPE_SIZE_(e, v, n, sz, fl, at) case KEVO_##e: return sz;
        KEVO_DTYPE_LIST(KEVO_DTYPE_SIZE_)
#undef KEVO_DTYPE_SIZE_
        default: return 0;
    }
}

/* Task-file name of a kevo_dtype ("float32", ..., "bool"); NULL for an unknown value. */
static inline const char* kevo_dtype_name(int32_t dtype) {
    switch (dtype) {
#define KEVO_DTYPE_NAME_(e, v, n, sz, fl, at) case KEVO_##e: return n;
        KEVO_DTYPE_LIST(KEVO_DTYPE_NAME_)
#undef KEVO_DTYPE_NAME_
        default: return 0;
    }
}

/* 1 for floating-point dtypes (compared with a tolerance), 0 for integers and bool (exact). */
static inline int kevo_dtype_is_floating(int32_t dtype) {
    switch (dtype) {
#define KEVO_DTYPE_FLOAT_(e, v, n, sz, fl, at) case KEVO_##e: return fl;
        KEVO_DTYPE_LIST(KEVO_DTYPE_FLOAT_)
#undef KEVO_DTYPE_FLOAT_
        default: return 0;
    }
}

/* The kevo_dtype named `name` (a task-file name or an alias), or -1. */
static inline int32_t kevo_dtype_from_name(const char* name) {
    static const struct { const char* name; int32_t dtype; } names[] = {
#define KEVO_DTYPE_BY_NAME_(e, v, n, sz, fl, at) {n, KEVO_##e},
        KEVO_DTYPE_LIST(KEVO_DTYPE_BY_NAME_)
#undef KEVO_DTYPE_BY_NAME_
#define KEVO_DTYPE_BY_ALIAS_(alias, e) {alias, KEVO_##e},
        KEVO_DTYPE_ALIAS_LIST(KEVO_DTYPE_BY_ALIAS_)
#undef KEVO_DTYPE_BY_ALIAS_
    };
    unsigned k;
    if (!name) return -1;
    for (k = 0; k < sizeof names / sizeof names[0]; ++k) {
        const char *a = names[k].name, *b = name;
        while (*a && *a == *b) ++a, ++b;
        if (!*a && !*b) return names[k].dtype;
    }
    return -1;
}

/* Number of elements of a tensor. */
static inline int64_t kevo_numel(const kevo_tensor* t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; ++i) n *= t->sizes[i];
    return n;
}

/* ABI version 2: cuBLAS and cuBLASLt, provided by the caller (the validator's runner, the runtime
 * of kernelevo_optimize() libraries, kernelevo.load_op). Handles are made once per process (per
 * thread and device) by the caller, never by the kernel, outside any timed call; a kernel calls
 * these inside kevo_forward with the `stream` it was given:
 *   kevo_cublas_handle(stream)     a cublasHandle_t bound to `stream` and to the caller's
 *                                  workspace (cublasSetStream/cublasSetWorkspace already done;
 *                                  pointer mode host, default math mode)
 *   kevo_cublaslt_handle(stream)   a cublasLtHandle_t (pass `stream` to cublasLtMatmul)
 *   kevo_cublas_workspace(stream, &bytes)  device scratch for cublasLtMatmul's workspace, owned by
 *                                  the caller, valid for work on `stream` only
 * Each returns NULL when the library is unavailable or `stream` is not the call's stream (the
 * validator accepts no other): return non-zero then. The handle types are cuBLAS's own
 * (cublasHandle_t is struct cublasContext*, cublasLtHandle_t struct cublasLtContext*), so a
 * kernel includes <cublas_v2.h> / <cublasLt.h> and uses them directly. KEVO_CUBLAS_SYMBOL_PREFIX
 * is what every one of these names starts with (the runner exports exactly those). */
#define KEVO_CUBLAS_SYMBOL_PREFIX "kevo_cublas"
struct cublasContext;
struct cublasLtContext;
struct cublasContext* kevo_cublas_handle(cudaStream_t stream);
struct cublasLtContext* kevo_cublaslt_handle(cudaStream_t stream);
void* kevo_cublas_workspace(cudaStream_t stream, size_t* bytes);

/* The entry point every kernel defines. The CMake integration renames it per function and
 * architecture (-Dkevo_forward=...), so several kernels coexist in one binary. */
int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
/* A tunable parameter: KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...) declares the compile-time integer
 * constant NAME = DEFAULT (at namespace or function scope). `kernelevo tune` and the search try
 * the listed values, space-separated, without the LLM: each variant is this source with DEFAULT
 * rewritten, and the fastest variant, defaults rewritten, is what gets cached. Example:
 *     KEVO_TUNABLE(BLOCK, 256, 64 128 256 512)
 *     KEVO_TUNABLE(UNROLL, 4, 1 2 4 8)
 *     kernel<<<blocks, BLOCK, 0, stream>>>(...);   */
#define KEVO_TUNABLE(NAME, DEFAULT, VALUES) static constexpr int NAME = (DEFAULT);
#endif

#endif /* KERNELEVO_ABI_H */
