// The embedded SQLite state store. One connection guarded by a mutex; WAL journal with synchronous
// commits, so every write that returned survives kill -9 (and a power cut). Multi-row updates run in
// one transaction.
#include <sqlite3.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "common/setting_error.h"
#include "store/internal/backends.h"

namespace kevo::store {
namespace {

using detail::dumps;
using detail::now_unix;

constexpr int kSchemaVersion = 1;

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS llm_calls(
  id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, request TEXT NOT NULL,
  reply TEXT NOT NULL, model TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, latency_s REAL NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS programs(
  id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, generation INTEGER NOT NULL, island INTEGER NOT NULL,
  parent_id INTEGER NOT NULL, origin TEXT NOT NULL, attempt INTEGER NOT NULL, source TEXT NOT NULL,
  norm_hash TEXT NOT NULL, status TEXT NOT NULL, speedup REAL NOT NULL, feedback TEXT NOT NULL,
  details TEXT NOT NULL, llm_call_id INTEGER NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS programs_norm_hash ON programs(norm_hash);
CREATE TABLE IF NOT EXISTS islands(island INTEGER PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS generations(
  generation INTEGER PRIMARY KEY, best_speedup REAL NOT NULL, best_program INTEGER NOT NULL,
  ok INTEGER NOT NULL, failed INTEGER NOT NULL, tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
  elapsed_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS batch_requests(
  custom_id TEXT PRIMARY KEY, key TEXT NOT NULL, batch INTEGER NOT NULL, file TEXT NOT NULL, kind TEXT NOT NULL,
  request TEXT NOT NULL, reserved_tokens INTEGER NOT NULL, reserved_cost_usd REAL NOT NULL, error TEXT NOT NULL,
  created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, generation INTEGER NOT NULL, kind TEXT NOT NULL,
  detail TEXT NOT NULL);
)sql";

// A prepared statement, finalized on scope exit.
class Stmt {
public:
    Stmt(sqlite3* db, const char* sql) : db_(db) {
        if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
            throw UsageError(std::string("state store: ") + sqlite3_errmsg(db));
    }
    ~Stmt() { sqlite3_finalize(stmt_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, const std::string& v) {
        check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
        return *this;
    }
    Stmt& bind(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); return *this; }
    Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
    Stmt& bind(int i, double v) { check(sqlite3_bind_double(stmt_, i, v)); return *this; }
    // True while a row is available.
    bool step() {
        int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw UsageError(std::string("state store: ") + sqlite3_errmsg(db_));
    }
    std::string text(int c) const {
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
        return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, c))) : std::string();
    }
    int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
    int i32(int c) const { return static_cast<int>(sqlite3_column_int64(stmt_, c)); }
    double real(int c) const { return sqlite3_column_double(stmt_, c); }
    nlohmann::json json(int c) const {
        std::string t = text(c);
        return t.empty() ? nlohmann::json() : nlohmann::json::parse(t);
    }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) throw UsageError(std::string("state store: ") + sqlite3_errmsg(db_));
    }
    sqlite3* db_;
    sqlite3_stmt* stmt_ = nullptr;
};

const char* kProgramColumns =
    "id, key, generation, island, parent_id, origin, attempt, source, norm_hash, status, speedup, feedback, "
    "details, llm_call_id, created";

Program read_program(const Stmt& s) {
    Program p;
    p.id = s.i64(0);
    p.key = s.text(1);
    p.generation = s.i32(2);
    p.island = s.i32(3);
    p.parent_id = s.i64(4);
    p.origin = s.text(5);
    p.attempt = s.i32(6);
    p.source = s.text(7);
    p.norm_hash = s.text(8);
    p.status = parse_program_status(s.text(9));
    p.speedup = s.real(10);
    p.feedback = s.text(11);
    p.details = s.json(12);
    p.llm_call_id = s.i64(13);
    p.created = s.real(14);
    return p;
}

const char* kCallColumns =
    "id, key, kind, request, reply, model, prompt_tokens, completion_tokens, cost_usd, latency_s, created";

LlmCall read_call(const Stmt& s) {
    LlmCall c;
    c.id = s.i64(0);
    c.key = s.text(1);
    c.kind = s.text(2);
    c.request = s.json(3);
    c.reply = s.text(4);
    c.model = s.text(5);
    c.prompt_tokens = s.i64(6);
    c.completion_tokens = s.i64(7);
    c.cost_usd = s.real(8);
    c.latency_s = s.real(9);
    c.created = s.real(10);
    return c;
}

