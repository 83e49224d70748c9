// The Redis state store (hiredis), for runs that span machines. Same semantics as the SQLite store:
// every operation is one Lua script (EVAL), one MULTI/EXEC block or one single-key command, hence
// atomic for every client of the server; a call that returned has been applied by the server, so
// killing the client (even with kill -9) loses only the operation in progress. (Whether the server
// itself survives a crash is its persistence setting: appendonly yes for that.)
//
// Key layout, P = "{NAME}:" (NAME: the URL's prefix, default "kernelevo"; the braces make P a
// Redis Cluster hash tag and keep one run's keys apart from any other prefix's):
//   P meta               hash   name -> JSON value (schema_version, structure, config, ...)
//   P llm:seq            string last LLM call id
//   P llm:ids            hash   call key -> id                      (the uniqueness index)
//   P llm:<id>           hash   key kind request reply model prompt_tokens completion_tokens
//                               cost_usd latency_s created
//   P spent              hash   prompt_tokens completion_tokens calls cost_usd (running totals)
//   P prog:seq           string last program id
//   P prog:ids           hash   program key -> id
//   P prog:<id>          hash   id key generation island parent_id origin attempt source norm_hash
//                               status speedup feedback details llm_call_id created
//   P prog:hash:<hash>   zset   ids of the programs with that normalized source hash (score = id)
//   P batch              hash   custom_id -> batch request (JSON, without its error)
//   P batch:failed       hash   custom_id -> why its batch line failed
//   P islands            list   the islands' states (JSON) as of the last committed generation
//   P generations        hash   generation -> history row (JSON)
//   P events             list   events (JSON {generation, kind, detail}) in commit order
//   P writer             string the writer lease (writer.cpp: holder JSON, expires unless renewed)
//   P writer:held        string the same JSON until the holder releases it cleanly (kept by --fresh)
// Texts are stored as they are (Redis strings are binary-safe); numbers as decimal text, doubles
// with 17 significant digits so they read back exactly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "common/error.h"
#include "store/internal/backends.h"
#include "store/redis_connection.h"

