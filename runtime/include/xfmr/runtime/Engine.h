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
// that has waited `batchAgingSteps` steps since it was submitted is
// scheduled as interactive, so batch work is never starved.
//
// A step has three parts, as in vLLM's v1 scheduler: schedule() decides
// (which sequences run, how many new tokens each, block copies,
// preemptions, admissions) and returns the decision as a StepPlan;
// execute() packs the plan and runs the model; update() commits the
// computed tokens, samples and finishes requests. step() runs all three.
//
// Every scheduling and cache decision can be printed as one line (trace
// mode, for lit tests of the policies).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_ENGINE_H
#define XFMR_RUNTIME_ENGINE_H

#include "xfmr/runtime/BlockManager.h"
#include "xfmr/runtime/CopyQueue.h"
#include "xfmr/runtime/DraftModel.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/PrefixCache.h"
#include "xfmr/runtime/Sampling.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xfmr/runtime/Speculative.h"

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

/// One request class's share of the engine (EngineConfig::classLimits):
/// the KV blocks its running sequences may hold (blocks shared through the
/// prefix cache count for each holder), the tokens it may add to one step
/// and its running sequences. 0: no limit beyond the engine's own. With
/// limits, a class out of its blocks preempts its own newest sequence, and
/// its requests wait while its step budget or sequence count is spent;
/// the other class is not touched (xfmr-serve --pools).
/// `maxPrefillTokensPerStep` bounds only prompt work (chunks of sequences
/// with more than one token to compute: prompts and recomputation after
/// preemption); decode tokens ride along, a step reads the weights once for
/// all of them. xfmr-serve sets it from measured step times so that the
/// batch pool's prefill never makes a step much slower than a decode step.
struct ClassLimits {
  int64_t maxBlocks = 0;
  int64_t maxTokensPerStep = 0;
  int64_t maxNumSeqs = 0;
  int64_t maxPrefillTokensPerStep = 0;
  bool any() const {
    return maxBlocks || maxTokensPerStep || maxNumSeqs || maxPrefillTokensPerStep;
  }
};

/// The order queued requests of one class are admitted in
/// (EngineConfig::admissionOrder).
enum class AdmissionOrder {
  Fifo,          ///< arrival order (preempted requests first)
  LongestPrefix, ///< most cached prompt tokens first (SGLang's "lpm")
};

/// What a preempted sequence's cached blocks become (EngineConfig::preemption).
enum class PreemptionMode {
  Auto,      ///< swap to the host tier when that is cheaper than recomputing
  Recompute, ///< always recompute (vLLM's default)
  Swap,      ///< always swap when the host tier can hold the blocks
};

