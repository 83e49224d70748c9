// The judge's correctness checks and its management of the candidate process (see judge.h).
#include "judge.h"
#include "gpu_activity.h"
#include "verdict.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "test_hooks.h"

namespace kevo_runner {

namespace {
void stage(const std::string& s) { std::fprintf(stderr, "[runner] %s\n", s.c_str()); }

int grid_for(int64_t n, int sms) {
    int64_t blocks = (n + 255) / 256;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, static_cast<int64_t>(sms) * 16)));
}

// What a candidate process's end says about why it ended (bwrap reports 128 + signal).
std::string describe_exit(int status) {
    int sig = 0;
    if (WIFSIGNALED(status)) sig = WTERMSIG(status);
    else if (WIFEXITED(status) && WEXITSTATUS(status) > 128) sig = WEXITSTATUS(status) - 128;
    if (sig == SIGSYS)
        return "the sandbox killed the candidate process for a forbidden system call (starting programs or processes, "
               "ptrace or reading other processes' memory are not allowed)";
    if (sig) return std::string("the candidate process was killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
    if (WIFEXITED(status)) return "the candidate process exited with code " + std::to_string(WEXITSTATUS(status));
    return "the candidate process ended";
}

// Starts the candidate process (argv, env) in its own session: the channel to the judge is its
// descriptor 3, its stdout and stderr go to `output_fd`. Returns its pid.
pid_t spawn(std::vector<std::string>& argv, std::vector<std::string>& env, int channel_fd, int output_fd) {
    std::vector<char*> av, ev;
    for (auto& a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    for (auto& e : env) ev.push_back(e.data());
    ev.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw SetupFailure{"fork failed"};
    if (pid == 0) {
        setsid();
        dup2(channel_fd, 3);
        dup2(output_fd, 1);
        dup2(output_fd, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        // Nothing of the judge's leaks in, however many descriptors it has open.
        if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
            for (long fd = 4, end = sysconf(_SC_OPEN_MAX); fd < (end > 0 ? end : 65536); ++fd) close(static_cast<int>(fd));
        execvpe(av[0], av.data(), ev.data());
        _exit(127);
    }
    return pid;
}
}  // namespace

std::string fmt(double v) {
    if (std::isnan(v)) return "nan";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.7g", v);
    return buf;
}

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

Judge::Judge() = default;

Judge::~Judge() {
    JobResult r;
    stop_candidate(r);
}

void Judge::cuda_ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    throw SetupFailure{std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}
#define CK(x) cuda_ok((x), #x)

void Judge::init_device(JobResult& r) {
    if (device_ready_) {
        r.device = device_json_;
        return;
    }
    device_json_ = device_info();
    r.device = device_json_;
    if (!device_json_.value("present", false)) return;
    device_ = device_json_.value("index", 0);
    peak_gbs_ = device_json_.value("mem_bandwidth_gbs", 0.0);
    // Before the context: the judge, and every candidate process it starts (they inherit it), on
    // the GPU's own NUMA node.
    const std::string cpus = pin_to_device_cpus(device_json_.value("pci_bus_id", std::string()));
    if (!cpus.empty()) device_json_["pinned_cpus"] = cpus;
    r.device = device_json_;
    CK(cudaSetDevice(device_));
    CK(cudaFree(nullptr));
    if (!cu().ok) throw SetupFailure{"the CUDA driver API (cuMem*) is unavailable"};
    // Non-blocking streams: work a candidate puts on the legacy default stream is NOT ordered with them.
    CK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&observer_, cudaStreamNonBlocking));
    if (!fence_.init()) throw SetupFailure{"cannot create the event that bounds timed calls"};
    CK(cudaMalloc(&sum_, sizeof(unsigned long long)));
    CK(cudaMalloc(&stats_, sizeof(CompareStats)));
    int v = 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device_);
    l2_bytes_ = v;
    cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_);
    // L2 is flushed between timed calls by reading a buffer well beyond its size: the next call
    // starts with L2 full of clean lines (a memset would leave dirty ones to write back).
    // The candidate process flushes before each of its timed calls, reading this buffer (random
    // values) with a proof the judge checks (l2_flush_proof); the judge flushes the same way.
    {
        std::string e = create_shared(flush_, l2_flush_bytes(l2_bytes_), device_);
        if (!e.empty()) throw SetupFailure{"the L2-flush buffer: " + e};
        e = create_shared(proof_, (kMaxBatch + 1) * sizeof(unsigned long long), device_);
        if (!e.empty()) throw SetupFailure{"the flush-proof buffer: " + e};
    }
    CK(cudaMalloc(&judge_proof_, 2 * sizeof(unsigned long long)));
    // Values no one can predict: a candidate cannot compute a proof from the seed instead of reading.
    std::random_device rd;
    const uint64_t flush_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    fill_kernel<<<sms_ * 16, 256, 0, stream_>>>(flush_.data(), KEVO_FLOAT32, static_cast<int64_t>(flush_.size / 4), KEVO_INIT_RANDN, 0.0, 1.0, flush_seed);
    CK(cudaGetLastError());
    flush_blocks_ = l2_flush_blocks(sms_);
    CK(cudaDeviceSynchronize());
    // The candidate process maps the flush buffer read-write (an importer chooses its own access), so
    // the judge checks after every batch that it still holds these values: a process that overwrote
    // it with values it knows could compute proofs without reading anything.
    flush_digest_ = proof_of(kFlushDigestKey);
    device_ready_ = true;
}

