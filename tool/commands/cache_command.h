// What cache_command.cpp (status, add, remove, prune, hash) shares with cache_stats_command.cpp
// (`cache stats`): the stats printer and the words for a cache use case's wrong input. Internal to
// tool/commands; the work is workflows/cache.h's.
#pragma once
#include "workflows/cache.h"

namespace kevo {

// `cache stats`: prints (or as JSON) workflows::cache_stats(); rc 0.
void run_stats(const workflows::CacheStatsRequest& a, bool json, int& rc);

// A cache use case's wrong input, said with the options it came from (--cache-dir, --build-dir, ...).
[[noreturn]] void throw_with_flags(const workflows::CacheInputError& e);

// Runs a cache use case, its wrong inputs said with the command line's options.
template <class F>
void with_flags(F&& f) {
    try {
        f();
    } catch (const workflows::CacheInputError& e) {
        throw_with_flags(e);
    }
}

}  // namespace kevo