struct EngineConfig {
  /// KV pools' size (the tools' default is defaultKVCacheBudget's).
  uint64_t kvCacheBytes = uint64_t(256) << 20;
  int64_t maxNumSeqs = 256;
  int64_t maxTokensPerStep = 2048;
  bool prefixCaching = true;
  PrefixCachePolicy cachePolicy;
  /// Host tier of the prefix cache (0: none): evicted blocks likely to be
  /// reused are copied here and copied back on a hit.
  uint64_t hostCacheBytes = 0;
  /// A preempted sequence's full blocks: swapped to the host tier (and
  /// loaded back when it resumes) or recomputed; needs a host tier.
  PreemptionMode preemption = PreemptionMode::Auto;
  /// Multi-turn sessions: a finished request's history (prompt and
  /// generated tokens, full blocks) goes to the host tier when evicted for
  /// this long after it finished, so the conversation's next turn, whose
  /// prompt starts with it, loads it instead of recomputing it (0: off;
  /// needs a host tier; xfmr-bench --session-ttl).
  double sessionTtlSeconds = 0;
  /// Admission order within a class. LongestPrefix admits first the queued
  /// requests with the most prompt tokens in the prefix cache (device or
  /// host): the next turns of conversations, whose prefill is short, go
  /// before new ones. A request that has waited batchAgingSteps steps goes
  /// first in arrival order (no starvation); queues over 128 requests stay
  /// in arrival order (the cost of ordering). xfmr-bench --admission lpm.
  AdmissionOrder admissionOrder = AdmissionOrder::Fifo;
  /// Steps a batch request waits, from its submission, before it is
  /// scheduled as interactive (xfmr-bench --batch-aging).
  int64_t batchAgingSteps = 64;
  /// In-batch prefix sharing (SGLang's "in-batch prefix caching"): a queued
  /// request whose prompt shares full blocks, beyond what the prefix cache
  /// holds, with a prompt a running sequence is still computing waits for
  /// those blocks instead of computing its own copy, while they are due
  /// this step or the next, and for at most this many steps in all (0:
  /// never waits; xfmr-bench --prefix-wait-steps). Requests behind it in
  /// the queue are admitted meanwhile.
  int64_t prefixWaitSteps = 4;
  /// Per class limits, indexed by RequestClass (interactive, batch).
  ClassLimits classLimits[2];
  /// Test hook: preempt the most recently admitted sequence every N steps.
  int64_t preemptEvery = 0;
  /// Test hook: every host-tier block copy also sleeps this long (a slow
  /// link), so the measured copy rate drops.
  double hostCopyDelaySeconds = 0;
  /// Host-tier copies run on a copy thread (CopyQueue) behind the steps: a
  /// kept path (swap, session) is written back when released, a request
  /// whose prefix is loaded from the host is admitted a step later, once
  /// the load is in, and a step waits only for copies of the blocks it
  /// reads or writes. false: copies run inside the step that needs them
  /// (xfmr-bench --sync-host-copies).
  bool asyncHostCopies = true;
  /// Called with the logits a request's next token is sampled from, before
  /// sampling (xfmr-run generate --dump-logits).
  std::function<void(int64_t requestId, const float *logits, int64_t vocab)> onLogits;
  /// Called with every token sampled for a request, in order, during
  /// update() (a server streams them; it must not call back into the
  /// engine). The stop token that ends a request is passed too.
  std::function<void(int64_t requestId, int64_t token)> onToken;
  /// Speculative decoding: a decoding sequence's step also verifies up to
  /// `speculative.numTokens` proposed tokens, by prompt lookup or from a
  /// draft model (Engine::setDraft). Greedy requests keep the proposals
  /// equal to the model's argmax; sampled ones keep prompt lookup's
  /// proposals equal to what their sampler draws (the same tokens as
  /// without speculation, per seed) and a draft's by speculative sampling's
  /// rule (Sampler::verify: the same distribution). A token drawn after the
  /// kept proposals is appended too, and the rest rolled back.
  SpeculativeConfig speculative;
};

/// Why a request ended.
enum class FinishReason {
  Stop,      ///< it generated one of its stop tokens
  Length,    ///< it generated max_tokens tokens
  Cancelled, ///< Engine::cancel
  /// Its prompt is done and its first token sampled; it went on to a
  /// decode engine (Engine::setHandOff). Its result holds that token.
  HandedOff,
};

/// "stop", "length", "cancelled": the name in traces and tool output.
const char *finishReasonName(FinishReason reason);
inline std::string toString(FinishReason reason) { return finishReasonName(reason); }

/// Host-tier copies and preemptions (xfmr-bench's JSON).
struct TransferStats {
  uint64_t offloadedBytes = 0, loadedBytes = 0;
  double copySeconds = 0; ///< spent copying, both ways
  /// Of that, the time the engine waited for copies (asynchronous copies:
  /// the rest ran behind the steps; synchronous ones: all of it).
  double waitSeconds = 0;
  /// Bytes per second from the copies so far (0 before the first).
  double copyRate() const {
    return copySeconds > 0 ? static_cast<double>(offloadedBytes + loadedBytes) / copySeconds : 0;
  }
};

struct RequestResult {
  int64_t id = 0;
  std::vector<int64_t> tokens; ///< generated
  FinishReason finishReason = FinishReason::Length;
  double arrival = 0, firstToken = -1, finish = 0;
  int64_t preemptions = 0;
  int64_t cachedPromptTokens = 0; ///< prompt tokens served by the prefix cache
  /// Speculative decoding: verification steps, tokens proposed in them,
  /// and those the model kept.
  int64_t speculativeSteps = 0, proposedTokens = 0, acceptedTokens = 0;
};

/// A request whose prompt one engine computed, for another to decode
/// (disaggregated prefill and decode, runtime/include/xfmr/runtime/
/// Disaggregated.h): its id (both engines know the request), the prompt
/// and the first token sampled after it, and the K/V of the prompt's
/// tokens: blocksFor(prompt) blocks in KVPools::copyOut's layout.
struct PrefilledRequest {
  int64_t id = 0;
  std::vector<int64_t> tokens; ///< the prompt, then the first token
  std::vector<uint8_t> kv;
};

