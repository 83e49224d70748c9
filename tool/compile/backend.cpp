#include "compile/backend.h"

#include <algorithm>

#include "common/error.h"

namespace kevo {

namespace {
class CudaLanguage final : public CandidateLanguage {
public:
    std::string name() const override { return "cuda"; }
    std::string display_name() const override { return "CUDA"; }
    std::string candidate_help() const override { return "one .cu file defining kevo_forward (see kernelevo/abi.h)"; }
    bool recognizes(const std::string&) const override { return true; }
    bool marks_candidate(const std::string&) const override { return false; }  // kevo_forward marks it
    std::vector<std::string> fence_tags() const override {
        return {"cuda", "", "cu", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "cuh", "hxx"};
    }
    std::string prompt_template() const override { return "abi"; }
    const std::vector<Technique>& techniques() const override {
        static const std::vector<Technique> rules = {
            {std::regex(R"(\bwmma::|\bmma\.sync|\bmma_sync\b|\bwgmma\b|__hmma)"), "tensor_core"},
            {std::regex(R"(__shfl_\w*sync|cooperative_groups::reduce|cg::reduce)"), "warp_shuffle"},
            {std::regex(R"(__shared__)"), "shared_memory"},
            {std::regex(R"(\b(float4|float2|half2|__half2|int4|uint4|double2|__nv_bfloat162)\b)"), "vectorized"},
        };
        return rules;
    }
    std::string plain_technique() const override { return "plain"; }
    std::string cache_source_extension() const override { return ""; }
    std::string cache_metadata_key() const override { return ""; }
    std::string object_folder() const override { return "kernels"; }
    std::string object_description() const override { return "CUDA kernels built by nvcc"; }
    CompileResult compile(const std::string& source, const CompileOptions& options) const override {
        return compile_kernel(source, options);
    }
};

// "a, b or auto"
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

const CandidateLanguage& cuda_language() {
    static const CudaLanguage language;
    return language;
}

const CompileBackend& choose_backend(const std::vector<const CompileBackend*>& backends, const std::string& source,
                                     const CompileOptions& options) {
    const bool automatic = options.backend.empty() || options.backend == "auto";
    for (const CompileBackend* b : backends) {
        if (!automatic && b->name() == options.backend) return *b;
        if (automatic && b != &cuda_language() && b->recognizes(source)) return *b;
    }
    if (automatic) return cuda_language();  // the fallback: what nvcc makes of it
    throw UsageError("unknown backend '" + options.backend + "' (expected " + expected_names(backends) + ")");
}

}  // namespace kevo
