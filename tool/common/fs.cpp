#include "common/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>

#include "common/settings.h"
#include "common/error.h"

namespace kevo {

namespace {

// What a file that is not a regular one is, for messages.
std::string file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

std::string megabytes(std::uintmax_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
    return buf;
}

}  // namespace

std::string read_file(const fs::path& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw UsageError("cannot read " + path.string() + ": it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError("cannot read " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string read_input_file(const fs::path& path, const std::string& what, std::uintmax_t max_bytes) {
    const std::string name = path.string();
    auto too_large = [&](std::uintmax_t bytes, bool at_least) {
        return UsageError(name + " is too large for " + what + " (" + (at_least ? "over " : "") + megabytes(bytes) +
                          "; at most " + megabytes(max_bytes) + ")");
    };
    // stat() first: opening a FIFO or a device may block, or have effects, before anything is read.
    struct stat st {};
    if (::stat(name.c_str(), &st) != 0) throw UsageError("cannot read " + name + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        throw UsageError(name + " is " + file_kind(st.st_mode) + ", not " + what +
                         (S_ISDIR(st.st_mode) ? "" : " (a file that is read whole must be a regular file)"));
    if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) throw too_large(st.st_size, false);
    // O_NONBLOCK: should a FIFO have replaced the file since stat(), open() still does not wait.
    int fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw UsageError("cannot read " + name + ": " + std::strerror(errno));
    std::string data;
    try {
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
            throw UsageError(name + " is " + file_kind(st.st_mode) + ", not " + what);
        char buf[1 << 16];
        for (;;) {  // at most max_bytes + 1: a file that grows (or lies about its size) is still bounded
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw UsageError("cannot read " + name + ": " + std::strerror(errno));
            if (n == 0) break;
            data.append(buf, static_cast<size_t>(n));
            if (data.size() > max_bytes) throw too_large(max_bytes, true);
        }
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    return data;
}

std::string read_kernel_file(const fs::path& path, const std::string& option) {
    std::error_code ec;
    if (fs::is_directory(path, ec))
        throw UsageError(option + ": " + path.string() + " is a directory, not a kernel file (.cu, or a Triton .py)");
    std::string text;
    try {
        text = read_input_file(path, "a kernel file");
    } catch (const UsageError& e) {
        throw UsageError(option + ": " + e.what());
    }
    // Source text, never stored, compiled or shown as nothing or as bytes of a binary file.
    if (text.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
        throw UsageError(option + ": " + path.string() + " is " + (text.empty() ? "empty" : "blank") +
                         ", not a kernel file (.cu, or a Triton .py)");
    if (const size_t nul = text.find('\0'); nul != std::string::npos)
        throw UsageError(option + ": " + path.string() + " is a binary file (a NUL byte at offset " + std::to_string(nul) +
                         "), not a kernel file (.cu, or a Triton .py)");
    return text;
}

namespace {

// Writes `data` to a new temp file beside `path` and returns its name. A failure (a full disk, a
// quota, a read-only file system) names `path` and the reason and leaves no temp file behind.
fs::path write_temp_beside(const fs::path& path, const std::string& data) {
    std::error_code ec;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    fs::path tmp = path;
    tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng() % 1000000);
    auto fail = [&](int err) {
        ::unlink(tmp.c_str());
        throw UsageError("cannot write " + path.string() + ": " + std::strerror(err) + " (nothing was written)");
    };
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        const int err = errno;
        throw UsageError("cannot write " + path.string() + ": " + std::strerror(err));
    }
    for (size_t done = 0; done < data.size();) {
        const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            ::close(fd);
            fail(err);
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) fail(errno);
    return tmp;
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& data) {
    const fs::path tmp = write_temp_beside(path, data);
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        ::unlink(tmp.c_str());
        throw UsageError("cannot write " + path.string() + ": cannot move it into place: " + ec.message() +
                         " (nothing was written)");
    }
}

bool write_file_new(const fs::path& path, const std::string& data) {
    const fs::path tmp = write_temp_beside(path, data);
    // link() never replaces: it fails with EEXIST when anything (a link, a dangling one) is there.
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) return true;
    if (err == EEXIST) return false;
    throw UsageError("cannot write " + path.string() + ": cannot move it into place: " + std::strerror(err) +
                     " (nothing was written)");
}

void install_file_atomic(const fs::path& file, const fs::path& dest, const std::string& what) {
    std::error_code ec;
    fs::create_directories(dest.parent_path(), ec);
    fs::path staged = dest;
    staged += ".tmp." + std::to_string(::getpid());
    fs::copy_file(file, staged, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(staged, dest, ec);
    if (ec) {
        fs::remove(staged, ec);
        throw UsageError("cannot write " + what + " into the cache at " + dest.parent_path().string() + ": " + ec.message());
    }
}

std::string strip_dir(std::string text, const fs::path& dir) {
    const std::string prefix = dir.string() + "/";
    for (size_t pos; (pos = text.find(prefix)) != std::string::npos;) text.erase(pos, prefix.size());
    return text;
}

TempDir::TempDir(const std::string& prefix) {
    fs::path base = fs::temp_directory_path();
    std::string templ = (base / (prefix + ".XXXXXX")).string();
    if (!::mkdtemp(templ.data())) throw UsageError("cannot create a temporary directory in " + base.string());
    path_ = templ;
}

TempDir::~TempDir() {
    if (keep_) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
}

// Absolute, so that a relative KERNELEVO_CACHE_HOME names the same place for processes that run
// elsewhere (the profiler's sandboxed bench loads cached kernels from its own work directory).
fs::path cache_root() {
    if (const char* p = env(EnvVar::kCacheHome); p && *p) return fs::absolute(p);
    if (const char* p = std::getenv("XDG_CACHE_HOME"); p && *p) return fs::absolute(p) / "kernelevo";
    if (const char* p = std::getenv("HOME"); p && *p) return fs::path(p) / ".cache" / "kernelevo";
    return fs::temp_directory_path() / ("kernelevo-cache-" + std::to_string(::getuid()));
}

fs::path self_exe_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::current_path() : exe.parent_path();
}

}  // namespace kevo
