"""The KernelBench importer (`kernelevo import kernelbench` runs tool/kernelbench/import_kernelbench.py,
a thin script over this package, one problem per process, sandboxed).

For each problem FILE.py (class Model(nn.Module), get_inputs(), get_init_inputs()):
  - builds the model exactly as KernelBench does: torch.manual_seed(42), get_init_inputs(),
    torch.manual_seed(42), Model(*init) on the CPU, then moves it to the device;
  - records how get_inputs() draws each input (rand, randn, randint with its bounds, ones, zeros);
    an input computed from random values is stored as a fixed tensor file instead;
  - traces the computation with torch.jit over a functional wrapper whose inputs are the problem's
    inputs followed by the model's parameters and buffers, and saves it as model.pt;
  - writes the parameters and buffers as raw tensor files (init kind "file"), task.json, problem.py
    and graph.py (the traced forward, arguments named as the task's inputs; reference.show lists both);
  - names dimensions by role (each module constant varied on the meta device), measures the model's
    own error (fp32 vs fp64, TF32 off) for the task's tolerance, counts conv/matmul FLOPs;
  - verifies itself: the trace on a second draw of inputs when it may depend on values, then the
    C++ generic reference (kernelevo-refcheck on the built reference library) against the Python
    model on inputs both sides make by one formula (no multi-GiB files), at up to 2^24 elements
    per output.
Prints a progress line per phase ({"progress": {"name", "phase", "seconds"}}) on stdout.
Refusals (data-dependent control flow, randomness in forward, BatchNorm in training mode,
unsupported dtypes, ...) get a one-line reason and the batch goes on.

Prints one JSON object per problem on stdout (with "task_json", the task as JSON, when imported).
`kernelevo import kernelbench` runs one problem per process, sandboxed, with --out a private folder
of its own: it copies the checked files from there into the suite and writes task.json itself.

Modules, in the order a problem goes through them:
  common       the dtype table, refusals, names, loading a problem file, raw tensor files, progress lines
  problem      get_inputs() recorded (Recorder), sizes shrunk (--max-numel), the model and inputs built
  trace        the traced functional wrapper, the checks of its graph, conversions, output comparisons
  dim_names    dimension names by role (constants varied on the meta device) or by value
  tolerance    the reference's own error (fp32 vs fp64) and the precision policy's
  graph_file   FLOPs of the traced graph and graph.py
  fill         the validator's filler in torch (the self-check's generated inputs)
  selfcheck    kernelevo-refcheck against the Python model
  task_import  one problem as one task, phase by phase (export_task calls its _import_one)
  model_import one problem as a whole model (kernelevo.export_model)
  driver       the run over the problem files (alarms, retries with larger sizes, one result each)
"""
