#include <ATen/ATen.h>
#include <tuple>

namespace kevo_test {
std::tuple<at::Tensor, at::Tensor> scale_and_shift(const at::Tensor& a, const at::Tensor& idx) {
    return {a * 3 + 1, idx + 7};
}
}  // namespace kevo_test
