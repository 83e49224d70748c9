// kernelevo — find fast CUDA kernels for LibTorch functions, validate them, cache them per GPU
// architecture for the CMake integration.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "cli/cli.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/process.h"
#include "common/text.h"


int main(int argc, char** argv) {
    // The name is fixed so that usage lines read "kernelevo ...", not the executable's path.
    CLI::App app{"kernelevo " KEVO_VERSION
                 " — LLM-driven evolutionary search for fast CUDA kernels, built into CMake projects.\n"
                 "Exit codes: 0 success, 1 the candidate or the work failed, 2 bad usage, task or setup.\n"
                 "Run 'kernelevo help COMMAND' (or COMMAND --help) for a command's options.",
                 "kernelevo"};
    // Before any command is added: subcommands take their parent's formatter when they are made.
    app.formatter(kevo::cli::make_formatter());
    app.require_subcommand(1);
    app.set_version_flag("--version", kevo::cli::version_text, "Print the version and the build's details (git commit, CUDA, LibTorch, Redis, build type)");
    int rc = kevo::kExitSuccess;  // a command whose work succeeded leaves it
    kevo::name_settings_by_option();  // a library's messages name each setting by its option
    // Every child (compiler, judge, sandbox) dies with this process on SIGTERM or Ctrl-C.
    kevo::install_child_cleanup();
    kevo::register_sandbox_option(app);
    app.fallthrough();
    kevo::cli::set_examples(app, {{"Check that this machine can validate kernels", "kernelevo doctor"},
                                  {"Search for a fast kernel for a task (30 minutes at most)",
                                   "kernelevo search --task gelu/task.json --out kernels --model openai/gpt-5-mini --max-time 30m"},
                                  {"See what the cache holds", "kernelevo cache status --cache-dir kernels"},
                                  {"Complete commands and options in bash", "source <(kernelevo completion bash)"}});
    kevo::cli::add_help_command(app, rc);
    kevo::register_validate_command(app, rc);
    kevo::register_doctor_command(app, rc);
    kevo::register_llm_command(app, rc);
    kevo::register_search_command(app, rc);
    kevo::register_report_command(app, rc);
    kevo::register_cache_command(app, rc);
    kevo::register_tune_command(app, rc);
#ifdef KEVO_WITH_WORKER
    kevo::register_worker_command(app, rc);
#endif
#ifdef KEVO_WITH_SERVE
    kevo::register_serve_command(app, rc);
#endif
    kevo::register_import_command(app, rc);
    kevo::register_bench_command(app, rc);
    kevo::cli::add_completion_command(app, rc);
    // Under --json (where the command has it), a failure is also one JSON object on stdout.
    auto json = [&] { return kevo::cli::json_requested(app, argc, argv); };
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        const CLI::App& at = kevo::cli::deepest_selected(app);
        if (std::string(e.what()) == "A subcommand is required" && kevo::cli::suggestions(app).empty()) {
            kevo::cli::report_error("'" + kevo::cli::command_path(at) + "' needs a command", kevo::kExitUsage, json());
            kevo::cli::set_help_stream(STDERR_FILENO);
            std::cerr << "\n" << at.help(at.get_parent() ? kevo::cli::command_path(*at.get_parent()) : std::string());
            return kevo::kExitUsage;
        }
        return kevo::cli::report_error(kevo::cli::parse_error_message(app, e), kevo::kExitUsage, json(), &at);
    } catch (const kevo::SettingError& e) {  // a library's setting, shown under its flag
        return kevo::cli::report_error(kevo::message_with_flags(e), kevo::kExitUsage, json());
    } catch (const kevo::UsageError& e) {
        return kevo::cli::report_error(e.what(), kevo::kExitUsage, json());
    } catch (const std::exception& e) {
        const std::string what = e.what();
        std::cerr << "kernelevo: internal error: " << kevo::printable(kevo::redact(what)) << "\n";
        if (json())
            std::cout << "{\"error\": \"internal error\", \"exit_code\": " << kevo::kExitUsage << "}" << std::endl;
        return kevo::kExitUsage;
    }
    return rc;
}
