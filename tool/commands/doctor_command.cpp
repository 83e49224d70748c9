// `kernelevo doctor`: what this machine offers the validator — the sandbox layers, the GPU, its
// driver, the CUDA toolkit and LibTorch — and what is missing, with what to do about it; and the
// optional parts: the Python (PyTorch, its CUDA; Triton for Triton candidates; the Python helper) and
// Nsight Compute (ncu, for profiles).
#include <CLI/CLI.hpp>

#include <iostream>

#include "commands/commands.h"
#include "cli/cli.h"
#include "common/exit_code.h"
#include "common/process.h"
#include "compile/compile.h"
#include "kernelbench/kernelbench.h"
#include "profile/profile.h"
#include "reference/reference.h"
#include "sandbox/sandbox.h"
#include "triton/triton_compile.h"
#include "validate/gpu_lock.h"
#include "validate/validate.h"

namespace kevo {

namespace {

// One line of JSON about the Python: its version, PyTorch (version, CUDA build, a device) and Triton.
const char* const kPythonProbe = R"PY(
import json, sys
j = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import torch
    j["torch"] = torch.__version__
    j["torch_cuda"] = torch.version.cuda
    j["cuda_available"] = bool(torch.cuda.is_available())
except Exception as e:
    j["torch_missing"] = "%s: %s" % (type(e).__name__, e)
try:
    import triton
    j["triton"] = getattr(triton, "__version__", "unknown")
except Exception as e:
    j["triton_missing"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(j))
)PY";

nlohmann::json probe_python(const std::string& python) {
    ProcessOptions po;
    po.argv = {python, "-c", kPythonProbe};
    po.timeout_s = 120;
    po.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
    ProcessResult r = run_process(po);
    nlohmann::json j{{"command", python}};
    if (r.ok()) {
        std::string last = r.out.substr(0, r.out.find_last_not_of("\r\n") + 1);
        last = last.substr(last.find_last_of('\n') + 1);
        try {
            j.update(nlohmann::json::parse(last));
            return j;
        } catch (const std::exception&) {
        }
    }
    std::string why = r.error.empty() ? r.describe() : r.error;
    j["missing"] = "cannot run " + python + " (" + why + "); set --python or KERNELEVO_PYTHON";
    return j;
}

nlohmann::json probe_ncu() {
    std::string ncu = profile::find_ncu(profile::ProfileOptions{});
    if (ncu.empty()) return {{"missing", "ncu not found ($KERNELEVO_NCU, PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute)"}};
    ProcessOptions po;
    po.argv = {ncu, "--version"};
    po.timeout_s = 60;
    ProcessResult r = run_process(po);
    std::string out = r.out.substr(0, r.out.find_last_not_of("\r\n ") + 1);
    std::string version = out.substr(out.find_last_of('\n') + 1);
    return {{"path", ncu}, {"version", r.ok() ? version : "does not run: " + r.describe()}};
}

std::string python_line(const nlohmann::json& p) {
    if (p.contains("missing")) return "missing: " + p["missing"].get<std::string>();
    return p.value("python", "") + " (" + p.value("executable", "") + ")";
}

std::string torch_line(const nlohmann::json& p) {
    if (p.contains("missing")) return "unknown (no Python)";
    if (p.contains("torch_missing")) return "missing: " + p["torch_missing"].get<std::string>() + " (pip install torch)";
    std::string cuda = p["torch_cuda"].is_string() ? "CUDA " + p["torch_cuda"].get<std::string>() : "CPU-only build";
    return p.value("torch", "") + ", " + cuda + ", GPU " + (p.value("cuda_available", false) ? "visible" : "not visible");
}

// The Python the KernelBench import and the baselines use (kernelbench::find_python, the one choice:
// `given`, else python3 if it has torch, else /usr/bin/python3), probed; when none has torch, the
// first one tried, with the reason the import would give.
nlohmann::json probe_torch_python(const std::string& given) {
    try {
        nlohmann::json j = probe_python(kernelbench::find_python(given));
        if (given.empty()) j["chosen"] = "python3 if it has torch, else /usr/bin/python3 (as import kernelbench)";
        return j;
    } catch (const std::exception& e) {
        nlohmann::json j = probe_python(given.empty() ? "python3" : given);
        j["not_found"] = e.what();
        return j;
    }
}

std::string triton_line(const nlohmann::json& p) {
    if (p.contains("missing")) return "unknown (no Python)";
    if (p.contains("triton_missing")) return "missing (Triton candidates need Triton 3.x: pip install triton)";
    return p.value("triton", "");
}

}  // namespace

