// Triton candidates: one Python file with @triton.jit kernel(s) and a launch description,
//
//     KEVO_LAUNCH = {
//         "kernel": "gelu_bias_kernel",        # a @triton.jit function of the file
//         "args": {                            # every parameter of the kernel, in its order
//             "x_ptr": "x",                    # a task tensor (input or output): its data pointer
//             "y_ptr": "y",
//             "n_cols": "N",                   # an integer expression of the task's dimensions (i32)
//             "n": ("M * N", "i64"),           # ... with an explicit type, i32 or i64
//             "BLOCK": 1024,                   # an integer: a tl.constexpr parameter
//         },
//         "hints": {"x_ptr": 16, "n_cols": 16},  # optional: divisible by 16 (a specialization)
//         "grid": ("cdiv(M * N, BLOCK)", 1, 1),  # expressions of dimensions and constexprs
//         "num_warps": 4,
//         "num_stages": 3,
//     }
//
// (or a list of such dicts, launched in order on the same stream). The description is read from
// the source text as a Python literal; no Python runs here. Everything is checked against the
// kernel's `def` line and the task, and every mistake is reported as a LaunchError whose message
// tells the author (often an LLM) what to write instead.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/task.h"
#include "triton/python_literal.h"

namespace kevo::triton {

// True when `source` is a Triton candidate (Python with @triton.jit) rather than a CUDA .cu.
bool is_triton_source(const std::string& source);

struct KernelParam {
    std::string name;
    bool constexpr_ = false;  // annotated tl.constexpr
};
// The parameters of the @triton.jit function `name` in `source`. Throws LaunchError when there is
// no such jitted function.
std::vector<KernelParam> kernel_params(const std::string& source, const std::string& name);

// An integer expression of dimension names and constexprs, checked and rendered as C.
// Grammar: integers, names, + - * / // % ( ), cdiv(a, b), min(a, b), max(a, b).
// Renders names through `name_to_c` (a name it does not know is an error).
std::string expression_to_c(const std::string& expr, const std::map<std::string, std::string>& name_to_c);

struct Arg {
    enum Kind { tensor, scalar, constexpr_value } kind = scalar;
    std::string param;        // the kernel parameter
    std::string tensor_name;  // kind tensor: the task tensor's name
    bool is_input = true;     // kind tensor: input or output
    int index = 0;            // kind tensor: its index in in[] or out[]
    std::string triton_type;  // "*fp32", "i32", "i64"
    std::string expr;         // kind scalar: the expression as written
    std::string literal;      // kind constexpr_value: the number as Triton's --signature takes it
    int hint = 0;             // 16: divisible by 16 in the hinted specialization
};

struct Launch {
    std::string kernel;
    std::vector<Arg> args;                 // in the kernel's parameter order
    std::vector<std::string> grid;         // 3 expressions (missing ones are "1")
    int num_warps = 4, num_stages = 3;
    bool has_hints() const;
    // triton.tools.compile's --signature for the hinted (hints = true) or generic specialization:
    // "*fp32:16, *fp32, i32, 1024".
    std::string signature(bool hints) const;
};

// Reads KEVO_LAUNCH from `source` and checks it against the kernels and `task`.
std::vector<Launch> parse_launches(const std::string& source, const Task& task);

// Triton's type for a task dtype: float32 -> "fp32", int64 -> "i64", bool -> "i1" ...
std::string triton_dtype(DType d);

// The description as JSON (for cache metadata: what was specialized and how).
nlohmann::json launches_to_json(const std::vector<Launch>& launches);

}  // namespace kevo::triton
