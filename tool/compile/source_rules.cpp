#include "compile/source_rules.h"

#include <algorithm>
#include <cctype>

#include "common/text.h"

namespace kevo {

namespace {

// A call a candidate may not make, matched as a whole identifier or as its prefix (prefix: every
// name that starts with it, e.g. the cudaStreamCreate* family), and what to do instead.
struct Rule {
    const char* name;
    bool prefix;
    const char* instead;
};

const char* const kUseHandle =
    "use the handle the caller made: kevo_cublas_handle(stream) (already bound to `stream` and a workspace)";
const char* const kUseLtHandle =
    "use the handle the caller made: kevo_cublaslt_handle(stream), with kevo_cublas_workspace(stream, &bytes) as the workspace";
const char* const kUseStream = "launch everything on the `stream` kevo_forward was given (no other streams)";

const Rule kRules[] = {
    {"cublasCreate", true, kUseHandle},        // cublasCreate, cublasCreate_v2
    {"cublasDestroy", true, kUseHandle},
    {"cublasSetStream", true, kUseHandle},     // the handle is bound to the call's stream already
    {"cublasSetWorkspace", true, kUseHandle},
    {"cublasXtCreate", false, kUseHandle},
    {"cublasLtCreate", false, kUseLtHandle},
    {"cublasLtDestroy", false, kUseLtHandle},
    {"cudaStreamCreate", true, kUseStream},    // cudaStreamCreate, ...WithFlags, ...WithPriority
    {"cuStreamCreate", true, kUseStream},
};


bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string forbidden_call_in_source(const std::string& source) {
    const std::string code = blank_comments_and_literals(source);
    size_t i = 0;
    while (i < code.size()) {
        if (!ident_char(code[i]) || (i > 0 && ident_char(code[i - 1]))) {
            ++i;
            continue;
        }
        size_t e = i;
        while (e < code.size() && ident_char(code[e])) ++e;
        const std::string word = code.substr(i, e - i);
        for (const Rule& r : kRules) {
            if (r.prefix ? word.compare(0, std::string(r.name).size(), r.name) != 0 : word != r.name) continue;
            const long line = 1 + static_cast<long>(std::count(code.begin(), code.begin() + static_cast<long>(i), '\n'));
            return "kernel.cu(" + std::to_string(line) + "): error: a candidate may not call " + word + ": " + r.instead +
                   " (kernelevo/abi.h, ABI version 2)";
        }
        i = e;
    }
    return "";
}

}  // namespace kevo
