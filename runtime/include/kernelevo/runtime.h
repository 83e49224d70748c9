/* KernelEvo runtime — picks, per call, the evolved kernel for the GPU the tensors sit on, or the
 * reference implementation. Small C ABI (kevo_ prefix), torch-free, C and C++ compatible.
 *
 * Generated dispatch code (see kernelevo_optimize() in cmake/KernelEvo.cmake) describes each
 * function with a static kevo_function, converts its arguments to kevo_tensor and asks
 * kevo_select() which kernel to launch. Users mostly need three calls:
 *
 *   kevo_last_impl("gelu_bias")    -> "sm_90" or "reference"   (what the last call ran)
 *   kevo_last_reason("gelu_bias")  -> why the reference ran, in words
 *   KERNELEVO_DISABLE=1            -> every function runs its reference
 *
 * Compute capabilities are written as in sm_XX: 10*major + minor (H100/H200: 90, A100: 80).
 */
#ifndef KERNELEVO_RUNTIME_H
#define KERNELEVO_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "kernelevo/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KEVO_RUNTIME_VERSION 1
#define KEVO_MAX_DEVICES 64
#define KEVO_MAX_SYMBOLS 64

/* The kernel entry point's type (kevo_forward renamed per function and architecture). */
typedef int (*kevo_forward_fn)(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream);

/* One input or output of a function as the task declares it. dims[i] >= 0 is a literal size;
 * dims[i] < 0 names symbol number -(dims[i] + 1) of kevo_function.symbols. */
typedef struct kevo_tensor_spec {
    const char* name;
    int32_t dtype; /* kevo_dtype */
    int32_t ndim;
    int64_t dims[KEVO_MAX_DIMS];
} kevo_tensor_spec;

/* One cached kernel compiled into the binary. */
typedef struct kevo_kernel_entry {
    const char* arch;        /* "sm_90" */
    int32_t cc;              /* 90. A device of this cc runs it; with no kernel of its own cc, a
                                device runs the closest binary-compatible one (kernelevo/arch.h:
                                same major, minor not above the device's, sm_XXa only on XX) */
    kevo_forward_fn forward; /* kevo_<function>_sm90_forward */
} kevo_kernel_entry;

/* A dispatchable function (static data emitted by the generated dispatch source). */
typedef struct kevo_function {
    const char* name;
    int32_t n_in, n_out, n_symbols, n_kernels;
    const kevo_tensor_spec* inputs;
    const kevo_tensor_spec* outputs;
    const char* const* symbols;
    const kevo_kernel_entry* kernels;
    const char* arches; /* "sm_80,sm_90" or "" */
    /* Runtime state: zero-initialize; written by the runtime only. `last` is atomic; the call counts
       are statistics that concurrent calls may undercount. */
    uint64_t last;
    uint64_t calls_kernel, calls_reference;
} kevo_function;

/* Why the reference ran (or KEVO_RAN_KERNEL). */
typedef enum kevo_reason {
    KEVO_NOT_CALLED = 0,
    KEVO_RAN_KERNEL = 1,
    KEVO_REASON_DISABLED = 2,       /* KERNELEVO_DISABLE is set */
    KEVO_REASON_NOT_CUDA = 3,       /* a tensor is not on a CUDA device */
    KEVO_REASON_MIXED_DEVICES = 4,  /* tensors on different CUDA devices */
    KEVO_REASON_NO_DEVICE = 5,      /* no usable CUDA device / driver */
    KEVO_REASON_NO_KERNEL = 6,      /* no cached kernel for this device's architecture */
    KEVO_REASON_ARG_COUNT = 7,
    KEVO_REASON_DTYPE = 8,
    KEVO_REASON_RANK = 9,
    KEVO_REASON_SHAPE = 10,
    KEVO_REASON_NOT_CONTIGUOUS = 11,
    KEVO_REASON_MISALIGNED = 12,    /* a data pointer is not 16-byte aligned */
    KEVO_REASON_EMPTY = 13,         /* a tensor has no elements */
    KEVO_REASON_KERNEL_FAILED = 14, /* the kernel returned non-zero (or its launch failed) */
    KEVO_REASON_AUTOGRAD = 15,      /* an input requires grad while grad mode is on */
    KEVO_REASON_UNSUPPORTED = 16    /* e.g. an output size that no input determines */
} kevo_reason;

/* ---- devices ---------------------------------------------------------------------------- */
/* Compute capability (10*major+minor) of a CUDA device; 0 when there is no such device or no
 * driver. Queried once per device and cached. Honors the override below. */
int kevo_device_cc(int device);
/* Test hook: cc > 0 makes every device report cc (even without a GPU); 0 pretends there is no
 * GPU; -1 removes the override (real detection). The environment variable KERNELEVO_DEVICE_CC
 * ("90" or "sm_90") sets the initial override. */
void kevo_set_device_cc(int cc);
/* "sm_90" -> 90, "sm_90a" -> 90, "90" -> 90, "9.0" -> 90; 0 when not understood
 * (kevo_arch_parse() of kernelevo/arch.h, which also gives the suffix). */
int kevo_parse_arch(const char* arch);

/* ---- the switch that forces the reference --------------------------------------------- */
/* 1 when KERNELEVO_DISABLE is set to something other than "", "0", "false", "off" or "no".
 * Read once and cached. */
int kevo_disabled(void);
/* Test hook: 0 or 1 overrides the environment; -1 re-reads KERNELEVO_DISABLE on the next call. */
void kevo_set_disabled(int disabled);

/* ---- dispatch --------------------------------------------------------------------------- */
/* Decides one call. `device`: the CUDA ordinal every tensor sits on; -1: a tensor is not on a
 * CUDA device; -2: tensors on different devices. Checks the device's architecture, the number of
 * arguments, dtypes, ranks, literal and symbolic sizes (consistent across inputs), contiguity,
 * 16-byte alignment and non-emptiness. Returns the kernel to launch and fills out[i].ndim, sizes,
 * strides (contiguous), dtype (data = NULL: the caller allocates), or returns NULL when the
 * reference must run. Either way the decision is recorded for kevo_last_impl(). */
kevo_forward_fn kevo_select(kevo_function* f, int device, const kevo_tensor* in, int n_in, kevo_tensor* out,
                            int n_out);
/* Records a reference run decided by the caller (e.g. KEVO_REASON_AUTOGRAD, or
 * KEVO_REASON_KERNEL_FAILED with detail = the kernel's return code). */
void kevo_record_reference(kevo_function* f, int reason, int arg, int detail);

/* Registers a function so kevo_last_impl() and friends can find it by name. Returns 1. */
int kevo_register_function(kevo_function* f);
/* The registered function of that name, or NULL. */
kevo_function* kevo_find_function(const char* name);

/* What the last call of `function` (any thread) ran: an arch such as "sm_90", "reference", or
 * "none" before the first call; NULL for an unknown function. */
const char* kevo_last_impl(const char* function);
/* Why the last call ran what it ran, in words (thread-local buffer, valid until the next call
 * from this thread). */
const char* kevo_last_reason(const char* function);
/* The architectures with a kernel compiled in for `function` ("sm_80,sm_90"; "" when none). */
const char* kevo_function_arches(const char* function);
/* Calls since start that ran a kernel / the reference. */
uint64_t kevo_kernel_calls(const char* function);
uint64_t kevo_reference_calls(const char* function);

/* kevo_dtype_name() (abi.h) names a dtype. */

#ifdef __cplusplus
}
#endif

#endif /* KERNELEVO_RUNTIME_H */
