//===- HttpEcho.cpp - test server for the HTTP layer of xfmr-serve --------===//
//
// Part of xfmr.
//
//   xfmr-http-echo [--host H] [--port P] [--io-threads N] [--max-body-bytes B]
//                  [--max-header-bytes B] [--max-connections C]
//                  [--max-queued-bytes B] [--idle-timeout S] [--drain-ms MS]
//
// Serves scripts/check-http.py (test/Serve/http.test), not users:
//   GET /stream?n=N&ms=M  N server-sent events M ms apart, then
//                         "data: [DONE]"; written from one pump thread, as
//                         the engine thread of xfmr-serve would.
//   GET /stats            {"cancelled": K, "connections": C, "completed": D}
//   anything else         the request echoed as JSON.
// Prints "listening on HOST:PORT" once bound. SIGTERM or SIGINT stop
// accepting, let open streams finish (at most --drain-ms, 5000 by default),
// then stop the server;
// it prints "cancelled streams: K" (streams whose client left) and exits 0.
//
//===----------------------------------------------------------------------===//

#include "HttpServer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <queue>
#include <sys/resource.h>
#include <thread>

using namespace xfmr::serve;
using Clock = std::chrono::steady_clock;

namespace {

/// Streams in progress and how they ended.
std::atomic<int64_t> cancelledStreams{0};
std::atomic<int64_t> completedStreams{0};

/// One server-sent event stream: `total` events `interval` apart.
struct Stream {
  std::shared_ptr<Response> response;
  int sent = 0;
  int total = 0;
  std::chrono::milliseconds interval{0};
};

/// Writes every stream's events from one thread, earliest due first.
class EventPump {
public:
  EventPump() : thread([this] { loop(); }) {}
  ~EventPump() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_one();
    thread.join();
  }
  void add(Stream stream) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      due.push({Clock::now(), std::make_shared<Stream>(std::move(stream))});
    }
    wake.notify_one();
  }

private:
  struct Entry {
    Clock::time_point when;
    std::shared_ptr<Stream> stream;
    bool operator<(const Entry &other) const { return when > other.when; }
  };

  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      if (due.empty()) {
        wake.wait(lock);
        continue;
      }
      // A copy: add() may move the heap while this waits.
      Clock::time_point next = due.top().when;
      if (Clock::now() < next) {
        wake.wait_until(lock, next);
        continue;
      }
      Entry entry = due.top();
      due.pop();
      lock.unlock();
      bool more = step(*entry.stream);
      lock.lock();
      if (more)
        due.push({entry.when + entry.stream->interval, entry.stream});
    }
  }

  /// Sends the next event; false once the stream ended or its client left.
  static bool step(Stream &stream) {
    if (stream.sent == stream.total) {
      if (stream.response->send("data: [DONE]\n\n")) {
        stream.response->end();
        ++completedStreams;
      }
      return false;
    }
    std::string event =
        "data: {\"i\": " + std::to_string(stream.sent++) + "}\n\n";
    return stream.response->send(std::move(event));
  }

  std::mutex mutex;
  std::condition_variable wake;
  std::priority_queue<Entry> due;
  bool stopping = false;
  std::thread thread;
};

/// The value of `key` in a query string "a=1&b=2", or `otherwise`.
long queryNumber(const std::string &query, const std::string &key,
                 long otherwise) {
  size_t at = 0;
  while (at <= query.size()) {
    size_t next = query.find('&', at);
    std::string pair = query.substr(
        at, next == std::string::npos ? std::string::npos : next - at);
    if (pair.compare(0, key.size() + 1, key + "=") == 0)
      return std::strtol(pair.c_str() + key.size() + 1, nullptr, 10);
    if (next == std::string::npos)
      break;
    at = next + 1;
  }
  return otherwise;
}

std::string dumpJson(const nlohmann::json &value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void handle(HttpServer *&server, EventPump &pump, HttpRequest request,
            std::shared_ptr<Response> response) {
  if (request.target == "/stream") {
    Stream stream;
    stream.total = int(std::max(0L, queryNumber(request.query, "n", 10)));
    stream.interval = std::chrono::milliseconds(
        std::max(0L, queryNumber(request.query, "ms", 10)));
    stream.response = response;
    response->onClose([] { ++cancelledStreams; });
    response->startEvents();
    pump.add(std::move(stream));
    return;
  }
  if (request.target == "/stats") {
    nlohmann::json stats = {
        {"cancelled", cancelledStreams.load()},
        {"completed", completedStreams.load()},
        {"connections", server ? server->connections() : 0}};
    response->respond(200, "application/json", dumpJson(stats));
    return;
  }
  nlohmann::json headers = nlohmann::json::array();
  for (const auto &[name, value] : request.headers)
    headers.push_back({name, value});
  nlohmann::json echo = {
      {"method", request.method}, {"target", request.target},
      {"query", request.query},   {"headers", headers},
      {"body", request.body},     {"remote", request.remote}};
  response->respond(200, "application/json", dumpJson(echo));
}

/// Stops `server` on SIGTERM/SIGINT (blocked in every thread, taken here).
void waitForSignal(HttpServer &server, sigset_t signals, long drainMs) {
  int signal = 0;
  sigwait(&signals, &signal);
  server.stopAccepting();
  Clock::time_point giveUp = Clock::now() + std::chrono::milliseconds(drainMs);
  while (server.connections() > 0 && Clock::now() < giveUp)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server.stop();
}

/// Allows as many open sockets as the hard limit does.
void raiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

bool parseOptions(int argc, char **argv, HttpServerOptions &options,
                  long &drainMs) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "xfmr-http-echo: %s needs a value\n", flag.c_str());
      return false;
    }
    const char *value = argv[++i];
    if (flag == "--host")
      options.host = value;
    else if (flag == "--port")
      options.port = std::atoi(value);
    else if (flag == "--io-threads")
      options.ioThreads = std::atoi(value);
    else if (flag == "--max-body-bytes")
      options.maxBodyBytes = std::strtoull(value, nullptr, 10);
    else if (flag == "--max-header-bytes")
      options.maxHeaderBytes = uint32_t(std::strtoul(value, nullptr, 10));
    else if (flag == "--max-queued-bytes")
      options.maxQueuedBytes = std::strtoull(value, nullptr, 10);
    else if (flag == "--max-connections")
      options.maxConnections = std::atoll(value);
    else if (flag == "--idle-timeout")
      options.idleTimeoutSeconds = std::atoi(value);
    else if (flag == "--drain-ms")
      drainMs = std::atol(value);
    else {
      std::fprintf(stderr, "xfmr-http-echo: unknown option %s\n", flag.c_str());
      return false;
    }
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  HttpServerOptions options;
  options.port = 0;
  long drainMs = 5000;
  if (!parseOptions(argc, argv, options, drainMs))
    return 2;
  raiseFileLimit();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  HttpServer *server = nullptr;
  EventPump pump;
  auto listening = HttpServer::listen(
      options, [&server, &pump](HttpRequest request,
                                std::shared_ptr<Response> response) {
        handle(server, pump, std::move(request), std::move(response));
      });
  if (!listening) {
    std::fprintf(stderr, "xfmr-http-echo: %s\n", listening.error().c_str());
    return 1;
  }
  server = listening->get();
  std::printf("listening on %s:%d\n", options.host.c_str(), server->port());
  std::fflush(stdout);
  std::thread signalThread(waitForSignal, std::ref(*server), signals, drainMs);
  server->run();
  signalThread.join();
  std::printf("cancelled streams: %lld\n", (long long)cancelledStreams.load());
  return 0;
}
