// Small filesystem helpers: whole-file I/O, atomic writes, private temp dirs, the tool's cache root.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace kevo {
namespace fs = std::filesystem;

// Reads a whole file; throws UsageError naming the path when it cannot (a directory included).
std::string read_file(const fs::path& path);

// The most a file the user names (a task, a kernel) may hold: such a file is read whole into memory.
inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{16} << 20;
// Reads a file the user named, `what` saying what it should be ("a task file"). Refused without
// reading it, with a UsageError naming the path and the reason: a directory ("X is a directory,
// not WHAT"), anything else that is not a regular file (a FIFO or a device could block or never
// end), a file over max_bytes ("X is too large for WHAT (N MB; at most M MB)"), a missing one.
std::string read_input_file(const fs::path& path, const std::string& what, std::uintmax_t max_bytes = kMaxInputFileBytes);
// A kernel the user named with `option` (--kernel, --initial): read_input_file() with the option
// in front of the reason ("--kernel: X is a directory, not a kernel file (.cu, or a Triton .py)");
// an empty or blank file and a binary one (a NUL byte) are refused the same way.
std::string read_kernel_file(const fs::path& path, const std::string& option = "--kernel");
// Writes through a temp file in the same directory and renames it into place, so readers never
// see a partial file. Creates parent directories. A failure (a full disk: "cannot write PATH: No
// space left on device") is a UsageError naming the path and the reason, and removes the temp file.
void write_file_atomic(const fs::path& path, const std::string& data);
// write_file_atomic() that never replaces: false, writing nothing, when `path` exists (a file, a
// link, anything) at the moment the complete file would be put in place, not only when asked before.
bool write_file_new(const fs::path& path, const std::string& data);

// Copies `file` into place at `dest` atomically (copy beside it, then rename), creating parent
// directories: concurrent writers and readers of a cache never see a partial file. Throws
// UsageError naming `what` on failure.
void install_file_atomic(const fs::path& file, const fs::path& dest, const std::string& what);
// Removes every occurrence of "dir/" from text (private temp paths mean nothing to a reader).
std::string strip_dir(std::string text, const fs::path& dir);

// A private (0700) directory removed on destruction unless keep() was called.
class TempDir {
public:
    explicit TempDir(const std::string& prefix = "kernelevo");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const fs::path& path() const { return path_; }
    void keep() { keep_ = true; }

private:
    fs::path path_;
    bool keep_ = false;
};

// Root of the tool's content-addressed build caches: $KERNELEVO_CACHE_HOME, else
// $XDG_CACHE_HOME/kernelevo, else ~/.cache/kernelevo, else a directory under /tmp.
fs::path cache_root();
// Directory holding the running executable (to find kernelevo-runner beside it).
fs::path self_exe_dir();
}  // namespace kevo
