#include "scripted.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
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
        e.status = Status::mismatch;
        e.feedback = "mismatch: output y differs at index 7: got 0.5, expected 1.5";
    } else {
        e.status = Status::ok;
        e.speedup = std::regex_search(source, m, std::regex(R"(SPEEDUP=([0-9.]+))")) ? std::stod(m[1]) : 1.0;
        if (std::regex_search(source, m, std::regex(R"(KEVO_TUNABLE\(FACTOR,\s*([0-9]+))"))) e.speedup *= std::stod(m[1]) / 100;
        e.feedback = "correct; speedup " + std::to_string(e.speedup) + "x";
    }
    const double kernel_us = 10.0 / std::max(e.speedup, 1e-3);
    e.details = {{"status", status_name(e.status)}, {"speedup", e.speedup}, {"kernel_us", kernel_us}, {"reference_us", 10.0}};
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

std::vector<std::pair<std::string, llm::ChatRequest>> batch_requests_of(const std::string& input) {
    std::vector<std::pair<std::string, llm::ChatRequest>> out;
    std::istringstream in(input);
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line);
        const nlohmann::json& body = j.at("body");
        llm::ChatRequest r;
        r.model = body.at("model").get<std::string>();
        for (const auto& m : body.at("messages")) r.messages.push_back({m.at("role"), m.at("content")});
        r.temperature = body.at("temperature").get<double>();
        if (body.contains("seed")) r.seed = body["seed"].get<int64_t>();
        out.emplace_back(j.at("custom_id").get<std::string>(), r);
    }
    return out;
}

std::string answer_batch(const std::string& input, const ScriptedProvider::Respond& respond,
                         const std::vector<std::string>& fail, double cost_usd) {
    std::string out;
    int n = 0;
    for (const auto& [id, request] : batch_requests_of(input)) {
        nlohmann::json line = {{"id", "batch_req_" + std::to_string(++n)}, {"custom_id", id}};
        if (std::find(fail.begin(), fail.end(), id) != fail.end()) {
            line["response"] = nullptr;
            line["error"] = {{"code", "batch_expired"}, {"message", "This request could not be executed before the completion window expired."}};
        } else {
            nlohmann::json body = {
                {"id", "chatcmpl-" + std::to_string(n)},
                {"object", "chat.completion"},
                {"model", request.model + "-2025"},
                {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", respond(request)}}}, {"finish_reason", "stop"}}}},
                {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 50}, {"total_tokens", 150}}}};
            if (cost_usd >= 0) body["usage"]["cost"] = cost_usd;
            line["response"] = {{"status_code", 200}, {"request_id", "req_" + std::to_string(n)}, {"body", body}};
            line["error"] = nullptr;
        }
        out += line.dump() + "\n";
    }
    return out;
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
