// Shared by the KernelBench tests: the problems folder, the kernelevo command, and one CPU import
// of a dozen problems of different kinds (done once per test run, reused by the bench tests).
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "task/task.h"
#include "validate/validate.h"

namespace kevo::kbtest {

// tests/data/kernelbench: copies of KernelBench problems (KERNELBENCH_DIR overrides it).
inline fs::path problems() {
    if (const char* d = std::getenv("KERNELBENCH_DIR")) return d;
    return fs::path(KEVO_KERNELBENCH_PROBLEMS);
}

// The local GPU (present == false on a CPU machine).
inline const DeviceInfo& gpu() {
    static DeviceInfo d = [] {
        Validator v(load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json"), ValidateOptions{});
        return v.device();
    }();
    return d;
}

inline ProcessResult kernelevo(std::vector<std::string> args, double timeout_s = 1800) {
    ProcessOptions po;
    po.argv = {KEVO_EXE};
    po.argv.insert(po.argv.end(), args.begin(), args.end());
    po.timeout_s = timeout_s;
    po.max_file_bytes = -1;
    return run_process(po);
}

// The dozen: elementwise, reductions, matmul, convolutions, norms with parameters, several
// inputs (one drawn with randint, one computed from random values), pooling, level-2 fusions.
inline const std::vector<std::string>& dozen() {
    static const std::vector<std::string> v = {
        "level1/19_ReLU.py",
        "level1/48_Mean_reduction_over_a_dimension.py",
        "level1/24_LogSoftmax.py",
        "level1/1_Square_matrix_multiplication_.py",
        "level1/50_conv_standard_2D__square_input__square_kernel.py",
        "level1/40_LayerNorm.py",
        "level1/35_GroupNorm_.py",
        "level1/95_CrossEntropyLoss.py",
        "level1/100_HingeLoss.py",
        "level1/42_Max_Pooling_2D.py",
        "level2/12_Gemm_Multiply_LeakyReLU.py",
        "level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py",
    };
    return v;
}

struct Import {
    fs::path out;
    ProcessResult run;
    nlohmann::json report;
    std::map<std::string, nlohmann::json> by_name;
};

// Runs `kernelevo import kernelbench ARGS --out test-cache/NAME` once for all test processes
// (ctest runs each test in its own process, several at once): under a lock, and again only when
// the arguments, the importer, the kernelevo binary or the cache home changed. The import is then
// used under a shared lock held until this process ends: a process that must import again
// (kernelevo was rebuilt meanwhile) waits for every test still reading the folder, instead of
// deleting it under them (their task.json, model.pt or reference gone mid-test).
inline Import cached_import(const std::string& name, const std::vector<std::string>& args) {
    Import c;
    c.out = fs::path(KEVO_BINARY_DIR) / "test-cache" / name;
    fs::create_directories(c.out.parent_path());
    static std::map<std::string, int> locks;  // one descriptor per import in this process (a second
    auto [at, first] = locks.emplace(name, -1);  // call converts its lock, never waits on itself)
    if (first) at->second = ::open((c.out.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    const int fd = at->second;
    if (fd >= 0) ::flock(fd, LOCK_EX);
    std::string key;
    for (const auto& a : args) key += a + "\x1f";
    for (const char* f : {"tool/kernelbench/import_kernelbench.py", "tool/kernelbench/jit_reference.cpp",
                          "python/kernelevo/model_export.py", "python/kernelevo/graph.py", "python/kernelevo/torch_task.py"})
        key += sha256_file(fs::path(KEVO_SOURCE_DIR) / f);
    std::set<fs::path> importer;  // the importer's code (kernelevo.kernelbench), in a fixed order
    for (const auto& e : fs::directory_iterator(fs::path(KEVO_SOURCE_DIR) / "python" / "kernelevo" / "kernelbench"))
        if (e.path().extension() == ".py") importer.insert(e.path());
    for (const auto& f : importer) key += f.filename().string() + sha256_file(f);
    std::error_code ec;
    key += std::to_string(fs::last_write_time(KEVO_EXE, ec).time_since_epoch().count());
    // Where the import's reference library went: a run under another KERNELEVO_CACHE_HOME (ctest
    // sets test-cache; the binary run by hand uses ~/.cache/kernelevo) builds and uses its own.
    key += "\x1f" + cache_root().string();
    key = sha256_hex(key);
    const fs::path stamp = c.out.string() + ".stamp", saved = c.out.string() + ".run.json";
    bool fresh = !(fs::exists(stamp, ec) && read_file(stamp) == key && fs::exists(saved, ec));
    if (fresh) {
        fs::remove_all(c.out, ec);
        std::vector<std::string> argv = {"import", "kernelbench", "--out", c.out.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        c.run = kernelevo(argv);
        write_file_atomic(saved, nlohmann::json{{"started", c.run.started}, {"exit_code", c.run.exit_code},
                                                {"err", c.run.err}, {"describe", c.run.describe()}}.dump());
        write_file_atomic(stamp, key);
    } else {
        auto j = nlohmann::json::parse(read_file(saved));
        c.run.started = j.value("started", false);
        c.run.exit_code = j.value("exit_code", -1);
        c.run.err = j.value("err", "");
    }
    if (fd >= 0) ::flock(fd, LOCK_SH);  // kept (the descriptor stays open) until the process exits
    try {
        c.report = nlohmann::json::parse(read_file(c.out / "import.json"));
        for (const auto& r : c.report["results"]) c.by_name[r.value("name", "")] = r;
    } catch (const std::exception&) {
    }
    return c;
}

// The dozen plus problems that must be refused, shrunk for the CPU.
inline const Import& cpu_import() {
    static const Import imp = [] {
        fs::path extra = fs::path(KEVO_BINARY_DIR) / "test-cache" / "kernelbench-extra";
        // Data-dependent control flow, and a file that is not a problem at all.
        const std::string branch =
            "import torch\nimport torch.nn as nn\n\n"
            "class Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n"
            "        if x.sum() > 0:\n            return x * 2\n        return -x\n\n"
            "def get_inputs():\n    return [torch.randn(64, 64)]\n\n"
            "def get_init_inputs():\n    return []\n";
        std::error_code ec;
        if (!fs::exists(extra / "level1" / "901_DataDependentBranch.py", ec) ||
            read_file(extra / "level1" / "901_DataDependentBranch.py") != branch)
            write_file_atomic(extra / "level1" / "901_DataDependentBranch.py", branch);
        if (!fs::exists(extra / "level1" / "902_NotAProblem.py", ec))
            write_file_atomic(extra / "level1" / "902_NotAProblem.py", "x = 1\n");
        // A problem that kills the Python process: the others of its batch still import.
        const std::string crash = "import os, signal\nimport torch.nn as nn\nclass Model(nn.Module):\n    pass\n"
                                  "def get_inputs():\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
                                  "def get_init_inputs():\n    return []\n";
        if (!fs::exists(extra / "level1" / "903_Crashes.py", ec) || read_file(extra / "level1" / "903_Crashes.py") != crash)
            write_file_atomic(extra / "level1" / "903_Crashes.py", crash);
        std::vector<std::string> args = {"--max-numel", "4096", "--jobs", "2"};
        for (const auto& f : dozen()) {
            args.push_back((problems() / f).string());
            if (f == dozen()[3]) args.push_back((extra / "level1" / "903_Crashes.py").string());
        }
        for (const char* f : {"level1/33_BatchNorm.py", "level2/66_Matmul_Dropout_Softmax.py"})
            args.push_back((problems() / f).string());
        args.push_back((extra / "level1" / "901_DataDependentBranch.py").string());
        args.push_back((extra / "level1" / "902_NotAProblem.py").string());
        return cached_import("kernelbench-cpu-suite", args);
    }();
    return imp;
}

}  // namespace kevo::kbtest
