#include <ATen/ATen.h>

#include "scale_factor.h"

namespace ref {
at::Tensor scale(const at::Tensor& x) { return x * kScaleFactor; }
}  // namespace ref