namespace kevo::store {
namespace {

using detail::dumps;
using detail::loads;
using detail::now_unix;
using redis::Connection;
using redis::Reply;
using redis::fields;
using redis::str;

constexpr const char* kSchemaVersion = "1";

std::string num(int64_t v) { return std::to_string(v); }
std::string num(int v) { return std::to_string(v); }
std::string num(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}
int64_t to_i64(const std::string& s) { return s.empty() ? 0 : std::strtoll(s.c_str(), nullptr, 10); }
double to_double(const std::string& s) { return s.empty() ? 0 : std::strtod(s.c_str(), nullptr); }
double json_double(const nlohmann::json& j, const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : 0;  // NaN was written as null
}
int64_t json_i64(const nlohmann::json& j, const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

// ---- Lua scripts: ARGV[1] is always the key prefix P ----------------------------------------

// Creates the run's metadata (schema version) or checks it. Returns the stored schema version.
const char* kInitScript = R"lua(
local P = ARGV[1]
local t = redis.call('TYPE', P .. 'meta')['ok']
if t == 'none' then
  -- No state here yet: the prefix must hold nothing else (another application's keys), apart from
  -- the writer lease taken just before.
  local cursor = '0'
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', P .. '*', 'COUNT', 1000)
    cursor = r[1]
    for _, k in ipairs(r[2]) do
      if k ~= P .. 'writer' and k ~= P .. 'writer:held' then
        return redis.error_reply('the prefix ' .. P .. ' holds keys that are not a KernelEvo state (' .. k ..
          ', and no ' .. P .. 'meta): they were left as they are; pass another prefix (?prefix=NAME)')
      end
    end
  until cursor == '0'
  redis.call('HSET', P .. 'meta', 'schema_version', ARGV[2])
  return ARGV[2]
elseif t ~= 'hash' then
  return redis.error_reply('the key ' .. P .. 'meta holds a ' .. t .. ', not a KernelEvo state')
end
local v = redis.call('HGET', P .. 'meta', 'schema_version')
if not v then
  return redis.error_reply('the hash ' .. P .. 'meta has no schema_version: not a KernelEvo state')
end
return v
)lua";

// ARGV: P key kind request reply model prompt_tokens completion_tokens cost_usd latency_s created
const char* kAddCallScript = R"lua(
local P = ARGV[1]
local stored = redis.call('HGET', P .. 'llm:ids', ARGV[2])
if stored then return -tonumber(stored) end  -- stored first by another writer: that one stands (negated)
local id = redis.call('INCR', P .. 'llm:seq')
redis.call('HSET', P .. 'llm:ids', ARGV[2], id)
redis.call('HSET', P .. 'llm:' .. id, 'id', id, 'key', ARGV[2], 'kind', ARGV[3], 'request', ARGV[4],
  'reply', ARGV[5], 'model', ARGV[6], 'prompt_tokens', ARGV[7], 'completion_tokens', ARGV[8],
  'cost_usd', ARGV[9], 'latency_s', ARGV[10], 'created', ARGV[11])
redis.call('HINCRBY', P .. 'spent', 'prompt_tokens', ARGV[7])
redis.call('HINCRBY', P .. 'spent', 'completion_tokens', ARGV[8])
redis.call('HINCRBY', P .. 'spent', 'calls', 1)
redis.call('HINCRBYFLOAT', P .. 'spent', 'cost_usd', ARGV[9])
return id
)lua";

// ARGV: P custom_id1 json1 custom_id2 json2 ... : all of one batch, or nothing when an id exists.
const char* kAddBatchScript = R"lua(
local P = ARGV[1]
for i = 2, #ARGV, 2 do
  if redis.call('HEXISTS', P .. 'batch', ARGV[i]) == 1 then
    return redis.error_reply('a batch request with the id ' .. ARGV[i] .. ' is stored already')
  end
end
for i = 2, #ARGV, 2 do redis.call('HSET', P .. 'batch', ARGV[i], ARGV[i + 1]) end
return #ARGV / 2
)lua";

// ARGV: P N, then N calls of 10 fields each (as kAddCallScript's), then custom_id error pairs:
// the calls and the failed batch requests of one import of Batch API replies; nothing when a
// call's key is stored already (or repeats).
const char* kImportRepliesScript = R"lua(
local P = ARGV[1]
local n = tonumber(ARGV[2])
local seen = {}
for i = 0, n - 1 do
  local key = ARGV[3 + i * 10]
  if seen[key] or redis.call('HEXISTS', P .. 'llm:ids', key) == 1 then
    return redis.error_reply('an LLM call with the key ' .. key .. ' is stored already')
  end
  seen[key] = true
end
for i = 0, n - 1 do
  local a = 3 + i * 10
  local id = redis.call('INCR', P .. 'llm:seq')
  redis.call('HSET', P .. 'llm:ids', ARGV[a], id)
  redis.call('HSET', P .. 'llm:' .. id, 'id', id, 'key', ARGV[a], 'kind', ARGV[a + 1], 'request', ARGV[a + 2],
    'reply', ARGV[a + 3], 'model', ARGV[a + 4], 'prompt_tokens', ARGV[a + 5], 'completion_tokens', ARGV[a + 6],
    'cost_usd', ARGV[a + 7], 'latency_s', ARGV[a + 8], 'created', ARGV[a + 9])
  redis.call('HINCRBY', P .. 'spent', 'prompt_tokens', ARGV[a + 5])
  redis.call('HINCRBY', P .. 'spent', 'completion_tokens', ARGV[a + 6])
  redis.call('HINCRBY', P .. 'spent', 'calls', 1)
  redis.call('HINCRBYFLOAT', P .. 'spent', 'cost_usd', ARGV[a + 7])
end
for i = 3 + n * 10, #ARGV, 2 do redis.call('HSET', P .. 'batch:failed', ARGV[i], ARGV[i + 1]) end
return n
)lua";

// ARGV: P KIND(llm|prog) key -> the record's fields (flat), or nil.
const char* kFindScript = R"lua(
local id = redis.call('HGET', ARGV[1] .. ARGV[2] .. ':ids', ARGV[3])
if not id then return false end
return redis.call('HGETALL', ARGV[1] .. ARGV[2] .. ':' .. id)
)lua";

