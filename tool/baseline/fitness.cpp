// `--fitness-baseline compile|eager|aoti` (baseline.h fitness_over): an evaluator over another whose
// correct candidates' speedup is over the chosen baseline instead of over the reference.
#include <cstdio>

#include "baseline/baseline.h"

namespace kevo::baseline {

namespace {

class FitnessOver : public Evaluator {
public:
    FitnessOver(Evaluator& inner, Result b, std::string kind) : inner_(inner), b_(std::move(b)), kind_(std::move(kind)) {}
    DeviceInfo device() override { return inner_.device(); }
    std::string arch() override { return inner_.arch(); }
    CompileResult compile(const std::string& source) override { return inner_.compile(source); }
    double measured_bandwidth_gbs() override { return inner_.measured_bandwidth_gbs(); }
    std::string profile(const CompileResult& compiled) override { return inner_.profile(compiled); }
    int parallel_runs() override { return inner_.parallel_runs(); }
    int capacity() override { return inner_.capacity(); }

    Evaluation run(const CompileResult& compiled) override {
        Evaluation ev = inner_.run(compiled);
        if (!ev.ok() || !ev.details.is_object()) return ev;
        const double over_reference = ev.speedup;
        ev.speedup = speedup_over(b_, kind_, ValidationResult::from_json(ev.details).shapes);
        // details["speedup"] stays the validator's (over the reference): confirm() and the cache compare
        // validations with it.
        ev.details["speedup_over_reference"] = over_reference;
        ev.details["fitness_baseline"] = {{"baseline", kind_}, {"label", label(kind_)}, {"us", b_.us(kind_)}, {"precision", b_.precision},
                                          {"speedup", ev.speedup}};
        char line[200];
        std::snprintf(line, sizeof line, "fitness: speedup %.3fx over %s (%.2f us, precision %s); ", ev.speedup, label(kind_).c_str(),
                      b_.us(kind_), b_.precision.c_str());
        ev.feedback = line + ev.feedback;
        return ev;
    }

private:
    Evaluator& inner_;
    Result b_;
    std::string kind_;
};

}  // namespace

std::unique_ptr<Evaluator> fitness_over(Evaluator& inner, const Result& b, const std::string& kind) {
    return std::make_unique<FitnessOver>(inner, b, kind);
}

}  // namespace kevo::baseline
