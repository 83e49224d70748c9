// The forked-process tests of the GPU lock and ledger: a child that must end on its own within a
// bound, and is killed (and reported hung) when it does not.
#pragma once
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

// True when `child` exited within `seconds` (its wait status in `status`); false when it was still
// running then: it is killed and reaped.
inline bool ended_within(pid_t child, int seconds, int& status) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() >= end) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}
