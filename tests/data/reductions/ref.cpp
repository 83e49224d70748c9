#include <ATen/ATen.h>
#include <tuple>

namespace kevo_test {
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> row_stats(const at::Tensor& x) {
    return {x.sum(1), x.argmax(1), x.sum(), x > 0};
}
}  // namespace kevo_test
