#include "serve/serve.h"

#include <httplib.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/settings.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/text.h"
#include "evolve/waste.h"
#include "serve/http_guard.h"
#include "serve/page.h"
#include "store/store.h"
#include "store/writer.h"
#ifdef KEVO_WITH_WORKERS
#include "worker/queue.h"
#endif

namespace kevo::serve {

namespace {

std::string run_id(const std::string& location) { return sha256_hex(location).substr(0, 12); }

std::pair<std::string, int> split_listen(const std::string& listen) {
    size_t colon = listen.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size())
        throw SettingError({settings::kListen}, "{serve.listen}: expected HOST:PORT, e.g. 127.0.0.1:8377, not '" + listen + "'");
    std::string host = listen.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    int port = -1;
    try {
        size_t used = 0;
        port = std::stoi(listen.substr(colon + 1), &used);
        if (used != listen.size() - colon - 1) port = -1;
    } catch (const std::exception&) {
    }
    if (port < 0 || port > 65535) throw SettingError({settings::kListen}, "{serve.listen}: bad port in '" + listen + "'");
    return {host, port};
}

nlohmann::json program_row(const store::Program& p) {
    return {{"id", p.id},         {"key", p.key},         {"generation", p.generation}, {"island", p.island},
            {"origin", p.origin}, {"attempt", p.attempt}, {"status", p.status},         {"speedup", p.speedup},
            {"parent_id", p.parent_id}, {"created", p.created},
            {"worker", p.details.is_object() ? p.details.value("worker", std::string()) : std::string()}};
}

// An SQLite state file as serve opened it. `search --fresh` deletes the file and makes a new one,
// another run may be moved over it, and a run read while no writer had it open (SQLite reads it as
// immutable then) may be continued by a search: serve compares the file with this on every use
// and opens it again when it changed. While serve has it open its inode cannot be reused, so
// (device, inode) tells a replaced file; the time, size and the writer's WAL tell a continued one.
struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t mtime_ns = 0;
    off_t size = 0;
    bool wal = false;  // a writer had it open: SQLite reads it live, its changes need no reopening
};

std::optional<FileId> file_id(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    struct stat wal {};
    return FileId{st.st_dev, st.st_ino, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, st.st_size,
                  ::stat((path + "-wal").c_str(), &wal) == 0};
}

bool same_state(const FileId& opened, const FileId& now) {
    if (opened.dev != now.dev || opened.ino != now.ino) return false;
    return opened.wal || (!now.wal && opened.mtime_ns == now.mtime_ns && opened.size == now.size);
}

// Whether a search runs on the state at LOCATION now, from its writer lease (store/writer.h): for a
// SQLite state, whether a process holds the record lock on STATE.lock (the kernel drops it when the
// search ends, however it ends); null for a Redis state (not told here). Only asks: takes no lock.
nlohmann::json search_running(const std::string& location) {
    const store::StoreLocation where = store::parse_store_location(location);
    if (where.redis) return nullptr;
    std::error_code ec;
    std::filesystem::path real = std::filesystem::weakly_canonical(std::filesystem::absolute(where.path, ec), ec);
    const std::string lock = store::writer_lock_path(ec || real.empty() ? where.path : real.string());
    const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // never blocks (a FIFO there)
    if (fd < 0) return false;  // no search ever took this state's lease (or one from before leases)
    struct flock q {};
    q.l_type = F_WRLCK;
    q.l_whence = SEEK_SET;
    const bool held = ::fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK;
    ::close(fd);
    return held;
}

// The names a request may give in its Host header. A page of another site can make its own name
// resolve to 127.0.0.1 (DNS rebinding) and then read this server as "its own" origin; its requests
// still name that site in Host, so only this server's listen address and port are answered (for a
// loopback address also localhost, 127.0.0.1 and [::1]). A wildcard address (0.0.0.0, ::) answers
// to any name on its port: reaching it needs the token anyway.
struct HostCheck {
    std::set<std::string> names;  // lower case, IPv6 without brackets; empty: any name
    int port = 0;
    std::string shown;  // the listen address, for messages

