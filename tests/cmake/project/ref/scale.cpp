#include <ATen/ATen.h>

namespace ref {
at::Tensor scale(const at::Tensor& x) { return x * 2; }
}  // namespace ref
