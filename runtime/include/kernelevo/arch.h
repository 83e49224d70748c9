/* KernelEvo: the one parser of CUDA architecture names, and the one rule of binary compatibility.
 * C, header-only and torch-free: the runtime, the kernelevo tool (tool/common/arch.h) and tests
 * all use it. (cmake/KernelEvoArch.cmake is CMake's own parser and follows the same rules.)
 *
 * Accepted spellings: "sm_90", "SM_90", "sm90", "compute_90", "90", "9.0", with an optional
 * architecture-specific ("a": sm_90a) or family ("f": sm_100f) suffix. A compute capability is
 * 10 * major + minor (H100/H200: 90, A100: 80, B200: 100).
 */
#ifndef KERNELEVO_ARCH_H
#define KERNELEVO_ARCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kevo_arch {
    int32_t cc;  /* 10 * major + minor; 0: not an architecture */
    char suffix; /* 0, 'a' (arch-specific: runs on exactly this cc) or 'f' (family) */
} kevo_arch;

/* Parses `text`; returns 1 and fills *out (when not NULL), or returns 0. */
static inline int kevo_arch_parse(const char* text, kevo_arch* out) {
    const char* p = text;
    int32_t major = 0, minor = 0, digits = 0, cc = 0;
    char suffix = 0;
    if (!p) return 0;
    if ((p[0] == 's' || p[0] == 'S') && (p[1] == 'm' || p[1] == 'M')) {
        p += 2;
        if (*p == '_') ++p;
    } else if (p[0] == 'c' && p[1] == 'o' && p[2] == 'm' && p[3] == 'p' && p[4] == 'u' && p[5] == 't' && p[6] == 'e') {
        p += 7;
        if (*p == '_') ++p;
    }
    while (*p >= '0' && *p <= '9' && digits < 4) major = 10 * major + (*p++ - '0'), ++digits;
    if (*p == '.') { /* "9.0", "10.0" */
        if (digits < 1 || digits > 2 || p[1] < '0' || p[1] > '9') return 0;
        minor = p[1] - '0';
        p += 2;
        cc = 10 * major + minor;
    } else {
        if (digits < 2 || digits > 3) return 0; /* "9" or "1000" name no architecture */
        cc = major;
    }
    if (*p == 'a' || *p == 'A' || *p == 'f' || *p == 'F') suffix = (char)(*p++ | 0x20);
    if (*p || cc < 10) return 0;
    if (out) {
        out->cc = cc;
        out->suffix = suffix;
    }
    return 1;
}

/* 1 when a kernel compiled to machine code for `kernel` runs on a device of compute capability
 * `device_cc`: same major version and a minor version not above the device's (sm_80 code runs
 * on sm_86 and sm_89); an arch-specific kernel (sm_90a) only on exactly its own cc. */
static inline int kevo_arch_runs_on(kevo_arch kernel, int32_t device_cc) {
    if (kernel.cc <= 0 || device_cc <= 0) return 0;
    if (kernel.suffix == 'a') return kernel.cc == device_cc;
    return kernel.cc / 10 == device_cc / 10 && kernel.cc <= device_cc;
}

#ifdef __cplusplus
}
#endif

#endif /* KERNELEVO_ARCH_H */
