// Real CUDA kernels for the GPU tests of the search and the workers (gelu_bias), and LLM
// transcripts that feed them to `kernelevo search --replay ... --llm-replay-in-order`.
#pragma once
#include <regex>
#include <string>
#include <vector>

#include "common/fs.h"
#include "llm/llm.h"

namespace kevo {

inline const fs::path kGpuKernels = fs::path(KEVO_SOURCE_DIR) / "tests" / "evolve" / "gpu";

// The vectorized gelu_bias kernel with a launch configuration (HALF "0.25f": wrong math).
inline std::string vec4(int threads, int blocks_per_sm, const char* half = "0.5f") {
    std::string s = read_file(kGpuKernels / "vec4.cu.in");
    s = std::regex_replace(s, std::regex("\\bTHREADS\\b"), std::to_string(threads));
    s = std::regex_replace(s, std::regex("\\bBLOCKS_PER_SM\\b"), std::to_string(blocks_per_sm));
    return std::regex_replace(s, std::regex("\\bHALF\\b"), half);
}

// A transcript whose n-th exchange answers the n-th request (replayed with --llm-replay-in-order).
inline void write_transcript(const fs::path& path, const std::vector<std::string>& kernels) {
    llm::Transcript t(path);
    for (size_t i = 0; i < kernels.size(); ++i) {
        llm::ChatRequest req;
        req.model = "replay-model";
        req.messages = {{"user", "request " + std::to_string(i)}};
        llm::ChatResponse resp;
        resp.content = "Here is the kernel.\n\n```cuda\n" + kernels[i] + "```\n";
        resp.finish_reason = "stop";
        resp.model = "replay-model";
        resp.usage.prompt_tokens = 3000;
        resp.usage.completion_tokens = 800;
        resp.usage.cost_usd = 0.002;
        resp.usage.cost_known = true;
        t.record(req, &resp, nullptr, 0.1);
    }
}


// A correct vec4 kernel whose source (normalized) is distinct for each `variant`, so none is a
// duplicate or a compile-cache hit of another.
inline std::string vec4_variant(int variant, int threads = 256, int blocks_per_sm = 8) {
    return vec4(threads, blocks_per_sm) + "\nnamespace { [[maybe_unused]] constexpr int kVariant" + std::to_string(variant) +
           " = " + std::to_string(variant) + "; }\n";
}

}  // namespace kevo