// The name to open a file under read-only. With no -wal file beside it no writer has it open (a WAL
// writer always has one): read it as immutable, so that SQLite leaves no -wal/-shm files either.
std::pair<std::string, int> read_only_name(const std::string& path) {
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX;
    if (std::filesystem::exists(path + "-wal") || std::filesystem::exists(path + "-shm")) return {path, flags};
    std::string name = "file:";
    for (char c : std::filesystem::absolute(path).string()) {
        if (c == '%' || c == '?' || c == '#') {
            char esc[4];
            std::snprintf(esc, sizeof esc, "%%%02X", static_cast<unsigned char>(c));
            name += esc;
        } else {
            name += c;
        }
    }
    return {name + "?immutable=1", flags | SQLITE_OPEN_URI};
}

// Whether the existing file `path` is a KernelEvo state of this schema version, read without
// writing anything: an empty file, a damaged one, another application's database or another
// version is a UsageError naming the file and the reason, and the file stays byte for byte as it was.
std::atomic<int64_t> g_content_checks{0};

void check_existing_state(const std::string& path) {
    ++g_content_checks;
    const std::string untouched = named(" (it was left as it is; pass another {store.state})");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw UsageError(path + " is not a regular file, not a KernelEvo state" + untouched);
    if (std::filesystem::file_size(path, ec) == 0)
        throw UsageError(path + " is an empty file, not a KernelEvo state" + untouched);
    auto [name, flags] = read_only_name(path);
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
    std::unique_ptr<sqlite3, int (*)(sqlite3*)> guard(db, sqlite3_close);
    if (rc != SQLITE_OK)
        throw UsageError("cannot open the state " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_busy_timeout(db, 10000);
    auto malformed = [&](const std::string& why) {
        return UsageError(path + ": malformed database, not a usable KernelEvo state (SQLite: " + why + ")" + untouched);
    };
    // Every page read once (quick_check): a truncated or overwritten file is refused here, not halfway
    // through a run.
    std::string check;
    try {
        Stmt s(db, "PRAGMA quick_check(1)");
        if (s.step()) check = s.text(0);
    } catch (const UsageError&) {
        throw malformed(sqlite3_errmsg(db));
    }
    if (check != "ok") throw malformed(check);
    std::vector<std::string> tables;
    Stmt t(db, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name");
    while (t.step()) tables.push_back(t.text(0));
    std::string version;
    if (std::find(tables.begin(), tables.end(), "meta") != tables.end()) {
        try {
            Stmt s(db, "SELECT value FROM meta WHERE key='schema_version'");
            if (s.step()) version = s.text(0);
        } catch (const UsageError&) {
            // Another application's "meta" table, with other columns.
        }
    }
    if (version.empty()) {
        if (tables.empty()) throw UsageError(path + " is an SQLite database without tables, not a KernelEvo state" + untouched);
        std::string list;
        for (size_t i = 0; i < tables.size() && i < 8; ++i) list += (i ? ", " : "") + tables[i];
        if (tables.size() > 8) list += ", ... (" + std::to_string(tables.size()) + " in all)";
        throw UsageError(path + " is not a KernelEvo state: it has tables " + list + untouched);
    }
    if (version != std::to_string(kSchemaVersion))
        throw UsageError("the state " + path + " has schema version " + version + ", this kernelevo reads version " +
                         std::to_string(kSchemaVersion) + untouched);
    // Every state of this version has had these tables from its first write (batch_requests came
    // later and is added to older states): one missing is damage, never re-created empty.
    std::string missing;
    for (const char* name : {"events", "generations", "islands", "llm_calls", "meta", "programs"})
        if (std::find(tables.begin(), tables.end(), name) == tables.end()) missing += (missing.empty() ? "" : ", ") + std::string(name);
    if (!missing.empty())
        throw UsageError(path + " is a damaged KernelEvo state: its table(s) " + missing + " are missing" + untouched);
}

class SqliteStore : public Store {
public:
    SqliteStore(const std::string& path, Access access, bool checked) : path_(path) {
        std::error_code ec;
        const bool exists = std::filesystem::exists(path, ec) || std::filesystem::is_symlink(path, ec);
        if (exists && !checked) check_existing_state(path);  // refuses what is not a state before anything is written
        if (access == Access::read_only) {
            if (!exists) throw UsageError("no search state at " + path);
            auto [name, flags] = read_only_name(path);
            open(path, name, flags);  // no schema, no journal mode change: the file stays as it is
            return;
        }
        if (!exists) create(path);
        open(path, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX);
        try {
            exec("PRAGMA journal_mode=WAL");
            exec("PRAGMA synchronous=FULL");
            exec("BEGIN IMMEDIATE");
            exec(kSchema);  // tables a newer build of the same schema version added
            exec("COMMIT");
        } catch (const UsageError&) {
            sqlite3_close(db_);
            throw;
        }
    }
    ~SqliteStore() override { sqlite3_close(db_); }

    std::optional<nlohmann::json> get_meta(const std::string& key) override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, "SELECT value FROM meta WHERE key=?");
        s.bind(1, key);
        if (!s.step()) return std::nullopt;
        return detail::meta_json(s.text(0), key, path_);
    }
    void put_meta(const std::string& key, const nlohmann::json& value) override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)").bind(1, key).bind(2, dumps(value)).step();
    }

    std::optional<LlmCall> find_llm_call(const std::string& key) override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, (std::string("SELECT ") + kCallColumns + " FROM llm_calls WHERE key=?").c_str());
        s.bind(1, key);
        if (!s.step()) return std::nullopt;
        return read_call(s);
    }
    std::vector<LlmCall> llm_calls() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, (std::string("SELECT ") + kCallColumns + " FROM llm_calls ORDER BY id").c_str());
        std::vector<LlmCall> out;
        while (s.step()) out.push_back(read_call(s));
        return out;
    }
    int64_t add_llm_call(const LlmCall& c, bool* inserted = nullptr) override {
        std::lock_guard<std::mutex> lock(mu_);
        const bool ours = insert_call(c);
        if (inserted) *inserted = ours;
        if (ours) return sqlite3_last_insert_rowid(db_);
        Stmt s(db_, "SELECT id FROM llm_calls WHERE key=?");  // stored first by another writer: that one stands
        s.bind(1, c.key);
        s.step();
        return s.i64(0);
    }
    // Inserts the call unless a call with its key is stored already; whether it did. (mu_ held)
    bool insert_call(const LlmCall& c) {
        Stmt(db_,
             "INSERT INTO llm_calls(key, kind, request, reply, model, prompt_tokens, completion_tokens, cost_usd, "
             "latency_s, created) VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key) DO NOTHING")
            .bind(1, c.key)
            .bind(2, c.kind)
            .bind(3, dumps(c.request))
            .bind(4, c.reply)
            .bind(5, c.model)
            .bind(6, c.prompt_tokens)
            .bind(7, c.completion_tokens)
            .bind(8, c.cost_usd)
            .bind(9, c.latency_s)
            .bind(10, c.created ? c.created : now_unix())
            .step();
        return sqlite3_changes(db_) == 1;
    }
    Spent spent() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_,
               "SELECT COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0), COUNT(*), "
               "COALESCE(SUM(cost_usd),0) FROM llm_calls");
        s.step();
        return Spent{s.i64(0), s.i64(1), s.i64(2), s.real(3)};
    }

    void add_batch(const std::vector<BatchRequest>& requests) override {
        std::lock_guard<std::mutex> lock(mu_);
        Transaction tx(*this);
        for (const BatchRequest& b : requests)
            Stmt(db_,
                 "INSERT INTO batch_requests(custom_id, key, batch, file, kind, request, reserved_tokens, "
                 "reserved_cost_usd, error, created) VALUES(?,?,?,?,?,?,?,?,?,?)")
                .bind(1, b.custom_id)
                .bind(2, b.key)
                .bind(3, b.batch)
                .bind(4, b.file)
                .bind(5, b.kind)
                .bind(6, dumps(b.request))
                .bind(7, b.reserved_tokens)
                .bind(8, b.reserved_cost_usd)
                .bind(9, b.error)
                .bind(10, b.created ? b.created : now_unix())
                .step();
        tx.commit();
    }
    std::vector<BatchRequest> batch_requests() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_,
               "SELECT custom_id, key, batch, file, kind, request, reserved_tokens, reserved_cost_usd, error, created "
               "FROM batch_requests ORDER BY batch, custom_id");
        std::vector<BatchRequest> out;
        while (s.step())
            out.push_back(BatchRequest{s.text(0), s.text(1), s.i32(2), s.text(3), s.text(4), s.json(5), s.i64(6),
                                       s.real(7), s.text(8), s.real(9)});
        return out;
    }
    void fail_batch_request(const std::string& custom_id, const std::string& error) override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt(db_, "UPDATE batch_requests SET error=? WHERE custom_id=?").bind(1, error).bind(2, custom_id).step();
    }
    void import_batch_replies(const std::vector<LlmCall>& calls,
                              const std::vector<std::pair<std::string, std::string>>& failed) override {
        std::lock_guard<std::mutex> lock(mu_);
        Transaction tx(*this);
        for (const LlmCall& c : calls)  // a key stored already (or twice here): the transaction rolls back
            if (!insert_call(c)) throw UsageError("an LLM call with the key " + c.key + " is stored already");
        for (const auto& [custom_id, error] : failed)
            Stmt(db_, "UPDATE batch_requests SET error=? WHERE custom_id=?").bind(1, error).bind(2, custom_id).step();
        tx.commit();
    }

    std::optional<Program> find_program(const std::string& key) override {
        std::lock_guard<std::mutex> lock(mu_);
        return select_program("key=?", [&](Stmt& s) { s.bind(1, key); });
    }
    std::optional<Program> get_program(int64_t id) override {
        std::lock_guard<std::mutex> lock(mu_);
        return select_program("id=?", [&](Stmt& s) { s.bind(1, id); });
    }
    Program claim_program(Program p) override {
        std::lock_guard<std::mutex> lock(mu_);
        Transaction tx(*this);
        if (auto dup = select_program("norm_hash=? AND key<>? AND status<>? ORDER BY id LIMIT 1", [&](Stmt& s) {
                s.bind(1, p.norm_hash).bind(2, p.key).bind(3, program_status_name(ProgramStatus::duplicate));
            })) {
            tx.commit();
            return *dup;
        }
        p.id = upsert(p);
        tx.commit();
        return p;
    }
    int64_t put_program(const Program& p) override {
        std::lock_guard<std::mutex> lock(mu_);
        return upsert(p);
    }
    std::vector<Program> programs() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, (std::string("SELECT ") + kProgramColumns + " FROM programs ORDER BY id").c_str());
        std::vector<Program> out;
        while (s.step()) out.push_back(read_program(s));
        return out;
    }

    void commit_generation(const Generation& g, const std::vector<nlohmann::json>& islands,
                           const std::vector<Event>& events) override {
        std::lock_guard<std::mutex> lock(mu_);
        Transaction tx(*this);
        exec("DELETE FROM islands");
        for (size_t i = 0; i < islands.size(); ++i)
            Stmt(db_, "INSERT INTO islands(island, state) VALUES(?, ?)")
                .bind(1, static_cast<int64_t>(i))
                .bind(2, dumps(islands[i]))
                .step();
        Stmt(db_,
             "INSERT OR REPLACE INTO generations(generation, best_speedup, best_program, ok, failed, tokens, "
             "cost_usd, elapsed_s) VALUES(?,?,?,?,?,?,?,?)")
            .bind(1, g.generation)
            .bind(2, g.best_speedup)
            .bind(3, g.best_program)
            .bind(4, g.ok)
            .bind(5, g.failed)
            .bind(6, g.tokens)
            .bind(7, g.cost_usd)
            .bind(8, g.elapsed_s)
            .step();
        for (const Event& e : events)
            Stmt(db_, "INSERT INTO events(generation, kind, detail) VALUES(?,?,?)")
                .bind(1, e.generation)
                .bind(2, e.kind)
                .bind(3, dumps(e.detail))
                .step();
        tx.commit();
    }
    int last_generation() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, "SELECT COALESCE(MAX(generation), -1) FROM generations");
        s.step();
        return s.i32(0);
    }
    std::vector<nlohmann::json> islands() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, "SELECT state FROM islands ORDER BY island");
        std::vector<nlohmann::json> out;
        while (s.step()) out.push_back(s.json(0));
        return out;
    }
    std::vector<Generation> history() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_,
               "SELECT generation, best_speedup, best_program, ok, failed, tokens, cost_usd, elapsed_s FROM "
               "generations ORDER BY generation");
        std::vector<Generation> out;
        while (s.step())
            out.push_back(Generation{s.i32(0), s.real(1), s.i64(2), s.i64(3), s.i64(4), s.i64(5), s.real(6), s.real(7)});
        return out;
    }
    std::vector<Event> events() override {
        std::lock_guard<std::mutex> lock(mu_);
        Stmt s(db_, "SELECT generation, kind, detail FROM events ORDER BY id");
        std::vector<Event> out;
        while (s.step()) out.push_back(Event{s.i32(0), s.text(1), s.json(2)});
        return out;
    }

