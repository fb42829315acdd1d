//===- EngineLoop.h - the engine thread of xfmr-serve -----------*- C++ -*-===//
//
// Part of xfmr.
//
// One thread owns the serving engines and runs their steps; HTTP threads
// hand it jobs and cancellations through a mutex-protected inbox and never
// wait for a step. After each step the thread turns the new tokens of every
// request into text (incremental detokenization, stop strings) and writes
// stream chunks or whole responses through the requests' Response objects,
// whose writes are queued on the I/O threads.
//
// Pools: requests of an interactive pool and of a batch pool run in the
// same steps of one Engine, each class held to its pool's share of the KV
// blocks, of every step's tokens and of the running sequences (ClassLimits,
// Engine.h), with its own queue, limits and metrics. A decode step reads
// the weights once for every sequence in it, so batch decoding rides along
// nearly free; what would delay interactive requests is batch prefill,
// and that is held to the batch pool's share of each step's tokens.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SERVE_ENGINELOOP_H
#define XFMR_SERVE_ENGINELOOP_H

#include "HttpServer.h"
#include "Metrics.h"
#include "Protocol.h"

#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/PrefillBudget.h"
#include "xfmr/runtime/Tokenizer.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace xfmr::serve {

/// A pool: at most one of each request class. Without pools, one pool of
/// the whole engine holds both classes (batch requests wait behind
/// interactive ones and age, Engine.h).
struct PoolSpec {
  std::string name;
  double share = 1.0; ///< of the KV blocks, each step's tokens, the sequences
  rt::RequestClass cls = rt::RequestClass::Interactive;
};

struct EngineLoopOptions {
  std::string modelName;
  std::vector<PoolSpec> pools; ///< at least one
  rt::EngineConfig engine;     ///< the whole KV budget and token budget
  /// Speculation's draft model (an artifact directory; empty: prompt
  /// lookup, if engine.speculative is on). Its KV cache holds as many
  /// tokens as the target's.
  std::string draftModel;
  /// Requests queued per pool beyond which new ones get 429.
  int64_t maxWaiting = 4096;
  /// Bytes per second the machine reads from memory (the denominator of
  /// decode bandwidth saturation).
  double memoryReadBandwidth = 0;
  /// With a batch pool beside an interactive one: the prompt work the batch
  /// pool may add to a step, as a fraction of a decode step's measured time
  /// (PrefillBudget.h; 0: bounded by its token share only).
  double batchPrefillSlack = 0.5;
  /// The batch pool's prompt tokens per step never go below this.
  int64_t batchPrefillFloor = 16;
};

/// A request ready to run: tokenized, checked, with its response channel.
struct Job {
  int64_t id = 0; ///< set by EngineLoop::submit (also appended to header.id)
  Endpoint endpoint = Endpoint::Completions;
  ResponseHeader header;
  std::vector<int64_t> prompt;
  rt::SamplingParams sampling;
  std::vector<std::string> stop;
  bool skipSpecialTokens = true;
  bool stream = false;
  bool includeUsage = false;
  size_t pool = 0;
  /// Within its pool: interactive requests go before batch ones (which age
  /// into interactive, Engine.h). A pool of batch class makes every request
  /// in it batch.
  rt::RequestClass cls = rt::RequestClass::Interactive;
  std::shared_ptr<Response> response;
  double arrival = 0; ///< seconds on the loop's clock
};

class EngineLoop {
public:
  static rt::Expected<std::unique_ptr<EngineLoop>>
  create(const rt::Artifact &artifact, const rt::Tokenizer &tokenizer,
         EngineLoopOptions options, Metrics &metrics);
  ~EngineLoop();

  /// The pool named `name` ("" or "interactive"/"batch" map to the pools
  /// of that class, else the first pool).
  std::optional<size_t> poolFor(const std::string &name) const;
  /// Queues a job (any thread): starts its event stream if it streams and
  /// cancels it when the client goes away. An error (429 queue full, 503
  /// draining) is returned instead; the job's response is untouched then.
  std::optional<ApiError> submit(Job job);
  /// Seconds since the loop started (the clock of Job::arrival).
  double now() const;

  /// Before start(): a tensor-parallel server's rank 0 shows every pool
  /// copy and step to the other ranks (rt::mirrorToFollowers).
  std::unique_ptr<rt::PoolMirror> mirrorToFollowers();
  /// Starts the engine thread.
  void start();
  /// Stops taking jobs and lets the running ones finish; after
  /// `timeoutSeconds` the rest are cancelled. Returns when nothing runs.
  void drain(double timeoutSeconds);
  /// Stops the thread (cancelling everything left).
  void stop();

  bool draining() const { return isDraining.load(); }
  /// Requests running or queued in every pool (for tests and shutdown).
  int64_t inFlight() const { return live.load(); }
  /// One line per pool: blocks, sequences (xfmr-serve's startup message).
  std::string describe() const;

private:
  struct Pool;
  struct Active;

  EngineLoop(const rt::Artifact &artifact, const rt::Tokenizer &tokenizer,
             EngineLoopOptions options, Metrics &metrics);
  void declareMetrics();
  void run();
  /// Takes the inbox and the cancellations; false when stopping.
  bool collect(std::vector<Job> &jobs, std::vector<int64_t> &cancels);
  void admit(Job job);
  void cancel(int64_t id);
  void runStep();
  /// Step time, decode bytes and bandwidth saturation of the pools in it.
  void recordStep(const rt::Engine::StepPlan &plan, double dt);
  /// Feeds the step to the batch pool's prefill budget and applies it.
  void updateBatchPrefill(const rt::Engine::StepPlan &plan, double dt);
  void publishTokens();
  void finishResults();
  /// Feeds one generated token into its request's text.
  void onToken(Active &a, int64_t token);
  /// Sends what of the text no stop string can still claim.
  void flushText(Active &a, bool final);
  void complete(Active &a, const char *finishReason);
  void failAll(const std::string &message);
  void updateGauges();
  Labels labels(const Pool &pool) const;

  const rt::Artifact &artifact;
  const rt::Tokenizer &tokenizer;
  EngineLoopOptions options;
  Metrics &metrics;
  std::vector<std::unique_ptr<Pool>> pools;
  std::unique_ptr<rt::Engine> engine;
  /// Tokens sampled in the current step: (request, token).
  std::vector<std::pair<int64_t, int64_t>> stepTokens;
  int64_t preemptionsSeen = 0;
  std::map<int64_t, std::unique_ptr<Active>> active;
  double kvBytesPerToken = 0;
  double start0 = 0;
  /// The batch pool's limits and its prompt tokens per step (pools only).
  rt::ClassLimits batchLimits;
  std::unique_ptr<rt::PrefillBudget> batchPrefill;

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::vector<Job> inbox;
  std::vector<int64_t> cancels;
  std::vector<int64_t> waitingPerPool; ///< queued + in the inbox, per pool
  bool stopping = false;
  bool cancelAll = false; ///< drain() timed out: cancel every request
  int64_t nextId = 1;

  std::atomic<bool> isDraining{false};
  std::atomic<int64_t> live{0};
  std::thread thread;
};

/// Reads a large buffer with every hardware thread and returns bytes per
/// second (the best of a few passes): the machine's read bandwidth.
double measureReadBandwidth();

} // namespace xfmr::serve

#endif // XFMR_SERVE_ENGINELOOP_H
