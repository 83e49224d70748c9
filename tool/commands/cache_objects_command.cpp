// `kernelevo cache objects stats|clean`: the compiled-object cache (cache/objects.h,
// $KERNELEVO_CACHE_HOME), like ccache -s / -C; registered under `cache` by cache_command.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cache/objects.h"
#include "cli/cli.h"
#include "commands/commands.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"
#include "workflows/cache.h"

namespace kevo {
namespace fs = std::filesystem;

// `cache objects stats|clean`: the compiled-object cache (cache/objects.h), not a CACHE_DIR.
void register_cache_objects_command(CLI::App& cache, int& rc) {
    std::string kinds;  // "CUDA kernels built by nvcc, LibTorch references, ..." (cache/objects.h's one list)
    const auto& areas = cache::object_areas();
    for (size_t i = 0; i < areas.size(); ++i) kinds += (i == 0 ? "" : i + 1 == areas.size() ? " and " : ", ") + areas[i].what;
    CLI::App* objects = cache.add_subcommand("objects",
        // (The folder by its rule, not this machine's path: the help is also the checked-in reference.)
        "The compiled-object cache ($KERNELEVO_CACHE_HOME, else $XDG_CACHE_HOME/kernelevo, else ~/.cache/kernelevo): " +
            kinds +
        ", reused by content hash like ccache's. Search states there are not objects and are kept.");
    objects->require_subcommand(1);
    auto json = std::make_shared<bool>(false);
    CLI::App* stats = objects->add_subcommand("stats", "Files and size per kind of object, like ccache -s. A missing cache "
                                                       "is an empty one. Exit 0.");
    stats->add_flag("--json", *json, "Print JSON");
    stats->callback([json, &rc] {
        const workflows::ObjectCacheStats st = workflows::object_cache_stats();
        const fs::path& root = st.root;
        const std::uint64_t files = st.files, bytes = st.bytes;
        nlohmann::json j = {{"root", root.string()}, {"areas", nlohmann::json::array()}};
        for (const auto& s : st.areas)
            j["areas"].push_back({{"folder", s.folder}, {"what", s.what}, {"files", s.files}, {"size_bytes", s.bytes}});
        j["files"] = files;
        j["size_bytes"] = bytes;
        if (*json) {
            std::cout << j.dump(2) << "\n";
        } else {
            std::cout << "Compiled-object cache " << root.string() << (fs::exists(root) ? "" : " (does not exist yet)") << "\n";
            for (const auto& a : j["areas"])
                std::printf("  %-11s %6llu files %10s  %s\n", a["folder"].get<std::string>().c_str(),
                            static_cast<unsigned long long>(a["files"].get<std::uint64_t>()),
                            human_size(a["size_bytes"].get<std::uint64_t>()).c_str(), a["what"].get<std::string>().c_str());
            std::printf("  %-11s %6llu files %10s\n", "total", static_cast<unsigned long long>(files), human_size(bytes).c_str());
        }
        rc = kExitSuccess;
    });
    auto dry = std::make_shared<bool>(false);
    CLI::App* clean = objects->add_subcommand("clean",
        "Delete every compiled object, like ccache -C; they are rebuilt when next needed. Safe while other kernelevo "
        "processes run: files still being written are kept, symbolic links are removed without following them. Exit 0.");
    clean->add_flag("--dry-run", *dry, "Only say what would be deleted");
    cli::add_verbosity_flags(*clean);
    clean->callback([dry, &rc] {
        const cache::CleanResult r = cache::clean_objects(cache_root(), *dry);
        if (!quiet() || *dry)
            std::cout << (*dry ? "Would delete " : "Deleted ") << r.files << " file(s), " << human_size(r.bytes) << ", from "
                      << cache_root().string()
                      << (r.in_progress ? "; kept " + std::to_string(r.in_progress) + " being written by running processes" : "")
                      << "\n";
        rc = kExitSuccess;
    });
}

}  // namespace kevo
