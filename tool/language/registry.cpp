#include "language/registry.h"

#include <algorithm>

#include "common/error.h"
#include "compile/backend.h"
#include "triton/backends.h"

namespace kevo::language {

namespace {
std::vector<const CandidateLanguage*>& list() {
    // The built-in languages: CUDA and Triton. A new one is one more entry here.
    static std::vector<const CandidateLanguage*> languages = {&cuda_language(), &triton::language()};
    return languages;
}
}  // namespace

const std::vector<const CandidateLanguage*>& all() { return list(); }

void add(const CandidateLanguage& language) {
    if (named(language.name())) throw UsageError("a candidate language named '" + language.name() + "' exists already");
    list().push_back(&language);
}

void remove(const std::string& name) {
    auto& l = list();
    l.erase(std::remove_if(l.begin(), l.end(), [&](const CandidateLanguage* c) { return c->name() == name; }), l.end());
}

const CandidateLanguage* named(const std::string& name) {
    for (const CandidateLanguage* l : all())
        if (l->name() == name) return l;
    return nullptr;
}

const CandidateLanguage& of_source(const std::string& source) { return choose_backend(all(), source, CompileOptions{}); }

const CandidateLanguage& chosen(const std::string& source, const CompileOptions& options) {
    return choose_backend(all(), source, options);
}

std::vector<std::string> backend_choices() {
    std::vector<std::string> names = {"auto"};
    for (const CandidateLanguage* l : all()) names.push_back(l->name());
    return names;
}

std::string backend_help() {
    std::string names, when;
    for (const CandidateLanguage* l : all()) {
        names += l->name() + ", ";
        if (l == &cuda_language()) continue;
        when += std::string(when.empty() ? "" : "; ") + l->display_name() + " when the file is a " + l->display_name() + " candidate";
    }
    return names + "or auto" + (when.empty() ? "" : " (" + when + ")");
}

std::string kernel_help() {
    std::string text = "Candidate kernel: ";
    for (size_t i = 0; i < all().size(); ++i) text += (i ? ", or " : "") + all()[i]->candidate_help();
    return text;
}

std::string kernel_file_kinds() {
    std::string text = ".cu";
    for (const CandidateLanguage* l : all())
        if (l->keeps_source()) text += ", or a " + l->display_name() + " " + l->cache_source_extension();
    return text;
}

std::string python_help() {
    std::string text;
    for (const CandidateLanguage* l : all())
        if (!l->python_use().empty()) text += (text.empty() ? "" : "; ") + l->display_name() + ": " + l->python_use();
    return text;
}

std::vector<std::string> fence_tags() {
    std::vector<std::string> tags;
    for (const CandidateLanguage* l : all())
        for (const std::string& t : l->fence_tags()) tags.push_back(t);
    return tags;
}

bool marks_candidate(const std::string& block) {
    return std::any_of(all().begin(), all().end(), [&](const CandidateLanguage* l) { return l->marks_candidate(block); });
}

}  // namespace kevo::language

namespace kevo {
std::string candidate_backend(const std::string& source, const CompileOptions& options) {
    return language::chosen(source, options).name();
}

CompileResult compile_candidate(const std::string& source, const CompileOptions& options) {
    return language::chosen(source, options).compile(source, options);
}
}  // namespace kevo
