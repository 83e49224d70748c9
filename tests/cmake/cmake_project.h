// The fixture of tests/cmake's tests: a copy of tests/cmake/project configured and built by the real
// `cmake` in a temporary directory, and helpers (shared by cmake_test.cpp and cmake_search_test.cpp).
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "common/fs.h"
#include "common/process.h"
#include "task/task.h"

namespace kevo::cmake_test {

namespace fs = std::filesystem;

inline const fs::path kSource = KEVO_SOURCE_DIR;
inline const fs::path kBinary = KEVO_BINARY_DIR;

struct Outcome {
    int rc;
    std::string out;
};

inline Outcome run(std::vector<std::string> argv, const fs::path& cwd = {}, std::map<std::string, std::string> env = {}) {
    ProcessOptions o;
    o.argv = std::move(argv);
    o.cwd = cwd;
    o.timeout_s = 900;
    o.env = std::move(env);
    o.new_session = true;
    ProcessResult r = run_process(o);
    return {r.ok() ? 0 : (r.exit_code ? r.exit_code : 99), r.out + r.err};
}

inline std::string scale_kernel(float factor) {
    return "#include <cuda_runtime.h>\n#include <kernelevo/abi.h>\n"
           "__global__ void scale_kernel(const float* x, float* y, long long n) {\n"
           "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) y[i] = x[i] * " + std::to_string(factor) + "f;\n}\n"
           "extern \"C\" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {\n"
           "  long long n = kevo_numel(&in[0]);\n"
           "  scale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);\n"
           "  return cudaGetLastError() != cudaSuccess;\n}\n";
}

// The metadata of a hand-written entry for task `t` on `arch`, as the tests store them.
inline cache::EntryMeta manual_entry(const Task& t, const std::string& arch) {
    cache::EntryMeta m;
    m.function = t.name;
    m.arch = arch;
    m.task_hash = t.hash();
    m.reference_hash = t.reference_hash();
    m.origin = "manual";
    m.speedup = 2.5;
    m.date = "2026-12-02T10:00:00Z";
    return m;
}

// `cmake` configuring the project in `src` into `build` with Ninja, nvcc and the build tree's KernelEvo.
// When KernelEvo's own build compiles through ccache, so do the projects: each test builds a fresh
// copy in a folder of its own under the temporary directory, which is ccache's base_dir, so a file
// compiled by an earlier test (the same source, flags and headers) is a cache hit. Only the compiler
// runs are cached: CMake, Ninja and what they decide to rebuild are the same.
inline std::vector<std::string> configure_command(const fs::path& src, const fs::path& build) {
    std::vector<std::string> argv = {KEVO_CMAKE_COMMAND, "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                                     "-DCMAKE_MAKE_PROGRAM=" KEVO_MAKE_PROGRAM,
                                     "-DCMAKE_CUDA_COMPILER=" KEVO_CUDA_COMPILER, "-DCMAKE_BUILD_TYPE=Release",
                                     "-DKernelEvo_DIR=" + kBinary.string()};
#ifdef KEVO_TEST_CCACHE
    const std::string launcher =
        "/usr/bin/env;CCACHE_BASEDIR=" + fs::temp_directory_path().string() + ";" KEVO_TEST_CCACHE;
    for (const char* lang : {"C", "CXX", "CUDA"})
        argv.push_back(std::string("-DCMAKE_") + lang + "_COMPILER_LAUNCHER=" + launcher);
#endif
    return argv;
}

class CMakeProject : public ::testing::Test {
protected:
    void SetUp() override {
        tmp = std::make_unique<TempDir>("kevo-cmake-test");
        src = tmp->path() / "src";
        build = tmp->path() / "build";
        cache_dir = src / "kernels";
        fs::copy(kSource / "tests" / "cmake" / "project", src, fs::copy_options::recursive);
    }
    Outcome configure(std::vector<std::string> extra = {}) {
        std::vector<std::string> argv = configure_command(src, build);
        argv.push_back("-DKEVO_TEST_CACHE_DIR=" + cache_dir.string());
        argv.insert(argv.end(), extra.begin(), extra.end());
        Outcome r = run(argv);
        last = r.out;
        return r;
    }
    Outcome build_all() { return run({KEVO_CMAKE_COMMAND, "--build", build.string(), "--", "-j2"}); }
    Task task(const std::string& fn) { return load_task(build / "kernelevo" / fn / "task.json"); }
    nlohmann::json lookup(const std::string& fn) {
        return nlohmann::json::parse(read_file(build / "kernelevo" / fn / "lookup.json"));
    }
    void store(const std::string& arch, const std::string& source, const fs::path& dir = {}) {
        cache::store(dir.empty() ? cache_dir : dir, source, manual_entry(task("scale"), arch));
    }
    std::unique_ptr<TempDir> tmp;
    fs::path src, build, cache_dir;
    std::string last;
};

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// The Python that loads the operator library: $KEVO_PYTHON, else /usr/bin/python3, else python3 on
// PATH, the first that imports torch ("" when none does). Its torch's CMake prefix goes to `prefix`
// (the library must be built against that LibTorch: the C++ ABI must match).
inline std::string python_with_torch(std::string& prefix) {
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("KEVO_PYTHON")) candidates.push_back(p);
    candidates.push_back("/usr/bin/python3");
    candidates.push_back("python3");
    for (const std::string& py : candidates) {
        Outcome r = run({py, "-c", "import torch; print(torch.utils.cmake_prefix_path)"});
        if (r.rc != 0) continue;
        prefix = r.out.substr(0, r.out.find('\n'));
        return py;
    }
    return "";
}

}  // namespace kevo::cmake_test
