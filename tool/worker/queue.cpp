#include "worker/queue.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "store/redis_connection.h"

namespace kevo::worker {
namespace {

using store::redis::fields;
using store::redis::Reply;
using store::redis::str;

std::string dumps(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string num(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

// ARGV: Q id stream spec client now
const char* kSubmitScript = R"lua(
local Q, id, stream = ARGV[1], ARGV[2], ARGV[1] .. ARGV[3]
local res = redis.call('GET', Q .. 'result:' .. id)
if res then return res end
if ARGV[5] ~= '' then redis.call('SADD', Q .. 'waiters:' .. id, ARGV[5]) end
if redis.call('EXISTS', Q .. 'job:' .. id) == 0 then
  redis.pcall('XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM')
  redis.call('HSET', Q .. 'job:' .. id, 'spec', ARGV[4], 'stream', ARGV[3], 'state', 'queued', 'attempts', 0,
    'submitted', ARGV[6])
  redis.call('XADD', stream, '*', 'job', id)
  redis.call('HINCRBY', Q .. 'stats', 'submitted', 1)
end
return false
)lua";

// ARGV: Q id worker now -> {attempts, workers before, spec}, or false when the job is gone or done
const char* kStartScript = R"lua(
local Q, id = ARGV[1], ARGV[2]
local job = Q .. 'job:' .. id
if redis.call('EXISTS', job) == 0 or redis.call('EXISTS', Q .. 'result:' .. id) == 1 then return false end
local before = redis.call('HGET', job, 'workers') or ''
local n = redis.call('HINCRBY', job, 'attempts', 1)
local list = before == '' and ARGV[3] or (before .. ',' .. ARGV[3])
redis.call('HSET', job, 'state', 'running', 'worker', ARGV[3], 'workers', list, 'started', ARGV[4])
local now = redis.call('TIME')
return {n, before, redis.call('HGET', job, 'spec'), now[1], now[2]}
)lua";

// ARGV: Q id stream entry result worker now dead_reason -> 1 written, 0 a result was there
const char* kCompleteScript = R"lua(
local Q, id, stream, entry = ARGV[1], ARGV[2], ARGV[1] .. ARGV[3], ARGV[4]
local job = Q .. 'job:' .. id
if entry ~= '' then
  redis.call('XACK', stream, 'workers', entry)
  redis.call('XDEL', stream, entry)
end
if redis.call('EXISTS', Q .. 'result:' .. id) == 1 then
  redis.call('HINCRBY', Q .. 'stats', 'duplicate_results', 1)
  return 0
end
redis.call('SET', Q .. 'result:' .. id, ARGV[5])
redis.call('HSET', job, 'state', 'done', 'worker', ARGV[6], 'finished', ARGV[7])
redis.call('HINCRBY', Q .. 'stats', 'done', 1)
if ARGV[8] ~= '' then
  redis.call('XADD', Q .. 'dead', 'MAXLEN', '~', 10000, '*', 'job', id, 'reason', ARGV[8],
    'workers', redis.call('HGET', job, 'workers') or '')
  redis.call('HSET', job, 'state', 'dead')
  redis.call('HINCRBY', Q .. 'stats', 'dead', 1)
end
redis.call('LPUSH', Q .. 'recent', id)
redis.call('LTRIM', Q .. 'recent', 0, 499)
for _, c in ipairs(redis.call('SMEMBERS', Q .. 'waiters:' .. id)) do
  redis.call('RPUSH', Q .. 'reply:' .. c, id)
  redis.call('EXPIRE', Q .. 'reply:' .. c, 86400)
end
redis.call('DEL', Q .. 'waiters:' .. id)
return 1
)lua";

}  // namespace

double now_unix() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json JobSpec::to_json() const {
    nlohmann::json j = {{"kind", kind}, {"arch", arch}, {"task_hash", task_hash}, {"reference_hash", reference_hash},
                        {"source", source}, {"options", options}};
    if (!object_sha256.empty()) j["object_sha256"] = object_sha256;
    if (rerun > 0) j["rerun"] = rerun;  // absent when 0: the ids of first runs stay as they were
    if (!confirm.is_null()) j["confirm"] = confirm;
    return j;
}