void Judge::load_reference(const Job& job) {
    if (ref_lib_ && ref_path_ == job.reference && ref_arg_ == job.reference_arg) return;
    if (ref_lib_) throw SetupFailure{"one judge process serves one reference; start another for " + job.reference};
    stage("loading the reference");
    ref_lib_ = dlopen(job.reference.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!ref_lib_) throw SetupFailure{std::string("cannot load the reference build: ") + dlerror()};
    ref_forward_ = reinterpret_cast<decltype(ref_forward_)>(dlsym(ref_lib_, "kevo_ref_forward"));
    ref_call_ = reinterpret_cast<decltype(ref_call_)>(dlsym(ref_lib_, "kevo_ref_call"));
    ref_release_ = reinterpret_cast<decltype(ref_release_)>(dlsym(ref_lib_, "kevo_ref_release"));
    ref_error_ = reinterpret_cast<decltype(ref_error_)>(dlsym(ref_lib_, "kevo_ref_error"));
    ref_precision_ = reinterpret_cast<decltype(ref_precision_)>(dlsym(ref_lib_, "kevo_ref_precision"));
    ref_call_strict_ = reinterpret_cast<decltype(ref_call_strict_)>(dlsym(ref_lib_, "kevo_ref_call_strict"));
    if (!ref_forward_ || !ref_call_ || !ref_release_ || !ref_error_) throw SetupFailure{"the reference build lacks its entry points"};
    if (auto setup = reinterpret_cast<int (*)(const char*)>(dlsym(ref_lib_, "kevo_ref_setup"))) {
        if (setup(job.reference_arg.c_str()) != 0) throw SetupFailure{std::string("the reference's setup failed: ") + ref_error_()};
    }
    // After the setup, which may set them: "cuDNN TF32 on, cuBLAS TF32 off" differs from strict fp32
    // (what correctness is judged against) when either is on.
    tf32_defaults_ = ref_precision_ && std::strstr(ref_precision_(), "TF32 on") != nullptr;
    ref_path_ = job.reference;
    ref_arg_ = job.reference_arg;
}

void Judge::start_candidate(const Job& job, JobResult& r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw SetupFailure{"socketpair failed"};
    int out_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) throw SetupFailure{"pipe failed"};
    std::vector<std::string> argv = candidate_argv(job);
    std::vector<std::string> env;
    for (const auto& [k, v] : job.candidate_env) env.push_back(k + "=" + v);
    pid_t pid = spawn(argv, env, sv[1], out_pipe[1]);
    close(sv[1]);
    close(out_pipe[1]);
    pid_ = pid;
    sock_ = sv[0];
    flush_id_ = proof_id_ = -1;  // a new process has mapped nothing yet
    for (auto& [set, tc] : timing_copies_) tc.arena_id = -1;  // share_copies maps it again and sets the views' ids
    warmed_up_ = false;
    output_.clear();
    read_output(out_pipe[0]);
    await_hello(job, r, argv[0]);
}

