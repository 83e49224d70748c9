#include "validate/validator_evaluator.h"

#include <chrono>
#include <cstdio>

#include "validate/annotate.h"
#include "validate/turns.h"

namespace kevo {

Evaluation to_evaluation(const ValidationResult& r) {
    Evaluation e;
    e.status = r.status;
    e.speedup = r.speedup;
    e.details = r.to_json();
    e.gpu_s = r.run_s;
    if (r.ok()) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "correct; speedup %.3fx: kernel %.2f us (spread %.0f%%), reference %.2f us; max abs diff %.3g",
                      r.speedup, r.kernel_us, r.kernel_spread * 100, r.reference_us, r.max_abs_diff);
        e.feedback = buf;
        if (r.suspicious) e.feedback += " (suspiciously fast: make sure all work is real and on the given stream)";
        if (r.details.contains("sol")) e.feedback += "\nSpeed of light: " + sol::sol_line(r.details["sol"]);
        if (r.details.contains("resources")) {
            std::vector<KernelResources> k;
            for (const auto& j : r.details["resources"]) k.push_back(KernelResources::from_json(j));
            e.feedback += "\nptxas: " + resources_summary(k);
        }
    } else if (std::string outside = outside_kernel_reason(r); !outside.empty() && r.status != Status::no_device) {
        // The judge could not tell: the model hears that, never that its kernel misbehaved.
        e.feedback = "not judged: the validator could not measure this kernel reliably (" + outside +
                     "); this says nothing about the kernel, which may be sent again unchanged";
        e.outside_kernel = true;  // the search runs it again itself and does not hold it against its source
    } else {
        e.feedback = std::string(status_name(r.status)) + ": " + r.log;
    }
    return e;
}

Evaluation ValidatorEvaluator::run(const CompileResult& compiled) {
    ValidationResult r = v_.run(compiled);
    auto t0 = std::chrono::steady_clock::now();
    annotate_resources(r, compiled);
    auto [gbs, source] = sol::bandwidth_of(v_.device(), measured_bandwidth_gbs());
    annotate_sol(r, v_.task(), gbs, source, v_.device().sm_count);
    r.details["annotate_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // tune's time split
    return to_evaluation(r);
}

Evaluation ValidatorEvaluator::confirm(const CompileResult& compiled, const Evaluation& first, double agree) {
    ValidationResult r = v_.confirm(compiled, ValidationResult::from_json(first.details), agree);
    Evaluation e;
    e.status = r.status;
    e.speedup = r.speedup;
    if (!r.ok()) e.feedback = r.log;
    e.details = {{"confirmation", r.details.value("confirmation", nlohmann::json())}};
    return e;
}

std::string ValidatorEvaluator::profile(const CompileResult& compiled) {
    if (!profile_command) return "";
    if (!profiler_) profiler_ = std::make_unique<profile::Profiler>(profile_options, log);
    if (!profiler_->available()) return "";
    // ncu replays the kernel on multi-GiB inputs for seconds: with the GPU alone, like a timing, or it
    // lands in another search's timed batches; ncu's start, the inputs' fill share it (validate/turns.h).
    const Task& task = v_.task();
    HelperRun helper;
    helper.reason = "profiling " + task.name;
    // The profiled set's tensors (the first timed set: workflows/evaluators.cpp), twice: ncu saves
    // what a replayed kernel writes.
    const size_t set = static_cast<size_t>(task.timed_sets().front());
    for (const auto* group : {&task.inputs, &task.outputs})
        for (const auto& t : *group) helper.memory_bytes += 2 * static_cast<uint64_t>(task.bytes(t, set));
    helper.note = [&](const std::string& line) {
        if (log) log(line);
    };
    const std::string summary = profiler_->profile(profile_command(compiled), {compiled.library},
        [&](const ProcessOptions& po, const std::filesystem::path& turns) {
            helper.turns_dir = turns;
            return run_with_turns(po, v_.device(), helper);
        });
    if (summary.rfind("profile failed", 0) == 0) {  // for the person running the search, not for the model
        if (log) log(summary);
        return "";
    }
    return summary;
}

}  // namespace kevo
