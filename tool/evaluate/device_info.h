// The GPU that candidates are measured on, as the runner reports it (validate/runner/device_info.cu)
// and as it travels through the queue.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kevo {

struct DeviceInfo {
    bool present = false;
    std::string error;          // why no device (driver missing, no GPU, ...)
    int index = 0;
    std::string name;           // "NVIDIA H200"
    int cc_major = 0, cc_minor = 0;
    int sm_count = 0;
    double mem_bandwidth_gbs = 0;  // theoretical peak from clock and bus width
    int64_t total_mem = 0, l2_bytes = 0;
    int smem_per_block = 0, smem_per_block_optin = 0, smem_per_sm = 0;
    int driver_version = 0, runtime_version = 0;
    std::string uuid;           // "GPU-..." : the identity of the device's lock
    std::string arch() const;  // "sm_90"
    nlohmann::json to_json() const;
    static DeviceInfo from_json(const nlohmann::json& j);
};

}  // namespace kevo
