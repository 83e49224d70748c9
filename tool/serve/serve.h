// `kernelevo serve`: the validator server's web page and the JSON API behind it (cpp-httplib).
//
//   GET /                              the page (HTML, JS and uPlot embedded at build time: works offline)
//   GET /api/overview                  runs (task, progress, best speedup over time, tokens, cost),
//                                      the queue (streams, counters, recent jobs, dead letters), workers
//   GET /api/runs/<run>/programs       a run's candidates (no sources)
//   GET /api/runs/<run>/programs/<id>  one candidate: source, parent's source, diff, validation log
//
// Runs: the --state locations given, the searches registered on the queue (--workers), and the
// SQLite states under the kernelevo cache of this host. A non-loopback --listen address needs a
// token: every request then carries `Authorization: Bearer TOKEN` or `?token=TOKEN`.
//
// States are opened read-only: serve never writes one, and a file that is not a state (another
// application's database, an empty or damaged file) is shown as that run's error and left byte
// for byte as it was. A state that is continued, deleted (`search --fresh`) or replaced is
// followed: the next request shows the run that is there now, or "no state there (yet)".
//
// Against other clients and other pages (http_guard.h): one server per port (a second one is
// refused: "HOST:PORT is in use"); only requests naming this server in Host (the listen address,
// or localhost, 127.0.0.1, [::1] for a loopback one) are answered, others get 421, and requests
// from another origin (Origin, Sec-Fetch-Site) get 403, so that a page whose name was rebound to
// 127.0.0.1 cannot read runs or sources; GET and HEAD only, any request body is refused (413)
// before it is read; slow, idle and oversized requests are cut after a few seconds or 64 KiB.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/setting_error.h"

namespace kevo::serve {

struct ServeOptions {
    std::string listen = "127.0.0.1:8377";  // HOST:PORT (port 0: any free port)
    std::string token;                      // required unless the host is loopback
    std::string queue_url;                  // the workers' queue (optional)
    std::vector<std::string> states;        // run state locations (SQLite files, redis:// URLs)
    bool scan_cache = true;                 // also list the SQLite runs under cache_root()/search
};

class Server {
public:
    // Checks the options (a non-loopback address without a token is refused); throws SettingError.
    explicit Server(ServeOptions options);
    ~Server();
    // Binds and serves in a background thread; returns the port. Throws SettingError (the listen address) when it cannot bind.
    int start();
    void stop();
    // Blocks until stop() (or the server fails).
    void wait();
    nlohmann::json overview();
    nlohmann::json programs(const std::string& run);
    nlohmann::json program(const std::string& run, int64_t id);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A line diff of `before` -> `after` in unified style ("  ", "- ", "+ " prefixes, whole files).
std::string line_diff(const std::string& before, const std::string& after);
// Whether HOST is a loopback name or address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

}  // namespace kevo::serve
