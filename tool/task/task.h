// The evolution task: a reference LibTorch function, its inputs and outputs (dtypes, symbolic
// shapes), the concrete shape sets to check (the first is timed) and the tolerance.
// See README.md ("Task file") for the JSON format.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernelevo/abi.h"
#include "task/init_kind.h"
#include "task/precision.h"

namespace kevo {

// The task's dtypes are the kernel ABI's (KEVO_DTYPE_LIST in kernelevo/abi.h): same values.
enum class DType : int32_t {
#define KEVO_TASK_DTYPE_(e, v, n, sz, fl, at) e = v,
    KEVO_DTYPE_LIST(KEVO_TASK_DTYPE_)
#undef KEVO_TASK_DTYPE_
};

// Name as written in task files ("float32", ..., "bool").
const char* dtype_name(DType d);
std::optional<DType> parse_dtype(const std::string& name);  // also accepts torch aliases (float, half, ...)
int dtype_size(DType d);
bool is_floating(DType d);
int dtype_abi(DType d);  // the kevo_dtype value (the same number)
// "float32, float16, ... or bool": the accepted names, for messages.
std::string dtype_choices();

struct Dim {
    std::string symbol;  // empty: literal
    int64_t value = 0;   // the literal
};

// How an input's values are drawn. Every kind is deterministic given the trial seed.
struct Init {
    std::string kind = "randn";  // a KEVO_INIT_KIND_LIST name (task/init_kind.h): randn | rand | ... | file
    double a = 0, b = 1;         // randn: mean, std; rand/randint: low, high; full: value in a
    // file: the tensor's raw little-endian bytes in row-major order, exactly numel * dtype size.
    std::string path;            // as written in the task file (relative to it, or absolute)
    std::filesystem::path file;  // resolved, absolute
    std::string file_sha256;     // of the file's content (part of the task hash)
    // file: a model's parameter (task.json "parameter": true), valid with any values. The judge gives
    // the file's values on each shape set's first trial and moved, perturbed ones on the others
    // (device/fill.h), so a kernel that keeps the weights it first saw fails. Buffers (masks, running
    // statistics) are not parameters: their values stay as the file holds them.
    bool parameter = false;
    kevo_init_kind id() const { return static_cast<kevo_init_kind>(kevo_init_kind_from_name(kind.c_str())); }
};

struct TensorSpec {
    std::string name;
    DType dtype = DType::FLOAT32;
    std::vector<Dim> shape;
    Init init;
};

using ShapeSet = std::map<std::string, int64_t>;

// task.json's "precision" (a KEVO_PRECISION_LIST policy, task/precision.h): what the timed reference
// runs and which error the tolerance admits; correctness is judged against strict fp32 whatever it is.
struct Precision {
    kevo_precision policy = KEVO_PRECISION_PYTORCH;
    // The TF32 flags the timed reference runs with: the table's for the policy; for "pytorch" those
    // the user's code sets (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 /
    // torch.set_float32_matmul_precision("high"|"medium")), PyTorch's defaults unless recorded.
    bool cudnn_tf32 = true, matmul_tf32 = false;

