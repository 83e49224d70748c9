// Who else used the GPU while the judge timed a candidate: other processes' SM and memory
// utilization (NVML's per-process samples) since a moment, and the processes holding a context on
// the device. A wall-clock rejection (timing_session.cu) is then told apart from time another
// process took: every GPU use of kernelevo takes the device's lock (validate/gpu_lock.h), but programs outside it
// (a user's PyTorch job, an importer, another tool) do not. NVML is loaded at run time
// (libnvidia-ml.so.1 ships with the driver); without it the answer says so and nothing is claimed.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kevo_runner {

// Microseconds since the Unix epoch: NVML's sample clock.
uint64_t unix_us();

// {"source": "nvml", "since_s": S, "others": [{"pid", "name", "sm_pct", "mem_pct"}, ...] (processes
// other than this one and its descendants that used the device since `since_us`),
// "other_contexts": N (processes other than ours holding a context there, busy or idle)}; or
// {"source": "none", "why": "..."} when NVML cannot say.
nlohmann::json gpu_activity_since(const std::string& pci_bus_id, uint64_t since_us);

// True when `activity` names another process that used the GPU.
bool others_were_active(const nlohmann::json& activity);

// One line for a message: "pid 123 (python3): SM up to 80%, memory up to 40%; ..." or why unknown.
std::string describe_activity(const nlohmann::json& activity);

}  // namespace kevo_runner