// ARGV: P KIND(llm|prog) -> every record's fields (unordered).
const char* kAllScript = R"lua(
local ids = redis.call('HVALS', ARGV[1] .. ARGV[2] .. ':ids')
local out = {}
for i, id in ipairs(ids) do out[i] = redis.call('HGETALL', ARGV[1] .. ARGV[2] .. ':' .. id) end
return out
)lua";

// ARGV: P MODE(claim|put) key generation island parent_id origin attempt source norm_hash status
//       speedup feedback details llm_call_id created
// claim: when a program with another key, not itself a duplicate, has norm_hash (the lowest id wins), returns {0, its fields} and writes nothing.
// Otherwise inserts or updates (same key; `created` is kept) and returns {1, id}. ('duplicate' is
// program_status_name(ProgramStatus::duplicate), the stored name.)
const char* kUpsertScript = R"lua(
local P, key, hash = ARGV[1], ARGV[3], ARGV[10]
if ARGV[2] == 'claim' then
  for _, other in ipairs(redis.call('ZRANGE', P .. 'prog:hash:' .. hash, 0, -1)) do
    local o = redis.call('HMGET', P .. 'prog:' .. other, 'key', 'status')
    if o[1] ~= key and o[2] ~= 'duplicate' then
      return {0, redis.call('HGETALL', P .. 'prog:' .. other)}
    end
  end
end
local id = redis.call('HGET', P .. 'prog:ids', key)
local created = ARGV[16]
if id then
  local old = redis.call('HMGET', P .. 'prog:' .. id, 'norm_hash', 'created')
  if old[1] and old[1] ~= hash then redis.call('ZREM', P .. 'prog:hash:' .. old[1], id) end
  if old[2] then created = old[2] end
else
  id = redis.call('INCR', P .. 'prog:seq')
  redis.call('HSET', P .. 'prog:ids', key, id)
end
redis.call('HSET', P .. 'prog:' .. id, 'id', id, 'key', key, 'generation', ARGV[4], 'island', ARGV[5],
  'parent_id', ARGV[6], 'origin', ARGV[7], 'attempt', ARGV[8], 'source', ARGV[9], 'norm_hash', hash,
  'status', ARGV[11], 'speedup', ARGV[12], 'feedback', ARGV[13], 'details', ARGV[14],
  'llm_call_id', ARGV[15], 'created', created)
redis.call('ZADD', P .. 'prog:hash:' .. hash, id, id)
return {1, tonumber(id)}
)lua";

// ---- records <-> hash fields --------------------------------------------------------------

std::string get(const std::map<std::string, std::string>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
}

Program program_of(const std::map<std::string, std::string>& m) {
    Program p;
    p.id = to_i64(get(m, "id"));
    p.key = get(m, "key");
    p.generation = static_cast<int>(to_i64(get(m, "generation")));
    p.island = static_cast<int>(to_i64(get(m, "island")));
    p.parent_id = to_i64(get(m, "parent_id"));
    p.origin = get(m, "origin");
    p.attempt = static_cast<int>(to_i64(get(m, "attempt")));
    p.source = get(m, "source");
    p.norm_hash = get(m, "norm_hash");
    p.status = parse_program_status(get(m, "status"));
    p.speedup = to_double(get(m, "speedup"));
    p.feedback = get(m, "feedback");
    p.details = loads(get(m, "details"));
    p.llm_call_id = to_i64(get(m, "llm_call_id"));
    p.created = to_double(get(m, "created"));
    return p;
}

LlmCall call_of(const std::map<std::string, std::string>& m) {
    LlmCall c;
    c.id = to_i64(get(m, "id"));
    c.key = get(m, "key");
    c.kind = get(m, "kind");
    c.request = loads(get(m, "request"));
    c.reply = get(m, "reply");
    c.model = get(m, "model");
    c.prompt_tokens = to_i64(get(m, "prompt_tokens"));
    c.completion_tokens = to_i64(get(m, "completion_tokens"));
    c.cost_usd = to_double(get(m, "cost_usd"));
    c.latency_s = to_double(get(m, "latency_s"));
    c.created = to_double(get(m, "created"));
    return c;
}

