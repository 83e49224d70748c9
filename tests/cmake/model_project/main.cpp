// Calls the two region functions of the model folder (x -> fc1 (Linear + ReLU) -> fc2 (Linear)) with
// the region tasks' own weights, twice in turn (each region's reference is its own TorchScript file:
// switching between them must run the right one), and compares with the same math in LibTorch.
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <vector>

#include "kernelevo/model_tiny.h"
#include "kernelevo/runtime.h"

extern const char* const kModelDir;  // model_dir.cpp

static at::Tensor read_floats(const std::string& file, std::vector<int64_t> shape) {
    std::ifstream in(std::string(kModelDir) + "/regions/" + file, std::ios::binary);
    std::vector<float> v(static_cast<size_t>(c10::multiply_integers(shape)));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    if (!in) throw std::runtime_error("cannot read " + file);
    return torch::from_blob(v.data(), shape).clone();
}

// `app cuda`: the tensors on the GPU, where a region's cached kernel runs; prints what each ran.
int main(int argc, char** argv) {
    const bool cuda = argc > 1 && std::string(argv[1]) == "cuda";
    const auto on = [&](const at::Tensor& t) { return cuda ? t.to(at::kCUDA) : t; };
    const at::Tensor w1 = on(read_floats("tiny_fc1/fc1_weight.bin", {16, 8})), b1 = on(read_floats("tiny_fc1/fc1_bias.bin", {16}));
    const at::Tensor w2 = on(read_floats("tiny_fc2/fc2_weight.bin", {4, 16})), b2 = on(read_floats("tiny_fc2/fc2_bias.bin", {4}));
    double worst = 0;
    for (int round = 0; round < 2; ++round) {
        const at::Tensor x = on(torch::randn({3, 8}));
        const at::Tensor h = kernelevo::tiny_fc1(x, w1, b1);
        const at::Tensor y = kernelevo::tiny_fc2(h, w2, b2);
        const at::Tensor want_h = torch::relu(torch::linear(x, w1, b1));
        const at::Tensor want_y = torch::linear(want_h, w2, b2);
        if (h.sizes() != want_h.sizes() || y.sizes() != want_y.sizes()) {
            std::cout << "wrong shapes " << h.sizes() << " " << y.sizes() << "\n";
            return 1;
        }
        worst = std::max({worst, (h - want_h).abs().max().item<double>(), (y - want_y).abs().max().item<double>()});
    }
    std::cout << "max_diff=" << worst << " tiny_fc1=" << kevo_last_impl("tiny_fc1") << " tiny_fc2=" << kevo_last_impl("tiny_fc2")
              << "\n";
    return worst < 1e-5 ? 0 : 1;
}