private:
    void open(const std::string& path, const std::string& name, int flags) {
        if (sqlite3_open_v2(name.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
            std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
            sqlite3_close(db_);
            throw UsageError("cannot open the state store " + path + ": " + msg);
        }
        sqlite3_busy_timeout(db_, 10000);
    }

    // A new state appears whole or not at all: built beside the path under a temporary name, then
    // linked into place (never over a file that appeared meanwhile). A search killed while creating
    // it leaves no half-made (empty) state that the next run would refuse as foreign.
    void create(const std::string& path) {
        const std::string tmp = path + ".new-" + std::to_string(::getpid());
        std::filesystem::remove(tmp);
        open(path, tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX);
        try {
            exec("BEGIN IMMEDIATE");
            exec(kSchema);
            Stmt(db_, "INSERT INTO meta(key, value) VALUES('schema_version', ?)")
                .bind(1, std::to_string(kSchemaVersion))
                .step();
            exec("COMMIT");
        } catch (const UsageError&) {
            sqlite3_close(db_);
            std::filesystem::remove(tmp);
            throw;
        }
        sqlite3_close(db_);
        db_ = nullptr;
        const int linked = ::link(tmp.c_str(), path.c_str()), err = errno;
        std::filesystem::remove(tmp);
        if (linked != 0 && err != EEXIST)
            throw UsageError("cannot create the state store " + path + ": " + std::strerror(err));
        if (linked != 0) check_existing_state(path);  // another process created it first: use it if it is a state
    }

    // BEGIN IMMEDIATE ... COMMIT, rolled back when the scope is left without commit().
    class Transaction {
    public:
        explicit Transaction(SqliteStore& s) : s_(s) { s_.exec("BEGIN IMMEDIATE"); }
        ~Transaction() {
            if (!done_) sqlite3_exec(s_.db_, "ROLLBACK", nullptr, nullptr, nullptr);
        }
        void commit() {
            s_.exec("COMMIT");
            done_ = true;
        }

    private:
        SqliteStore& s_;
        bool done_ = false;
    };

    void exec(const char* sql) {
        char* err = nullptr;
        if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
            std::string msg = err ? err : "unknown error";
            sqlite3_free(err);
            throw UsageError("state store: " + msg);
        }
    }

    template <class Bind>
    std::optional<Program> select_program(const std::string& where, Bind bind) {
        Stmt s(db_, (std::string("SELECT ") + kProgramColumns + " FROM programs WHERE " + where).c_str());
        bind(s);
        if (!s.step()) return std::nullopt;
        return read_program(s);
    }

    int64_t upsert(const Program& p) {
        Stmt(db_,
             "INSERT INTO programs(key, generation, island, parent_id, origin, attempt, source, norm_hash, status, "
             "speedup, feedback, details, llm_call_id, created) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
             "ON CONFLICT(key) DO UPDATE SET generation=excluded.generation, island=excluded.island, "
             "parent_id=excluded.parent_id, origin=excluded.origin, attempt=excluded.attempt, source=excluded.source, "
             "norm_hash=excluded.norm_hash, status=excluded.status, speedup=excluded.speedup, "
             "feedback=excluded.feedback, details=excluded.details, llm_call_id=excluded.llm_call_id")
            .bind(1, p.key)
            .bind(2, p.generation)
            .bind(3, p.island)
            .bind(4, p.parent_id)
            .bind(5, p.origin)
            .bind(6, p.attempt)
            .bind(7, p.source)
            .bind(8, p.norm_hash)
            .bind(9, program_status_name(p.status))
            .bind(10, p.speedup)
            .bind(11, p.feedback)
            .bind(12, p.details.is_null() ? std::string() : dumps(p.details))
            .bind(13, p.llm_call_id)
            .bind(14, p.created ? p.created : now_unix())
            .step();
        Stmt s(db_, "SELECT id FROM programs WHERE key=?");
        s.bind(1, p.key);
        s.step();
        return s.i64(0);
    }

    std::string path_;
    std::mutex mu_;
    sqlite3* db_ = nullptr;
};

}  // namespace

std::unique_ptr<Store> detail::open_sqlite(const std::string& path, Access access, bool checked) {
    return std::make_unique<SqliteStore>(path, access, checked);
}

void detail::check_sqlite_state(const std::string& path) { check_existing_state(path); }

std::string detail::sqlite_identity(const std::string& path) {
    std::string id;
    for (const std::string& f : {path, path + "-wal"}) {
        struct stat st {};
        if (::stat(f.c_str(), &st) != 0) {
            id += "-;";
            continue;
        }
        id += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
              std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ";";
    }
    return id;
}

int64_t state_content_checks() { return g_content_checks.load(); }

}  // namespace kevo::store
