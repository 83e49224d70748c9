// open_store(): parses a --state location, opens the backend and wraps it so that the tool's own
// texts (metadata, events, error messages) pass through kevo::redact(); data is stored as it is.
#include <cstdlib>
#include <filesystem>
#include <ostream>

#include "common/settings.h"
#include "common/error.h"
#include "common/process.h"
#include "common/text.h"
#include "store/internal/backends.h"

namespace kevo::store {
namespace {

// %XX escapes in a URL part.
std::string percent_decode(const std::string& s, const std::string& what) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        auto hex = [](char c) {
            return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        };
        int hi = i + 2 < s.size() ? hex(s[i + 1]) : -1, lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) throw UsageError("state store URL: bad %-escape in the " + what);
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

int parse_int(const std::string& s, int lo, int hi, const std::string& what) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos || std::stoi(s) < lo ||
        std::stoi(s) > hi)
        throw UsageError("state store URL: the " + what + " must be a number from " + std::to_string(lo) + " to " +
                         std::to_string(hi) + ", not '" + s + "'");
    return std::stoi(s);
}

const char* kRedisForm = " (expected redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME])";

StoreLocation parse_redis(const std::string& url) {
    StoreLocation w;
    w.redis = true;
    std::string rest = url.substr(8);  // after "redis://"
    std::string query;
    if (size_t q = rest.find('?'); q != std::string::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    std::string path;
    if (size_t slash = rest.find('/'); slash != std::string::npos) {
        path = rest.substr(slash + 1);
        rest = rest.substr(0, slash);
    }
    // Credentials: the last '@' ends them (a password may contain '@' when escaped or not).
    if (size_t at = rest.rfind('@'); at != std::string::npos) {
        std::string userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        if (size_t colon = userinfo.find(':'); colon != std::string::npos) {
            w.user = percent_decode(userinfo.substr(0, colon), "user name");
            w.password = percent_decode(userinfo.substr(colon + 1), "password");
        } else {
            w.password = percent_decode(userinfo, "password");  // redis://PASSWORD@HOST, as redis-cli reads it
        }
    }
    std::string port;
    if (!rest.empty() && rest[0] == '[') {  // [IPv6]:PORT
        size_t close = rest.find(']');
        if (close == std::string::npos) throw UsageError("state store URL: unclosed '[' in the host" + std::string(kRedisForm));
        w.host = rest.substr(1, close - 1);
        std::string after = rest.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') throw UsageError("state store URL: junk after the host" + std::string(kRedisForm));
            port = after.substr(1);
        }
    } else if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
        w.host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
    } else {
        w.host = rest;
    }
    if (w.host.empty()) throw UsageError("state store URL: no host" + std::string(kRedisForm));
    if (!port.empty()) w.port = parse_int(port, 1, 65535, "port");
    if (!path.empty()) w.db = parse_int(path, 0, 1000000, "database number");
    for (size_t start = 0; start < query.size();) {
        size_t amp = query.find('&', start);
        std::string param = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
        start = amp == std::string::npos ? query.size() : amp + 1;
        if (param.empty()) continue;
        size_t eq = param.find('=');
        std::string name = param.substr(0, eq), value = eq == std::string::npos ? "" : param.substr(eq + 1);
        if (name != "prefix")
            throw UsageError("state store URL: unknown parameter '" + name + "' (the only one is prefix=NAME)");
        w.prefix = percent_decode(value, "prefix");
    }
    // The prefix becomes a hash tag "{NAME}:" and a SCAN pattern: no braces, glob characters or spaces.
    if (w.prefix.empty() || w.prefix.size() > 200 ||
        w.prefix.find_first_of("{}*?[]\\ \t\r\n") != std::string::npos)
        throw UsageError("state store URL: the prefix must be 1 to 200 characters without braces, spaces or any of "
                         "* ? [ ] \\ (got '" + w.prefix + "')");
    if (w.password.empty())
        if (const char* pw = env(EnvVar::kRedisPassword)) w.password = pw;
    if (!w.password.empty()) register_secret(w.password);
    return w;
}

