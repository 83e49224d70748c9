// The judge's side of the device's GPU lock (validate/gpu_lock.h, issue 48): its correctness runs
// hold the lock shared (beside other judges' checks, never beside a measurement), its timed calls
// exclusively; the candidate process waits stopped while its judge waits for the GPU, so a process
// between its checks and its timing cannot put work beside another judge's measurement. Each job's
// phases go to $KEVO_PHASE_LOG when set (benchmarks/studies/gpu_busy.py reads them).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "common/settings.h"
#include "gpu_activity.h"
#include "judge.h"

namespace kevo_runner {

std::unique_ptr<kevo::GpuLock> Judge::take_gpu(kevo::GpuUse use, JobResult& r) {
    const bool exclusive = use == kevo::GpuUse::exclusive;
    const std::string key = kevo::GpuLock::device_key(device_json_.value("uuid", std::string()), device_);
    const std::string name = device_json_.value("name", std::string("?"));
    const std::string label = "GPU " + std::to_string(device_) + " (" + name + ")";
    const std::string reason = (job_->label.empty() ? std::string("a validation") : job_->label) +
                               (exclusive ? " (timing)" : " (correctness checks)");
    std::unique_ptr<kevo::GpuLock> held;
    try {
        held = std::make_unique<kevo::GpuLock>(key, label, nullptr, use, reason);
    } catch (const std::exception& e) {
        throw SetupFailure{e.what()};
    }
    if (!held->wait_note().empty())
        r.lock_waits.push_back(held->wait_note() + " (waited " + fmt(held->waited_s()) + " s)");
    return held;
}

// SIGSTOP / SIGCONT to the candidate's session (candidate_process.cu starts it with setsid).
void Judge::pause_candidate(bool stop) {
    if (pid_ <= 0) return;
    kill(-pid_, stop ? SIGSTOP : SIGCONT);
}

void Judge::phase_done(const char* what, const char* lock, std::chrono::steady_clock::time_point from) {
    const double to = static_cast<double>(unix_us()) / 1e6;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
    phases_.push_back({{"phase", what}, {"lock", lock}, {"t0", to - s}, {"t1", to}});
}

void Judge::write_phase_log(const JobResult& r) {
    const char* path = kevo::env(kevo::EnvVar::kPhaseLog);
    if (!path || !*path || phases_.empty()) return;
    json line{{"pid", static_cast<long>(getpid())},
              {"label", job_ ? job_->label : ""},
              {"status", r.status},
              {"phases", phases_},
              {"profile_s", r.profile_s}};
    const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    (void)!write(fd, text.data(), text.size());  // one write: lines of several judges never interleave
    close(fd);
}

}  // namespace kevo_runner
