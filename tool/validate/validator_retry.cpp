// The validator's second attempts: a job run again after a wall-clock rejection or a full GPU
// memory (Validator::run), and the confirming validation of what enters a cache (Validator::confirm).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "validate/validate.h"
#include "validate/validator_impl.h"

namespace kevo {

namespace {
void pause_s(double s) {
    if (s > 0) std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(s * 1000)));
}
// A retried job's earlier attempt, kept in the result's details.
nlohmann::json attempt_summary(const ValidationResult& r) {
    nlohmann::json j{{"status", status_name(r.status)}, {"log", r.log.substr(0, 2000)}, {"speedup", r.to_json()["speedup"]}};
    if (r.details.is_object() && r.details.contains("interference")) j["interference"] = r.details["interference"];
    return j;
}
}  // namespace

// A job that found the GPU's memory taken by other processes (another search's judge beside its
// checks, a PyTorch baseline, a program outside the tool) waits for its share: it is run again, with
// a new judge, after pauses that double (from twice the retry pause, at most 30 s) this many times
// in all; what it kept waiting for is said once.
constexpr int kMemoryAttempts = 6;

ValidationResult Validator::run_for_memory(const CompileResult& compiled, uint64_t seed_offset, bool fresh_reference) {
    ValidationResult r = run_job(compiled, seed_offset, fresh_reference);
    nlohmann::json earlier = nlohmann::json::array();
    double pause = impl_->retry_pause_s * 2;
    auto memory_full = [](const ValidationResult& v) {
        return v.details.is_object() && v.details.contains("outside_kernel");
    };
    for (int attempt = 1; attempt < kMemoryAttempts && memory_full(r); ++attempt) {
        if (attempt == 1)
            impl_->note("the GPU's memory was taken by other processes when the judge allocated its buffers; "
                        "validating again as it frees (" + std::to_string(kMemoryAttempts - 1) +
                        " more attempts at most)");
        pause_s(pause);
        pause = std::min(30.0, pause * 2);
        earlier.push_back(attempt_summary(r));
        r = run_job(compiled, seed_offset, fresh_reference);
        r.details["earlier_attempts"] = earlier;
    }
    return r;
}

ValidationResult Validator::run(const CompileResult& compiled) {
    ValidationResult r = run_for_memory(compiled, 0, false);
    if (r.details.is_object() && r.details.contains("earlier_attempts")) return r;  // waited for memory: as it ended
    if (!is_wall_check_rejection(r)) return r;
    // The judge timed the set twice already; a whole new job after a pause, with the lock taken
    // again, tells a kernel that hides work (it fails every time) from a GPU that was busy for a
    // while. Only when every attempt saw other processes at work is the failure not the kernel's.
    const bool disturbed = r.details.value("not_attributable", false);
    pause_s(impl_->retry_pause_s);
    ValidationResult again = run_job(compiled, 0, false);
    if (is_wall_check_rejection(again)) {
        const bool both = disturbed && again.details.value("not_attributable", false);
        again.details["not_attributable"] = both;
        if (!both && disturbed != again.details.value("not_attributable", false))
            again.log += "\n(validated twice; only one of the two saw other processes use the GPU, so the extra time is the kernel's)";
    }
    again.details["earlier_attempts"] = nlohmann::json::array({attempt_summary(r)});
    return again;
}

namespace {
// Whether a second validation confirms the first: `why` is empty when it does, else why not, and
// `retry` says whether another attempt may help (a failure outside the kernel, a timeout or a
// wall-clock rejection of a kernel that passed moments ago, or speedups apart: a busy GPU).
struct Confirmation {
    std::string why;
    bool retry = false;
};
Confirmation confirmation_of(const ValidationResult& first, const ValidationResult& second, double agree) {
    if (second.status != Status::ok) {
        const bool retry = !outside_kernel_reason(second).empty() || second.status == Status::timeout || is_wall_check_rejection(second);
        return {"the second validation (fresh sandbox, new seeds) did not pass: " + std::string(status_name(second.status)) + ": " + second.log, retry};
    }
    double a = first.speedup, b = second.speedup;
    if (a > 0 && b > 0 && std::fabs(a - b) / std::max(a, b) <= agree) return {};
    char buf[256];
    std::snprintf(buf, sizeof buf, "the second validation (fresh sandbox, new seeds) measured %.3fx, the first %.3fx: they differ by more than %.0f%%",
                  b, a, 100 * agree);
    return {buf, true};
}
}  // namespace

ValidationResult Validator::confirm(const CompileResult& compiled, const ValidationResult& first, double agree, int attempts) {
    ValidationResult out = first;
    nlohmann::json earlier = nlohmann::json::array();
    for (int attempt = 1;; ++attempt) {
        ValidationResult second = run_for_memory(compiled, 1000003ull * attempt, true);
        Confirmation c = confirmation_of(first, second, agree);
        out.details["confirmation"] = second.to_json();
        if (!earlier.empty()) out.details["confirmation_attempts"] = earlier;
        if (c.why.empty()) {
            out.status = Status::ok;
            out.confirmed = true;
            // The second measurement, taken with a freshly measured reference, is what gets recorded.
            out.speedup = std::sqrt(first.speedup * second.speedup);
            out.suspicious = out.speedup > options_.suspicious_speedup;
            return out;
        }
        if (c.retry && attempt < attempts) {
            earlier.push_back(attempt_summary(second));
            impl_->note("the confirming validation did not confirm the first (" + c.why.substr(0, 200) + "); trying again in " +
                        std::to_string(static_cast<int>(impl_->retry_pause_s * attempt)) + " s");
            pause_s(impl_->retry_pause_s * attempt);
            continue;
        }
        out.confirmed = false;
        out.status = second.status == Status::no_device ? Status::no_device : Status::rejected;
        out.log = c.why;
        if (attempt > 1) out.log += " (" + std::to_string(attempt) + " attempts)";
        // Not the kernel's fault: the caller may say so, and a search does not hold it against it.
        const std::string outside = outside_kernel_reason(second);
        if (!outside.empty()) {
            out.details["outside_kernel"] = outside;
            out.log += "; not the kernel's fault: " + outside;
        }
        return out;
    }
}

}  // namespace kevo