// Applies redact() to every string of a JSON value, object keys included.
nlohmann::json redact_json(const nlohmann::json& j) {
    switch (j.type()) {
    case nlohmann::json::value_t::string:
        return redact(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& v : j) out.push_back(redact_json(v));
        return out;
    }
    case nlohmann::json::value_t::object: {
        nlohmann::json out = nlohmann::json::object();
        for (auto it = j.begin(); it != j.end(); ++it) out[redact(it.key())] = redact_json(it.value());
        return out;
    }
    default:
        return j;
    }
}

// What the tool itself writes (metadata such as the command line and the stop reason, events,
// error messages, file names) goes through redact() before it reaches the backend, for these may
// quote a URL or a message with a credential. Data (requests, replies, model names, kernel
// sources, their feedback and details, island states) is stored byte for byte: a secret's text
// that occurs in a model's reply is part of the reply, and replacing it would corrupt the kernel
// compiled from it. Reads pass through.
class RedactingStore : public Store {
public:
    explicit RedactingStore(std::unique_ptr<Store> inner) : s_(std::move(inner)) {}

    std::optional<nlohmann::json> get_meta(const std::string& key) override { return s_->get_meta(key); }
    void put_meta(const std::string& key, const nlohmann::json& value) override {
        s_->put_meta(key, redact_json(value));
    }
    std::optional<LlmCall> find_llm_call(const std::string& key) override { return s_->find_llm_call(key); }
    int64_t add_llm_call(const LlmCall& call, bool* inserted = nullptr) override { return s_->add_llm_call(call, inserted); }
    Spent spent() override { return s_->spent(); }
    std::vector<LlmCall> llm_calls() override { return s_->llm_calls(); }
    void add_batch(const std::vector<BatchRequest>& requests) override {
        std::vector<BatchRequest> r = requests;
        for (BatchRequest& b : r) {
            b.file = redact(std::move(b.file));
            b.error = redact(std::move(b.error));
        }
        s_->add_batch(r);
    }
    std::vector<BatchRequest> batch_requests() override { return s_->batch_requests(); }
    void fail_batch_request(const std::string& custom_id, const std::string& error) override {
        s_->fail_batch_request(custom_id, redact(error));
    }
    void import_batch_replies(const std::vector<LlmCall>& calls,
                              const std::vector<std::pair<std::string, std::string>>& failed) override {
        std::vector<std::pair<std::string, std::string>> fs;
        for (const auto& [custom_id, error] : failed) fs.emplace_back(custom_id, redact(error));
        s_->import_batch_replies(calls, fs);
    }
    std::optional<Program> find_program(const std::string& key) override { return s_->find_program(key); }
    std::optional<Program> get_program(int64_t id) override { return s_->get_program(id); }
    Program claim_program(Program program) override { return s_->claim_program(std::move(program)); }
    int64_t put_program(const Program& program) override { return s_->put_program(program); }
    std::vector<Program> programs() override { return s_->programs(); }
    void commit_generation(const Generation& g, const std::vector<nlohmann::json>& islands,
                           const std::vector<Event>& events) override {
        std::vector<Event> ev;
        for (const Event& e : events) ev.push_back(Event{e.generation, redact(e.kind), redact_json(e.detail)});
        s_->commit_generation(g, islands, ev);
    }
    int last_generation() override { return s_->last_generation(); }
    std::vector<nlohmann::json> islands() override { return s_->islands(); }
    std::vector<Generation> history() override { return s_->history(); }
    std::vector<Event> events() override { return s_->events(); }

private:
    std::unique_ptr<Store> s_;
};

#ifndef KEVO_HAVE_REDIS
[[noreturn]] void no_redis(const StoreLocation& w) {
    throw UsageError("state store " + w.display() +
                     ": this kernelevo was not built with Redis support (hiredis was not found at configure time; "
                     "install libhiredis-dev and reconfigure with -DKERNELEVO_ENABLE_REDIS=ON), use an SQLite file");
}
#endif

constexpr const char* kProgramStatusNames[] = {KEVO_PROGRAM_STATUS_LIST(KEVO_ENUM_NAME)};

}  // namespace

const char* program_status_name(ProgramStatus s) { return enum_name(kProgramStatusNames, s); }

ProgramStatus parse_program_status(const std::string& name) {
    if (auto s = enum_of_name<ProgramStatus>(kProgramStatusNames, name)) return *s;
    throw UsageError("the state holds a program of status '" + printable(name) + "', which this kernelevo does not " +
                     "know (" + enum_names_text(kProgramStatusNames) + "): a damaged state, or a newer kernelevo's");
}

