#include "triton/backends.h"

#include "triton/launch.h"
#include "triton/triton_compile.h"

namespace kevo::triton {

namespace {
class TritonLanguage final : public CandidateLanguage {
public:
    std::string name() const override { return "triton"; }
    std::string display_name() const override { return "Triton"; }
    std::string candidate_help() const override {
        return "a Triton candidate: one .py with @triton.jit kernels and KEVO_LAUNCH, compiled ahead of time by Triton";
    }
    bool recognizes(const std::string& source) const override { return is_triton_source(source); }
    bool marks_candidate(const std::string& block) const override { return block.find("KEVO_LAUNCH") != std::string::npos; }
    std::vector<std::string> fence_tags() const override { return {"python", "py", "triton"}; }
    std::string prompt_template() const override { return "triton"; }
    // Triton programs have techniques of their own, so an archive keeps the best of each language.
    const std::vector<Technique>& techniques() const override {
        static const std::vector<Technique> rules = {
            {std::regex(R"(\btl\.dot\b)"), "triton_dot"},
            {std::regex(R"(\btl\.(sum|max|min|reduce|cumsum|argmax|argmin)\b)"), "triton_reduce"},
        };
        return rules;
    }
    std::string plain_technique() const override { return "triton_plain"; }
    std::string cache_source_extension() const override { return ".py"; }
    std::string cache_metadata_key() const override { return "triton"; }
    std::string version_fact() const override { return "triton_version"; }
    std::string object_folder() const override { return "triton"; }
    std::string object_description() const override { return "Triton kernels"; }
    CompileResult compile(const std::string& source, const CompileOptions& options) const override {
        return compile_triton(source, options);
    }
    std::string python_use() const override {
        return "the Python that has Triton (default: $KERNELEVO_PYTHON, else python3)";
    }
    std::string preflight(const CompileOptions& options) const override {
        const TritonInfo ti = probe(options.python);  // a missing Triton: UsageError saying what to install
        return "Triton " + ti.version + " (" + ti.python + ") compiles the Triton candidates ahead of time";
    }
};
}  // namespace

const CandidateLanguage& language() {
    static const TritonLanguage l;
    return l;
}

}  // namespace kevo::triton
