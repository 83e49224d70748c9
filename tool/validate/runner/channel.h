// The judge <-> candidate channel: one SOCK_SEQPACKET socket pair, fixed-size messages, device
// memory handed over as file descriptors (SCM_RIGHTS). The judge owns every buffer; the candidate
// process maps what it is given and answers. The judge treats every reply as hostile input: it
// checks sizes and fields and never trusts a reply for a verdict it can check itself.
#pragma once
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "kernelevo/abi.h"

namespace kevo_runner {

constexpr int kMaxTensors = 32;  // inputs + outputs of one call
constexpr int kMaxBatch = 64;    // timed calls in one batch (OP_TIME_BATCH)
// A gated call's stream is released after this long if the judge has not opened it (a kevo_forward
// that waits for its own stream would otherwise wait for ever).
constexpr int kGateLimitMs = 300;
// The most the kernel's time is corrected for its process's launch cost (timing_session.cu), in microseconds.
constexpr double kMaxLaunchCorrectionUs = 2.0;
// A set's time is at least its lowest batch mean over this (trials.h, even_calls_floor): the most
// that moving work between the calls of a batch can gain.
constexpr double kUnevenCallsAllowance = 1.1;

enum Op : int32_t {
    OP_HELLO = 1,   // candidate -> judge: loaded (rc 0) or why not (text)
    OP_MAP,         // judge -> candidate: map buffer `id` of `size` bytes (fd attached)
    OP_UNMAP,       // judge -> candidate: drop buffer `id`
    OP_CALL,        // judge -> candidate: call kevo_forward on `t`; FLAG_GATED holds the stream first
    OP_OPEN_GATE,   // judge -> candidate: release the gate
    OP_SYNC,        // judge -> candidate: synchronize the stream, report CUDA errors
    OP_DEVSYNC,     // judge -> candidate: synchronize the device, report CUDA errors
    OP_QUEUE,       // judge -> candidate: queue one timed call on `t` (no reply)
    OP_TIME_BATCH,  // judge -> candidate: run the queued calls back to back, each after a proven L2
                    // flush (buffer `id`, proofs in buffer `aux`; FLAG_FLUSH), report each call's time
    OP_QUIT,
    OP_REPLY,
    OP_CALIBRATION,  // candidate -> judge, before the candidate's library is loaded: `count` empty-kernel
                     // calls timed in `us` as timed calls are (each after an L2 flush), by runner code only
    OP_GO,           // judge -> candidate, once its CUDA context is up: the judge holds the GPU shared now;
                     // calibrate, confine, load the library, say hello
};
enum Flags : int32_t {
    FLAG_GATED = 1,
    FLAG_FLUSH = 2,
    FLAG_EMPTY = 4,  // TIME_BATCH, diagnostics: time an empty kernel of the runner's instead of kevo_forward
};

struct TensorRef {
    int32_t buffer;  // buffer id (OP_MAP)
    int32_t ndim;
    int32_t dtype;
    int32_t pad;
    uint64_t offset;  // where the tensor starts in the buffer (timing copies share one buffer per set)
    int64_t sizes[KEVO_MAX_DIMS];
    int64_t strides[KEVO_MAX_DIMS];
};

struct Msg {
    int32_t op = 0;
    int32_t id = 0;        // buffer id (MAP/UNMAP)
    int32_t flags = 0;
    int32_t n_in = 0, n_out = 0;
    int32_t rc = 0;        // reply: kevo_forward's return value, or a runner error code
    int32_t cuda_error = 0;
    int32_t gate_timed_out = 0;
    uint64_t size = 0;     // MAP: bytes
    int32_t aux = 0;       // TIME_BATCH: the proof buffer's id
    int32_t count = 0;     // TIME_BATCH reply: calls run
    float us[kMaxBatch] = {0};  // TIME_BATCH reply: each call's event time in microseconds
    char text[512] = {0};  // reply: error text
    TensorRef t[kMaxTensors];
};

inline void set_text(Msg& m, const char* s) {
    std::strncpy(m.text, s ? s : "", sizeof m.text - 1);
    m.text[sizeof m.text - 1] = 0;
}

// Sends one message with an optional file descriptor. With timeout_s >= 0 it waits at most that long
// for room in the socket (a peer that stops reading cannot block the sender); errno is ETIMEDOUT then.
inline bool send_msg(int sock, const Msg& m, int fd = -1, double timeout_s = -1) {
    struct iovec iov{const_cast<Msg*>(&m), sizeof m};
    struct msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
        std::memset(ctl, 0, sizeof ctl);
        h.msg_control = ctl;
        h.msg_controllen = sizeof ctl;
        struct cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    if (timeout_s < 0) return sendmsg(sock, &h, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    while (true) {
        ssize_t sent = sendmsg(sock, &h, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent >= 0) return sent == static_cast<ssize_t>(sizeof m);
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
        long long left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return false;
        }
        struct pollfd p{sock, POLLOUT, 0};
        poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    }
}

enum class RecvStatus { ok, timeout, closed, malformed };

// Receives one message within `timeout_s` (< 0: wait forever). A received fd lands in *fd.
inline RecvStatus recv_msg(int sock, Msg& m, double timeout_s, int* fd = nullptr) {
    if (fd) *fd = -1;
    struct pollfd p{sock, POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(std::max(0.0, timeout_s) * 1000));
    while (true) {
        long long left = timeout_s < 0 ? -1 : std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (timeout_s >= 0 && left < 0) return RecvStatus::timeout;
        int n = poll(&p, 1, timeout_s < 0 ? -1 : static_cast<int>(std::min<long long>(left, 1 << 30)));
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) return RecvStatus::timeout;
        break;
    }
    struct iovec iov{&m, sizeof m};
    struct msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
    h.msg_control = ctl;
    h.msg_controllen = sizeof ctl;
    ssize_t got = recvmsg(sock, &h, MSG_CMSG_CLOEXEC);
    if (got == 0) return RecvStatus::closed;
    if (got < 0) return errno == ECONNRESET ? RecvStatus::closed : RecvStatus::malformed;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int f;
            std::memcpy(&f, CMSG_DATA(c), sizeof f);
            if (fd) *fd = f;
            else close(f);
        }
    }
    if (got != static_cast<ssize_t>(sizeof m) || (h.msg_flags & MSG_TRUNC)) return RecvStatus::malformed;
    m.text[sizeof m.text - 1] = 0;
    return RecvStatus::ok;
}

}  // namespace kevo_runner
