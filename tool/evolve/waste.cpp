#include "evolve/waste.h"

#include <cstdio>
#include <map>

namespace kevo::evolve {

bool not_judged(const store::Program& p) {
    if (p.status == store::ProgramStatus::not_judged) return true;
    return p.details.is_object() && p.details.contains("outside_kernel") && p.details["outside_kernel"] == true;
}

bool repair_is_waste(const store::Program& failed) {
    return failed.status == store::ProgramStatus::duplicate || not_judged(failed) || failed.feedback.empty();
}

namespace {
// "g3.i1.c0.a2" -> "g3.i1.c0.a1" (the attempt a repair request was written for); "" for a0.
std::string previous_attempt(const std::string& key) {
    size_t dot = key.rfind(".a");
    if (dot == std::string::npos) return "";
    int n = 0;
    try {
        n = std::stoi(key.substr(dot + 2));
    } catch (const std::exception&) {
        return "";
    }
    return n > 0 ? key.substr(0, dot) + ".a" + std::to_string(n - 1) : "";
}

double gpu_seconds_of(const store::Program& p) {
    if (!p.details.is_object()) return 0;
    auto it = p.details.find("gpu_s");
    return it != p.details.end() && it->is_number() ? it->get<double>() : 0;
}
}  // namespace

Waste waste_of(const std::vector<store::Program>& programs, const std::vector<store::LlmCall>& calls) {
    Waste w;
    std::map<std::string, const store::Program*> by_key;
    for (const store::Program& p : programs) {
        by_key[p.key] = &p;
        if (not_judged(p)) ++w.not_judged;
        if (double s = gpu_seconds_of(p); s > 0) {
            ++w.evaluated;
            w.gpu_s += s;
        }
    }
    for (const store::LlmCall& c : calls) {
        if (c.kind != "repair") continue;
        auto failed = by_key.find(previous_attempt(c.key));
        if (failed == by_key.end() || !repair_is_waste(*failed->second)) continue;
        ++w.requests;
        w.prompt_tokens += c.prompt_tokens;
        w.completion_tokens += c.completion_tokens;
        w.cost_usd += c.cost_usd;
    }
    return w;
}

Waste waste_of(store::Store& store) {
    Waste w = waste_of(store.programs(), store.llm_calls());
    if (auto e = store.get_meta("elapsed_s"); e && e->is_number()) w.wall_s = e->get<double>();
    return w;
}

nlohmann::json Waste::to_json() const {
    nlohmann::json j = {{"wasted", {{"requests", requests}, {"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                                    {"cost_usd", cost_usd}}},
                        {"not_judged", not_judged},
                        {"gpu", {{"candidates", evaluated}, {"minutes", gpu_minutes()}, {"candidates_per_minute", candidates_per_gpu_minute()}}}};
    if (wall_s > 0) j["gpu"]["wall_s"] = wall_s, j["gpu"]["busy_share"] = busy_share();
    return j;
}

std::string Waste::text() const {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "Wasted LLM requests (replies that could not change the search): %lld, %lld tokens, $%.4f; "
                  "%lld candidate(s) not judged (GPU taken by others; no request spent)\n"
                  "GPU: %lld candidate(s) in %.2f GPU-minutes (%.1f per GPU-minute)",
                  static_cast<long long>(requests), static_cast<long long>(prompt_tokens + completion_tokens), cost_usd,
                  static_cast<long long>(not_judged), static_cast<long long>(evaluated), gpu_minutes(),
                  candidates_per_gpu_minute());
    std::string out = buf;
    if (wall_s > 0) {
        std::snprintf(buf, sizeof buf, "; busy with evaluations %.0f%% of the run's %.0f s", 100 * busy_share(), wall_s);
        out += buf;
    }
    return out + "\n";
}

}  // namespace kevo::evolve