    HostCheck(const std::string& host, int p)
        : port(p), shown((host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(p)) {
        if (host == "0.0.0.0" || host == "::") return;
        names.insert(lower(host));
        if (is_loopback(host)) names.insert({"localhost", "127.0.0.1", "::1"});
    }
    bool allows(const std::string& host_header) const {
        std::string name = lower(host_header), port_text;
        if (!name.empty() && name.front() == '[') {
            size_t close = name.find(']');
            if (close == std::string::npos) return false;
            port_text = name.substr(close + 1);
            name = name.substr(1, close - 1);
        } else if (size_t colon = name.rfind(':'); colon != std::string::npos) {
            port_text = name.substr(colon);
            name = name.substr(0, colon);
        }
        bool port_ok = port_text.empty() ? port == 80 : port_text == ":" + std::to_string(port);
        return port_ok && !name.empty() && (names.empty() || names.count(name) > 0);
    }
};

// Why HOST:PORT cannot be bound (httplib only says that it could not): the same bind, done here.
std::string bind_failure_text(const std::string& host, int port, const std::string& listen) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
        return "cannot listen on " + listen + ": " + host + " is not a name or address of this machine";
    int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    int err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) err = errno;
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (err == EADDRINUSE)
        return listen + " is in use (another kernelevo serve, or another program, listens there): stop it, or "
                        "give another port with {serve.listen}";
    if (err == EADDRNOTAVAIL) return "cannot listen on " + listen + ": " + host + " is not an address of this machine";
    if (err == EACCES) return "cannot listen on " + listen + ": ports below 1024 need privileges";
    return "cannot listen on " + listen + (err ? std::string(": ") + std::strerror(err) : std::string());
}

// The same, as the error of the listen address.
SettingError bind_failure(const std::string& host, int port, const std::string& listen) {
    return SettingError({settings::kListen}, bind_failure_text(host, port, listen));
}

void refuse(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    // The message may quote a header: bytes that are not UTF-8 are replaced, not an exception.
    res.set_content(nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
    res.set_header("Cache-Control", "no-store");
}

// Every request passes here before routing, before any body is read: the Host and Origin checks,
// read-only methods without a body, then the token (none when `token` is empty). Handled: refused.
httplib::Server::HandlerResponse guard(const HostCheck& hosts, const std::string& token, const httplib::Request& req,
                                       httplib::Response& res) {
    using Handled = httplib::Server::HandlerResponse;
    // Two Host headers name two sites: which one a proxy or cache keyed on is anyone's guess.
    if (req.get_header_value_count("Host") > 1) {
        refuse(res, 400, "a request must have exactly one Host header");
        GuardedServer::close_after_reply();
        return Handled::Handled;
    }
    std::string host = req.get_header_value("Host");
    if (!hosts.allows(host)) {
        refuse(res, 421, "this is kernelevo serve at " + hosts.shown + ", not '" + host + "': open http://" +
                             hosts.shown + "/");
        return Handled::Handled;
    }
    // A page of another site may link here (a navigation: the page cannot read what it opens),
    // but not fetch or embed from here.
    std::string origin = req.get_header_value("Origin");
    if ((req.has_header("Origin") && lower(origin) != "http://" + lower(host)) ||
        (req.get_header_value("Sec-Fetch-Site") == "cross-site" && req.get_header_value("Sec-Fetch-Mode") != "navigate")) {
        refuse(res, 403, "requests from other sites are refused (Origin '" + origin + "')");
        return Handled::Handled;
    }
    if (req.method != "GET" && req.method != "HEAD") {
        refuse(res, 405, "kernelevo serve is read-only: GET or HEAD only");
        GuardedServer::close_after_reply();  // a body may follow: it is not read
        return Handled::Handled;
    }
    if (req.has_header("Transfer-Encoding") ||
        (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")) {
        refuse(res, 413, "kernelevo serve takes no request body");
        GuardedServer::close_after_reply();
        return Handled::Handled;
    }
    if (token.empty()) return Handled::Unhandled;
    std::string given = req.get_param_value("token");
    std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
    bool ok = given.size() == token.size() && CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
    if (ok) return Handled::Unhandled;
    refuse(res, 401, "a token is required: ?token=... or Authorization: Bearer ...");
    return Handled::Handled;
}
}  // namespace

bool is_loopback(const std::string& host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string line_diff(const std::string& before, const std::string& after) {
    auto lines = [](const std::string& s) {
        std::vector<std::string> out;
        size_t start = 0;
        while (start < s.size()) {
            size_t nl = s.find('\n', start);
            if (nl == std::string::npos) nl = s.size();
            out.push_back(s.substr(start, nl - start));
            start = nl + 1;
        }
        return out;
    };
    std::vector<std::string> a = lines(before), b = lines(after);
    const size_t n = a.size(), m = b.size();
    if (n * m > 4'000'000) return "(too large to diff: " + std::to_string(n) + " and " + std::to_string(m) + " lines)\n";
    // Longest common subsequence table, then one walk.
    std::vector<std::vector<uint32_t>> L(n + 1, std::vector<uint32_t>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;) L[i][j] = a[i] == b[j] ? L[i + 1][j + 1] + 1 : std::max(L[i + 1][j], L[i][j + 1]);
    std::string out;
    size_t i = 0, j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && a[i] == b[j]) {
            out += "  " + a[i++] + "\n";
            ++j;
        } else if (i < n && (j == m || L[i + 1][j] >= L[i][j + 1])) {  // removals before additions
            out += "- " + a[i++] + "\n";
        } else {
            out += "+ " + b[j++] + "\n";
        }
    }
    return out;
}

