// How every kernelevo command exits, decided here (docs/reference/cli.md; main's help says the same).
// main starts at kExitSuccess, which a command whose work succeeded leaves; a parse error, a
// UsageError or a SettingError exits kExitUsage there.
#pragma once

namespace kevo {

enum ExitCode : int {
    kExitSuccess = 0,       // the work succeeded
    kExitFailed = 1,        // the candidate or the work failed, or stopped before its end (Ctrl-C)
    kExitUsage = 2,         // bad usage, a broken task or reference, or a setup problem (no GPU, ...)
    kExitBatchPending = 3,  // `search --batch`: its requests submitted; the same command collects them
};

// The code of work that succeeded, failed, or could not run for its setup (which counts first).
constexpr ExitCode exit_code_of(bool succeeded, bool setup_problem = false) {
    return setup_problem ? kExitUsage : succeeded ? kExitSuccess : kExitFailed;
}

}  // namespace kevo
