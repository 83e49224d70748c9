// The longest duration any setting in seconds may have (timeouts, leases, waits, a search's time
// limit): a week. Beyond it a limit is no limit, and the figure overflows the integers and clocks
// that take it (a child's watchdog, Python's time.sleep, a lease's milliseconds). The command
// line's checks (cli/validators.h: cli::Seconds) and the libraries' parsers use this one bound.
#pragma once

namespace kevo {
inline constexpr double kMaxDurationSeconds = 7 * 24 * 3600.0;
}  // namespace kevo
