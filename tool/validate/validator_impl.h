// Validator's state (validate.h), shared by the files that implement it: validate.cpp (a job on the
// judge) and validator_retry.cpp (the retries and the confirmation).
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/fs.h"
#include "common/process.h"
#include "reference/reference.h"
#include "validate/validate.h"

namespace kevo {

struct Validator::Impl {
    std::mutex device_mu, ref_mu, run_mu, bw_mu;
    bool device_queried = false;
    DeviceInfo device;
    bool ref_built = false;
    ReferenceBuild ref;
    fs::path runner;
    std::unique_ptr<Subprocess> judge;
    // The reference's time per shape set, measured once and re-measured periodically.
    std::map<int, double> ref_us;
    int ref_age = 0;
    std::chrono::steady_clock::time_point ref_time;
    double best_speedup = 0;
    double bandwidth = -1;
    double retry_pause_s = 2;
    std::function<void(const std::string&)> note = [](const std::string& s) { std::fprintf(stderr, "kernelevo: %s\n", s.c_str()); };
};

}  // namespace kevo
