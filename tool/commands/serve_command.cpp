// `kernelevo serve [--listen 127.0.0.1:8377] [--redis URL] [--state LOC ...]`
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "commands/commands.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "common/exit_code.h"
#include "serve/serve.h"

namespace kevo {
namespace {
std::atomic<bool> g_serve_stop{false};
extern "C" void on_serve_signal(int) { g_serve_stop = true; }
}  // namespace

void register_serve_command(CLI::App& app, int& rc) {
    auto o = std::make_shared<serve::ServeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "serve", "Serve the web page of runs, the queue and workers. It shows runs (progress, best speedup over time, "
                 "tokens, cost), the queue, workers (state, current job, recent log lines) and every candidate (source, "
                 "diff, validation log).");
    cli::set_examples(*cmd, {
        {"The runs in this host's cache, on http://127.0.0.1:8377/", "kernelevo serve"},
        {"A Redis queue, its workers and runs, for other hosts (with a token)",
         "KERNELEVO_SERVE_TOKEN=secret kernelevo serve --listen 0.0.0.0:8377 --redis redis://queue-host:6379/0"},
        {"One run's state file", "kernelevo serve --state run.db --no-cache-runs"},
    });
    cmd->add_option("--listen", o->listen,
                    "HOST:PORT to listen on; an address other than loopback needs $KERNELEVO_SERVE_TOKEN (or --token)")
        ->capture_default_str();
    cmd->add_option("--token", o->token,
                    "Token every request must carry (?token=... or Authorization: Bearer ...); prefer "
                    "$KERNELEVO_SERVE_TOKEN, which other users cannot see in the process list");
    cmd->add_option("--redis", o->queue_url,
                    "The workers' queue (the searches' --workers URL): shows the queue, the workers and the runs "
                    "that validate through it");
    cmd->add_option("--state", o->states, "A run's state (SQLite file or redis:// URL) to show; repeatable")->check(cli::NonEmpty);
    cmd->add_flag("!--no-cache-runs", o->scan_cache, "Do not list the SQLite runs under this host's kernelevo cache");
    cmd->callback([o, &rc] {
        serve::Server server(*o);
        int port = server.start();
        std::string host = o->listen.substr(0, o->listen.rfind(':'));
        std::cerr << "kernelevo serve: http://" << host << ":" << port << "/" << (o->token.empty() ? "" : "?token=***")
                  << " (Ctrl-C stops)\n";
        g_serve_stop = false;
        auto old_int = std::signal(SIGINT, on_serve_signal);
        auto old_term = std::signal(SIGTERM, on_serve_signal);
        while (!g_serve_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        server.stop();
        std::signal(SIGINT, old_int);
        std::signal(SIGTERM, old_term);
        rc = kExitSuccess;
    });
}

}  // namespace kevo
