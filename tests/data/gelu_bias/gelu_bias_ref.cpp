// Reference: y = gelu(x + bias), exact (erf) GELU as PyTorch's default.
#include <ATen/ATen.h>

at::Tensor gelu_bias(const at::Tensor& x, const at::Tensor& bias) { return at::gelu(x + bias); }
