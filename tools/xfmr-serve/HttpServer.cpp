//===- HttpServer.cpp - asynchronous HTTP/1.1 server on Boost.Beast -------===//
//
// Part of xfmr.
//
// One io_context runs on `ioThreads` threads. Each connection is a Session
// whose handlers all run on its own strand, so its state needs no lock: the
// threads that answer through a Response post to that strand and never touch
// the Session directly.
//
// A Session alternates between reading a request (Beast's parser with the
// header and body limits, under the idle deadline) and answering it. While it
// answers it keeps a read pending on the socket: bytes that arrive (a
// pipelined request) are kept for the next request, and end-of-stream or a
// reset means the client left, which cancels the response
// (Response::onClose) even while nothing is being written. Requests are
// answered one at a time, in order.
//
// Responses are written as raw HTTP/1.1 (status line, headers, then a
// Content-Length body or chunks) through one queue per Session with one
// async_write at a time. A connection is closed gracefully after its last
// response (shutdown of the sending side, then unread input is discarded
// for a moment) so that a 413 or 503 reaches a client still sending.
//
// Lifetime: Sessions hold the Core (io_context, options, handler) and
// Responses hold their Session, so a Response outlives its connection and
// the server. A closed Session refuses further posts under a lock, which is
// what makes send() a no-op there and lets run() return once every Session
// is closed.
//
// Asio may throw (std::bad_alloc, thread creation); every operation uses the
// error_code overloads and the I/O threads catch at their entry, so nothing
// escapes to the users of this file, built with -fno-exceptions.
//
//===----------------------------------------------------------------------===//

#include "HttpServer.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <strings.h>
#include <thread>
#include <unordered_map>

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

using namespace xfmr;
using namespace xfmr::serve;

namespace {

using Clock = std::chrono::steady_clock;
using Strand = net::strand<net::io_context::executor_type>;
using Socket = tcp::socket::rebind_executor<Strand>::other;
using Timer = net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Strand>;

/// Bytes asked of the socket per read while a response is in progress.
constexpr size_t kWatchReadBytes = 1024;
/// Pipelined input kept while answering; beyond it the socket is not read
/// until the answer is done (and a disconnect is noticed on the next write).
constexpr size_t kMaxPipelinedBytes = 64 << 10;
/// How long a closing connection discards unread input before closing.
constexpr std::chrono::seconds kLingerTime(2);
/// A read buffer larger than this is released between requests.
constexpr size_t kKeptBufferBytes = 64 << 10;

class Session;
class ResponseImpl;

//===----------------------------------------------------------------------===//
// Formatting
//===----------------------------------------------------------------------===//

/// Appends `text` as the contents of a JSON string.
void appendJsonEscaped(std::string &out, const std::string &text) {
  static const char hex[] = "0123456789abcdef";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
}

/// Header names the server sets itself: the handler's are dropped.
bool isFramingHeader(const std::string &name) {
  return !strcasecmp(name.c_str(), "content-length") ||
         !strcasecmp(name.c_str(), "transfer-encoding") ||
         !strcasecmp(name.c_str(), "connection");
}

bool hasHeader(const std::vector<std::pair<std::string, std::string>> &headers,
               const char *name) {
  for (const auto &[key, value] : headers)
    if (!strcasecmp(key.c_str(), name))
      return true;
  return false;
}

/// What a response says about its framing and the connection.
struct Framing {
  enum class Body { Length, Chunked, UntilClose } body = Body::Length;
  uint64_t contentLength = 0;
  bool keepAlive = true;
  unsigned version = 11;
};

/// The status line and headers of a response, ending with the empty line.
/// Handler headers with CR or LF (header injection) are dropped.
std::string
formatHead(int status,
           const std::vector<std::pair<std::string, std::string>> &headers,
           const Framing &framing) {
  if (status < 100 || status > 999)
    status = 500;
  std::string head = "HTTP/1.1 " + std::to_string(status) + " ";
  head +=
      std::string(http::obsolete_reason(http::int_to_status(unsigned(status))));
  head += "\r\n";
  for (const auto &[name, value] : headers) {
    if (name.empty() || isFramingHeader(name) ||
        name.find_first_of("\r\n:") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos)
      continue;
    head += name + ": " + value + "\r\n";
  }
  if (framing.body == Framing::Body::Chunked)
    head += "Transfer-Encoding: chunked\r\n";
  else if (framing.body == Framing::Body::Length && status >= 200 &&
           status != 204 && status != 304)
    head += "Content-Length: " + std::to_string(framing.contentLength) + "\r\n";
  if (!framing.keepAlive)
    head += "Connection: close\r\n";
  else if (framing.version < 11)
    head += "Connection: keep-alive\r\n";
  head += "\r\n";
  return head;
}

/// One chunk of a chunked body.
std::string formatChunk(const std::string &data) {
  char size[24];
  int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string chunk;
  chunk.reserve(size_t(n) + data.size() + 2);
  chunk.append(size, size_t(n));
  chunk += data;
  chunk += "\r\n";
  return chunk;
}

//===----------------------------------------------------------------------===//
// Core: what the server and its sessions share
//===----------------------------------------------------------------------===//

/// The io_context, options, handler and listening socket, and the registry
/// of open sessions that stop() and stopAccepting() walk.
class Core : public std::enable_shared_from_this<Core> {
public:
  Core(HttpServerOptions options, Handler handler)
      : options(std::move(options)), handler(std::move(handler)),
        ioc(std::max(1, this->options.ioThreads)), work(ioc.get_executor()),
        acceptorStrand(net::make_strand(ioc)), acceptor(acceptorStrand),
        acceptRetry(acceptorStrand) {}

  rt::Status bind();
  void startAccepting() {
    net::post(acceptorStrand, [self = shared_from_this()] { self->accept(); });
  }
  void stopAccepting();
  void stop();

  /// Registers a new session; false once stop() was called.
  bool add(uint64_t id, const std::shared_ptr<Session> &session);
  void remove(uint64_t id);
  bool isAccepting() const { return accepting.load(); }
  int64_t connections() const { return open.load(); }
  int port() const { return boundPort; }

  const HttpServerOptions options;
  const Handler handler;
  net::io_context ioc;

private:
  void accept();
  void onAccept(error_code ec, Socket socket);
  void closeAcceptor();
  std::vector<std::shared_ptr<Session>> takeSessions(bool stopping);

  net::executor_work_guard<net::io_context::executor_type> work;
  Strand acceptorStrand;
  tcp::acceptor acceptor;
  net::steady_timer acceptRetry;
  int boundPort = 0;
  uint64_t nextId = 0; // on acceptorStrand

  std::atomic<bool> accepting{true};
  std::atomic<int64_t> open{0};
  std::mutex sessionsMutex;
  bool stopped = false; // guarded by sessionsMutex
  std::unordered_map<uint64_t, std::weak_ptr<Session>> sessions;
};

//===----------------------------------------------------------------------===//
// Session: one connection
//===----------------------------------------------------------------------===//

class Session : public std::enable_shared_from_this<Session> {
public:
  Session(std::shared_ptr<Core> core, Socket socket, uint64_t id)
      : core(std::move(core)), id(id), strand(socket.get_executor()),
        socket(std::move(socket)), timer(strand) {}

  const Strand &executor() const { return strand; }
  /// Starts reading requests (on the strand).
  void start();
  /// Answers 503 and closes (on the strand): too many connections.
  void reject();
  /// Closes now, cancelling a response in progress (on the strand).
  void close();
  /// Closes if no request is in progress (on the strand).
  void closeIfIdle();

  /// Runs `work` on the strand; false once the session is closed.
  template <typename Work> bool post(Work &&work) {
    std::lock_guard<std::mutex> lock(postMutex);
    if (!postsOpen)
      return false;
    net::post(strand, std::forward<Work>(work));
    return true;
  }

  // What a Response asks for, on the strand; `seq` names the request, and
  // a call for a request no longer answered is ignored.
  void writeComplete(uint64_t seq, int status, std::string contentType,
                     std::string body,
                     std::vector<std::pair<std::string, std::string>> headers);
  void
  writeEventsHead(uint64_t seq, int status,
                  std::vector<std::pair<std::string, std::string>> headers);
  void writeEvent(uint64_t seq, const std::string &data);
  void writeEnd(uint64_t seq);
  /// The Response of `seq` was dropped before it ended.
  void abandon(uint64_t seq, bool streaming);

private:
  enum class State {
    Reading,   ///< waiting for or reading a request
    Answering, ///< the handler has the request; its answer is written
    Waiting,   ///< answered; the pending read is cancelled before the next
    Closing,   ///< last response written; discarding input until closed
    Closed,
  };

  // Reading.
  void startRead();
  void onHeader(error_code ec);
  void onRequest(error_code ec);
  void onReadError(error_code ec);
  void dispatch();
  void watch();
  void onWatch(error_code ec, size_t bytes);

  // Writing.
  void fail(int status, const std::string &message, const char *type);
  void enqueue(std::string bytes);
  void doWrite();
  void onWrite(error_code ec);
  bool isCurrent(uint64_t seq) const {
    return seq == currentSeq && state == State::Answering && !responseDone;
  }
  void completeResponse();
  void finishResponse();

  // Closing and deadlines.
  void gracefulClose();
  void drain();
  void closePosts();
  void setDeadline(Clock::time_point when);
  void onTimer();

  const std::shared_ptr<Core> core;
  const uint64_t id;
  Strand strand;
  Socket socket;
  Timer timer;
  std::string remote;

  State state = State::Reading;
  boost::beast::flat_buffer buffer;
  std::optional<http::request_parser<http::string_body>> parser;
  bool readPending = false;

  // The request being answered.
  uint64_t lastSeq = 0;
  uint64_t currentSeq = 0;
  std::weak_ptr<ResponseImpl> current;
  bool keepAlive = true;
  bool headRequest = false;
  unsigned version = 11;
  bool chunked = false;
  bool responseDone = false; ///< its last bytes are queued

  // The write queue: `inflight` is being written, `queue` waits.
  std::vector<std::string> queue;
  std::vector<std::string> inflight;
  uint64_t queuedBytes = 0;
  bool writing = false;

  // One timer serves the idle, write-stall and linger deadlines.
  Clock::time_point deadline = Clock::time_point::max();
  bool timerArmed = false;

  std::mutex postMutex;
  bool postsOpen = true; // guarded by postMutex
};

//===----------------------------------------------------------------------===//
// ResponseImpl
//===----------------------------------------------------------------------===//

class ResponseImpl final : public Response {
public:
  ResponseImpl(std::shared_ptr<Session> session, uint64_t seq)
      : session(std::move(session)), seq(seq) {}
  ~ResponseImpl() override;

  void
  respond(int status, const std::string &contentType, std::string body,
          std::vector<std::pair<std::string, std::string>> headers) override;
  void startEvents(
      int status,
      std::vector<std::pair<std::string, std::string>> headers) override;
  bool send(std::string data) override;
  void end() override;
  bool closed() const override { return gone.load(); }
  void onClose(std::function<void()> callback) override;

  /// On the session's strand: the connection closed before the response
  /// ended.
  void notifyClosed();

private:
  enum Phase : int { kNew, kStreaming, kEnded };
  bool advance(Phase from, Phase to) {
    int expected = from;
    return phase.compare_exchange_strong(expected, to);
  }

