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

namespace kevo {

enum class DType { float32, float16, bfloat16, int32, int64, boolean, float64, int8, uint8 };

// Name as written in task files ("float32", ..., "bool").
const char* dtype_name(DType d);
std::optional<DType> parse_dtype(const std::string& name);  // also accepts torch aliases (float, half, ...)
int dtype_size(DType d);
bool is_floating(DType d);
int dtype_abi(DType d);  // the kevo_dtype value of runtime/include/kernelevo/abi.h

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
};

struct TensorSpec {
    std::string name;
    DType dtype = DType::float32;
    std::vector<Dim> shape;
    Init init;
};

using ShapeSet = std::map<std::string, int64_t>;

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
    std::vector<TensorSpec> inputs, outputs;
    std::vector<ShapeSet> shapes;  // at least one (empty when every dimension is literal)
    double atol = 1e-4, rtol = 1e-4;
    bool tolerance_given = false;
    int correctness_trials = 5;  // in all, spread over the shape sets (at least one per set)

    // Concrete sizes of a tensor in shape set `set`.
    std::vector<int64_t> concrete_shape(const TensorSpec& t, size_t set) const;
    // Canonical JSON (relative reference path as written, symbolic shapes) — what the task *is*.
    nlohmann::json to_json() const;
    // Hash of the canonical JSON; changes when anything that affects correctness or timing changes.
    std::string hash() const;
    // Hash of the reference source file's content.
    std::string reference_hash() const;
};

// Parses and checks a task. Errors throw TaskError naming `file_label` and the field.
Task parse_task(const nlohmann::json& j, const std::filesystem::path& task_file);
Task load_task(const std::filesystem::path& task_file);

}  // namespace kevo
