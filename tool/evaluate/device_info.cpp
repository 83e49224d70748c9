#include "evaluate/device_info.h"

namespace kevo {

std::string DeviceInfo::arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }

// The fields a present device reports, in one list for both directions ("present" and "error"
// are written by hand: an absent device has only those).
#define KEVO_DEVICE_INFO_FIELDS(X)                                                                  \
    X(index) X(name) X(cc_major) X(cc_minor) X(sm_count) X(mem_bandwidth_gbs) X(total_mem) X(l2_bytes) \
    X(smem_per_block) X(smem_per_block_optin) X(smem_per_sm) X(driver_version) X(runtime_version) X(uuid)

nlohmann::json DeviceInfo::to_json() const {
    nlohmann::json j{{"present", present}};
    if (!present) {
        j["error"] = error;
        return j;
    }
#define KEVO_TO_(f) j[#f] = f;
    KEVO_DEVICE_INFO_FIELDS(KEVO_TO_)
#undef KEVO_TO_
    j["arch"] = arch();
    return j;
}

DeviceInfo DeviceInfo::from_json(const nlohmann::json& j) {
    DeviceInfo d;
    d.present = j.value("present", false);
    d.error = j.value("error", std::string());
#define KEVO_FROM_(f) d.f = j.value(#f, decltype(d.f){});
    KEVO_DEVICE_INFO_FIELDS(KEVO_FROM_)
#undef KEVO_FROM_
    return d;
}

}  // namespace kevo
