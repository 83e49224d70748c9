// The compiled-object cache (cache_root(): ~/.cache/kernelevo, $KERNELEVO_CACHE_HOME): what nvcc,
// LibTorch and every candidate language's builds and a worker's fetched objects leave there, summarized and cleaned like
// `ccache -s` / `ccache -C` (`kernelevo cache objects stats|clean`). Search states and device
// measurements under the same root are not objects and are never touched.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kevo::cache {

// The subfolders of cache_root() that hold compiled objects, and what each holds (every language the
// registry lists now).
struct ObjectArea {
    std::string folder;
    std::string what;
};
std::vector<ObjectArea> object_areas();

struct ObjectStats {
    std::string folder, what;
    std::uint64_t files = 0, bytes = 0;  // regular files only; symbolic links are never followed
};
// One row per area (zeros for one that does not exist, or a root that does not exist yet).
std::vector<ObjectStats> object_stats(const std::filesystem::path& root);

struct CleanResult {
    std::uint64_t files = 0, bytes = 0;
    std::uint64_t in_progress = 0;  // files another process is still writing (NAME.tmp.PID, PID alive): kept
};
// Deletes every object of every area (files and symbolic links themselves, never what a link points
// to; the folders stay, since a writer may have just created one to stage a file in). Safe while other kernelevo processes use the cache: they write entries
// as NAME.tmp.PID and rename them into place, so a file being written is kept, a reader sees a
// whole entry or none (and rebuilds it), and a library already loaded stays mapped. `dry_run`:
// counts what it would delete.
CleanResult clean_objects(const std::filesystem::path& root, bool dry_run);

}  // namespace kevo::cache
