#include "sandbox/sandbox.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <sstream>

#include "common/settings.h"
#include "common/error.h"
#include "common/process.h"

extern char** environ;

namespace kevo {
namespace fs = std::filesystem;

namespace {
SandboxMode g_mode = [] {
    const char* v = env(EnvVar::kSandbox);
    if (v && *v) {
        try {
            return parse_sandbox_mode(v);
        } catch (const std::exception&) {
        }
    }
    return SandboxMode::automatic;
}();

std::string find_bwrap() {
    if (const char* p = env(EnvVar::kBwrap); p && *p) return p;
    if (const char* path = std::getenv("PATH")) {
        std::stringstream ss(path);
        std::string dir;
        while (std::getline(ss, dir, ':'))
            if (!dir.empty() && ::access((dir + "/bwrap").c_str(), X_OK) == 0) return dir + "/bwrap";
    }
    for (const char* c : {"/usr/bin/bwrap", "/usr/local/bin/bwrap"})
        if (::access(c, X_OK) == 0) return c;
    return "";
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// System paths every sandboxed program needs to see (read-only). /etc is reduced to what the
// loader, the compilers and CUDA read: its other files (shadow, credentials) stay out of sight.
const char* const kEtcFiles[] = {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
                                 "nsswitch.conf", "localtime", "OpenCL", "nvidia", "gcc", "vulkan"};

// The trees sandbox_prefix() shows whole (read-only), and whether an absolute path lies in one.
bool in_whole_tree(const std::string& path) {
    for (const char* t : {"/usr/", "/opt/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/sys/"})
        if (starts_with(path + "/", t)) return true;
    return false;
}

void add_ro(std::vector<std::string>& a, const std::string& p) {
    a.insert(a.end(), {"--ro-bind-try", p, p});
}
}  // namespace

SandboxMode parse_sandbox_mode(const std::string& s) {
    if (s == "auto") return SandboxMode::automatic;
    if (s == "require") return SandboxMode::require;
    if (s == "off") return SandboxMode::off;
    throw SettingError({settings::kSandbox}, "{sandbox.mode} must be auto, require or off, not '" + s + "'");
}

const char* sandbox_mode_name(SandboxMode m) {
    switch (m) {
        case SandboxMode::automatic: return "auto";
        case SandboxMode::require: return "require";
        case SandboxMode::off: return "off";
    }
    return "auto";
}

void set_sandbox_mode(SandboxMode m) { g_mode = m; }
SandboxMode sandbox_mode() { return g_mode; }

std::string SandboxLayers::describe() const {
    std::string s;
    auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
    if (namespaces) add("namespaces (" + bwrap + ")");
    if (seccomp) add("seccomp");
    if (landlock) add("landlock ABI " + std::to_string(landlock_abi));
    add("rlimits");
    add("environment allowlist");
    return s;
}

const SandboxLayers& sandbox_layers() {
    static SandboxLayers layers = [] {
        SandboxLayers l;
        l.bwrap = find_bwrap();
        if (l.bwrap.empty()) {
            l.why_not += "namespaces: bubblewrap (bwrap) not found; install it (Debian/Ubuntu: apt-get install bubblewrap)\n";
        } else {
            ProcessOptions po;
            po.argv = {l.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"};
            po.timeout_s = 20;
            ProcessResult r = run_process(po);
            if (r.ok()) {
                l.namespaces = true;
                ProcessOptions help;
                help.argv = {l.bwrap, "--help"};
                help.timeout_s = 20;
                const ProcessResult h = run_process(help);
                l.tmpfs_size = (h.out + h.err).find("--size") != std::string::npos;
            } else {
                std::string err = r.err.substr(0, r.err.find('\n'));
                l.why_not += "namespaces: bwrap cannot create namespaces here (" + (err.empty() ? r.describe() : err) +
                             "); user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)\n";
            }
        }
        // Landlock: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) returns the ABI.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
        long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u);
        if (abi > 0) {
            l.landlock = true;
            l.landlock_abi = static_cast<int>(abi);
        } else {
            l.why_not += std::string("landlock: not available in this kernel (") + std::strerror(errno) + ")\n";
        }
        // Seccomp filters: available when the kernel was built with them (prctl says so).
        FILE* f = std::fopen("/proc/self/status", "r");
        if (f) {
            char line[256];
            while (std::fgets(line, sizeof line, f))
                if (std::strncmp(line, "Seccomp:", 8) == 0) l.seccomp = true;
            std::fclose(f);
        }
        if (!l.seccomp) l.why_not += "seccomp: this kernel does not support seccomp filters\n";
        return l;
    }();
    return layers;
}

void check_sandbox_layers() {
    if (g_mode == SandboxMode::off) return;
    const SandboxLayers& l = sandbox_layers();
    if (l.namespaces && l.seccomp && l.landlock) return;
    if (g_mode == SandboxMode::require)
        throw SettingError({settings::kSandbox},
                           "{sandbox.mode} require needs every sandbox layer, but some are unavailable here:\n" + l.why_not +
                               "active: " + l.describe());
    static std::once_flag once;
    std::call_once(once, [&] {
        std::fprintf(stderr, "kernelevo: note: sandbox layers active: %s; missing:\n%s", l.describe().c_str(), l.why_not.c_str());
    });
}

namespace {
std::string upper(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

bool ends_with(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// A name that may hold a credential, beyond is_secret_env_name's: a key (NVIDIA_NGC_KEY,
// KERNELEVO_LLM_KEY), credentials (TORCH_CREDENTIALS), a password, an auth or session word.
bool credential_name(const std::string& name) {
    if (is_secret_env_name(name)) return true;
    const std::string u = upper(name);
    for (const char* word : {"CREDENTIAL", "CREDS", "PASSW", "PRIVATE", "COOKIE"})
        if (u.find(word) != std::string::npos) return true;
    if (ends_with(u, "KEY") || ends_with(u, "KEYS")) return true;
    std::stringstream parts(u);
    for (std::string part; std::getline(parts, part, '_');)
        if (part == "KEY" || part == "KEYS" || part == "AUTH" || part == "PASS" || part == "PWD" || part == "SESSION")
            return true;
    return false;
}

// A value that carries a credential: a URL with user information (redis://:pw@host,
// https://user:token@host) or a secret registered with register_secret().
bool credential_value(const std::string& value) {
    static const std::regex userinfo("[A-Za-z][A-Za-z0-9+.-]*://[^/@\\s]*@");
    return std::regex_search(value, userinfo) || redact(value) != value;
}

// KERNELEVO_* names that reach a sandbox: the table's (common/settings.h: what the runner, the runtime
// and the Python package read), and the project's own test hooks (KERNELEVO_TEST_*, KERNELEVO_FAKE_*);
// never another, which may be a user's own setting with a secret in it.
bool kernelevo_name_allowed(const std::string& name) {
    if (starts_with(name, "KERNELEVO_TEST_") || starts_with(name, "KERNELEVO_FAKE_")) return true;
    for (const Setting* e : kEnvTable)
        if (name == e->variable) return true;
    return false;
}
}  // namespace

bool env_allowed(const std::string& name) {
    if (credential_name(name)) return false;
    static const char* const exact[] = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
                                        "CC", "CXX", "CUDAHOSTCXX", "CUDACXX", "PYTHONPATH", "PYTHONHOME", "OMP_NUM_THREADS",
                                        "SOURCE_DATE_EPOCH"};
    for (const char* e : exact)
        if (name == e) return true;
    if (starts_with(name, "KERNELEVO_")) return kernelevo_name_allowed(name);
    static const char* const prefixes[] = {"LC_", "CUDA_", "NVIDIA_", "NCCL_", "NVCC_", "TRITON_", "TORCH_",
                                           "OPENBLAS_", "MKL_", "PYTORCH_"};
    for (const char* p : prefixes)
        if (starts_with(name, p)) return true;
    return false;
}

std::map<std::string, std::string> sandbox_environment(const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string kv(*e);
        auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
        if (env_allowed(name) && !credential_value(value)) env[name] = value;
    }
    env["TMPDIR"] = "/tmp";
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
}

std::vector<std::string> sandbox_prefix(const SandboxPolicy& p) {
    if (g_mode == SandboxMode::off) return {};
    const SandboxLayers& l = sandbox_layers();
    if (!l.namespaces) return {};
    std::vector<std::string> a = {l.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"};
    add_ro(a, "/usr");
    // Merged-/usr systems have /bin, /lib... as symlinks: recreate them as links, else bind them.
    for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
        std::error_code ec;
        if (fs::is_symlink(d, ec)) {
            a.insert(a.end(), {"--symlink", fs::read_symlink(d, ec).string(), d});
        } else if (fs::exists(d, ec)) {
            add_ro(a, d);
        }
    }
    for (const char* f : kEtcFiles) add_ro(a, std::string("/etc/") + f);
    add_ro(a, "/opt");
    add_ro(a, "/sys");  // CUDA reads the PCI topology there
    a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
    if (p.tmp_bytes > 0 && l.tmpfs_size) a.insert(a.end(), {"--size", std::to_string(p.tmp_bytes)});
    a.insert(a.end(), {"--tmpfs", "/tmp", "--tmpfs", "/run"});
    if (p.gpu) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator("/dev", ec)) {
            std::string n = e.path().filename().string();
            if (starts_with(n, "nvidia")) a.insert(a.end(), {"--dev-bind", e.path().string(), e.path().string()});
        }
    }
    // Library directories outside /usr (a toolkit or a prefix named in LD_LIBRARY_PATH).
    if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
        std::stringstream ss(ld);
        std::string dir;
        while (std::getline(ss, dir, ':'))
            if (!dir.empty() && dir[0] == '/' && !starts_with(dir, "/usr/")) add_ro(a, dir);
    }
    // Each extra path at its real place: bwrap creates a bind's mount point inside the new root, where
    // an absolute symlink on the way (/usr/local/cuda -> /etc/alternatives/cuda) does not resolve and
    // the whole sandbox fails ("Can't mkdir"). The symlinks themselves stay visible where their trees
    // are; a path whose real place lies in a tree shown whole above needs no bind of its own.
    for (const auto& r : p.read_only) {
        std::error_code ec;
        fs::path real = fs::weakly_canonical(fs::absolute(r), ec);
        const std::string path = (ec ? fs::absolute(r) : real).string();
        if (!in_whole_tree(path)) add_ro(a, path);
    }
    if (!p.workdir.empty()) {
        std::string w = fs::absolute(p.workdir).string();
        a.insert(a.end(), {"--bind", w, w, "--chdir", w, "--setenv", "HOME", w});
    }
    a.push_back("--");
    return a;
}

}  // namespace kevo
