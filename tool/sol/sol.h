// Speed of light: how fast a correct kernel could possibly be, and how close a measured one is.
//
// The memory floor of a shape set is the minimum bytes any correct kernel must move, each input
// read once and each output written once (sum of numel * dtype size), divided by the device's copy
// bandwidth (read + write counted). The compute floor is the task's "flops" expression evaluated
// for the set, divided by the architecture's peak rate for the task's compute dtype (the one table
// below, dense, scaled by the device's SM count). The floor is the larger of the two, and never
// below the launch floor (kLaunchFloorUs) that bounds tiny shape sets; a kernel's
// fraction of the speed of light is floor / measured time (1.0 = at the limit). Over several timed
// shape sets the fraction is the weighted geometric mean of the sets' fractions, as for speedups.
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
// SMs at boost clock: X(arch, reference part, sms, fp64, fp32, tf32, fp16/bf16, int8). fp32 is the
// CUDA-core rate; tf32 the tensor-core rate a float32 task may use when its tolerance admits TF32's
// rounding (admits_tf32()); fp16/bf16 and int8 are tensor-core rates.
#define KEVO_PEAK_FLOPS_LIST(X)                                      \
    X("sm_70",  "V100 SXM2",   80,  7.8,  15.7,   15.7,  125,   62)  \
    X("sm_75",  "T4",          40,  0.25,  8.1,    8.1,   65,  130)  \
    X("sm_80",  "A100 SXM",   108, 19.5,  19.5,  156,    312,  624)  \
    X("sm_86",  "RTX 3090",    82,  0.56, 35.6,   35.6,   71,  284)  \
    X("sm_89",  "L40S",       142,  1.4,  91.6,  183,    362,  733)  \
    X("sm_90",  "H100 SXM",   132, 67,    67,    495,    989, 1979)  \
    X("sm_100", "B200",       148, 40,    80,   1100,   2250, 4500)  \
    X("sm_120", "RTX 5090",   170,  1.6, 104.8,  104.8,  209,  838)

// Peak FLOP/s for `dtype` on `arch` ("sm_90", "sm_90a"; an unknown minor falls back to the
// major's first entry) with `sm_count` SMs (0: the reference part's). 0 when unknown.
// `tf32`: float32 on TF32 tensor cores (the tf32 column) instead of CUDA cores.
double peak_flops(const std::string& arch, int sm_count, DType dtype, bool tf32 = false);
// TF32 keeps 10 mantissa bits (relative rounding ~5e-4 per operand), so a float32 task whose
// tolerance is this loose or looser (atol and rtol both) admits a kernel that computes in TF32, and
// its fair compute floor is the TF32 tensor-core peak; a tighter one needs fp32 CUDA cores (or an
// error-compensated TF32 scheme, which costs about 3x). KernelBench's fp32 check (1e-2) admits it;
// the default 1e-4 does not.
constexpr double kTf32Tolerance = 1e-3;
bool admits_tf32(const Task& task);
// The dtype whose rate bounds the task's arithmetic: its lowest-precision floating input (float32
// when it has none).
DType compute_dtype(const Task& task);

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
    const char* bound() const {
        return launch_us > memory_us && launch_us > compute_us ? "launch" : compute_us > memory_us ? "compute" : "memory";
    }
};

struct Limits {
    double bandwidth_gbs = 0;      // what the memory floor assumes (0: unknown, no floors)
    std::string bandwidth_source;  // "measured copy bandwidth" | "datasheet peak" | ...
    double peak_flops = 0;         // FLOP/s for the compute floor (0: none)
    std::string peak;              // which peak: "float16 tensor cores", "float32 on TF32 tensor cores", ...
    std::string arch;
    std::vector<SetFloor> sets;    // one per timed shape set, in Task::timed_sets() order
    std::vector<double> weights;   // Task::weights()
};

// The bandwidth the memory floors assume, and where it comes from: the measured copy bandwidth
// (Validator::measured_bandwidth_gbs(), read + write counted) when positive, else the device's
// datasheet peak (from clock and bus width), else 0 (no GPU: no floors).
std::pair<double, std::string> bandwidth_of(const DeviceInfo& device, double measured_gbs = 0);

// The floors of every timed shape set.
Limits limits(const Task& task, double bandwidth_gbs, const std::string& bandwidth_source, const std::string& arch,
              int sm_count = 0);

struct SetSol {
    SetFloor floor;
    double kernel_us = 0;
    double achieved_gbs = 0;  // bytes / kernel time
    double fraction = 0;      // floor / kernel time
};

struct Sol {
    Limits limits;
    std::vector<SetSol> sets;  // the timed sets that have a measured time
    double fraction = 0;       // weighted geometric mean of the sets' fractions (0: unknown)
    nlohmann::json to_json() const;
};

// Figures for measured kernel times: (shape set, kernel us) pairs; sets without a floor or a time
// are left out.
Sol measure(const Limits& limits, const std::vector<std::pair<int, double>>& kernel_us);

// For prompts, before any kernel: one line per timed shape set with bytes, FLOPs and floors.
std::string limits_text(const Task& task, const Limits& limits);
// For feedback and reports: "127 us; the memory floor is 112 us: 88% of the limit (3.9 TB/s achieved)",
// one such clause per timed set ("M=4096 N=4096: ..."), empty when nothing is known.
// Reads the JSON form (Sol::to_json(), as stored in validation details under "sol").
std::string sol_line(const nlohmann::json& sol_json);
inline std::string sol_line(const Sol& sol) { return sol_line(sol.to_json()); }

// For reports and `kernelevo cache status`, from a stored validation (ValidationResult::to_json(), or
// its details): each timed shape set's speedup (details.shapes[]: set, label, speedup) and the
// speed-of-light fraction, e.g. "M=4096 N=4096 2.31x, M=33 N=1001 1.10x; 88% of the speed of light".
// "" when it holds neither.
std::string result_summary(const nlohmann::json& validation);

}  // namespace kevo::sol
