//===- HttpServer.h - asynchronous HTTP/1.1 server --------------*- C++ -*-===//
//
// Part of xfmr.
//
// A small HTTP/1.1 server on Boost.Beast/Asio: a fixed number of I/O
// threads run every connection asynchronously, so thousands of open
// streams cost memory, not threads. The handler is called on an I/O thread
// with the whole request (body read, size checked) and must not block: it
// answers through a Response, which any thread may use later (the engine
// thread streams server-sent events through it).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SERVE_HTTPSERVER_H
#define XFMR_SERVE_HTTPSERVER_H

#include "xfmr/runtime/Error.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xfmr::serve {

struct HttpRequest {
  std::string method; ///< "GET", "POST", ...
  std::string target; ///< the path, query string stripped
  std::string query;  ///< after '?', if any
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote; ///< "address:port" of the client
  /// The value of header `name` (case-insensitive), "" if absent.
  std::string header(const std::string &name) const;
};

/// The answer to one request. Thread-safe: respond()/startEvents()/send()/
/// end() may be called from any thread, in that order, at most one of
/// respond() and startEvents(); calls out of order are ignored. Writes are
/// queued and never block the caller. A Response dropped unanswered answers
/// 500 (or ends its event stream), so the connection is not left hanging.
class Response {
public:
  virtual ~Response() = default;
  /// A complete response with Content-Length.
  virtual void
  respond(int status, const std::string &contentType, std::string body,
          std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  /// Starts a `text/event-stream` response (chunked transfer encoding,
  /// Cache-Control: no-cache); events follow with send().
  virtual void startEvents(
      int status = 200,
      std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  /// Queues bytes of the event stream (already formatted, e.g.
  /// "data: {...}\n\n"). False once the client is gone.
  virtual bool send(std::string data) = 0;
  /// Ends the event stream (the final zero-length chunk).
  virtual void end() = 0;
  /// Whether the client has disconnected (or the connection failed).
  virtual bool closed() const = 0;
  /// Called once, on an I/O thread, when the client disconnects before the
  /// response ended (a cancelled stream; also when stop() cuts it). Set it
  /// before startEvents(); set later, after the client is gone, it runs at
  /// once on the calling thread, so a cancellation is never missed.
  virtual void onClose(std::function<void()> callback) = 0;
};

using Handler = std::function<void(HttpRequest, std::shared_ptr<Response>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000; ///< 0: any free port (see HttpServer::port())
  int ioThreads = 2;
  /// Larger bodies get 413 without reading them.
  uint64_t maxBodyBytes = uint64_t(4) << 20;
  /// Connections beyond this get 503 and are closed.
  int64_t maxConnections = 4096;
  /// A connection with no request in progress is closed after this; so is
  /// one whose write makes no progress for as long (a client not reading).
  int idleTimeoutSeconds = 60;
  /// Larger request headers get 431.
  uint32_t maxHeaderBytes = 16 << 10;
  /// A connection whose unsent response bytes exceed this is closed (a
  /// client that reads slower than the stream is written).
  uint64_t maxQueuedBytes = uint64_t(16) << 20;
};

/// An OpenAI-shaped error body: {"error": {"message": ..., "type": ...,
/// "param": null, "code": null}}; the server's own 400/413/431/503 use it.
std::string errorJson(const std::string &message,
                      const std::string &type = "invalid_request_error");

class HttpServer {
public:
  /// Binds and listens (errors name host:port and the system's reason).
  static rt::Expected<std::unique_ptr<HttpServer>>
  listen(HttpServerOptions options, Handler handler);
  virtual ~HttpServer() = default;
  /// The port bound (for port 0).
  virtual int port() const = 0;
  /// Runs the I/O threads; returns after stop() once they finished.
  virtual void run() = 0;
  /// Stops accepting; closes idle connections; open responses may finish
  /// until drain() is called. Safe from any thread and from a signal
  /// handler's helper thread.
  virtual void stopAccepting() = 0;
  /// Closes every connection and makes run() return.
  virtual void stop() = 0;
  /// Open connections now.
  virtual int64_t connections() const = 0;
};

} // namespace xfmr::serve

#endif // XFMR_SERVE_HTTPSERVER_H