// The candidate process's command line: the sandbox's prefix, then this runner as --candidate.
std::vector<std::string> Judge::candidate_argv(const Job& job) const {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw SetupFailure{"cannot find the runner's own executable"};
    self[n] = 0;
    std::vector<std::string> argv = job.sandbox_prefix;
    argv.insert(argv.end(), {self, "--candidate", "--channel", "3", "--device", std::to_string(device_), "--kernel", job.kernel});
    if (!job.workdir.empty()) argv.insert(argv.end(), {"--workdir", job.workdir});
    std::string readable;
    for (const auto& p : job.readable) readable += (readable.empty() ? "" : ":") + p;
    if (!readable.empty()) argv.insert(argv.end(), {"--readable", readable});
    std::string writable;
    for (const auto& p : job.writable) writable += (writable.empty() ? "" : ":") + p;
    if (!writable.empty()) argv.insert(argv.end(), {"--writable", writable});
    if (!job.confine) argv.push_back("--no-confine");
    if (job.load_only) argv.push_back("--load-only");
    if (test_hook(kevo::EnvVar::kGateKernel)) argv.push_back("--gate-kernel");  // test builds only (validate.cpp passes it on)
    return argv;
}

// The candidate process's output (its stdout and stderr, the first 64 KiB), read while it runs.
void Judge::read_output(int rfd) {
    output_reader_ = std::thread([this, rfd] {
        char buf[4096];
        ssize_t got;
        while ((got = read(rfd, buf, sizeof buf)) > 0)
            if (output_.size() < (64u << 10)) output_.append(buf, std::min<size_t>(got, (64u << 10) - output_.size()));
        close(rfd);
    });
}

// The candidate process's first messages: its launch-cost calibration, then the loader's hello.
void Judge::await_hello(const Job& job, JobResult& r, const std::string& exe) {
    Msg hello;
    RecvStatus st = recv_msg(sock_, hello, std::max(60.0, job.call_timeout_s), nullptr);
    // First, sent by runner code before the candidate's library was loaded: what an empty call costs
    // in that process (timing_session.cu compares it with the judge's own).
    candidate_empty_us_ = 0;
    if (st == RecvStatus::ok && hello.op == OP_CALIBRATION) {
        std::vector<double> us;
        for (int i = 0; i < std::min(hello.count, kMaxBatch); ++i) us.push_back(hello.us[i]);
        candidate_empty_us_ = kevo::empty_call_cost_us(us);
        st = recv_msg(sock_, hello, std::max(60.0, job.call_timeout_s), nullptr);
    }
    if (st == RecvStatus::timeout) throw CandidateFailure{"timeout", "the candidate process did not start within the time limit (its static constructors hang?)"};
    if (st == RecvStatus::malformed || (st == RecvStatus::ok && hello.op != OP_HELLO)) {
        // A message that is not the loader's: the candidate's code wrote on the channel. The process
        // may well be alive and waiting, so it is ended, not waited for.
        kill_candidate();
        throw CandidateFailure{"rejected", "malformed message from the candidate process while loading (its code wrote on the runner's channel)"};
    }
    if (st != RecvStatus::ok) {
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        if (output_reader_.joinable()) output_reader_.join();
        std::string why = describe_exit(status);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && output_.empty()) throw SetupFailure{"cannot start the sandboxed candidate process (" + exe + ")"};
        if (output_.find("bwrap:") != std::string::npos && output_.find("kevo") == std::string::npos)
            throw SetupFailure{"the sandbox (bubblewrap) failed to start: " + output_.substr(0, 500)};
        throw CandidateFailure{why.find("sandbox killed") != std::string::npos ? "rejected" : "runtime_error",
                               why + " while loading (static constructors run at load time)"};
    }
    r.sandbox["candidate_layers"] = hello.text;
    r.sandbox["namespaces"] = !job.sandbox_prefix.empty();
    if (hello.rc == 1) throw CandidateFailure{"compile_error", hello.text};
    if (hello.rc != 0) throw SetupFailure{hello.text};
}