JobSpec JobSpec::from_json(const nlohmann::json& j) {
    JobSpec s;
    s.kind = j.value("kind", std::string());
    s.arch = j.value("arch", std::string());
    s.task_hash = j.value("task_hash", std::string());
    s.reference_hash = j.value("reference_hash", std::string());
    s.source = j.value("source", std::string());
    s.object_sha256 = j.value("object_sha256", std::string());
    s.options = j.value("options", nlohmann::json::object());
    s.rerun = j.value("rerun", 0);
    s.confirm = j.value("confirm", nlohmann::json());
    return s;
}

std::string JobSpec::id() const { return sha256_hex(dumps(to_json())).substr(0, 32); }

Queue::Queue(const std::string& url) : where_(store::parse_store_location(url)) {
    if (!where_.redis) throw UsageError("the queue must be a redis://HOST[:PORT][/DB][?prefix=NAME] URL, not '" + url + "'");
    q_ = "{" + where_.prefix + "}queue:";
    display_ = where_.display();
    conn_ = std::make_unique<store::redis::Connection>(where_, "Redis queue");
}

Queue::~Queue() = default;

void Queue::publish_task(const Task& task) {
    nlohmann::json j = task.to_json();
    // Files the task names relative to itself travel with it (an absolute path names a file that a
    // worker on another host cannot have: it stays as written, for a worker on this host).
    nlohmann::json files = nlohmann::json::array();
    auto add = [&](const std::string& written, const std::filesystem::path& path) {
        if (written.empty() || std::filesystem::path(written).is_absolute()) return;
        for (const auto& f : files)
            if (f["path"] == written) return;
        std::error_code ec;
        const uint64_t size = std::filesystem::file_size(path, ec);
        if (ec) throw UsageError("task " + task.name + ": cannot read " + path.string() + " to publish it to the workers");
        if (size > kMaxTaskFileBytes)
            throw UsageError("task " + task.name + ": " + written + " holds " + std::to_string(size) + " bytes, more than the " +
                             std::to_string(kMaxTaskFileBytes) + " a queued file may hold");
        files.push_back({{"path", written}, {"sha256", put_object(read_file(path), 7 * 86400)}, {"bytes", size}});
    };
    if (!task.reference_arg.empty()) add(task.reference_arg_written, task.reference_arg);
    for (const auto& t : task.inputs)
        if (t.init.id() == KEVO_INIT_FILE) add(t.init.path, t.init.file);
    std::lock_guard<std::mutex> lock(mu_);
    conn_->command({"HSET", q_ + "task:" + task.hash(), "task", dumps(j), "reference", read_file(task.reference_source),
                    "name", task.name, "reference_hash", task.reference_hash(), "files", dumps(files)});
}

nlohmann::json Queue::task_files(const std::string& hash) {
    std::lock_guard<std::mutex> lock(mu_);
    Reply r = conn_->command({"HGET", q_ + "task:" + hash, "files"});
    if (r->type != REDIS_REPLY_STRING) return nlohmann::json::array();
    nlohmann::json j = nlohmann::json::parse(str(r.get()), nullptr, false);
    return j.is_array() ? j : nlohmann::json::array();
}

std::optional<std::pair<nlohmann::json, std::string>> Queue::task(const std::string& hash) {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = fields(conn_->command({"HGETALL", q_ + "task:" + hash}).get());
    if (m.empty()) return std::nullopt;
    return std::make_pair(nlohmann::json::parse(m["task"]), m["reference"]);
}

std::optional<nlohmann::json> Queue::submit(const JobSpec& spec, const std::string& client) {
    std::string stream = stream_name(spec.kind, spec.arch);
    std::lock_guard<std::mutex> lock(mu_);
    Reply r = conn_->command({"EVAL", kSubmitScript, "0", q_, spec.id(), stream, dumps(spec.to_json()), client, num(now_unix())});
    if (r->type == REDIS_REPLY_STRING) return nlohmann::json::parse(str(r.get()));
    return std::nullopt;
}

std::optional<nlohmann::json> Queue::result(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    Reply r = conn_->command({"GET", q_ + "result:" + id});
    if (r->type != REDIS_REPLY_STRING) return std::nullopt;
    return nlohmann::json::parse(str(r.get()));
}

