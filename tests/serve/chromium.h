// Headless chromium for the page tests: the DOM of a page after its scripts ran (--dump-dom).
#pragma once
#include <unistd.h>

#include <string>

#include "common/fs.h"
#include "common/process.h"

namespace kevo::testing {

inline std::string chromium_binary() {
    for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
        if (::access(p, X_OK) == 0) return p;
    return {};
}

// The DOM of URL (http://... or file://...) after up to `budget_ms` of virtual time.
inline ProcessResult dump_dom(const std::string& url, int budget_ms = 3000) {
    TempDir profile("kevo-chromium");
    ProcessOptions o;
    o.argv = {chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--user-data-dir=" + profile.path().string(), "--virtual-time-budget=" + std::to_string(budget_ms),
              "--dump-dom", url};
    o.timeout_s = 120;
    o.max_file_bytes = 64L << 20;
    return run_process(o);
}

}  // namespace kevo::testing
