// The KernelBench importer's Python half of refcheck (kernelevo.kernelbench.fill refcheck_values, torch)
// against refcheck's C++ half (fill_host): both must make every generated input bit for bit alike,
// or refcheck compares the C++ reference and the Python model on different inputs.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "device/fill.h"

namespace kevo_device_test {

inline std::string run_command(const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return "cannot run " + cmd;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int rc = pclose(p);
    return rc == 0 ? out : "FAILED (" + std::to_string(rc) + "): " + out;
}

// Python `python` draws each case on torch device `device` (one process), fill_host the same; the
// bytes must be equal. Skips when the importer (torch) or the device is not there.
inline void expect_python_draws_the_host_fill(const std::string& python, const std::string& device) {
    struct Case { const char* kind; int init; double a, b; int dtype; const char* torch_dtype; };
    const Case cases[] = {
        {"randn", KEVO_INIT_RANDN, 0, 1, KEVO_FLOAT32, "float32"},   {"randn", KEVO_INIT_RANDN, 0.5, 2, KEVO_FLOAT64, "float64"},
        {"rand", KEVO_INIT_RAND, 0, 1, KEVO_FLOAT32, "float32"},     {"rand", KEVO_INIT_RAND, -2, 3, KEVO_FLOAT64, "float64"},
        {"randint", KEVO_INIT_RANDINT, -5, 7, KEVO_INT64, "int64"},  {"randint", KEVO_INIT_RANDINT, 0, 100, KEVO_INT32, "int32"},
        {"randint", KEVO_INIT_RANDINT, 0, 2, KEVO_BOOL, "bool"},     {"randint", KEVO_INIT_RANDINT, -100, 100, KEVO_INT8, "int8"},
        {"randint", KEVO_INIT_RANDINT, 0, 255, KEVO_UINT8, "uint8"}, {"ones", KEVO_INIT_ONES, 0, 1, KEVO_FLOAT32, "float32"},
        {"zeros", KEVO_INIT_ZEROS, 0, 1, KEVO_INT64, "int64"},
    };
    const std::string dir = std::string(KEVO_SOURCE_DIR) + "/python";
    const std::string probe = "import sys; sys.path.insert(0, '" + dir + "'); import torch; import kernelevo.kernelbench.fill; " +
                              (device == "cuda" ? "assert torch.cuda.is_available()" : "pass");
    if (run_command(python + " -c \"" + probe + "\" 2>&1") != "")
        GTEST_SKIP() << "the importer's Python (torch" << (device == "cuda" ? " with CUDA" : "") << ") is not usable here";
    const int64_t n = 300007;
    const std::string prefix = ::testing::TempDir() + "kevo_fill_py_" + device;
    std::string script = "import sys, torch; sys.path.insert(0, '" + dir + "'); from kernelevo.kernelbench import fill as kb\n";
    size_t k = 0;
    for (const Case& c : cases) {
        char line[512];
        std::snprintf(line, sizeof line,
                      "open('%s%zu.bin', 'wb').write(kb.refcheck_values({'kind': '%s', 'seed': %zu, 'a': %.17g, 'b': %.17g}, "
                      "[%lld], torch.%s, '%s').cpu().numpy().tobytes())\n",
                      prefix.c_str(), k, c.kind, 1 + 1000 * k, c.a, c.b, static_cast<long long>(n), c.torch_dtype, device.c_str());
        script += line;
        ++k;
    }
    const std::string script_file = prefix + ".py";
    std::ofstream(script_file) << script;
    ASSERT_EQ(run_command(python + " " + script_file + " 2>&1"), "");
    k = 0;
    for (const Case& c : cases) {
        const std::string file = prefix + std::to_string(k) + ".bin";
        std::ifstream f(file, std::ios::binary);
        std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::string want(static_cast<size_t>(n * kevo_dtype_size(c.dtype)), '\0');
        kevo_device::fill_host(want.data(), c.dtype, n, c.init, c.a, c.b, 1 + 1000 * k++);
        ASSERT_EQ(got.size(), want.size()) << c.kind;
        size_t first = 0;
        while (first < got.size() && got[first] == want[first]) ++first;
        EXPECT_EQ(first, got.size()) << c.kind << " as " << c.torch_dtype << " on " << device << ": first differing byte "
                                     << first;
        std::remove(file.c_str());
    }
    std::remove(script_file.c_str());
}

}  // namespace kevo_device_test