/// What the engine does to its KV pools and model, in order, for processes
/// that hold the other shards of a tensor-parallel model and must do the
/// same (runtime/lib/ExpertParallel.cpp's followers): called on the
/// engine's thread when each happens (an asynchronous host copy when it is
/// queued).
struct PoolMirror {
  virtual ~PoolMirror() = default;
  virtual void copyBlock(int32_t src, int32_t dst) = 0;
  virtual void offload(int32_t block, int32_t slot) = 0;
  virtual void load(int32_t slot, int32_t block) = 0;
  virtual void step(const std::vector<StepSequence> &batch) = 0;
};

class Engine {
public:
  using Clock = std::function<double()>;
  using Trace = std::function<void(const std::string &)>;
  /// One step's model call: the logits [sequences, vocab] of each packed
  /// sequence's last new token (runStep's contract).
  using ModelCall = std::function<Expected<Tensor>(const std::vector<StepSequence> &)>;

  struct Sequence;

  /// One sequence's share of a step.
  struct ScheduledSequence {
    Sequence *sequence = nullptr;
    int64_t requestId = 0;
    int64_t numTokens = 0;     ///< new tokens: one to decode, or a prompt chunk
    int64_t firstPosition = 0; ///< its tokens already in the KV cache
    bool admitted = false;     ///< admitted from the queue in this step
    /// Proposed tokens verified after the decode token (speculative
    /// decoding; counted in numTokens): the model returns a logits row for
    /// each of the 1 + numProposed tokens.
    int64_t numProposed = 0;
  };

  /// What one step runs, decided before anything runs (vLLM's
  /// SchedulerOutput). Valid until the step's update().
  struct StepPlan {
    int64_t step = 0;
    /// The running sequences in admission order, then this step's admissions.
    std::vector<ScheduledSequence> sequences;
    /// Copy-on-write block copies to apply to the pools before the model runs.
    std::vector<BlockCopy> copies;
    /// Requests preempted in this step (sent back to the queue).
    std::vector<int64_t> preempted;
    int64_t numTokens = 0;
    /// A preemption happened, so nothing was admitted.
    bool admissionStopped = false;
    bool empty() const { return sequences.empty(); }
  };

  /// Sizes the KV cache from `config.kvCacheBytes`; the startup line
  /// (BlockManager::summary) goes to `trace` when given.
  static Expected<std::unique_ptr<Engine>> create(const Artifact &artifact, EngineConfig config,
                                                  Clock clock, Trace trace = nullptr,
                                                  int64_t typicalSequenceTokens = 0);

  /// An engine without an artifact or KV pools whose steps call `model`:
  /// the scheduler alone, with `numBlocks` blocks of `blockSize` tokens
  /// (scheduler tests and benchmarks). No host tier.
  static Expected<std::unique_ptr<Engine>> createDetached(ModelCall model, int64_t vocab,
                                                          int64_t numBlocks, int64_t blockSize,
                                                          EngineConfig config, Clock clock,
                                                          Trace trace = nullptr);

  /// Queues a request. Rejects invalid sampling parameters, a request
  /// longer than the model's context and one that could never fit in the
  /// KV cache, with the numbers.
  Status submit(Request request);
  /// Cancels a queued or running request (its blocks are freed now; a
  /// request in a scheduled step is cancelled when the step ends).
  void cancel(int64_t id);
  /// Runs one step: schedule(), execute(), update(). A no-op when idle.
  Status step();
  bool idle() const { return interactiveQueue.empty() && batchQueue.empty() && running.empty(); }
  std::vector<RequestResult> takeFinished();

  /// Decides the next step and reserves its blocks (preempting and
  /// evicting as needed); an empty plan when nothing can run. Fails if a
  /// planned step has not been updated yet, or if nothing can ever run.
  Expected<StepPlan> schedule();
  /// Applies the plan's block copies, packs its sequences and runs the
  /// model: the logits [rows, vocab], a row per sequence (1 + numProposed
  /// for a speculating one). A failure abandons the step.
  Expected<Tensor> execute(const StepPlan &plan);
  /// Commits the plan's tokens (new full blocks go to the prefix cache),
  /// samples a token for every sequence whose prompt is done, and finishes
  /// requests at a stop token or max_tokens.
  Status update(const StepPlan &plan, const Tensor &logits);

