// A helper process that measures on the GPU (kernelevo-profile under ncu, the PyTorch baselines'
// script) but does most of its work before measuring: starting Python or ncu, loading a module,
// drawing inputs, compiling (torch.compile, AOTInductor). It prepares with the device's lock shared
// and has the GPU alone only for its measurements, asking by files in a folder it can write
// (common/turn_files.h). A helper that never asks measures nothing alone: it held the lock shared.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "common/process.h"
#include "evaluate/device_info.h"

namespace kevo {

// Runs `po` holding `device`'s GPU lock shared ("REASON (preparing)"), exclusively ("REASON") from
// each turn-N.ready to its turn-N.done or the process's end. Without a device: run_process(po).
// `note`: the waiting line of a wait for the lock.
ProcessResult run_with_turns(const ProcessOptions& po, const DeviceInfo& device, const std::string& reason,
                             const std::filesystem::path& dir,
                             const std::function<void(const std::string&)>& note = {});

}  // namespace kevo
