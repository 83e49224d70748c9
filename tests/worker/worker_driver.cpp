// A worker process for the tests: the real worker loop (tool/worker) over the ScriptedHandler.
//   kevo_worker_driver --redis URL --name NAME [--compile-only] [--lease S] [--max-attempts N]
//                      [--max-jobs N] [--idle-exit S] [--log FILE] [--delay-ms N]
#include <csignal>
#include <cstring>
#include <iostream>

#include "scripted_handler.h"

std::atomic<bool> g_stop{false};
extern "C" void on_term(int) { g_stop = true; }

int main(int argc, char** argv) {
    kevo::worker::WorkerOptions o;
    kevo::worker::testing::ScriptedHandler h;
    o.archs = {"sm_90"};
    o.gpu = 0;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
        if (a == "--redis") o.redis_url = next();
        else if (a == "--name") o.name = h.name = next();
        else if (a == "--compile-only") o.compile_only = true;
        else if (a == "--lease") o.lease_s = std::stod(next());
        else if (a == "--max-attempts") o.max_attempts = std::stoi(next());
        else if (a == "--max-jobs") o.max_jobs = std::stoi(next());
        else if (a == "--max-job-time") o.max_job_s = std::stod(next());
        else if (a == "--idle-exit") o.idle_exit_s = std::stod(next());
        else if (a == "--log") h.log_path = next();
        else if (a == "--delay-ms") h.default_delay_ms = std::stoi(next());
        else { std::cerr << "unknown argument " << a << "\n"; return 2; }
    }
    std::signal(SIGTERM, on_term);
    try {
        kevo::worker::run_worker(o, h, &g_stop);
    } catch (const std::exception& e) {
        std::cerr << "worker driver: " << e.what() << "\n";
        return 2;
    }
    return 0;
}
