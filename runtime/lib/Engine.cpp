//===- Engine.cpp - continuous batching over a paged-KV step function -----===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>

namespace xfmr::rt {

struct Engine::Sequence {
  Request request;
  Sampler sampler;
  std::vector<int64_t> tokens; ///< prompt, then generated
  size_t promptLength = 0;
  int64_t computed = 0; ///< tokens whose K/V are in the cache
  SequenceBlocks blocks;
  PrefixCache::Cursor cursor; ///< its blocks in the prefix cache so far
  RequestResult result;
  int64_t admittedAt = -1; ///< admission order (preemption picks the latest)
  int64_t submittedAt = 0; ///< step it was submitted (batch aging)
  int64_t prefixWaits = 0; ///< steps it waited for a running prompt's blocks
  /// Queued while blocks of its cached prefix load from the host tier
  /// (asynchronous copies, PrefixCache::prefetch): admitted once they are in.
  std::vector<int32_t> loading;
  int64_t queueKey = 0;    ///< place in the queue (Engine::nextBackKey)
  /// This step's proposed tokens (speculative decoding), verified after
  /// the decode token and not part of `tokens` until accepted.
  std::vector<int64_t> proposed;
  /// A draft model's distributions of `proposed` for a sampled request,
  /// [proposed, vocab]; empty for greedy requests and prompt lookup.
  std::vector<float> proposalProbs;

  explicit Sequence(Request r) : request(std::move(r)), sampler(request.sampling) {}
  int64_t generated() const { return static_cast<int64_t>(tokens.size() - promptLength); }
  int64_t uncomputed() const { return static_cast<int64_t>(tokens.size()) - computed; }
};

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::Stop:
    return "stop";
  case FinishReason::Length:
    return "length";
  case FinishReason::Cancelled:
    return "cancelled";
  case FinishReason::HandedOff:
    return "handed_off";
  }
  return "unknown";
}

