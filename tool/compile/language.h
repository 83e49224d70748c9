// The candidate-language seam: everything the tool knows about one language a candidate kernel can
// be written in. The search's prompts, the reply parser, the archive's techniques, the compile step
// and the kernel cache ask a CandidateLanguage; none of them names a language other than through it.
//
// compile/ defines the seam and CUDA's language (cuda_language(), compile/backend.h); the others
// live on higher floors beside their own code, and the registry (language/registry.h, the lowest
// floor that sees them all) lists them. A new language: one class here, one line there.
//
// Plain objects handed over explicitly, no self-registration at static initialization: a static
// library drops an object file nothing references, and its registration with it.
#pragma once
#include <regex>
#include <string>
#include <vector>

#include "compile/compile.h"

namespace kevo {

// One of the archive's technique cells: a program whose source matches `pattern` (the first that
// does, in the language's order) is filed under `tag`.
struct Technique {
    std::regex pattern;
    std::string tag;
};

class CandidateLanguage {
public:
    virtual ~CandidateLanguage() = default;

    // The name: the value of CompileOptions::backend (and --backend) that picks it, of
    // CompileResult::backend, and of a cache entry's "backend".
    virtual std::string name() const = 0;
    // How prompts and messages name it ("CUDA"), and what a candidate file in it is, for help texts
    // ("one .cu file defining kevo_forward (see kernelevo/abi.h)").
    virtual std::string display_name() const = 0;
    virtual std::string candidate_help() const = 0;

    // Whether `source` is written in this language: how backend "auto" chooses.
    virtual bool recognizes(const std::string& source) const = 0;
    // Whether one code block of a reply with several is a whole candidate in this language, besides
    // a block that defines kevo_forward (the kernel ABI, which the reply parser checks itself).
    virtual bool marks_candidate(const std::string& block) const = 0;
    // The code-fence tags a reply's block in this language may carry ("" for an untagged fence);
    // the first is the one prompts ask for ({{fence}}, {{parent_fence}}).
    virtual std::vector<std::string> fence_tags() const = 0;

    // The prompt template (evolve/prompts.h) that describes the candidate format, {{abi}}.
    virtual std::string prompt_template() const = 0;

    // The archive's technique cells, most advanced first, and the tag of a program matching none.
    // Tags are unique across languages, so programs of two languages never compete for one cell.
    virtual const std::vector<Technique>& techniques() const = 0;
    virtual std::string plain_technique() const = 0;

    // A cache entry stores the .cu a candidate compiles to. For a language whose candidate is not
    // that .cu, the extension of the candidate source kept beside it (".py": NAME/sm_XX.py), and
    // the key of the entry's metadata that holds its facts (source_hash, version, ...); "" for both
    // when the candidate is the .cu itself.
    virtual std::string cache_source_extension() const = 0;
    virtual std::string cache_metadata_key() const = 0;
    // Whether a cache entry keeps the candidate's own source beside the .cu generated from it: the
    // one answer for the search's confirm, `cache add` and the kernel cache.
    bool keeps_source() const { return !cache_source_extension().empty(); }
    // The key of those facts that names its toolchain's version ("<name>_version"), which `cache
    // status` shows under the same key; "" for none.
    virtual std::string version_fact() const { return ""; }
    // Its folder of compiled objects under cache_root() and what `cache objects stats` calls it.
    virtual std::string object_folder() const = 0;
    virtual std::string object_description() const = 0;

    virtual CompileResult compile(const std::string& source, const CompileOptions& options) const = 0;

    // What its compile needs --python (CompileOptions::python) for, with the default, for help
    // texts ("the Python that has X (default: ...)"); "" when it runs no Python.
    virtual std::string python_use() const { return ""; }
    // Checked once before a run that writes candidates in it: that its toolchain is there (else
    // UsageError, exit 2, saying what to install), so a missing one stops the run before it starts,
    // not mid-run. Returns a line for the log saying what it found ("" for nothing to say).
    virtual std::string preflight(const CompileOptions& /*options*/) const { return ""; }
};

}  // namespace kevo
