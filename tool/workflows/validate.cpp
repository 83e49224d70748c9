// validate(): `kernelevo validate` from its request to its outcome (workflows/validate.h).
#include "workflows/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "common/arch.h"
#include "common/fs.h"
#include "common/log.h"
#include "compile/arch_support.h"
#include "language/registry.h"
#include "sol/sol.h"
#include "validate/annotate.h"
#include "workflows/search_parts.h"

namespace kevo::workflows {
namespace {

// Compiles the candidate, saying so on stderr with `progress`.
CompileResult compile_noted(Validator& v, const ValidateRequest& req, const std::string& source) {
    if (req.progress) {
        // A language whose candidate is not the .cu compiles it into one ahead of time.
        const CandidateLanguage& l = language::chosen(source, req.options.compile);
        const bool ahead = !l.cache_source_extension().empty();
        std::cerr << "kernelevo: compiling " << req.kernel << " for " << v.arch()
                  << (ahead ? " (" + l.display_name() + ", ahead of time)" : "") << " ...\n";
    }
    CompileResult c = v.compile(source);
    if (req.progress && c.ok) {
        char b[64];
        std::snprintf(b, sizeof b, "%.2f s", c.seconds);
        std::cerr << "kernelevo: compiled in " << b << (c.cached ? " (cached)" : "") << "; running ...\n";
        if (verbose() && !c.log.empty()) std::cerr << "kernelevo: compiler output:\n" << c.log << "\n";
    }
    return c;
}

// The same compiled kernel validated `req.repeat` times by one validator, each in a fresh candidate
// process; stops at a run that finds no GPU.
void validate_repeatedly(Validator& v, const CompileResult& c, const ValidateRequest& req, ValidateOutcome& o) {
    o.repeated = true;
    for (int i = 0; i < req.repeat; ++i) {
        ValidationResult r = v.run(c);
        if (req.each_run) req.each_run(i + 1, r);
        if (r.status == Status::no_device) {
            o.result = std::move(r);
            o.rc = kExitUsage;
            return;
        }
        if (r.status == Status::ok && r.speedup > 0) o.speedups.push_back(r.speedup);
        o.runs.push_back(std::move(r));
    }
    std::vector<double> sorted = o.speedups;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    o.median_speedup = n == 0 ? 0 : n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    for (double s : o.speedups)
        o.max_deviation = std::max(o.max_deviation, std::abs(s - o.median_speedup) / o.median_speedup);
    o.rc = exit_code_of(o.runs.size() == o.speedups.size());
}

// The PyTorch baselines beside a correct, timed kernel, timed as the judge timed the reference.
baseline::Result validation_baselines(const ValidateRequest& req, const Task& task, const DeviceInfo& device) {
    if (!req.baselines) return no_torch_baselines(task);
    const ValidateOptions& vo = req.options;
    baseline::Options o;
    o.python = vo.compile.python;
    o.l2_flush = vo.l2_flush;
    o.trials = vo.timing_trials;
    o.warmup = vo.warmup;
    if (vo.seed) o.seed = vo.seed;
    if (req.aoti) o.which = baseline::asked({"aoti"});
    return time_torch_baselines(task, o, device, req.progress);
}

}  // namespace

ValidateOutcome validate(const ValidateRequest& req) {
    ValidateOutcome o;
    o.task = load_task(req.task);
    const std::string source = read_kernel_file(req.kernel);  // a directory, a FIFO, a huge file refused: why
    ValidateOptions opt = req.options;
    if (!opt.arch.empty()) opt.arch = normalize_arch(opt.arch);
    opt.compile.task = std::make_shared<const Task>(o.task);
    auto v = std::make_unique<Validator>(o.task, opt);  // ended before the baselines run (below)
    // An architecture the toolkit cannot compile is a setup error, not a failed candidate.
    require_toolkit_arch(v->arch(), opt.compile);
    const CompileResult c = compile_noted(*v, req, source);
    if (req.repeat > 1 && c.ok) {  // a compile error is reported once, below
        validate_repeatedly(*v, c, req, o);
        return o;
    }
    o.result = v->run(c);
    ValidationResult& r = o.result;
    annotate_resources(r, c);
    auto [gbs, source_of_gbs] = sol::bandwidth_of(v->device(), r.ok() ? v->measured_bandwidth_gbs() : 0.0);
    annotate_sol(r, o.task, gbs, source_of_gbs, v->device().sm_count);
    if (r.ok() && r.kernel_us > 0) {
        // The judge keeps GPU memory (its timing copies) while it lives: it ends before PyTorch runs.
        const DeviceInfo device = v->device();
        v.reset();
        o.baselines = validation_baselines(req, o.task, device);
    }
    o.rc = exit_code_of(r.status == Status::ok, r.status == Status::no_device);
    return o;
}

}  // namespace kevo::workflows
