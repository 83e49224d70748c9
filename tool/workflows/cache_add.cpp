// cache_add(): a hand-written or external kernel into the cache, validated twice on the local GPU
// (or, unvalidated, stored marked as such). Moved from tool/commands/cache_command.cpp.
#include <memory>

#include "common/arch.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "compile/arch_support.h"
#include "compile/compile.h"
#include "sol/sol.h"
#include "language/registry.h"
#include "validate/annotate.h"
#include "validate/validate.h"
#include "workflows/cache.h"

namespace kevo::workflows {
namespace {

void say(const CacheAddRequest& a, CacheAddRequest::Step step, const CacheAddition& o) {
    if (a.progress) a.progress(step, o.function, o.arch);
}

// Validated on the local GPU, then confirmed in a fresh sandbox with new seeds; the validation
// (with the speed of light and ptxas's figures) or, when it failed, `o` says why.
bool validate_twice(const CacheAddRequest& a, const Task& task, const std::string& source, const CompileOptions& copt,
                    CompileResult& compiled, nlohmann::json& validation, CacheAddition& o) {
    ValidateOptions vopt;
    vopt.arch = o.arch;
    vopt.compile = copt;
    Validator v(task, vopt);
    say(a, CacheAddRequest::Step::validating, o);
    compiled = v.compile(source);
    ValidationResult r = v.run(compiled);
    if (r.ok()) {
        // What enters a cache is validated twice: again in a fresh sandbox with new seeds and a
        // re-measured reference, and the two speedups must agree.
        say(a, CacheAddRequest::Step::confirming, o);
        r = v.confirm(compiled, r);
    }
    if (r.ok()) {  // the speed of light and ptxas's figures go into the metadata too
        annotate_resources(r, compiled);
        auto [gbs, gbs_source] = sol::bandwidth_of(v.device(), v.measured_bandwidth_gbs());
        annotate_sol(r, task, gbs, gbs_source, v.device().sm_count);
    }
    if (!r.ok()) {
        o.not_stored = CacheAddition::NotStored::validation;
        o.status = r.status;
        o.log = r.log;
        o.rc = exit_code_of(false, r.status == Status::no_device);
        return false;
    }
    validation = r.to_json();
    return true;
}

}  // namespace

CacheAddition cache_add(const CacheAddRequest& a) {
    CacheAddition o;
    Task task = load_task(a.task);
    o.function = task.name;
    o.arch = normalize_arch(a.arch);
    std::string source = read_kernel_file(a.kernel);  // a directory, a FIFO or a huge file refused with the reason
    CompileOptions toolkit;
    // A candidate whose language keeps its own source in the cache (a .py) is stored as the
    // .cu generated from it: it is compiled even unvalidated. Nothing else is compiled unvalidated.
    const bool generated = language::of_source(source).keeps_source();
    if (!a.unvalidated || generated) require_toolkit_arch(o.arch, toolkit);
    CompileOptions copt;
    copt.arch = o.arch;
    copt.python = a.python;
    copt.task = std::make_shared<const Task>(task);
    CompileResult compiled;
    nlohmann::json validation;
    if (a.unvalidated) {
        if (generated) {  // not validated, but it must compile: what is stored is the generated .cu
            say(a, CacheAddRequest::Step::compiling, o);
            compiled = compile_candidate(source, copt);
            if (!compiled.ok) {
                o.not_stored = CacheAddition::NotStored::compile_error;
                o.status = Status::compile_error;
                o.log = compiled.log;
                o.rc = kExitFailed;
                return o;
            }
        }
        validation = {{"status", "unvalidated"}, {"note", "stored with kernelevo cache add --unvalidated: not checked against the reference"}};
        say(a, CacheAddRequest::Step::storing_unvalidated, o);
    } else if (!validate_twice(a, task, source, copt, compiled, validation, o)) {
        return o;
    }
    o.meta = cache::entry_from_validation(task, o.arch, validation);
    o.meta.origin = a.origin;
    o.meta.model = a.model;
    o.meta.note = a.note;
    cache::store_candidate(a.cache_dir, source, compiled, o.meta);
    o.source = cache::source_path(a.cache_dir, o.meta.function, o.arch);
    return o;
}

}  // namespace kevo::workflows
