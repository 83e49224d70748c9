// Prompt templates: Markdown files with {{placeholders}}. The defaults (tool/evolve/prompts/*.md)
// are embedded into the binary at build time; `--prompts DIR` overrides any of them with
// DIR/<name>.md.
//
// Templates and their placeholders:
//   system       (none)
//   abi          (none)                      the kernel ABI text with a short example
//   (one per further candidate language, CandidateLanguage::prompt_template(): its format, with an example)
//   seed         task_name task reference abi gpu speed_of_light to_beat language fence
//   mutate_full  task_name task reference abi gpu speed_of_light to_beat language fence parent_code parent_fence
//                parent_metrics inspirations tried feedback
//   mutate_diff  the same as mutate_full; asks for SEARCH/REPLACE edits
//   repair       task_name task reference abi gpu speed_of_light language fence code error
// tried lists the approaches the island's archive holds (technique, speedup), so that a mutation
// does not repeat one: a kernel identical to an earlier one is dropped unevaluated.
// to_beat is empty, or (when the search timed the task's PyTorch module) a section starting with a blank line:
// torch.compile's time per timed set beside PyTorch eager's and the code Inductor generates for it.
// feedback holds the validation result: timings, the speed-of-light line, ptxas resources and, for
// the best kernels, the profiler's summary.
// {{abi}} is the candidate language's template, {{language}} its display name and {{fence}} its
// first fence tag (compile/language.h): for CUDA the abi template, "CUDA" and "cuda".
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kevo::evolve {

class Prompts {
public:
    Prompts();  // the embedded defaults
    static std::vector<std::string> names();  // system, every language's template, seed, ...
    // Replaces the templates that DIR/<name>.md provides. Throws UsageError when DIR is not a
    // directory or provides none of them.
    void load_overrides(const std::filesystem::path& dir);
    const std::string& text(const std::string& name) const;
    // Substitutes {{key}} by vars[key] (values are not scanned again). Throws UsageError naming the
    // template on a placeholder that `vars` lacks.
    std::string render(const std::string& name, const std::map<std::string, std::string>& vars) const;

private:
    std::map<std::string, std::string> templates_;
};

}  // namespace kevo::evolve
