// The compiled-object cache's stats and clean (objects.h).
#include "cache/objects.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <regex>

#include "language/registry.h"

namespace kevo::cache {
namespace fs = std::filesystem;

std::vector<ObjectArea> object_areas() {
    // CUDA's kernels, the references, every other language's objects, a worker's; built on each
    // call from the registry, so a language added later (language::add) is listed too.
    std::vector<ObjectArea> a;
    for (const CandidateLanguage* l : language::all()) {
        a.push_back({l->object_folder(), l->object_description()});
        if (a.size() == 1) a.push_back({"references", "LibTorch references"});
    }
    a.push_back({"worker", "a worker's fetched tasks and objects"});
    return a;
}

namespace {

// Every non-directory under `dir`, never descending through a symbolic link.
template <class Fn>
void for_each_file(const fs::path& dir, Fn fn) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir, ec))) return;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
         it.increment(ec)) {
        const fs::file_status st = it->symlink_status(ec);
        if (ec || fs::is_directory(st)) continue;
        fn(it->path(), st);
    }
}

std::uint64_t size_of(const fs::path& p, const fs::file_status& st) {
    std::error_code ec;
    if (!fs::is_regular_file(st)) return 0;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : n;
}

// NAME.tmp.PID (install_file_atomic's staging name) whose writer is still running.
bool being_written(const fs::path& p) {
    static const std::regex staged(R"(.*\.tmp\.([0-9]+)$)");
    std::smatch m;
    const std::string name = p.filename().string();
    if (!std::regex_match(name, m, staged)) return false;
    const long pid = std::stol(m[1].str());
    return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

}  // namespace

std::vector<ObjectStats> object_stats(const fs::path& root) {
    std::vector<ObjectStats> out;
    for (const auto& a : object_areas()) {
        ObjectStats s{a.folder, a.what};
        for_each_file(root / a.folder, [&](const fs::path& p, const fs::file_status& st) {
            ++s.files;
            s.bytes += size_of(p, st);
        });
        out.push_back(s);
    }
    return out;
}

CleanResult clean_objects(const fs::path& root, bool dry_run) {
    CleanResult r;
    for (const auto& a : object_areas()) {
        std::vector<std::pair<fs::path, std::uint64_t>> doomed;
        for_each_file(root / a.folder, [&](const fs::path& p, const fs::file_status& st) {
            if (being_written(p)) {
                ++r.in_progress;
                return;
            }
            doomed.emplace_back(p, size_of(p, st));
        });
        // The library first, then its records: a reader that finds no .so rebuilds, one that finds
        // a .so without its digest rebuilds too; none sees a half-written file.
        std::stable_partition(doomed.begin(), doomed.end(), [](const auto& d) { return d.first.extension() == ".so"; });
        for (const auto& [p, bytes] : doomed) {
            std::error_code ec;
            if (!dry_run && !fs::remove(p, ec)) continue;  // gone already (another clean), or not ours to remove
            ++r.files;
            r.bytes += bytes;
        }
    }
    return r;
}

}  // namespace kevo::cache
