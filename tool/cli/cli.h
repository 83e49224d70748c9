// What every kernelevo subcommand shares on its command line: did-you-mean suggestions for
// mistyped subcommands and options, `kernelevo help [command]`, and the --quiet/--verbose flags of
// commands that print while they work. tool/cli/main.cpp wires the first two for every command;
// a command that prints progress calls add_verbosity_flags() on its subcommand.
#pragma once
#include <string>
#include <vector>

namespace CLI { class App; }

namespace kevo::cli {

// Optimal-string-alignment distance (insertions, deletions, substitutions, adjacent swaps).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidates nearest to `word` (distance at most max(1, |word| / 3), or `word` a prefix of
// a candidate; leading dashes not counted), nearest first, at most three; empty when none is close
// or `word` is shorter than three letters.
std::vector<std::string> closest(const std::string& word, const std::vector<std::string>& candidates);

// The subcommand the parse reached (the deepest selected one; `root` when none).
const CLI::App& deepest_selected(const CLI::App& root);

// "kernelevo cache status": the names from the root down to `app`.
std::string command_path(const CLI::App& app);

// After a failed parse: one "did you mean" line for each argument the parse did not recognize
// (a mistyped subcommand or option of the subcommand reached), or "" when none is close.
std::string suggestions(const CLI::App& root);

// Adds `kernelevo help [COMMAND [SUBCOMMAND]]` to the root app; prints to stdout, sets rc.
void add_help_command(CLI::App& root, int& rc);

// -q/--quiet on `cmd`, and -v/--verbose when `verbose_help` says what it adds; they set
// kevo::verbosity() (common/log.h).
void add_verbosity_flags(CLI::App& cmd, const std::string& verbose_help = "");

}  // namespace kevo::cli
