// `kernelevo help --markdown [COMMAND]` (cli.h): the command reference of docs/reference/, made of the
// commands' own help. tests/cli/reference_test.cpp fails when the checked-in pages differ from it.
#include <CLI/CLI.hpp>

#include "cli/cli.h"

namespace kevo::cli {
namespace {

// The width the reference's help is wrapped to, whatever the terminal that runs the generator.
constexpr size_t kReferenceWidth = 80;

const char* const kGenerated =
    "<!-- Generated from kernelevo's help by `kernelevo help --markdown [COMMAND]`: do not edit. Change the help\n"
    "     in tool/, then run scripts/cli_reference.sh (ctest -R CliReference compares). -->\n";

std::vector<const CLI::App*> commands_of(const CLI::App& app) {
    return app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && !s->get_disabled(); });
}

// A command's help as `kernelevo help COMMAND` prints it.
std::string help_block(const CLI::App& app) {
    return "```text\n" + app.get_formatter()->make_help(&app, command_path(app), CLI::AppFormatMode::Normal) + "```\n";
}

// `app`'s help, then each of its subcommands' under a heading of its own, depth first.
void append_tree(std::string& out, const CLI::App& app) {
    out += help_block(app);
    for (const CLI::App* s : commands_of(app)) {
        out += "\n## " + command_path(*s) + "\n\n";
        append_tree(out, *s);
    }
}

// While it lives, help is wrapped to the reference's width, without colour.
struct FixedWidth {
    FixedWidth() { set_fixed_help_width(kReferenceWidth); }
    ~FixedWidth() { set_fixed_help_width(0); }
};

}  // namespace

std::string reference_markdown(const CLI::App& app) {
    const FixedWidth fixed;
    std::string out = std::string(kGenerated) + "\n# " + command_path(app) + "\n\n";
    if (app.get_parent()) {
        out += "One command's help and its subcommands', as `kernelevo help` prints them. Back to\n"
               "[the commands](../commands.md).\n\n";
        append_tree(out, app);
        return out;
    }
    out += "Every command's help, as `kernelevo help COMMAND` (or `COMMAND --help`) prints it, here at " +
           std::to_string(kReferenceWidth) + " columns.\nWhat the commands share: [the command line](cli.md).\n\n" +
           help_block(app) + "\n## Commands\n\n";
    for (const CLI::App* s : commands_of(app))
        out += "- [" + s->get_name() + "](commands/" + s->get_name() + ".md): " + summary(s->get_description()) + "\n";
    return out;
}

}  // namespace kevo::cli