namespace {

const char *className(RequestClass c) {
  return c == RequestClass::Interactive ? "interactive" : "batch";
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The copy rate assumed before any copy was measured: a conservative
/// memcpy (the first preemption's choice; later ones use measured rates).
constexpr double kAssumedCopyRate = 2e9;

/// The prefix cache's policy: kept paths are written back at release when
/// copies are asynchronous (they run behind the steps).
PrefixCachePolicy cachePolicyFor(const EngineConfig &config, int64_t hostSlots) {
  PrefixCachePolicy policy = config.cachePolicy;
  policy.writeBackKept = config.asyncHostCopies && hostSlots > 0;
  policy.writeThrough = policy.writeBackKept && config.sessionTtlSeconds > 0;
  return policy;
}

} // namespace

Engine::Engine(const Artifact *artifact, ModelCall model, KVPools pools, HostKVPool host,
               int64_t numBlocks, int64_t blockSize, int64_t vocab, EngineConfig config,
               Clock clock, Trace trace)
    : artifact(artifact), model(std::move(model)), pools(std::move(pools)),
      host(std::move(host)), mover(this->pools, this->host, config.hostCopyDelaySeconds),
      config(config),
      clock(std::move(clock)), trace(std::move(trace)), blocks(numBlocks, blockSize),
      cache(blocks, cachePolicyFor(config, this->host.numSlots()), &mover, this->host.numSlots()),
      vocab(vocab) {
  if (this->host.numSlots() > 0 && config.asyncHostCopies) {
    copyQueue = std::make_unique<CopyQueue>(numBlocks, this->host.numSlots());
    mover.queue = copyQueue.get();
  }
}

Engine::~Engine() = default;

Expected<std::unique_ptr<Engine>> Engine::create(const Artifact &artifact, EngineConfig config,
                                                 Clock clock, Trace trace,
                                                 int64_t typicalSequenceTokens) {
  if (config.maxNumSeqs < 1 || config.maxTokensPerStep < 1)
    return Error("max-num-seqs and the per-step token budget must be at least 1");
  Expected<KVPools> pools = KVPools::allocateForBudget(artifact, config.kvCacheBytes);
  if (!pools)
    return pools.takeError();
  Expected<HostKVPool> host = HostKVPool::allocateForBudget(*pools, config.hostCacheBytes);
  if (!host)
    return host.takeError();
  int64_t numBlocks = pools->numBlocks(), blockSize = pools->blockSize();
  std::unique_ptr<Engine> e(new Engine(&artifact, nullptr, pools.take(), host.take(), numBlocks,
                                       blockSize, stepVocabulary(artifact), config, std::move(clock),
                                       std::move(trace)));
  if (e->vocab < 1)
    return Error(artifact.directory() + ": the step function has no [tokens, vocab] logits");
  e->contextLength = artifact.manifest().contextLength();
  e->log(e->blocks.summary(typicalSequenceTokens > 0 ? typicalSequenceTokens
                                                     : e->blocks.blockSize()));
  if (e->host.numSlots() > 0)
    e->log(formatString("host tier: %lld blocks (%.1f MiB)",
                        static_cast<long long>(e->host.numSlots()),
                        static_cast<double>(e->host.bytes()) / (1 << 20)));
  return e;
}

Expected<std::unique_ptr<Engine>> Engine::createDetached(ModelCall model, int64_t vocab,
                                                         int64_t numBlocks, int64_t blockSize,
                                                         EngineConfig config, Clock clock,
                                                         Trace trace) {
  if (config.maxNumSeqs < 1 || config.maxTokensPerStep < 1)
    return Error("max-num-seqs and the per-step token budget must be at least 1");
  if (!model || vocab < 1 || numBlocks < 1 || blockSize < 1)
    return Error("a detached engine needs a model call, a vocabulary and at least one block");
  std::unique_ptr<Engine> e(new Engine(nullptr, std::move(model), KVPools(), HostKVPool(),
                                       numBlocks, blockSize, vocab, config, std::move(clock),
                                       std::move(trace)));
  e->log(e->blocks.summary(blockSize));
  return e;
}

void Engine::log(const std::string &line) {
  if (trace)
    trace(line);
}

Engine::Queue &Engine::queueFor(const Sequence &seq) {
  return seq.request.cls == RequestClass::Interactive ? interactiveQueue : batchQueue;
}

//===----------------------------------------------------------------------===//
// Requests
//===----------------------------------------------------------------------===//

Status Engine::validateRequest(const Request &request) const {
  if (request.prompt.empty())
    return Error("request " + std::to_string(request.id) + ": empty prompt");
  for (int64_t t : request.prompt)
    if (t < 0 || t >= vocab)
      return Error("request " + std::to_string(request.id) + ": token " + std::to_string(t) +
                   " outside the vocabulary of " + std::to_string(vocab));
  if (Status s = validate(request.sampling, vocab); !s)
    return Error("request " + std::to_string(request.id) + ": " + s.error());
  // Saturating: prompt + max_tokens overflowed for max_tokens near
  // INT64_MAX (found by xfmr-engine-fuzzer); saturated, it can never fit.
  int64_t total = 0;
  if (__builtin_add_overflow(static_cast<int64_t>(request.prompt.size()),
                             request.sampling.maxTokens, &total))
    total = std::numeric_limits<int64_t>::max();
  if (contextLength > 0 && total > contextLength)
    return Error(formatString("request %lld: prompt %zu + max_tokens %lld tokens exceed the "
                              "model's context of %lld",
                              static_cast<long long>(request.id), request.prompt.size(),
                              static_cast<long long>(request.sampling.maxTokens),
                              static_cast<long long>(contextLength)));
  int64_t need = blocks.blocksFor(total);
  if (need > blocks.numBlocks())
    return Error(formatString(
        "request %lld can never fit: prompt %zu + max_tokens %lld tokens need %lld "
        "blocks of %lld, the KV cache has %lld",
        static_cast<long long>(request.id), request.prompt.size(),
        static_cast<long long>(request.sampling.maxTokens), static_cast<long long>(need),
        static_cast<long long>(blocks.blockSize()), static_cast<long long>(blocks.numBlocks())));
  const ClassLimits &limits = config.classLimits[request.cls == RequestClass::Batch];
  if (limits.maxBlocks && need > limits.maxBlocks)
    return Error(formatString(
        "request %lld can never fit: prompt %zu + max_tokens %lld tokens need %lld "
        "blocks of %lld, the %s class may hold %lld",
        static_cast<long long>(request.id), request.prompt.size(),
        static_cast<long long>(request.sampling.maxTokens), static_cast<long long>(need),
        static_cast<long long>(blocks.blockSize()), className(request.cls),
        static_cast<long long>(limits.maxBlocks)));
  return {};
}

Status Engine::submit(Request request) {
  if (Status s = validateRequest(request); !s)
    return s;
  auto seq = std::make_unique<Sequence>(std::move(request));
  seq->tokens = seq->request.prompt;
  seq->promptLength = seq->tokens.size();
  seq->result.id = seq->request.id;
  seq->result.arrival = clock();
  seq->submittedAt = numSteps;
  seq->queueKey = nextBackKey++;
  log(formatString("queue req %lld (%s, prompt %zu)", static_cast<long long>(seq->request.id),
                   className(seq->request.cls), seq->promptLength));
  queueFor(*seq).push_back(std::move(seq));
  return {};
}

void Engine::cancel(int64_t id) {
  for (Queue *q : {&interactiveQueue, &batchQueue})
    for (auto it = q->begin(); it != q->end(); ++it)
      if ((*it)->request.id == id) {
        finish(**it, FinishReason::Cancelled);
        q->erase(it);
        return;
      }
  for (auto it = running.begin(); it != running.end(); ++it) {
    if ((*it)->request.id != id)
      continue;
    if (planInFlight) { // the plan points at it: cancel when the step ends
      deferredCancels.push_back(id);
      return;
    }
    finish(**it, FinishReason::Cancelled);
    running.erase(it);
    return;
  }
}

void Engine::HostMover::run(int32_t block, int32_t slot, bool out, std::function<void()> copy) {
  auto timed = [this, out, copy = std::move(copy)] {
    auto start = std::chrono::steady_clock::now();
    copy();
    if (delaySeconds > 0) // test hook: a slow link
      std::this_thread::sleep_for(std::chrono::duration<double>(delaySeconds));
    double took = secondsSince(start);
    std::lock_guard<std::mutex> lock(statsMutex);
    stats.copySeconds += took;
    (out ? stats.offloadedBytes : stats.loadedBytes) += pools.blockBytes();
    if (!queue) // synchronous: the engine waited for all of it
      stats.waitSeconds += took;
  };
  if (queue)
    queue->enqueue(block, slot, /*load=*/!out, std::move(timed));
  else
    timed();
}

void Engine::HostMover::offload(int32_t block, int32_t slot) {
  if (mirror)
    mirror->offload(block, slot);
  run(block, slot, /*out=*/true, [this, block, slot] { host.store(pools, block, slot); });
}

void Engine::HostMover::load(int32_t slot, int32_t block) {
  if (mirror)
    mirror->load(slot, block);
  run(block, slot, /*out=*/false, [this, block, slot] { host.load(slot, pools, block); });
}

TransferStats Engine::HostMover::snapshot() const {
  std::lock_guard<std::mutex> lock(statsMutex);
  TransferStats s = stats;
  if (queue)
    s.waitSeconds = queue->waitSeconds();
  return s;
}

TransferStats Engine::transfers() const { return mover.snapshot(); }

void Engine::releaseBlocks(Sequence &seq, PrefixCache::Keep keep) {
  if (seq.cursor.holds()) {
    double now = clock();
    cache.release(seq.cursor, now, seq.request.systemPrompt, keep,
                  keep == PrefixCache::Keep::Session ? now + config.sessionTtlSeconds : 0);
  }
  seq.blocks.releaseAll(blocks);
}

void Engine::finish(Sequence &seq, FinishReason reason) {
  bool session = config.sessionTtlSeconds > 0 && host.numSlots() > 0 &&
                 reason != FinishReason::Cancelled && reason != FinishReason::HandedOff;
  releaseBlocks(seq, session ? PrefixCache::Keep::Session : PrefixCache::Keep::None);
  if (drafter)
    drafter->forget(seq.request.id);
  seq.result.tokens.assign(seq.tokens.begin() + static_cast<long>(seq.promptLength),
                           seq.tokens.end());
  seq.result.finishReason = reason;
  seq.result.finish = clock();
  log(formatString("finish req %lld: %lld tokens (%s)", static_cast<long long>(seq.request.id),
                   static_cast<long long>(seq.generated()), finishReasonName(reason)));
  finished.push_back(std::move(seq.result));
}

int64_t Engine::blocksHeldByRequests() const {
  std::vector<int32_t> held;
  for (const auto &seq : running)
    held.insert(held.end(), seq->blocks.table().begin(), seq->blocks.table().end());
  std::sort(held.begin(), held.end());
  return std::unique(held.begin(), held.end()) - held.begin();
}

int64_t Engine::blocksHeldByRequests(RequestClass cls) const {
  std::vector<int32_t> held;
  for (const auto &seq : running)
    if (seq->request.cls == cls)
      held.insert(held.end(), seq->blocks.table().begin(), seq->blocks.table().end());
  std::sort(held.begin(), held.end());
  return std::unique(held.begin(), held.end()) - held.begin();
}

std::vector<RequestResult> Engine::takeFinished() {
  std::vector<RequestResult> out;
  out.swap(finished);
  return out;
}

void Engine::clearPrefixCache() {
  // Cursors point into the tree: let go first. Running sequences add their
  // full blocks again from the root at their next step.
  for (auto &seq : running)
    if (seq->cursor.holds())
      cache.release(seq->cursor, clock());
  cache.clear();
}

//===----------------------------------------------------------------------===//
// schedule()
//===----------------------------------------------------------------------===//

Expected<Engine::StepPlan> Engine::schedule() {
  if (planInFlight)
    return Error(formatString("step %lld is scheduled but not updated yet",
                              static_cast<long long>(planInFlight)));
  StepPlan plan;
  plan.step = ++numSteps;
  resetClassUsage();
  applyPreemptionHook(plan);
  scheduleRunning(plan);
  if (!plan.admissionStopped)
    admitWaiting(plan);
  if (drafter)
    if (Status s = draftProposals(plan); !s)
      return s.takeError(); // an abandoned step: the next one plans again
  if (!plan.empty()) {
    planInFlight = plan.step;
    return plan;
  }
  // Nothing runs and nothing can be admitted: every request was checked to
  // fit an empty cache, so this is a bug; report it instead of spinning.
  if (running.empty() && !plan.admissionStopped)
    if (Queue *q = admissionQueue())
      return Error("scheduler stalled: request " + std::to_string(q->front()->request.id) +
                   " cannot be admitted with " + std::to_string(blocks.numFree()) + " of " +
                   std::to_string(blocks.numBlocks()) + " blocks free");
  return plan;
}

void Engine::applyPreemptionHook(StepPlan &plan) {
  if (config.preemptEvery <= 0 || numSteps % config.preemptEvery != 0 || running.empty())
    return;
  preempt(newestRunning(0), "test hook", plan);
}

void Engine::scheduleRunning(StepPlan &plan) {
  // Oldest admission first: a decode token each, or the next chunk of an
  // unfinished prompt.
  for (size_t i = 0; i < running.size() && plan.numTokens < config.maxTokensPerStep;) {
    Sequence &seq = *running[i];
    int64_t n = chunkFor(seq, plan);
    if (n <= 0) { // its class's share of this step is spent
      ++i;
      continue;
    }
    if (!classBlocksFit(seq, n)) {
      preempt(newestRunning(i, seq.request.cls), "out of its class's KV blocks", plan);
      continue;
    }
    // A decoding sequence may verify proposed tokens in the same step.
    seq.proposed = n == 1 && seq.uncomputed() == 1 ? proposeFor(seq, plan) : std::vector<int64_t>();
    int64_t proposed = static_cast<int64_t>(seq.proposed.size());
    size_t held = seq.blocks.table().size();
    bool reserved = ensureBlocks(seq, n + proposed, plan.copies);
    if (!reserved && proposed) { // no room to speculate: decode alone
      seq.proposed.clear();
      proposed = 0;
      reserved = ensureBlocks(seq, n, plan.copies);
    }
    if (reserved) {
      if (proposed && !drafter)
        log(formatString("propose req %lld: %lld tokens", static_cast<long long>(seq.request.id),
                         static_cast<long long>(proposed)));
      usageOf(seq).blocks += static_cast<int64_t>(seq.blocks.table().size() - held);
      addToPlan(plan, seq, n + proposed, /*admitted=*/false);
      plan.sequences.back().numProposed = proposed;
      ++i;
      continue;
    }
    // Out of blocks: preempt the most recently admitted running sequence
    // (maybe this one) and admit nothing this step.
    preempt(newestRunning(i), "out of KV blocks", plan);
  }
}

std::vector<std::unique_ptr<Engine::Sequence>>::iterator Engine::newestRunning(size_t from) {
  return std::max_element(running.begin() + static_cast<long>(from), running.end(),
                          [](auto &a, auto &b) { return a->admittedAt < b->admittedAt; });
}

std::vector<std::unique_ptr<Engine::Sequence>>::iterator
Engine::newestRunning(size_t from, RequestClass cls) {
  auto best = running.end();
  for (auto it = running.begin() + static_cast<long>(from); it != running.end(); ++it)
    if ((*it)->request.cls == cls && (best == running.end() || (*it)->admittedAt > (*best)->admittedAt))
      best = it;
  return best;
}

void Engine::preempt(std::vector<std::unique_ptr<Sequence>>::iterator it, const char *why,
                     StepPlan &plan) {
  Sequence &seq = **it;
  seq.proposed.clear(); // it proposes again once it decodes again
  usageOf(seq).blocks -= static_cast<int64_t>(seq.blocks.table().size());
  usageOf(seq).seqs -= 1;
  std::string choice;
  bool swap = swapOnPreemption(seq, choice);
  log(formatString("preempt req %lld (%s): %s, %s", static_cast<long long>(seq.request.id),
                   className(seq.request.cls), why, choice.c_str()));
  numSwapPreemptions += swap;
  releaseBlocks(seq, swap ? PrefixCache::Keep::Swap : PrefixCache::Keep::None);
  seq.computed = 0;
  seq.admittedAt = -1;
  seq.queueKey = nextFrontKey--;
  ++seq.result.preemptions;
  ++numPreemptions;
  plan.preempted.push_back(seq.request.id);
  plan.admissionStopped = true;
  queueFor(seq).push_front(std::move(*it));
  running.erase(it);
}

bool Engine::swapOnPreemption(const Sequence &seq, std::string &why) const {
  int64_t tokens = static_cast<int64_t>(seq.tokens.size());
  why = formatString("recompute %lld tokens later", static_cast<long long>(tokens));
  int64_t n = seq.cursor.blocks(); // its full blocks in the tree
  if (host.numSlots() == 0 || !config.prefixCaching || n == 0 ||
      config.preemption == PreemptionMode::Recompute)
    return false;
  if (n > host.numSlots()) {
    why += formatString(" (%lld blocks to swap, the host tier holds %lld)",
                        static_cast<long long>(n), static_cast<long long>(host.numSlots()));
    return false;
  }
  // Out now and back at resumption, against computing its cached tokens
  // again (the rest, a partial block, is recomputed either way).
  TransferStats moved = mover.snapshot();
  double rate = moved.copyRate() > 0 ? moved.copyRate() : kAssumedCopyRate;
  double bytes = 2.0 * static_cast<double>(n) * static_cast<double>(pools.blockBytes());
  double copyMs = 1e3 * bytes / rate;
  int64_t cached = n * blocks.blockSize();
  std::string copy =
      formatString("%lld blocks to the host (%.2f ms at %.4g MB/s%s)", static_cast<long long>(n),
                   copyMs, rate / 1e6, moved.copyRate() > 0 ? "" : " assumed");
  if (config.preemption == PreemptionMode::Swap || prefillRate() <= 0) {
    // Forced, or nothing measured yet: moving bytes is the safe bet.
    why = "swap " + copy;
    return true;
  }
  double recomputeMs = 1e3 * static_cast<double>(cached) / prefillRate();
  std::string recompute = formatString("%lld tokens (%.2f ms at %.0f tokens/s)",
                                       static_cast<long long>(cached), recomputeMs, prefillRate());
  if (copyMs < recomputeMs) {
    why = "swap " + copy + " instead of recomputing " + recompute;
    return true;
  }
  why += "; recomputing " + recompute + " is cheaper than swapping " + copy;
  return false;
}

bool Engine::aged(const Sequence &seq) const {
  return numSteps - seq.submittedAt >= config.batchAgingSteps;
}

Engine::Queue *Engine::admissionQueue() {
  // Interactive first; a batch request that waited long enough counts as
  // interactive, and then the one queued first goes first.
  bool batchAged = !batchQueue.empty() && aged(*batchQueue.front());
  if (interactiveQueue.empty())
    return batchQueue.empty() ? nullptr : &batchQueue;
  if (batchAged && batchQueue.front()->queueKey < interactiveQueue.front()->queueKey)
    return &batchQueue;
  return &interactiveQueue;
}

void Engine::orderByCachedPrefix(Queue &queue) {
  if (queue.size() < 2 || queue.size() > 128)
    return;
  struct Key {
    bool waitedLong;
    int64_t cached, queueKey;
  };
  std::vector<std::pair<Key, std::unique_ptr<Sequence>>> keyed;
  for (auto &seq : queue) {
    bool waitedLong = aged(*seq);
    Key k{waitedLong, waitedLong ? 0 : cache.cachedTokens(seq->tokens), seq->queueKey};
    keyed.emplace_back(k, std::move(seq));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto &a, const auto &b) {
    if (a.first.waitedLong != b.first.waitedLong)
      return a.first.waitedLong;
    if (a.first.cached != b.first.cached)
      return a.first.cached > b.first.cached;
    return a.first.queueKey < b.first.queueKey;
  });
  queue.clear();
  for (auto &[k, seq] : keyed)
    queue.push_back(std::move(seq));
}

