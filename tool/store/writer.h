// One writer per state: the lease a search holds on its state for as long as it runs, so that a
// second search on the same state is refused at once (before any LLM request, with who holds it)
// instead of sending the same requests again and racing on the same records.
//
//   SQLite: an exclusive POSIX record lock (fcntl) on the file STATE.lock beside the state, which
//           holds one JSON line about the holder. The kernel drops the lock when the holder's
//           process ends however it ends (kill -9 included), so a dead holder never blocks anyone;
//           the lock is not inherited by child processes (compilers, the sandbox). A state is its
//           real file, not the name given: STATE.lock is beside the file a symbolic link points to
//           (said through `log`), and the lease also locks one byte of the state file itself, far
//           past SQLite's (an open-file-description lock), so that a second search through a hard
//           link is refused too. A state that does not exist yet is locked by open_store() once it
//           is made (and again after --fresh replaced it). Close the store before the lease ends.
//   Redis:  the key "{NAME}:writer" (SET NX PX), renewed every ttl/4 by a thread and deleted on a
//           clean exit; a holder that died or stalled longer than the ttl has lost it. Its twin
//           "{NAME}:writer:held" (no expiry) tells a successor that the last holder never released it.
//           A holder on the same machine (same boot, same pid namespace) whose pid is gone is taken
//           over at once, without waiting for its lease to expire.
//
// A holder that ended without releasing (killed, crashed, lease expired) is taken over with one
// line through `log`. Readers (report, serve) take no lease: they never write.
#pragma once
#include <functional>
#include <memory>
#include <string>

namespace kevo::store {

struct WriterOptions {
    std::string what = "kernelevo search";     // who holds it, in messages ("kernelevo bench")
    std::string command;                       // its command line (redacted), kept in the lease record
    std::string workers;                       // --workers queue (display form, no password): how to join
    double redis_ttl_s = 20;                   // Redis: how long a holder that stopped renewing keeps it
    std::function<void(const std::string&)> log;  // the take-over line
    // Redis: called (from the renewal thread) when another process took the lease over while this
    // one still runs (it stalled past the ttl). Default: print why and exit with code 2 at once, so
    // that two writers never run on.
    std::function<void(const std::string&)> on_lost;
};

// Held for the life of the object; released (and, for Redis, no longer renewed) on destruction.
class WriterLease {
public:
    virtual ~WriterLease() = default;
};

// Takes the writer lease of the state at `location` (a --state argument). Throws UsageError when
// another process holds it, naming the state, the holder (pid, host, since when; for Redis when its
// lease expires) and what to do (wait; or join its run as a worker); nothing is written then.
std::unique_ptr<WriterLease> acquire_writer(const std::string& location, const WriterOptions& options = {});

// The SQLite lock file of the state file `path`: PATH.lock.
std::string writer_lock_path(const std::string& path);

}  // namespace kevo::store