  const std::shared_ptr<Session> session;
  const uint64_t seq;
  std::atomic<int> phase{kNew};
  std::atomic<bool> gone{false};
  std::mutex callbackMutex;
  std::function<void()> callback; // guarded by callbackMutex
  bool notified = false;          // guarded by callbackMutex
};

ResponseImpl::~ResponseImpl() {
  int last = phase.load();
  if (last == kEnded)
    return;
  session->post([s = session, seq = seq, streaming = last == kStreaming] {
    s->abandon(seq, streaming);
  });
}

void ResponseImpl::respond(
    int status, const std::string &contentType, std::string body,
    std::vector<std::pair<std::string, std::string>> headers) {
  if (!advance(kNew, kEnded))
    return;
  session->post([s = session, seq = seq, status, contentType,
                 body = std::move(body),
                 headers = std::move(headers)]() mutable {
    s->writeComplete(seq, status, std::move(contentType), std::move(body),
                     std::move(headers));
  });
}

void ResponseImpl::startEvents(
    int status, std::vector<std::pair<std::string, std::string>> headers) {
  if (!advance(kNew, kStreaming))
    return;
  session->post(
      [s = session, seq = seq, status, headers = std::move(headers)]() mutable {
        s->writeEventsHead(seq, status, std::move(headers));
      });
}

bool ResponseImpl::send(std::string data) {
  if (phase.load() != kStreaming || gone.load())
    return false;
  return session->post([s = session, seq = seq, data = std::move(data)] {
    s->writeEvent(seq, data);
  });
}

void ResponseImpl::end() {
  if (!advance(kStreaming, kEnded))
    return;
  session->post([s = session, seq = seq] { s->writeEnd(seq); });
}

void ResponseImpl::onClose(std::function<void()> cb) {
  {
    std::lock_guard<std::mutex> lock(callbackMutex);
    if (!notified) {
      callback = std::move(cb);
      return;
    }
  }
  if (cb)
    cb();
}

void ResponseImpl::notifyClosed() {
  gone.store(true);
  std::function<void()> cb;
  {
    std::lock_guard<std::mutex> lock(callbackMutex);
    if (notified)
      return;
    notified = true;
    cb = std::move(callback);
  }
  if (cb)
    cb();
}

//===----------------------------------------------------------------------===//
// Session: reading
//===----------------------------------------------------------------------===//

void Session::start() {
  if (state == State::Closed) // stop() came first
    return;
  error_code ec;
  tcp::endpoint peer = socket.remote_endpoint(ec);
  if (!ec) {
    std::string address = peer.address().to_string();
    remote = peer.address().is_v6() ? "[" + address + "]" : address;
    remote += ":" + std::to_string(peer.port());
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  startRead();
}

void Session::startRead() {
  state = State::Reading;
  if (buffer.size() == 0 && buffer.capacity() > kKeptBufferBytes)
    buffer.shrink_to_fit();
  parser.emplace();
  parser->header_limit(core->options.maxHeaderBytes);
  parser->body_limit(core->options.maxBodyBytes);
  setDeadline(Clock::now() +
              std::chrono::seconds(core->options.idleTimeoutSeconds));
  readPending = true;
  http::async_read_header(socket, buffer, *parser,
                          [self = shared_from_this()](error_code ec, size_t) {
                            self->onHeader(ec);
                          });
}

void Session::onHeader(error_code ec) {
  readPending = false;
  if (state != State::Reading) {
    if (state == State::Closing)
      ec ? close() : drain();
    return;
  }
  if (ec)
    return onReadError(ec);
  if (parser->is_done())
    return onRequest({});
  // curl and others wait for this before sending a large body.
  auto expect = parser->get()[http::field::expect];
  if (expect.size() == 12 && !strncasecmp(expect.data(), "100-continue", 12))
    enqueue("HTTP/1.1 100 Continue\r\n\r\n");
  readPending = true;
  http::async_read(socket, buffer, *parser,
                   [self = shared_from_this()](error_code ec, size_t) {
                     self->onRequest(ec);
                   });
}

void Session::onRequest(error_code ec) {
  readPending = false;
  if (state != State::Reading) {
    if (state == State::Closing)
      ec ? close() : drain();
    return;
  }
  if (ec)
    return onReadError(ec);
  dispatch();
}

void Session::onReadError(error_code ec) {
  if (ec == http::error::body_limit)
    return fail(413,
                "request body larger than " +
                    std::to_string(core->options.maxBodyBytes) + " bytes",
                "invalid_request_error");
  if (ec == http::error::header_limit)
    return fail(431,
                "request header larger than " +
                    std::to_string(core->options.maxHeaderBytes) + " bytes",
                "invalid_request_error");
  // The client left (between requests or in the middle of one), the idle
  // deadline closed the socket, or the socket failed.
  if (ec.category() !=
          http::make_error_code(http::error::bad_method).category() ||
      ec == http::error::end_of_stream || ec == http::error::partial_message)
    return close();
  fail(400, "malformed HTTP request: " + ec.message(), "invalid_request_error");
}

void Session::dispatch() {
  http::request<http::string_body> message = parser->release();
  parser.reset();
  setDeadline(Clock::time_point::max());

  HttpRequest request;
  request.method = std::string(message.method_string());
  std::string target(message.target());
  size_t question = target.find('?');
  if (question != std::string::npos) {
    request.query = target.substr(question + 1);
    target.resize(question);
  }
  request.target = std::move(target);
  for (const auto &field : message)
    request.headers.emplace_back(std::string(field.name_string()),
                                 std::string(field.value()));
  request.body = std::move(message.body());
  request.remote = remote;

  keepAlive = message.keep_alive() && core->isAccepting();
  version = message.version();
  headRequest = message.method() == http::verb::head;
  chunked = false;
  responseDone = false;
  currentSeq = ++lastSeq;
  state = State::Answering;
  auto response =
      std::make_shared<ResponseImpl>(shared_from_this(), currentSeq);
  current = response;
  watch();
  try {
    core->handler(std::move(request), response);
  } catch (const std::exception &e) {
    response->respond(500, "application/json",
                      errorJson(e.what(), "server_error"), {});
  } catch (...) {
    response->respond(500, "application/json",
                      errorJson("handler failed", "server_error"), {});
  }
}

/// Keeps a read pending while answering, to notice a client that leaves.
void Session::watch() {
  if (readPending || state == State::Closed ||
      buffer.size() >= kMaxPipelinedBytes)
    return;
  readPending = true;
  socket.async_read_some(
      buffer.prepare(kWatchReadBytes),
      [self = shared_from_this()](error_code ec, size_t bytes) {
        self->onWatch(ec, bytes);
      });
}

void Session::onWatch(error_code ec, size_t bytes) {
  readPending = false;
  switch (state) {
  case State::Closed:
    return;
  case State::Closing:
    ec ? close() : drain();
    return;
  case State::Reading:
    return; // not reached: a request read is started only after this one
  case State::Answering:
    if (ec && ec != net::error::operation_aborted)
      return close(); // the client left: the response is cancelled
    buffer.commit(bytes);
    return watch();
  case State::Waiting:
    if (ec && ec != net::error::operation_aborted)
      return close(); // the client left after its answer
    buffer.commit(bytes);
    return startRead();
  }
}

//===----------------------------------------------------------------------===//
// Session: writing
//===----------------------------------------------------------------------===//

void Session::fail(int status, const std::string &message, const char *type) {
  parser.reset();
  setDeadline(Clock::time_point::max());
  state = State::Answering;
  currentSeq = 0;
  keepAlive = false;
  responseDone = false;
  std::string body = errorJson(message, type);
  Framing framing;
  framing.contentLength = body.size();
  framing.keepAlive = false;
  enqueue(formatHead(status, {{"Content-Type", "application/json"}}, framing) +
          body);
  completeResponse();
}

void Session::reject() {
  if (state == State::Closed)
    return;
  state = State::Answering;
  fail(503, "too many connections", "server_error");
}

void Session::enqueue(std::string bytes) {
  if (state == State::Closed || state == State::Closing || bytes.empty())
    return;
  queuedBytes += bytes.size();
  if (queuedBytes > core->options.maxQueuedBytes)
    return close();
  queue.push_back(std::move(bytes));
  if (!writing)
    doWrite();
}

void Session::doWrite() {
  writing = true;
  inflight.swap(queue);
  std::vector<net::const_buffer> buffers;
  buffers.reserve(inflight.size());
  for (const std::string &bytes : inflight)
    buffers.emplace_back(net::buffer(bytes));
  if (state == State::Answering)
    setDeadline(Clock::now() +
                std::chrono::seconds(core->options.idleTimeoutSeconds));
  net::async_write(socket, buffers,
                   [self = shared_from_this()](error_code ec, size_t) {
                     self->onWrite(ec);
                   });
}

void Session::onWrite(error_code ec) {
  writing = false;
  for (const std::string &bytes : inflight)
    queuedBytes -= bytes.size();
  inflight.clear();
  if (state == State::Closed)
    return;
  if (ec)
    return close();
  if (!queue.empty())
    return doWrite();
  if (state == State::Answering) {
    setDeadline(Clock::time_point::max());
    if (responseDone)
      finishResponse();
  }
}

void Session::writeComplete(
    uint64_t seq, int status, std::string contentType, std::string body,
    std::vector<std::pair<std::string, std::string>> headers) {
  if (!isCurrent(seq))
    return;
  if (!contentType.empty() && !hasHeader(headers, "content-type"))
    headers.emplace_back("Content-Type", std::move(contentType));
  Framing framing;
  framing.contentLength = body.size();
  framing.keepAlive = keepAlive;
  framing.version = version;
  enqueue(formatHead(status, headers, framing));
  if (!headRequest)
    enqueue(std::move(body));
  completeResponse();
}

void Session::writeEventsHead(
    uint64_t seq, int status,
    std::vector<std::pair<std::string, std::string>> headers) {
  if (!isCurrent(seq))
    return;
  if (!hasHeader(headers, "content-type"))
    headers.emplace_back("Content-Type", "text/event-stream");
  if (!hasHeader(headers, "cache-control"))
    headers.emplace_back("Cache-Control", "no-cache");
  // HTTP/1.0 has no chunks: the stream ends when the connection closes.
  chunked = version >= 11;
  if (!chunked)
    keepAlive = false;
  Framing framing;
  framing.body = chunked ? Framing::Body::Chunked : Framing::Body::UntilClose;
  framing.keepAlive = keepAlive;
  framing.version = version;
  enqueue(formatHead(status, headers, framing));
  if (headRequest)
    completeResponse();
}

void Session::writeEvent(uint64_t seq, const std::string &data) {
  if (!isCurrent(seq) || headRequest || data.empty())
    return;
  enqueue(chunked ? formatChunk(data) : data);
}

void Session::writeEnd(uint64_t seq) {
  if (!isCurrent(seq))
    return;
  if (chunked && !headRequest)
    enqueue("0\r\n\r\n");
  completeResponse();
}

void Session::abandon(uint64_t seq, bool streaming) {
  if (!isCurrent(seq))
    return;
  if (streaming)
    return writeEnd(seq);
  writeComplete(seq, 500, "application/json",
                errorJson("the server dropped the request", "server_error"),
                {});
}

/// The last bytes of the answer are queued; it finishes once written.
void Session::completeResponse() {
  if (state != State::Answering)
    return;
  responseDone = true;
  if (!writing && queue.empty())
    finishResponse();
}

void Session::finishResponse() {
  current.reset();
  currentSeq = 0;
  responseDone = false;
  if (!keepAlive || !core->isAccepting())
    return gracefulClose();
  if (!readPending)
    return startRead();
  // The watching read may wait for bytes that never come while a pipelined
  // request is already buffered: cancel it, onWatch goes on with startRead.
  state = State::Waiting;
  error_code ignored;
  socket.cancel(ignored);
}

//===----------------------------------------------------------------------===//
// Session: closing and deadlines
//===----------------------------------------------------------------------===//

void Session::closePosts() {
  std::lock_guard<std::mutex> lock(postMutex);
  postsOpen = false;
}

void Session::gracefulClose() {
  state = State::Closing;
  closePosts();
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  setDeadline(Clock::now() + kLingerTime);
  if (!readPending)
    drain();
}

/// Discards input until the client closes too (or the linger deadline).
void Session::drain() {
  buffer.consume(buffer.size());
  readPending = true;
  socket.async_read_some(
      buffer.prepare(kWatchReadBytes),
      [self = shared_from_this()](error_code ec, size_t bytes) {
        self->onWatch(ec, bytes);
      });
}

void Session::close() {
  if (state == State::Closed)
    return;
  // Hold the response first: once posts are refused, its owner may drop it
  // (send() is false) before onClose would have run.
  std::shared_ptr<ResponseImpl> response = current.lock();
  state = State::Closed;
  closePosts();
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
  timer.cancel();
  queue.clear();
  parser.reset();
  current.reset();
  currentSeq = 0;
  core->remove(id);
  if (response)
    response->notifyClosed();
}

void Session::closeIfIdle() {
  if (state == State::Reading && !readPending) // not started yet
    return close();
  if (state == State::Reading && parser && !parser->got_some() &&
      buffer.size() == 0)
    close();
}

/// Moves the deadline; Clock::time_point::max() clears it. The timer is
/// re-armed lazily, so moving a deadline later costs no system call.
void Session::setDeadline(Clock::time_point when) {
  deadline = when;
  if (when == Clock::time_point::max() || state == State::Closed)
    return;
  if (timerArmed && timer.expiry() <= when)
    return; // it fires first and re-arms for the new deadline
  timerArmed = true;
  timer.expires_at(when);
  timer.async_wait([self = shared_from_this()](error_code ec) {
    if (ec != net::error::operation_aborted)
      self->onTimer();
  });
}

void Session::onTimer() {
  timerArmed = false;
  if (state == State::Closed || deadline == Clock::time_point::max())
    return;
  if (Clock::now() >= deadline)
    return close();
  setDeadline(deadline);
}

//===----------------------------------------------------------------------===//
// Core
//===----------------------------------------------------------------------===//

rt::Status Core::bind() {
  const std::string where = options.host + ":" + std::to_string(options.port);
  if (options.port < 0 || options.port > 65535)
    return rt::Error("cannot listen on " + where + ": invalid port");
  error_code ec;
  tcp::endpoint endpoint;
  net::ip::address address = net::ip::make_address(options.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, uint16_t(options.port));
  } else {
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(options.host, std::to_string(options.port),
                                    tcp::resolver::passive, ec);
    if (ec || results.empty())
      return rt::Error("cannot listen on " + where + ": " +
                       (ec ? ec.message() : std::string("no address")));
    endpoint = results.begin()->endpoint();
  }
  acceptor.open(endpoint.protocol(), ec);
  if (!ec)
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    acceptor.bind(endpoint, ec);
  if (!ec)
    acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return rt::Error("cannot listen on " + where + ": " + ec.message());
  boundPort = acceptor.local_endpoint(ec).port();
  return rt::Status();
}

void Core::accept() {
  if (!acceptor.is_open())
    return;
  acceptor.async_accept(
      net::make_strand(ioc),
      [self = shared_from_this()](error_code ec, Socket socket) {
        self->onAccept(ec, std::move(socket));
      });
}

void Core::onAccept(error_code ec, Socket socket) {
  if (!acceptor.is_open() || ec == net::error::operation_aborted)
    return;
  if (ec) {
    // Out of descriptors or memory: wait instead of spinning on the error.
    acceptRetry.expires_after(std::chrono::milliseconds(50));
    acceptRetry.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec)
        self->accept();
    });
    return;
  }
  bool full = open.load() >= options.maxConnections;
  uint64_t id = ++nextId;
  auto session =
      std::make_shared<Session>(shared_from_this(), std::move(socket), id);
  if (add(id, session)) {
    net::post(session->executor(),
              [session, full] { full ? session->reject() : session->start(); });
  }
  accept();
}