struct Server::Impl {
    ServeOptions opt;
    std::string host;
    int port = 0;
    GuardedServer http;
    std::optional<HostCheck> hosts;  // set once bound
    std::thread thread;
    std::mutex mu;  // guards stores, queue
    // Open states by location, read-only: serve never writes a state, and a file that is not one
    // (foreign tables, empty, corrupt) is shown as an error and left as it is. A request holds its
    // store (shared_ptr) while a newer request may replace it.
    struct Opened {
        std::shared_ptr<store::Store> store;
        std::optional<FileId> file;  // SQLite: the file as it was opened
    };
    std::map<std::string, Opened> stores;
#ifdef KEVO_WITH_WORKERS
    std::unique_ptr<worker::Queue> queue;
#endif
    std::string queue_password;  // opens the Redis runs whose URL and KERNELEVO_REDIS_PASSWORD give none

    // Every run location: given, registered on the queue, in the local cache. Deduplicated.
    std::vector<std::pair<std::string, nlohmann::json>> run_locations() {
        std::map<std::string, nlohmann::json> found;
        for (const auto& s : opt.states) found[s] = nlohmann::json::object();
#ifdef KEVO_WITH_WORKERS
        if (queue) {
            try {
                for (const auto& r : queue->runs()) {
                    std::string loc = r.value("state", std::string());
                    if (!loc.empty()) found[loc] = r;
                }
            } catch (const std::exception&) {
            }
        }
#endif
        if (opt.scan_cache) {
            std::error_code ec;
            fs::path dir = cache_root() / "search";
            if (fs::is_directory(dir, ec))
                for (const auto& e : fs::directory_iterator(dir, ec))
                    if (e.path().extension() == ".db") found.emplace(e.path().string(), nlohmann::json::object());
        }
        return {found.begin(), found.end()};
    }

    // The state at LOCATION as it is now (opened again when the file was replaced or continued),
    // or null when there is none (yet, or any more).
    std::shared_ptr<store::Store> open(const std::string& location) {
        store::StoreLocation where = store::parse_store_location(location);
        if (where.redis && where.password.empty()) where.password = queue_password;
        std::optional<FileId> now;
        bool exists = where.redis ? store::store_exists(where) : (now = file_id(where.path)).has_value();
        std::lock_guard<std::mutex> lock(mu);
        auto it = stores.find(location);
        if (it != stores.end() && exists && (where.redis || same_state(*it->second.file, *now))) return it->second.store;
        if (it != stores.end()) stores.erase(it);
        if (!exists) return nullptr;
        std::shared_ptr<store::Store> s = store::open_store(where, store::Access::read_only);
        stores[location] = {s, now};
        return s;
    }