void Engine::adoptCachedPrefix(Sequence &seq) {
  std::vector<std::string> loads;
  PrefixCache::Match hit = cache.match(seq.tokens, clock(), trace ? &loads : nullptr, &seq.cursor);
  for (const std::string &line : loads)
    log(line);
  seq.blocks.adoptPrefix(blocks, hit.blocks, hit.tokens);
  seq.computed = hit.tokens;
  seq.result.cachedPromptTokens =
      std::max(seq.result.cachedPromptTokens,
               std::min<int64_t>(hit.tokens, static_cast<int64_t>(seq.promptLength)));
}

const Engine::Sequence *Engine::prefixProducer(const Sequence &seq, const StepPlan &plan,
                                               int64_t &sharedTokens) const {
  if (seq.prefixWaits >= config.prefixWaitSteps)
    return nullptr;
  // The last prompt token is always computed by the request itself.
  int64_t bs = blocks.blockSize();
  int64_t limit = static_cast<int64_t>(seq.tokens.size()) - 1;
  const Sequence *best = nullptr;
  sharedTokens = 0;
  for (const auto &p : running) {
    if (p->uncomputed() <= 1) // decoding: its prompt's blocks are cached
      continue;
    int64_t n = std::min<int64_t>(limit, static_cast<int64_t>(p->tokens.size()));
    if (n <= sharedTokens)
      continue;
    int64_t common =
        std::mismatch(seq.tokens.begin(), seq.tokens.begin() + n, p->tokens.begin()).first -
        seq.tokens.begin();
    common -= common % bs;
    if (common <= sharedTokens || p->computed >= common)
      continue;
    // Due this step or the next: what it computes now and one more step.
    int64_t now = 0;
    for (const ScheduledSequence &s : plan.sequences)
      if (s.sequence == p.get())
        now = s.numTokens;
    if (common - p->computed - now > config.maxTokensPerStep)
      continue;
    best = p.get();
    sharedTokens = common;
  }
  // Blocks cached already (another request computed them): no wait.
  if (best && cache.cachedTokens(seq.tokens) >= sharedTokens)
    return nullptr;
  return best;
}