class RedisStore : public Store {
public:
    explicit RedisStore(const StoreLocation& w) : conn_(w), p_(w.key_prefix()), display_(w.display()) {
        std::string version = str(eval(kInitScript, {kSchemaVersion}).get());
        if (version != kSchemaVersion)
            throw UsageError("state store " + display_ + " has schema version " + version + ", expected " +
                             kSchemaVersion);
    }

    std::optional<nlohmann::json> get_meta(const std::string& key) override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = conn_.command({"HGET", p_ + "meta", key});
        if (r->type != REDIS_REPLY_STRING) return std::nullopt;
        return detail::meta_json(str(r.get()), key, display_);
    }
    void put_meta(const std::string& key, const nlohmann::json& value) override {
        std::lock_guard<std::mutex> lock(mu_);
        conn_.command({"HSET", p_ + "meta", key, dumps(value)});
    }

    std::optional<LlmCall> find_llm_call(const std::string& key) override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = eval(kFindScript, {"llm", key});
        if (r->type != REDIS_REPLY_ARRAY) return std::nullopt;
        return call_of(fields(r.get()));
    }
    int64_t add_llm_call(const LlmCall& c, bool* inserted = nullptr) override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = eval(kAddCallScript, {c.key, c.kind, dumps(c.request), c.reply, c.model, num(c.prompt_tokens),
                                        num(c.completion_tokens), num(finite(c.cost_usd)), num(finite(c.latency_s)),
                                        num(c.created ? c.created : now_unix())});
        if (inserted) *inserted = r->integer > 0;
        return r->integer > 0 ? r->integer : -r->integer;
    }
    Spent spent() override {
        std::lock_guard<std::mutex> lock(mu_);
        auto m = fields(conn_.command({"HGETALL", p_ + "spent"}).get());
        return Spent{to_i64(get(m, "prompt_tokens")), to_i64(get(m, "completion_tokens")), to_i64(get(m, "calls")),
                     to_double(get(m, "cost_usd"))};
    }
    std::vector<LlmCall> llm_calls() override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = eval(kAllScript, {"llm"});
        std::vector<LlmCall> out;
        for (size_t i = 0; i < r->elements; ++i) out.push_back(call_of(fields(r->element[i])));
        std::sort(out.begin(), out.end(), [](const LlmCall& a, const LlmCall& b) { return a.id < b.id; });
        return out;
    }

    void add_batch(const std::vector<BatchRequest>& requests) override {
        if (requests.empty()) return;
        std::vector<std::string> args;
        for (const BatchRequest& b : requests) {
            args.push_back(b.custom_id);
            args.push_back(dumps({{"key", b.key}, {"batch", b.batch}, {"file", b.file}, {"kind", b.kind},
                                  {"request", b.request}, {"reserved_tokens", b.reserved_tokens},
                                  {"reserved_cost_usd", finite(b.reserved_cost_usd)},
                                  {"created", b.created ? b.created : now_unix()}}));
        }
        std::lock_guard<std::mutex> lock(mu_);
        eval(kAddBatchScript, args);
    }
    std::vector<BatchRequest> batch_requests() override {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Reply> r = conn_.pipeline({{"HGETALL", p_ + "batch"}, {"HGETALL", p_ + "batch:failed"}});
        auto failed = fields(r[1].get());
        std::vector<BatchRequest> out;
        for (const auto& [id, text] : fields(r[0].get())) {
            nlohmann::json j = loads(text);
            out.push_back(BatchRequest{id, j.value("key", std::string()), static_cast<int>(json_i64(j, "batch")),
                                       j.value("file", std::string()), j.value("kind", std::string()),
                                       j.value("request", nlohmann::json()), json_i64(j, "reserved_tokens"),
                                       json_double(j, "reserved_cost_usd"), get(failed, id.c_str()),
                                       json_double(j, "created")});
        }
        std::sort(out.begin(), out.end(), [](const BatchRequest& a, const BatchRequest& b) {
            return a.batch != b.batch ? a.batch < b.batch : a.custom_id < b.custom_id;
        });
        return out;
    }
    void fail_batch_request(const std::string& custom_id, const std::string& error) override {
        std::lock_guard<std::mutex> lock(mu_);
        conn_.command({"HSET", p_ + "batch:failed", custom_id, error});
    }
    void import_batch_replies(const std::vector<LlmCall>& calls,
                              const std::vector<std::pair<std::string, std::string>>& failed) override {
        if (calls.empty() && failed.empty()) return;
        std::vector<std::string> args{num(static_cast<int64_t>(calls.size()))};
        for (const LlmCall& c : calls)
            args.insert(args.end(), {c.key, c.kind, dumps(c.request), c.reply, c.model, num(c.prompt_tokens),
                                     num(c.completion_tokens), num(finite(c.cost_usd)), num(finite(c.latency_s)),
                                     num(c.created ? c.created : now_unix())});
        for (const auto& [custom_id, error] : failed) args.insert(args.end(), {custom_id, error});
        std::lock_guard<std::mutex> lock(mu_);
        eval(kImportRepliesScript, args);
    }

    std::optional<Program> find_program(const std::string& key) override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = eval(kFindScript, {"prog", key});
        if (r->type != REDIS_REPLY_ARRAY) return std::nullopt;
        return program_of(fields(r.get()));
    }
    std::optional<Program> get_program(int64_t id) override {
        if (id <= 0) return std::nullopt;
        std::lock_guard<std::mutex> lock(mu_);
        auto m = fields(conn_.command({"HGETALL", p_ + "prog:" + num(id)}).get());
        if (m.empty()) return std::nullopt;
        return program_of(m);
    }
    Program claim_program(Program p) override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = upsert("claim", p);
        if (r->element[0]->integer == 0) return program_of(fields(r->element[1]));
        p.id = r->element[1]->integer;
        return p;
    }
    int64_t put_program(const Program& p) override {
        std::lock_guard<std::mutex> lock(mu_);
        return upsert("put", p)->element[1]->integer;
    }
    std::vector<Program> programs() override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = eval(kAllScript, {"prog"});
        std::vector<Program> out;
        for (size_t i = 0; i < r->elements; ++i) out.push_back(program_of(fields(r->element[i])));
        std::sort(out.begin(), out.end(), [](const Program& a, const Program& b) { return a.id < b.id; });
        return out;
    }

    void commit_generation(const Generation& g, const std::vector<nlohmann::json>& islands,
                           const std::vector<Event>& events) override {
        nlohmann::json row = {{"generation", g.generation}, {"best_speedup", g.best_speedup},
                              {"best_program", g.best_program}, {"ok", g.ok}, {"failed", g.failed},
                              {"tokens", g.tokens}, {"cost_usd", g.cost_usd}, {"elapsed_s", g.elapsed_s}};
        std::vector<std::vector<std::string>> cmds{{"MULTI"}, {"DEL", p_ + "islands"}};
        if (!islands.empty()) {
            std::vector<std::string> push{"RPUSH", p_ + "islands"};
            for (const auto& s : islands) push.push_back(dumps(s));
            cmds.push_back(std::move(push));
        }
        cmds.push_back({"HSET", p_ + "generations", num(g.generation), dumps(row)});
        if (!events.empty()) {
            std::vector<std::string> push{"RPUSH", p_ + "events"};
            for (const Event& e : events)
                push.push_back(dumps({{"generation", e.generation}, {"kind", e.kind}, {"detail", e.detail}}));
            cmds.push_back(std::move(push));
        }
        cmds.push_back({"EXEC"});
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Reply> r = conn_.pipeline(cmds);
        if (r.back()->type != REDIS_REPLY_ARRAY)
            throw UsageError("Redis state store at " + conn_.where() + ": the generation commit was aborted");
    }
    int last_generation() override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = conn_.command({"HKEYS", p_ + "generations"});
        int last = -1;
        for (size_t i = 0; i < r->elements; ++i) last = std::max(last, static_cast<int>(to_i64(str(r->element[i]))));
        return last;
    }
    std::vector<nlohmann::json> islands() override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = conn_.command({"LRANGE", p_ + "islands", "0", "-1"});
        std::vector<nlohmann::json> out;
        for (size_t i = 0; i < r->elements; ++i) out.push_back(loads(str(r->element[i])));
        return out;
    }
    std::vector<Generation> history() override {
        std::lock_guard<std::mutex> lock(mu_);
        auto m = fields(conn_.command({"HGETALL", p_ + "generations"}).get());
        std::vector<Generation> out;
        for (const auto& [k, v] : m) {
            nlohmann::json j = loads(v);
            out.push_back(Generation{static_cast<int>(to_i64(k)), json_double(j, "best_speedup"),
                                     json_i64(j, "best_program"), json_i64(j, "ok"), json_i64(j, "failed"),
                                     json_i64(j, "tokens"), json_double(j, "cost_usd"), json_double(j, "elapsed_s")});
        }
        std::sort(out.begin(), out.end(), [](const Generation& a, const Generation& b) { return a.generation < b.generation; });
        return out;
    }
    std::vector<Event> events() override {
        std::lock_guard<std::mutex> lock(mu_);
        Reply r = conn_.command({"LRANGE", p_ + "events", "0", "-1"});
        std::vector<Event> out;
        for (size_t i = 0; i < r->elements; ++i) {
            nlohmann::json j = loads(str(r->element[i]));
            out.push_back(Event{static_cast<int>(json_i64(j, "generation")), j.value("kind", std::string()),
                                j.value("detail", nlohmann::json())});
        }
        return out;
    }

