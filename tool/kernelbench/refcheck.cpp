// kernelevo-refcheck: the C++ half of the KernelBench import's self-verification. It loads a built
// reference library (the generic TorchScript reference), calls kevo_ref_setup(model.pt), runs
// kevo_ref_forward on inputs read from raw tensor files and compares the outputs with the expected
// ones (the Python model's), printing one JSON line:
//   {"ok": true, "max_abs_diff": 0, "outputs": [{"max_abs_diff": 0, "mismatches": 0}], "error": ""}
// Usage: kernelevo-refcheck MANIFEST.json, where the manifest holds
//   {"library": "ref.so", "arg": "model.pt", "device": "cpu"|"cuda", "atol": 1e-4, "rtol": 1e-4,
//    "inputs":  [{"file": "x.bin", "dtype": 0, "shape": [2, 3]},
//                {"generate": {"kind": "rand", "seed": 1, "a": 0, "b": 1}, "dtype": 0, "shape": [2, 3]}, ...],
//    "outputs": [{"file": "expected.bin", "dtype": 0, "shape": [2, 3], "stride": 1}, ...]}
// A generated input ({"kind": "rand"|"randn"|"randint"|"ones"|"zeros", "seed": S, "a": A, "b": B}) is
// made here by the validator's filler, which the importer reproduces bit for bit in torch
// (make_values; no multi-GiB files); an output's file holds every stride-th element of the expected output, and those are
// compared. It is torch-free itself (LibTorch comes with the reference library) and runs in its own
// process, in strict fp32 (NVIDIA_TF32_OVERRIDE=0: the importer's Python runs with TF32 off).
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/fill.h"
#include "kernelevo/abi.h"

namespace {

struct Buffer {
    std::vector<char> host;
    void* device = nullptr;
    kevo_tensor t{};
};

std::vector<char> read_bytes(const std::string& path, size_t expect) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::vector<char> data(expect);
    in.read(data.data(), static_cast<std::streamsize>(expect));
    if (static_cast<size_t>(in.gcount()) != expect || in.peek() != std::char_traits<char>::eof())
        throw std::runtime_error(path + " does not hold exactly " + std::to_string(expect) + " bytes");
    return data;
}

