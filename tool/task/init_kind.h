// The one table of input-init kinds: how the validator draws an input's values. The task parser,
// the runner's fill kernels and the prompts all expand this list. Values travel in the job between
// the validator and its runner: append only.
//   X(enum name, task-file name, what a and b mean)
#pragma once

#define KEVO_INIT_KIND_LIST(X)                                  \
    X(RANDN,   "randn",   "normal: a = mean, b = std")          \
    X(RAND,    "rand",    "uniform [a, b)")                      \
    X(RANDINT, "randint", "integers in [a, b)")                  \
    X(ONES,    "ones",    "all ones")                            \
    X(ZEROS,   "zeros",   "all zeros")                           \
    X(FULL,    "full",    "every element a")                     \
    X(ARANGE,  "arange",  "0, 1, 2, ... in flat order")          \
    X(FILE,    "file",    "fixed values from a raw file (path)")

enum kevo_init_kind {
#define KEVO_INIT_ENUM_(e, n, d) KEVO_INIT_##e,
    KEVO_INIT_KIND_LIST(KEVO_INIT_ENUM_)
#undef KEVO_INIT_ENUM_
    KEVO_INIT_COUNT
};

// Task-file name of an init kind, nullptr for an unknown value.
inline const char* kevo_init_kind_name(int kind) {
    switch (kind) {
#define KEVO_INIT_NAME_(e, n, d) case KEVO_INIT_##e: return n;
        KEVO_INIT_KIND_LIST(KEVO_INIT_NAME_)
#undef KEVO_INIT_NAME_
        default: return nullptr;
    }
}

// The kind named `name`, or -1.
inline int kevo_init_kind_from_name(const char* name) {
    if (!name) return -1;
    for (int k = 0; k < KEVO_INIT_COUNT; ++k) {
        const char* n = kevo_init_kind_name(k);
        int i = 0;
        while (n[i] && n[i] == name[i]) ++i;
        if (!n[i] && !name[i]) return k;
    }
    return -1;
}
