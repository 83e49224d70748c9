// The candidate side of the runner: the only process that loads candidate code. It starts inside
// the sandbox (bubblewrap), brings CUDA up, confines itself (seccomp, Landlock, no capabilities),
// then opens the candidate library — so static constructors already run confined — and answers the
// judge's requests over the channel. It never sees expected outputs and writes no verdict: the judge
// checks every output itself, in memory it owns.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel.h"
#include "kernelevo/cublas_host.h"
#include "context_fence.h"
#include "device_ops.cuh"
#include "runner.h"
#include "sandbox/confine.h"
#include "shared_buffer.h"

namespace kevo_runner {

namespace {

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

typedef int (*forward_fn)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t);

struct Candidate {
    int sock = -1;
    int device = 0;
    cudaStream_t stream = nullptr;
    std::vector<cudaEvent_t> ev0, ev1;  // one pair per call of a batch
    ContextFence fence;  // a timed call's bounds hold for all its context's work (context_fence.h)
    volatile int* gate = nullptr;  // [0] open, [1] timed out
    int* gate_dev = nullptr;
    long long gate_cycles = 0;
    // The gate is a stream-memory wait on gate[0] where the GPU supports it: a stream waiting on
    // memory holds no SM, so the judge's observer runs at once in its own context. (A spinning
    // kernel, the fallback, keeps the GPU in this context until the scheduler's time slice ends.)
    // A watchdog thread opens the gate after kGateLimit if the judge has not: a kevo_forward that
    // synchronizes its own stream would otherwise wait for ever behind it.
    bool gate_wait_value = true;
    std::mutex gate_mu;
    std::condition_variable gate_cv;
    bool gate_armed = false;
    static constexpr std::chrono::milliseconds kGateLimit{kGateLimitMs};
    int flush_blocks = 0;
    std::vector<Msg> queue;  // calls queued for the next timed batch
    forward_fn forward = nullptr;
    std::map<int, Mapping> buffers;

    void reply(Msg& r) {
        r.op = OP_REPLY;
        if (!send_msg(sock, r)) _exit(0);  // the judge is gone
    }

    // Descriptors for one call, built fresh each time: a kernel that scribbles over them changes nothing.
    bool tensors(const Msg& m, std::vector<kevo_tensor>& in, std::vector<kevo_tensor>& out, Msg& r) {
        if (m.n_in < 0 || m.n_out < 0 || m.n_in + m.n_out > kMaxTensors) {
            set_text(r, "bad tensor count");
            return false;
        }
        for (int i = 0; i < m.n_in + m.n_out; ++i) {
            const TensorRef& t = m.t[i];
            auto it = buffers.find(t.buffer);
            if (it == buffers.end() || t.ndim < 0 || t.ndim > KEVO_MAX_DIMS || t.offset >= it->second.size) {
                set_text(r, "unknown buffer");
                return false;
            }
            kevo_tensor k{};
            k.data = static_cast<char*>(it->second.data()) + t.offset;
            k.ndim = t.ndim;
            k.dtype = t.dtype;
            for (int d = 0; d < t.ndim; ++d) {
                k.sizes[d] = t.sizes[d];
                k.strides[d] = t.strides[d];
            }
            (i < m.n_in ? in : out).push_back(k);
        }
        return true;
    }

    int call(std::vector<kevo_tensor>& in, std::vector<kevo_tensor>& out) {
        return forward(in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()), stream);
    }