    nlohmann::json run_summary(const std::string& location, const nlohmann::json& registered) {
        nlohmann::json r = {{"id", run_id(location)}, {"state", location}, {"registered", registered}};
        std::shared_ptr<store::Store> s;
        try {
            s = open(location);
        } catch (const std::exception& e) {
            r["error"] = redact(e.what());
            return r;
        }
        if (!s) {
            r["error"] = "no state there (yet)";
            return r;
        }
        try {
            r["task"] = s->get_meta("task_name").value_or(registered.value("task", ""));
            auto structure = s->get_meta("structure").value_or(nlohmann::json::object());
            r["arch"] = structure.value("arch", "");
            r["islands"] = structure.value("islands", 0);
            auto config = s->get_meta("config").value_or(nlohmann::json::object());
            r["generations"] = config.value("generations", 0);
            r["model"] = config.value("model", "");
            r["stop_reason"] = s->get_meta("stop_reason").value_or("");
            store::Spent spent = s->spent();
            r["tokens"] = spent.tokens();
            r["cost_usd"] = spent.cost_usd;
            r["llm_calls"] = spent.calls;
            r["generation"] = s->last_generation();
            std::vector<store::Program> programs = s->programs();
            int64_t ok = 0, failed = 0, pending = 0, unjudged = 0;
            double best = 0, t0 = 0;
            int64_t best_id = 0;
            nlohmann::json timeline = nlohmann::json::array();  // [seconds since the first program, best so far]
            std::sort(programs.begin(), programs.end(), [](const auto& a, const auto& b) { return a.created < b.created; });
            for (const auto& p : programs) {
                if (t0 == 0) t0 = p.created;
                if (p.ok()) {
                    ++ok;
                    if (p.speedup > best) {
                        best = p.speedup;
                        best_id = p.id;
                    }
                    timeline.push_back({p.created - t0, best});
                } else if (p.status == store::ProgramStatus::pending) {
                    ++pending;
                } else if (evolve::not_judged(p)) {
                    ++unjudged;  // the judge could not place it (not a kernel failure)
                } else if (p.status != store::ProgramStatus::duplicate) {
                    ++failed;
                }
            }
            r["ok"] = ok;
            r["failed"] = failed;
            r["live"] = search_running(location);
            // Candidates in flight only while a search runs: those of a search that ended stay pending.
            r["pending"] = r["live"] == false ? 0 : pending;
            r["pending_left"] = pending;
            r["not_judged"] = unjudged;
            r["programs"] = programs.size();
            r["best_speedup"] = best;
            r["best_program"] = best_id;
            r["started"] = t0;
            r["timeline"] = timeline;
            nlohmann::json history = nlohmann::json::array();
            for (const auto& g : s->history())
                history.push_back({{"generation", g.generation}, {"best_speedup", g.best_speedup}, {"tokens", g.tokens},
                                   {"cost_usd", g.cost_usd}, {"elapsed_s", g.elapsed_s}});
            r["history"] = history;
        } catch (const std::exception& e) {
            r["error"] = redact(e.what());
        }
        return r;
    }

    std::shared_ptr<store::Store> store_of(const std::string& id) {
        for (const auto& [loc, reg] : run_locations())
            if (run_id(loc) == id) return open(loc);
        return nullptr;
    }
};

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->opt = std::move(options);
    auto [host, port] = split_listen(impl_->opt.listen);
    impl_->host = host;
    impl_->port = port;
    if (impl_->opt.token.empty())
        if (const char* t = env(EnvVar::kServeToken)) impl_->opt.token = t;
    if (!is_loopback(host) && impl_->opt.token.size() < 16)
        throw SettingError({settings::kListen, settings::kServeToken},
                           "{serve.listen} " + impl_->opt.listen + " is reachable from other machines: give a token of at least 16 "
                           "characters in $KERNELEVO_SERVE_TOKEN (or {serve.token}), or listen on 127.0.0.1");
    if (!impl_->opt.token.empty()) register_secret(impl_->opt.token);
    if (!impl_->opt.queue_url.empty()) {
#ifdef KEVO_WITH_WORKERS
        impl_->queue = std::make_unique<worker::Queue>(impl_->opt.queue_url);
        impl_->queue_password = impl_->queue->location().password;  // registered runs are on its server
#else
        throw SettingError({settings::kQueue}, "{serve.queue}: this kernelevo was built without Redis support");
#endif
    }
}

Server::~Server() { stop(); }

nlohmann::json Server::overview() {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& [loc, reg] : impl_->run_locations()) runs.push_back(impl_->run_summary(loc, reg));
    nlohmann::json j = {{"runs", runs}, {"now", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()}};
