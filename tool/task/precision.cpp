// task.json's "precision": parsing, the canonical form hashed, and the one wording prompts and
// reports use. The names and flags are KEVO_PRECISION_LIST's (task/precision.h).
#include <algorithm>

#include "common/error.h"
#include "common/suggest.h"
#include "task/schema.h"
#include "task/task_checks.h"
#include "task/task.h"

namespace kevo {

namespace {
bool default_cudnn(kevo_precision p) { return kevo_precision_cudnn_tf32(p) != 0; }
bool default_matmul(kevo_precision p) { return kevo_precision_cublas_tf32(p) != 0; }

// "unknown precision policy 'strcit'; did you mean 'strict'? (expected one of: pytorch, strict, tf32 or bf16)"
std::string unknown_policy(const std::string& word) {
    std::vector<std::string> names;
    for (int k = 0; k < KEVO_PRECISION_COUNT; ++k) names.push_back(kevo_precision_name(k));
    std::string msg = "unknown precision policy '" + shown_value(word) + "'";
    auto near = closest(word, names);
    if (!near.empty()) msg += "; did you mean '" + near.front() + "'?";
    return msg + " (expected one of: " + precision_choices() + ")";
}
}  // namespace

std::string precision_choices() {
    std::string out;
    for (int k = 0; k < KEVO_PRECISION_COUNT; ++k)
        out += std::string(k == 0 ? "" : k + 1 == KEVO_PRECISION_COUNT ? " or " : ", ") + kevo_precision_name(k);
    return out;
}

bool Precision::is_default() const {
    return policy == KEVO_PRECISION_PYTORCH && cudnn_tf32 == default_cudnn(policy) && matmul_tf32 == default_matmul(policy);
}

nlohmann::json Precision::to_json() const {
    if (is_default()) return nullptr;
    if (cudnn_tf32 == default_cudnn(policy) && matmul_tf32 == default_matmul(policy)) return name();
    return {{"policy", name()}, {"cudnn_tf32", cudnn_tf32}, {"matmul_tf32", matmul_tf32}};
}

std::string Precision::flags() const {
    return std::string("cuDNN TF32 ") + (cudnn_tf32 ? "on" : "off") + ", cuBLAS TF32 " + (matmul_tf32 ? "on" : "off");
}

std::string Precision::describe() const {
    std::string s = std::string(name()) + ": " + kevo_precision_meaning(policy);
    if (policy == KEVO_PRECISION_PYTORCH)
        s += std::string(" (here ") + (matmul_tf32 ? "True" : "False") + ")";
    return s + "; the reference is timed with " + flags() + "; correctness is judged against the reference in strict fp32 (TF32 off)";
}

Precision parse_precision(const nlohmann::json& v, const std::string& file_label) {
    auto fail = [&](const std::string& field, const std::string& msg) {
        throw TaskError(file_label, shown_value(field), msg);
    };
    Precision p;
    auto set_policy = [&](const nlohmann::json& name, const std::string& field) {
        if (!name.is_string())
            fail(field, "expected a policy name (" + precision_choices() + "), got " + shown_json(name));
        int k = kevo_precision_from_name(name.get<std::string>().c_str());
        if (k >= 0 && name.get<std::string>() != kevo_precision_name(k)) k = -1;  // cut at a NUL: not the name
        if (k < 0) fail(field, unknown_policy(name.get<std::string>()));
        p.policy = static_cast<kevo_precision>(k);
        p.cudnn_tf32 = default_cudnn(p.policy);
        p.matmul_tf32 = default_matmul(p.policy);
    };
    if (v.is_string()) {
        set_policy(v, "precision");
        return p;
    }
    if (!v.is_object())
        fail("precision", "expected a policy name (" + precision_choices() + ") or {\"policy\": \"pytorch\", \"matmul_tf32\": true}");
    const std::vector<std::string> known = schema_fields("/$defs/precision");
    for (auto it = v.begin(); it != v.end(); ++it)
        if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
            auto near = closest(it.key(), known);
            fail("precision." + it.key(),
                 "unknown field '" + shown_value(it.key()) + "'" +
                     (near.empty() ? "" : "; did you mean '" + near.front() + "'?"));
        }
    if (!v.contains("policy")) fail("precision.policy", "missing (required)");
    set_policy(v.at("policy"), "precision.policy");
    for (const char* key : {"cudnn_tf32", "matmul_tf32"}) {
        if (!v.contains(key)) continue;
        const std::string field = std::string("precision.") + key;
        if (!v.at(key).is_boolean()) fail(field, "expected true or false, got " + shown_json(v.at(key)));
        if (p.policy != KEVO_PRECISION_PYTORCH)
            fail(field, std::string("only the pytorch policy records the user's TF32 flags; ") + p.name() + " fixes them (" + p.flags() + ")");
        (std::string(key) == "cudnn_tf32" ? p.cudnn_tf32 : p.matmul_tf32) = v.at(key).get<bool>();
    }
    return p;
}

}  // namespace kevo