    // A timed batch: the queued calls run back to back on the stream, each after the L2 flush with
    // its proof (device_ops.cuh), with CUDA events around each kevo_forward. The judge observes the
    // whole batch's wall time and checks the proofs and a random subset of the outputs itself.
    void time_batch(const Msg& m, Msg& r) {
        const int n = static_cast<int>(queue.size());
        if (n < 1 || n > kMaxBatch) {
            r.rc = -1000;
            set_text(r, "bad batch size");
            return;
        }
        const Mapping* flush = nullptr;
        unsigned long long* proof = nullptr;
        if (m.flags & FLAG_FLUSH) {
            auto f = buffers.find(m.id);
            auto p = buffers.find(m.aux);
            if (f == buffers.end() || p == buffers.end() || p->second.size < (n + 1) * sizeof(unsigned long long)) {
                r.rc = -1000;
                set_text(r, "unknown flush or proof buffer");
                return;
            }
            flush = &f->second;
            proof = static_cast<unsigned long long*>(p->second.data());
        }
        std::vector<std::vector<kevo_tensor>> ins(n), outs(n);
        for (int j = 0; j < n; ++j)
            if (!tensors(queue[j], ins[j], outs[j], r)) {
                r.rc = -1000;
                return;
            }
        int ran = 0;
        for (int j = 0; j < n; ++j) {
            if (flush) l2_flush_proof<<<flush_blocks, 512, 0, stream>>>(static_cast<const uint4*>(flush->data()), flush->size / 16, proof, j);
            cudaEventRecord(ev0[j], stream);
            if (fence.begin(ev0[j]) != cudaSuccess) {
                r.rc = -1002;
                set_text(r, "the CUDA context could not be fenced at the start of a timed call (a stream left capturing a graph?)");
            } else if (m.flags & FLAG_EMPTY) {
                empty_kernel<<<1, 32, 0, stream>>>();
            } else {
                r.rc = call(ins[j], outs[j]);
            }
            if (r.rc == 0 && fence.end(stream) != cudaSuccess) {
                r.rc = -1002;
                set_text(r, "the CUDA context could not be fenced at the end of a timed call (a stream left capturing a graph?)");
            }
            cudaEventRecord(ev1[j], stream);
            ++ran;
            if (r.rc != 0) break;
        }
        cudaError_t e = cudaEventSynchronize(ev1[ran - 1]);
        // The whole context: work a call left anywhere has ended before the judge looks.
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e == cudaSuccess) e = cudaGetLastError();
        for (int j = 0; j < ran && e == cudaSuccess; ++j) {
            float ms = 0;
            e = cudaEventElapsedTime(&ms, ev0[j], ev1[j]);
            r.us[j] = ms * 1000.0f;
        }
        r.count = ran;
        r.cuda_error = static_cast<int32_t>(e);
        if (e != cudaSuccess) set_text(r, cuda_text(e).c_str());
    }

    // What a call costs in this process that does nothing, sent to the judge as OP_CALIBRATION: runner
    // code only, before the candidate's library is loaded (so nothing of it can sway the figure) and
    // before the confinement. Each process's CUDA context launches at its own fixed cost (on the
    // H200 an empty call after a flush takes 3.16 us in one process, 3.28 in the next); the judge
    // times the same in its own context and compares the two (timing_session.cu). Nothing is sent where the
    // buffers cannot be had: the kernel's time then stands uncorrected.
    void calibrate(size_t flush_bytes) {
        void* buf = nullptr;
        void* proof = nullptr;
        auto run = [&](int n) {  // n empty calls, each after a flush, timed by ev0[j]..ev1[j]
            for (int j = 0; j < n; ++j) {
                l2_flush_proof<<<flush_blocks, 512, 0, stream>>>(static_cast<const uint4*>(buf), flush_bytes / 16, static_cast<unsigned long long*>(proof), j);
                cudaEventRecord(ev0[j], stream);
                fence.begin(ev0[j]);
                empty_kernel<<<1, 32, 0, stream>>>();
                fence.end(stream);
                cudaEventRecord(ev1[j], stream);
            }
            return cudaStreamSynchronize(stream);
        };
        if (cudaMalloc(&buf, flush_bytes) == cudaSuccess && cudaMalloc(&proof, (kMaxBatch + 1) * sizeof(unsigned long long)) == cudaSuccess &&
            cudaMemsetAsync(buf, 0x5a, flush_bytes, stream) == cudaSuccess && run(8) == cudaSuccess && run(kMaxBatch) == cudaSuccess) {
            Msg cal;
            cal.op = OP_CALIBRATION;
            for (int j = 0; j < kMaxBatch; ++j) {
                float ms = 0;
                if (cudaEventElapsedTime(&ms, ev0[j], ev1[j]) == cudaSuccess) cal.us[cal.count++] = ms * 1000.0f;
            }
            if (cudaGetLastError() == cudaSuccess) send_msg(sock, cal);
        }
        cudaFree(buf);
        cudaFree(proof);
        cudaGetLastError();
    }

    void open_gate(bool timed_out) {
        std::lock_guard<std::mutex> lock(gate_mu);
        if (timed_out && !gate_armed) return;  // opened meanwhile
        if (timed_out) gate[1] = 1;
        gate[0] = 1;
        gate_armed = false;
        gate_cv.notify_all();
    }

    // Holds the stream: what kevo_forward enqueues next waits until the judge opens the gate.
    void close_gate() {
        {
            std::lock_guard<std::mutex> lock(gate_mu);
            gate[0] = 0;
            gate[1] = 0;
            gate_armed = true;
        }
        gate_cv.notify_all();
        if (gate_wait_value &&
            cu().cuStreamWaitValue32(stream, reinterpret_cast<CUdeviceptr>(gate_dev), 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
            gate_wait_value = false;  // no stream-memory operations here: the spinning kernel
        if (!gate_wait_value) gate_kernel<<<1, 1, 0, stream>>>(gate_dev, gate_dev + 1, gate_cycles);
    }

    // The watchdog thread: opens a gate the judge left closed for kGateLimit.
    void watch_gate() {
        std::unique_lock<std::mutex> lock(gate_mu);
        while (true) {
            gate_cv.wait(lock, [&] { return gate_armed; });
            if (!gate_cv.wait_for(lock, kGateLimit, [&] { return !gate_armed; })) {
                lock.unlock();
                open_gate(true);
                lock.lock();
            }
        }
    }

    void map_buffer(const Msg& m, int fd, Msg& r) {
        Mapping map;
        std::string e = fd < 0 ? std::string("no fd") : import_shared(map, fd, m.size, device);
        if (e.empty()) buffers[m.id] = map;
        r.rc = e.empty() ? 0 : -1;
        set_text(r, e.c_str());
    }

    void unmap_buffer(const Msg& m) {
        auto it = buffers.find(m.id);
        if (it != buffers.end()) {
            release(it->second);
            buffers.erase(it);
        }
    }

    // OP_CALL: one kevo_forward (FLAG_GATED: behind the gate).
    void call_once(const Msg& m, Msg& r) {
        std::vector<kevo_tensor> in, out;
        if (!tensors(m, in, out, r)) {
            r.rc = -1000;
            return;
        }
        if (m.flags & FLAG_GATED) close_gate();
        r.rc = call(in, out);
        int dev = -1;
        if (cudaGetDevice(&dev) == cudaSuccess && dev != device) {
            r.rc = -1001;
            set_text(r, "the kernel changed the current CUDA device and did not restore it");
        }
    }

    // OP_SYNC (the stream) or OP_DEVSYNC (the device): the first CUDA error, and whether the gate's
    // watchdog opened the gate.
    void synchronize(const Msg& m, Msg& r) {
        cudaError_t launch = cudaGetLastError();
        cudaError_t sync = m.op == OP_SYNC ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize();
        cudaError_t e = sync != cudaSuccess ? sync : launch;
        r.cuda_error = static_cast<int32_t>(e);
        r.gate_timed_out = gate[1];
        if (e != cudaSuccess) set_text(r, cuda_text(e).c_str());
    }

    void serve() {
        while (true) {
            Msg m;
            int fd = -1;
            RecvStatus st = recv_msg(sock, m, -1, &fd);
            if (st != RecvStatus::ok) _exit(0);
            Msg r;
            switch (m.op) {
                case OP_MAP:
                    map_buffer(m, fd, r);
                    break;
                case OP_UNMAP:
                    unmap_buffer(m);
                    break;
                case OP_CALL:
                    call_once(m, r);
                    break;
                case OP_OPEN_GATE:
                    open_gate(false);
                    break;
                case OP_SYNC:
                case OP_DEVSYNC:
                    synchronize(m, r);
                    break;
                case OP_QUEUE:
                    // Queued calls are only run by OP_TIME_BATCH; too many make that batch fail.
                    if (queue.size() < static_cast<size_t>(kMaxBatch) + 1) queue.push_back(m);
                    continue;  // no reply
                case OP_TIME_BATCH:
                    time_batch(m, r);
                    queue.clear();
                    break;
                case OP_QUIT:
                    std::fflush(nullptr);
                    _exit(0);
                default:
                    r.rc = -1000;
                    set_text(r, "unknown request");
            }
            reply(r);
        }
    }
};

void hello(int sock, int rc, const std::string& text) {
    Msg m;
    m.op = OP_HELLO;
    m.rc = rc;
    set_text(m, text.c_str());
    send_msg(sock, m);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t a = 0;
    while (a <= s.size()) {
        size_t b = s.find(sep, a);
        if (b == std::string::npos) b = s.size();
        if (b > a) out.push_back(s.substr(a, b - a));
        a = b + 1;
    }
    return out;
}

// The candidate process's CUDA set-up, before the confinement: context, stream, fence, gate and
// events. A failure is told the judge in the hello, and ends it.
void init_gpu(Candidate& c, const CandidateArgs& args) {
    auto fail = [&](const std::string& what, cudaError_t e) {
        hello(c.sock, 2, what + ": " + cuda_text(e));
        _exit(0);
    };
    cudaError_t e = cudaSetDevice(c.device);
    if (e == cudaSuccess) e = cudaFree(nullptr);
    if (e != cudaSuccess) fail("CUDA initialisation in the sandbox failed", e);
    (void)cu();  // the driver API, before the sandbox forbids what its lookup needs
    if ((e = cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking)) != cudaSuccess) fail("cudaStreamCreate", e);
    if (!c.fence.init()) fail("creating the event that bounds timed calls", cudaGetLastError());
    // cuBLAS handles and workspace for a candidate that asks for them (kernelevo/abi.h, version 2).
    const std::string blas = kevo_cublas::prepare_for_kernel(args.kernel.c_str(), KEVO_CUBLAS_LIBRARY, KEVO_CUBLASLT_LIBRARY,
                                                             c.device, c.stream);
    if (!blas.empty()) {
        hello(c.sock, 2, "setting up cuBLAS for the candidate failed: " + blas);
        _exit(0);
    }
    void* g = nullptr;
    if ((e = cudaHostAlloc(&g, 2 * sizeof(int), cudaHostAllocMapped)) != cudaSuccess) fail("cudaHostAlloc", e);
    c.gate = static_cast<volatile int*>(g);
    cudaHostGetDevicePointer(reinterpret_cast<void**>(&c.gate_dev), g, 0);
    int khz = 0, sms = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, c.device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c.device);
    for (int j = 0; j < kMaxBatch; ++j) {  // before the confinement, like all CUDA set-up
        cudaEvent_t a = nullptr, b = nullptr;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        c.ev0.push_back(a);
        c.ev1.push_back(b);
    }
    c.flush_blocks = l2_flush_blocks(sms);
    c.gate_cycles = static_cast<long long>(std::max(khz, 1000000)) * Candidate::kGateLimit.count();  // at the top clock
    c.gate_wait_value = cu().ok && !args.gate_kernel;
    cudaDeviceSynchronize();
}

}  // namespace

