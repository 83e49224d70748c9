#include "sol/sol.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "common/text.h"
#include "task/expr.h"
#include "task/fitness.h"

namespace kevo::sol {

namespace {

struct PeakRow {
    const char* arch;
    const char* part;
    int sms;
    double fp64, fp32, tf32, fp16, int8;
};
const PeakRow kPeaks[] = {
#define KEVO_PEAK_ROW_(arch, part, sms, f64, f32, tf32, f16, i8) {arch, part, sms, f64, f32, tf32, f16, i8},
    KEVO_PEAK_FLOPS_LIST(KEVO_PEAK_ROW_)
#undef KEVO_PEAK_ROW_
};

// 112 us, 3.5 us, 0.85 us
std::string us(double v) { return format_double(v >= 100 ? "%.0f us" : v >= 10 ? "%.1f us" : "%.2f us", v); }

// 512 MiB, 12.0 KiB, 96 B
std::string bytes_text(double b) {
    if (b >= 1024.0 * 1024 * 1024) return format_double("%.2f GiB", b / (1024.0 * 1024 * 1024));
    if (b >= 1024.0 * 1024) return format_double("%.1f MiB", b / (1024.0 * 1024));
    if (b >= 1024.0) return format_double("%.1f KiB", b / 1024.0);
    return format_double("%.0f B", b);
}

std::string rate_text(double gbs) { return gbs >= 1000 ? format_double("%.2f TB/s", gbs / 1000) : format_double("%.0f GB/s", gbs); }

std::string flops_text(double f) {
    if (f >= 1e12) return format_double("%.2f TFLOP", f / 1e12);
    if (f >= 1e9) return format_double("%.2f GFLOP", f / 1e9);
    if (f >= 1e6) return format_double("%.2f MFLOP", f / 1e6);
    return format_double("%.0f FLOP", f);
}

}  // namespace

double peak_flops(const std::string& arch, int sm_count, DType dtype, bool tf32) {
    std::string a = arch;
    while (!a.empty() && std::isalpha(static_cast<unsigned char>(a.back()))) a.pop_back();  // sm_90a -> sm_90
    const PeakRow* row = nullptr;
    for (const auto& r : kPeaks)
        if (a == r.arch) row = &r;
    if (!row && a.size() > 4) {  // same major: sm_87 -> sm_80
        std::string major = a.substr(0, a.size() - 1);
        for (const auto& r : kPeaks)
            if (!row && std::string(r.arch).substr(0, std::string(r.arch).size() - 1) == major) row = &r;
    }
    if (!row) return 0;
    double tflops = 0;
    switch (dtype) {
        case DType::FLOAT64: tflops = row->fp64; break;
        case DType::FLOAT16:
        case DType::BFLOAT16: tflops = row->fp16; break;
        case DType::INT8:
        case DType::UINT8: tflops = row->int8; break;
        default: tflops = dtype == DType::FLOAT32 && tf32 ? row->tf32 : row->fp32; break;
    }
    double scale = sm_count > 0 ? static_cast<double>(sm_count) / row->sms : 1.0;
    return tflops * 1e12 * scale;
}

bool admits_tf32(const Task& task) {
    return compute_dtype(task) == DType::FLOAT32 && std::min(task.atol, task.rtol) >= kTf32Tolerance;
}

std::string task_precision(const Task& task) {
    const char* name = task.precision.name();
    return name ? name : "";
}

ComputePeak compute_peak(const std::string& arch, int sms, DType dtype, const std::string& precision, bool admits) {
    const double fp16 = peak_flops(arch, sms, DType::FLOAT16);
    if (fp16 <= 0) return {};
    switch (dtype) {
        case DType::FLOAT64: return {peak_flops(arch, sms, dtype), "float64"};
        case DType::FLOAT16:
        case DType::BFLOAT16: return {fp16, std::string(dtype_name(dtype)) + " tensor cores"};
        case DType::INT8:
        case DType::UINT8: return {peak_flops(arch, sms, dtype), "int8 tensor cores"};
        default: break;
    }
    const bool known = precision.empty() || precision == "strict" || precision == "pytorch" || precision == "tf32";
    if (precision == "bf16" || !known)
        return {fp16, known ? "float32 computed in bfloat16 on tensor cores (the bf16 policy)"
                            : "bfloat16 tensor cores (precision policy '" + precision + "' unknown here: the fastest peak)"};
    const double tf32 = peak_flops(arch, sms, DType::FLOAT32, true);
    if (precision == "pytorch" || precision == "tf32" || (precision.empty() && admits)) {
        const std::string why = precision == "pytorch" ? " (the pytorch policy: cuDNN and the user's matmuls may use TF32)"
                                : precision == "tf32" ? " (the tf32 policy)"
                                                      : " (the tolerance admits TF32's rounding)";
        return {tf32, "float32 on TF32 tensor cores" + why};
    }
    // strict fp32: CUDA cores, or fp32 emulated on tensor cores, whichever is faster.
    const double fp32 = peak_flops(arch, sms, DType::FLOAT32), x3 = tf32 / 3, x6 = fp16 / 6;
    if (fp32 >= x3 && fp32 >= x6) return {fp32, "float32 CUDA cores"};
    if (x3 >= x6) return {x3, "float32 emulated on TF32 tensor cores (3xTF32: the TF32 peak / 3)"};
    return {x6, "float32 emulated on bfloat16 tensor cores (bf16x6: the bf16 peak / 6)"};
}

DType compute_dtype(const Task& task) {
    // Lowest precision first: the fastest rate any correct kernel could use.
    for (DType d : {DType::FLOAT16, DType::BFLOAT16, DType::FLOAT32, DType::FLOAT64})
        for (const auto& in : task.inputs)
            if (in.dtype == d) return d;
    return DType::FLOAT32;
}

int64_t min_bytes(const Task& task, size_t set) {
    int64_t total = 0;
    for (const auto* list : {&task.inputs, &task.outputs})
        for (const auto& t : *list) {
            int64_t n = 1;
            for (int64_t v : task.concrete_shape(t, set)) n *= v;
            total += n * dtype_size(t.dtype);
        }
    return total;
}

double flops(const Task& task, size_t set) {
    if (task.flops.empty()) return 0;
    // A task whose dimensions are all literal has no shape sets: its expression names none.
    return parse_expr(task.flops).eval(set < task.shapes.size() ? task.shapes[set] : ShapeSet());
}

std::string shape_label(const Task& task, size_t set) {
    std::string s;
    if (set < task.shapes.size())
        for (const auto& [k, v] : task.shapes[set]) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
    return s.empty() ? "(literal shapes)" : s;
}

Limits limits(const Task& task, double gbs, const std::string& source, const std::string& arch, int sm_count) {
    return limits(task, gbs, source, arch, sm_count, task_precision(task));
}

Limits limits(const Task& task, double gbs, const std::string& source, const std::string& arch, int sm_count,
              const std::string& precision) {
    Limits l;
    l.bandwidth_gbs = gbs > 0 ? gbs : 0;
    l.bandwidth_source = source;
    l.arch = arch;
    l.precision = precision;
    if (!task.flops.empty()) {
        ComputePeak p = compute_peak(arch, sm_count, compute_dtype(task), precision, admits_tf32(task));
        l.peak_flops = p.flops;
        l.peak = p.name;
    }
    l.weights = task.weights();
    for (int s : task.timed_sets()) {
        SetFloor f;
        f.set = s;
        f.label = shape_label(task, static_cast<size_t>(s));
        f.bytes = min_bytes(task, static_cast<size_t>(s));
        f.flops = flops(task, static_cast<size_t>(s));
        if (l.bandwidth_gbs > 0) {
            f.memory_us = static_cast<double>(f.bytes) / (l.bandwidth_gbs * 1e3);  // B / (GB/s) in us
            f.launch_us = kLaunchFloorUs;
        }
        if (l.peak_flops > 0 && f.flops > 0) f.compute_us = f.flops / l.peak_flops * 1e6;
        l.sets.push_back(f);
    }
    return l;
}

std::string binding(const Limits& l, const SetFloor& f) {
    const std::string b = f.bound();
    if (b == "launch") return us(f.launch_us);
    if (b == "compute") return format_double("%.0f TFLOP/s, ", l.peak_flops / 1e12) + l.peak + " of " + l.arch;
    return rate_text(l.bandwidth_gbs) + ", " + l.bandwidth_source;
}

Sol measure(const Limits& limits, const std::vector<std::pair<int, double>>& kernel_us,
            const std::vector<std::pair<int, double>>& empty_call_us) {
    Sol s;
    s.limits = limits;
    std::vector<double> fractions, weights;
    for (size_t i = 0; i < limits.sets.size(); ++i) {
        SetFloor f = limits.sets[i];
        for (const auto& [set, empty] : empty_call_us)
            if (set == f.set && empty > 0 && f.launch_us > 0) f.launch_us = std::min(f.launch_us, empty);
        for (const auto& [set, t] : kernel_us) {
            if (set != f.set || !(t > 0)) continue;
            SetSol ss;
            ss.floor = f;
            ss.kernel_us = t;
            ss.achieved_gbs = static_cast<double>(f.bytes) / (t * 1e3);
            ss.floor_ratio = f.floor_us() > 0 ? f.floor_us() / t : 0;
            ss.floor_beaten = ss.floor_ratio > 1;
            ss.fraction = ss.floor_beaten ? 0 : ss.floor_ratio;
            s.floor_beaten = s.floor_beaten || ss.floor_beaten;
            s.sets.push_back(ss);
            if (ss.fraction > 0) {
                fractions.push_back(ss.fraction);
                weights.push_back(i < limits.weights.size() ? limits.weights[i] : 1.0);
            }
            break;
        }
    }
    s.fraction = s.floor_beaten ? 0 : weighted_geomean(fractions, weights);
    return s;
}

nlohmann::json Sol::to_json() const {
    nlohmann::json sets_j = nlohmann::json::array();
    for (const SetSol& ss : sets)
        sets_j.push_back({{"set", ss.floor.set},
                          {"label", ss.floor.label},
                          {"bytes", ss.floor.bytes},
                          {"flops", ss.floor.flops},
                          {"memory_floor_us", ss.floor.memory_us},
                          {"compute_floor_us", ss.floor.compute_us},
                          {"launch_floor_us", ss.floor.launch_us},
                          {"floor_us", ss.floor.floor_us()},
                          {"bound", ss.floor.bound()},
                          {"binding", binding(limits, ss.floor)},
                          {"kernel_us", ss.kernel_us},
                          {"achieved_gbs", ss.achieved_gbs},
                          {"floor_ratio", ss.floor_ratio},
                          {"floor_beaten", ss.floor_beaten},
                          {"fraction", ss.fraction}});
    nlohmann::json j = {{"bandwidth_gbs", limits.bandwidth_gbs},
                        {"bandwidth_source", limits.bandwidth_source},
                        {"peak_flops", limits.peak_flops},
                        {"peak", limits.peak},
                        {"precision", limits.precision},
                        {"floor_beaten", floor_beaten},
                        {"fraction", fraction},
                        {"sets", sets_j}};
    if (floor_beaten)
        j["note"] = "floor too high: a measured time is below its floor, so that floor is not a bound for this kernel "
                    "(a rate or an algorithm the peak table does not know); no fraction is given";
    return j;
}

std::string limits_text(const Task& task, const Limits& l) {
    std::ostringstream s;
    if (l.bandwidth_gbs > 0)
        s << "Memory floors assume " << rate_text(l.bandwidth_gbs) << " (" << l.bandwidth_source
          << ", read + write counted); each input read once, each output written once.";
    else
        s << "The device bandwidth is unknown here, so no memory floors; each call must move at least the bytes below.";
    if (l.peak_flops > 0) {
        s << " Compute floors assume " << format_double("%.0f", l.peak_flops / 1e12) << " TFLOP/s (" << l.peak << " peak of " << l.arch;
        // Say why float32 gets the rate it gets: the policy, and whether the tolerance admits TF32.
        if (compute_dtype(task) == DType::FLOAT32)
            s << "; precision policy " << (l.precision.empty() ? "not stated" : l.precision) << format_double(", atol %g", task.atol)
              << format_double(" rtol %g", task.rtol);
        s << ") over the fewest FLOPs of the known algorithms (a convolution at Winograd's limit: one multiply-add per "
             "output and input channel).";
    }
    s << "\n";
    for (size_t i = 0; i < l.sets.size(); ++i) {
        const SetFloor& f = l.sets[i];
        s << "- " << f.label << ": " << bytes_text(static_cast<double>(f.bytes));
        if (f.flops > 0) s << ", " << flops_text(f.flops);
        // Only the floors that are known (no memory floor without a bandwidth, no compute floor without FLOPs).
        const char* sep = "; ";
        if (f.memory_us > 0) s << std::exchange(sep, ", ") << "memory floor " << us(f.memory_us);
        if (f.compute_us > 0) s << sep << "compute floor " << us(f.compute_us);
        const std::string bound = f.bound();
        if (f.floor_us() > 0 && bound == "launch") s << " (below the launch floor of " << us(f.launch_us) << ")";
        else if (f.memory_us > 0 && f.compute_us > 0) s << " (" << bound << " binds)";
        if (l.sets.size() > 1 && i < l.weights.size() && l.weights[i] != 1.0) s << " (weight " << l.weights[i] << ")";
        s << "\n";
    }
    s << "Each floor is a lower bound: no correct kernel is faster. The fraction of it a kernel reaches says how much is left to win.";
    return s.str();
}

std::string sol_line(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("sets") || !j["sets"].is_array()) return "";
    std::string out;
    const auto& sets = j["sets"];
    for (const auto& ss : sets) {
        double t = ss.value("kernel_us", 0.0), floor = ss.value("floor_us", 0.0);
        if (!(t > 0)) continue;
        std::string clause = sets.size() > 1 ? ss.value("label", std::string()) + ": " : std::string();
        clause += us(t);
        if (floor > 0) {
            const std::string bound = ss.value("bound", std::string("memory")), why = ss.value("binding", std::string());
            clause += "; the " + bound + " floor" + (why.empty() || bound == "launch" ? "" : " (" + why + ")") + " is " + us(floor);
            clause += ss.value("floor_beaten", false)
                          ? ", yet the kernel ran in " + us(t) + ": the floor is too high, not a bound for this kernel"
                          : ": " + format_double("%.0f%%", 100 * ss.value("fraction", 0.0)) + " of the limit";
        }
        clause += " (" + rate_text(ss.value("achieved_gbs", 0.0)) + " achieved)";
        out += (out.empty() ? "" : "; ") + clause;
    }
    if (sets.size() > 1 && j.value("fraction", 0.0) > 0)
        out += format_double("; overall %.0f%% of the speed of light", 100 * j.value("fraction", 0.0));
    return out;
}

