#include "common/fs.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>

#include "common/error.h"

namespace kevo {

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError("cannot read " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file_atomic(const fs::path& path, const std::string& data) {
    std::error_code ec;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    fs::path tmp = path;
    tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng() % 1000000);
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw UsageError("cannot write " + tmp.string());
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
        out.flush();
        if (!out) throw UsageError("cannot write " + tmp.string());
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw UsageError("cannot move a file into place at " + path.string());
    }
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

fs::path cache_root() {
    if (const char* p = std::getenv("KERNELEVO_CACHE_HOME"); p && *p) return fs::path(p);
    if (const char* p = std::getenv("XDG_CACHE_HOME"); p && *p) return fs::path(p) / "kernelevo";
    if (const char* p = std::getenv("HOME"); p && *p) return fs::path(p) / ".cache" / "kernelevo";
    return fs::temp_directory_path() / ("kernelevo-cache-" + std::to_string(::getuid()));
}

fs::path self_exe_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::current_path() : exe.parent_path();
}

}  // namespace kevo
