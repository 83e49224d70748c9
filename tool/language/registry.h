// The registry of candidate languages (the seam: compile/language.h): the one list of the languages
// a candidate can be written in, on the lowest floor that sees them all. Every part above asks it
// (and the language it returns) instead of naming a language: the search's prompts and archive,
// the reply parser's fences, the validator's and `cache add`'s compile, the kernel cache's files.
#pragma once
#include <string>
#include <vector>

#include "compile/language.h"

namespace kevo::language {

// Every language, CUDA first (the fallback of "auto"), then the others in the order they were added.
const std::vector<const CandidateLanguage*>& all();

// Adds a language (a plugin's, a test's) after the built-in ones; its name must be new (UsageError).
// Not thread-safe: before the first use from threads. remove() takes an added one out again.
void add(const CandidateLanguage& language);
void remove(const std::string& name);

// The language `name` names (CandidateLanguage::name()), nullptr when none does.
const CandidateLanguage* named(const std::string& name);
// The language of `source` as "auto" chooses it: the first other than CUDA that recognizes it, else CUDA.
const CandidateLanguage& of_source(const std::string& source);
// The language of CompileOptions::backend ("auto": of_source). Throws UsageError on an unknown name
// ("unknown backend 'x' (expected a, b or auto)").
const CandidateLanguage& chosen(const std::string& source, const CompileOptions& options);

// Every language's name and "auto" ({"auto", "cuda", ...}): the values of --backend.
std::vector<std::string> backend_choices();
// "cuda, x, or auto (X when the file is a X candidate)": --backend's help.
std::string backend_help();
// "Candidate kernel: <CUDA's candidate_help()>, or <the next one's>": --kernel's help.
std::string kernel_help();
// What a candidate file is: ".cu, or a Triton .py" (CUDA's .cu, then each language that keeps its
// own source, by its cache_source_extension()): --initial's help.
std::string kernel_file_kinds();
// --python's help for the languages that run Python (CandidateLanguage::python_use()):
// "Triton: the Python that has Triton (default: ...)", several joined by "; "; "" when none does.
std::string python_help();

// Every language's code-fence tags, in the registry's order.
std::vector<std::string> fence_tags();
// Whether any language marks `block` as a whole candidate (CandidateLanguage::marks_candidate).
bool marks_candidate(const std::string& block);

}  // namespace kevo::language

namespace kevo {
// The name of the language compile_candidate() uses for `source` (language::chosen).
std::string candidate_backend(const std::string& source, const CompileOptions& options);
// Compiles a candidate in its language. A candidate with a launch description needs options.task.
CompileResult compile_candidate(const std::string& source, const CompileOptions& options);
}  // namespace kevo
