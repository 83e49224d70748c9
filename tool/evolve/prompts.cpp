#include "evolve/prompts.h"

#include "common/error.h"
#include "common/fs.h"
#include "language/registry.h"
#include "evolve/search_config.h"

namespace kevo::evolve {

// Generated at configure time from prompts/*.md (see CMakeLists.txt).
extern const std::map<std::string, std::string> kEmbeddedPrompts;

Prompts::Prompts() : templates_(kEmbeddedPrompts) {}

std::vector<std::string> Prompts::names() {
    std::vector<std::string> n = {"system"};
    for (const CandidateLanguage* l : language::all()) n.push_back(l->prompt_template());  // "abi": CUDA's
    for (const char* t : {"seed", "mutate_full", "mutate_diff", "repair"}) n.push_back(t);
    return n;
}

void Prompts::load_overrides(const std::filesystem::path& dir) {
    if (!std::filesystem::is_directory(dir)) throw SettingError({settings::kPrompts}, "{prompts.dir}: " + dir.string() + " is not a directory");
    int found = 0;
    for (const std::string& name : names()) {
        auto file = dir / (name + ".md");
        if (std::filesystem::exists(file)) {
            templates_[name] = read_input_file(file, "a prompt template");
            ++found;
        }
    }
    if (found == 0) {
        std::string files;
        for (const std::string& name : names()) files += (files.empty() ? "" : ", ") + name + ".md";
        throw SettingError({settings::kPrompts}, "{prompts.dir}: " + dir.string() + " holds none of the templates (" + files + ")");
    }
}

const std::string& Prompts::text(const std::string& name) const {
    auto it = templates_.find(name);
    if (it == templates_.end()) throw UsageError("no prompt template named " + name);
    return it->second;
}

std::string Prompts::render(const std::string& name, const std::map<std::string, std::string>& vars) const {
    const std::string& t = text(name);
    std::string out;
    size_t pos = 0;
    while (true) {
        size_t open = t.find("{{", pos);
        if (open == std::string::npos) break;
        size_t close = t.find("}}", open + 2);
        if (close == std::string::npos) break;
        std::string key = t.substr(open + 2, close - open - 2);
        auto it = vars.find(key);
        if (it == vars.end())
            throw UsageError("prompt template " + name + ": unknown placeholder {{" + key + "}}");
        out.append(t, pos, open - pos);
        out += it->second;
        pos = close + 2;
    }
    out.append(t, pos, std::string::npos);
    return out;
}

}  // namespace kevo::evolve