bool Core::add(uint64_t id, const std::shared_ptr<Session> &session) {
  std::lock_guard<std::mutex> lock(sessionsMutex);
  if (stopped)
    return false;
  sessions.emplace(id, session);
  ++open;
  return true;
}

void Core::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(sessionsMutex);
  if (sessions.erase(id))
    --open;
}

std::vector<std::shared_ptr<Session>> Core::takeSessions(bool stopping) {
  std::lock_guard<std::mutex> lock(sessionsMutex);
  accepting.store(false);
  if (stopping) {
    stopped = true;
    work.reset();
  }
  std::vector<std::shared_ptr<Session>> result;
  result.reserve(sessions.size());
  for (auto &[id, weak] : sessions)
    if (auto session = weak.lock())
      result.push_back(std::move(session));
  return result;
}

void Core::closeAcceptor() {
  net::post(acceptorStrand, [self = shared_from_this()] {
    error_code ignored;
    self->acceptor.close(ignored);
    self->acceptRetry.cancel();
  });
}

void Core::stopAccepting() {
  closeAcceptor();
  for (auto &session : takeSessions(/*stopping=*/false))
    session->post([session] { session->closeIfIdle(); });
}

void Core::stop() {
  closeAcceptor();
  for (auto &session : takeSessions(/*stopping=*/true))
    session->post([session] { session->close(); });
}

