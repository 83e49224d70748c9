#include "evaluate/compile_result.h"

namespace kevo {

nlohmann::json KernelResources::to_json() const {
    return {{"name", name},           {"mangled", mangled},       {"arch", arch},
            {"registers", registers}, {"barriers", barriers},     {"smem_bytes", smem_bytes},
            {"stack_bytes", stack_bytes}, {"spill_stores", spill_stores}, {"spill_loads", spill_loads}};
}

KernelResources KernelResources::from_json(const nlohmann::json& j) {
    KernelResources k;
    k.name = j.value("name", std::string());
    k.mangled = j.value("mangled", std::string());
    k.arch = j.value("arch", std::string());
    k.registers = j.value("registers", 0);
    k.barriers = j.value("barriers", 0);
    k.smem_bytes = j.value("smem_bytes", int64_t{0});
    k.stack_bytes = j.value("stack_bytes", int64_t{0});
    k.spill_stores = j.value("spill_stores", int64_t{0});
    k.spill_loads = j.value("spill_loads", int64_t{0});
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
