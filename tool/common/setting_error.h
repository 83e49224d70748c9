// A bad setting, said in words to whoever calls a library, and named by a stable identifier
// ("structure.islands") so that a command can put its own name for the setting (its flag) in the
// message instead: the libraries below the commands never name a command-line option.
//
//   throw SettingError({kIslands}, "{structure.islands}: must be between 1 and 64, not 0");
//   what():                      "the number of islands: must be between 1 and 64, not 0"
//   render(flag of each setting): "--islands: must be between 1 and 64, not 0"
//
// The text refers to each setting it names as {id}; the first setting is the one at fault.
//
// Any other message that mentions a setting (a note, a hint, a budget's refusal) says it as {id} too
// and goes through named(): in words for a library's caller, by its option (the table's) once
// kernelevo's main has called name_settings_by_option().
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/settings.h"

namespace kevo {

inline bool& settings_by_option() {
    static bool by_option = false;
    return by_option;
}
inline void name_settings_by_option() { settings_by_option() = true; }

// `text` with each {id} of the table of settings named as said above.
inline std::string named(std::string text) {
    for (const Setting* s : kSettingTable) {
        const std::string token = "{" + std::string(s->id) + "}";
        const std::string shown = settings_by_option() && *s->flag ? s->flag : s->words;
        for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + shown.size()))
            text.replace(at, token.size(), shown);
    }
    return text;
}

class SettingError : public UsageError {
public:
    SettingError(std::vector<Setting> settings, std::string text)
        : UsageError(fill(settings, text, [](const Setting& s) { return std::string(s.words); })),
          settings_(std::move(settings)), text_(std::move(text)) {}

    // The identifier of the setting at fault.
    std::string id() const { return settings_.empty() ? std::string() : settings_.front().id; }
    const std::vector<Setting>& settings() const { return settings_; }
    // The message with each setting named by `name` (e.g. a command's flag for it).
    std::string render(const std::function<std::string(const Setting&)>& name) const { return fill(settings_, text_, name); }

private:
    static std::string fill(const std::vector<Setting>& settings, std::string text,
                            const std::function<std::string(const Setting&)>& name) {
        for (const Setting& s : settings) {
            const std::string token = "{" + std::string(s.id) + "}";
            const std::string shown = name(s);
            for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + shown.size()))
                text.replace(at, token.size(), shown);
        }
        return text;
    }

    std::vector<Setting> settings_;
    std::string text_;
};

}  // namespace kevo
