// The evaluator seam (evaluate/evaluator.h) over the local kevo::Validator: compile with nvcc, run
// in kernelevo-runner. What `kernelevo search` and `kernelevo tune` use without --workers.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "evaluate/evaluator.h"
#include "profile/profile.h"
#include "validate/validate.h"

namespace kevo {

class ValidatorEvaluator : public Evaluator {
public:
    explicit ValidatorEvaluator(Validator& validator) : v_(validator) {}
    DeviceInfo device() override { return v_.device(); }
    std::string arch() override { return v_.arch(); }
    CompileResult compile(const std::string& source) override { return v_.compile(source); }
    // Validates, then adds ptxas resources and speed-of-light figures (details, feedback).
    Evaluation run(const CompileResult& compiled) override;
    double measured_bandwidth_gbs() override { return 0; }  // the lead: v_.measured_bandwidth_gbs()
    // Runs `profile_command(compiled)` (a program that runs the candidate) under ncu; "" while no
    // command is given or ncu is missing (said once through `log`).
    std::string profile(const CompileResult& compiled) override;
    // Validator::confirm: a fresh sandbox, new seeds, the reference measured again.
    Evaluation confirm(const CompileResult& compiled, const Evaluation& first, double agree = 0.1) override;

    std::function<std::vector<std::string>(const CompileResult&)> profile_command;
    profile::ProfileOptions profile_options;
    std::function<void(const std::string&)> log;

private:
    Validator& v_;
    std::unique_ptr<profile::Profiler> profiler_;
};

// The Evaluation of a validator result: feedback for the LLM (timings, speed of light, ptxas
// resources; or the error / mismatch). Also what the remote evaluator makes of a worker's result.
Evaluation to_evaluation(const ValidationResult& r);

}  // namespace kevo
