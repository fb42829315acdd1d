//===- Engine.h - continuous batching over a paged-KV step function -*- C++ -*-===//
//
// Part of xfmr. Drives a step-function artifact (xfmr-compile
// --kv-cache=paged) for many concurrent requests the way vLLM's scheduler
// does: every step packs the decode token of each running sequence and
// chunks of prompts into one call, under a per-step token budget and a
// maximum number of sequences. KV blocks come from a BlockManager sized from
// a byte budget, prompts reuse cached blocks through a PrefixCache, and when
// blocks run out the most recently admitted sequence is preempted (its blocks
// freed, recomputed later) and nothing new is admitted in that step.
//
// Request classes share the token budget by strict priority with aging:
// interactive requests are scheduled before batch requests; a batch request
// that has waited `batchAgingSteps` steps is scheduled as interactive, so
// batch work is never starved.
//
// Every scheduling and cache decision can be printed as one line (trace
// mode, for lit tests of the policies).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_ENGINE_H
#define XFMR_RUNTIME_ENGINE_H

#include "xfmr/runtime/BlockManager.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/PrefixCache.h"
#include "xfmr/runtime/Sampling.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace xfmr::rt {

enum class RequestClass { Interactive, Batch };

struct Request {
  int64_t id = 0;
  std::vector<int64_t> prompt;
  SamplingParams sampling;
  RequestClass cls = RequestClass::Interactive;
  /// Protect this prompt's blocks in the prefix cache (a system prompt).
  bool systemPrompt = false;
};

struct EngineConfig {
  uint64_t kvCacheBytes = uint64_t(256) << 20;
  int64_t maxNumSeqs = 256;
  int64_t maxTokensPerStep = 2048;
  bool prefixCaching = true;
  PrefixCachePolicy cachePolicy;
  /// Host tier of the prefix cache (0: none): evicted blocks likely to be
  /// reused are copied here and copied back on a hit.
  uint64_t hostCacheBytes = 0;
  int64_t batchAgingSteps = 64;
  /// Test hook: preempt the most recently admitted sequence every N steps.
  int64_t preemptEvery = 0;
  /// Called with the logits a request's next token is sampled from, before
  /// sampling (xfmr-run generate --dump-logits).
  std::function<void(int64_t requestId, const float *logits, int64_t vocab)> onLogits;
};

struct RequestResult {
  int64_t id = 0;
  std::vector<int64_t> tokens; ///< generated
  std::string finishReason;    ///< "stop", "length", "cancelled", or an error
  double arrival = 0, firstToken = -1, finish = 0;
  int64_t preemptions = 0;
  int64_t cachedPromptTokens = 0; ///< prompt tokens served by the prefix cache
};

class Engine {
public:
  using Clock = std::function<double()>;
  using Trace = std::function<void(const std::string &)>;

  /// Sizes the KV cache from `config.kvCacheBytes`; the startup line
  /// (BlockManager::summary) goes to `trace` when given.
  static Expected<std::unique_ptr<Engine>> create(const Artifact &artifact, EngineConfig config,
                                                  Clock clock, Trace trace = nullptr,
                                                  int64_t typicalSequenceTokens = 0);

  /// Queues a request. Rejects invalid sampling parameters and a request
  /// that could never fit in the KV cache, with the numbers.
  Status submit(Request request);
  /// Cancels a queued or running request (its blocks are freed now).
  void cancel(int64_t id);
  /// Runs one step (schedule, model call, sampling). A no-op when idle.
  Status step();
  bool idle() const { return waiting.empty() && running.empty(); }
  std::vector<RequestResult> takeFinished();

  int64_t steps() const { return numSteps; }
  int64_t preemptions() const { return numPreemptions; }
  int64_t totalBlocks() const { return blocks.numBlocks(); }
  int64_t freeBlocks() const { return blocks.numFree(); }
  const PrefixCache &prefixCache() const { return cache; }
  int64_t hostBlocks() const { return host.numSlots(); }
  /// Releases the prefix cache's blocks (after this free == total when idle).
  void clearPrefixCache() { cache.clear(); }
  std::string summary(int64_t tokensPerSequence) const { return blocks.summary(tokensPerSequence); }

  struct Sequence;
  ~Engine();

private:
  Engine(const Artifact &artifact, KVPools pools, HostKVPool host, EngineConfig config,
         Clock clock, Trace trace);
  void log(const std::string &line);
  void preempt(Sequence &seq, const char *why);
  void finish(Sequence &seq, const std::string &reason);
  bool ensureBlocks(Sequence &seq, int64_t tokens, std::vector<BlockCopy> &copies);

  /// The prefix cache's transfers between the pools and the host tier.
  struct HostMover : BlockMover {
    KVPools &pools;
    HostKVPool &host;
    HostMover(KVPools &pools, HostKVPool &host) : pools(pools), host(host) {}
    void offload(int32_t block, int32_t slot) override { host.store(pools, block, slot); }
    void load(int32_t slot, int32_t block) override { host.load(slot, pools, block); }
  };

  const Artifact &artifact;
  KVPools pools;
  HostKVPool host;
  HostMover mover;
  EngineConfig config;
  Clock clock;
  Trace trace;
  BlockManager blocks;
  PrefixCache cache;
  int64_t vocab = 0;
  std::deque<std::unique_ptr<Sequence>> waiting;
  std::vector<std::unique_ptr<Sequence>> running; ///< in admission order
  std::vector<RequestResult> finished;
  int64_t numSteps = 0, numPreemptions = 0, admissionCounter = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_ENGINE_H
