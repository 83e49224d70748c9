// The judge's device buffers (judge.h): tensors allocated plain or shared with the candidate
// process, their slack zeroed, filled with the task's inputs, poisoned, checksummed; outputs
// compared with the expected ones.
#include "judge.h"
#include "verdict.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace kevo_runner {

namespace {
int grid_for(int64_t n, int sms) {
    int64_t blocks = (n + 255) / 256;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, static_cast<int64_t>(sms) * 16)));
}
}  // namespace

#define CK(x) cuda_ok((x), #x)

std::vector<kevo_tensor> Tensors::abi() const {
    std::vector<kevo_tensor> out;
    for (size_t i = 0; i < desc.size(); ++i) {
        kevo_tensor k{};
        k.data = mem[i].data();
        k.ndim = static_cast<int32_t>(desc[i].sizes.size());
        k.dtype = desc[i].dtype;
        int64_t stride = 1;
        for (int d = k.ndim - 1; d >= 0; --d) {
            k.sizes[d] = desc[i].sizes[d];
            k.strides[d] = stride;
            stride *= desc[i].sizes[d];
        }
        out.push_back(k);
    }
    return out;
}

void Tensors::free() {
    for (auto& m : mem) {
        if (view) continue;
        if (m.handle) release(m);
        else if (m.ptr) cudaFree(m.data());
    }
    mem.clear();
    ids.clear();
    offsets.clear();
}

Tensors Judge::allocate(const std::vector<JobTensor>& desc, bool shared) {
    Tensors t;
    t.desc = desc;
    for (const auto& d : desc) {
        Mapping m;
        size_t bytes = static_cast<size_t>(std::max<int64_t>(d.bytes(), 1));
        if (shared) {
            std::string e = create_shared(m, bytes, device_);
            if (!e.empty()) {
                t.mem.push_back(m);
                t.free();
                throw SetupFailure{e + " (tensor " + d.name + ")"};
            }
        } else {
            void* p = nullptr;
            cudaError_t e = cudaMalloc(&p, bytes);
            if (e != cudaSuccess) {
                t.free();
                throw SetupFailure{"cannot allocate " + std::to_string(bytes) + " bytes for tensor " + d.name + ": " + cudaGetErrorString(e)};
            }
            m.ptr = reinterpret_cast<CUdeviceptr>(p);
            m.size = bytes;
        }
        t.mem.push_back(m);
        t.ids.push_back(-1);
        t.offsets.push_back(0);
    }
    zero_slack(t);
    return t;
}

// A candidate maps a shared allocation whole, rounded up to the granularity: the slack beyond each
// tensor is zeroed, so nothing an earlier candidate left in this memory (freed and handed out
// again, or a kept timing copy) reaches the next one.
void Judge::zero_slack(Tensors& t) {
    for (size_t i = 0; i < t.mem.size(); ++i) {
        const size_t bytes = static_cast<size_t>(std::max<int64_t>(t.desc[i].bytes(), 1));
        if ((t.mem[i].handle || t.view) && t.mem[i].size > bytes)
            CK(cudaMemsetAsync(static_cast<char*>(t.mem[i].data()) + bytes, 0, t.mem[i].size - bytes, stream_));
    }
}

const Judge::FileValues& Judge::file_values(const JobTensor& d) {
    auto it = file_data_.find(d.path);
    if (it != file_data_.end()) {
        if (d.parameter && it->second.vary_scale == 0)  // the same file read before as a non-parameter
            it->second.vary_scale = kevo_device::vary_scale(it->second.bytes.data(), d.dtype, d.numel());
        return it->second;
    }
    std::ifstream f(d.path, std::ios::binary);
    if (!f) throw SetupFailure{"cannot read the values of input '" + d.name + "' from " + d.path};
    FileValues v;
    v.bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (static_cast<int64_t>(v.bytes.size()) != d.bytes())
        throw SetupFailure{"input '" + d.name + "': " + d.path + " holds " + std::to_string(v.bytes.size()) + " bytes, the tensor needs " +
                           std::to_string(d.bytes())};
    if (d.parameter) v.vary_scale = kevo_device::vary_scale(v.bytes.data(), d.dtype, d.numel());
    return file_data_.emplace(d.path, std::move(v)).first->second;
}

