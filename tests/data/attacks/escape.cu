// A hostile candidate: its static constructor (run when the library is loaded, before any call)
// tries the escape named by $KERNELEVO_TEST_ATTACK, with $KERNELEVO_TEST_ARG as its target, and
// prints what it got on stderr. The kernel itself does nothing.
#include <kernelevo/abi.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {
std::string slurp(const char* path) {
    std::string s;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return "(open failed)";
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, n);
    close(fd);
    for (auto& c : s) if (c == 0) c = ' ';
    return s;
}

struct Attack {
    Attack() {
        const char* a = std::getenv("KERNELEVO_TEST_ATTACK");
        const char* arg = std::getenv("KERNELEVO_TEST_ARG");
        if (!a) return;
        std::string k = a;
        if (k == "write") {
            int fd = open(arg, O_CREAT | O_WRONLY, 0644);
            std::fprintf(stderr, "attack write: fd %d\n", fd);
            if (fd >= 0) {
                (void)!write(fd, "pwned", 5);
                close(fd);
            }
        } else if (k == "exec") {
            int r = std::system(arg);
            std::fprintf(stderr, "attack exec: system returned %d\n", r);
        } else if (k == "connect") {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_port = htons(static_cast<uint16_t>(std::atoi(arg)));
            addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            int r = s >= 0 ? connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) : -1;
            std::fprintf(stderr, "attack connect: socket %d connect %d\n", s, r);
        } else if (k == "environ") {
            char p[64];
            std::snprintf(p, sizeof p, "/proc/%d/environ", static_cast<int>(getppid()));
            std::fprintf(stderr, "attack environ: parent: %s\n", slurp(p).c_str());
            // Every process this one can see.
            if (DIR* d = opendir("/proc")) {
                while (dirent* e = readdir(d)) {
                    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
                    std::string path = std::string("/proc/") + e->d_name + "/environ";
                    std::fprintf(stderr, "attack environ: %s: %s\n", path.c_str(), slurp(path.c_str()).c_str());
                }
                closedir(d);
            }
        } else if (k == "threads") {
            // Every thread of this process, CUDA's own included, and its confinement.
            if (DIR* d = opendir("/proc/self/task")) {
                while (dirent* e = readdir(d)) {
                    if (e->d_name[0] == '.') continue;
                    std::string st = slurp(("/proc/self/task/" + std::string(e->d_name) + "/status").c_str());
                    auto field = [&](const char* name) {
                        size_t at = st.find(name);
                        return at == std::string::npos ? std::string("?") : st.substr(at + std::strlen(name), st.find('\n', at) - at - std::strlen(name));
                    };
                    std::fprintf(stderr, "attack threads: %s seccomp%s no_new_privs%s\n", e->d_name, field("Seccomp:").c_str(), field("NoNewPrivs:").c_str());
                }
                closedir(d);
            }
        } else if (k == "later") {
            // Code that would run after kevo_forward has returned: a thread, an interval timer, a
            // POSIX timer (context_fence.h: they would launch work outside the timed call).
            pthread_t t;
            int tr = pthread_create(&t, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
            itimerval it{};
            it.it_value.tv_usec = 100000;
            int ir = setitimer(ITIMER_REAL, &it, nullptr);
            it.it_value.tv_usec = 0;
            setitimer(ITIMER_REAL, &it, nullptr);  // disarmed, should it have been armed
            timer_t tm;
            sigevent sev{};
            sev.sigev_notify = SIGEV_NONE;
            int pr = timer_create(CLOCK_MONOTONIC, &sev, &tm);
            std::fprintf(stderr, "attack later: pthread_create %d setitimer %d timer_create %d\n", tr, ir, pr);
        } else if (k == "daemon") {
            pid_t p = fork();
            if (p == 0) {
                setsid();
                sleep(3);
                int fd = open(arg, O_CREAT | O_WRONLY, 0644);
                if (fd >= 0) close(fd);
                _exit(0);
            }
            std::fprintf(stderr, "attack daemon: fork returned %d\n", static_cast<int>(p));
        } else if (k == "channel") {
            // Forge the runner's channel: a fake "loaded" message and a fake verdict on stdout.
            char junk[64];
            std::memset(junk, 0, sizeof junk);
            junk[0] = 1;
            ssize_t n = send(3, junk, sizeof junk, 0);
            std::printf("{\"status\":\"ok\",\"speedup\":100}\n");
            std::fflush(stdout);
            std::fprintf(stderr, "attack channel: sent %zd\n", n);
        }
    }
} attack;
}  // namespace

extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }
