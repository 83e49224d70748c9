#include "triton/backends.h"

#include "triton/launch.h"
#include "triton/triton_compile.h"

namespace kevo {

namespace triton {
namespace {
class TritonBackend final : public CompileBackend {
public:
    std::string name() const override { return "triton"; }
    bool recognizes(const std::string& source) const override { return is_triton_source(source); }
    CompileResult compile(const std::string& source, const CompileOptions& options) const override {
        return compile_triton(source, options);
    }
};
}  // namespace

const CompileBackend& backend() {
    static const TritonBackend b;
    return b;
}
}  // namespace triton

const std::vector<const CompileBackend*>& candidate_backends() {
    static const std::vector<const CompileBackend*> all = {&triton::backend(), &cuda_backend()};
    return all;
}

std::string candidate_backend(const std::string& source, const CompileOptions& options) {
    return choose_backend(candidate_backends(), source, options).name();
}

CompileResult compile_candidate(const std::string& source, const CompileOptions& options) {
    return choose_backend(candidate_backends(), source, options).compile(source, options);
}

}  // namespace kevo
