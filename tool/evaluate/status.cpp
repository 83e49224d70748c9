#include "evaluate/status.h"

#include "common/error.h"

namespace kevo {

namespace {
const char* kStatusNames[] = {"ok", "compile_error", "runtime_error", "mismatch", "timeout", "rejected", "no_device"};
}  // namespace

const char* status_name(Status s) { return kStatusNames[static_cast<int>(s)]; }

Status parse_status(const std::string& s) {
    for (size_t i = 0; i < sizeof kStatusNames / sizeof kStatusNames[0]; ++i)
        if (s == kStatusNames[i]) return static_cast<Status>(i);
    throw UsageError("unknown validation status '" + s + "'");
}

}  // namespace kevo
