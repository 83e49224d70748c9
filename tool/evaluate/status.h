// The verdict on a candidate: one list for the validator, the search, the tuner and the queue.
#pragma once
#include <string>

namespace kevo {

enum class Status { ok, compile_error, runtime_error, mismatch, timeout, rejected, no_device };
const char* status_name(Status s);
Status parse_status(const std::string& s);  // throws UsageError on an unknown name

}  // namespace kevo
