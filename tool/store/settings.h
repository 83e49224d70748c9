// The state store's settings, as its errors name them (common/setting_error.h): the command line
// shows each under its flag (commands/setting_flags.cpp), a library caller reads the words.
#pragma once
#include <vector>

#include "common/setting_error.h"

namespace kevo::store::settings {
inline constexpr Setting kState{"store.state", "state file"};
// Every setting above (for the commands' table of flags and its test).
inline const std::vector<Setting>& all() {
    static const std::vector<Setting> v{kState};
    return v;
}
}  // namespace kevo::store::settings
