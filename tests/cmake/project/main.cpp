#include <ATen/ATen.h>

#include <cstdio>

#include <kernelevo/scale.h>

int main() {
    at::Tensor x = at::arange(5, at::kFloat);
    at::Tensor y = kernelevo::scale(x);
    std::printf("impl=%s sum=%g reason=%s\n", kevo_last_impl("scale"), y.sum().item<double>(), kevo_last_reason("scale"));
    return 0;
}
