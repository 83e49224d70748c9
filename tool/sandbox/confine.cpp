#include "sandbox/confine.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <seccomp.h>

namespace kevo {

namespace {

bool drop_capabilities() {
    for (int c = 0; c <= 63; ++c) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
    struct __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    std::memset(data, 0, sizeof data);
    prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    return syscall(SYS_capset, &hdr, data) == 0;
}

void set_limit(int res, long v) {
    if (v <= 0) return;
    struct rlimit r{static_cast<rlim_t>(v), static_cast<rlim_t>(v)};
    setrlimit(res, &r);
}

// Loads a filter whose rules were added with `rc` (0: all added) on every thread of the process, not
// only the caller: CUDA's initialisation (before the confinement) starts threads of its own, and
// candidate code could take one of them over. Releases the filter; says in `notes` why it failed.
bool load_on_every_thread(scmp_filter_ctx ctx, int rc, const char* what, std::string& notes) {
    if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    if (rc == 0) rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc != 0) notes += std::string(what) + ": loading the filter failed (" + std::strerror(-rc) + ")\n";
    return rc == 0;
}

bool apply_seccomp(bool sockets, std::string& notes) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        notes += "seccomp: seccomp_init failed\n";
        return false;
    }
    int rc = 0;
    auto kill = [&](int nr) { rc |= seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0); };
    auto deny = [&](int nr, int err) { rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0); };
    // No other programs, no other processes: threads only (clone with CLONE_THREAD).
    kill(SCMP_SYS(execve));
    kill(SCMP_SYS(execveat));
    kill(SCMP_SYS(fork));
    kill(SCMP_SYS(vfork));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    deny(SCMP_SYS(clone3), ENOSYS);  // glibc falls back to clone(), whose flags the filter can see
    // No access to other processes.
    kill(SCMP_SYS(ptrace));
    kill(SCMP_SYS(process_vm_readv));
    kill(SCMP_SYS(process_vm_writev));
    deny(SCMP_SYS(pidfd_open), EPERM);
    deny(SCMP_SYS(pidfd_getfd), EPERM);
    deny(SCMP_SYS(kcmp), EPERM);
    const pid_t self = getpid();
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_NE, static_cast<scmp_datum_t>(self)));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_NE, static_cast<scmp_datum_t>(self)));
    deny(SCMP_SYS(tkill), EPERM);
    // No network, no new sockets (the channel to the judge already exists).
    if (!sockets) {
        deny(SCMP_SYS(socket), EACCES);
        deny(SCMP_SYS(socketpair), EACCES);
    }
    // Nothing that changes the system or escapes the namespaces.
    for (int nr : {SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root), SCMP_SYS(chroot), SCMP_SYS(unshare),
                   SCMP_SYS(setns), SCMP_SYS(bpf), SCMP_SYS(kexec_load), SCMP_SYS(init_module), SCMP_SYS(finit_module),
                   SCMP_SYS(delete_module), SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key),
                   SCMP_SYS(userfaultfd), SCMP_SYS(personality), SCMP_SYS(reboot), SCMP_SYS(setuid), SCMP_SYS(setgid),
                   SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setsid), SCMP_SYS(setpgid)})
        deny(nr, EPERM);
    return load_on_every_thread(ctx, rc, "seccomp", notes);
}

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

bool apply_landlock(const ConfineOptions& o, std::string& notes) {
    long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) {
        notes += "landlock: not available\n";
        return false;
    }
    const __u64 read_rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    __u64 write_rights = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                         LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                         LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                         LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2) write_rights |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) write_rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
    // Device ioctls (ABI 5) are deliberately not handled: CUDA drives the GPU through them.
    struct landlock_ruleset_attr attr{};
    attr.handled_access_fs = read_rights | write_rights;
    int fd = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
    if (fd < 0) {
        notes += std::string("landlock: create_ruleset failed (") + std::strerror(errno) + ")\n";
        return false;
    }
    auto allow = [&](const std::string& path, __u64 rights) {
        int pfd = open(path.c_str(), O_PATH | O_CLOEXEC);
        if (pfd < 0) return;
        struct stat st;
        if (fstat(pfd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                                                                    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
        struct landlock_path_beneath_attr pb{};
        pb.allowed_access = rights & attr.handled_access_fs;
        pb.parent_fd = pfd;
        syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
        close(pfd);
    };
    for (const auto& r : o.readable) allow(r, read_rights);
    for (const auto& w : o.writable) allow(w, read_rights | write_rights);
    bool ok = syscall(SYS_landlock_restrict_self, fd, 0) == 0;
    if (!ok) notes += std::string("landlock: restrict_self failed (") + std::strerror(errno) + ")\n";
    close(fd);
    return ok;
}

}  // namespace

std::vector<std::string> system_readable_paths(bool whole_proc) {
    std::vector<std::string> r = {"/usr", "/lib", "/lib64", "/bin", "/sbin", "/opt", "/sys", "/dev"};
    for (const char* e : {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf", "localtime", "nvidia", "OpenCL"})
        r.push_back(std::string("/etc/") + e);
    if (whole_proc) r.push_back("/proc");
    else r.insert(r.end(), {"/proc/self", "/proc/driver", "/proc/cpuinfo", "/proc/meminfo", "/proc/sys"});
    if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
        std::string dirs = ld;
        for (size_t from = 0; from <= dirs.size();) {
            size_t to = dirs.find(':', from);
            if (to == std::string::npos) to = dirs.size();
            std::string d = dirs.substr(from, to - from);
            if (!d.empty() && d[0] == '/') r.push_back(d);
            from = to + 1;
        }
    }
    return r;
}

bool forbid_new_threads(std::string& notes) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        notes += "seccomp (no new threads): seccomp_init failed\n";
        return false;
    }
    int rc = 0;
    auto deny = [&](int nr, int err) { rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0); };
    deny(SCMP_SYS(clone), EPERM);  // fork and vfork are already fatal (apply_seccomp)
    deny(SCMP_SYS(clone3), ENOSYS);
    deny(SCMP_SYS(setitimer), EPERM);
    deny(SCMP_SYS(alarm), EPERM);
    deny(SCMP_SYS(timer_create), EPERM);
    deny(SCMP_SYS(perf_event_open), EACCES);
    deny(SCMP_SYS(io_uring_setup), EPERM);
    // SIGIO and friends: a signal when a descriptor becomes ready.
    for (int cmd : {F_SETOWN, F_SETOWN_EX, F_SETSIG})
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(cmd)));
    return load_on_every_thread(ctx, rc, "seccomp (no new threads)", notes);
}

ConfineReport confine_current_process(const ConfineOptions& o) {
    ConfineReport r;
    set_limit(RLIMIT_CORE, 0);
    set_limit(RLIMIT_NOFILE, o.open_files);
    set_limit(RLIMIT_FSIZE, o.file_bytes);
    set_limit(RLIMIT_CPU, o.cpu_seconds);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    r.no_new_privs = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
    r.caps_dropped = drop_capabilities();
    if (o.landlock) r.landlock = apply_landlock(o, r.notes);
    if (o.seccomp) r.seccomp = apply_seccomp(o.sockets, r.notes);  // last: the steps above need the calls it forbids
    return r;
}

}  // namespace kevo
