// `kernelevo search`'s command line: its options (shared with bench through add_search_options), their
// groups in --help, and the subcommand; the use case workflows::run_search() does the work.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baseline/baseline.h"
#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/commands.h"
#include "commands/llm_options.h"
#include "commands/search_command.h"
#include "common/error.h"
#include "evolve/prompts.h"
#include "evolve/search_config.h"
#include "language/registry.h"

namespace kevo {
namespace {

using evolve::SearchArgs;

// The search's options in groups, as `kernelevo search --help` shows them (bench has them too).
void group_search_options(CLI::App& cmd) {
    static const std::vector<std::pair<const char*, std::vector<const char*>>> groups = {
        {"Evolution", {"--generations", "--islands", "--children", "--repair-attempts", "--migration-interval", "--migrants",
                       "--restart-after", "--temperature", "--mode", "--inspirations", "--seed", "--schedule", "--jobs",
                       "--tune-evals", "--prompts", "--backend", "--initial"}},
        {"LLM", {"--llm-temperature", "--max-tokens", "--replay"}},
        {"Budget", {"--budget-tokens", "--budget-usd", "--max-time", "--target-speedup", "--target-sol"}},
        {"Validation", {"--arch", "--python", "--timeout", "--timing-trials", "--workers", "--no-profile"}},
        {"Output", {"--json", "--quiet", "--verbose"}},
    };
    for (const auto& [group, names] : groups)
        for (const char* name : names)
            if (CLI::Option* o = cmd.get_option_no_throw(name)) o->group(group);
}

// The evolution's shape, its candidate languages (from the registry) and when it stops.
void add_evolution_options(CLI::App& cmd, SearchArgs& a) {
    cmd.add_option("--arch", a.arch, "Target architecture, e.g. sm_90 (default: the local GPU's, else sm_90)");
    cmd.add_option("--backend", a.cfg.structure.backend, evolve::backend_help())
        ->capture_default_str()
        ->check(CLI::IsMember(evolve::backend_choices()));
    // `kernelevo bench` has its own --python (PyTorch for --torch-compile) and passes it on.
    if (!cmd.get_option_no_throw("--python") && !language::python_help().empty())
        cmd.add_option("--python", a.python, language::python_help());
    cmd.add_option("--generations", a.cfg.evolution.generations, "Evolution generations after the seed")->capture_default_str();
    cmd.add_option("--islands", a.cfg.structure.islands, "Islands (independent populations)")->capture_default_str();
    cmd.add_option("--children", a.cfg.structure.children, "Candidates per island per generation")->capture_default_str();
    cmd.add_option("--repair-attempts", a.cfg.evolution.repair_attempts, "Repair attempts for a failing candidate")->capture_default_str();
    cmd.add_option("--migration-interval", a.cfg.evolution.migration_interval, "Generations between migrations (0: never)")->capture_default_str();
    cmd.add_option("--migrants", a.cfg.evolution.migrants, "Programs each island sends to the next at a migration")->capture_default_str();
    cmd.add_option("--restart-after", a.cfg.evolution.restart_after, "Restart an island after this many generations without improvement (0: never)")->capture_default_str();
    cmd.add_option("--temperature", a.cfg.evolution.temperature, "Parent selection temperature (1: fitness-proportional; lower: greedier)")->capture_default_str()->check(cli::FiniteNumber);
    cmd.add_option("--mode", a.cfg.evolution.mode, "Mutation: full (rewrite), diff (SEARCH/REPLACE edits) or mixed")->capture_default_str()->check(CLI::IsMember({"full", "diff", "mixed"}));
    cmd.add_option("--inspirations", a.cfg.evolution.inspirations, "Other programs shown in each mutation prompt")->capture_default_str();
    cmd.add_option("--seed", a.cfg.structure.seed, "Random seed (selection, model choice, request seeds)")->capture_default_str()->check(cli::Seed);
    cmd.add_option("--max-time", a.max_time, "Stop after this wall time (e.g. 900, 30m, 2h)");
    cmd.add_option("--target-speedup", a.cfg.stopping.target_speedup, "Stop once a kernel is this much faster than the reference")->check(cli::FiniteNumber)->check(CLI::PositiveNumber);
    cmd.add_option("--target-sol", a.cfg.stopping.target_sol,
                    "Stop once a kernel reaches this fraction of the speed of light (e.g. 0.9: its time is within 1/0.9 of "
                    "the floor set by the bytes it must move and, where the task gives flops, the arithmetic)")
        ->check(cli::FiniteNumber);
    cmd.add_option("--tune-evals", a.cfg.evolution.tune_evals,
                    "Validations spent tuning the KEVO_TUNABLE parameters of a promising candidate, without the LLM (0: never)")
        ->capture_default_str();
}

// What the fitness is measured against, profiling and the prompts.
void add_fitness_options(CLI::App& cmd, SearchArgs& a) {
    cmd.add_flag("--no-profile", a.no_profile, "Do not profile new best kernels with Nsight Compute (ncu)");
    // issue 35 (tool/baseline):
    cmd.add_option("--fitness-baseline", a.fitness_baseline,
                   "What the fitness is a speedup over: reference (the task's LibTorch reference, measured with every "
                   "candidate), compile (torch.compile, Inductor default mode), eager (PyTorch eager) or aoti (AOTInductor: "
                   "torch.export + aoti_compile_and_package, as a LibTorch C++ deployment runs it) of the task's "
                   "PyTorch module, timed once before the search on the timed shapes (exit 2 when it cannot be)")
        ->capture_default_str()
        ->check(CLI::IsMember([] { auto k = baseline::kinds(); k.insert(k.begin(), "reference"); return k; }()));
    cmd.add_flag("--aoti", a.aoti,
                 "Also time AOTInductor (torch.export, then torch._inductor.aoti_compile_and_package per timed shape set: what a "
                 "C++ user deploying through LibTorch runs) beside eager and torch.compile; opt-in because its ahead-of-time "
                 "compilation takes tens of seconds per shape set (implied by --fitness-baseline aoti)");
    cmd.add_flag("--no-baselines", a.no_baselines,
                 "Do not time the PyTorch baselines (eager, torch.compile) of the task's PyTorch module for the summaries "
                 "(they then say \"not run: --no-baselines\")");
    std::string templates;
    for (const std::string& name : evolve::Prompts::names()) templates += (templates.empty() ? "" : " ") + name + ".md";
    cmd.add_option("--prompts", a.prompts, "Directory overriding prompt templates (" + templates + ")");
}

// How candidates are run and judged, the LLM's settings and the output.
void add_run_options(CLI::App& cmd, SearchArgs& a) {
    cmd.add_option("--jobs", a.cfg.evolution.jobs, "Candidates in progress at once (0: all of a generation, at least 2 per live worker with --workers)")->capture_default_str();
    cmd.add_option("--schedule", a.schedule,
                    "steady: a new candidate starts as soon as one finishes, parents from the archive as it stands "
                    "(no generation barrier; not reproducible under --seed); generations: each generation waits for "
                    "its slowest candidate (reproducible under --seed)")
        ->capture_default_str()
        ->check(CLI::IsMember({"steady", "generations"}));
    cmd.add_option("--workers", a.workers,
                    "Validate through `kernelevo worker`s on a Redis queue instead of the local GPU: "
                    "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME] (the workers' --redis)")
        ->check(cli::NonEmpty);
    cmd.add_option("--llm-temperature", a.cfg.requests.temperature, "Sampling temperature of the LLM (0 to 2)")
        ->capture_default_str()->check(cli::FiniteNumber);
    cmd.add_option("--max-tokens", a.cfg.requests.max_tokens, "Completion token limit per LLM request")->capture_default_str();
    cmd.add_option("--timeout", a.timeout, "Watchdog for running one candidate, in seconds")->capture_default_str()
        ->check(cli::Seconds);
    cmd.add_option("--timing-trials", a.timing_trials, "Timed calls per shape set, at most (fewer once the time's 95% interval is within +-0.5%)")->capture_default_str()->check(CLI::Range(1, 100000));
    llm::add_llm_options(cmd, a.llm);
    cmd.add_option("--replay", a.llm.replay, "Answer LLM requests from a recorded transcript (same as --llm-replay)")
        ->check(CLI::ExistingFile.description(""))->excludes("--llm-replay");  // one transcript: both would be one lost
    cmd.add_flag("--json", a.json, "Print the final summary as one JSON object on stdout (schema: README, JSON output)");
    cli::add_verbosity_flags(cmd, "Print a progress line after every evaluation, not one per generation (no live line)");
}

// The Batch API mode (--llm-batch).
void add_batch_options(CLI::App& cmd, SearchArgs& a) {
    cmd.add_flag("--llm-batch", a.cfg.batch.enabled,
                  "Send no LLM request: write the pending ones as an OpenAI Batch API input file (in --llm-batch-dir) "
                  "and stop with the state saved (exit code 3); run `kernelevo llm batch submit FILE`, then the same "
                  "search again with --llm-batch-replies. Needs exactly one --model")
        ->group("LLM");
    cmd.add_option("--llm-batch-replies", a.cfg.batch.replies,
                    "Batch API output or error files (JSONL, e.g. from `kernelevo llm batch fetch`) to import first; "
                    "repeatable. A reply stored before is skipped, never counted twice")
        ->check(CLI::ExistingFile.description(""))->type_name("FILE")->allow_extra_args(false)->group("LLM");
    cmd.add_option("--llm-batch-dir", a.batch_dir, "Where --llm-batch writes its files (NAME-ARCH-batch-N.jsonl)")
        ->capture_default_str()->type_name("DIR")->group("LLM");
}

}  // namespace

void evolve::add_search_options(CLI::App& cmd, SearchArgs& a) {
    add_evolution_options(cmd, a);
    add_fitness_options(cmd, a);
    add_run_options(cmd, a);
    add_batch_options(cmd, a);
    group_search_options(cmd);
}

void register_search_command(CLI::App& app, int& rc) {
    auto a = std::make_shared<SearchArgs>();
    CLI::App* cmd = app.add_subcommand(
        "search",
        "Search for a fast kernel with an LLM-driven evolution. An LLM writes and mutates candidate kernels; every "
        "candidate is compiled, checked against the task's reference and timed on the local GPU (or on workers); the "
        "best is written to the cache directory. The run is stored as it goes: run the same command again to resume "
        "it.\nExit codes: 0 finished with a kernel, 1 stopped without one or interrupted, 2 bad usage or no GPU, 3 "
        "stopped to wait for Batch API replies (--llm-batch).");
    auto m = std::make_shared<ModelSearchArgs>();
    CLI::Option* task = cmd->add_option("--task", a->task, "Task file (JSON)");
    CLI::Option* model_dir =
        cmd->add_option("--model-dir", m->dir,
                        "A model folder (kernelevo.export_model(), or `kernelevo import kernelbench` of a level-3 problem): "
                        "search each of its regions (plan.json, status task) with the options given here, --max-time split "
                        "by the regions' share of the model's time; state, logs and summary.json in DIR/search/, kernels in "
                        "--out (default DIR/cache). Running it again skips the regions done and resumes the others")
            ->type_name("DIR")
            ->check(cli::NonEmpty)
            ->excludes(task);
    cmd->add_option("--model-jobs", m->jobs, "--model-dir: region searches at once (they share the GPU through its lock)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd->add_flag("--dry-run", m->dry_run, "--model-dir: print each region's share and budget, run nothing");
    cmd->add_option("--region", m->regions,
                    "--model-dir: search only this region (its name in plan.md, e.g. mlp.c_fc, or its task name); repeat "
                    "for several. The budget is split over the regions named; the others keep their earlier results")
        ->type_name("NAME");
    cmd->add_option("--out", a->out,
                    "Cache directory to write the best kernel to (NAME/sm_XX.cu + .json); required with --task (with "
                    "--model-dir: DIR/cache)");
    cmd->add_option("--state", a->state,
                    "State store: an SQLite file, or redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME] "
                    "for a run that spans machines (port 6379, DB 0 and prefix kernelevo by default; every key "
                    "of the run starts with {NAME}:, so runs with different prefixes share a server; password "
                    "also from $KERNELEVO_REDIS_PASSWORD). Rerunning with the same state resumes "
                    "(default: a file per task and architecture under the kernelevo cache)")
        ->check(cli::NonEmpty);
    cmd->add_flag("--fresh", a->fresh,
                  "Discard the state store's previous run and start over (Redis: deletes the prefix's keys)");
    cmd->add_option("--initial", a->initial,
                    "Seed kernel (" + language::kernel_file_kinds() + "); default: the LLM writes a straightforward one");
    evolve::add_search_options(*cmd, *a);
    cli::set_examples(*cmd, {
        {"Search for 30 minutes at most with one model (the key in $OPENROUTER_API_KEY)",
         "kernelevo search --task gelu/task.json --out kernels --model google/gemini-3-flash --max-time 30m"},
        {"Two models, a budget of 2 US dollars, stop at 3x",
         "kernelevo search --task gelu/task.json --out kernels --model openai/gpt-5-mini:3 --model z-ai/glm-5:1 "
         "--budget-usd 2 --target-speedup 3"},
        {"A local model served by vLLM, islands taking turns over the candidate languages",
         "kernelevo search --task gelu/task.json --out kernels --llm-url http://localhost:8000/v1 --model qwen3-coder "
         "--backend both --islands 4"},
        {"A whole model, region by region (kernelevo.export_model()), 2 hours split by time share",
         "kernelevo search --model-dir gpt_block --model google/gemini-3-flash --max-time 2h"},
        {"Resume a run that was interrupted: the same command again",
         "kernelevo search --task gelu/task.json --out kernels --model google/gemini-3-flash --max-time 30m"},
        {"Half price through the Batch API: write the requests, submit them, import the replies",
         "kernelevo search --task gelu/task.json --out kernels --model openai/gpt-5-mini --llm-batch"},
    });
    for (const char* name : {"--model-dir", "--model-jobs", "--dry-run", "--region"}) cmd->get_option(name)->group("Model");
    cmd->callback([a, m, cmd, task, model_dir, &rc] {
        // The settings parsed and checked once, before anything else, as a parse error would be.
        const evolve::SearchConfig cfg = workflows::search_config(*a);
        if (model_dir->count() > 0) {
            rc = run_model_search(*a, cfg, *m, *cmd);
            return;
        }
        if (task->count() == 0) throw UsageError("search: give --task FILE (one task) or --model-dir DIR (a model's regions)");
        if (a->out.empty()) throw UsageError("search: --out is required with --task (the cache directory for the best kernel)");
        for (const char* name : {"--model-jobs", "--dry-run", "--region"})
            if (cmd->get_option(name)->count() > 0) throw UsageError(std::string(name) + " is for --model-dir only");
        const workflows::SearchOutcome outcome = workflows::run_search(*a, cfg);
        if (!outcome.summary.is_null()) std::cout << outcome.summary.dump(2) << std::endl;  // --json
        rc = outcome.rc;
    });
}

}  // namespace kevo
