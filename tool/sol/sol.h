// Speed of light: how fast a correct kernel could possibly be, and how close a measured one is.
//
// Every floor here is a LOWER bound on the time of any correct kernel: where a figure is uncertain
// it takes the side that makes the floor smaller (the highest plausible rate, the fewest FLOPs).
// A measured kernel faster than its floor is a bug in the floor, never a kernel above 100%.
//
// The memory floor of a shape set is the minimum bytes any correct kernel must move, each input
// read once and each output written once (sum of numel * dtype size), divided by the highest
// bandwidth known for the device: the larger of the measured copy bandwidth and the datasheet peak
// (read + write counted; bandwidth_of()).
//
// The compute floor is the task's "flops" for the set divided by the fastest rate a kernel can
// compute at while staying correct under the task's precision policy (compute_peak(), from the one
// peak table below, dense, scaled by the device's SM count):
//   - float32 under "strict" (or no policy, with a tolerance tighter than TF32's rounding): the best
//     of the fp32 CUDA-core peak and fp32 emulated on tensor cores, 3xTF32 (the TF32 peak / 3:
//     big*big + big*small + small*big) or bf16x6 (the bf16 peak / 6: a three-way bf16 split, the
//     six products of order <= 2), either accurate to fp32's rounding;
//   - float32 under "pytorch" or "tf32" (or a tolerance that admits TF32): the TF32 tensor-core peak
//     (under "pytorch" cuDNN may use TF32 and so may the user's matmuls);
//   - float32 under "bf16", and float16/bfloat16 inputs under any policy: the fp16/bf16 tensor peak;
//   - float64: the fp64 (tensor) peak; int8: the int8 tensor peak.
// Not counted: fp32 emulated on int8 tensor cores (Ozaki-type splits); no kernel the tool has seen
// uses them, and the measured check below would flag one.
//
// FLOPs are the task's "flops" field, which by contract (task.schema.json) counts the FEWEST
// floating-point operations of one call over the known algorithms, not the direct loop nest:
//   - a matrix product counts 2*M*N*K (Strassen-type algorithms are not used by any GPU library or
//     compiler at these sizes, and their error fails fp32 tolerances);
//   - a convolution (direct, grouped, transposed; any stride or dilation) counts 2 * outputs *
//     input channels per group (for a transposed one 2 * inputs * output channels per group): the
//     direct count divided by its kernel window. This is the limit of Winograd's minimal filtering
//     F(m x m, r x r), whose (m+r-1)^2 multiplies for m^2 outputs tend to one per output and input
//     channel as the tile grows (F(4x4,3x3): 4x fewer than direct, F(6x6,3x3): 5.06x, the limit 9x),
//     and at or below the pointwise products of an FFT convolution: no known algorithm needs fewer.
//   The KernelBench importer counts so (kernelevo/kernelbench/graph_file.py graph_flops); a hand-written task
//   giving a convolution's direct count gets a compute floor too high by up to its window size.
//
// The floor is the larger of the memory and compute floors, and never below the launch floor
// (kLaunchFloorUs) that bounds tiny shape sets; the one that binds is named (SetFloor::bound(),
// "binding" in the JSON, and the text). A kernel's fraction of the speed of light is floor /
// measured time (1.0 = at the limit); over several timed shape sets the fraction is the weighted
// geometric mean of the sets' fractions, as for speedups. Where a measured kernel is FASTER than a
// set's floor, that floor is not a bound for it (too high: a rate or an algorithm the table does not
// know): the set's fraction and the overall one are 0 (unknown, never above 100%), the
// set is marked "floor_beaten" with the raw floor / time in "floor_ratio", and the text says so
// instead of printing a percentage.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluate/device_info.h"
#include "task/task.h"