std::vector<std::string> Queue::wait_replies(const std::string& client, double timeout_s) {
    std::lock_guard<std::mutex> lock(mu_);
    conn_->set_timeout(timeout_s + 10);
    std::vector<std::string> ids;
    Reply r = conn_->command({"BLPOP", q_ + "reply:" + client, num(timeout_s)});
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) ids.push_back(str(r->element[1]));
    // Whatever else is there, without waiting.
    for (Reply more = conn_->command({"LPOP", q_ + "reply:" + client, "100"});
         more->type == REDIS_REPLY_ARRAY && more->elements > 0; more = conn_->command({"LPOP", q_ + "reply:" + client, "100"}))
        for (size_t i = 0; i < more->elements; ++i) ids.push_back(str(more->element[i]));
    return ids;
}

std::string Queue::put_object(const std::string& bytes, int64_t ttl_s) {
    std::string sha = sha256_hex(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    conn_->command({"SET", q_ + "obj:" + sha, bytes, "EX", std::to_string(ttl_s)});
    return sha;
}

std::optional<std::string> Queue::get_object(const std::string& sha256) {
    std::string bytes;
    {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = conn_->command({"GET", q_ + "obj:" + sha256});
        if (r->type != REDIS_REPLY_STRING) return std::nullopt;
        bytes = str(r.get());
    }
    if (sha256_hex(bytes) != sha256)
        throw UsageError("the compiled object " + sha256.substr(0, 12) + " in the queue does not match its sha256 (" +
                         std::to_string(bytes.size()) + " bytes): refused");
    return bytes;
}

void Queue::ensure_group(const std::string& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    // BUSYGROUP (it exists) is the usual answer; any other error is real.
    try {
        conn_->command({"XGROUP", "CREATE", q_ + stream, kGroup, "0", "MKSTREAM"});
    } catch (const UsageError& e) {
        if (std::string(e.what()).find("BUSYGROUP") == std::string::npos) throw;
    }
}

std::optional<Claimed> Queue::start(const std::string& stream, const std::string& entry, const std::string& id,
                                    const std::string& consumer, bool reclaimed) {
    Reply r;
    {
        std::lock_guard<std::mutex> lock(mu_);
        r = conn_->command({"EVAL", kStartScript, "0", q_, id, consumer, num(now_unix())});
    }
    Claimed c;
    c.stream = stream;
    c.entry = entry;
    c.id = id;
    c.reclaimed = reclaimed;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
        // Done already (a worker finished it after its lease ran out) or unknown: just acknowledge.
        complete(c, nlohmann::json(), consumer);
        return std::nullopt;
    }
    c.attempts = static_cast<int>(r->element[0]->integer);
    c.workers = str(r->element[1]);
    c.spec = JobSpec::from_json(nlohmann::json::parse(str(r->element[2])));
    // How long it waited for a worker: the server's clock now against the entry's id, which the
    // server stamped (milliseconds) when the job was queued; one clock, whichever host asks.
    try {
        const double now_ms = std::stod(str(r->element[3])) * 1e3 + std::stod(str(r->element[4])) / 1e3;
        c.queued_s = std::max(0.0, (now_ms - std::stod(entry.substr(0, entry.find('-')))) / 1e3);
    } catch (const std::exception&) {
        c.queued_s = 0;
    }
    return c;
}

