// How much a command prints while it works (progress lines, compile notes): set once by the CLI's
// --quiet/--verbose flags (tool/cli/cli.h), read wherever a long operation reports.
// Results (a command's summary or --json output) and errors are printed at every level.
#pragma once
#include <atomic>

namespace kevo {

enum class Verbosity { quiet = 0, normal = 1, verbose = 2 };

inline std::atomic<Verbosity>& verbosity_level() {
    static std::atomic<Verbosity> level{Verbosity::normal};
    return level;
}
inline Verbosity verbosity() { return verbosity_level().load(); }
inline void set_verbosity(Verbosity v) { verbosity_level().store(v); }
inline bool quiet() { return verbosity() == Verbosity::quiet; }
inline bool verbose() { return verbosity() == Verbosity::verbose; }

}  // namespace kevo
