// The command line's name for each setting the libraries name in words (common/setting_error.h): a
// SettingError from below the commands is shown with the flag that sets the setting.
#pragma once
#include <string>

#include "common/setting_error.h"

namespace kevo {

// The flag that sets the setting `id` ("structure.islands" -> "--islands"); "" when none does.
std::string flag_of(const std::string& id);

// The error's message with each setting named by its flag (in words where no flag sets it).
std::string message_with_flags(const SettingError& e);

}  // namespace kevo