std::optional<Claimed> Queue::next(const std::vector<std::string>& streams, const std::string& consumer, int block_ms) {
    if (!held_.empty()) {
        Claimed c = held_.front();
        held_.erase(held_.begin());
        return c;
    }
    // Without blocking, in priority order.
    for (const std::string& stream : streams) {
        Reply r;
        {
            std::lock_guard<std::mutex> lock(mu_);
            r = conn_->command({"XREADGROUP", "GROUP", kGroup, consumer, "COUNT", "1", "STREAMS", q_ + stream, ">"});
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) continue;
        const redisReply* entries = r->element[0]->element[1];
        if (entries->elements == 0) continue;
        const redisReply* e = entries->element[0];
        if (auto c = start(stream, str(e->element[0]), fields(e->element[1])["job"], consumer, false)) return c;
    }
    if (block_ms <= 0 || streams.empty()) return std::nullopt;
    // Then wait on all of them at once.
    std::vector<std::string> cmd{"XREADGROUP", "GROUP", kGroup, consumer, "COUNT", "1", "BLOCK", std::to_string(block_ms), "STREAMS"};
    for (const auto& s : streams) cmd.push_back(q_ + s);
    for (size_t i = 0; i < streams.size(); ++i) cmd.push_back(">");
    Reply r;
    {
        std::lock_guard<std::mutex> lock(mu_);
        conn_->set_timeout(block_ms / 1000.0 + 10);
        r = conn_->command(cmd);
    }
    if (r->type != REDIS_REPLY_ARRAY) return std::nullopt;
    std::vector<Claimed> got;
    for (const std::string& stream : streams)  // in priority order, whatever order the server answered in
        for (size_t i = 0; i < r->elements; ++i) {
            if (str(r->element[i]->element[0]) != q_ + stream) continue;
            const redisReply* entries = r->element[i]->element[1];
            for (size_t k = 0; k < entries->elements; ++k) {
                const redisReply* e = entries->element[k];
                if (auto c = start(stream, str(e->element[0]), fields(e->element[1])["job"], consumer, false))
                    got.push_back(*c);
            }
        }
    if (got.empty()) return std::nullopt;
    held_.assign(got.begin() + 1, got.end());
    return got.front();
}

std::optional<Claimed> Queue::reclaim(const std::vector<std::string>& streams, const std::string& consumer, int64_t lease_ms) {
    for (const std::string& s : streams) {
        Reply r;
        {
            std::lock_guard<std::mutex> lock(mu_);
            r = conn_->command({"XAUTOCLAIM", q_ + s, kGroup, consumer, std::to_string(lease_ms), "0-0", "COUNT", "1"});
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) continue;
        const redisReply* entries = r->element[1];
        for (size_t i = 0; i < entries->elements; ++i) {
            const redisReply* e = entries->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[1]->type != REDIS_REPLY_ARRAY) continue;
            auto f = fields(e->element[1]);
            if (auto c = start(s, str(e->element[0]), f["job"], consumer, true)) return c;
        }
    }
    return std::nullopt;
}

void Queue::touch(const Claimed& job, const std::string& consumer) {
    std::lock_guard<std::mutex> lock(mu_);
    conn_->command({"XCLAIM", q_ + job.stream, kGroup, consumer, "0", job.entry, "JUSTID"});
}

bool Queue::complete(const Claimed& job, const nlohmann::json& result, const std::string& worker,
                     const std::string& dead_reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (result.is_null()) {  // only acknowledge
        conn_->command({"XACK", q_ + job.stream, kGroup, job.entry});
        conn_->command({"XDEL", q_ + job.stream, job.entry});
        return false;
    }
    Reply r = conn_->command({"EVAL", kCompleteScript, "0", q_, job.id, job.stream, job.entry, dumps(result), worker,
                              num(now_unix()), dead_reason});
    return r->integer == 1;
}

void Queue::heartbeat(const nlohmann::json& status) {
    nlohmann::json s = status;
    s["seen"] = now_unix();
    std::string name = s.value("name", std::string());
    std::lock_guard<std::mutex> lock(mu_);
    conn_->pipeline({{"SET", q_ + "worker:" + name, dumps(s), "EX", "86400"}, {"SADD", q_ + "workers", name}});
}

void Queue::remove_worker(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    conn_->pipeline({{"DEL", q_ + "worker:" + name}, {"SREM", q_ + "workers", name}});
}

std::vector<nlohmann::json> Queue::workers() {
    std::lock_guard<std::mutex> lock(mu_);
    Reply names = conn_->command({"SMEMBERS", q_ + "workers"});
    std::vector<nlohmann::json> out;
    double now = now_unix();
    for (size_t i = 0; i < names->elements; ++i) {
        std::string name = str(names->element[i]);
        Reply r = conn_->command({"GET", q_ + "worker:" + name});
        if (r->type != REDIS_REPLY_STRING) {
            conn_->command({"SREM", q_ + "workers", name});
            continue;
        }
        nlohmann::json j = nlohmann::json::parse(str(r.get()));
        j["age_s"] = now - j.value("seen", 0.0);
        out.push_back(j);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value("name", "") < b.value("name", ""); });
    return out;
}

