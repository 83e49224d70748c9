// The files by which a helper process asks for the GPU alone (validate/turns.h runs it): the one
// definition of their names, for C++ helpers (kernelevo-profile) and the tool; the PyTorch baselines'
// script (baseline/baseline_torch.py, gpu_alone) writes the same names.
//   DIR/turn-N.ready   the helper's: "I am about to measure" (N = 0, 1, ... in order)
//   DIR/turn-N.go      the tool's, once it holds the GPU lock exclusively: measure now
//   DIR/turn-N.done    the helper's: measured, the lock may go back to shared
// Header-only: kernelevo-profile links no library of the tool's.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace kevo {

inline std::string turn_file(const std::string& dir, int n, const char* what) {
    return dir + "/turn-" + std::to_string(n) + "." + what;
}

// Creates the file, never through a link and never over one that exists (a helper's folder is
// writable by what it runs): false when it could not.
inline bool create_turn_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

// The helper's side: take_turn creates turn-N.ready and returns once turn-N.go exists; end_turn
// creates turn-N.done. Both do nothing when `dir` is empty (run without turns).
inline void take_turn(const std::string& dir, int n) {
    if (dir.empty()) return;
    create_turn_file(turn_file(dir, n, "ready"));
    while (::access(turn_file(dir, n, "go").c_str(), F_OK) != 0) ::usleep(2000);
}

inline void end_turn(const std::string& dir, int n) {
    if (!dir.empty()) create_turn_file(turn_file(dir, n, "done"));
}

}  // namespace kevo