namespace kevo::sol {

// Peak dense throughput per architecture, TFLOP/s (TOP/s for int8) of a reference part with `sms`
// SMs at boost clock (datasheet, dense, no sparsity): X(arch, reference part, sms, fp64, fp32,
// tf32, fp16/bf16, int8). fp64 is the fastest fp64 path (tensor cores where there are); fp32 the
// CUDA-core rate; tf32, fp16/bf16 and int8 tensor-core rates. sm_90 is the H100 SXM and the H200
// SXM alike (132 SMs, the same compute; the H200 differs in memory: HBM3e, ~4.8 TB/s).
#define KEVO_PEAK_FLOPS_LIST(X)                                      \
    X("sm_70",  "V100 SXM2",   80,  7.8,  15.7,   15.7,  125,   62)  \
    X("sm_75",  "T4",          40,  0.25,  8.1,    8.1,   65,  130)  \
    X("sm_80",  "A100 SXM",   108, 19.5,  19.5,  156,    312,  624)  \
    X("sm_86",  "RTX 3090",    82,  0.56, 35.6,   35.6,   71,  284)  \
    X("sm_89",  "L40S",       142,  1.4,  91.6,  183,    362,  733)  \
    X("sm_90",  "H100/H200 SXM", 132, 67, 67,    495,    989, 1979)  \
    X("sm_100", "B200",       148, 40,    80,   1100,   2250, 4500)  \
    X("sm_120", "RTX 5090",   170,  1.6, 104.8,  104.8,  209,  838)

// Peak FLOP/s for `dtype` on `arch` ("sm_90", "sm_90a"; an unknown minor falls back to the
// major's first entry) with `sm_count` SMs (0: the reference part's). 0 when unknown.
// `tf32`: float32 on TF32 tensor cores (the tf32 column) instead of CUDA cores.
double peak_flops(const std::string& arch, int sm_count, DType dtype, bool tf32 = false);
// TF32 keeps 10 mantissa bits (relative rounding ~5e-4 per operand), so a float32 task whose
// tolerance is this loose or looser (atol and rtol both) admits a kernel that computes in TF32
// whatever its precision policy says. KernelBench's fp32 check (1e-2) admits it; 1e-4 does not.
constexpr double kTf32Tolerance = 1e-3;
bool admits_tf32(const Task& task);
// The dtype whose rate bounds the task's arithmetic: its lowest-precision floating input (float32
// when it has none).
DType compute_dtype(const Task& task);

// The task's precision policy by its task-file name ("pytorch", "strict", "tf32", "bf16";
// task/precision.h), "" where the task states none.
std::string task_precision(const Task& task);

// The fastest rate a correct kernel computes at, and what it is ("float32 emulated on TF32 tensor
// cores (3xTF32: the TF32 peak / 3)"), by the rules at the top of this file. `precision`: a policy
// name, "" for none (then strict, unless `tolerance_admits_tf32`); a name this table does not know
// gets the fastest floating peak (a floor must stay a lower bound). {0, ""} when the arch is unknown.
struct ComputePeak {
    double flops = 0;  // FLOP/s
    std::string name;
};
ComputePeak compute_peak(const std::string& arch, int sm_count, DType dtype, const std::string& precision,
                         bool tolerance_admits_tf32 = false);

// Minimum bytes one call moves in shape set `set`: every input read once, every output written once.
int64_t min_bytes(const Task& task, size_t set);
// The task's "flops" for shape set `set`; 0 when the task gives none.
double flops(const Task& task, size_t set);
// "M=4096 N=4096" ("(literal shapes)" when the set binds nothing).
std::string shape_label(const Task& task, size_t set);

// The shortest time CUDA events report for a kernel launch, about 2 us on current GPUs: what a
// tiny shape set is bound by, whatever its bytes.
constexpr double kLaunchFloorUs = 2.0;

struct SetFloor {
    int set = 0;
    std::string label;  // shape_label()
    int64_t bytes = 0;
    double flops = 0;
    double memory_us = 0;   // bytes / bandwidth
    double compute_us = 0;  // flops / peak (0 without flops or a known peak)
    double launch_us = 0;   // kLaunchFloorUs when there is a memory floor
    double floor_us() const { return std::max(launch_us, std::max(memory_us, compute_us)); }
    // The floor that binds: "launch", "compute" or "memory".
    const char* bound() const {
        return launch_us > memory_us && launch_us > compute_us ? "launch" : compute_us > memory_us ? "compute" : "memory";
    }
};

struct Limits {
    double bandwidth_gbs = 0;      // what the memory floor assumes (0: unknown, no floors)
    std::string bandwidth_source;  // "measured copy bandwidth" | "datasheet peak" | ...
    double peak_flops = 0;         // FLOP/s for the compute floor (0: none)
    std::string peak;              // which peak: compute_peak()'s name
    std::string precision;         // the task's policy (task_precision()), "" for none
    std::string arch;
    std::vector<SetFloor> sets;    // one per timed shape set, in Task::timed_sets() order
    std::vector<double> weights;   // Task::weights()
};

// The bandwidth the memory floors assume, and where it comes from: the highest known for the
// device, the larger of the measured copy bandwidth (Validator::measured_bandwidth_gbs(), read +
// write counted) and the datasheet peak (from clock and bus width): a kernel that mostly reads
// can beat a copy, never the pins. 0 with neither (no GPU: no floors).
std::pair<double, std::string> bandwidth_of(const DeviceInfo& device, double measured_gbs = 0);

// The floors of every timed shape set, under the task's own policy (task_precision()).
Limits limits(const Task& task, double bandwidth_gbs, const std::string& bandwidth_source, const std::string& arch,
              int sm_count = 0);
// The same under the policy named `precision` ("" for none).
Limits limits(const Task& task, double bandwidth_gbs, const std::string& bandwidth_source, const std::string& arch,
              int sm_count, const std::string& precision);

// What binds a set's floor, for texts and the JSON's "binding": "memory (4.80 TB/s, datasheet
// peak)", "compute (165 TFLOP/s, float32 emulated on TF32 tensor cores ...)", "launch (2.00 us)".
std::string binding(const Limits& limits, const SetFloor& floor);

struct SetSol {
    SetFloor floor;
    double kernel_us = 0;
    double achieved_gbs = 0;    // bytes / kernel time
    double floor_ratio = 0;     // floor / kernel time, as measured
    bool floor_beaten = false;  // floor_ratio > 1: the floor is not a bound for this kernel
    double fraction = 0;        // floor_ratio, 0 where the floor is beaten (never above 1)
};

struct Sol {
    Limits limits;
    std::vector<SetSol> sets;   // the timed sets that have a measured time
    bool floor_beaten = false;  // some set's floor is beaten (see SetSol)
    double fraction = 0;        // weighted geometric mean of the sets' fractions (0: unknown, or a floor beaten)
    nlohmann::json to_json() const;
};

// Figures for measured kernel times: (shape set, kernel us) pairs; sets without a floor or a time
// are left out. `empty_call_us`: (shape set, the judge's time for an empty call in that run) where
// known; a set's launch floor is then the lower of kLaunchFloorUs and it (an empty call is the
// fastest any call can be; the constant is an estimate that a fast launch path can beat).
Sol measure(const Limits& limits, const std::vector<std::pair<int, double>>& kernel_us,
            const std::vector<std::pair<int, double>>& empty_call_us = {});

// For prompts, before any kernel: one line per timed shape set with bytes, FLOPs and floors.
std::string limits_text(const Task& task, const Limits& limits);
// For feedback and reports: "127 us; the memory floor (4.80 TB/s, datasheet peak) is 112 us: 88% of
// the limit (3.9 TB/s achieved)", one such clause per timed set ("M=4096 N=4096: ..."), empty when
// nothing is known. A beaten floor gives no percentage: "...; the compute floor (...) is 130 us, yet
// the kernel ran in 100 us: the floor is too high, not a bound for this kernel".
// Reads the JSON form (Sol::to_json(), as stored in validation details under "sol").
std::string sol_line(const nlohmann::json& sol_json);
inline std::string sol_line(const Sol& sol) { return sol_line(sol.to_json()); }

// For reports and `kernelevo cache status`, from a stored validation (ValidationResult::to_json(), or
// its details): each timed shape set's speedup (details.shapes[]: set, label, speedup) and the
// speed-of-light fraction, e.g. "M=4096 N=4096 2.31x, M=33 N=1001 1.10x; 88% of the speed of light".
// "" when it holds neither.
std::string result_summary(const nlohmann::json& validation);

}  // namespace kevo::sol
