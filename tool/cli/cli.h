// What every kernelevo subcommand shares on its command line: did-you-mean suggestions for
// mistyped subcommands and options, `kernelevo help [command]`, and the --quiet/--verbose flags of
// commands that print while they work. tool/commands/main.cpp wires the first two for every command;
// a command that prints progress calls add_verbosity_flags() on its subcommand.
//
// The help (help.cpp): a formatter that wraps to the terminal, lists subcommands by the first
// sentence of their description, groups options and ends with the command's examples; colour
// only on a terminal without NO_COLOR. Errors (cli.cpp): every parse error as one short line
// through "kernelevo: error: ", and as JSON on stdout under --json. `kernelevo completion`
// (completion.cpp): bash and zsh completion generated from the same definition.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/suggest.h"

namespace CLI { class App; class FormatterBase; class ParseError; }

namespace kevo::cli {

// Did-you-mean (common/suggest.h: the one guess the task parser shares).
using kevo::closest;
using kevo::edit_distance;

// The subcommand the parse reached (the deepest selected one; `root` when none).
const CLI::App& deepest_selected(const CLI::App& root);

// "kernelevo cache status": the names from the root down to `app`.
std::string command_path(const CLI::App& app);

// After a failed parse: a line for each argument the parse did not recognize (a mistyped
// subcommand or option of the subcommand reached, with "did you mean" when one is close, or an
// option given before its command), or "" when there is none to say.
std::string suggestions(const CLI::App& root);

// Adds `kernelevo help [COMMAND [SUBCOMMAND]]` to the root app; prints to stdout, sets rc.
void add_help_command(CLI::App& root, int& rc);
// `kernelevo help TOPIC` for a topic that is not a command (help.cpp: "environment", the table of
// environment variables as markdown). Prints it and returns true, or returns false.
bool print_help_topic(const std::string& topic);

// -q/--quiet on `cmd`, and -v/--verbose when `verbose_help` says what it adds; they set
// kevo::verbosity() (common/log.h).
void add_verbosity_flags(CLI::App& cmd, const std::string& verbose_help = "");

// What `kernelevo --version` prints: the version, then the build's details (git commit at configure
// time when known, CUDA toolkit, LibTorch yes/no, Redis yes/no, build type), a line each.
std::string version_text();

// ---- help ---------------------------------------------------------------------------------------

// One line of a command's EXAMPLES section: what it does, and the command line.
struct Example {
    std::string what;
    std::string command;
};

// The examples `kernelevo help COMMAND` ends with; kept next to the command's registration. A
// subcommand without its own shows those of its nearest ancestor that run it.
void set_examples(CLI::App& app, std::vector<Example> examples);
std::vector<Example> examples_of(const CLI::App& app);

// The formatter every command's help uses (set on the root before the commands are added).
std::shared_ptr<CLI::FormatterBase> make_formatter();

// Where the next help goes (colour and width are decided for that stream; stdout by default).
void set_help_stream(int fd);

// The width to wrap to: the terminal's (ioctl on a TTY), else $COLUMNS, else 80; within 40..100.
size_t terminal_width(int fd);
// Help at `width` columns and without colour, whatever the terminal (the command reference); 0: the
// terminal's again.
void set_fixed_help_width(size_t width);

// `kernelevo help --markdown [COMMAND]` (reference.cpp): for the root, the page of every command
// (docs/reference/commands.md: its help and a link to each command's page); for a command, its page
// (docs/reference/commands/COMMAND.md: its help and each subcommand's), every help as `kernelevo
// help` prints it at 80 columns without colour.
std::string reference_markdown(const CLI::App& app);

// Whether to colour what goes to `fd`: a terminal, NO_COLOR unset or empty, TERM not "dumb".
bool colour(int fd);

// `text` in lines of at most `width` columns (its own newlines kept; a word too long is cut).
std::vector<std::string> wrap_lines(const std::string& text, size_t width);

// The first sentence of a description: the one-line summary in its parent's command list.
std::string summary(const std::string& description);

// ---- errors --------------------------------------------------------------------------------------

// A parse error as one short line without the prefix ("--timeout: must be a positive number, not
// -1"); unknown arguments, with their did-you-mean, come before anything else (a required option
// missing because it was mistyped is not the cause).
std::string parse_error_message(const CLI::App& root, const CLI::ParseError& e);

// Whether the command line asks for JSON: --json given to a command that has it.
bool json_requested(const CLI::App& root, int argc, const char* const* argv);

// Prints "kernelevo: error: MESSAGE" (red "error:" on a terminal; MESSAGE escaped and redacted).
// A parse error gives `usage_of`: each of its lines gets the prefix, then the line naming that
// command's help. With `json`, also {"error": MESSAGE, "exit_code": CODE} on stdout. Returns `code`.
int report_error(const std::string& message, int code, bool json, const CLI::App* usage_of = nullptr);

// ---- completion ----------------------------------------------------------------------------------

// The bash or zsh completion script for `root`'s commands, options and option values.
std::string completion_script(const CLI::App& root, const std::string& shell);

// Adds `kernelevo completion bash|zsh`.
void add_completion_command(CLI::App& root, int& rc);

}  // namespace kevo::cli