private:
    static double finite(double v) { return std::isfinite(v) ? v : 0; }

    Reply eval(const char* script, const std::vector<std::string>& args) {
        std::vector<std::string> cmd{"EVAL", script, "0", p_};
        cmd.insert(cmd.end(), args.begin(), args.end());
        return conn_.command(cmd);
    }

    Reply upsert(const char* mode, const Program& p) {
        Reply r = eval(kUpsertScript,
                       {mode, p.key, num(p.generation), num(p.island), num(p.parent_id), p.origin, num(p.attempt),
                        p.source, p.norm_hash, program_status_name(p.status), num(p.speedup), p.feedback,
                        p.details.is_null() ? std::string() : dumps(p.details), num(p.llm_call_id),
                        num(p.created ? p.created : now_unix())});
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
            throw UsageError("Redis state store at " + conn_.where() + ": unexpected reply to a program update");
        return r;
    }

    std::mutex mu_;
    Connection conn_;
    std::string p_, display_;
};

}  // namespace

std::unique_ptr<Store> detail::open_redis(const StoreLocation& where) { return std::make_unique<RedisStore>(where); }

bool detail::redis_exists(const StoreLocation& where) {
    Connection c(where);
    return c.command({"EXISTS", where.key_prefix() + "meta"})->integer > 0;
}

