// KernelEvo: the glue that makes an evolvable function a PyTorch operator (kernelevo::<name>).
// Included ONLY by the source that kernelevo_torch_library() generates (it pulls in LibTorch's
// dispatcher and autograd headers); each function's part of that source defines a Spec:
//
//   struct Spec {
//       static constexpr const char* kName = "kernelevo::gelu_bias";
//       static std::vector<at::Tensor> run(const std::vector<at::Tensor>& in);        // the op below autograd
//       static std::vector<at::Tensor> reference(const std::vector<at::Tensor>& in);  // the LibTorch reference
//   };
//
// and registers CUDA (the generated dispatch: evolved kernel, else the reference), CPU and Meta (the
// reference) kernels and an Autograd kernel, Autograd<Spec>::apply, whose backward is the
// reference's: the kernels have no backward of their own, so gradients are exactly the reference's.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>  // AutoDispatchBelowADInplaceOrView
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>
#include <utility>
#include <vector>

namespace kevo_torch {

// The C++ functions return at::Tensor, std::tuple<at::Tensor...> or std::vector<at::Tensor>; the
// glue works on lists, the registered op returns Tensor or (Tensor, ...).
inline std::vector<at::Tensor> as_list(at::Tensor t) { return {std::move(t)}; }
inline std::vector<at::Tensor> as_list(std::vector<at::Tensor> v) { return v; }
template <class... T>
std::vector<at::Tensor> as_list(std::tuple<T...> t) {
    return std::apply([](auto&&... x) { return std::vector<at::Tensor>{std::move(x)...}; }, std::move(t));
}

template <class Out>
struct FromList;
template <>
struct FromList<at::Tensor> {
    static at::Tensor get(std::vector<at::Tensor> v) { return std::move(v.at(0)); }
};
template <class... T>
struct FromList<std::tuple<T...>> {
    template <size_t... I>
    static std::tuple<T...> get(std::vector<at::Tensor>& v, std::index_sequence<I...>) {
        return std::tuple<T...>{std::move(v.at(I))...};
    }
    static std::tuple<T...> get(std::vector<at::Tensor> v) { return get(v, std::index_sequence_for<T...>{}); }
};
template <class Out>
Out from_list(std::vector<at::Tensor> v) {
    return FromList<Out>::get(std::move(v));
}

inline bool differentiable(const at::Tensor& t) {
    return t.defined() && (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()));
}

// The Autograd kernel: forward runs the op below autograd (CUDA/CPU/Meta kernel); backward re-runs
// the reference with grad enabled on detached copies of the saved inputs and differentiates it.
// (Double backward is not supported: the gradient is not itself differentiable.)
template <class Spec>
struct Autograd : public torch::autograd::Function<Autograd<Spec>> {
    static std::vector<at::Tensor> forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs) {
        std::vector<at::Tensor> in(inputs.begin(), inputs.end());
        std::vector<at::Tensor> out;
        {
            at::AutoDispatchBelowADInplaceOrView below;
            out = Spec::run(in);
        }
        ctx->save_for_backward(in);
        std::vector<at::Tensor> constant;
        for (const at::Tensor& o : out)
            if (o.defined() && !differentiable(o)) constant.push_back(o);
        if (!constant.empty()) ctx->mark_non_differentiable(constant);
        return out;
    }

    static std::vector<at::Tensor> backward(torch::autograd::AutogradContext* ctx, std::vector<at::Tensor> grad_out) {
        const std::vector<at::Tensor> saved = ctx->get_saved_variables();
        std::vector<at::Tensor> in;
        std::vector<at::Tensor> wrt;  // the inputs a gradient is asked for
        std::vector<size_t> wrt_index;
        for (size_t i = 0; i < saved.size(); ++i) {
            at::Tensor d = saved[i].defined() ? saved[i].detach() : saved[i];
            if (differentiable(d) && ctx->needs_input_grad(i)) {
                d.requires_grad_(true);
                wrt.push_back(d);
                wrt_index.push_back(i);
            }
            in.push_back(d);
        }
        std::vector<at::Tensor> grads(saved.size());
        if (wrt.empty()) return grads;
        std::vector<at::Tensor> outs, gouts;
        {
            at::AutoGradMode enable(true);
            std::vector<at::Tensor> ref = Spec::reference(in);
            for (size_t k = 0; k < ref.size() && k < grad_out.size(); ++k) {
                if (ref[k].defined() && ref[k].requires_grad() && grad_out[k].defined()) {
                    outs.push_back(ref[k]);
                    gouts.push_back(grad_out[k]);
                }
            }
        }
        if (outs.empty()) return grads;
        std::vector<at::Tensor> g = torch::autograd::grad(outs, wrt, gouts, /*retain_graph=*/false,
                                                          /*create_graph=*/false, /*allow_unused=*/true);
        for (size_t k = 0; k < g.size(); ++k) grads[wrt_index[k]] = g[k];
        return grads;
    }

    static std::vector<at::Tensor> apply_list(const std::vector<at::Tensor>& in) {
        return torch::autograd::Function<Autograd<Spec>>::apply(at::TensorList(in));
    }
};

}  // namespace kevo_torch
