//===- Disaggregated.cpp - prefill and decode on separate ranks -----------===//
//
// Part of xfmr. See Disaggregated.h. Messages between the two ranks (MPI
// point to point, tags below), each one buffer of int64 words:
//   hand-off  (0 -> 1): id, token count, tokens..., K/V byte count, K/V bytes
//   end       (0 -> 1): nothing more will be handed off
//   result    (1 -> 0): id, finish reason, token count, tokens..., preemptions
//   counts    (1 -> 0, last): steps, prompt tokens computed, preemptions
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Disaggregated.h"
#include "xfmr/runtime/Text.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <thread>

#ifdef XFMR_WITH_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace xfmr::rt {

#ifndef XFMR_WITH_MPI
Expected<std::map<int64_t, RequestResult>>
runDisaggregated(Engine &, ServingRole, const std::vector<Request> &,
                 DisaggregationStats &, std::function<bool(size_t, int64_t)>,
                 std::function<double()>) {
  return Error("this xfmr was built without MPI: it cannot run --disaggregate");
}
#else
namespace {

constexpr int kHandOffTag = 41, kEndTag = 42, kResultTag = 43, kCountsTag = 44;

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

double peerTimeout() {
  const char *t = std::getenv("XFMR_EP_TIMEOUT_S");
  return t ? std::max(1.0, std::atof(t)) : 120.0;
}

/// Sends in flight, each kept alive until MPI completes it.
class Outbox {
public:
  explicit Outbox(int peer) : peer(peer) {}

  void send(std::vector<int64_t> words, int tag) {
    sends.push_back({std::move(words), MPI_REQUEST_NULL, Clock::now()});
    Send &s = sends.back();
    MPI_Isend(s.words.data(), static_cast<int>(s.words.size()), MPI_INT64_T,
              peer, tag, MPI_COMM_WORLD, &s.request);
  }

  /// Forgets the completed sends; the seconds they took are added up.
  void poll() {
    for (auto it = sends.begin(); it != sends.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (!done) {
        ++it;
        continue;
      }
      transferSeconds += seconds(it->start);
      it = sends.erase(it);
    }
  }