bool Engine::loadsPending(const Sequence &seq) const {
  if (!copyQueue)
    return false;
  for (int32_t b : seq.loading)
    if (copyQueue->writePending(b))
      return true;
  return false;
}

bool Engine::startLoads(Sequence &seq, const StepPlan &plan, const HostLoad &load) {
  // Only behind other sequences (a step of this one alone would wait), and
  // only into free blocks with a block to spare for each running sequence's
  // next step: the loaded blocks are the cache's alone until it is
  // admitted, and evicted again before that they were loaded for nothing.
  // Otherwise the match loads them now and the step waits for them.
  if (!copyQueue || load.need == 0 || plan.sequences.empty() ||
      load.need + static_cast<int64_t>(running.size()) > blocks.numFree())
    return false;
  std::vector<std::string> loads;
  seq.loading = cache.prefetch(seq.tokens, clock(), trace ? &loads : nullptr);
  if (seq.loading.empty())
    return false;
  for (const std::string &line : loads)
    log(line);
  log(formatString("load req %lld: %zu blocks from the host, admitted once they are in",
                   static_cast<long long>(seq.request.id), seq.loading.size()));
  return true;
}

Engine::HostLoad Engine::hostLoadFor(const Sequence &seq, const StepPlan &plan) const {
  HostLoad load;
  if (!config.prefixCaching || host.numSlots() == 0)
    return load;
  int64_t resident = 0;
  int64_t cached = cache.cachedTokens(seq.tokens, &resident);
  load.residentBlocks = resident / blocks.blockSize();
  if (cached == resident) // nothing to load
    return load;
  // Device blocks for the loads and the first chunk after them.
  int64_t chunk = std::min<int64_t>(static_cast<int64_t>(seq.tokens.size()) - cached,
                                    config.maxTokensPerStep - plan.numTokens);
  load.need = blocks.blocksFor(cached + std::max<int64_t>(chunk, 1)) - load.residentBlocks;
  return load;
}

