// CUDA architecture names in the tool: every command, the compiler driver and the cache use these
// (the parsing itself is kernelevo/arch.h's, shared with the runtime).
#pragma once
#include <string>

namespace kevo {

// "90", "sm_90", "sm90", "SM90", "compute_80", "9.0" -> "sm_90" / "sm_80"; "sm_90a", "sm_100f" keep
// their suffix. Throws UsageError naming the value otherwise.
std::string normalize_arch(const std::string& arch);
// True when `name` is already in the normalized form ("sm_90", "sm_90a"), as cache file names are.
bool is_normalized_arch(const std::string& name);
// The compute capability of an architecture name (90 for "sm_90a"); 0 when it is not one.
int arch_cc(const std::string& arch);

}  // namespace kevo
