// The search's Evaluator over the real kevo::Validator (compile with nvcc, run in kernelevo-runner).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "evolve/evaluator.h"
#include "profile/profile.h"

namespace kevo::evolve {

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

    std::function<std::vector<std::string>(const CompileResult&)> profile_command;
    profile::ProfileOptions profile_options;
    std::function<void(const std::string&)> log;

private:
    Validator& v_;
    std::unique_ptr<profile::Profiler> profiler_;
};

// The Evaluation of a validator result: feedback for the LLM (timings, speed of light, ptxas
// resources; or the error / mismatch).
Evaluation to_evaluation(const ValidationResult& r);

}  // namespace kevo::evolve