// A model parameter (JobTensor::parameter) keeps the file's values on each set's first trial (the
// job's seed) and is moved and perturbed on every other draw, the timed calls' too (device/fill.h):
// a kernel that keeps the weights it first saw, or reads a LayerNorm's ones as constants, fails.
void Judge::fill(Tensors& t, uint64_t seed) {
    for (size_t i = 0; i < t.desc.size(); ++i) {
        const auto& d = t.desc[i];
        int64_t n = d.numel();
        if (n == 0) continue;
        if (d.init == KEVO_INIT_FILE) {
            const FileValues& v = file_values(d);
            char* dst = static_cast<char*>(t.mem[i].data());
            if (!d.parameter || seed == job_->seed) {
                CK(cudaMemcpyAsync(dst, v.bytes.data(), v.bytes.size(), cudaMemcpyHostToDevice, stream_));
                continue;
            }
            const uint64_t ts = tensor_seed(seed, i);
            const size_t cut = static_cast<size_t>(kevo_device::vary_shift(ts, static_cast<uint64_t>(n))) * kevo_dtype_size(d.dtype);
            CK(cudaMemcpyAsync(dst, v.bytes.data() + cut, v.bytes.size() - cut, cudaMemcpyHostToDevice, stream_));
            if (cut) CK(cudaMemcpyAsync(dst + v.bytes.size() - cut, v.bytes.data(), cut, cudaMemcpyHostToDevice, stream_));
            if (kevo_dtype_is_floating(d.dtype)) {
                vary_kernel<<<grid_for(n, sms_), 256, 0, stream_>>>(dst, d.dtype, n, v.vary_scale, ts);
                CK(cudaGetLastError());
            }
            continue;
        }
        fill_kernel<<<grid_for(n, sms_), 256, 0, stream_>>>(t.mem[i].data(), d.dtype, n, d.init, d.a, d.b, tensor_seed(seed, i));
        CK(cudaGetLastError());
    }
}

void Judge::poison(Tensors& t, unsigned char pattern) {
    for (size_t i = 0; i < t.desc.size(); ++i) CK(cudaMemsetAsync(t.mem[i].data(), pattern, t.desc[i].bytes(), stream_));
}

std::vector<unsigned long long> Judge::checksums(const Tensors& t, cudaStream_t s) {
    std::vector<unsigned long long> out;
    for (size_t i = 0; i < t.desc.size(); ++i) {
        CK(cudaMemsetAsync(sum_, 0, sizeof(unsigned long long), s));
        int64_t bytes = t.desc[i].bytes();
        checksum_kernel<<<grid_for(bytes / 8 + 1, sms_), 256, 0, s>>>(t.mem[i].data(), bytes, sum_);
        CK(cudaGetLastError());
        unsigned long long v = 0;
        CK(cudaMemcpyAsync(&v, sum_, sizeof v, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        out.push_back(v);
    }
    return out;
}

json Judge::compare(size_t set, uint64_t seed, const Tensors& out, const Tensors& expected, std::vector<std::string>& warnings) {
    json check, outputs = json::array();
    bool pass = true;
    double max_abs = 0;
    const std::string& label = job_->sets[set].label;
    const std::string where = "shape set " + std::to_string(set) + (label.empty() ? "" : " (" + label + ")") + ", seed " + std::to_string(seed);
    for (size_t o = 0; o < out.desc.size(); ++o) {
        const auto& d = out.desc[o];
        int64_t n = d.numel();
        if (n == 0) continue;
        OutputCheck c = compare_output(d, out.mem[o].data(), expected.mem[o].data(), job_->atol, job_->rtol, grid_for(n, sms_), stream_,
                                       stats_, where);
        max_abs = std::max(max_abs, c.max_abs);
        outputs.push_back(c.report);
        // Whether the expected output ever varies is judged over all the inputs drawn (run() warns):
        // a small output can be constant on one draw by chance (3 rows' argmax agree 1 time in 49).
        if (n > 1) {
            auto it = output_varies_.emplace(std::make_pair(set, d.name), false).first;
            it->second = it->second || c.varies;
        }
        if (!c.pass && pass) {
            pass = false;
            check["output"] = d.name;
            check["message"] = c.message;
            if (c.report.contains("mismatches")) check["mismatches"] = c.report["mismatches"];
        }
    }
    check["pass"] = pass;
    check["max_abs_diff"] = max_abs;
    check["outputs"] = outputs;
    return check;
}

}  // namespace kevo_runner
