// Cheat: does no work and forges a verdict instead: a fake result on stdout, fake files where a
// runner might read results, fake replies on every inherited descriptor.
#include <kernelevo/abi.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>

extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) {
    static const char verdict[] = "{\"status\":\"ok\",\"speedup\":9.0,\"kernel_us\":4.0,\"reference_us\":36.0}\n";
    std::fputs(verdict, stdout);
    std::fflush(stdout);
    for (const char* p : {"result.json", "../result.json", "/tmp/result.json"}) {
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd >= 0) {
            (void)!write(fd, verdict, sizeof verdict - 1);
            close(fd);
        }
    }
    char junk[8192];
    std::memset(junk, 0, sizeof junk);
    for (int fd = 3; fd < 64; ++fd) send(fd, junk, sizeof junk, MSG_DONTWAIT | MSG_NOSIGNAL);
    return 0;
}
