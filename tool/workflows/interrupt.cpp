// run_interruptibly(): a search under a Ctrl-C watcher.
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "workflows/search_parts.h"

namespace kevo::workflows {

namespace {
std::atomic<int> g_sigints{0};
extern "C" void on_sigint(int) { g_sigints.fetch_add(1); }
}  // namespace

evolve::SearchResult run_interruptibly(evolve::Search& search, llm::Provider& provider, Evaluators& ev,
                                       double max_time_s, std::atomic<bool>& stop) {
    // Ctrl-C: the first stops cleanly after what is in flight; the second also aborts LLM requests.
    std::atomic<bool> done{false};
    g_sigints = 0;
    auto old_handler = std::signal(SIGINT, on_sigint);
    std::thread watcher([&] {
        int seen = 0;
        while (!done) {
            int n = g_sigints.load();
            if (n > seen) {
                if (seen == 0) {
                    stop = true;
                    std::cerr << "\nkernelevo: stopping after the work in flight (Ctrl-C again to abort LLM requests)\n";
                } else {
                    provider.cancel();
                }
                seen = n;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    // A wait for a worker honours the stop too (issue 37): given up when no live worker serves the
    // job once the search stops (Ctrl-C, --max-time), and at once on a second Ctrl-C.
    const auto t0 = std::chrono::steady_clock::now();
    ev.stop_when([&stop, t0, max_time_s] {
        if (g_sigints.load() >= 2) return 2;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return stop.load() || (max_time_s > 0 && s > max_time_s + 1) ? 1 : 0;  // (+1: after the search's own deadline)
    });
    evolve::SearchResult result;
    try {
        result = search.run(&stop);
    } catch (...) {
        done = true;
        watcher.join();
        std::signal(SIGINT, old_handler);
        throw;
    }
    done = true;
    watcher.join();
    std::signal(SIGINT, old_handler);
    return result;
}

}  // namespace kevo::workflows