void detail::redis_remove(const StoreLocation& where) {
    Connection c(where);
    // The prefix has no glob characters (parse_store_location refuses them), and no other prefix's
    // keys can start with "{NAME}:".
    // The writer lease (writer.h) belongs to the process that runs --fresh: it stays. The meta hash,
    // which marks the prefix as a state, goes last, so that a --fresh killed halfway leaves a state.
    const std::string P = where.key_prefix();
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
        Reply r = c.command({"SCAN", cursor, "MATCH", P + "*", "COUNT", "1000"});
        cursor = str(r->element[0]);
        for (size_t i = 0; i < r->element[1]->elements; ++i) keys.push_back(str(r->element[1]->element[i]));
    } while (cursor != "0");
    const bool marked = std::find(keys.begin(), keys.end(), P + "meta") != keys.end();
    std::vector<std::string> del{"DEL"};
    for (const std::string& k : keys) {
        if (k == P + "writer" || k == P + "writer:held" || k == P + "meta") continue;
        if (!marked)  // another application's keys: never deleted
            throw UsageError("Redis state store at " + c.where() + ": the prefix " + P + " holds keys that are not a KernelEvo state (" + k +
                             ", and no " + P + "meta): they were left as they are; pass another prefix (?prefix=NAME)");
        del.push_back(k);
        if (del.size() == 1001) {
            c.command(del);
            del.resize(1);
        }
    }
    if (del.size() > 1) c.command(del);
    if (marked) c.command({"DEL", P + "meta"});
}

}  // namespace kevo::store
