// Every KERNELEVO_* and KEVO_* environment variable KernelEvo reads: one table (name, who reads it,
// meaning, default, kind). The tool and its runner read them through env(EnvVar::...); the runtime
// users link (runtime/, below every floor of tool/) and the Python package read theirs directly,
// and tests/common/env_test.cpp checks that their names are the table's. README.md's table of
// environment variables is environment_markdown() (`kernelevo help environment`), checked by the
// same test. Header-only so that the runner, which links no kevo_common, reads through it too.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <string>

namespace kevo {

enum class EnvKind { setting, diagnostic, test_hook };

// X(id, name, kind, read by, meaning, default). No '|' in the text: it is a markdown table's cell.
#define KEVO_ENV_LIST(X)                                                                                              \
    X(kCacheHome, "KERNELEVO_CACHE_HOME", setting, "kernelevo",                                                       \
      "The cache of compiled kernels, reference builds and imports", "`$XDG_CACHE_HOME/kernelevo`, else `~/.cache/kernelevo`") \
    X(kSandbox, "KERNELEVO_SANDBOX", setting, "kernelevo",                                                            \
      "How untrusted code is confined when `--sandbox` is not given: `auto`, `require` or `off` (another value is ignored)", "`auto`") \
    X(kBwrap, "KERNELEVO_BWRAP", setting, "kernelevo", "The bubblewrap executable", "`bwrap` on `PATH`")               \
    X(kNvcc, "KERNELEVO_NVCC", setting, "kernelevo", "The nvcc that compiles candidates",              \
      "`nvcc` on `PATH`, else `/usr/local/cuda/bin/nvcc`")                                                            \
    X(kPython, "KERNELEVO_PYTHON", setting, "kernelevo", "The Python with Triton 3.x for Triton candidates (`--python` wins)", "`python3`") \
    X(kNcu, "KERNELEVO_NCU", setting, "kernelevo", "Nsight Compute for the search's profiles", "`ncu` on `PATH`")   \
    X(kProfile, "KERNELEVO_PROFILE", setting, "kernelevo", "The kernelevo-profile program the profiler runs under Nsight Compute", \
      "beside `kernelevo`")                                                                                           \
    X(kBenchDeprecated, "KERNELEVO_BENCH", setting, "kernelevo",                                                      \
      "Deprecated name of `KERNELEVO_PROFILE` (kernelevo-profile was kernelevo-bench), read when that is unset, with a warning", "none") \
    X(kRunner, "KERNELEVO_RUNNER", setting, "kernelevo", "The judge (kernelevo-runner) the validator starts", "beside `kernelevo`") \
    X(kPythonDir, "KERNELEVO_PYTHON_DIR", setting, "kernelevo",                                                       \
      "The folder holding kernelevo's Python package (the KernelBench importer's code, `export_model`)",              \
      "the installed `share/kernelevo/python`, else the source tree's `python/`")                                      \
    X(kApiKey, "KERNELEVO_API_KEY", setting, "kernelevo",                                                             \
      "The LLM API key (never printed; `--llm-key-env` names another variable)", "`OPENAI_API_KEY`, or `OPENROUTER_API_KEY` for openrouter.ai") \
    X(kRedisPassword, "KERNELEVO_REDIS_PASSWORD", setting, "kernelevo",                                               \
      "The Redis password of a state or queue URL that carries none (never printed)", "none")                        \
    X(kServeToken, "KERNELEVO_SERVE_TOKEN", setting, "kernelevo",                                                     \
      "The token every request to `kernelevo serve` must carry (`--token` wins)", "none (then `serve` listens only on loopback)") \
    X(kLockDir, "KERNELEVO_LOCK_DIR", setting, "kernelevo, kernelevo-runner",                                        \
      "Where the per-GPU locks and memory ledgers live", "`/tmp/kernelevo-locks`")                                    \
    X(kGpuMemoryBytes, "KERNELEVO_GPU_MEMORY_BYTES", setting, "kernelevo, kernelevo-runner",                         \
      "The GPU memory the ledger shares out, if smaller than the device's", "the device's memory")                   \
    X(kGpuMemoryMarginBytes, "KERNELEVO_GPU_MEMORY_MARGIN_BYTES", setting, "kernelevo, kernelevo-runner",            \
      "The GPU memory the ledger keeps back", "a tenth of the shared memory")                                       \
    X(kDevice, "KERNELEVO_DEVICE", setting, "kernelevo-runner",                                                       \
      "The CUDA device the judge uses (`kernelevo worker --gpu N` sets it)", "`0`")       \
    X(kNoCpuPin, "KERNELEVO_NO_CPU_PIN", setting, "kernelevo-runner",                                                 \
      "Set: the judge is not pinned to the CPUs near its GPU", "pinned")                                              \
    X(kTimingDump, "KEVO_TIMING_DUMP", diagnostic, "kernelevo-runner",                                                \
      "`FILE`: the judge appends every timed set's raw per-call times to `FILE` (JSON lines)", "no dump")            \
    X(kPhaseLog, "KEVO_PHASE_LOG", diagnostic, "kernelevo, kernelevo-runner",                                        \
      "`FILE`: each judge appends its jobs' phases (start, end, the GPU lock's mode) and each holder of the GPU lock "  \
      "its holds to `FILE` (JSON lines; benchmarks/studies/gpu_busy.py reads it)", "no log")                          \
    X(kGateKernel, "KEVO_GATE_KERNEL", test_hook, "kernelevo-runner",                                                 \
      "Set: the correctness call is gated by a spinning kernel instead of a stream-memory wait", "off")               \
    X(kFaultWallCheck, "KEVO_FAULT_WALL_CHECK", test_hook, "kernelevo-runner",                                        \
      "Set: every timed set's first wall-clock cross-check fails, so its retry is exercised", "off")                 \
    X(kDeviceCc, "KERNELEVO_DEVICE_CC", setting, "runtime",                                                           \
      "Dispatch as if the GPU were this architecture (`sm_90`, `90`), or as if there were none (`none`, `0`)", "the GPU's own") \
    X(kDisable, "KERNELEVO_DISABLE", setting, "runtime",                                                              \
      "Set and not `0`, `false`, `off` or `no`: every optimized function calls its reference", "kernels used")      \
    X(kIncludeDir, "KERNELEVO_INCLUDE_DIR", setting, "Python package",                                                \
      "Where `kernelevo/abi.h` is for `kernelevo.load_op`", "the installed or source tree's `include`")              \
    X(kKernelbenchDir, "KERNELEVO_KERNELBENCH_DIR", setting, "Python package",                                        \
      "The KernelBench importer's folder", "the installed or source tree's")

enum class EnvVar {
#define KEVO_ENV_ID(id, name, kind, reader, meaning, dflt) id,
    KEVO_ENV_LIST(KEVO_ENV_ID)
#undef KEVO_ENV_ID
};

struct EnvInfo {
    EnvVar var;
    const char* id;  // "kCacheHome": how the tool names it (EnvVar::kCacheHome)
    const char* name;
    EnvKind kind;
    const char* read_by;
    const char* meaning;
    const char* default_value;
};

inline constexpr EnvInfo kEnvTable[] = {
#define KEVO_ENV_ROW(id, name, kind, reader, meaning, dflt) {EnvVar::id, #id, name, EnvKind::kind, reader, meaning, dflt},
    KEVO_ENV_LIST(KEVO_ENV_ROW)
#undef KEVO_ENV_ROW
};

inline constexpr const EnvInfo& env_info(EnvVar v) { return kEnvTable[static_cast<size_t>(v)]; }
inline constexpr const char* env_name(EnvVar v) { return env_info(v).name; }

// The variable's value as getenv gives it: nullptr when unset.
inline const char* env(EnvVar v) { return std::getenv(env_name(v)); }

// The table as markdown: README.md's table of environment variables, byte for byte.
std::string environment_markdown();

}  // namespace kevo