void to_json(nlohmann::json& j, ProgramStatus s) { j = program_status_name(s); }
std::ostream& operator<<(std::ostream& os, ProgramStatus s) { return os << program_status_name(s); }

std::string StoreLocation::display() const {
    if (!redis) return path;
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    return "redis://" + (user.empty() ? std::string() : user + "@") + h + ":" + std::to_string(port) + "/" +
           std::to_string(db) + "?prefix=" + prefix;
}

StoreLocation parse_store_location(const std::string& location) {
    if (location.rfind("redis://", 0) == 0) return parse_redis(location);
    if (location.rfind("rediss://", 0) == 0 || location.rfind("redis+", 0) == 0 || location.rfind("unix://", 0) == 0)
        throw UsageError("state store: only plain redis://HOST:PORT URLs are supported (no TLS or Unix sockets)");
    StoreLocation w;
    w.path = location.rfind("sqlite:", 0) == 0 ? location.substr(7) : location;
    if (w.path.empty()) throw UsageError("empty state store path");
    return w;
}

bool redis_supported() {
#ifdef KEVO_HAVE_REDIS
    return true;
#else
    return false;
#endif
}

namespace {
// Whether `checked` vouches for the SQLite file at `path` as it is now.
bool still_checked(const StateCheck& checked, const std::string& path) {
    return !checked.path.empty() && checked.path == path && checked.identity == detail::sqlite_identity(path);
}
}  // namespace

StateCheck check_state(const std::string& location) {
    StoreLocation w = parse_store_location(location);
    if (w.redis || !std::filesystem::exists(w.path)) return {};
    StateCheck c{w.path, detail::sqlite_identity(w.path)};
    detail::check_sqlite_state(w.path);
    return c;
}

std::unique_ptr<Store> open_store(const std::string& location, Access access) { return open_store(location, access, StateCheck{}); }

std::unique_ptr<Store> open_store(const std::string& location, Access access, const StateCheck& checked) {
    return open_store(parse_store_location(location), access, checked);
}

std::unique_ptr<Store> open_store(const StoreLocation& w, Access access, const StateCheck& checked) {
    if (!w.redis) {
        if (access == Access::read_only && !std::filesystem::is_regular_file(w.path))
            throw UsageError("no search state at " + w.path);
        // A writer's lease locks the file itself (writer.h): before SQLite opens it, and once made.
        if (access != Access::read_only) detail::bind_writer(w.path);
        auto opened = detail::open_sqlite(w.path, access, still_checked(checked, w.path));
        if (access != Access::read_only) detail::bind_writer(w.path);
        return std::make_unique<RedactingStore>(std::move(opened));
    }
#ifdef KEVO_HAVE_REDIS
    if (access == Access::read_only && !detail::redis_exists(w))
        throw UsageError("no search state at " + w.display());
    return std::make_unique<RedactingStore>(detail::open_redis(w));
#else
    no_redis(w);
#endif
}

bool store_exists(const std::string& location) { return store_exists(parse_store_location(location)); }

bool store_exists(const StoreLocation& w) {
    if (!w.redis) return std::filesystem::exists(w.path);
#ifdef KEVO_HAVE_REDIS
    return detail::redis_exists(w);
#else
    no_redis(w);
#endif
}

void remove_store(const std::string& location, const StateCheck& checked) {
    StoreLocation w = parse_store_location(location);
    if (!w.redis) {
        // Only a KernelEvo state is deleted: anything else at that path is refused, as it is.
        // A symbolic link is the state it points to: that is deleted (the link stays and points at
        // the new state), not the link.
        std::error_code ec;
        if (std::filesystem::is_symlink(w.path, ec)) {
            std::filesystem::path real = std::filesystem::weakly_canonical(std::filesystem::absolute(w.path), ec);
            if (!ec && !real.empty()) w.path = real.string();
        }
        if (std::filesystem::exists(w.path) && !still_checked(checked, w.path)) detail::open_sqlite(w.path, Access::read_only);
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(w.path + suffix);
        return;
    }
#ifdef KEVO_HAVE_REDIS
    detail::redis_remove(w);
#else
    no_redis(w);
#endif
}

}  // namespace kevo::store