bool Engine::hostLoadsFit(const HostLoad &load) const {
  // With nothing running, nothing would free blocks for it later: go ahead
  // (a match loads what fits).
  if (load.need == 0 || running.empty())
    return true;
  // Blocks only the cache holds can be evicted for it (its own resident
  // path aside).
  int64_t cacheOnly = blocks.numBlocks() - blocks.numFree() - blocksHeldByRequests();
  return load.need <= blocks.numFree() + cacheOnly - load.residentBlocks;
}

void Engine::admitWaiting(StepPlan &plan) {
  // Requests waiting for a running prompt's blocks leave the queue for
  // this step and go back to its front, in order, at the end.
  std::vector<std::unique_ptr<Sequence>> waiting;
  if (config.admissionOrder == AdmissionOrder::LongestPrefix && config.prefixCaching) {
    orderByCachedPrefix(interactiveQueue);
    orderByCachedPrefix(batchQueue);
  }
  while (plan.numTokens < config.maxTokensPerStep &&
         static_cast<int64_t>(running.size()) < config.maxNumSeqs) {
    Queue *queue = admissionQueue();
    if (!queue)
      break;
    Sequence &seq = *queue->front();
    const ClassLimits &limits = limitsOf(seq);
    if ((limits.maxNumSeqs && usageOf(seq).seqs >= limits.maxNumSeqs) ||
        chunkFor(seq, plan) <= 0)
      break; // its class is full: wait
    if (!seq.loading.empty() && !plan.sequences.empty() && loadsPending(seq)) {
      waiting.push_back(std::move(queue->front())); // still loading: let others run
      queue->pop_front();
      continue;
    }
    seq.loading.clear();
    int64_t shared = 0;
    if (const Sequence *producer = config.prefixCaching ? prefixProducer(seq, plan, shared)
                                                        : nullptr) {
      log(formatString("defer req %lld: its first %lld tokens are being computed by req %lld",
                       static_cast<long long>(seq.request.id), static_cast<long long>(shared),
                       static_cast<long long>(producer->request.id)));
      ++seq.prefixWaits;
      waiting.push_back(std::move(queue->front()));
      queue->pop_front();
      continue;
    }
    HostLoad load = hostLoadFor(seq, plan);
    if (!hostLoadsFit(load)) {
      log(formatString("wait req %lld: %lld free blocks, its blocks stay on the host",
                       static_cast<long long>(seq.request.id),
                       static_cast<long long>(blocks.numFree())));
      break;
    }
    if (startLoads(seq, plan, load)) {
      waiting.push_back(std::move(queue->front()));
      queue->pop_front();
      continue;
    }
    if (config.prefixCaching)
      adoptCachedPrefix(seq);
    int64_t n = chunkFor(seq, plan);
    if (n <= 0 || !classBlocksFit(seq, n) || !ensureBlocks(seq, n, plan.copies)) {
      // Give back the adopted prefix while waiting: held, those blocks
      // could neither be evicted nor used by the running sequences.
      releaseBlocks(seq);
      seq.computed = 0;
      log(formatString("wait req %lld: %lld free blocks", static_cast<long long>(seq.request.id),
                       static_cast<long long>(blocks.numFree())));
      break;
    }
    seq.admittedAt = admissionCounter++;
    bool isAged = seq.request.cls == RequestClass::Batch && aged(seq);
    log(formatString("admit req %lld (%s%s): %lld cached tokens, chunk %lld",
                     static_cast<long long>(seq.request.id), className(seq.request.cls),
                     isAged ? ", aged" : "", static_cast<long long>(seq.computed),
                     static_cast<long long>(n)));
    addToPlan(plan, seq, n, /*admitted=*/true);
    running.push_back(std::move(queue->front()));
    queue->pop_front();
  }
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it)
    queueFor(**it).push_front(std::move(*it));
}

bool Engine::ensureBlocks(Sequence &seq, int64_t tokens, std::vector<BlockCopy> &copies) {
  int64_t need = blocks.blocksFor(seq.computed + tokens) -
                 static_cast<int64_t>(seq.blocks.table().size()) + 1; // +1: a possible copy
  if (need > blocks.numFree() && config.prefixCaching) {
    std::vector<std::string> evicted;
    cache.evict(need, clock(), trace ? &evicted : nullptr);
    for (const std::string &line : evicted)
      log(line);
  }
  auto r = seq.blocks.reserve(blocks, tokens);
  if (!r)
    return false;
  if (r->has_value())
    copies.push_back(**r);
  return true;
}

void Engine::addToPlan(StepPlan &plan, Sequence &seq, int64_t tokens, bool admitted) {
  plan.sequences.push_back({&seq, seq.request.id, tokens, seq.computed, admitted});
  plan.numTokens += tokens;
  ClassUsage &usage = usageOf(seq);
  usage.tokens += tokens;
  if (seq.uncomputed() > 1) {
    usage.prefillTokens += tokens;
    numPromptTokensComputed += tokens;
  }
  if (admitted) {
    usage.seqs += 1;
    usage.blocks += static_cast<int64_t>(seq.blocks.table().size());
  }
}

