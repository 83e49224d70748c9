// A helper process that measures on the GPU (kernelevo-profile under ncu, the PyTorch baselines'
// script) but does most of its work before measuring: starting Python or ncu, loading a module,
// drawing inputs, compiling (torch.compile, AOTInductor). It prepares with the device's lock shared
// and has the GPU alone only for its measurements, asking by files in a folder it can write
// (common/turn_files.h). A helper that never asks measures nothing alone: it held the lock shared.
// An import holds nothing until it asks, then the lock shared to its end: its Python start does not.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "common/process.h"
#include "evaluate/device_info.h"
#include "validate/gpu_lock.h"

namespace kevo {

// What a helper asks of the device besides its turns.
struct HelperRun {
    std::string reason;                  // the lock holder's line: "REASON (preparing)", "REASON"
    std::filesystem::path turns_dir;     // where it asks for its turns
    // The GPU memory it will use at most: reserved in the device's memory ledger (gpu_ledger.h) before
    // it starts and held until it ends, so that it waits for its share beside the judges instead of
    // running out. 0: none reserved. Where it cannot be had within memory_wait_s, or is above the
    // ledger's budget, the helper runs unreserved (said in a note).
    uint64_t memory_bytes = 0;
    double memory_wait_s = 600;
    std::function<void(const std::string&)> note;  // waiting lines: one per wait
    // Between turns: the lock held shared ("REASON (preparing)"), or not at all (hold_between false:
    // an import, whose CPU phases need no GPU). In a turn: `turn_use` ("REASON").
    bool hold_between = true;
    GpuUse turn_use = GpuUse::exclusive;
    // The first turn is kept until the helper ends, whatever turn-N.done says: for a helper whose
    // process runs untrusted code (an import: the problem's own), which could otherwise say it is done
    // and go on using the GPU beside a measurement.
    bool first_turn_to_end = false;
};

// Serves a helper's turns (turn-N.ready -> the lock as `turn_use`, turn-N.go; turn-N.done -> as between)
// from its construction to end(), with its memory share held. Without a device: nothing.
class GpuTurns {
public:
    GpuTurns(const DeviceInfo& device, const HelperRun& run);
    ~GpuTurns();
    GpuTurns(const GpuTurns&) = delete;
    GpuTurns& operator=(const GpuTurns&) = delete;
    // Stops serving and releases the lock and the share; rethrows where the lock directory became
    // unusable meanwhile.
    void end();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Runs `po` with its turns served (GpuTurns): by default the GPU lock shared ("REASON (preparing)"),
// exclusively ("REASON") from each turn-N.ready to its turn-N.done or the process's end. Without a
// device: run_process(po).
ProcessResult run_with_turns(const ProcessOptions& po, const DeviceInfo& device, const HelperRun& run);

}  // namespace kevo
