// Shared by the KernelBench tests: the problems folder, the kernelevo command, and one CPU import
// of a dozen problems of different kinds (done once per test run, reused by the bench tests).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "common/process.h"

namespace kevo::kbtest {

// tests/data/kernelbench: copies of KernelBench problems (KERNELBENCH_DIR overrides it).
inline fs::path problems() {
    if (const char* d = std::getenv("KERNELBENCH_DIR")) return d;
    return fs::path(KEVO_KERNELBENCH_PROBLEMS);
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

struct CpuImport {
    fs::path out;
    ProcessResult run;
    nlohmann::json report;
    std::map<std::string, nlohmann::json> by_name;
};

// Imports the dozen plus problems that must be refused, once (under the test cache).
inline const CpuImport& cpu_import() {
    static CpuImport* imp = [] {
        auto* c = new CpuImport;
        c->out = fs::path(KEVO_BINARY_DIR) / "test-cache" / "kernelbench-cpu-suite";
        std::error_code ec;
        fs::remove_all(c->out, ec);
        fs::path extra = fs::path(KEVO_BINARY_DIR) / "test-cache" / "kernelbench-extra";
        fs::remove_all(extra, ec);
        // Data-dependent control flow, and a file that is not a problem at all.
        write_file_atomic(extra / "level1" / "901_DataDependentBranch.py",
                          "import torch\nimport torch.nn as nn\n\n"
                          "class Model(nn.Module):\n"
                          "    def __init__(self):\n        super().__init__()\n\n"
                          "    def forward(self, x):\n"
                          "        if x.sum() > 0:\n            return x * 2\n        return -x\n\n"
                          "def get_inputs():\n    return [torch.randn(64, 64)]\n\n"
                          "def get_init_inputs():\n    return []\n");
        write_file_atomic(extra / "level1" / "902_NotAProblem.py", "x = 1\n");
        std::vector<std::string> args = {"import", "kernelbench", "--out", c->out.string(), "--max-numel", "4096", "--jobs", "2"};
        for (const auto& f : dozen()) args.push_back((problems() / f).string());
        for (const char* f : {"level1/33_BatchNorm.py", "level2/66_Matmul_Dropout_Softmax.py"})
            args.push_back((problems() / f).string());
        args.push_back((extra / "level1" / "901_DataDependentBranch.py").string());
        args.push_back((extra / "level1" / "902_NotAProblem.py").string());
        c->run = kernelevo(args);
        try {
            c->report = nlohmann::json::parse(read_file(c->out / "import.json"));
            for (const auto& r : c->report["results"]) c->by_name[r.value("name", "")] = r;
        } catch (const std::exception&) {
        }
        return c;
    }();
    return *imp;
}

}  // namespace kevo::kbtest