/// Runs the io_context on this thread until it is out of work, reporting
/// and surviving what a handler throws.
void runIoContext(net::io_context &ioc) {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception &e) {
      std::fprintf(stderr, "xfmr-serve: I/O thread: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "xfmr-serve: I/O thread: unknown exception\n");
    }
  }
}

//===----------------------------------------------------------------------===//
// HttpServerImpl
//===----------------------------------------------------------------------===//

class HttpServerImpl final : public HttpServer {
public:
  explicit HttpServerImpl(std::shared_ptr<Core> core) : core(std::move(core)) {}
  ~HttpServerImpl() override;

  int port() const override { return core->port(); }
  void run() override;
  void stopAccepting() override { core->stopAccepting(); }
  void stop() override { core->stop(); }
  int64_t connections() const override { return core->connections(); }

private:
  std::shared_ptr<Core> core;
  std::atomic<bool> started{false};
};

void HttpServerImpl::run() {
  if (started.exchange(true))
    return;
  std::vector<std::thread> threads;
  try {
    for (int i = 1; i < core->options.ioThreads; ++i)
      threads.emplace_back([core = core] { runIoContext(core->ioc); });
  } catch (const std::exception &e) {
    std::fprintf(stderr, "xfmr-serve: cannot start an I/O thread: %s\n",
                 e.what());
  }
  runIoContext(core->ioc);
  for (std::thread &thread : threads)
    thread.join();
}

