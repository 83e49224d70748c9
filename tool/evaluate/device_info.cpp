#include "evaluate/device_info.h"

namespace kevo {

std::string DeviceInfo::arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }

nlohmann::json DeviceInfo::to_json() const {
    nlohmann::json j{{"present", present}};
    if (!present) {
        j["error"] = error;
        return j;
    }
    j.update({{"index", index}, {"name", name}, {"cc_major", cc_major}, {"cc_minor", cc_minor}, {"arch", arch()},
              {"sm_count", sm_count}, {"mem_bandwidth_gbs", mem_bandwidth_gbs}, {"total_mem", total_mem},
              {"l2_bytes", l2_bytes}, {"smem_per_block", smem_per_block}, {"smem_per_block_optin", smem_per_block_optin},
              {"smem_per_sm", smem_per_sm}, {"driver_version", driver_version}, {"runtime_version", runtime_version}, {"uuid", uuid}});
    return j;
}

DeviceInfo DeviceInfo::from_json(const nlohmann::json& j) {
    DeviceInfo d;
    d.present = j.value("present", false);
    d.error = j.value("error", std::string());
    d.index = j.value("index", 0);
    d.name = j.value("name", std::string());
    d.cc_major = j.value("cc_major", 0);
    d.cc_minor = j.value("cc_minor", 0);
    d.sm_count = j.value("sm_count", 0);
    d.mem_bandwidth_gbs = j.value("mem_bandwidth_gbs", 0.0);
    d.total_mem = j.value("total_mem", int64_t{0});
    d.l2_bytes = j.value("l2_bytes", int64_t{0});
    d.smem_per_block = j.value("smem_per_block", 0);
    d.smem_per_block_optin = j.value("smem_per_block_optin", 0);
    d.smem_per_sm = j.value("smem_per_sm", 0);
    d.driver_version = j.value("driver_version", 0);
    d.runtime_version = j.value("runtime_version", 0);
    d.uuid = j.value("uuid", std::string());
    return d;
}

}  // namespace kevo
