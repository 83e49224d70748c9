// Shared by the CLI tests (cli_test, cli_gpu_test): the kernelevo binary as a child process, and
// whether this machine has a GPU the validator can use.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/process.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo::clitest {

inline const fs::path kData = KEVO_TEST_DATA_DIR;
inline const fs::path kSource = KEVO_SOURCE_DIR;
inline const fs::path kBinary = KEVO_BINARY_DIR;
inline const std::string kExe = KEVO_EXE;

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

inline ProcessResult kernelevo(std::vector<std::string> args, std::map<std::string, std::string> env = {},
                               double timeout = 120) {
    ProcessOptions o;
    o.argv = {kExe};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = std::move(env);
    o.timeout_s = timeout;
    return run_process(o);
}

// Whether this machine has a GPU the validator can use (asked the validator's way).
inline bool have_gpu() {
    static const bool known = [] {
        Validator v(load_task(kData / "gelu_bias" / "task.json"), ValidateOptions{});
        return v.device().present;
    }();
    return known;
}

}  // namespace kevo::clitest
