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
 *
 * This header is C-compatible and torch-free on purpose: a kernel compiles in about a second.
 */
#ifndef KERNELEVO_ABI_H
#define KERNELEVO_ABI_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(KEVO_HAVE_CUDA_RUNTIME)
#include <cuda_runtime_api.h>
#else
/* Allows host code without the CUDA headers to include the ABI; identical to CUDA's definition. */
typedef struct CUstream_st* cudaStream_t;
#endif

#define KEVO_ABI_VERSION 1
#define KEVO_MAX_DIMS 8

typedef enum kevo_dtype {
    KEVO_FLOAT32 = 0,
    KEVO_FLOAT16 = 1,
    KEVO_BFLOAT16 = 2,
    KEVO_INT32 = 3,
    KEVO_INT64 = 4,
    KEVO_BOOL = 5,
    KEVO_FLOAT64 = 6,
    KEVO_INT8 = 7,
    KEVO_UINT8 = 8
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
        case KEVO_FLOAT32: case KEVO_INT32: return 4;
        case KEVO_FLOAT16: case KEVO_BFLOAT16: return 2;
        case KEVO_INT64: case KEVO_FLOAT64: return 8;
        case KEVO_BOOL: case KEVO_INT8: case KEVO_UINT8: return 1;
        default: return 0;
    }
}

/* Number of elements of a tensor. */
static inline int64_t kevo_numel(const kevo_tensor* t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; ++i) n *= t->sizes[i];
    return n;
}

/* The entry point every kernel defines. The CMake integration renames it per function and
 * architecture (-Dkevo_forward=...), so several kernels coexist in one binary. */
int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* KERNELEVO_ABI_H */
