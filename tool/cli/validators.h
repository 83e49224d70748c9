// Checks of option values that CLI11 does not make, shared by every command so that one kind of
// bad value gets one message everywhere:
//   ->check(kevo::cli::FiniteNumber)->check(CLI::PositiveNumber)   // CLI11's range checks pass NaN
//   ->check(kevo::cli::Seconds)         // a duration: finite, above 0, at most a week
//   ->check(kevo::cli::SecondsOrZero)   // the same, or 0 ("never", "none")
//   ->check(kevo::cli::Seed)            // 0 .. 2^63-1 in decimal ("-1" and "1e23" are not wrapped)
//   ->check(kevo::cli::NonEmpty)        // "" is not a silent "use the default"
//   ->check(kevo::cli::NoControlCharacters)  // a URL or name with CR/LF/ESC inside
#pragma once
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/duration.h"

namespace kevo::cli {

// A number that is finite ("nan", "inf", "1e999" are refused). Text that is no number at all is
// left to the option's conversion, which says what it expected.
inline const CLI::Validator FiniteNumber(
    [](std::string& in) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(in.c_str(), &end);
        if (end == in.c_str() || *end != '\0' || std::isfinite(v)) return "";
        return "must be a finite number, not '" + in + "'";
    },
    "", "FINITE");

// Every duration option (timeouts, leases, waits) in seconds: a finite number above 0 and at most
// a week (kMaxDurationSeconds, common/duration.h, the one bound).
inline constexpr double kMaxSeconds = kMaxDurationSeconds;

inline std::string check_seconds(const std::string& in, bool zero_allowed) {
    char* end = nullptr;
    const double v = std::strtod(in.c_str(), &end);
    if (end == in.c_str() || *end != '\0') return "";  // not a number: the conversion says what it expected
    const std::string shown = in.size() > 40 ? in.substr(0, 40) + "..." : in;
    if (!std::isfinite(v)) return "must be a finite number, not '" + shown + "'";  // as FiniteNumber says it
    if (v <= kMaxSeconds && (v > 0 || (zero_allowed && v == 0))) return "";
    return std::string("must be a number of seconds ") + (zero_allowed ? "from 0 to " : "above 0, at most ") +
           std::to_string(static_cast<long>(kMaxSeconds)) + " (a week), not '" + shown + "'";
}

inline const CLI::Validator Seconds([](std::string& in) { return check_seconds(in, false); }, "", "SECONDS");
inline const CLI::Validator SecondsOrZero([](std::string& in) { return check_seconds(in, true); }, "", "SECONDS");

// A random seed: a whole number from 0 to 2^63-1 (what every state, transcript and JSON stores
// exactly), written in decimal digits.
inline const CLI::Validator Seed(
    [](std::string& in) -> std::string {
        const std::string bad = "must be a whole number from 0 to 9223372036854775807, not '" + in + "'";
        if (in.empty() || in.size() > 19 || in.find_first_not_of("0123456789") != std::string::npos) return bad;
        errno = 0;
        const unsigned long long v = std::strtoull(in.c_str(), nullptr, 10);
        return errno != 0 || v > static_cast<unsigned long long>(INT64_MAX) ? bad : "";
    },
    "", "SEED");

// An output folder: new, or one that exists; a file (or a link to one) there is refused before
// anything runs.
inline const CLI::Validator OutputFolder(
    [](std::string& in) -> std::string {
        std::error_code ec;
        const bool other = (std::filesystem::exists(in, ec) || std::filesystem::is_symlink(in, ec)) &&
                           !std::filesystem::is_directory(in, ec);
        return other ? in + " exists and is not a folder; give a folder (a new one, or one written before)" : "";
    },
    "", "FOLDER");

// A value that is not empty: an empty path or URL is a mistake (an unset shell variable), not a
// request for the default.
inline const CLI::Validator NonEmpty(
    [](std::string& in) -> std::string { return in.empty() ? "must not be empty" : ""; }, "", "NONEMPTY");

// A value without control characters (CR, LF, ESC, DEL, ...): they would split a header or a log
// line, or reach a terminal. The message names the first by its code, never the raw byte.
inline const CLI::Validator NoControlCharacters(
    [](std::string& in) -> std::string {
        for (size_t i = 0; i < in.size(); ++i) {
            const unsigned char c = static_cast<unsigned char>(in[i]);
            if (c < 0x20 || c == 0x7f) {
                char code[8];
                std::snprintf(code, sizeof code, "\\x%02x", c);
                return "must not contain control characters (" + std::string(code) + " at character " +
                       std::to_string(i + 1) + ")";
            }
        }
        return "";
    },
    "", "NOCONTROL");

}  // namespace kevo::cli
