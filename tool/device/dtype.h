// Element access by kevo_dtype for host and device code alike, expanded from the one dtype table
// (KEVO_DTYPE_LIST, kernelevo/abi.h): a storage type per dtype and load/store as double. Torch-free
// and free of CUDA headers: half and bfloat16 are converted by integer routines (round to nearest
// even, through float as PyTorch converts a double), so host and device give the same bits.
#pragma once
#include <stdint.h>

#include <cstring>
#include <type_traits>

#include "kernelevo/abi.h"

#ifdef __CUDACC__
#define KEVO_HD __host__ __device__ __forceinline__
#else
#define KEVO_HD inline
#endif

namespace kevo_device {

// Storage of the 16-bit floats and of bool (a byte compared by its value, written as 0 or 1).
struct f16 { uint16_t bits; };
struct bf16 { uint16_t bits; };
struct byte_bool { uint8_t v; };

// The storage type of each ATen ScalarType name that KEVO_DTYPE_LIST uses (its last column): a new
// dtype row needs its type here, and nothing else in this file.
namespace storage {
using Float = float;
using Half = f16;
using BFloat16 = bf16;
using Int = int32_t;
using Long = int64_t;
using Bool = byte_bool;
using Double = double;
using Char = int8_t;
using Byte = uint8_t;
}  // namespace storage

template <int D> struct dtype_traits;
#define KEVO_DEVICE_TRAITS_(e, v, n, sz, fl, at)                                         \
    template <> struct dtype_traits<KEVO_##e> {                                           \
        using type = storage::at;                                                         \
        static_assert(sizeof(type) == sz, "storage of " n " differs from its table size"); \
    };
KEVO_DTYPE_LIST(KEVO_DEVICE_TRAITS_)
#undef KEVO_DEVICE_TRAITS_

KEVO_HD uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

KEVO_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

// float -> IEEE half, round to nearest even (NaN -> quiet NaN 0x7e00, as PyTorch's c10::Half).
KEVO_HD uint16_t half_from_float(float f) {
    const uint32_t x = float_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (ax >= 0x38800000u) {                                               // a normal half (>= 2^-14)
        const uint32_t r = ax - 0x38000000u, rest = r & 0x1fffu;           // exponent rebiased 127 -> 15
        uint32_t h = r >> 13;
        h += (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ? 1u : 0u;
        return static_cast<uint16_t>(sign | h);
    }
    if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds to zero
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;  // units of 2^-24
    const uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1u);
    uint32_t h = m >> shift;
    h += (rest > half || (rest == half && (h & 1u))) ? 1u : 0u;
    return static_cast<uint16_t>(sign | h);
}

KEVO_HD float half_to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal
            exp = 127 - 15 + 1;
            while (!(mant & 0x400u)) mant <<= 1, --exp;
            bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    return bits_float(bits);
}

// float -> bfloat16, round to nearest even (NaN -> 0x7fc0, as PyTorch's c10::BFloat16).
KEVO_HD uint16_t bf16_from_float(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

KEVO_HD float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

KEVO_HD double to_double(float v) { return v; }
KEVO_HD double to_double(double v) { return v; }
KEVO_HD double to_double(int32_t v) { return v; }
KEVO_HD double to_double(int64_t v) { return static_cast<double>(v); }
KEVO_HD double to_double(int8_t v) { return v; }
KEVO_HD double to_double(uint8_t v) { return v; }
KEVO_HD double to_double(f16 v) { return half_to_float(v.bits); }
KEVO_HD double to_double(bf16 v) { return bf16_to_float(v.bits); }
KEVO_HD double to_double(byte_bool v) { return v.v; }

// double -> storage as PyTorch's .to(dtype) does it: floats round to nearest (16-bit ones through
// float), integers truncate, bool is v != 0. Narrow integers go through int64 and keep its low bits
// (a direct conversion out of their range is undefined, and the device saturates where the host wraps).
template <typename T> KEVO_HD T from_double(double v) {
    if constexpr (std::is_integral<T>::value) return static_cast<T>(static_cast<int64_t>(v));
    else return static_cast<T>(v);
}
template <> KEVO_HD f16 from_double<f16>(double v) { return f16{half_from_float(static_cast<float>(v))}; }
template <> KEVO_HD bf16 from_double<bf16>(double v) { return bf16{bf16_from_float(static_cast<float>(v))}; }
template <> KEVO_HD byte_bool from_double<byte_bool>(double v) { return byte_bool{static_cast<uint8_t>(v != 0 ? 1 : 0)}; }

// Element i of a buffer of `dtype`, as double (0 for an unknown dtype).
KEVO_HD double load_as_double(const void* p, int32_t dtype, int64_t i) {
    switch (dtype) {
#define KEVO_DEVICE_LOAD_(e, v, n, sz, fl, at) \
    case KEVO_##e: return to_double(static_cast<const dtype_traits<KEVO_##e>::type*>(p)[i]);
        KEVO_DTYPE_LIST(KEVO_DEVICE_LOAD_)
#undef KEVO_DEVICE_LOAD_
    }
    return 0;
}

// Stores v as element i of a buffer of `dtype` (nothing for an unknown dtype).
KEVO_HD void store_from_double(void* p, int32_t dtype, int64_t i, double v) {
    switch (dtype) {
#define KEVO_DEVICE_STORE_(e, vv, n, sz, fl, at)                                    \
    case KEVO_##e: {                                                                  \
        using T = dtype_traits<KEVO_##e>::type;                                       \
        static_cast<T*>(p)[i] = from_double<T>(v);                                    \
        break;                                                                        \
    }
        KEVO_DTYPE_LIST(KEVO_DEVICE_STORE_)
#undef KEVO_DEVICE_STORE_
    }
}

}  // namespace kevo_device