void Judge::kill_candidate(bool reap) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int status = 0;
    if (reap) waitpid(pid_, &status, 0);
    pid_ = -1;
}

void Judge::stop_candidate(JobResult& r) {
    if (pid_ > 0) {
        Msg q;
        q.op = OP_QUIT;
        send_msg(sock_, q, -1, 1.0);
        int status = 0;
        bool reaped = false;
        for (int i = 0; i < 100 && !reaped; ++i) {  // up to 1 s to exit on its own
            if (waitpid(pid_, &status, WNOHANG) == pid_) reaped = true;
            else usleep(10000);
        }
        // Whatever it left behind dies with it: its session, and with bwrap its whole PID namespace.
        kill_candidate(!reaped);
    }
    if (sock_ >= 0) close(sock_);
    sock_ = -1;
    if (output_reader_.joinable()) output_reader_.join();
    if (!output_.empty()) r.candidate_output = output_;
}

Msg Judge::request(Msg m, double timeout_s, const char* what, int fd) {
    if (!send_msg(sock_, m, fd, std::max(1.0, timeout_s))) {
        if (errno == ETIMEDOUT) {  // alive but not reading: it is ended, not waited for
            kill_candidate();
            throw CandidateFailure{"timeout", std::string("the candidate process stopped reading the runner's channel ") + what + "; the process was killed"};
        }
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        throw CandidateFailure{describe_exit(status).find("sandbox killed") != std::string::npos ? "rejected" : "runtime_error",
                               describe_exit(status) + " " + what};
    }
    Msg r;
    RecvStatus st = recv_msg(sock_, r, timeout_s, nullptr);
    if (st == RecvStatus::timeout)
        throw CandidateFailure{"timeout", std::string("the kernel did not finish within ") + fmt(timeout_s) + " s " + what + " (watchdog); the process was killed"};
    if (st == RecvStatus::closed) {
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        std::string why = describe_exit(status);
        throw CandidateFailure{why.find("sandbox killed") != std::string::npos ? "rejected" : "runtime_error", why + " " + what};
    }
    if (st != RecvStatus::ok || r.op != OP_REPLY) throw CandidateFailure{"rejected", std::string("malformed reply from the candidate process ") + what};
    return r;
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

int Judge::map_in_candidate(const Mapping& mem) {
    Msg m;
    m.op = OP_MAP;
    m.id = next_id_++;
    m.size = mem.size;
    int fd = -1;
    std::string e = export_shared(mem, fd);
    if (!e.empty()) throw SetupFailure{"cannot share a buffer with the candidate process: " + e};
    Msg r;
    try {
        r = request(m, job_->call_timeout_s, "while mapping buffers", fd);
    } catch (...) {
        close(fd);
        throw;
    }
    close(fd);
    if (r.rc != 0) throw SetupFailure{std::string("the candidate process could not map a buffer: ") + r.text};
    return m.id;
}

std::vector<double> Judge::empty_calls_us(int n, bool flush) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int j = 0; j < n; ++j) {
        if (flush) flush_l2(judge_proof_, 0);
        CK(cudaEventRecord(e0, stream_));
        CK(fence_.begin(e0));
        empty_kernel<<<1, 32, 0, stream_>>>();
        CK(fence_.end(stream_));
        CK(cudaEventRecord(e1, stream_));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        us.push_back(ms * 1000.0);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return us;
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

void Judge::share(Tensors& t) {
    for (size_t i = 0; i < t.mem.size(); ++i)
        if (t.ids[i] < 0) t.ids[i] = map_in_candidate(t.mem[i]);
}

void Judge::unmap_in_candidate(int& id) {
    if (pid_ > 0 && id >= 0) {
        Msg m;
        m.op = OP_UNMAP;
        m.id = id;
        request(m, job_->call_timeout_s, "while unmapping buffers");
    }
    id = -1;
}

void Judge::unshare(Tensors& t) {
    if (pid_ <= 0) return;
    for (int& id : t.ids) unmap_in_candidate(id);
}

void Judge::call_candidate(const Tensors& in, const Tensors& out, int32_t flags, const std::string& when) {
    Msg call;
    call.op = OP_CALL;
    call.flags = flags;
    fill_refs(call, in, out);
    Msg r = request(call, job_->call_timeout_s, when.c_str());
    if (r.rc == -1001) throw CandidateFailure{"rejected", r.text};
    if (r.rc != 0) throw CandidateFailure{"runtime_error", "kevo_forward returned " + std::to_string(r.rc) + " (" + when + ")"};
}

Msg Judge::sync_candidate(int32_t op, const std::string& what) {
    Msg m;
    m.op = op;
    Msg r = request(m, job_->call_timeout_s, what.c_str());
    if (r.cuda_error != 0) throw CandidateFailure{"runtime_error", "CUDA error " + what + ": " + r.text};
    return r;
}

void Judge::fill_refs(Msg& m, const Tensors& in, const Tensors& out) const {
    m.n_in = static_cast<int32_t>(in.desc.size());
    m.n_out = static_cast<int32_t>(out.desc.size());
    if (m.n_in + m.n_out > kMaxTensors) throw SetupFailure{"too many tensors for one call (at most " + std::to_string(kMaxTensors) + ")"};
    auto put = [&](const Tensors& t, int base) {
        auto abi = t.abi();
        for (size_t i = 0; i < abi.size(); ++i) {
            TensorRef& r = m.t[base + i];
            r.buffer = t.ids[i];
            r.offset = t.offsets[i];
            r.ndim = abi[i].ndim;
            r.dtype = abi[i].dtype;
            for (int d = 0; d < r.ndim; ++d) {
                r.sizes[d] = abi[i].sizes[d];
                r.strides[d] = abi[i].strides[d];
            }
        }
    };
    put(in, 0);
    put(out, m.n_in);
}

void Judge::fill(Tensors& t, uint64_t seed) {
    for (size_t i = 0; i < t.desc.size(); ++i) {
        const auto& d = t.desc[i];
        int64_t n = d.numel();
        if (n == 0) continue;
        if (d.init == KEVO_INIT_FILE) {
            auto it = file_data_.find(d.path);
            if (it == file_data_.end()) {
                std::ifstream f(d.path, std::ios::binary);
                if (!f) throw SetupFailure{"cannot read the values of input '" + d.name + "' from " + d.path};
                std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
                if (static_cast<int64_t>(bytes.size()) != d.bytes())
                    throw SetupFailure{"input '" + d.name + "': " + d.path + " holds " + std::to_string(bytes.size()) +
                                       " bytes, the tensor needs " + std::to_string(d.bytes())};
                it = file_data_.emplace(d.path, std::move(bytes)).first;
            }
            CK(cudaMemcpyAsync(t.mem[i].data(), it->second.data(), it->second.size(), cudaMemcpyHostToDevice, stream_));
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

void Judge::reference_forward(const Tensors& in, Tensors& expected) {
    auto ins = in.abi();
    auto outs = expected.abi();
    int rc = ref_forward_(ins.data(), static_cast<int>(ins.size()), outs.data(), static_cast<int>(outs.size()), stream_);
    if (rc != 0) throw SetupFailure{std::string("the reference failed: ") + ref_error_()};
    CK(cudaStreamSynchronize(stream_));
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

void Judge::first_call(const Tensors& in, const Tensors& out) {
    // The candidate's first call runs ungated: what a first call does once (CUDA loading the
    // library's kernels lazily, a workspace allocated, a handle created) may wait for the whole
    // context to go idle, which a gated stream never does; the gate's watchdog would release it
    // after 300 ms and the trial would lose its stream check. Its outputs are poisoned after.
    call_candidate(in, out, 0, "during its first call");
    sync_candidate(OP_DEVSYNC, "while running the kernel's first call");
    warmed_up_ = true;
}

// The correctness call, gated; `poisoned`: the outputs' checksums before it.
void Judge::gated_call(const Tensors& in, const Tensors& out, const std::vector<unsigned long long>& poisoned, json& check,
                       std::vector<std::string>& warnings) {
    // The candidate holds its stream behind a gate, calls the kernel, and the judge watches the
    // outputs from its own process meanwhile: honest work is queued behind the gate and cannot have
    // touched them yet.
    const auto sent = std::chrono::steady_clock::now();
    call_candidate(in, out, FLAG_GATED, "during the correctness check");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto during = checksums(out, observer_);
    // The gate's watchdog starts after the call was sent, so it cannot have released the stream
    // before the judge finished looking unless that look ended kGateLimitMs after the send. A
    // "released" claim earlier than that is not believed (the flag lives in the candidate's memory).
    const bool release_possible = std::chrono::steady_clock::now() - sent >= std::chrono::milliseconds(kGateLimitMs);
    Msg open;
    open.op = OP_OPEN_GATE;
    request(open, job_->call_timeout_s, "while opening the gate");
    Msg r = sync_candidate(OP_SYNC, "while running the kernel");
    const bool released = r.gate_timed_out && release_possible;
    if (!released && during != poisoned)
        throw CandidateFailure{"rejected",
                               "the outputs were written while the given stream was still held back: the kernel works on another "
                               "stream (or the legacy default stream) or from a host thread; enqueue everything on `stream`"};
    if (released) {
        // kevo_forward itself waited for its stream (a synchronizing call: cudaStreamSynchronize,
        // cudaFree, a blocking copy): the gate's watchdog released it, and this trial's stream check
        // could not be made.
        check["gate_released_by_watchdog"] = true;
        const std::string w = "kevo_forward waits for its own stream (cudaStreamSynchronize, cudaFree, cudaMalloc or a blocking copy inside it): "
                              "the check that all work is on `stream` could not be made, and each correctness call waited " +
                              std::to_string(kGateLimitMs) + " ms; keep kevo_forward asynchronous";
        if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    }
}

// `before`: the inputs' checksums before the call.
void Judge::check_side_effects(const Tensors& in, const Tensors& out, const std::vector<unsigned long long>& before) {
    // Work the caller never waits for (another stream, a host thread) may still be landing.
    auto h1 = checksums(out, stream_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sync_candidate(OP_DEVSYNC, "in work the kernel left behind");
    auto h2 = checksums(out, stream_);
    if (h1 != h2)
        throw CandidateFailure{"rejected",
                               "the outputs changed after the given stream had finished: the kernel does work on another stream or host thread that the caller never waits for; enqueue everything on `stream`"};
    auto after = checksums(in, stream_);
    for (size_t i = 0; i < before.size(); ++i)
        if (before[i] != after[i]) throw CandidateFailure{"rejected", "the kernel modified input '" + in.desc[i].name + "'; inputs are read-only"};
}

json Judge::correctness_trial(size_t set, Tensors& in, uint64_t seed, unsigned char pattern, std::vector<std::string>& warnings) {
    json check{{"shape_set", set}, {"seed", seed}};
    auto t_last = std::chrono::steady_clock::now();
    auto tlap = [&](const char* what) {  // where a trial's time goes, summed over trials
        auto now = std::chrono::steady_clock::now();
        trial_profile_[what] += std::chrono::duration<double>(now - t_last).count();
        t_last = now;
    };
    fill(in, seed);
    CK(cudaStreamSynchronize(stream_));
    auto before = checksums(in, stream_);
    tlap("fill_inputs");
    // Output and expected buffers are reused per shape set (poisoned before every run).
    if (outputs_.size() <= set) outputs_.resize(set + 1), expected_.resize(set + 1);
    if (outputs_[set].desc.empty()) outputs_[set] = allocate(job_->sets[set].outputs, true);
    if (expected_[set].desc.empty()) expected_[set] = allocate(job_->sets[set].outputs, false);
    Tensors& out = outputs_[set];
    Tensors& expected = expected_[set];
    share(in);
    share(out);
    if (!warmed_up_) {
        first_call(in, out);
        tlap("first_call");
    }
    poison(out, pattern);
    poison(expected, pattern ^ 0x80);
    CK(cudaStreamSynchronize(stream_));
    auto poisoned = checksums(out, stream_);
    tlap("poison_outputs");
    gated_call(in, out, poisoned, check, warnings);
    tlap("kernel_gated");
    check_side_effects(in, out, before);
    tlap("side_effect_checks");
    // The reference runs in the judge, after the candidate: its results never exist in memory the
    // candidate process can reach.
    reference_forward(in, expected);
    tlap("reference");
    json c = compare(set, seed, out, expected, warnings);
    tlap("compare");
    check.update(c);
    return check;
}

// Several validators on one GPU (searches, workers, `cache add`) each keep their timing copies
// between jobs, up to a quarter of the device apiece, and a multi-GiB job needs as much again for
// its trials: four searches on 4-15 GB problems would fill an H200 (estimated, not measured: about
// 75 GB of copies and 25 GB of LibTorch's caches kept idle). When less than a quarter of the
// device is free after a job (its own buffers and candidate process gone), this judge gives its
// copies back so that the others' jobs find room; its next job makes them again. (Idle memory
// costs nobody time; a job that cannot allocate fails outside the kernel: validate.cpp.) A judge
// alone on its GPU keeps them, as timing.cu wants.
void Judge::release_copies_if_crowded() {
    if (ledger_)  // copies the device's bound did not cover were made for this job only (ledger_use.cu)
        for (auto it = timing_copies_.begin(); it != timing_copies_.end();)
            if (!it->second.kept) release_copies(it->second), it = timing_copies_.erase(it);
            else ++it;
    size_t free_bytes = 0, total_bytes = 0;
    if (timing_copies_.empty() || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return;
    if (free_bytes >= total_bytes / 4) return;
    for (auto& [set, tc] : timing_copies_) release_copies(tc);  // the candidate process is gone: nothing to unmap
    timing_copies_.clear();
}

JobResult Judge::run(const Job& job) {
    job_ = &job;
    JobResult result;
    trial_profile_.clear();
    timing_profile_.clear();
    output_varies_.clear();
    auto t0 = std::chrono::steady_clock::now();
    // The window in which another process's GPU use counts against a wall-clock rejection: from the
    // start of timing (the previous holder of the GPU lock was done long before: NVML's samples
    // cover the interval before them).
    uint64_t started_us = unix_us();
    auto lap = [&](const char* what) {
        auto now = std::chrono::steady_clock::now();
        result.profile_s[what] = std::chrono::duration<double>(now - t0).count();
        t0 = now;
    };
    try {
        if (!job.load_only) {
            init_device(result);
            if (!result.device.value("present", false)) {
                result.status = "no_device";
                result.log = result.device.value("error", std::string("no CUDA device"));
                return result;
            }
            lap("context");
            reserve_job_memory(job);  // before anything of the job is allocated (ledger_use.cu)
            load_reference(job);
        }
        start_candidate(job, result);
        lap("load");
        if (job.load_only) {
            end_job(result);
            result.status = "ok";
            return result;
        }
        if (!correctness_trials(job, result)) {
            end_job(result);
            return result;
        }
        warn_constant_outputs(job, result);
        lap("correctness");
        for (const auto& [k, v] : trial_profile_) result.profile_s[std::string("trials.") + k] = v;
        if (job.time) {
            started_us = unix_us();
            time_sets(job, result);
            lap("timing");
            for (const auto& [k, v] : timing_profile_) result.profile_s[std::string("timing.") + k] = v;
        }
        result.status = "ok";
    } catch (const CandidateFailure& f) {
        result.status = f.status;
        result.log = f.message;
        note_interference(f, result, started_us);
    } catch (...) {
        end_job(result);
        throw;
    }
    end_job(result);
    return result;
}

// A job's end, however it ends: its buffers freed (the timing copies kept unless the device is
// crowded), the candidate process stopped.
void Judge::end_job(JobResult& result) {
    for (auto& t : outputs_) t.free();
    for (auto& t : expected_) t.free();
    outputs_.clear();
    expected_.clear();
    for (auto& t : trial_inputs_) t.free();
    trial_inputs_.clear();
    stop_candidate(result);
    release_copies_if_crowded();
    job_reserved_.reset();  // the job's buffers are freed
}

// The correctness trials. False where a trial's outputs were wrong (the verdict is in `result`).
bool Judge::correctness_trials(const Job& job, JobResult& result) {
    const int sets = static_cast<int>(job.sets.size());
    int trials = std::max<int>(job.trials, 2 * sets);
    double max_abs = 0;
    // Trials come in pairs per shape set: fresh buffers (allocated while the previous ones are
    // still held, so at new addresses), then the SAME buffers refilled with new values. Every
    // trial has its own values, so a kernel that caches results by pointer or by shape fails.
    for (int t = 0; t < trials; ++t) {
        size_t set = (t / 2) % sets;
        bool refill = t % 2 == 1;
        if (!refill) trial_inputs_.push_back(allocate(job.sets[set].inputs, true));
        Tensors& in = trial_inputs_.back();
        uint64_t seed = job.seed + t;
        json check = correctness_trial(set, in, seed, static_cast<unsigned char>(t % 2 ? 0x7F : 0xFF), result.warnings);
        check["refill_same_addresses"] = refill;
        max_abs = std::max(max_abs, check.value("max_abs_diff", 0.0));
        result.checks.push_back(check);
        result.max_abs_diff = max_abs;
        result.trials = t + 1;
        if (!check.value("pass", false)) {
            result.status = "mismatch";
            result.log = check.value("message", std::string());
            return false;
        }
        if (trial_inputs_.size() > 2) {  // keep the previous set alive (new addresses), drop older ones
            unshare(trial_inputs_.front());
            trial_inputs_.front().free();
            trial_inputs_.erase(trial_inputs_.begin());
        }
    }
    return true;
}

void Judge::warn_constant_outputs(const Job& job, JobResult& result) {
    for (const auto& [key, varies] : output_varies_) {
        if (varies) continue;
        const std::string& label = job.sets[key.first].label;
        result.warnings.push_back("the reference output '" + key.second + "' is constant on every input the check drew (shape set " +
                                  std::to_string(key.first) + (label.empty() ? "" : " (" + label + ")") +
                                  "); the check cannot tell a correct kernel from one that writes a constant");
    }
}

// Every timed set (timing.cu); the first timed set's figures also at the top, as before.
void Judge::time_sets(const Job& job, JobResult& result) {
    json timing = json::array();
    for (size_t s = 0; s < job.sets.size(); ++s)
        if (job.sets[s].timed) timing.push_back(time_set(s));
    result.timing = json{{"sets", timing}};
    if (ref_precision_)
        result.timing["reference_precision"] = {{"correctness", "strict fp32 (TF32 off)"},
                                                {"timing", std::string("precision ") + ref_precision_()}};
    if (!timing.empty()) {  // the first timed set, as before
        result.timing["kernel"] = timing[0]["kernel"];
        result.timing["reference"] = timing[0]["reference"];
        if (timing[0].contains("speedup_vs_strict_fp32")) result.timing["reference_strict_us"] = timing[0]["reference_strict"]["time_us"];
    }
}

// Time the batches took beyond the reported calls: was it another process's? (validate.cpp
// words the answer; it never blames the kernel for time another process took.)
void Judge::note_interference(const CandidateFailure& f, JobResult& result, uint64_t started_us) {
    if (f.status == "rejected" && f.message.find(kevo::kWallCheckPhrase) != std::string::npos) {
        const std::string pci = device_json_.value("pci_bus_id", std::string());
        result.interference = gpu_activity_since(pci, started_us);
        if (!others_were_active(result.interference)) {  // NVML's last samples may lag the batches a little
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            result.interference = gpu_activity_since(pci, started_us);
        }
    }
}

}  // namespace kevo_runner
