#include "evaluate/status.h"

#include "common/error.h"

namespace kevo {

namespace {
constexpr const char* kStatusNames[] = {KEVO_VERDICT_LIST(KEVO_ENUM_NAME)};
}  // namespace

const char* status_name(Status s) { return enum_name(kStatusNames, s); }

Status parse_status(const std::string& s) {
    if (auto v = enum_of_name<Status>(kStatusNames, s)) return *v;
    throw UsageError("unknown validation status '" + s + "'");
}

}  // namespace kevo
