// Internal: the backends behind open_store() (store.cpp), and helpers they share.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "common/error.h"
#include "common/text.h"
#include "store/store.h"

namespace kevo::store::detail {

// `checked`: the file's content was checked (check_state()) and it is still the same file.
std::unique_ptr<Store> open_sqlite(const std::string& path, Access access, bool checked = false);
// sqlite_store.cpp: the content check open_sqlite() does (counted), and a file's identity (with its WAL).
void check_sqlite_state(const std::string& path);
std::string sqlite_identity(const std::string& path);

// writer.cpp: when this process holds the writer lease of the SQLite state at `path` (any name of
// it), locks the state file itself too if that lease has not locked this file yet (a file made or
// replaced since the lease was taken). Throws UsageError when another name of the file is leased.
void bind_writer(const std::string& path);

// redis_store.cpp; only when built with hiredis (KEVO_HAVE_REDIS).
std::unique_ptr<Store> open_redis(const StoreLocation& where);
bool redis_exists(const StoreLocation& where);
void redis_remove(const StoreLocation& where);

// Compiler logs and replies may hold invalid UTF-8; replace it rather than fail the write.
inline std::string dumps(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
inline nlohmann::json loads(const std::string& text) {
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
}
// A metadata value as stored (JSON text): one that is not JSON (a raw control character, a cut
// file) is a damaged state, said in a UsageError naming the state and the key, never an internal error.
inline nlohmann::json meta_json(const std::string& text, const std::string& key, const std::string& state) {
    try {
        return loads(text);
    } catch (const nlohmann::json::exception& e) {
        throw UsageError(printable(state) + " is a damaged KernelEvo state: its metadata '" + printable(key) +
                         "' is not valid JSON (" + printable(e.what()) + ")");
    }
}
inline double now_unix() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kevo::store::detail