  int64_t steps() const { return numSteps; }
  int64_t preemptions() const { return numPreemptions; }
  /// Prompt tokens the steps computed (chunks of prompts and of
  /// recomputation; not those served by the prefix cache).
  int64_t computedPromptTokens() const { return numPromptTokensComputed; }
  /// Of the preemptions, the ones that swapped their blocks to the host tier.
  int64_t swapPreemptions() const { return numSwapPreemptions; }
  TransferStats transfers() const;
  /// From now on, tells `mirror` every pool copy, host-tier copy and step
  /// (null: nobody); the KV pools' blocks and host slots are `numBlocks()`
  /// and `hostSlots()`.
  void mirrorTo(PoolMirror *mirror) {
    poolMirror = mirror;
    mover.mirror = mirror;
  }
  int64_t numBlocks() const { return pools.numBlocks(); }
  int64_t hostSlots() const { return host.numSlots(); }
  /// Prompt tokens per second of the steps that computed prompt chunks
  /// (0 before the first).
  double prefillRate() const {
    return prefillSeconds > 0 ? static_cast<double>(prefillTokens) / prefillSeconds : 0;
  }
  int64_t totalBlocks() const { return blocks.numBlocks(); }
  int64_t freeBlocks() const { return blocks.numFree(); }
  /// Distinct blocks the running sequences hold (shared prefix blocks once):
  /// what is neither free nor only cached. O(blocks held).
  int64_t blocksHeldByRequests() const;
  /// The same for the running sequences of one class.
  int64_t blocksHeldByRequests(RequestClass cls) const;
  const PrefixCache &prefixCache() const { return cache; }
  int64_t hostBlocks() const { return host.numSlots(); }
  int64_t numRunning() const { return static_cast<int64_t>(running.size()); }
  int64_t numWaiting() const {
    return static_cast<int64_t>(interactiveQueue.size() + batchQueue.size());
  }
  int64_t numRunning(RequestClass cls) const;
  int64_t numWaiting(RequestClass cls) const {
    return static_cast<int64_t>(cls == RequestClass::Interactive ? interactiveQueue.size()
                                                                 : batchQueue.size());
  }
  /// Sets one class's limits (EngineConfig::classLimits), e.g. as shares of
  /// totalBlocks() once the cache is sized. Takes effect at the next step.
  void setClassLimits(RequestClass cls, ClassLimits limits) {
    config.classLimits[cls == RequestClass::Batch] = limits;
  }
  /// Disaggregated prefill: from now on a request whose prompt is done and
  /// whose first token does not end it is handed to `handOff` (with its
  /// K/V) instead of decoding here, and finishes here as HandedOff.
  void setHandOff(std::function<void(PrefilledRequest &&)> handOff) {
    this->handOff = std::move(handOff);
  }
  /// Disaggregated decode: starts `request` as a running sequence whose
  /// prompt another engine computed (`prefilled`: its K/V are copied into
  /// blocks of this engine's pools, the first token is its next input), so
  /// that no step here computes its prompt. The request is validated as
  /// submit() does. false (and nothing changed) while the blocks it will
  /// hold at its last token are not free beyond what the running sequences
  /// will still take: an engine that only adopts never preempts. Call
  /// between steps.
  Expected<bool> adoptPrefilled(Request request, const PrefilledRequest &prefilled);
  /// Proposes speculative tokens with `draft` (over this engine's
  /// vocabulary) instead of prompt lookup, while speculative.numTokens > 0.
  /// A draft of this artifact's KV layout shares its pools (DraftModel.h).
  Status setDraft(std::unique_ptr<DraftModel> draft);
  const DraftModel *draft() const { return drafter.get(); }
  int64_t vocabulary() const { return vocab; }
  /// Releases the prefix cache's blocks (after this free == total when idle).
  void clearPrefixCache();
  std::string summary(int64_t tokensPerSequence) const { return blocks.summary(tokensPerSequence); }

  ~Engine();

private:
  using Queue = std::deque<std::unique_ptr<Sequence>>;

  Engine(const Artifact *artifact, ModelCall model, KVPools pools, HostKVPool host,
         int64_t numBlocks, int64_t blockSize, int64_t vocab, EngineConfig config, Clock clock,
         Trace trace);
  void log(const std::string &line);