int candidate_main(const CandidateArgs& args) {
    Candidate c;
    c.sock = args.channel;
    c.device = args.device;
    const bool gpu = !args.load_only;
    // CUDA first: its initialisation opens devices and maps memory the confinement forbids later. The
    // process and its context start while other judges may be timing; what runs kernels (the launch-cost
    // calibration, the library's static constructors) waits for the judge's OP_GO, sent once the judge
    // holds the GPU shared.
    if (gpu) {
        init_gpu(c, args);
        Msg go;
        if (recv_msg(c.sock, go, -1, nullptr) != RecvStatus::ok || go.op != OP_GO) _exit(0);
        int l2 = 0;
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, c.device);
        c.calibrate(l2_flush_bytes(l2));  // runner code only, before the library is loaded
        cudaDeviceSynchronize();
    }
    kevo::ConfineReport cr;
    if (args.confine) {
        kevo::ConfineOptions co;
        co.readable = split(args.readable, ':');
        co.writable = split(args.writable, ':');
        co.cpu_seconds = args.cpu_seconds;
        cr = kevo::confine_current_process(co);
    }
    // The gate's watchdog starts confined: a thread inherits its creator's Landlock domain.
    if (gpu) std::thread([&c] { c.watch_gate(); }).detach();
    // From here on no new thread or timer (sandbox/confine.h): the candidate's work is launched from
    // kevo_forward, inside the call the judge times. Not where the confinement is off (diagnostics)
    // or seccomp is unavailable (the notes say so).
    if (cr.seccomp && !kevo::forbid_new_threads(cr.notes)) {
        hello(c.sock, 2, "the candidate process could not forbid new threads: " + cr.notes);
        _exit(0);
    }
    std::string layers = std::string(cr.seccomp ? "seccomp " : "") + (cr.landlock ? "landlock " : "") +
                         (cr.caps_dropped ? "no-capabilities " : "") + (cr.no_new_privs ? "no-new-privs " : "") +
                         (gpu ? std::string("timed calls fenced over the ") + c.fence.mode() : std::string());
    // Static constructors of the candidate run here, confined.
    void* lib = dlopen(args.kernel.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* err = dlerror();
        hello(c.sock, 1, std::string("cannot load the compiled kernel: ") + (err ? err : "?"));
        _exit(0);
    }
    c.forward = reinterpret_cast<forward_fn>(dlsym(lib, "kevo_forward"));
    if (!c.forward) {
        hello(c.sock, 1, "the kernel does not export kevo_forward");
        _exit(0);
    }
    hello(c.sock, 0, layers + (cr.notes.empty() ? "" : "\n" + cr.notes));
    if (args.load_only) _exit(0);
    c.serve();
    return 0;
}

}  // namespace kevo_runner
