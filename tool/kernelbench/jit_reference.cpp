// The generic reference of every task imported by `kernelevo import kernelbench`: it runs the
// problem's TorchScript (model.pt, traced over a functional wrapper whose inputs are the problem's
// inputs followed by the model's parameters and buffers) through torch::jit.
//
// The task names it as
//   "reference": {"source": "../kernelbench_reference.cpp", "function": "kevo_kb::forward",
//                 "signature": "vector", "setup": "kevo_kb::setup", "arg": "model.pt"}
// so one build serves every task of a suite; kevo_ref_setup() loads the task's model.pt once.
#pragma once  // included by each kernelevo_optimize(TASK) function of a model that uses it
#include <torch/script.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kevo_kb {
namespace detail {
// The module forward() runs: the one the last setup() named.
inline std::shared_ptr<torch::jit::Module>& module() {
    static std::shared_ptr<torch::jit::Module> m;
    return m;
}
// Every module loaded, by file and device: a program that links several tasks' references (the
// regions of a model as kernelevo_optimize(TASK) functions) switches between them with setup(),
// which loads each file once. setup() and forward() are called under one lock by such a program.
inline std::map<std::string, std::shared_ptr<torch::jit::Module>>& loaded() {
    static std::map<std::string, std::shared_ptr<torch::jit::Module>> m;
    return m;
}
inline void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
    if (v.isTensor()) {
        out.push_back(v.toTensor());
    } else if (v.isTuple()) {
        for (const auto& e : v.toTupleRef().elements()) flatten(e, out);
    } else if (v.isList()) {
        for (const auto& e : v.toListRef()) flatten(e, out);
    } else {
        throw std::runtime_error("the model returned a " + v.tagKind() + ", not tensors");
    }
}
// torch.jit.trace records a convolution as aten::_convolution with the cuDNN flags of the tracing
// process baked in as constants (benchmark, deterministic, cudnn_enabled, allow_tf32): a trace made
// with TF32 off would run strict fp32 under any precision policy, and one made with it on would run
// TF32 even for the strict reference correctness is judged against. aten::convolution (its first
// nine arguments) is what eager PyTorch calls: it reads those flags from the process at each call,
// so the reference follows the policy the wrapper sets (kevo_ref_call) and strict fp32 where it
// asks for it (kevo_ref_forward). Returns the number of nodes replaced.
inline int follow_context_convolutions(torch::jit::Block* block) {
    static const c10::Symbol traced = c10::Symbol::fromQualString("aten::_convolution");
    static const c10::Symbol eager = c10::Symbol::fromQualString("aten::convolution");
    int replaced = 0;
    for (auto it = block->nodes().begin(); it != block->nodes().end();) {
        torch::jit::Node* n = *it;
        ++it;
        for (torch::jit::Block* b : n->blocks()) replaced += follow_context_convolutions(b);
        if (n->kind() != traced || n->inputs().size() != 13 || n->outputs().size() != 1) continue;
        torch::jit::Node* c = n->owningGraph()->create(eager, n->inputs().slice(0, 9), 1);
        c->insertBefore(n);
        c->output()->setType(n->output()->type());
        n->output()->replaceAllUsesWith(c->output());
        n->destroy();
        ++replaced;
    }
    return replaced;
}
inline int follow_context_convolutions(torch::jit::Module& m) {
    int replaced = 0;
    for (const auto& sub : m.modules())
        for (const auto& method : sub.get_methods()) replaced += follow_context_convolutions(method.graph()->block());
    return replaced;
}
}  // namespace detail

// Loads the TorchScript file onto the device the reference runs on (the current CUDA device when
// LibTorch has CUDA, else the CPU), once per file and device: a later setup() of a file loaded
// before makes it the one forward() runs again.
inline void setup(const std::string& path) {
    c10::Device device(at::kCPU);
#if defined(KEVO_TORCH_CUDA)
    int dev = 0;
    cudaGetDevice(&dev);
    device = c10::Device(at::kCUDA, static_cast<c10::DeviceIndex>(dev));
#endif
    // Run the graph op by op, as eager PyTorch does: no profiling-executor fusion, which would
    // change both the numbers and the timing baseline (LibTorch eager).
    torch::jit::setGraphExecutorOptimize(false);
    const std::string key = path + "@" + device.str();
    if (auto it = detail::loaded().find(key); it != detail::loaded().end()) {
        detail::module() = it->second;
        return;
    }
    try {
        auto m = std::make_shared<torch::jit::Module>(torch::jit::load(path, device));
        m->eval();
        detail::follow_context_convolutions(*m);
        detail::loaded()[key] = m;
        detail::module() = std::move(m);
    } catch (const c10::Error& e) {
        throw std::runtime_error("cannot load the TorchScript model " + path + ": " + e.what_without_backtrace());
    }
}

inline std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) {
    auto& m = detail::module();
    if (!m) throw std::runtime_error("kevo_kb::forward: no model loaded (kevo_ref_setup was not called with the task's model.pt)");
    torch::NoGradGuard no_grad;
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    std::vector<at::Tensor> out;
    try {
        detail::flatten(m->forward(std::move(args)), out);
    } catch (const c10::Error& e) {
        throw std::runtime_error(e.what_without_backtrace());
    }
    return out;
}
}  // namespace kevo_kb