  // schedule(), one decision each.
  /// The preemption test hook: preempts the newest sequence every N steps.
  void applyPreemptionHook(StepPlan &plan);
  /// Gives each running sequence its next tokens, preempting when blocks
  /// run out.
  void scheduleRunning(StepPlan &plan);
  /// Admits queued requests while budget, sequence slots and blocks last.
  void admitWaiting(StepPlan &plan);
  /// The queue whose head is admitted next (nullptr: none).
  Queue *admissionQueue();
  /// Reorders `queue` for AdmissionOrder::LongestPrefix.
  void orderByCachedPrefix(Queue &queue);
  bool aged(const Sequence &seq) const;
  /// What admitting `seq` takes from the host tier: the device blocks for
  /// its host-tier prefix and its first chunk (0: nothing to load), and its
  /// cached blocks already on the device.
  struct HostLoad {
    int64_t need = 0, residentBlocks = 0;
  };
  HostLoad hostLoadFor(const Sequence &seq, const StepPlan &plan) const;
  /// Whether the device can take that now (free or evictable blocks); if
  /// not, the request waits without loading them (a load evicted again
  /// before it is used is wasted).
  bool hostLoadsFit(const HostLoad &load) const;
  /// Whether the loads startLoads queued for `seq` are still running.
  bool loadsPending(const Sequence &seq) const;
  /// With asynchronous copies and other sequences in the plan: starts
  /// loading `seq`'s host-tier prefix (it is admitted a step later, the
  /// copies hidden behind this step); false when nothing is to load.
  bool startLoads(Sequence &seq, const StepPlan &plan, const HostLoad &load);
  /// Starts a queued sequence on its cached prefix.
  void adoptCachedPrefix(Sequence &seq);
  /// The running sequence computing full blocks of `seq`'s prompt that the
  /// cache does not hold yet, due this step or the next (prefixWaitSteps),
  /// and the tokens `seq` would then find cached; nullptr when none.
  const Sequence *prefixProducer(const Sequence &seq, const StepPlan &plan,
                                 int64_t &sharedTokens) const;
  /// Reserves blocks for `tokens` more tokens of `seq`, evicting cached
  /// blocks if needed; false when they cannot be had.
  bool ensureBlocks(Sequence &seq, int64_t tokens, std::vector<BlockCopy> &copies);
  /// The most recently admitted running sequence from `from` on.
  std::vector<std::unique_ptr<Sequence>>::iterator newestRunning(size_t from);
  /// Preempts `it` and sends it to the front of its queue.
  void preempt(std::vector<std::unique_ptr<Sequence>>::iterator it, const char *why,
               StepPlan &plan);
  void addToPlan(StepPlan &plan, Sequence &seq, int64_t tokens, bool admitted);

  // Class limits (EngineConfig::classLimits) within schedule().
  struct ClassUsage {
    int64_t blocks = 0, tokens = 0, prefillTokens = 0, seqs = 0;
  };
  const ClassLimits &limitsOf(const Sequence &seq) const;
  ClassUsage &usageOf(const Sequence &seq);
  /// Counts the running sequences' blocks and sequences per class.
  void resetClassUsage();
  /// Tokens `seq`'s class may still add to this step.
  int64_t classTokenRoom(const Sequence &seq);
  /// The tokens of `seq` this step can take: its uncomputed ones within the
  /// step's budget and its class's token and prefill rooms (0: none).
  int64_t chunkFor(const Sequence &seq, const StepPlan &plan);
  /// Whether `tokens` more tokens of `seq` keep its class within its blocks.
  bool classBlocksFit(const Sequence &seq, int64_t tokens);
  /// Speculation: the tokens proposed for a decoding `seq` in `plan` (within
  /// the step's, its class's and its request's limits), empty when it does
  /// not speculate (large batches, nothing matched).
  std::vector<int64_t> proposeFor(const Sequence &seq, const StepPlan &plan);
  /// Runs the draft model for the plan's speculating sequences (their
  /// proposals were counted by proposeFor) and shrinks the plan where it
  /// proposed fewer.
  Status draftProposals(StepPlan &plan);
  /// The most recently admitted running sequence of `cls` from `from` on.
  std::vector<std::unique_ptr<Sequence>>::iterator newestRunning(size_t from,
                                                                 RequestClass cls);

  /// Waits for the host-tier copies the plan's step depends on: any copy
  /// of a block it writes (new tokens' blocks, copy-on-write targets) and
  /// loads into a block it reads.
  void waitForCopies(const StepPlan &plan);

