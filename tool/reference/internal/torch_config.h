#pragma once
#include <string>
#include <vector>
namespace kevo {
struct TorchConfig {
    bool found;
    std::string libdir;                     // holds libtorch.so, libc10.so (and the CUDA ones)
    std::vector<std::string> include_dirs;
    std::string cxx_flags;                  // e.g. -D_GLIBCXX_USE_CXX11_ABI=1
    bool cuda;                              // libtorch_cuda.so present
    std::string cuda_include;               // CUDA toolkit headers (for c10/cuda)
    std::string cxx;                        // the C++ compiler this tool was built with
    std::string version;                    // Torch_VERSION ("1.13.1"); "" when unknown
};
const TorchConfig& torch_config();
}  // namespace kevo
