#include "compile/backend.h"

#include <algorithm>

#include "common/error.h"

namespace kevo {

namespace {
class CudaBackend final : public CompileBackend {
public:
    std::string name() const override { return "cuda"; }
    bool recognizes(const std::string&) const override { return true; }
    CompileResult compile(const std::string& source, const CompileOptions& options) const override {
        return compile_kernel(source, options);
    }
};

// "cuda, triton or auto"
std::string expected_names(const std::vector<const CompileBackend*>& backends) {
    std::vector<std::string> names;
    for (const CompileBackend* b : backends) names.push_back(b->name());
    std::sort(names.begin(), names.end());
    std::string text;
    for (const std::string& n : names) text += n + ", ";
    if (text.empty()) return "auto";
    return text.substr(0, text.size() - 2) + " or auto";
}
}  // namespace

const CompileBackend& cuda_backend() {
    static const CudaBackend backend;
    return backend;
}

const CompileBackend& choose_backend(const std::vector<const CompileBackend*>& backends, const std::string& source,
                                     const CompileOptions& options) {
    const bool automatic = options.backend.empty() || options.backend == "auto";
    for (const CompileBackend* b : backends)
        if (automatic ? b->recognizes(source) : b->name() == options.backend) return *b;
    if (automatic) return cuda_backend();  // a list without the fallback: what nvcc makes of it
    throw UsageError("unknown backend '" + options.backend + "' (expected " + expected_names(backends) + ")");
}

}  // namespace kevo
