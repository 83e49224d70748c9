// A JobHandler for tests, driven by markers in the candidate's source (like ScriptedEvaluator):
//   COMPILE_ERROR  the compile fails          MISMATCH     the run finds a wrong output
//   SPEEDUP=<x>    correct, x times faster    DELAY_MS=<n> the run (or compile) takes n ms
//   CRASH          the worker process dies (SIGKILL) while running it
//   THROW          the job fails with an error that quotes the source
//   NOT_JUDGED_ONCE  its first run (in this handler) is not judged: the GPU's memory taken by others
//   CONFIRM_SPEEDUP=<x>  what a confirmation job (JobSpec::confirm) measures (default: SPEEDUP);
//                  it passes when within the job's "agree" of the first speedup, as Validator::confirm
// Compile jobs put the source's bytes in the queue as the "object"; run jobs fetch and verify it.
// Every job a handler finishes is appended as "<kind> <job id> <worker>" to log_path when set.
#pragma once
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "common/error.h"
#include "worker/worker.h"

namespace kevo::worker::testing {

inline double marker(const std::string& source, const std::string& name, double fallback) {
    std::smatch m;
    if (std::regex_search(source, m, std::regex(name + "=([0-9.]+)"))) return std::stod(m[1]);
    return fallback;
}

class ScriptedHandler : public JobHandler {
public:
    std::string log_path, name;
    int default_delay_ms = 0;  // for sources without DELAY_MS
    nlohmann::json handle(const Claimed& job, Queue& queue, const std::function<void(const std::string&)>& log) override {
        const std::string& src = job.spec.source;
        if (src.find("CRASH") != std::string::npos) ::kill(::getpid(), SIGKILL);
        if (src.find("THROW") != std::string::npos) throw UsageError("scripted failure of: " + src);
        std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(marker(src, "DELAY_MS", default_delay_ms))));
        nlohmann::json r;
        if (job.spec.kind == "compile") {
            bool ok = src.find("COMPILE_ERROR") == std::string::npos;
            r = {{"kind", "compile"}, {"ok", ok}, {"log", ok ? "" : "error: scripted compile error"}, {"seconds", 0.01}};
            if (ok) r["object_sha256"] = queue.put_object("object of " + src);
        } else {
            auto obj = queue.get_object(job.spec.object_sha256);
            if (!obj || *obj != "object of " + src) throw UsageError("the run job's object is missing or wrong");
            if (src.find("NOT_JUDGED_ONCE") != std::string::npos && not_judged_.insert(src).second) {
                log("run " + job.id.substr(0, 8) + " not judged");
                if (!log_path.empty()) std::ofstream(log_path, std::ios::app) << "run " << job.id << " " << name << "\n";
                return {{"kind", "run"}, {"status", "runtime_error"}, {"arch", job.spec.arch}, {"gpu", "Scripted GPU"},
                        {"log", "the GPU's memory was full when the judge allocated its buffers (scripted)"},
                        {"details", {{"outside_kernel", "the GPU's memory was taken by other processes (scripted)"}}}};
            }
            bool mismatch = src.find("MISMATCH") != std::string::npos;
            double speedup = marker(src, "SPEEDUP", 1.0);
            r = {{"kind", "run"}, {"status", mismatch ? "mismatch" : "ok"}, {"speedup", mismatch ? 0 : speedup},
                 {"kernel_us", 10 / speedup}, {"reference_us", 10}, {"log", mismatch ? "output differs at index 7" : ""},
                 {"arch", job.spec.arch}, {"gpu", "Scripted GPU"}};
            if (!job.spec.confirm.is_null()) r = confirmation(job.spec.confirm, r, marker(src, "CONFIRM_SPEEDUP", speedup));
        }
        const std::string kind = job.spec.confirm.is_null() ? job.spec.kind : "confirm";
        if (!log_path.empty()) {
            std::ofstream(log_path, std::ios::app) << kind << " " << job.id << " " << name << "\n";
        }
        log(kind + " " + job.id.substr(0, 8) + " done");
        return r;
    }
    nlohmann::json device() override {
        DeviceInfo d;
        d.present = true;
        d.name = "Scripted GPU";
        d.cc_major = 9;
        d.cc_minor = 0;
        return d.to_json();
    }

private:
    // A confirmation job's answer: the first result with the second (measuring `second`) in
    // details.confirmation, ok when the two speedups agree.
    static nlohmann::json confirmation(const nlohmann::json& confirm, nlohmann::json r, double second) {
        const nlohmann::json first = confirm.value("first", nlohmann::json::object());
        const double a = first.value("speedup", 0.0), agree = confirm.value("agree", 0.1);
        nlohmann::json again = r;
        again["speedup"] = second;
        r["details"] = {{"confirmation", again}};
        if (r.value("status", "") == "ok" && !(a > 0 && std::abs(a - second) / std::max(a, second) <= agree)) {
            r["status"] = "rejected";
            r["log"] = "the second validation (scripted) measured " + std::to_string(second) + "x, the first " + std::to_string(a) + "x";
        }
        return r;
    }
    std::set<std::string> not_judged_;  // NOT_JUDGED_ONCE sources already answered so
};

}  // namespace kevo::worker::testing
