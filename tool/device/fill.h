// The one input filler: the values the validator's runner, the profiler's bench and the KernelBench
// import's refcheck (and its Python half, kernelevo/kernelbench/fill.py's refcheck_values) give an input.
// value(seed, i, kind, a, b) depends only on its arguments: a counter-based draw per element.
//
// Host and device give the same bits: the formula uses only operations IEEE 754 rounds exactly
// (+, -, *, /, sqrt, floor and integer arithmetic), on the device through the _rn intrinsics, which
// the compiler never fuses into an FMA, and on the host compiled with -ffp-contract=off (kevo_device
// requires it of everything that links it). randn's log and cos are therefore computed here from
// those operations (ln_unit, cos_2pi; accurate to a few ulp), not by libm or CUDA's math library.
#pragma once
#include <stdint.h>

#include <cmath>

#include "device/dtype.h"
#include "task/init_kind.h"

namespace kevo_device {

// IEEE double operations, rounded to nearest, never contracted.
KEVO_HD double add(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
KEVO_HD double sub(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
KEVO_HD double mul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
KEVO_HD double div(double a, double b) {
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
KEVO_HD double sqrt_rn(double a) {
#ifdef __CUDA_ARCH__
    return __dsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
}
KEVO_HD double floor_exact(double a) {
#ifdef __CUDA_ARCH__
    return ::floor(a);
#else
    return std::floor(a);
#endif
}
KEVO_HD uint64_t double_bits(double d) {
#ifdef __CUDA_ARCH__
    return static_cast<uint64_t>(__double_as_longlong(d));
#else
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
#endif
}
KEVO_HD double bits_double(uint64_t u) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double(static_cast<long long>(u));
#else
    double d;
    std::memcpy(&d, &u, 8);
    return d;
#endif
}

// splitmix64's finalizer.
KEVO_HD uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A uniform in (0, 1], k * 2^-53 for k in [1, 2^53]: element i's draw on `lane` (randn uses two).
KEVO_HD double uniform01(uint64_t seed, uint64_t i, uint64_t lane) {
    const uint64_t h = mix64(mix64(seed) ^ (i * 2 + lane));
    return static_cast<double>((h >> 11) + 1) * 0x1.0p-53;  // both factors exact
}

// ln x for a normal x > 0: x = m 2^e with m in (sqrt(1/2), sqrt(2)] (exponent bits), then
// ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.172, by its series to s^21 (truncation < 1e-18
// relative), and e ln 2 with ln 2 split so that e * LN2_HI is exact.
KEVO_HD double ln_unit(double x) {
    const uint64_t bits = double_bits(x);
    double e = static_cast<double>(static_cast<int>((bits >> 52) & 0x7ff) - 1023);
    double m = bits_double((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
    if (m > 0x1.6a09e667f3bcdp+0) {
        m = mul(m, 0.5);
        e = add(e, 1.0);
    }
    const double s = div(sub(m, 1.0), add(m, 1.0)), z = mul(s, s);
    double p = 0x1.8618618618618p-5;  // 1/21, then 1/19, ..., 1/3 (each 1/(2k+1) rounded)
    p = add(mul(p, z), 0x1.af286bca1af28p-5);
    p = add(mul(p, z), 0x1.e1e1e1e1e1e1ep-5);
    p = add(mul(p, z), 0x1.1111111111111p-4);
    p = add(mul(p, z), 0x1.3b13b13b13b14p-4);
    p = add(mul(p, z), 0x1.745d1745d1746p-4);
    p = add(mul(p, z), 0x1.c71c71c71c71cp-4);
    p = add(mul(p, z), 0x1.2492492492492p-3);
    p = add(mul(p, z), 0x1.999999999999ap-3);
    p = add(mul(p, z), 0x1.5555555555555p-2);
    const double half_ln_m = add(s, mul(s, mul(z, p)));  // atanh(s)
    return add(mul(e, 0x1.62e42fee00000p-1), add(mul(e, 0x1.a39ef35793c76p-33), mul(2.0, half_ln_m)));
}

// cos(2 pi w) for w in [0, 1]: 4w = q + f (exact), cos((pi/2)(q + f)) is +-cos or +-sin of
// (pi/2) g with g = min(f, 1 - f) in [0, 1/2], by Taylor polynomials to x^18 and x^17 (|x| <= pi/4:
// truncation < 1e-17).
KEVO_HD double cos_2pi(double w) {
    const double t = mul(w, 4.0), q = floor_exact(t), f = sub(t, q);
    const bool swap = f > 0.5;
    const double g = swap ? sub(1.0, f) : f;
    const double x = mul(g, 0x1.921fb54442d18p+0), x2 = mul(x, x);
    double c = -0x1.6827863b97d97p-53;  // (-1)^k/(2k)!, k = 9 down to 0
    c = add(mul(c, x2), 0x1.ae7f3e733b81fp-45);
    c = add(mul(c, x2), -0x1.93974a8c07c9dp-37);
    c = add(mul(c, x2), 0x1.1eed8eff8d898p-29);
    c = add(mul(c, x2), -0x1.27e4fb7789f5cp-22);
    c = add(mul(c, x2), 0x1.a01a01a01a01ap-16);
    c = add(mul(c, x2), -0x1.6c16c16c16c17p-10);
    c = add(mul(c, x2), 0x1.5555555555555p-5);
    c = add(mul(c, x2), -0.5);
    c = add(mul(c, x2), 1.0);
    double s = 0x1.952c77030ad4ap-49;  // (-1)^k/(2k+1)!, k = 8 down to 1
    s = add(mul(s, x2), -0x1.ae7f3e733b81fp-41);
    s = add(mul(s, x2), 0x1.6124613a86d09p-33);
    s = add(mul(s, x2), -0x1.ae64567f544e4p-26);
    s = add(mul(s, x2), 0x1.71de3a556c734p-19);
    s = add(mul(s, x2), -0x1.a01a01a01a01ap-13);
    s = add(mul(s, x2), 0x1.1111111111111p-7);
    s = add(mul(s, x2), -0x1.5555555555555p-3);
    s = add(x, mul(mul(x, x2), s));
    const int quadrant = static_cast<int>(q) & 3;
    const double magnitude = ((quadrant & 1) != 0) != swap ? s : c;
    return quadrant == 1 || quadrant == 2 ? -magnitude : magnitude;
}

// A standard normal draw (Box-Muller on the element's two lanes).
KEVO_HD double normal(uint64_t seed, uint64_t i) {
    const double r = sqrt_rn(mul(-2.0, ln_unit(uniform01(seed, i, 0))));
    return mul(r, cos_2pi(uniform01(seed, i, 1)));
}

// The value of element i of an input drawn as `kind` (task/init_kind.h) with parameters a and b.
// rand and randint use 1 - u, in [0, 1); randint is clamped to b - 1 (rounding near b).
KEVO_HD double value(uint64_t seed, uint64_t i, int kind, double a, double b) {
    switch (kind) {
        case KEVO_INIT_RANDN: return add(a, mul(b, normal(seed, i)));
        case KEVO_INIT_RAND: return add(a, mul(sub(b, a), sub(1.0, uniform01(seed, i, 0))));
        case KEVO_INIT_RANDINT: {
            const double v = floor_exact(add(a, mul(sub(b, a), sub(1.0, uniform01(seed, i, 0))))), top = sub(b, 1.0);
            return v < top ? v : top;
        }
        case KEVO_INIT_ONES: return 1;
        case KEVO_INIT_FULL: return a;
        case KEVO_INIT_ARANGE: return static_cast<double>(i);
        default: return 0;  // zeros; file inputs are read, never drawn
    }
}

// The seed of input k of a set drawn with `seed`: the validator's and kernelevo-profile's.
KEVO_HD uint64_t tensor_seed(uint64_t seed, uint64_t k) { return seed * 1000003ull + k; }

// A model parameter's values on a draw that varies them (task.h, Init::parameter): element i gets the
// file's element (i + vary_shift) % n, plus (floating dtypes) a normal draw of std `scale`
// (vary_scale: a quarter of the values' root mean square, 0.25 for an all-zero tensor), so that values
// that are all equal (a LayerNorm's ones, a zero bias) change too. `seed` is the tensor's seed.
KEVO_HD uint64_t vary_shift(uint64_t seed, uint64_t n) { return n > 1 ? 1 + mix64(seed ^ 0x7a11ull) % (n - 1) : 0; }
KEVO_HD double vary_noise(uint64_t seed, uint64_t i, double scale) { return mul(scale, normal(mix64(seed ^ 0x401ull), i)); }
inline double vary_scale(const void* values, int32_t dtype, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double v = load_as_double(values, dtype, i);
        sum += v * v;
    }
    const double rms = n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0;
    return rms > 0 && std::isfinite(rms) ? 0.25 * rms : 0.25;
}

// Fills n elements of `dtype` at p on the host, on up to `threads` threads (0: every core).
void fill_host(void* p, int32_t dtype, int64_t n, int kind, double a, double b, uint64_t seed, unsigned threads = 0);

}  // namespace kevo_device