//===----------------------------------------------------------------------===//
// Class limits
//===----------------------------------------------------------------------===//

const ClassLimits &Engine::limitsOf(const Sequence &seq) const {
  return config.classLimits[seq.request.cls == RequestClass::Batch];
}

Engine::ClassUsage &Engine::usageOf(const Sequence &seq) {
  return classUsage[seq.request.cls == RequestClass::Batch];
}

void Engine::resetClassUsage() {
  classUsage[0] = classUsage[1] = ClassUsage();
  for (const auto &seq : running) {
    ClassUsage &usage = usageOf(*seq);
    usage.seqs += 1;
    usage.blocks += static_cast<int64_t>(seq->blocks.table().size());
  }
}

int64_t Engine::classTokenRoom(const Sequence &seq) {
  int64_t limit = limitsOf(seq).maxTokensPerStep;
  return limit ? limit - usageOf(seq).tokens : std::numeric_limits<int64_t>::max();
}

int64_t Engine::chunkFor(const Sequence &seq, const StepPlan &plan) {
  int64_t n = std::min({seq.uncomputed(), config.maxTokensPerStep - plan.numTokens,
                        classTokenRoom(seq)});
  int64_t prefillLimit = limitsOf(seq).maxPrefillTokensPerStep;
  if (prefillLimit && seq.uncomputed() > 1)
    n = std::min(n, prefillLimit - usageOf(seq).prefillTokens);
  return n;
}

bool Engine::classBlocksFit(const Sequence &seq, int64_t tokens) {
  int64_t limit = limitsOf(seq).maxBlocks;
  if (!limit)
    return true;
  int64_t more = std::max<int64_t>(0, blocks.blocksFor(seq.computed + tokens) -
                                          static_cast<int64_t>(seq.blocks.table().size()));
  return usageOf(seq).blocks + more <= limit;
}

int64_t Engine::numRunning(RequestClass cls) const {
  return std::count_if(running.begin(), running.end(),
                       [&](const auto &seq) { return seq->request.cls == cls; });
}

//===----------------------------------------------------------------------===//
// execute()
//===----------------------------------------------------------------------===//

void Engine::waitForCopies(const StepPlan &plan) {
  // Reading a block an offload is copying out is fine; writing it is not,
  // nor reading one a load is still filling.
  std::vector<int32_t> read, written;
  int64_t bs = blocks.blockSize();
  for (const ScheduledSequence &s : plan.sequences) {
    const std::vector<int32_t> &table = s.sequence->blocks.table();
    size_t firstWritten = static_cast<size_t>(s.firstPosition / bs);
    for (size_t i = 0; i < table.size(); ++i)
      (i < firstWritten ? read : written).push_back(table[i]);
  }
  for (const BlockCopy &c : plan.copies) {
    read.push_back(c.src);
    written.push_back(c.dst);
  }
  copyQueue->waitForBlocks(written);
  copyQueue->waitForLoads(read);
}

Expected<Tensor> Engine::execute(const StepPlan &plan) {
  if (plan.step != planInFlight || plan.empty())
    return Error(formatString("execute: step %lld is not the scheduled step",
                              static_cast<long long>(plan.step)));
  if (copyQueue) // host-tier copies still touching the blocks this step uses
    waitForCopies(plan);
  if (artifact)
    for (const BlockCopy &c : plan.copies) {
      if (poolMirror)
        poolMirror->copyBlock(c.src, c.dst);
      pools.copyBlock(c.src, c.dst);
    }
  std::vector<StepSequence> batch;
  batch.reserve(plan.sequences.size());
  for (const ScheduledSequence &s : plan.sequences) {
    const Sequence &seq = *s.sequence;
    auto first = seq.tokens.begin() + s.firstPosition;
    int64_t own = s.numTokens - s.numProposed;
    std::vector<int64_t> tokens(first, first + own);
    tokens.insert(tokens.end(), seq.proposed.begin(), seq.proposed.end());
    batch.push_back({std::move(tokens), s.firstPosition, seq.blocks.table(),
                     /*allLogits=*/s.numProposed > 0});
  }
  log(formatString("step %lld: %zu sequences, %lld tokens, %lld free blocks",
                   static_cast<long long>(plan.step), plan.sequences.size(),
                   static_cast<long long>(plan.numTokens),
                   static_cast<long long>(blocks.numFree())));
  auto start = std::chrono::steady_clock::now();
  if (poolMirror && !model)
    poolMirror->step(batch);
  Expected<Tensor> logits = model ? model(batch) : runStep(*artifact, pools, batch);
  if (!logits) {
    endStep();
    return logits;
  }
  bool prefill =
      std::any_of(plan.sequences.begin(), plan.sequences.end(),
                  [](const ScheduledSequence &s) { return s.sequence->uncomputed() > 1; });
  if (prefill) {
    prefillTokens += plan.numTokens;
    prefillSeconds += secondsSince(start);
  }
  return logits;
}

//===----------------------------------------------------------------------===//
// update()
//===----------------------------------------------------------------------===//

Status Engine::update(const StepPlan &plan, const Tensor &logits) {
  if (plan.step != planInFlight || plan.empty())
    return Error(formatString("update: step %lld is not the scheduled step",
                              static_cast<long long>(plan.step)));
  int64_t rows = 0;
  for (const ScheduledSequence &s : plan.sequences)
    rows += 1 + s.numProposed;
  if (logits.dtype() != DType::F32 || logits.rank() != 2 || logits.shape()[0] != rows ||
      logits.shape()[1] != vocab) {
    endStep();
    return Error(formatString("update: the logits are not f32 [%lld, %lld]",
                              static_cast<long long>(rows), static_cast<long long>(vocab)));
  }
  std::vector<const Sequence *> done;
  int64_t row = 0;
  for (const ScheduledSequence &s : plan.sequences) {
    Sequence &seq = *s.sequence;
    const float *first = logits.data<float>() + row * vocab;
    row += 1 + s.numProposed;
    std::optional<FinishReason> reason;
    if (s.numProposed) {
      reason = acceptProposals(seq, s, first);
    } else {
      commitTokens(seq, s.numTokens);
      seq.blocks.releaseUnused(blocks); // reserved for proposals a draft did not make
      if (seq.uncomputed() > 0)
        continue; // a prompt chunk: more to prefill
      sampleNext(seq, first);
      reason = finishReasonFor(seq);
      if (!reason && handOff && seq.generated() == 1) {
        handOffSequence(seq);
        reason = FinishReason::HandedOff;
      }
    }
    if (reason) {
      finish(seq, *reason);
      done.push_back(&seq);
    }
  }
  if (!done.empty())
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [&](auto &s) {
                                   return std::find(done.begin(), done.end(), s.get()) !=
                                          done.end();
                                 }),
                  running.end());
  endStep();
  return {};
}

