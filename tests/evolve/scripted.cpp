#include "scripted.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include "evolve/archive.h"
#include "evolve/prompt_text.h"

namespace kevo::evolve::testing {

namespace {
void append_line(const std::string& path, const std::string& line) {
    std::ofstream out(path, std::ios::app);
    out << line << "\n";
    out.flush();
}
}  // namespace

DeviceInfo ScriptedEvaluator::device() {
    DeviceInfo d;
    d.present = true;
    d.name = "Scripted GPU";
    d.cc_major = 9;
    d.sm_count = 132;
    d.mem_bandwidth_gbs = 4800;
    d.smem_per_block = 48 * 1024;
    return d;
}

CompileResult ScriptedEvaluator::compile(const std::string& source) {
    ++compiles_;
    CompileResult r;
    r.arch = "sm_90";
    if (source.find("COMPILE_ERROR") != std::string::npos) {
        r.log = "kernel.cu(3): error: scripted compile error";
        return r;
    }
    std::lock_guard<std::mutex> lock(mu_);
    r.ok = true;
    r.source_hash = std::to_string(sources_by_id_.size());  // the handle run() gets back
    sources_by_id_.push_back(source);
    return r;
}

Evaluation ScriptedEvaluator::run(const CompileResult& compiled) {
    if (running_.fetch_add(1) > 0) overlapped_ = true;
    std::string source;
    {
        std::lock_guard<std::mutex> lock(mu_);
        source = sources_by_id_.at(std::stoul(compiled.source_hash));
        runs_.push_back(source);
    }
    if (!log_path.empty()) append_line(log_path, normalized_hash(source));
    if (run_delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(run_delay_s));
    Evaluation e;
    std::smatch m;
    if (source.find("MISMATCH") != std::string::npos) {
        e.status = "mismatch";
        e.feedback = "mismatch: output y differs at index 7: got 0.5, expected 1.5";
    } else {
        e.status = "ok";
        e.speedup = std::regex_search(source, m, std::regex(R"(SPEEDUP=([0-9.]+))")) ? std::stod(m[1]) : 1.0;
        if (std::regex_search(source, m, std::regex(R"(KEVO_TUNABLE\(FACTOR,\s*([0-9]+))"))) e.speedup *= std::stod(m[1]) / 100;
        e.feedback = "correct; speedup " + std::to_string(e.speedup) + "x";
    }
    const double kernel_us = 10.0 / std::max(e.speedup, 1e-3);
    e.details = {{"status", e.status}, {"speedup", e.speedup}, {"kernel_us", kernel_us}, {"reference_us", 10.0}};
    if (e.ok()) {
        nlohmann::json set = {{"set", 0},         {"label", "M=4096 N=4096"}, {"kernel_us", kernel_us}, {"floor_us", 3.0},
                              {"bound", "memory"}, {"fraction", 3.0 / kernel_us}, {"achieved_gbs", 4300 * 3.0 / kernel_us}};
        e.details["sol"] = {{"fraction", 3.0 / kernel_us}, {"bandwidth_gbs", 4300}, {"sets", {set}}};
        e.feedback += "\nSpeed of light: " + sol_line_of(e.details);
    }
    --running_;
    return e;
}

std::vector<std::string> ScriptedEvaluator::runs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
}

llm::ChatResponse ScriptedProvider::chat(const llm::ChatRequest& request) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
    }
    if (!log_path.empty()) append_line(log_path, std::to_string(request.seed.value_or(-1)));
    llm::ChatResponse r;
    r.content = respond_(request);
    r.finish_reason = "stop";
    r.model = "scripted-model";
    r.usage.prompt_tokens = 100;
    r.usage.completion_tokens = 50;
    r.usage.cost_usd = 0.001;
    r.usage.cost_known = true;
    return r;
}

std::vector<llm::ChatRequest> ScriptedProvider::requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
}

size_t ScriptedProvider::calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.size();
}

const std::string& user_prompt(const llm::ChatRequest& request) { return request.messages.back().content; }

std::string prompt_kind(const llm::ChatRequest& request) {
    const std::string& u = user_prompt(request);
    if (u.find("## Failing kernel") != std::string::npos) return "repair";
    if (u.find("SEARCH/REPLACE edits") != std::string::npos) return "mutate_diff";
    if (u.find("## Current kernel") != std::string::npos) return "mutate_full";
    return "seed";
}

std::string kernel_source(long variant, double speedup, const std::string& extra_marker) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", speedup);
    return "#include \"kernelevo/abi.h\"\n"
           "static const long kVariant = " + std::to_string(variant) + ";  // SPEEDUP=" + buf + " " + extra_marker + "\n"
           "extern \"C\" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {\n"
           "    return kVariant < 0;\n"
           "}\n";
}

std::string kernel_reply(long variant, double speedup, const std::string& extra_marker) {
    return "Here is the kernel.\n\n```cuda\n" + kernel_source(variant, speedup, extra_marker) + "```\n";
}

std::string evolving(const llm::ChatRequest& r) {
    long v = static_cast<long>(r.seed.value());
    if (prompt_kind(r) == "seed" || prompt_kind(r) == "repair") return kernel_reply(v, 1.0);
    return kernel_reply(v, 1.0 + static_cast<double>(v % 1000) / 500.0);
}

}  // namespace kevo::evolve::testing
