#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "commands/commands.h"
#include "sandbox/sandbox.h"

namespace kevo {

void register_sandbox_option(CLI::App& app) {
    auto mode = std::make_shared<std::string>(sandbox_mode_name(sandbox_mode()));
    app.add_option("--sandbox", *mode,
                   "How candidate code is confined: auto (every layer the kernel allows, missing ones named once), "
                   "require (a missing layer is an error), off (no sandbox: debugging only). Also $KERNELEVO_SANDBOX")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "require", "off"}))
        ->each([mode](const std::string& v) { set_sandbox_mode(parse_sandbox_mode(*mode = v)); });
}

}  // namespace kevo
