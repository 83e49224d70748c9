#include "evaluate/compile_result.h"

namespace kevo {

#define KEVO_KERNEL_RESOURCES_FIELDS(X) \
    X(name) X(mangled) X(arch) X(registers) X(barriers) X(smem_bytes) X(stack_bytes) X(spill_stores) X(spill_loads)

nlohmann::json KernelResources::to_json() const {
    nlohmann::json j;
#define KEVO_TO_(f) j[#f] = f;
    KEVO_KERNEL_RESOURCES_FIELDS(KEVO_TO_)
#undef KEVO_TO_
    return j;
}

KernelResources KernelResources::from_json(const nlohmann::json& j) {
    KernelResources k;
#define KEVO_FROM_(f) k.f = j.value(#f, decltype(k.f){});
    KEVO_KERNEL_RESOURCES_FIELDS(KEVO_FROM_)
#undef KEVO_FROM_
    return k;
}

nlohmann::json compile_result_to_json(const CompileResult& c) {
    nlohmann::json j;
#define KEVO_TO_(f) j[#f] = c.f;
    KEVO_COMPILE_RESULT_WIRE_FIELDS(KEVO_TO_)
#undef KEVO_TO_
    j["kernels"] = nlohmann::json::array();
    for (const auto& k : c.kernels) j["kernels"].push_back(k.to_json());
    return j;
}

CompileResult compile_result_from_json(const nlohmann::json& j) {
    CompileResult c;
#define KEVO_FROM_(f) \
    if (j.contains(#f) && !j[#f].is_null()) j.at(#f).get_to(c.f);
    KEVO_COMPILE_RESULT_WIRE_FIELDS(KEVO_FROM_)
#undef KEVO_FROM_
    if (j.contains("kernels") && j["kernels"].is_array())
        for (const auto& k : j["kernels"]) c.kernels.push_back(KernelResources::from_json(k));
    return c;
}

}  // namespace kevo
