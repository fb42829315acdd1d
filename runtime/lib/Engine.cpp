//===- Engine.cpp - continuous batching over a paged-KV step function -----===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <cstdio>

namespace xfmr::rt {

struct Engine::Sequence {
  Request request;
  Sampler sampler;
  std::vector<int64_t> tokens; ///< prompt, then generated
  size_t promptLength = 0;
  int64_t computed = 0;        ///< tokens whose K/V are in the cache
  SequenceBlocks blocks;
  RequestResult result;
  int64_t admittedAt = -1;     ///< admission order (preemption picks the latest)
  int64_t waitingSince = 0;    ///< step it (re-)entered the queue
  bool prefixChecked = false;

  explicit Sequence(Request r) : request(std::move(r)), sampler(request.sampling) {}
  int64_t generated() const { return static_cast<int64_t>(tokens.size() - promptLength); }
};

namespace {

const char *className(RequestClass c) {
  return c == RequestClass::Interactive ? "interactive" : "batch";
}

} // namespace

Engine::Engine(const Artifact &artifact, KVPools pools, HostKVPool host, EngineConfig config,
               Clock clock, Trace trace)
    : artifact(artifact), pools(std::move(pools)), host(std::move(host)),
      mover(this->pools, this->host), config(config), clock(std::move(clock)),
      trace(std::move(trace)), blocks(this->pools.numBlocks(), this->pools.blockSize()),
      cache(blocks, config.cachePolicy, &mover, this->host.numSlots()) {
  for (const TensorSpec &out : artifact.manifest().outputs)
    if (out.rank() == 2 && out.shape[1].isStatic())
      vocab = out.shape[1].value;
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
  std::unique_ptr<Engine> e(new Engine(artifact, pools.take(), host.take(), config,
                                       std::move(clock), std::move(trace)));
  if (e->vocab < 1)
    return Error(artifact.directory() + ": the step function has no [tokens, vocab] logits");
  e->log(e->blocks.summary(typicalSequenceTokens > 0 ? typicalSequenceTokens
                                                     : e->blocks.blockSize()));
  if (e->host.numSlots() > 0)
    e->log(formatString("host tier: %lld blocks (%.1f MiB)", static_cast<long long>(e->host.numSlots()),
               static_cast<double>(e->host.bytes()) / (1 << 20)));
  return e;
}

void Engine::log(const std::string &line) {
  if (trace)
    trace(line);
}

Status Engine::submit(Request request) {
  if (request.prompt.empty())
    return Error("request " + std::to_string(request.id) + ": empty prompt");
  for (int64_t t : request.prompt)
    if (t < 0 || t >= vocab)
      return Error("request " + std::to_string(request.id) + ": token " + std::to_string(t) +
                   " outside the vocabulary of " + std::to_string(vocab));
  if (Status s = validate(request.sampling, vocab); !s)
    return Error("request " + std::to_string(request.id) + ": " + s.error());
  int64_t need = blocks.blocksFor(static_cast<int64_t>(request.prompt.size()) +
                                  request.sampling.maxTokens);
  if (need > blocks.numBlocks())
    return Error(formatString("request %lld can never fit: prompt %zu + max_tokens %lld tokens need %lld "
                     "blocks of %lld, the KV cache has %lld",
                     static_cast<long long>(request.id), request.prompt.size(),
                     static_cast<long long>(request.sampling.maxTokens),
                     static_cast<long long>(need), static_cast<long long>(blocks.blockSize()),
                     static_cast<long long>(blocks.numBlocks())));
  auto seq = std::make_unique<Sequence>(std::move(request));
  seq->tokens = seq->request.prompt;
  seq->promptLength = seq->tokens.size();
  seq->result.id = seq->request.id;
  seq->result.arrival = clock();
  seq->waitingSince = numSteps;
  log(formatString("queue req %lld (%s, prompt %zu)", static_cast<long long>(seq->request.id),
          className(seq->request.cls), seq->promptLength));
  waiting.push_back(std::move(seq));
  return {};
}

void Engine::cancel(int64_t id) {
  for (auto it = waiting.begin(); it != waiting.end(); ++it)
    if ((*it)->request.id == id) {
      (*it)->blocks.releaseAll(blocks);
      finish(**it, "cancelled");
      waiting.erase(it);
      return;
    }
  for (auto it = running.begin(); it != running.end(); ++it)
    if ((*it)->request.id == id) {
      finish(**it, "cancelled");
      running.erase(it);
      return;
    }
}

void Engine::finish(Sequence &seq, const std::string &reason) {
  if (reason != "cancelled" && config.prefixCaching)
    cache.insert(seq.tokens, seq.blocks.table(), clock(), seq.request.systemPrompt);
  seq.blocks.releaseAll(blocks);
  seq.result.tokens.assign(seq.tokens.begin() + static_cast<long>(seq.promptLength),
                           seq.tokens.end());
  seq.result.finishReason = reason;
  seq.result.finish = clock();
  log(formatString("finish req %lld: %lld tokens (%s)", static_cast<long long>(seq.request.id),
          static_cast<long long>(seq.generated()), reason.c_str()));
  finished.push_back(std::move(seq.result));
}

void Engine::preempt(Sequence &seq, const char *why) {
  log(formatString("preempt req %lld (%s): %s, recompute %lld tokens later",
          static_cast<long long>(seq.request.id), className(seq.request.cls), why,
          static_cast<long long>(seq.tokens.size())));
  seq.blocks.releaseAll(blocks);
  seq.computed = 0;
  seq.prefixChecked = false;
  seq.admittedAt = -1;
  seq.waitingSince = numSteps;
  ++seq.result.preemptions;
  ++numPreemptions;
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

Status Engine::step() {
  if (idle())
    return {};
  ++numSteps;
  int64_t budget = config.maxTokensPerStep;
  std::vector<std::pair<Sequence *, int64_t>> scheduled;
  std::vector<BlockCopy> copies;
  bool admitNothing = false;

  if (config.preemptEvery > 0 && numSteps % config.preemptEvery == 0 && !running.empty()) {
    auto latest = std::max_element(running.begin(), running.end(), [](auto &a, auto &b) {
      return a->admittedAt < b->admittedAt;
    });
    preempt(**latest, "test hook");
    waiting.push_front(std::move(*latest));
    running.erase(latest);
    admitNothing = true;
  }

  // Running sequences first, oldest admission first: a decode token each, or
  // the next chunk of an unfinished prompt.
  for (size_t i = 0; i < running.size() && budget > 0;) {
    Sequence &seq = *running[i];
    int64_t n = std::min<int64_t>(static_cast<int64_t>(seq.tokens.size()) - seq.computed, budget);
    if (ensureBlocks(seq, n, copies)) {
      scheduled.push_back({&seq, n});
      budget -= n;
      ++i;
      continue;
    }
    // Out of blocks: preempt the most recently admitted running sequence
    // (maybe this one) and admit nothing this step.
    admitNothing = true;
    auto latest = std::max_element(running.begin() + static_cast<long>(i), running.end(),
                                   [](auto &a, auto &b) { return a->admittedAt < b->admittedAt; });
    preempt(**latest, "out of KV blocks");
    waiting.push_front(std::move(*latest));
    running.erase(latest);
  }

  // Admission: interactive first (batch requests that waited long enough
  // count as interactive), FIFO within a class.
  if (!admitNothing) {
    std::stable_sort(waiting.begin(), waiting.end(), [&](auto &a, auto &b) {
      auto rank = [&](const Sequence &s) {
        return s.request.cls == RequestClass::Interactive ||
                       numSteps - s.waitingSince >= config.batchAgingSteps
                   ? 0
                   : 1;
      };
      return rank(*a) < rank(*b);
    });
    while (!waiting.empty() && budget > 0 &&
           static_cast<int64_t>(running.size()) < config.maxNumSeqs) {
      Sequence &seq = *waiting.front();
      if (config.prefixCaching && !seq.prefixChecked && seq.blocks.table().empty()) {
        std::vector<std::string> loads;
        PrefixCache::Match hit = cache.match(seq.tokens, clock(), trace ? &loads : nullptr);
        for (const std::string &line : loads)
          log(line);
        seq.blocks.adoptPrefix(blocks, hit.blocks, hit.tokens);
        seq.computed = hit.tokens;
        seq.prefixChecked = true;
        seq.result.cachedPromptTokens =
            std::max(seq.result.cachedPromptTokens,
                     std::min<int64_t>(hit.tokens, static_cast<int64_t>(seq.promptLength)));
      }
      int64_t n = std::min<int64_t>(static_cast<int64_t>(seq.tokens.size()) - seq.computed, budget);
      if (!ensureBlocks(seq, n, copies)) {
        // Give back the adopted prefix while waiting: held, those blocks
        // could neither be evicted nor used by the running sequences.
        seq.blocks.releaseAll(blocks);
        seq.computed = 0;
        seq.prefixChecked = false;
        log(formatString("wait req %lld: %lld free blocks", static_cast<long long>(seq.request.id),
                static_cast<long long>(blocks.numFree())));
        break;
      }
      seq.admittedAt = admissionCounter++;
      log(formatString("admit req %lld (%s): %lld cached tokens, chunk %lld",
              static_cast<long long>(seq.request.id), className(seq.request.cls),
              static_cast<long long>(seq.computed), static_cast<long long>(n)));
      scheduled.push_back({&seq, n});
      budget -= n;
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
  }
  if (scheduled.empty()) {
    // Nothing runs and nothing can be admitted: every request was checked to
    // fit an empty cache, so this is a bug; report it instead of spinning.
    if (running.empty() && !waiting.empty() && !admitNothing)
      return Error("scheduler stalled: request " + std::to_string(waiting.front()->request.id) +
                   " cannot be admitted with " + std::to_string(blocks.numFree()) + " of " +
                   std::to_string(blocks.numBlocks()) + " blocks free");
    return {};
  }

  for (const BlockCopy &c : copies)
    pools.copyBlock(c.src, c.dst);
  std::vector<StepSequence> batch;
  for (auto [seq, n] : scheduled)
    batch.push_back({std::vector<int64_t>(seq->tokens.begin() + seq->computed,
                                          seq->tokens.begin() + seq->computed + n),
                     seq->computed, seq->blocks.table()});
  log(formatString("step %lld: %zu sequences, %lld tokens, %lld free blocks",
          static_cast<long long>(numSteps), scheduled.size(),
          static_cast<long long>(config.maxTokensPerStep - budget),
          static_cast<long long>(blocks.numFree())));
  Expected<Tensor> logits = runStep(artifact, pools, batch);
  if (!logits)
    return logits.takeError();

  int64_t row = 0; // logits has one row per scheduled sequence
  std::vector<Sequence *> done;
  for (auto [seq, n] : scheduled) {
    ++row;
    seq->computed += n;
    seq->blocks.commit(n);
    // Full blocks are shared as soon as they are computed, so requests
    // admitted while this one still runs reuse its prompt.
    if (config.prefixCaching && seq->computed >= blocks.blockSize())
      cache.insert(std::vector<int64_t>(seq->tokens.begin(), seq->tokens.begin() + seq->computed),
                   seq->blocks.table(), clock(), seq->request.systemPrompt);
    if (seq->computed < static_cast<int64_t>(seq->tokens.size()))
      continue; // a prompt chunk: more to prefill
    const float *rowLogits = logits->data<float>() + (row - 1) * vocab;
    if (config.onLogits)
      config.onLogits(seq->request.id, rowLogits, vocab);
    int64_t next = seq->sampler.next(rowLogits, vocab, seq->tokens);
    seq->tokens.push_back(next);
    if (seq->result.firstToken < 0)
      seq->result.firstToken = clock();
    if (seq->sampler.isStop(next))
      finish(*seq, "stop"), done.push_back(seq);
    else if (seq->generated() >= seq->request.sampling.maxTokens)
      finish(*seq, "length"), done.push_back(seq);
  }
  running.erase(std::remove_if(running.begin(), running.end(),
                               [&](auto &s) {
                                 return std::find(done.begin(), done.end(), s.get()) != done.end();
                               }),
                running.end());
  return {};
}

std::vector<RequestResult> Engine::takeFinished() {
  std::vector<RequestResult> out;
  out.swap(finished);
  return out;
}

} // namespace xfmr::rt
