// The verdict on a candidate: one list for the validator, the search, the tuner and the queue.
#pragma once
#include <string>

#include "common/named_enum.h"

namespace kevo {

enum class Status { KEVO_VERDICT_LIST(KEVO_ENUM_VALUE) };
const char* status_name(Status s);
Status parse_status(const std::string& s);  // throws UsageError on an unknown name

}  // namespace kevo