HttpServerImpl::~HttpServerImpl() {
  core->stop();
  // Never run, or run and returned: finish the closes just posted so that
  // no handler keeps a Session (and the Core) alive.
  if (!started.exchange(true) || core->ioc.stopped()) {
    core->ioc.restart();
    runIoContext(core->ioc);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

std::string xfmr::serve::errorJson(const std::string &message,
                                   const std::string &type) {
  std::string json = "{\"error\": {\"message\": \"";
  appendJsonEscaped(json, message);
  json += "\", \"type\": \"";
  appendJsonEscaped(json, type);
  json += "\", \"param\": null, \"code\": null}}";
  return json;
}

std::string HttpRequest::header(const std::string &name) const {
  for (const auto &[key, value] : headers)
    if (!strcasecmp(key.c_str(), name.c_str()))
      return value;
  return "";
}

rt::Expected<std::unique_ptr<HttpServer>>
HttpServer::listen(HttpServerOptions options, Handler handler) {
  if (options.ioThreads < 1)
    return rt::Error("ioThreads must be at least 1");
  if (options.maxConnections < 1)
    return rt::Error("maxConnections must be at least 1");
  std::shared_ptr<Core> core;
  try {
    core = std::make_shared<Core>(std::move(options), std::move(handler));
  } catch (const std::exception &e) {
    return rt::Error(std::string("cannot start the HTTP server: ") + e.what());
  }
  if (rt::Status bound = core->bind(); !bound)
    return bound.takeError();
  core->startAccepting();
  return std::unique_ptr<HttpServer>(
      std::make_unique<HttpServerImpl>(std::move(core)));
}
