// A third candidate language for tests (language_test, workflows_test): added through
// language::add, it shows that a part reaches a language through the registry alone.
#pragma once
#include <regex>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/hash.h"
#include "compile/language.h"

namespace kevo::testing_fake {

class FakeLanguage final : public CandidateLanguage {
public:
    std::string name() const override { return "fakelang"; }
    std::string display_name() const override { return "Fake"; }
    std::string candidate_help() const override { return "a Fake candidate: one .fk file"; }
    bool recognizes(const std::string& source) const override { return source.rfind("#lang fake\n", 0) == 0; }
    bool marks_candidate(const std::string& block) const override { return block.find("FAKE_ENTRY") != std::string::npos; }
    std::vector<std::string> fence_tags() const override { return {"fake", "fk"}; }
    std::string prompt_template() const override { return "fake"; }
    const std::vector<Technique>& techniques() const override {
        static const std::vector<Technique> t = {{std::regex(R"(\bvectorize\b)"), "fake_vector"}};
        return t;
    }
    std::string plain_technique() const override { return "fake_plain"; }
    std::string cache_source_extension() const override { return ".fk"; }
    std::string cache_metadata_key() const override { return "fakelang"; }
    std::string object_folder() const override { return "fake"; }
    std::string object_description() const override { return "Fake kernels"; }
    std::string version_fact() const override { return "fake_version"; }
    std::string python_use() const override { return "the Python with fakec (default: python3)"; }
    // Counts its calls; throws the UsageError a missing toolchain would while `missing` is set.
    std::string preflight(const CompileOptions& options) const override {
        ++preflights;
        if (missing) throw UsageError("fakec is not installed for " + (options.python.empty() ? "python3" : options.python));
        return "fakec 0.1 compiles the Fake candidates";
    }
    mutable int preflights = 0;
    bool missing = false;
    CompileResult compile(const std::string& source, const CompileOptions&) const override {
        CompileResult r;
        r.ok = true;
        r.backend = name();
        r.generated_source = "// generated from " + sha256_hex(source) + "\n";
        r.backend_info = {{"fake_version", "0.1"}, {"aot_s", 1.5}};
        return r;
    }
};

inline const std::string kFake = "#lang fake\nFAKE_ENTRY vectorize(x)\n";

}  // namespace kevo::testing_fake