    const char* name() const { return kevo_precision_name(policy); }
    // "pytorch" with PyTorch's own flags: what a task without the field means (left out of the hash).
    bool is_default() const;
    // The canonical form: "strict", or {"policy": "pytorch", "cudnn_tf32": .., "matmul_tf32": ..}
    // when a "pytorch" task records flags other than PyTorch's defaults; null for the default.
    nlohmann::json to_json() const;
    // "cuDNN TF32 on, cuBLAS TF32 off": what the timed reference runs with.
    std::string flags() const;
    // "pytorch (cuDNN TF32 on, cuBLAS TF32 off)": the policy and its flags, as the reference library's
    // kevo_ref_precision() says them (reports: "speedup over the LibTorch reference (precision <label>)").
    std::string label() const { return std::string(name()) + " (" + flags() + ")"; }
    // One line for prompts and reports, "pytorch: as PyTorch ...; the reference is timed with cuDNN TF32
    // on, cuBLAS TF32 off; correctness is judged against the reference in strict fp32 (TF32 off)".
    std::string describe() const;
};
// "pytorch, strict, tf32 or bf16": the accepted names, for messages.
std::string precision_choices();
// Parses task.json's "precision" (a name or an object); errors throw TaskError naming `file_label`.
Precision parse_precision(const nlohmann::json& v, const std::string& file_label);

struct Task {
    std::filesystem::path file;  // the task file (empty when built in memory)
    std::string name;
    std::filesystem::path reference_source;  // absolute
    std::string reference_function;
    // reference.signature: "tensors" (one const at::Tensor& per input, the default) or "vector"
    // (one const std::vector<at::Tensor>&: the wrapper then does not depend on the task, so every
    // task with the same reference source shares one build).
    std::string reference_signature = "tensors";
    // reference.setup: a C++ function `void f(const std::string& arg)` called once, with
    // reference.arg, before the first call (empty: none). The arg is a file path, resolved against
    // the task file (absolute here); its content is part of reference_hash().
    std::string reference_setup;
    std::string reference_arg_written;       // as written
    std::filesystem::path reference_arg;     // resolved, absolute (empty: none)
    // reference.show: what a prompt shows instead of the reference source, for a reference that is a
    // wrapper (an imported KernelBench task's generic TorchScript loader tells the model nothing):
    // e.g. the problem's PyTorch source and its traced graph. Not part of hash(): it changes what
    // the LLM reads, not what a kernel must compute.
    struct ShownFile {
        std::string written;          // as written (relative to the task file)
        std::filesystem::path path;   // resolved, absolute
        std::string language, title;  // the fence's language; the heading it is shown under
    };
    std::vector<ShownFile> reference_show;
    std::vector<TensorSpec> inputs, outputs;
    std::vector<ShapeSet> shapes;  // at least one (empty when every dimension is literal)
    Precision precision;  // "precision": part of hash() only when not the default (see Precision::to_json)
    double atol = 1e-4, rtol = 1e-4;
    bool tolerance_given = false;
    std::string tolerance_policy;  // tolerance.policy: how the tolerance was chosen (imported tasks); not hashed
    int correctness_trials = 5;  // in all, spread over the shape sets (at least one per set)
    // "timing": which shape sets are timed and how much each counts in the fitness (the weighted
    // geometric mean of their speedups, see task/fitness.h). Empty: every set, weight 1.
    std::vector<int> timing_sets;        // indices into `shapes`, ascending, no duplicates
    std::vector<double> timing_weights;  // empty, or one positive weight per timed set
    // "flops": optional expression of dimension names giving the floating-point operations one call
    // performs (e.g. "2*M*N*K"); empty when the task gives none. See sol/sol.h.
    std::string flops;

    // The shape sets that are timed (every set unless "timing.shapes" names some), ascending.
    std::vector<int> timed_sets() const;
    // One weight per timed set, in the order of timed_sets() (1 unless "timing.weights" is given).
    std::vector<double> weights() const;

    // Concrete sizes of a tensor in shape set `set`.
    std::vector<int64_t> concrete_shape(const TensorSpec& t, size_t set) const;
    // Its bytes there (the concrete shape's elements times the dtype's size).
    int64_t bytes(const TensorSpec& t, size_t set) const;
    // Canonical JSON (relative reference path as written, symbolic shapes) — what the task *is*.
    nlohmann::json to_json() const;
    // Hash of the canonical JSON; changes when anything that affects correctness or timing changes.
    std::string hash() const;
    // Hash of the reference as the compiler reads it: its text and that of every header it includes
    // from the project (the compiler's dependency list, system and LibTorch headers excluded),
    // without comments and with whitespace runs made one space — so comment- and whitespace-only
    // edits keep it. cmake/KernelEvoTask.cmake computes the same value. The byte hash of the file
    // alone when no C++ compiler is there to read it.
    std::string reference_hash() const;
    // The reference source and the project headers it includes (comments and whitespace aside).
    std::string reference_source_hash() const;
    // sha256 of the reference file's bytes: what entries stored before reference_hash() covered
    // the includes recorded (still accepted while the file is byte-for-byte unchanged).
    std::string reference_file_hash() const;
};

// Parses and checks a task. Errors throw TaskError naming `file_label` and the field.
Task parse_task(const nlohmann::json& j, const std::filesystem::path& task_file);
Task load_task(const std::filesystem::path& task_file);

}  // namespace kevo