  // update(), one decision each.
  /// Marks `tokens` more tokens computed; new full blocks go to the cache.
  void commitTokens(Sequence &seq, int64_t tokens);
  /// Samples and appends the next token from `logits`; with a draft
  /// model's `proposal` and its distribution, by Sampler::verify.
  void sampleNext(Sequence &seq, const float *logits, int64_t proposal = -1,
                  const float *draftProbs = nullptr);
  /// The request's checks at submission (tokens, sampling, context, fit).
  Status validateRequest(const Request &request) const;
  /// Hands `seq` (prompt done, first token sampled) to setHandOff's callee.
  void handOffSequence(Sequence &seq);
  /// Whether the last token ends the request, and why.
  std::optional<FinishReason> finishReasonFor(const Sequence &seq) const;
  /// Verifies `seq`'s proposals against the model's rows (one per verified
  /// position): keeps the longest prefix equal to the sampler's tokens and
  /// the next token it draws, commits their K/V and rolls back the rest.
  /// Returns a finish reason when an appended token ends the request.
  std::optional<FinishReason> acceptProposals(Sequence &seq, const ScheduledSequence &s,
                                              const float *rows);

  /// Lets go of a sequence's blocks (its cached path counts as used now;
  /// `keep`: it goes to the host tier when evicted, PrefixCache::release).
  void releaseBlocks(Sequence &seq, PrefixCache::Keep keep = PrefixCache::Keep::None);
  void finish(Sequence &seq, FinishReason reason);
  /// The planned step is over (done or abandoned): deferred cancellations run.
  void endStep();
  Queue &queueFor(const Sequence &seq);

  /// The prefix cache's transfers between the pools and the host tier,
  /// timed (the copy rate swap-or-recompute decisions use).
  struct HostMover : BlockMover {
    KVPools &pools;
    HostKVPool &host;
    PoolMirror *mirror = nullptr; ///< Engine::mirrorTo
    double delaySeconds = 0; ///< EngineConfig::hostCopyDelaySeconds
    CopyQueue *queue = nullptr; ///< asynchronous copies, when set
    HostMover(KVPools &pools, HostKVPool &host, double delaySeconds)
        : pools(pools), host(host), delaySeconds(delaySeconds) {}
    void offload(int32_t block, int32_t slot) override;
    void load(int32_t slot, int32_t block) override;
    TransferStats snapshot() const;

  private:
    /// Runs `copy` (now, or on the queue) and counts it.
    void run(int32_t block, int32_t slot, bool out, std::function<void()> copy);
    mutable std::mutex statsMutex; ///< the copy thread updates stats
    TransferStats stats;
  };
  /// Whether preempting `seq` swaps its cached blocks to the host tier
  /// instead of recomputing them later (the cheaper of moving the bytes out
  /// and back at the measured copy rate and recomputing the tokens at the
  /// measured prefill rate, when the host tier can hold them); `why` is
  /// the trace's account of the choice.
  bool swapOnPreemption(const Sequence &seq, std::string &why) const;

  const Artifact *artifact; ///< nullptr for a detached engine
  ModelCall model;          ///< set for a detached engine
  PoolMirror *poolMirror = nullptr;
  std::function<void(PrefilledRequest &&)> handOff; ///< setHandOff
  KVPools pools;
  HostKVPool host;
  HostMover mover;
  /// The copy thread (EngineConfig::asyncHostCopies with a host tier);
  /// declared after the pools it copies, so it finishes first.
  std::unique_ptr<CopyQueue> copyQueue;
  EngineConfig config;
  Clock clock;
  Trace trace;
  BlockManager blocks;
  PrefixCache cache;
  std::unique_ptr<DraftModel> drafter; ///< speculation's proposer, if a draft model
  int64_t vocab = 0;
  /// The model's context (manifest generation.context_length; 0: not
  /// stated): longer requests are rejected at submission.
  int64_t contextLength = 0;
  /// Queued requests by class, each in queue order (queueKey ascending).
  Queue interactiveQueue, batchQueue;
  std::vector<std::unique_ptr<Sequence>> running; ///< in admission order
  std::vector<RequestResult> finished;
  /// Requests cancelled while their step was planned.
  std::vector<int64_t> deferredCancels;
  int64_t numSteps = 0, numPreemptions = 0, admissionCounter = 0;
  int64_t numSwapPreemptions = 0, numPromptTokensComputed = 0;
  /// Tokens and seconds of the steps that computed prompt chunks (the
  /// prefill rate a recomputation would run at).
  int64_t prefillTokens = 0;
  double prefillSeconds = 0;
  /// Queue keys: submissions count up at the back, preemptions down at the
  /// front, so both queues merge by key into the one arrival order.
  int64_t nextBackKey = 0, nextFrontKey = -1;
  ClassUsage classUsage[2];
  /// The step of a plan not updated yet (0: none).
  int64_t planInFlight = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_ENGINE_H