void Engine::handOffSequence(Sequence &seq) {
  PrefilledRequest p;
  p.id = seq.request.id;
  p.tokens = seq.tokens;
  if (artifact) {
    int64_t n = blocks.blocksFor(seq.computed);
    size_t bytes = pools.blockBytes();
    p.kv.resize(static_cast<size_t>(n) * bytes);
    for (int64_t i = 0; i < n; ++i)
      pools.copyOut(seq.blocks.table()[static_cast<size_t>(i)], p.kv.data() + i * bytes);
  }
  log(formatString("hand off req %lld: %lld prompt tokens, %zu bytes of KV",
                   static_cast<long long>(p.id), static_cast<long long>(seq.computed),
                   p.kv.size()));
  handOff(std::move(p));
}

Expected<bool> Engine::adoptPrefilled(Request request, const PrefilledRequest &prefilled) {
  if (planInFlight)
    return Error("adoptPrefilled: a step is planned");
  if (Status s = validateRequest(request); !s)
    return s.takeError();
  const std::vector<int64_t> &tokens = prefilled.tokens;
  const size_t prompt = request.prompt.size();
  if (prefilled.id != request.id || tokens.size() != prompt + 1 ||
      !std::equal(request.prompt.begin(), request.prompt.end(), tokens.begin()) ||
      tokens.back() < 0 || tokens.back() >= vocab)
    return Error(formatString("request %lld: the prefilled tokens are not its prompt and one "
                              "token of the vocabulary",
                              static_cast<long long>(request.id)));
  const int64_t computed = static_cast<int64_t>(prompt);
  const int64_t n = blocks.blocksFor(computed);
  const size_t bytes = artifact ? pools.blockBytes() : 0;
  if (prefilled.kv.size() != static_cast<size_t>(n) * bytes)
    return Error(formatString("request %lld: %zu bytes of prefilled K/V, its %lld blocks are "
                              "%zu",
                              static_cast<long long>(request.id), prefilled.kv.size(),
                              static_cast<long long>(n), static_cast<size_t>(n) * bytes));
  // Its blocks to its last token, beyond what the running sequences will
  // still take to theirs: a decode engine that admits this way never
  // preempts (which would recompute a prompt here).
  auto fullLength = [&](const Request &r) {
    return blocks.blocksFor(static_cast<int64_t>(r.prompt.size()) + r.sampling.maxTokens);
  };
  int64_t growth = 0;
  for (const auto &seq : running)
    growth += std::max<int64_t>(
        0, fullLength(seq->request) - static_cast<int64_t>(seq->blocks.table().size()));
  int64_t need = fullLength(request) + growth;
  if (need > blocks.numFree() && config.prefixCaching)
    cache.evict(need, clock(), nullptr);
  if (need > blocks.numFree())
    return false;
  auto seq = std::make_unique<Sequence>(std::move(request));
  seq->tokens = tokens;
  seq->promptLength = prompt;
  if (!seq->blocks.reserve(blocks, computed))
    return false;
  seq->blocks.commit(computed);
  seq->computed = computed;
  for (int64_t i = 0; i < n; ++i)
    pools.copyIn(prefilled.kv.data() + i * bytes, seq->blocks.table()[static_cast<size_t>(i)]);
  if (config.prefixCaching)
    cache.extend(seq->cursor, seq->tokens, seq->computed, seq->blocks.table(), clock(),
                 seq->request.systemPrompt);
  if (seq->sampler.sampling())
    seq->sampler.skipDraws(1); // the first token's draw, made by the prefill engine
  seq->result.id = seq->request.id;
  seq->result.arrival = seq->result.firstToken = clock();
  seq->submittedAt = numSteps;
  seq->queueKey = nextBackKey++;
  seq->admittedAt = admissionCounter++;
  log(formatString("adopt req %lld (%s): %lld prompt tokens computed elsewhere",
                   static_cast<long long>(seq->request.id), className(seq->request.cls),
                   static_cast<long long>(computed)));
  running.push_back(std::move(seq));
  return true;
}

void Engine::commitTokens(Sequence &seq, int64_t tokens) {
  seq.computed += tokens;
  seq.blocks.commit(tokens);
  // Full blocks are shared as soon as they are computed, so requests
  // admitted while this one still runs reuse its prompt.
  if (config.prefixCaching)
    cache.extend(seq.cursor, seq.tokens, seq.computed, seq.blocks.table(), clock(),
                 seq.request.systemPrompt);
}

void Engine::sampleNext(Sequence &seq, const float *logits, int64_t proposal,
                        const float *draftProbs) {
  if (config.onLogits)
    config.onLogits(seq.request.id, logits, vocab);
  seq.tokens.push_back(draftProbs
                           ? seq.sampler.verify(logits, vocab, seq.tokens, proposal, draftProbs)
                           : seq.sampler.next(logits, vocab, seq.tokens));
  if (config.onToken)
    config.onToken(seq.request.id, seq.tokens.back());
  if (seq.result.firstToken < 0)
    seq.result.firstToken = clock();
}