std::vector<std::string> Queue::streams() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    std::string cursor = "0";
    do {
        Reply r = conn_->command({"SCAN", cursor, "MATCH", q_ + "*:sm_*", "TYPE", "stream", "COUNT", "1000"});
        cursor = str(r->element[0]);
        for (size_t i = 0; i < r->element[1]->elements; ++i) out.push_back(str(r->element[1]->element[i]).substr(q_.size()));
    } while (cursor != "0");
    std::sort(out.begin(), out.end());
    return out;
}

nlohmann::json Queue::stats() {
    std::vector<std::string> names = streams();
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : fields(conn_->command({"HGETALL", q_ + "stats"}).get())) j[k] = std::strtod(v.c_str(), nullptr);
    nlohmann::json streams = nlohmann::json::object();
    for (const std::string& s : names) {
        int64_t len = conn_->command({"XLEN", q_ + s})->integer;
        int64_t pending = 0;
        Reply p = conn_->command({"XPENDING", q_ + s, kGroup});
        if (p->type == REDIS_REPLY_ARRAY && p->elements > 0) pending = p->element[0]->integer;
        streams[s] = {{"length", len}, {"pending", pending}, {"queued", len - pending}};
    }
    j["streams"] = streams;
    j["dead_letters"] = conn_->command({"XLEN", q_ + "dead"})->integer;
    return j;
}

void Queue::register_run(const nlohmann::json& run) {
    nlohmann::json r = run;
    r["registered"] = now_unix();
    std::lock_guard<std::mutex> lock(mu_);
    conn_->command({"HSET", q_ + "runs", run.value("state", std::string()), dumps(r)});
}

std::vector<nlohmann::json> Queue::runs() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<nlohmann::json> out;
    for (const auto& [k, v] : fields(conn_->command({"HGETALL", q_ + "runs"}).get())) out.push_back(nlohmann::json::parse(v));
    return out;
}

std::optional<nlohmann::json> Queue::job(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = fields(conn_->command({"HGETALL", q_ + "job:" + id}).get());
    if (m.empty()) return std::nullopt;
    nlohmann::json j = {{"id", id}};
    for (const auto& [k, v] : m) {
        if (k == "spec")
            j[k] = nlohmann::json::parse(v);
        else if (k == "attempts" || k == "submitted" || k == "started" || k == "finished")
            j[k] = std::strtod(v.c_str(), nullptr);
        else
            j[k] = v;
    }
    Reply r = conn_->command({"GET", q_ + "result:" + id});
    if (r->type == REDIS_REPLY_STRING) j["result"] = nlohmann::json::parse(str(r.get()));
    return j;
}

std::vector<nlohmann::json> Queue::recent_jobs(int n) {
    std::vector<std::string> ids;
    {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = conn_->command({"LRANGE", q_ + "recent", "0", std::to_string(std::max(n, 1) - 1)});
        for (size_t i = 0; i < r->elements; ++i) ids.push_back(str(r->element[i]));
    }
    std::vector<nlohmann::json> out;
    for (const std::string& id : ids) {
        auto j = job(id);
        if (!j) continue;
        nlohmann::json row = {{"id", id}, {"kind", (*j)["spec"].value("kind", "")}, {"arch", (*j)["spec"].value("arch", "")},
                              {"state", j->value("state", "")}, {"worker", j->value("worker", "")},
                              {"attempts", j->value("attempts", 0.0)}, {"submitted", j->value("submitted", 0.0)},
                              {"started", j->value("started", 0.0)}, {"finished", j->value("finished", 0.0)}};
        if (j->contains("result")) row["status"] = (*j)["result"].value("status", (*j)["result"].value("ok", false) ? "ok" : "");
        out.push_back(row);
    }
    return out;
}

std::vector<nlohmann::json> Queue::dead_letters(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    Reply r = conn_->command({"XREVRANGE", q_ + "dead", "+", "-", "COUNT", std::to_string(std::max(n, 1))});
    std::vector<nlohmann::json> out;
    for (size_t i = 0; i < r->elements; ++i) {
        auto f = fields(r->element[i]->element[1]);
        out.push_back({{"entry", str(r->element[i]->element[0])}, {"job", f["job"]}, {"reason", f["reason"]},
                       {"workers", f["workers"]}});
    }
    return out;
}

}  // namespace kevo::worker
