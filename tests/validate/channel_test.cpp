// The judge <-> candidate channel (tool/validate/runner/channel.h) on a real socket pair: a peer that
// stops reading cannot block the judge's sends forever, and one that reads gets every message whole.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "channel.h"

using namespace kevo_runner;

namespace {
struct Pair {
    int a = -1, b = -1;
    Pair() {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) a = sv[0], b = sv[1];
    }
    ~Pair() {
        if (a >= 0) close(a);
        if (b >= 0) close(b);
    }
};
}  // namespace

TEST(Channel, SendToAPeerThatStopsReadingTimesOut) {
    Pair p;
    ASSERT_GE(p.a, 0);
    Msg m;
    m.op = OP_QUEUE;
    int sent = 0;
    auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    while (ok && sent < 100000) {
        ok = send_msg(p.a, m, -1, 0.2);
        if (ok) ++sent;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_FALSE(ok) << "the socket never filled";
    EXPECT_EQ(errno, ETIMEDOUT);
    EXPECT_GT(sent, 0);
    EXPECT_LT(s, 5.0) << "the send waited far beyond its time limit";
}

TEST(Channel, AReadingPeerGetsEveryMessageWhole) {
    Pair p;
    ASSERT_GE(p.a, 0);
    const int n = 200;  // more than the socket holds at once
    std::thread reader([&] {
        for (int i = 0; i < n; ++i) {
            Msg r;
            ASSERT_EQ(recv_msg(p.b, r, 10.0), RecvStatus::ok);
            EXPECT_EQ(r.id, i);
            EXPECT_EQ(r.us[kMaxBatch - 1], static_cast<float>(i));
        }
    });
    for (int i = 0; i < n; ++i) {
        Msg m;
        m.op = OP_QUEUE;
        m.id = i;
        m.us[kMaxBatch - 1] = static_cast<float>(i);
        ASSERT_TRUE(send_msg(p.a, m, -1, 10.0)) << "message " << i << ": " << std::strerror(errno);
    }
    reader.join();
}

TEST(Channel, AClosedPeerIsNotATimeout) {
    Pair p;
    ASSERT_GE(p.a, 0);
    close(p.b);
    p.b = -1;
    Msg m;
    EXPECT_FALSE(send_msg(p.a, m, -1, 1.0));
    EXPECT_NE(errno, ETIMEDOUT);
}