std::vector<int64_t> Engine::proposeFor(const Sequence &seq, const StepPlan &plan) {
  const SpeculativeConfig &spec = config.speculative;
  const SamplingParams &params = seq.sampler.params();
  if (!spec.enabled() || static_cast<int64_t>(running.size()) > spec.maxBatch)
    return {};
  // Within the step's verification budget, the step's and the class's
  // token rooms (besides the decode token) and the request's max_tokens (a
  // step appends at most k + 1).
  int64_t wanted = spec.adaptive ? adaptiveProposals(seq.result.acceptedTokens,
                                                     seq.result.proposedTokens, spec.numTokens)
                                 : spec.numTokens;
  int64_t verifyRoom = spec.maxVerifyTokens > 0
                           ? spec.maxVerifyTokens / static_cast<int64_t>(running.size()) - 1
                           : wanted;
  int64_t k = std::min({wanted, verifyRoom,
                        std::min(config.maxTokensPerStep - plan.numTokens, classTokenRoom(seq)) - 1,
                        params.maxTokens - seq.generated() - 1});
  if (k <= 0)
    return {};
  // A draft model's tokens come from draftProposals once the step is
  // planned; here only their number is decided (k slots of -1).
  std::vector<int64_t> proposal =
      drafter ? std::vector<int64_t>(static_cast<size_t>(k), -1)
              : proposeNgram(seq.tokens, spec.ngramMin, spec.ngramMax, k);
  if (!proposal.empty() && !classBlocksFit(seq, 1 + static_cast<int64_t>(proposal.size())))
    return {};
  return proposal;
}

Status Engine::setDraft(std::unique_ptr<DraftModel> draft) {
  if (draft)
    if (Status s = draft->attach(artifact ? &pools : nullptr,
                                 artifact ? &artifact->manifest() : nullptr);
        !s)
      return s;
  drafter = std::move(draft);
  return {};
}

Status Engine::draftProposals(StepPlan &plan) {
  std::vector<DraftModel::Request> requests;
  std::vector<ScheduledSequence *> speculating;
  for (ScheduledSequence &s : plan.sequences)
    if (s.numProposed > 0) {
      const Sequence &seq = *s.sequence;
      requests.push_back({seq.request.id, &seq.tokens, s.numProposed, &seq.sampler.params(),
                          &seq.blocks.table(), s.firstPosition});
      speculating.push_back(&s);
    }
  if (requests.empty())
    return {};
  if (copyQueue) // the draft reads and writes the pools now
    waitForCopies(plan);
  // A draft on the target's pools reads the context from them now: the
  // copy-on-write copies are made before it runs, not in execute().
  if (drafter->sharesKV()) {
    if (artifact)
      for (const BlockCopy &c : plan.copies) {
        if (poolMirror)
          poolMirror->copyBlock(c.src, c.dst);
        pools.copyBlock(c.src, c.dst);
      }
    plan.copies.clear();
  }
  Expected<std::vector<DraftModel::Proposal>> proposals = drafter->propose(requests);
  for (size_t i = 0; i < speculating.size(); ++i) {
    ScheduledSequence &s = *speculating[i];
    Sequence &seq = *s.sequence;
    seq.proposed.clear();
    seq.proposalProbs.clear();
    if (proposals) {
      seq.proposed = std::move((*proposals)[i].tokens);
      seq.proposalProbs = std::move((*proposals)[i].probs);
    }
    // Fewer than counted (the draft's KV pool was full): a shorter step.
    int64_t missing = s.numProposed - static_cast<int64_t>(seq.proposed.size());
    s.numProposed -= missing;
    s.numTokens -= missing;
    plan.numTokens -= missing;
    if (s.numProposed)
      log(formatString("propose req %lld: %lld tokens from the draft",
                       static_cast<long long>(seq.request.id),
                       static_cast<long long>(s.numProposed)));
  }
  if (!proposals)
    return proposals.takeError();
  return {};
}

std::optional<FinishReason> Engine::acceptProposals(Sequence &seq, const ScheduledSequence &s,
                                                    const float *rows) {
  // Row j is the model's distribution after the decode token (j = 0) or
  // after proposal j; proposal j + 1 stands while it equals the token the
  // sampler draws from row j. For a sampled request that is speculative
  // sampling's rule for a proposal of probability 1 (prompt lookup): kept
  // with probability p(x) = min(1, p(x) / q(x)); when not, the drawn token
  // comes from p without x, renormalised, which is max(0, p - q)
  // normalised. Each appended token takes one draw, in order, as without
  // speculation: with the same seed, the same tokens.
  // A draft model's proposal for a sampled request comes with its
  // distribution q, and Sampler::verify applies the general rule.
  std::vector<int64_t> proposed;
  proposed.swap(seq.proposed);
  std::vector<float> probs;
  probs.swap(seq.proposalProbs);
  int64_t accepted = 0;
  std::optional<FinishReason> reason;
  for (int64_t j = 0; j <= s.numProposed; ++j) {
    bool general = j < s.numProposed && !probs.empty();
    sampleNext(seq, rows + j * vocab, general ? proposed[j] : -1,
               general ? probs.data() + j * vocab : nullptr);
    reason = finishReasonFor(seq);
    if (reason || j == s.numProposed || seq.tokens.back() != proposed[j])
      break;
    ++accepted;
  }
  // The decode token and the accepted proposals have their K/V in the
  // cache; the last appended token is computed by the next step.
  commitTokens(seq, 1 + accepted);
  seq.blocks.releaseUnused(blocks);
  seq.result.speculativeSteps += 1;
  seq.result.proposedTokens += s.numProposed;
  seq.result.acceptedTokens += accepted;
  log(formatString("verify req %lld: %lld of %lld proposed kept, %lld rolled back",
                   static_cast<long long>(seq.request.id), static_cast<long long>(accepted),
                   static_cast<long long>(s.numProposed),
                   static_cast<long long>(s.numProposed - accepted)));
  return reason;
}

std::optional<FinishReason> Engine::finishReasonFor(const Sequence &seq) const {
  if (seq.sampler.isStop(seq.tokens.back()))
    return FinishReason::Stop;
  if (seq.generated() >= seq.request.sampling.maxTokens)
    return FinishReason::Length;
  return std::nullopt;
}

void Engine::endStep() {
  planInFlight = 0;
  std::vector<int64_t> ids;
  ids.swap(deferredCancels);
  for (int64_t id : ids)
    cancel(id);
}

//===----------------------------------------------------------------------===//
// step()
//===----------------------------------------------------------------------===//

Status Engine::step() {
  if (idle())
    return {};
  Expected<StepPlan> plan = schedule();
  if (!plan)
    return plan.takeError();
  if (plan->empty())
    return {};
  Expected<Tensor> logits = execute(*plan);
  if (!logits)
    return logits.takeError();
  return update(*plan, *logits);
}

} // namespace xfmr::rt
