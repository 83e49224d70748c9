// The LLM client's settings, as its errors name them (common/setting_error.h): the command line
// shows each under its flag (commands/setting_flags.cpp), a library caller reads the words.
#pragma once
#include <vector>

#include "common/setting_error.h"

namespace kevo::llm::settings {
inline constexpr Setting kUrl{"llm.url", "the LLM's URL"};
inline constexpr Setting kKeyEnv{"llm.key_env", "the API key's variable"};
inline constexpr Setting kModel{"llm.model", "the model"};
inline constexpr Setting kPrice{"llm.price", "the price per token"};
inline constexpr Setting kReplay{"llm.replay", "to replay"};
inline constexpr Setting kParallel{"llm.parallel", "the number of requests in flight"};
// Every setting above (for the commands' table of flags and its test).
inline const std::vector<Setting>& all() {
    static const std::vector<Setting> v{kUrl, kKeyEnv, kModel, kPrice, kReplay, kParallel};
    return v;
}
}  // namespace kevo::llm::settings