std::pair<double, std::string> bandwidth_of(const DeviceInfo& d, double measured_gbs) {
    const double sheet = d.present ? d.mem_bandwidth_gbs : 0;
    if (measured_gbs > 0 && measured_gbs >= sheet) return {measured_gbs, "measured copy bandwidth"};
    if (sheet > 0)
        return {sheet, measured_gbs > 0 ? "datasheet peak; a copy measured " + rate_text(measured_gbs) : std::string("datasheet peak")};
    return {0, "unknown"};
}

std::string result_summary(const nlohmann::json& v) {
    if (!v.is_object()) return "";
    const nlohmann::json& d = v.contains("details") && v["details"].is_object() ? v["details"] : v;
    // Per-set timings: the result's own "shapes", else its details' (where the runner put them).
    const nlohmann::json& shapes = v.contains("shapes") && v["shapes"].is_array() ? v["shapes"]
                                   : d.contains("shapes") && d["shapes"].is_array() ? d["shapes"]
                                                                                    : nlohmann::json::array();
    std::string out;
    for (const auto& s : shapes) {
        if (!s.is_object() || !(s.value("speedup", 0.0) > 0)) continue;
        std::string label = s.value("label", std::string());
        if (label.empty()) label = "set " + std::to_string(s.value("set", 0));
        out += (out.empty() ? "" : ", ") + label + " " + format_double("%.2fx", s.value("speedup", 0.0));
    }
    if (d.contains("sol") && d["sol"].is_object() && d["sol"].value("fraction", 0.0) > 0)
        out += (out.empty() ? "" : "; ") + format_double("%.0f%% of the speed of light", 100 * d["sol"].value("fraction", 0.0));
    else if (d.contains("sol") && d["sol"].is_object() && d["sol"].value("floor_beaten", false))
        out += (out.empty() ? "" : "; ") + std::string("faster than a speed-of-light floor (the floor is too high)");
    return out;
}

}  // namespace kevo::sol