// The importer's refcheck_values: the validator's filler (tool/device/fill.h) with the entry's kind,
// seed and parameters a, b, on all cores.
void make_values(const nlohmann::json& g, int dtype, char* p, size_t n) {
    const std::string kind = g.at("kind").get<std::string>();
    const int k = kevo_init_kind_from_name(kind.c_str());
    if (k != KEVO_INIT_RAND && k != KEVO_INIT_RANDN && k != KEVO_INIT_RANDINT && k != KEVO_INIT_ONES && k != KEVO_INIT_ZEROS)
        throw std::runtime_error("unknown generated kind " + kind);
    kevo_device::fill_host(p, dtype, static_cast<int64_t>(n), k, g.value("a", 0.0), g.value("b", 1.0),
                           g.value("seed", uint64_t{0}));
}

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// An input (load: from its file or generated), or an output's device buffer (cuda) or host buffer.
Buffer make(const nlohmann::json& spec, bool cuda, bool load) {
    Buffer b;
    b.t.dtype = spec.at("dtype").get<int32_t>();
    if (b.t.dtype < 0 || b.t.dtype >= KEVO_DTYPE_COUNT) throw std::runtime_error("unknown dtype in the manifest");
    const auto& shape = spec.at("shape");
    if (shape.size() > 8) throw std::runtime_error("more than 8 dimensions");
    b.t.ndim = static_cast<int32_t>(shape.size());
    size_t n = 1;
    for (int d = b.t.ndim - 1; d >= 0; --d) {
        b.t.sizes[d] = shape[d].get<int64_t>();
        b.t.strides[d] = static_cast<int64_t>(n);
        n *= static_cast<size_t>(b.t.sizes[d]);
    }
    size_t bytes = n * static_cast<size_t>(kevo_dtype_size(b.t.dtype));
    if (load && spec.contains("generate") && cuda) {
        // Made in memory that is not zeroed first (multi-GiB inputs), copied, freed.
        std::unique_ptr<char[]> tmp(new char[bytes ? bytes : 1]);
        make_values(spec.at("generate"), b.t.dtype, tmp.get(), n);
        check_cuda(cudaMalloc(&b.device, bytes ? bytes : 1), "cudaMalloc");
        check_cuda(cudaMemcpy(b.device, tmp.get(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        b.t.data = b.device;
        return b;
    } else if (load && spec.contains("generate")) {
        b.host.resize(bytes);
        make_values(spec.at("generate"), b.t.dtype, b.host.data(), n);
    } else if (load) {
        b.host = read_bytes(spec.at("file").get<std::string>(), bytes);
    } else if (!cuda) {
        b.host.resize(bytes);
    }
    if (cuda) {
        check_cuda(cudaMalloc(&b.device, bytes ? bytes : 1), "cudaMalloc");
        if (load) {
            check_cuda(cudaMemcpy(b.device, b.host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
            std::vector<char>().swap(b.host);  // on the device now
        }
        b.t.data = b.device;
    } else {
        b.t.data = b.host.data();
    }
    return b;
}

// Leaves in each output's host buffer only its compared elements (every stride-th), as in its expected
// file: copied back from the device (cuda) or thinned in place.
void keep_compared(std::vector<Buffer>& out, const std::vector<Buffer>& expect, const std::vector<size_t>& strides,
                   bool cuda) {
    if (cuda) {
        // Only the compared elements are kept: the output comes back in chunks of up to 256 MiB
        // (a multi-GiB output needs no host copy of its size).
        for (size_t o = 0; o < out.size(); ++o) {
            const size_t esz = static_cast<size_t>(kevo_dtype_size(out[o].t.dtype)), st = strides[o];
            const size_t count = expect[o].host.size() / esz;
            size_t n = 1;
            for (int d = 0; d < out[o].t.ndim; ++d) n *= static_cast<size_t>(out[o].t.sizes[d]);
            out[o].host.resize(count * esz);
            const size_t per = std::max<size_t>(1, (size_t{256} << 20) / (esz * st)) * st;  // elements per chunk
            std::vector<char> chunk(std::min(n, per) * esz);
            for (size_t a = 0, k = 0; a < n; a += per) {
                const size_t len = std::min(per, n - a);
                check_cuda(cudaMemcpy(chunk.data(), static_cast<char*>(out[o].device) + a * esz, len * esz,
                                      cudaMemcpyDeviceToHost),
                           "cudaMemcpy");
                for (size_t i = 0; i < len && k < count; i += st, ++k)
                    std::memcpy(out[o].host.data() + k * esz, chunk.data() + i * esz, esz);
            }
        }
    } else {
        for (size_t o = 0; o < out.size(); ++o) {  // keep every stride-th element, in place
            const size_t esz = static_cast<size_t>(kevo_dtype_size(out[o].t.dtype));
            const size_t count = expect[o].host.size() / esz;
            for (size_t i = 1; i < count; ++i)
                std::memcpy(out[o].host.data() + i * esz, out[o].host.data() + i * strides[o] * esz, esz);
            out[o].host.resize(count * esz);
        }
    }
}

// Compares each output's compared elements with the expected ones: the JSON line's fields.
nlohmann::json compare(const std::vector<Buffer>& out, const std::vector<Buffer>& expect,
                       const std::vector<size_t>& strides, double atol, double rtol) {
    nlohmann::json res{{"ok", true}, {"max_abs_diff", 0.0}, {"outputs", nlohmann::json::array()}, {"error", ""}};
    double worst = 0;
    for (size_t o = 0; o < out.size(); ++o) {
        int dt = out[o].t.dtype;
        size_t n = out[o].host.size() / static_cast<size_t>(kevo_dtype_size(dt));
        bool exact = !kevo_dtype_is_floating(dt);
        double md = 0;
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; ++i) {
            double a = kevo_device::load_as_double(out[o].host.data(), dt, static_cast<int64_t>(i)),
                   e = kevo_device::load_as_double(expect[o].host.data(), dt, static_cast<int64_t>(i));
            if (std::isnan(a) && std::isnan(e)) continue;
            double d = std::fabs(a - e);
            if (std::isnan(d)) d = INFINITY;
            if (std::isinf(a) && a == e) d = 0;
            md = std::max(md, d);
            bool ok = exact ? d == 0 : d <= atol + rtol * std::fabs(e);
            if (!ok && bad++ == 0) first = i;
        }
        worst = std::max(worst, md);
        res["outputs"].push_back({{"max_abs_diff", md}, {"mismatches", bad}});
        if (bad) {
            res["ok"] = false;
            std::ostringstream ss;
            ss << "output " << o << ": " << bad << " of " << n << " compared elements differ (first at flat index "
               << first * strides[o]
               << ": C++ " << kevo_device::load_as_double(out[o].host.data(), dt, static_cast<int64_t>(first))
               << ", Python " << kevo_device::load_as_double(expect[o].host.data(), dt, static_cast<int64_t>(first))
               << "; max |diff| " << md << ")";
            if (res["error"].get<std::string>().empty()) res["error"] = ss.str();
        }
    }
    res["max_abs_diff"] = worst;
    return res;
}

nlohmann::json run(const nlohmann::json& m) {
    const bool cuda = m.value("device", std::string("cpu")) == "cuda";
    const double atol = m.value("atol", 1e-4), rtol = m.value("rtol", 1e-4);
    const std::string lib = m.at("library").get<std::string>();
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("cannot load the reference library: ") + dlerror());
    using setup_fn = int (*)(const char*);
    using forward_fn = int (*)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t);
    using error_fn = const char* (*)();
    auto setup = reinterpret_cast<setup_fn>(dlsym(h, "kevo_ref_setup"));
    auto forward = reinterpret_cast<forward_fn>(dlsym(h, "kevo_ref_forward"));
    auto error = reinterpret_cast<error_fn>(dlsym(h, "kevo_ref_error"));
    if (!forward || !error) throw std::runtime_error("the library has no kevo_ref_forward/kevo_ref_error");
    if (m.contains("arg")) {
        if (!setup) throw std::runtime_error("the library has no kevo_ref_setup, but the task gives reference.arg");
        if (setup(m.at("arg").get<std::string>().c_str()) != 0) throw std::runtime_error(std::string("setup: ") + error());
    }
    std::vector<Buffer> in, out, expect;
    std::vector<size_t> strides;
    for (const auto& s : m.at("inputs")) in.push_back(make(s, cuda, true));
    for (const auto& s : m.at("outputs")) {
        out.push_back(make(s, cuda, false));
        // The expected file holds every stride-th element.
        strides.push_back(std::max<size_t>(1, s.value("stride", size_t{1})));
        size_t n = 1;
        for (const auto& d : s.at("shape")) n *= d.get<size_t>();
        size_t count = (n + strides.back() - 1) / strides.back();
        nlohmann::json sampled = s;
        sampled["shape"] = {count};
        expect.push_back(make(sampled, false, true));
    }
    std::vector<kevo_tensor> tin, tout;
    for (auto& b : in) tin.push_back(b.t);
    for (auto& b : out) tout.push_back(b.t);
    if (forward(tin.data(), static_cast<int>(tin.size()), tout.data(), static_cast<int>(tout.size()), nullptr) != 0)
        throw std::runtime_error(std::string("the reference failed: ") + error());
    if (cuda) check_cuda(cudaDeviceSynchronize(), "the reference's kernels");
    keep_compared(out, expect, strides, cuda);
    nlohmann::json res = compare(out, expect, strides, atol, rtol);
    for (auto& b : in) if (b.device) cudaFree(b.device);
    for (auto& b : out) if (b.device) cudaFree(b.device);
    return res;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: kernelevo-refcheck MANIFEST.json  (see tool/kernelbench/refcheck.cpp)\n";
        return 2;
    }
    // Strict fp32 in cuBLAS and cuDNN (before the reference library loads them).
    setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
    nlohmann::json res;
    try {
        std::ifstream f(argv[1]);
        if (!f) throw std::runtime_error(std::string("cannot read ") + argv[1]);
        res = run(nlohmann::json::parse(f));
    } catch (const std::exception& e) {
        res = {{"ok", false}, {"error", e.what()}};
    }
    std::cout << res.dump() << std::endl;
    return res.value("ok", false) ? 0 : 1;
}