  /// Waits for every send (bounded: a peer that stopped receiving ends the
  /// job); returns the seconds waited.
  double drain(int rank) {
    auto start = Clock::now();
    while (!sends.empty()) {
      poll();
      if (sends.empty())
        break;
      if (seconds(start) > peerTimeout()) {
        std::fprintf(stderr,
                     "xfmr: rank %d: the other rank took no message for %.0f s "
                     "(it died or stalled; XFMR_EP_TIMEOUT_S sets the limit): "
                     "aborting\n",
                     rank, peerTimeout());
        MPI_Abort(MPI_COMM_WORLD, 5);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return seconds(start);
  }

  double transferSeconds = 0;

private:
  struct Send {
    std::vector<int64_t> words;
    MPI_Request request;
    Clock::time_point start;
  };
  int peer;
  std::list<Send> sends;
};

/// The next message from `peer`, if one has arrived: its tag and words.
std::optional<std::pair<int, std::vector<int64_t>>> receive(int peer) {
  int arrived = 0;
  MPI_Status status;
  MPI_Iprobe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status);
  if (!arrived)
    return std::nullopt;
  int count = 0;
  MPI_Get_count(&status, MPI_INT64_T, &count);
  std::vector<int64_t> words(static_cast<size_t>(std::max(count, 0)));
  MPI_Recv(words.data(), count, MPI_INT64_T, peer, status.MPI_TAG,
           MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return std::make_pair(status.MPI_TAG, std::move(words));
}

std::vector<int64_t> packHandOff(const PrefilledRequest &p) {
  size_t kvWords = (p.kv.size() + 7) / 8;
  std::vector<int64_t> w;
  w.reserve(3 + p.tokens.size() + kvWords);
  w.push_back(p.id);
  w.push_back(static_cast<int64_t>(p.tokens.size()));
  w.insert(w.end(), p.tokens.begin(), p.tokens.end());
  w.push_back(static_cast<int64_t>(p.kv.size()));
  size_t at = w.size();
  w.resize(at + kvWords, 0);
  std::memcpy(w.data() + at, p.kv.data(), p.kv.size());
  return w;
}

std::optional<PrefilledRequest> unpackHandOff(const std::vector<int64_t> &w) {
  PrefilledRequest p;
  if (w.size() < 3 || w[1] < 0 || static_cast<size_t>(w[1]) > w.size() - 3)
    return std::nullopt;
  p.id = w[0];
  size_t n = static_cast<size_t>(w[1]);
  p.tokens.assign(w.begin() + 2, w.begin() + 2 + static_cast<long>(n));
  int64_t bytes = w[2 + n];
  size_t at = 3 + n;
  if (bytes < 0 || (static_cast<size_t>(bytes) + 7) / 8 != w.size() - at)
    return std::nullopt;
  p.kv.resize(static_cast<size_t>(bytes));
  std::memcpy(p.kv.data(), w.data() + at, p.kv.size());
  return p;
}

std::vector<int64_t> packResult(const RequestResult &r) {
  std::vector<int64_t> w{r.id, static_cast<int64_t>(r.finishReason),
                         static_cast<int64_t>(r.tokens.size())};
  w.insert(w.end(), r.tokens.begin(), r.tokens.end());
  w.push_back(r.preemptions);
  return w;
}

/// Merges a result message into the prefill rank's result of that request.
bool mergeResult(const std::vector<int64_t> &w,
                 std::map<int64_t, RequestResult> &results, double now) {
  if (w.size() < 4 || w[2] < 0 || static_cast<size_t>(w[2]) != w.size() - 4)
    return false;
  auto it = results.find(w[0]);
  if (it == results.end() || it->second.finishReason != FinishReason::HandedOff)
    return false;
  RequestResult &r = it->second;
  r.finishReason = static_cast<FinishReason>(w[1]);
  r.tokens.assign(w.begin() + 3, w.begin() + 3 + w[2]);
  r.preemptions += w.back();
  r.finish = now;
  return true;
}

/// The decode rank's counts message into `stats`.
bool takeCounts(const std::vector<int64_t> &w, DisaggregationStats &stats) {
  if (w.size() != 3)
    return false;
  stats.peerSteps = w[0];
  stats.peerPromptTokens = w[1];
  stats.peerPreemptions = w[2];
  return true;
}

[[noreturn]] void peerFailed(int rank, const std::string &what) {
  std::fprintf(stderr, "xfmr: rank %d: %s: ending the job\n", rank,
               what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 6);
  std::abort();
}

Expected<std::map<int64_t, RequestResult>>
runPrefill(Engine &engine, const std::vector<Request> &requests,
           DisaggregationStats &stats,
           const std::function<bool(size_t, int64_t)> &due,
           const std::function<double()> &clock) {
  Outbox out(1);
  engine.setHandOff([&](PrefilledRequest &&p) {
    stats.handedOff += 1;
    stats.kvBytes += p.kv.size();
    out.send(packHandOff(p), kHandOffTag);
  });
  std::map<int64_t, RequestResult> results;
  size_t next = 0, waitingFor = 0;
  int64_t iteration = 0;
  bool ended = false, counted = false;
  auto lastHeard = Clock::now();
  while (true) {
    for (; next < requests.size() && (!due || due(next, iteration)); ++next)
      if (Status s = engine.submit(requests[next]); !s)
        return s.takeError();
    if (!engine.idle())
      if (Status s = engine.step(); !s)
        return s.takeError();
    ++iteration;
    for (RequestResult &r : engine.takeFinished()) {
      waitingFor += r.finishReason == FinishReason::HandedOff;
      results[r.id] = std::move(r);
    }
    out.poll();
    while (!counted) {
      std::optional<std::pair<int, std::vector<int64_t>>> m = receive(1);
      if (!m)
        break;
      lastHeard = Clock::now();
      if (m->first == kCountsTag) {
        counted = takeCounts(m->second, stats);
        continue;
      }
      if (m->first != kResultTag ||
          !mergeResult(m->second, results, clock ? clock() : 0))
        peerFailed(
            0,
            "a message from the decode rank that is not a handed-off request's "
            "result");
      --waitingFor;
    }
    bool allSubmitted = next == requests.size();
    if (allSubmitted && engine.idle() && !ended) {
      stats.transferWaitSeconds += out.drain(0);
      out.send({}, kEndTag);
      ended = true;
    }
    if (ended && waitingFor == 0)
      break;
    if (engine.idle()) {
      if (!allSubmitted && !ended)
        continue; // the next arrival is some passes away
      if (ended && seconds(lastHeard) > peerTimeout())
        peerFailed(0,
                   formatString(
                       "the decode rank sent no result for %.0f s (it died or "
                       "stalled; XFMR_EP_TIMEOUT_S sets the limit)",
                       peerTimeout()));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  out.drain(0);
  // The decode rank's counts, its last message.
  for (auto start = Clock::now(); !counted;) {
    if (auto m = receive(1)) {
      if (m->first != kCountsTag || !(counted = takeCounts(m->second, stats)))
        peerFailed(0, "the decode rank's last message is not its counts");
      break;
    }
    if (seconds(start) > peerTimeout())
      peerFailed(0, "the decode rank did not send its counts");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  stats.transferSeconds = out.transferSeconds;
  stats.steps = engine.steps();
  stats.promptTokens = engine.computedPromptTokens();
  stats.preemptions = engine.preemptions();
  return results;
}

Expected<std::map<int64_t, RequestResult>>
runDecode(Engine &engine, const std::vector<Request> &requests,
          DisaggregationStats &stats) {
  std::map<int64_t, const Request *> byId;
  for (const Request &r : requests)
    byId[r.id] = &r;
  Outbox out(0);
  std::deque<PrefilledRequest> pending;
  std::map<int64_t, RequestResult> results;
  bool ended = false;
  auto lastHeard = Clock::now();
  while (true) {
    while (auto m = receive(0)) {
      lastHeard = Clock::now();
      if (m->first == kEndTag) {
        ended = true;
        continue;
      }
      std::optional<PrefilledRequest> p =
          m->first == kHandOffTag ? unpackHandOff(m->second) : std::nullopt;
      if (!p || !byId.count(p->id))
        peerFailed(1, "a malformed hand-off from the prefill rank");
      stats.handedOff += 1;
      stats.kvBytes += p->kv.size();
      pending.push_back(std::move(*p));
    }
    // In arrival order, while their blocks fit.
    while (!pending.empty()) {
      Expected<bool> adopted =
          engine.adoptPrefilled(*byId[pending.front().id], pending.front());
      if (!adopted)
        return adopted.takeError();
      if (!*adopted)
        break;
      pending.pop_front();
    }
    if (!engine.idle())
      if (Status s = engine.step(); !s)
        return s.takeError();
    for (RequestResult &r : engine.takeFinished()) {
      out.send(packResult(r), kResultTag);
      results[r.id] = std::move(r);
    }
    out.poll();
    if (ended && pending.empty() && engine.idle())
      break;
    if (engine.idle()) {
      if (!pending.empty())
        return Error(formatString(
            "request %lld's prompt needs more KV blocks than the decode "
            "rank's cache has free when idle",
            static_cast<long long>(pending.front().id)));
      if (seconds(lastHeard) > peerTimeout())
        peerFailed(
            1,
            formatString("the prefill rank sent nothing for %.0f s (it died or "
                         "stalled; XFMR_EP_TIMEOUT_S sets the limit)",
                         peerTimeout()));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  stats.steps = engine.steps();
  stats.promptTokens = engine.computedPromptTokens();
  stats.preemptions = engine.preemptions();
  out.send({stats.steps, stats.promptTokens, stats.preemptions}, kCountsTag);
  out.drain(1);
  return results;
}

} // namespace

Expected<std::map<int64_t, RequestResult>> runDisaggregated(
    Engine &engine, ServingRole role, const std::vector<Request> &requests,
    DisaggregationStats &stats, std::function<bool(size_t, int64_t)> due,
    std::function<double()> clock) {
  return role == ServingRole::Prefill
             ? runPrefill(engine, requests, stats, due, clock)
             : runDecode(engine, requests, stats);
}
#endif

} // namespace xfmr::rt
