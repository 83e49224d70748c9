// `kernelevo import kernelbench FILE.py... --out DIR` (the import itself: kernelbench/kernelbench.h).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/log.h"
#include "cli/validators.h"
#include "task/task.h"
#include "commands/commands.h"
#include "kernelbench/kernelbench.h"

namespace kevo {

namespace {

// --max-output-gib: the bound of what a problem's sandbox writes (kernelbench.h, max_output_bytes).
void add_output_bound_option(CLI::App& kb, const std::shared_ptr<kernelbench::ImportOptions>& o) {
    kb.add_option_function<double>(
          "--max-output-gib", [o](double gib) { o->max_output_bytes = static_cast<int64_t>(gib * (1LL << 30)); },
          "GiB a problem's sandbox may write to its private folder (on the disk of --out): each file and all "
          "together; a problem that writes more fails with the reason (default: half the disk's free space "
          "shared by the problems run at once, at most 64)")
        ->check(cli::FiniteNumber)
        ->check(CLI::PositiveNumber);
}

// --regions and --whole: a problem as a model folder of region tasks, or as one task.
void add_model_flags(CLI::App& kb, const std::shared_ptr<kernelbench::ImportOptions>& o) {
    auto* regions = kb.add_flag_callback(
        "--regions", [o] { o->regions = 1; },
        "Import every problem as a whole model (the default for problems under a folder "
        "named level3): OUT/NAME/ becomes a model folder (plan.json, plan.md, regions/TASK/) "
        "made by the Python helper's export_model: the model traced, each region's share "
        "of its time measured, one task per region worth a kernel, regions that cannot be "
        "imported faithfully (BatchNorm or Dropout in training mode, ...) left in PyTorch "
        "with their reason; next: kernelevo search --model-dir OUT/NAME");
    auto* whole = kb.add_flag_callback("--whole", [o] { o->regions = 0; },
                                       "Import every problem as one task for its whole forward, level 3 included");
    regions->excludes(whole);
    whole->excludes(regions);
}

}  // namespace

void register_import_command(CLI::App& app, int& rc) {
    auto o = std::make_shared<kernelbench::ImportOptions>();
    auto json = std::make_shared<bool>(false);
    CLI::App* imp = app.add_subcommand("import", "Import tasks from a benchmark (kernelbench)");
    cli::set_examples(*imp, {
        {"Import KernelBench's level 1 into a suite", "kernelevo import kernelbench KernelBench/level1 --out suite"},
        {"Smaller problems for a small GPU, the report as JSON",
         "kernelevo import kernelbench KernelBench/level1 --out suite --max-numel 1000000 --json"},
        {"Level 3: each model as a folder of region tasks", "kernelevo import kernelbench KernelBench/level3 --out models"},
    });
    imp->require_subcommand(1);
    CLI::App* kb = imp->add_subcommand(
        "kernelbench",
        "Turn KernelBench problems into task directories that validate without Python. A problem is a Model, "
        "get_inputs and get_init_inputs; the model is built as KernelBench builds it (seed 42, constructed on the CPU, then moved), "
        "traced to TorchScript (model.pt) and run by one generic C++ reference built once per suite; its parameters "
        "and buffers become file inputs, random inputs keep get_inputs()'s distribution. Each import verifies "
        "itself (the C++ reference on the recorded inputs against the Python model, on the GPU when this "
        "kernelevo's LibTorch has CUDA, else on the CPU). Problems that cannot be imported faithfully are refused "
        "with a reason. Each problem's Python runs in a sandbox of its own like a candidate's compile (bubblewrap: no "
        "network, writes only to a private folder of its own and a private /tmp, never to --out, no home directory, "
        "allowlisted environment, Python and the problem files read-only, the GPU's device nodes when importing on "
        "the GPU; --no-sandbox to opt out); kernelevo itself writes the suite: the shared reference (its sha256 "
        "recorded beside it and checked before every build), and each task from its checked result, so a problem "
        "cannot touch another's task, and a task is the same whatever batch it was imported with. On the GPU each "
        "problem's Python holds the GPU lock that validations take, so problems take turns there and never disturb "
        "a validation's timing. A line per problem and phase shows where the time goes. "
        "Needs PyTorch at import time only. Writes OUT/NAME/{task.json,model.pt,*.bin,problem.py,graph.py}, "
        "OUT/kernelbench_reference.cpp{,.sha256} and OUT/import.json. Exit 0 when at least one problem was imported and none failed (refusals are "
        "not failures), 1 otherwise, 2 on bad usage or setup.");
    kb->add_option("files", o->files, "Problem files (.py) or folders of them")->required();
    kb->add_option("--out", o->out, "Suite directory to write the tasks to")
        ->required()
        ->check(cli::NonEmpty)
        ->check(cli::OutputFolder);
    kb->add_option("--python", o->python, "Python with PyTorch (default: python3 if it has torch, else /usr/bin/python3)");
    kb->add_option("--max-numel", o->max_numel,
                   "Shrink each problem for small machines: halve its size constants (module-level integers and "
                   "integer tuples), the batch first (down to 2), then spatial and sequence sizes (>= 16), then "
                   "channels, features and a reduced row such as a softmax's `dim` (>= 16), largest first within each; "
                   "never kernel sizes, strides, paddings, groups; until its inputs and its model's parameters "
                   "and buffers together hold at most this many elements; a problem that breaks at the shrunk "
                   "sizes is tried again with equal sizes shrunk together whatever their role, then with 16x and "
                   "256x the limit "
                   "(0: KernelBench's own sizes)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    kb->add_option("--jobs", o->jobs,
                   "Problems imported at once, each its own Python (0: min(4, cores)); on a GPU they share it with each "
                   "other and with validations' checks, never with a timing")
        ->capture_default_str()->check(CLI::Range(0, 64));
    kb->add_option("--timeout", o->timeout_s, "Seconds allowed per problem")
        ->capture_default_str()->check(cli::Seconds);
    add_output_bound_option(*kb, o);
    kb->add_option("--precision", o->precision,
                   "Precision policy of the tasks: " + precision_choices() + " (pytorch: the reference is timed as "
                   "PyTorch runs it by default, cuDNN convolutions in TF32; strict: fp32 everywhere). Correctness is judged "
                   "against strict fp32 with a tolerance that admits the policy's own error, measured per problem")
        ->capture_default_str();
    add_model_flags(*kb, o);
    kb->add_flag("--no-sandbox", o->no_sandbox,
                 "Run the problem files' Python with your own rights (network, home directory, environment): UNSAFE, "
                 "only for files you trust or where bubblewrap cannot run");
    kb->add_flag("--json", *json, "Print the import report (as in OUT/import.json) on stdout");
    cli::add_verbosity_flags(*kb);
    kb->callback([o, json, &rc] {
        o->quiet = kevo::quiet();
        auto s = kernelbench::import_problems(*o);
        if (*json) std::cout << s.report.dump(2) << "\n";
        rc = exit_code_of(s.imported > 0 && s.failed == 0);
    });
}

}  // namespace kevo
