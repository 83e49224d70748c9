// The connection limits of `kernelevo serve`'s web server, on top of cpp-httplib 0.11.
//
// Debian ships cpp-httplib compiled (libcpp-httplib.so): its connection loop reads a request line
// or header of any length into memory, waits 5 s for each byte with no limit on the whole
// request, reads any request body a handler did not refuse, runs on a pool of 8 threads and binds
// with SO_REUSEPORT (a second server on the port shares it). The macros that tune these are
// compiled in and cannot be changed from here, so GuardedServer replaces the per-connection loop
// (process_and_close_socket, a virtual of httplib::Server) with one that reads through a stream
// with a byte budget and deadlines, and sets its own pool and socket options. httplib still
// parses the requests and writes the replies.
#pragma once
#include <httplib.h>

#include <cstddef>

namespace kevo::serve {

struct HttpLimits {
    double idle_s = 5;                 // a connection that sends nothing for this long is closed
    double request_s = 5;              // a request's line and headers must all arrive within this time
    double reply_s = 30;               // a reply must be taken by the client within this time
    size_t request_bytes = 64 << 10;   // bytes read for one request (line, headers; bodies are refused)
    size_t requests_per_connection = 100;
    size_t workers = 128;              // connections served at once (each slow one is dropped in time)
};

class GuardedServer : public httplib::Server {
public:
    explicit GuardedServer(HttpLimits limits = {});
    // From a handler: close this request's connection once its reply is written, without reading
    // what the client sends after it (a refused body).
    static void close_after_reply();

private:
    bool process_and_close_socket(socket_t sock) override;
    HttpLimits limits_;
};

}  // namespace kevo::serve