void register_doctor_command(CLI::App& app, int& rc) {
    auto json_out = std::make_shared<bool>(false);
    auto python = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("doctor", "Show what this machine offers for validation. The sandbox layers, GPU, driver, "
                                                 "CUDA toolkit and LibTorch, and Python, PyTorch, Triton and ncu. Exit 0 when "
                                                 "everything validation needs is there, 1 otherwise.");
    cli::set_examples(*cmd, {{"What is there, what is missing", "kernelevo doctor"},
                             {"The same as one JSON object", "kernelevo doctor --json"},
                             {"Another Python's PyTorch and Triton", "kernelevo doctor --python ~/venv/bin/python"}});
    cmd->add_flag("--json", *json_out, "Print one JSON object");
    cmd->add_option("--python", *python,
                    "The Python to check (default: for PyTorch the one kernelevo import uses: python3 if it has "
                    "torch, else /usr/bin/python3; for Triton $KERNELEVO_PYTHON, else python3)");
    cmd->callback([json_out, python, &rc] {
        const SandboxLayers& l = sandbox_layers();
        Task t;
        t.name = "doctor";
        Validator v(t, ValidateOptions{});
        const DeviceInfo& d = v.device();
        CompileOptions co;
        std::string nvcc;
        try {
            nvcc = nvcc_path(co) + " (" + nvcc_version(co) + ")";
            const std::string libs = candidate_library_dir(co);
            nvcc += libs.empty() ? "; no cuBLAS for candidates" : "; cuBLAS for candidates in " + libs;
        } catch (const std::exception& e) {
            nvcc = std::string("missing: ") + e.what();
        }
        // PyTorch: the import's Python; Triton: the Python Triton candidates compile with (--python,
        // $KERNELEVO_PYTHON, python3), probed apart only when it is another one.
        const nlohmann::json py = probe_torch_python(*python);
        const std::string triton_python = triton::python_path(*python);
        const bool same = triton_python == py.value("command", "");
        const nlohmann::json tpy = same ? py : probe_python(triton_python);
        const nlohmann::json ncu = probe_ncu();
        // Validation needs neither Python nor ncu: they do not decide "ready".
        bool complete = l.namespaces && l.seccomp && l.landlock && d.present && nvcc.rfind("missing", 0) != 0;
        nlohmann::json j{{"sandbox", {{"mode", sandbox_mode_name(sandbox_mode())}, {"namespaces", l.namespaces}, {"bwrap", l.bwrap},
                                      {"seccomp", l.seccomp}, {"landlock", l.landlock}, {"landlock_abi", l.landlock_abi},
                                      {"missing", l.why_not}}},
                         {"gpu", d.to_json()},
                         {"nvcc", nvcc},
                         {"libtorch", libtorch_version()},
                         {"python", py},
                         {"triton_python", tpy},
                         {"ncu", ncu},
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
            std::cout << "nvcc      " << nvcc << "\nlibtorch  " << libtorch_version() << "\n";
            std::cout << "python    " << python_line(py) << "\npytorch   " << torch_line(py) << "\ntriton    "
                      << triton_line(tpy) << (same ? "" : " (" + python_line(tpy) + ", --python or $KERNELEVO_PYTHON)")
                      << "\n";
            std::cout << "ncu       "
                      << (ncu.contains("missing") ? "missing: " + ncu["missing"].get<std::string>()
                                                  : ncu["path"].get<std::string>() + " (" + ncu["version"].get<std::string>() + ")")
                      << "\ngpu lock  " << GpuLock::lock_dir() << "\n";
        }
        rc = exit_code_of(complete);
    });
}

}  // namespace kevo
