// `kernelevo doctor`: what this machine offers the validator — the sandbox layers, the GPU, its
// driver, the CUDA toolkit and LibTorch — and what is missing, with what to do about it.
#include <CLI/CLI.hpp>

#include <iostream>

#include "commands/commands.h"
#include "cli/cli.h"
#include "compile/compile.h"
#include "reference/reference.h"
#include "sandbox/sandbox.h"
#include "validate/gpu_lock.h"
#include "validate/validate.h"

namespace kevo {

void register_doctor_command(CLI::App& app, int& rc) {
    auto json_out = std::make_shared<bool>(false);
    CLI::App* cmd = app.add_subcommand("doctor", "Show what this machine offers for validation. The sandbox layers, GPU, driver, "
                                                 "CUDA toolkit and LibTorch. Exit 0 when everything validation needs is there, 1 otherwise.");
    cli::set_examples(*cmd, {{"What is there, what is missing", "kernelevo doctor"},
                             {"The same as one JSON object", "kernelevo doctor --json"}});
    cmd->add_flag("--json", *json_out, "Print one JSON object");
    cmd->callback([json_out, &rc] {
        const SandboxLayers& l = sandbox_layers();
        Task t;
        t.name = "doctor";
        Validator v(t, ValidateOptions{});
        const DeviceInfo& d = v.device();
        CompileOptions co;
        std::string nvcc;
        try {
            nvcc = nvcc_path(co) + " (" + nvcc_version(co) + ")";
        } catch (const std::exception& e) {
            nvcc = std::string("missing: ") + e.what();
        }
        bool complete = l.namespaces && l.seccomp && l.landlock && d.present && nvcc.rfind("missing", 0) != 0;
        nlohmann::json j{{"sandbox", {{"mode", sandbox_mode_name(sandbox_mode())}, {"namespaces", l.namespaces}, {"bwrap", l.bwrap},
                                      {"seccomp", l.seccomp}, {"landlock", l.landlock}, {"landlock_abi", l.landlock_abi},
                                      {"missing", l.why_not}}},
                         {"gpu", d.to_json()},
                         {"nvcc", nvcc},
                         {"libtorch", libtorch_version()},
                         {"gpu_lock_dir", GpuLock::lock_dir()},
                         {"ready", complete}};
        if (*json_out) {
            std::cout << j.dump(2) << std::endl;
        } else {
            std::cout << "sandbox   mode " << sandbox_mode_name(sandbox_mode()) << "; active: " << l.describe() << "\n";
            if (!l.why_not.empty()) std::cout << "          missing: " << l.why_not;
            if (d.present)
                std::cout << "gpu       " << d.index << ": " << d.name << " (" << d.arch() << "), driver " << d.driver_version / 1000 << "."
                          << (d.driver_version % 1000) / 10 << ", " << d.uuid << "\n";
            else
                std::cout << "gpu       none: " << d.error << "\n";
            std::cout << "nvcc      " << nvcc << "\nlibtorch  " << libtorch_version() << "\ngpu lock  " << GpuLock::lock_dir() << "\n";
        }
        rc = complete ? 0 : 1;
    });
}

}  // namespace kevo