#ifdef KEVO_WITH_WORKERS
    if (impl_->queue) {
        try {
            std::lock_guard<std::mutex> lock(impl_->mu);
            j["queue"] = {{"url", impl_->queue->display()}, {"stats", impl_->queue->stats()},
                          {"recent", impl_->queue->recent_jobs(30)}, {"dead", impl_->queue->dead_letters(20)}};
            j["workers"] = impl_->queue->workers();
        } catch (const std::exception& e) {
            j["queue"] = {{"error", redact(e.what())}};
        }
    }
#endif
    return j;
}

nlohmann::json Server::programs(const std::string& run) {
    std::shared_ptr<store::Store> s = impl_->store_of(run);
    if (!s) throw UsageError("no run " + run);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : s->programs()) out.push_back(program_row(p));
    return out;
}

nlohmann::json Server::program(const std::string& run, int64_t id) {
    std::shared_ptr<store::Store> s = impl_->store_of(run);
    if (!s) throw UsageError("no run " + run);
    auto p = s->get_program(id);
    if (!p) throw UsageError("no program " + std::to_string(id) + " in run " + run);
    nlohmann::json j = program_row(*p);
    j["source"] = p->source;
    j["feedback"] = p->feedback;
    j["details"] = p->details;
    j["log"] = p->details.is_object() ? p->details.value("log", p->feedback) : p->feedback;
    if (auto parent = s->get_program(p->parent_id)) {
        j["parent_source"] = parent->source;
        j["diff"] = line_diff(parent->source, p->source);
    }
    return j;
}

int Server::start() {
    auto& http = impl_->http;
    // Every request passes the guard before routing, before any body is read.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        return guard(*impl_->hosts, impl_->opt.token, req, res);
    });
    // "Expect: 100-continue" announces a body: refused before the client sends it.
    http.set_expect_100_continue_handler([](const httplib::Request&, httplib::Response& res) {
        refuse(res, 413, "kernelevo serve takes no request body");
        GuardedServer::close_after_reply();
        return 413;
    });
    auto json_reply = [](httplib::Response& res, const std::function<nlohmann::json()>& fn) {
        try {
            res.set_content(fn().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
            res.set_header("Cache-Control", "no-store");
        } catch (const UsageError& e) {
            refuse(res, 404, redact(e.what()));
        } catch (const std::exception& e) {
            refuse(res, 500, redact(e.what()));
        }
    };
    http.Get("/api/overview", [this, json_reply](const httplib::Request&, httplib::Response& res) {
        json_reply(res, [this] { return overview(); });
    });
    http.Get(R"(/api/runs/([0-9a-f]+)/programs)", [this, json_reply](const httplib::Request& req, httplib::Response& res) {
        json_reply(res, [&] { return programs(req.matches[1]); });
    });
    http.Get(R"(/api/runs/([0-9a-f]+)/programs/(\d+))", [this, json_reply](const httplib::Request& req, httplib::Response& res) {
        json_reply(res, [&] {
            // Digits that do not fit a program id name no program (not an internal error).
            const std::string digits = req.matches[2];
            int64_t id = 0;
            const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
            if (ec != std::errc() || end != digits.data() + digits.size())
                throw UsageError("no program " + digits.substr(0, 40) + " in run " + std::string(req.matches[1]));
            return program(req.matches[1], id);
        });
    });
    http.Get(R"(/(|[a-zA-Z0-9_./-]+))", [](const httplib::Request& req, httplib::Response& res) {
        std::string path = req.matches[1];
        if (path.empty()) path = "index.html";
        auto it = kWebAssets.find(path);
        if (it == kWebAssets.end()) {
            res.status = 404;
            res.set_content("not found", "text/plain");
            return;
        }
        res.set_content(reinterpret_cast<const char*>(it->second.data), it->second.size, it->second.type);
    });
    int port = impl_->port;
    if (port == 0) {
        port = http.bind_to_any_port(impl_->host);
        if (port <= 0) throw bind_failure(impl_->host, 0, impl_->opt.listen);
    } else if (!http.bind_to_port(impl_->host, port)) {
        throw bind_failure(impl_->host, port, impl_->opt.listen);
    }
    impl_->port = port;
    impl_->hosts.emplace(impl_->host, port);
    impl_->thread = std::thread([this] { impl_->http.listen_after_bind(); });
    // httplib's stop() does nothing until the loop runs: a stop() right after start() would leave
    // the thread accepting forever.
    while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return port;
}

void Server::stop() {
    impl_->http.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
}

void Server::wait() {
    if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace kevo::serve
