// kernelevo-runner: the validator's GPU side (see runner.h for the parts).
//
//   kernelevo-runner --info          device description as JSON on stdout
//   kernelevo-runner --bandwidth     {"copy_gbs": X}: measured device copy bandwidth
//   kernelevo-runner --serve         the judge: Job JSON lines on stdin, JobResult lines on stdout
//   kernelevo-runner --candidate ... the sandboxed candidate process (started by the judge only)
//
// Exit codes: 0 done; 2 bad usage; anything else: the process died.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "judge.h"

using json = nlohmann::json;

namespace kevo_runner {

int serve_main() {
    Judge judge;
    std::string line;
    // The judge's stdout carries results only: everything else it (or the reference) prints goes to
    // stderr. The candidate process never shares either.
    int out_fd = dup(1);
    dup2(2, 1);
    FILE* out = fdopen(out_fd, "w");
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        kevo::JobResult result;
        try {
            kevo::Job job = json::parse(line).get<kevo::Job>();
            result = judge.run(job);
        } catch (const SetupFailure& f) {
            result.status = "setup_error";
            result.log = f.message;
        } catch (const std::exception& e) {
            result.status = "setup_error";
            result.log = std::string("runner: ") + e.what();
        }
        std::string s = json(result).dump(-1, ' ', false, json::error_handler_t::replace);
        std::fprintf(out, "%s\n", s.c_str());
        std::fflush(out);
    }
    return 0;
}

}  // namespace kevo_runner

int main(int argc, char** argv) {
    using namespace kevo_runner;
    std::string mode;
    CandidateArgs ca;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--info" || a == "--bandwidth" || a == "--serve" || a == "--candidate") mode = a;
        else if (a == "--channel") ca.channel = std::atoi(next().c_str());
        else if (a == "--device") ca.device = std::atoi(next().c_str());
        else if (a == "--kernel") ca.kernel = next();
        else if (a == "--workdir") ca.workdir = next();
        else if (a == "--readable") ca.readable = next();
        else if (a == "--writable") ca.writable = next();
        else if (a == "--no-confine") ca.confine = false;
        else if (a == "--load-only") ca.load_only = true;
        else if (a == "--gate-kernel") ca.gate_kernel = true;
        else mode = "?";
    }
    if (mode == "--info") {
        std::cout << device_info().dump() << std::endl;
        return 0;
    }
    if (mode == "--bandwidth") {
        json d = device_info();
        double gbs = d.value("present", false) ? measure_copy_bandwidth(d.value("index", 0)) : 0.0;
        std::cout << json{{"copy_gbs", gbs}}.dump() << std::endl;
        return 0;
    }
    if (mode == "--serve") return serve_main();
    if (mode == "--candidate") return candidate_main(ca);
    std::fprintf(stderr, "usage: kernelevo-runner --info | --bandwidth | --serve\n(an internal helper of kernelevo)\n");
    return 2;
}
