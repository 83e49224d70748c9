#include "common/arch.h"

#include "common/error.h"
#include "kernelevo/arch.h"

namespace kevo {

std::string normalize_arch(const std::string& arch) {
    kevo_arch a{};
    if (!kevo_arch_parse(arch.c_str(), &a))
        throw UsageError("unknown CUDA architecture '" + arch + "' (expected e.g. sm_90, 90, 9.0 or sm_90a)");
    std::string name = "sm_" + std::to_string(a.cc);
    if (a.suffix) name += a.suffix;
    return name;
}

bool is_normalized_arch(const std::string& name) {
    kevo_arch a{};
    if (name.compare(0, 3, "sm_") != 0 || !kevo_arch_parse(name.c_str(), &a)) return false;
    return normalize_arch(name) == name;
}

int arch_cc(const std::string& arch) {
    kevo_arch a{};
    return kevo_arch_parse(arch.c_str(), &a) ? a.cc : 0;
}

}  // namespace kevo
