// kernelevo-runner, split by concern:
//   main.cu          command line: --info, --bandwidth, --serve (the judge), --candidate
//   device_info.cu   the device description (JSON) and the measured copy bandwidth
//   judge.cu         the trusted side: inputs, reference, trials and cheat checks, verdicts
//   timing.cu        timed calls, early stopping, the wall-clock cross-check and physical floor
//   timing_session.cu  one timing of a shape set, phase by phase (timing_session.h lists them)
//   candidate.cu     the sandboxed side: loads the candidate library and calls it on request
//   channel.h        the judge <-> candidate protocol; shared_buffer.h  device memory both map
//   device_ops.cuh   checksum, gate and L2-flush kernels; fill and compare from tool/device/
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "validate/job.h"

namespace kevo_runner {

struct CandidateArgs {
    int channel = 3;        // the socket to the judge
    int device = 0;
    std::string kernel;     // the candidate library
    std::string workdir;
    std::string readable;   // ':'-separated paths the candidate may read (Landlock)
    std::string writable;   // ':'-separated paths the candidate may write (Landlock)
    bool confine = true;
    bool load_only = false;
    bool gate_kernel = false;  // diagnostics: gate the correctness call with a spinning kernel
    long cpu_seconds = 0;
};
int candidate_main(const CandidateArgs& args);

nlohmann::json device_info();
// Binds the calling thread (and the threads and processes it starts later) to the CPUs local to
// the GPU at `pci_bus_id` (sysfs local_cpulist, within the CPUs it may use), before its CUDA context
// exists: the context's command buffers and pinned memory then live on the GPU's NUMA node, as GPU
// benchmarks usually arrange, so that where a process started cannot move its launch cost. (Not
// measured: the H200 machine here has one NUMA node, where this changes nothing; the per-process
// launch cost it shows is corrected for in timing_session.cu.) Returns the list bound to; empty where
// nothing was changed (one node, no sysfs entry, KERNELEVO_NO_CPU_PIN set).
std::string pin_to_device_cpus(const std::string& pci_bus_id);
// Device-to-device copy bandwidth in GB/s (bytes read + written), measured with a large copy.
double measure_copy_bandwidth(int device);

// The judge: reads Job lines on stdin, answers JobResult lines on stdout, until EOF. One process
// serves many jobs of one task: the reference is loaded once and kept.
int serve_main();

}  // namespace kevo_runner
