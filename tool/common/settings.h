// The one table of KernelEvo's settings, as ccache's: a row per setting with its stable id (how a
// library's SettingError names it: "{structure.islands}"), its words (how a message says it without
// a command line), its option (the flag the commands give it; "" when none), its environment
// variable if any (every KERNELEVO_* and KEVO_* variable anything reads: who reads it, its meaning,
// default and kind) and its default where no option shows one.
//
// From it: the flags in a library's messages (the commands' message_with_flags()), the
// reading of the environment (env(EnvVar::...)), `kernelevo help environment` and
// docs/reference/environment.md's table (environment_markdown(), checked by tests/common/env_test.cpp,
// which also checks that the runtime and the Python package read only the table's names). Below
// tool/commands/ no message names a flag (ctest -R flag_free_errors): this table ties the two.
// Header-only (but environment_markdown()) so that the judge's runner reads its variables through it.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <string>

namespace kevo {

enum class EnvKind { none, setting, diagnostic, test_hook };

struct Setting {
    const char* id;          // "structure.islands"
    const char* words;       // "the number of islands"
    const char* flag = "";   // "--islands"; "": no option sets it
    const char* variable = "";  // "KERNELEVO_SANDBOX"; "": no environment variable sets it
    EnvKind kind = EnvKind::none;
    const char* read_by = "";   // who reads the variable: kernelevo, kernelevo-runner, runtime, Python package
    const char* meaning = "";   // the variable's line in the table (no '|': a markdown cell)
    const char* default_value = "";
};

// O(name, id, words, flag): a setting an option sets (its default: the option's, which --help shows).
// E(name, id, words, flag, variable, kind, read by, meaning, default): one an environment variable
// sets (an option too where flag is not ""). The E rows are the table of environment variables, in order.
#define KEVO_SETTING_LIST(O, E)                                                                                    \
    E(kCacheHome, "cache.home", "the cache folder", "", "KERNELEVO_CACHE_HOME", setting, "kernelevo",               \
      "The cache of compiled kernels, reference builds and imports",                                              \
      "`$XDG_CACHE_HOME/kernelevo`, else `~/.cache/kernelevo`")                                                    \
    E(kSandbox, "sandbox.mode", "the sandbox mode", "--sandbox", "KERNELEVO_SANDBOX", setting, "kernelevo",         \
      "How untrusted code is confined when `--sandbox` is not given: `auto`, `require` or `off` (another value is " \
      "ignored)", "`auto`")                                                                                        \
    E(kBwrap, "sandbox.bwrap", "the bubblewrap executable", "", "KERNELEVO_BWRAP", setting, "kernelevo",            \
      "The bubblewrap executable", "`bwrap` on `PATH`")                                                            \
    E(kNvcc, "compile.nvcc", "the nvcc", "", "KERNELEVO_NVCC", setting, "kernelevo",                               \
      "The nvcc that compiles candidates", "`nvcc` on `PATH`, else `/usr/local/cuda/bin/nvcc`")                     \
    E(kPython, "language.python", "the candidates' Python", "--python", "KERNELEVO_PYTHON", setting, "kernelevo",     \
      "The Python with Triton 3.x for Triton candidates (`--python` wins)", "`python3`")                            \
    E(kNcu, "profile.ncu", "Nsight Compute", "", "KERNELEVO_NCU", setting, "kernelevo",                            \
      "Nsight Compute for the search's profiles", "`ncu` on `PATH`")                                              \
    E(kProfile, "profile.program", "the kernelevo-profile program", "", "KERNELEVO_PROFILE", setting, "kernelevo",  \
      "The kernelevo-profile program the profiler runs under Nsight Compute", "beside `kernelevo`")               \
    E(kBenchDeprecated, "profile.bench", "the kernelevo-bench program", "", "KERNELEVO_BENCH", setting, "kernelevo", \
      "Deprecated name of `KERNELEVO_PROFILE` (kernelevo-profile was kernelevo-bench), read when that is unset, "    \
      "with a warning", "none")                                                                                    \
    E(kRunner, "validate.runner", "the judge", "", "KERNELEVO_RUNNER", setting, "kernelevo",                       \
      "The judge (kernelevo-runner) the validator starts", "beside `kernelevo`")                                   \
    E(kPythonDir, "python.dir", "the Python package's folder", "", "KERNELEVO_PYTHON_DIR", setting, "kernelevo",   \
      "The folder holding kernelevo's Python package (the KernelBench importer's code, `export_model`)",            \
      "the installed `share/kernelevo/python`, else the source tree's `python/`")                                  \
    E(kApiKey, "llm.api_key", "the LLM API key", "", "KERNELEVO_API_KEY", setting, "kernelevo",                    \
      "The LLM API key (never printed; `--llm-key-env` names another variable)",                                   \
      "`OPENAI_API_KEY`, or `OPENROUTER_API_KEY` for openrouter.ai")                                               \
    E(kRedisPassword, "store.redis_password", "the Redis password", "", "KERNELEVO_REDIS_PASSWORD", setting,       \
      "kernelevo", "The Redis password of a state or queue URL that carries none (never printed)", "none")         \
    E(kServeToken, "serve.token", "the token", "--token", "KERNELEVO_SERVE_TOKEN", setting, "kernelevo",           \
      "The token every request to `kernelevo serve` must carry (`--token` wins)",                                  \
      "none (then `serve` listens only on loopback)")                                                              \
    E(kLockDir, "gpu.lock_dir", "the GPU locks' folder", "", "KERNELEVO_LOCK_DIR", setting,                        \
      "kernelevo, kernelevo-runner", "Where the per-GPU locks and memory ledgers live", "`/tmp/kernelevo-locks`")  \
    E(kGpuMemoryBytes, "gpu.memory_bytes", "the GPU memory shared out", "", "KERNELEVO_GPU_MEMORY_BYTES", setting, \
      "kernelevo, kernelevo-runner", "The GPU memory the ledger shares out, if smaller than the device's",         \
      "the device's memory")                                                                                       \
    E(kGpuMemoryMarginBytes, "gpu.memory_margin_bytes", "the GPU memory kept back", "",                            \
      "KERNELEVO_GPU_MEMORY_MARGIN_BYTES", setting, "kernelevo, kernelevo-runner",                                 \
      "The GPU memory the ledger keeps back", "a tenth of the shared memory")                                      \
    E(kDevice, "worker.gpu", "the GPU", "--gpu", "KERNELEVO_DEVICE", setting, "kernelevo-runner",                  \
      "The CUDA device the judge uses (`kernelevo worker --gpu N` sets it)", "`0`")                                \
    E(kNoCpuPin, "gpu.no_cpu_pin", "no CPU pinning", "", "KERNELEVO_NO_CPU_PIN", setting, "kernelevo-runner",      \
      "Set: the judge is not pinned to the CPUs near its GPU", "pinned")                                           \
    E(kTimingDump, "runner.timing_dump", "the timing dump", "", "KEVO_TIMING_DUMP", diagnostic, "kernelevo-runner", \
      "`FILE`: the judge appends every timed set's raw per-call times to `FILE` (JSON lines)", "no dump")          \
    E(kPhaseLog, "runner.phase_log", "the phase log", "", "KEVO_PHASE_LOG", diagnostic,                            \
      "kernelevo, kernelevo-runner",                                                                               \
      "`FILE`: each judge appends its jobs' phases (start, end, the GPU lock's mode) and each holder of the GPU "   \
      "lock its holds to `FILE` (JSON lines; benchmarks/studies/gpu_busy.py reads it)", "no log")                  \
    E(kGateKernel, "runner.gate_kernel", "the gate kernel", "", "KEVO_GATE_KERNEL", test_hook, "kernelevo-runner", \
      "Set: the correctness call is gated by a spinning kernel instead of a stream-memory wait", "off")             \
    E(kFaultWallCheck, "runner.fault_wall_check", "the wall check's fault", "", "KEVO_FAULT_WALL_CHECK", test_hook, \
      "kernelevo-runner", "Set: every timed set's first wall-clock cross-check fails, so its retry is exercised",  \
      "off")                                                                                                       \
    E(kDeviceCc, "runtime.device_cc", "the dispatch architecture", "", "KERNELEVO_DEVICE_CC", setting, "runtime",  \
      "Dispatch as if the GPU were this architecture (`sm_90`, `90`), or as if there were none (`none`, `0`)",     \
      "the GPU's own")                                                                                             \
    E(kDisable, "runtime.disable", "the kernels off", "", "KERNELEVO_DISABLE", setting, "runtime",                 \
      "Set and not `0`, `false`, `off` or `no`: every optimized function calls its reference", "kernels used")     \
    E(kIncludeDir, "python.include_dir", "the ABI's include folder", "", "KERNELEVO_INCLUDE_DIR", setting,          \
      "Python package", "Where `kernelevo/abi.h` is for `kernelevo.load_op`",                                       \
      "the installed or source tree's `include`")                                                                  \
    E(kKernelbenchDir, "python.kernelbench_dir", "the importer's folder", "", "KERNELEVO_KERNELBENCH_DIR", setting, \
      "Python package", "The KernelBench importer's folder", "the installed or source tree's")                     \
    E(kProgram, "python.kernelevo", "the kernelevo program", "", "KERNELEVO", setting, "Python package",           \
      "The kernelevo program `kernelevo.load_op` asks whether a cache entry is usable",                            \
      "`kernelevo` on `PATH`, else the installed `bin/`")                                                          \
    /* The search's (evolve/search_config.h). */                                                                   \
    O(kIslands, "structure.islands", "the number of islands", "--islands")                                         \
    O(kChildren, "structure.children", "the number of children per island", "--children")                         \
    O(kBackend, "structure.backend", "the candidate language", "--backend")                                        \
    O(kGenerations, "evolution.generations", "the number of generations", "--generations")                         \
    O(kRepairAttempts, "evolution.repair_attempts", "the number of repair attempts", "--repair-attempts")          \
    O(kMigrationInterval, "evolution.migration_interval", "the migration interval", "--migration-interval")        \
    O(kMigrants, "evolution.migrants", "the number of migrants", "--migrants")                                     \
    O(kRestartAfter, "evolution.restart_after", "the generations without improvement before a restart",            \
      "--restart-after")                                                                                           \
    O(kTemperature, "evolution.temperature", "the parent selection temperature", "--temperature")                  \
    O(kMutationMode, "evolution.mode", "the mutation mode", "--mode")                                              \
    O(kInspirations, "evolution.inspirations", "the number of inspirations", "--inspirations")                     \
    O(kTuneEvals, "evolution.tune_evals", "the number of tuning evaluations", "--tune-evals")                      \
    O(kJobs, "evolution.jobs", "the number of candidates in progress at once", "--jobs")                           \
    O(kModel, "requests.model", "model", "--model")                                                                \
    O(kLlmTemperature, "requests.temperature", "the LLM's sampling temperature", "--llm-temperature")              \
    O(kMaxTokens, "requests.max_tokens", "the completion token limit", "--max-tokens")                             \
    O(kPrice, "requests.price", "the price per token", "--llm-price")                                              \
    O(kBudgetTokens, "stopping.budget_tokens", "the token budget", "--budget-tokens")                              \
    O(kBudgetUsd, "stopping.budget_usd", "the budget in US dollars", "--budget-usd")                               \
    O(kMaxTime, "stopping.max_time", "the time limit", "--max-time")                                               \
    O(kTargetSpeedup, "stopping.target_speedup", "the target speedup", "--target-speedup")                         \
    O(kTargetSol, "stopping.target_sol", "the target fraction of the speed of light", "--target-sol")              \
    O(kBatch, "batch.enabled", "batch mode", "--llm-batch")                                                        \
    O(kBatchReplies, "batch.replies", "the Batch API replies to import", "--llm-batch-replies")                    \
    O(kPrompts, "prompts.dir", "the prompt templates' folder", "--prompts")                                        \
    O(kFresh, "search.fresh", "an emptied state", "--fresh")                                                       \
    /* The search request's (workflows/search.h). */                                                               \
    O(kArch, "request.arch", "the target architecture", "--arch")                                                  \
    O(kFitnessBaseline, "request.fitness_baseline", "the fitness baseline", "--fitness-baseline")                  \
    O(kWorkers, "request.workers", "validation through workers", "--workers")                                      \
    /* The lower floors'. */                                                                                       \
    O(kLlmUrl, "llm.url", "the LLM's URL", "--llm-url")                                                            \
    O(kLlmKeyEnv, "llm.key_env", "the API key's variable", "--llm-key-env")                                        \
    O(kLlmModel, "llm.model", "the model", "--model")                                                              \
    O(kLlmPrice, "llm.price", "the price per token", "--llm-price")                                                \
    O(kLlmReplay, "llm.replay", "to replay", "--llm-replay")                                                       \
    O(kLlmParallel, "llm.parallel", "the number of requests in flight", "--llm-parallel")                          \
    O(kCompileArch, "compile.arch", "the target architecture", "--arch")                                           \
    O(kImportOut, "import.out", "the output folder", "--out")                                                      \
    O(kImportPython, "import.python", "the Python", "--python")                                                    \
    O(kImportPrecision, "import.precision", "the precision policy", "--precision")                                 \
    O(kImportNoSandbox, "import.no_sandbox", "without the sandbox", "--no-sandbox")                                \
    O(kListen, "serve.listen", "the listen address", "--listen")                                                   \
    O(kQueue, "serve.queue", "the workers' queue", "--redis")                                                      \
    O(kModelDir, "model.dir", "the model folder", "--model-dir")                                                   \
    O(kSuite, "bench.suite", "the suite", "--suite")                                                               \
    O(kBaseline, "bench.baseline", "the KernelBench baseline table", "--baseline")                                 \
    O(kState, "store.state", "state file", "--state")                                                              \
    O(kMaxEvals, "tune.max_evals", "the number of variants to validate", "--max-evals")

// Each setting by name: settings::kIslands, settings::kSandbox.
namespace settings {
#define KEVO_SETTING_O(name, id, words, flag) inline constexpr Setting name{id, words, flag};
#define KEVO_SETTING_E(name, id, words, flag, var, kind, by, meaning, dflt) \
    inline constexpr Setting name{id, words, flag, var, EnvKind::kind, by, meaning, dflt};
KEVO_SETTING_LIST(KEVO_SETTING_O, KEVO_SETTING_E)
#undef KEVO_SETTING_O
#undef KEVO_SETTING_E
}  // namespace settings

#define KEVO_SETTING_NONE(...)
#define KEVO_SETTING_ADDRESS(name, ...) &settings::name,
// Every setting, and those an environment variable sets (EnvVar::name is kEnvTable's index).
inline constexpr const Setting* kSettingTable[] = {KEVO_SETTING_LIST(KEVO_SETTING_ADDRESS, KEVO_SETTING_ADDRESS)};
inline constexpr const Setting* kEnvTable[] = {KEVO_SETTING_LIST(KEVO_SETTING_NONE, KEVO_SETTING_ADDRESS)};
#define KEVO_SETTING_ENUM(name, ...) name,
enum class EnvVar { KEVO_SETTING_LIST(KEVO_SETTING_NONE, KEVO_SETTING_ENUM) };
#undef KEVO_SETTING_ENUM
#undef KEVO_SETTING_ADDRESS
#undef KEVO_SETTING_NONE

inline constexpr const Setting& env_info(EnvVar v) { return *kEnvTable[static_cast<size_t>(v)]; }
inline constexpr const char* env_name(EnvVar v) { return env_info(v).variable; }
// The variable's value as getenv gives it: nullptr when unset.
inline const char* env(EnvVar v) { return std::getenv(env_name(v)); }

// The table of environment variables as markdown: docs/reference/environment.md's, byte for byte.
std::string environment_markdown();

}  // namespace kevo
