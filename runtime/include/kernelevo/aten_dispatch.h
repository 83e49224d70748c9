// KernelEvo: helpers for the generated dispatch sources (at::Tensor <-> kevo_tensor, device guard,
// current stream). Included ONLY by the generated <name>_dispatch.cpp files: it pulls in ATen.
// With a CUDA-enabled LibTorch (KEVO_WITH_TORCH_CUDA=1, set by kernelevo_optimize()) kernels run on
// torch's current CUDA stream; with a CPU-only LibTorch, tensors can never be on a CUDA device, so
// every call takes the reference path, and this header only needs the CUDA runtime headers.
#pragma once
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>  // not pulled in by ATen.h in every LibTorch version

#include <mutex>
#include <tuple>
#include <vector>

#include "kernelevo/runtime.h"

#ifndef KEVO_WITH_TORCH_CUDA
#define KEVO_WITH_TORCH_CUDA 0
#endif
#if KEVO_WITH_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#define KEVO_ATEN_CUDA 1
#else
#include <cuda_runtime_api.h>
#define KEVO_ATEN_CUDA 0
#endif

namespace kevo_aten {

// at::ScalarType <-> kevo_dtype, both from the one table (KEVO_DTYPE_LIST in kernelevo/abi.h).
inline int32_t dtype_of(at::ScalarType s) {
    switch (s) {
#define KEVO_ATEN_DTYPE_OF_(e, v, n, sz, fl, aten) case at::ScalarType::aten: return KEVO_##e;
        KEVO_DTYPE_LIST(KEVO_ATEN_DTYPE_OF_)
#undef KEVO_ATEN_DTYPE_OF_
        default: return -1;
    }
}

inline at::ScalarType scalar_type_of(int32_t d) {
    switch (d) {
#define KEVO_ATEN_SCALAR_TYPE_OF_(e, v, n, sz, fl, aten) case KEVO_##e: return at::ScalarType::aten;
        KEVO_DTYPE_LIST(KEVO_ATEN_SCALAR_TYPE_OF_)
#undef KEVO_ATEN_SCALAR_TYPE_OF_
        default: return at::ScalarType::Float;
    }
}

// Fills `in` from the tensors. Returns the CUDA ordinal they all sit on, -1 when one is not a
// defined CUDA tensor, -2 when they sit on different CUDA devices.
template <size_t N>
inline int convert(const at::Tensor* const (&args)[N], kevo_tensor (&in)[N]) {
    int device = -3;
    for (size_t i = 0; i < N; ++i) {
        const at::Tensor& a = *args[i];
        if (!a.defined() || !a.is_cuda()) return -1;
        const int d = a.get_device();
        if (device == -3) device = d;
        else if (d != device) return -2;
        kevo_tensor& t = in[i];
        const int64_t nd = a.dim();
        if (nd > KEVO_MAX_DIMS) return -1;
        t.data = const_cast<void*>(a.data_ptr());
        t.ndim = static_cast<int32_t>(nd);
        t.dtype = dtype_of(a.scalar_type());
        const auto sizes = a.sizes();
        const auto strides = a.strides();
        for (int64_t k = 0; k < nd; ++k) {
            t.sizes[k] = sizes[k];
            t.strides[k] = strides[k];
        }
    }
    return device;
}

// Index of the first input that needs autograd (the kernels have no backward), or -1.
template <size_t N>
inline int needs_grad(const at::Tensor* const (&args)[N]) {
    if (!c10::GradMode::is_enabled()) return -1;
    for (size_t i = 0; i < N; ++i)
        if (args[i]->requires_grad()) return static_cast<int>(i);
    return -1;
}

inline at::Tensor allocate(const kevo_tensor& spec, const at::Tensor& like) {
    return at::empty(at::IntArrayRef(spec.sizes, static_cast<size_t>(spec.ndim)),
                     like.options().dtype(scalar_type_of(spec.dtype)));
}

// Makes `device` current for the launch and names the stream to launch on.
class Launch {
public:
    explicit Launch(int device)
#if KEVO_ATEN_CUDA
        : guard_(static_cast<c10::DeviceIndex>(device)),
          stream_(at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream()) {
    }
#else
    {
        if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) cudaSetDevice(device);
        else previous_ = -1;
    }
    ~Launch() {
        if (previous_ >= 0) cudaSetDevice(previous_);
    }
#endif
    cudaStream_t stream() const { return stream_; }

private:
#if KEVO_ATEN_CUDA
    c10::cuda::CUDAGuard guard_;
#else
    int previous_ = -1;
#endif
    cudaStream_t stream_ = nullptr;
};

// One process-wide lock for the references of task files that keep state between calls (a setup
// that loads a TorchScript file, then the function that runs it): kernelevo_optimize(TASK) of several
// regions of one model shares the reference source's state, so setup and call run under it.
inline std::mutex& reference_lock() {
    static std::mutex m;
    return m;
}

}  // namespace kevo_aten
