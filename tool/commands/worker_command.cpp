// `kernelevo worker --redis URL [--gpu N | --compile-only --arch sm_90 ...]`
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "commands/commands.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "compile/compile.h"
#include "worker/worker.h"

namespace kevo {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop = true; }

}  // namespace

void register_worker_command(CLI::App& app, int& rc) {
    auto o = std::make_shared<worker::WorkerOptions>();
    CLI::App* cmd = app.add_subcommand(
        "worker",
        "Validate candidates for searches started with --workers. Takes jobs from a Redis queue (one worker per GPU; "
        "--compile-only on hosts without one).");
    cli::set_examples(*cmd, {
        {"One worker per GPU on a GPU host", "kernelevo worker --redis redis://queue-host:6379/0 --gpu 0"},
        {"Compile for sm_90 on a host without a GPU",
         "kernelevo worker --redis redis://queue-host:6379/0 --compile-only --arch sm_90"},
        {"The search that uses them", "kernelevo search --task gelu/task.json --out kernels --model openai/gpt-5-mini "
                                      "--workers redis://queue-host:6379/0"},
    });
    cmd->add_option("--redis", o->redis_url,
                    "The queue: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME], the same URL as the "
                    "searches' --workers (password also from $KERNELEVO_REDIS_PASSWORD)")
        ->required();
    auto* gpu = cmd->add_option("--gpu", o->gpu, "The GPU (device index) this worker checks and times on (default 0)");
    auto* co = cmd->add_flag("--compile-only", o->compile_only,
                             "Only compile (nvcc, no GPU needed): compiled objects go to the queue by content hash");
    gpu->excludes(co);
    cmd->add_option("--arch", o->archs,
                    "Architectures to take jobs for (repeatable; required with --compile-only; a GPU worker "
                    "defaults to its GPU's)");
    cmd->add_option("--name", o->name, "Worker name shown on the server page (default HOST-gpuN-PID / HOST-cpu-PID)");
    cmd->add_option("--lease", o->lease_s,
                    "Seconds without a heartbeat after which another worker takes over this worker's job")
        ->capture_default_str()
        ->check(cli::Seconds);
    cmd->add_option("--max-attempts", o->max_attempts,
                    "Starts of one job (its workers died or stalled) before it goes to the dead-letter stream")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    cmd->add_option("--max-job-time", o->max_job_s,
                    "Seconds after which a job still running here stops being renewed, so that another worker "
                    "takes it over (a worker stuck in a job counts as stalled)")
        ->capture_default_str()
        ->check(cli::Seconds);
    cmd->add_option("--max-jobs", o->max_jobs, "Exit after this many jobs (0: run until Ctrl-C)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--idle-exit", o->idle_exit_s, "Exit after this many seconds without a job (0: never)")
        ->capture_default_str()
        ->check(cli::SecondsOrZero);
    cmd->callback([o, &rc] {
        worker::WorkerOptions opt = *o;
        for (auto& a : opt.archs) a = normalize_arch(a);
        if (opt.compile_only) {
            if (opt.archs.empty()) throw UsageError("--compile-only needs --arch (e.g. --arch sm_90)");
        } else if (opt.gpu < 0) {
            opt.gpu = 0;
        }
        worker::ValidatorHandler handler(opt);
        if (!opt.compile_only) {
            nlohmann::json dev = handler.device();
            std::string arch = handler.device_arch();
            if (arch.empty())
                throw UsageError("no GPU " + std::to_string(opt.gpu) + " here (" + dev.value("error", std::string("?")) +
                                 "); on a host without one, run `kernelevo worker --compile-only --arch sm_XX`");
            if (opt.archs.empty()) opt.archs.push_back(arch);
            for (const auto& a : opt.archs)
                if (a != arch && a != arch + "a")
                    throw UsageError("--arch " + a + ": GPU " + std::to_string(opt.gpu) + " is " +
                                     dev.value("name", std::string()) + " (" + arch + ")");
        }
        g_stop = false;
        auto old_int = std::signal(SIGINT, on_stop_signal);
        auto old_term = std::signal(SIGTERM, on_stop_signal);
        worker::WorkerSummary s = worker::run_worker(opt, handler, &g_stop);
        std::signal(SIGINT, old_int);
        std::signal(SIGTERM, old_term);
        std::cerr << "kernelevo worker: " << s.jobs << " job(s), " << s.reclaimed << " taken over, " << s.duplicates
                  << " finished twice (counted once), " << s.dead << " dead-lettered\n";
        rc = kExitSuccess;
    });
}

}  // namespace kevo
