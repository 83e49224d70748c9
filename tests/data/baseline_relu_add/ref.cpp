#include <ATen/ATen.h>
at::Tensor relu_add(const at::Tensor& x, const at::Tensor& y) { return at::relu(x) * 2 + y; }
