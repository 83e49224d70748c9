// Every subcommand of kernelevo (tool/commands/*_command.cpp) registers itself through one of these;
// tool/commands/main.cpp calls them all.
// A command reports its exit code through `rc` (0 ok, 1 the candidate/work failed, 2 bad usage or
// setup). Throwing UsageError from a callback also exits with 2 and prints the message.
#pragma once
#include <string>

#include "common/setting_error.h"

namespace CLI { class App; }
namespace kevo {
// A library's SettingError as kernelevo prints it: each setting named by its option (common/settings.h),
// in words where no option sets it.
inline std::string message_with_flags(const SettingError& e) {
    return e.render([](const Setting& s) { return std::string(*s.flag ? s.flag : s.words); });
}
void register_validate_command(CLI::App& app, int& rc);
void register_llm_command(CLI::App& app, int& rc);
void register_search_command(CLI::App& app, int& rc);
void register_report_command(CLI::App& app, int& rc);   // report (a search's history)
void register_cache_command(CLI::App& app, int& rc);
void register_cache_objects_command(CLI::App& cache, int& rc);  // cache objects (under cache)
void register_doctor_command(CLI::App& app, int& rc);
void register_tune_command(CLI::App& app, int& rc);    // tune (KEVO_TUNABLE parameters, no LLM)
void register_worker_command(CLI::App& app, int& rc);  // worker (validation jobs from a Redis queue)
void register_serve_command(CLI::App& app, int& rc);   // serve (the web page and its JSON API)
void register_import_command(CLI::App& app, int& rc);  // import kernelbench
void register_bench_command(CLI::App& app, int& rc);
// --sandbox, an option of kernelevo itself (before any command): sets the process-wide sandbox mode.
void register_sandbox_option(CLI::App& app);
}  // namespace kevo
