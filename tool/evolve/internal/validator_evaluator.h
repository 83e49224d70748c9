// The search's Evaluator over the real kevo::Validator (compile with nvcc, run in kernelevo-runner).
#pragma once
#include "evolve/evaluator.h"

namespace kevo::evolve {

class ValidatorEvaluator : public Evaluator {
public:
    explicit ValidatorEvaluator(Validator& validator) : v_(validator) {}
    DeviceInfo device() override { return v_.device(); }
    std::string arch() override { return v_.arch(); }
    CompileResult compile(const std::string& source) override { return v_.compile(source); }
    Evaluation run(const CompileResult& compiled) override;

private:
    Validator& v_;
};

// The Evaluation of a validator result: feedback for the LLM (timings, or the error / mismatch).
Evaluation to_evaluation(const ValidationResult& r);

}  // namespace kevo::evolve
