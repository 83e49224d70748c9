// The device description the validator caches, and the measured copy bandwidth.
#include <cuda_runtime.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/settings.h"
#include "runner.h"

namespace kevo_runner {

nlohmann::json device_info() {
    nlohmann::json j;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        j["present"] = false;
        std::string why = e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this CUDA runtime"
                          : e == cudaErrorNoDevice || e == cudaSuccess ? "no CUDA device"
                                                                       : cudaGetErrorString(e);
        j["error"] = "no usable CUDA GPU here (" + why + (e != cudaSuccess ? std::string(", ") + cudaGetErrorName(e) : std::string()) + ")";
        return j;
    }
    int dev = 0;
    if (const char* v = kevo::env(kevo::EnvVar::kDevice)) dev = std::atoi(v);
    if (dev < 0 || dev >= count) {
        j["present"] = false;
        j["error"] = "KERNELEVO_DEVICE=" + std::to_string(dev) + " but this host has " + std::to_string(count) + " CUDA device(s)";
        return j;
    }
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        j["present"] = false;
        j["error"] = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
        return j;
    }
    int mem_clock_khz = 0, bus_width = 0, optin = 0, drv = 0, rt = 0;
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
    cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, dev);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-");
    for (int i = 0; i < 16; ++i) std::snprintf(uuid + 4 + 2 * i, 3, "%02x", static_cast<unsigned char>(p.uuid.bytes[i]));
    char pci[32];
    std::snprintf(pci, sizeof pci, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    j["present"] = true;
    j["index"] = dev;
    j["count"] = count;
    j["name"] = p.name;
    j["uuid"] = uuid;
    j["pci_bus_id"] = pci;
    j["cc_major"] = p.major;
    j["cc_minor"] = p.minor;
    j["sm_count"] = p.multiProcessorCount;
    j["mem_bandwidth_gbs"] = 2.0 * mem_clock_khz * 1e3 * (bus_width / 8.0) / 1e9;
    j["total_mem"] = static_cast<int64_t>(p.totalGlobalMem);
    j["l2_bytes"] = static_cast<int64_t>(p.l2CacheSize);
    j["smem_per_block"] = static_cast<int>(p.sharedMemPerBlock);
    j["smem_per_block_optin"] = optin;
    j["smem_per_sm"] = static_cast<int>(p.sharedMemPerMultiprocessor);
    j["driver_version"] = drv;
    j["runtime_version"] = rt;
    return j;
}

std::string pin_to_device_cpus(const std::string& pci_bus_id) {
    if (pci_bus_id.empty() || kevo::env(kevo::EnvVar::kNoCpuPin)) return "";
    std::ifstream f("/sys/bus/pci/devices/" + pci_bus_id + "/local_cpulist");
    std::string list;
    if (!f || !std::getline(f, list) || list.empty()) return "";
    cpu_set_t allowed, local;
    CPU_ZERO(&local);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return "";
    std::stringstream ss(list);
    std::string range;
    while (std::getline(ss, range, ',')) {  // "0-15,32-47"
        int lo = -1, hi = -1;
        if (std::sscanf(range.c_str(), "%d-%d", &lo, &hi) == 1) hi = lo;
        for (int c = lo; c >= 0 && c <= hi && c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &allowed)) CPU_SET(c, &local);
    }
    // Nothing to gain where the device is local to every CPU this process may use, and nothing to
    // do where it may use none of the device's own (a cpuset elsewhere): stay as it is.
    if (CPU_COUNT(&local) == 0 || CPU_EQUAL(&local, &allowed)) return "";
    if (sched_setaffinity(0, sizeof local, &local) != 0) return "";
    return list;
}

double measure_copy_bandwidth(int device) {
    if (cudaSetDevice(device) != cudaSuccess) return 0;
    const size_t bytes = size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
    cudaMemset(a, 1, bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int i = 0; i < 12; ++i) {
        cudaEventRecord(e0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        if (i >= 2) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    cudaFree(a);
    cudaFree(b);
    double med = ms[ms.size() / 2];
    return med > 0 ? 2.0 * bytes / (med * 1e-3) / 1e9 : 0;
}

}  // namespace kevo_runner
