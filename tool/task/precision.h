// The one table of precision policies: what the timed reference runs (which TF32 paths LibTorch may
// take) and what error a kernel may bring. task.json's "precision", its schema, the reference
// wrapper, the prompts, the reports and kernelevo_optimize(PRECISION) (through the generated CMake
// tables) all expand this list. C, so that CMake's table generator can preprocess it.
//   X(enum name, task-file name, cuDNN TF32 in the timed reference, cuBLAS TF32 in the timed reference,
//     what it means)
// Correctness is always judged against the reference in strict fp32 (TF32 off); a policy only says
// what the reference is timed as and which error the tolerance must admit.
// "pytorch" is the default: the flags are PyTorch's and LibTorch's own defaults
// (torch.backends.cudnn.allow_tf32 = True, torch.backends.cuda.matmul.allow_tf32 = False, i.e.
// torch.get_float32_matmul_precision() == "highest"); a task may record the ones its user's code sets
// ("precision": {"policy": "pytorch", "matmul_tf32": true, "cudnn_tf32": true}).
#pragma once

#define KEVO_PRECISION_LIST(X)                                                                             \
    X(PYTORCH, "pytorch", 1, 0,                                                                            \
      "as PyTorch and LibTorch run it by default: cuDNN convolutions may use TF32, matmuls follow "        \
      "torch.backends.cuda.matmul.allow_tf32")                                                              \
    X(STRICT, "strict", 0, 0, "strict fp32 everywhere (TF32 off)")                                          \
    X(TF32, "tf32", 1, 1, "TF32 accepted in convolutions and matmuls")                                      \
    X(BF16, "bf16", 1, 0, "bf16 accuracy accepted (the reference is the fp32 model, timed as PyTorch runs it)")

enum kevo_precision {
#define KEVO_PRECISION_ENUM_(e, n, cudnn, cublas, d) KEVO_PRECISION_##e,
    KEVO_PRECISION_LIST(KEVO_PRECISION_ENUM_)
#undef KEVO_PRECISION_ENUM_
    KEVO_PRECISION_COUNT
};

// Task-file name of a policy, nullptr for an unknown value.
inline const char* kevo_precision_name(int p) {
    switch (p) {
#define KEVO_PRECISION_NAME_(e, n, cudnn, cublas, d) case KEVO_PRECISION_##e: return n;
        KEVO_PRECISION_LIST(KEVO_PRECISION_NAME_)
#undef KEVO_PRECISION_NAME_
        default: return 0;
    }
}

// What the policy means, one line (prompts, reports); nullptr for an unknown value.
inline const char* kevo_precision_meaning(int p) {
    switch (p) {
#define KEVO_PRECISION_MEANING_(e, n, cudnn, cublas, d) case KEVO_PRECISION_##e: return d;
        KEVO_PRECISION_LIST(KEVO_PRECISION_MEANING_)
#undef KEVO_PRECISION_MEANING_
        default: return 0;
    }
}

// The TF32 flags the timed reference runs with under policy `p` (for "pytorch": PyTorch's defaults,
// which a task may override). 0 for an unknown value.
inline int kevo_precision_cudnn_tf32(int p) {
    switch (p) {
#define KEVO_PRECISION_CUDNN_(e, n, cudnn, cublas, d) case KEVO_PRECISION_##e: return cudnn;
        KEVO_PRECISION_LIST(KEVO_PRECISION_CUDNN_)
#undef KEVO_PRECISION_CUDNN_
        default: return 0;
    }
}
inline int kevo_precision_cublas_tf32(int p) {
    switch (p) {
#define KEVO_PRECISION_CUBLAS_(e, n, cudnn, cublas, d) case KEVO_PRECISION_##e: return cublas;
        KEVO_PRECISION_LIST(KEVO_PRECISION_CUBLAS_)
#undef KEVO_PRECISION_CUBLAS_
        default: return 0;
    }
}

// The policy named `name`, or -1.
inline int kevo_precision_from_name(const char* name) {
    if (!name) return -1;
    for (int k = 0; k < KEVO_PRECISION_COUNT; ++k) {
        const char* n = kevo_precision_name(k);
        int i = 0;
        while (n[i] && n[i] == name[i]) ++i;
        if (!n[i] && !name[i]) return k;
    }
    return -1;
}
