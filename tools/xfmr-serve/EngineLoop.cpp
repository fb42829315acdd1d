//===- EngineLoop.cpp - the engine thread of xfmr-serve -------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "EngineLoop.h"

#include "xfmr/runtime/ExpertParallel.h"

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

namespace xfmr::serve {

using namespace xfmr::rt;
using json = nlohmann::json;

namespace {

double steadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char *reasonName(FinishReason reason) {
  return reason == FinishReason::Length ? "length" : "stop";
}

/// Whether `text` ends with a proper prefix of `stop`: the length of the
/// longest such suffix (0 if none).
size_t partialStopSuffix(const std::string &text, size_t from,
                         const std::string &stop) {
  size_t most = std::min(stop.size() - 1, text.size() - from);
  for (size_t k = most; k > 0; --k)
    if (text.compare(text.size() - k, k, stop, 0, k) == 0)
      return k;
  return 0;
}

} // namespace

struct EngineLoop::Pool {
  PoolSpec spec;
  double saturation = 0; ///< decode bandwidth saturation, smoothed
};

struct EngineLoop::Active {
  Active(Job j, int64_t id, const Tokenizer &tokenizer, Pool &pool)
      : job(std::move(j)), id(id),
        detok(tokenizer, job.skipSpecialTokens, job.prompt), pool(&pool),
        stopTokens(job.sampling.stopTokens.begin(),
                   job.sampling.stopTokens.end()) {
    for (const std::string &s : job.stop)
      maxStop = std::max(maxStop, s.size());
  }
  Job job;
  int64_t id;
  DecodeStream detok;
  Pool *pool;
  std::set<int64_t> stopTokens;
  std::string text; ///< generated text so far (cut at a stop string)
  size_t sent = 0;  ///< bytes of `text` streamed
  size_t maxStop = 0;
  int64_t generated = 0;
  double firstToken = -1, lastToken = -1;
  bool roleSent = false;
  bool done =
      false; ///< answered (the engine may still hold it until cancelled)
  bool cancelled = false; ///< cancelled before an answer
  const char *cancelMessage = nullptr;
};

EngineLoop::EngineLoop(const Artifact &artifact, const Tokenizer &tokenizer,
                       EngineLoopOptions options, Metrics &metrics)
    : artifact(artifact), tokenizer(tokenizer), options(std::move(options)),
      metrics(metrics) {
  start0 = steadySeconds();
}

EngineLoop::~EngineLoop() { stop(); }

double EngineLoop::now() const { return steadySeconds() - start0; }

Expected<std::unique_ptr<EngineLoop>>
EngineLoop::create(const Artifact &artifact, const Tokenizer &tokenizer,
                   EngineLoopOptions options, Metrics &metrics) {
  if (options.pools.empty())
    return Error("no pools");
  std::unique_ptr<EngineLoop> loop(
      new EngineLoop(artifact, tokenizer, std::move(options), metrics));
  const Manifest &m = artifact.manifest();
  loop->kvBytesPerToken =
      static_cast<double>(KVPools::bytesPerBlock(m)) /
      static_cast<double>(std::max<int64_t>(1, m.kvCache->blockSize));
  for (const PoolSpec &spec : loop->options.pools) {
    auto pool = std::make_unique<Pool>();
    pool->spec = spec;
    loop->pools.push_back(std::move(pool));
  }
  EngineConfig config = loop->options.engine;
  bool split = loop->options.pools.size() > 1 || loop->options.pools[0].share < 1;
  if (split) // pools are apart: batch requests never age into the interactive pool
    config.batchAgingSteps = std::numeric_limits<int64_t>::max() / 2;
  EngineLoop *self = loop.get();
  config.onToken = [self](int64_t id, int64_t token) { self->stepTokens.emplace_back(id, token); };
  Expected<std::unique_ptr<Engine>> engine =
      Engine::create(artifact, config, [self] { return self->now(); });
  if (!engine)
    return engine.takeError();
  loop->engine = engine.take();
  if (!loop->options.draftModel.empty() && config.speculative.enabled()) {
    Expected<std::unique_ptr<DraftModel>> draft = DraftModel::load(
        loop->options.draftModel, loop->engine->vocabulary(),
        loop->engine->totalBlocks() * m.kvCache->blockSize, config.maxTokensPerStep);
    if (!draft)
      return draft.takeError();
    if (Status s = loop->engine->setDraft(draft.take()); !s)
      return s.takeError();
  }
  if (split)
    for (const PoolSpec &spec : loop->options.pools) {
      auto share = [&](int64_t whole) {
        return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(whole) * spec.share));
      };
      ClassLimits limits;
      limits.maxBlocks = share(loop->engine->totalBlocks());
      limits.maxTokensPerStep = share(config.maxTokensPerStep);
      limits.maxNumSeqs = share(config.maxNumSeqs);
      loop->engine->setClassLimits(spec.cls, limits);
      if (spec.cls == RequestClass::Batch && loop->options.batchPrefillSlack > 0) {
        loop->batchLimits = limits;
        loop->batchPrefill = std::make_unique<PrefillBudget>(
            loop->options.batchPrefillSlack, loop->options.batchPrefillFloor,
            limits.maxTokensPerStep);
        loop->batchLimits.maxPrefillTokensPerStep = loop->batchPrefill->tokens();
        loop->engine->setClassLimits(spec.cls, loop->batchLimits);
      }
    }
  loop->waitingPerPool.assign(loop->pools.size(), 0);
  loop->declareMetrics();
  loop->updateGauges();
  return loop;
}

std::string EngineLoop::describe() const {
  std::string out;
  out += engine->summary(0) + "\n";
  if (pools.size() > 1 || pools[0]->spec.share < 1)
    for (const auto &pool : pools)
      out += formatString("pool %s (%s requests): %.0f%% of the KV blocks, of each step's "
                          "tokens and of the sequences\n",
                          pool->spec.name.c_str(),
                          pool->spec.cls == RequestClass::Batch ? "batch" : "interactive",
                          100 * pool->spec.share);
  return out;
}

std::optional<size_t> EngineLoop::poolFor(const std::string &name) const {
  for (size_t i = 0; i < pools.size(); ++i)
    if (pools[i]->spec.name == name)
      return i;
  RequestClass cls = RequestClass::Interactive;
  if (name == "batch")
    cls = RequestClass::Batch;
  else if (!name.empty() && name != "interactive")
    return std::nullopt;
  for (size_t i = 0; i < pools.size(); ++i)
    if (pools[i]->spec.cls == cls)
      return i;
  return 0;
}

//===----------------------------------------------------------------------===//
// Metrics
//===----------------------------------------------------------------------===//

Labels EngineLoop::labels(const Pool &pool) const {
  return {{"model_name", options.modelName}, {"pool", pool.spec.name}};
}

void EngineLoop::declareMetrics() {
  using K = Metrics::Kind;
  metrics.declare("xfmr:num_requests_running", K::Gauge,
                  "Requests in model execution batches.");
  metrics.declare("xfmr:num_requests_waiting", K::Gauge,
                  "Requests waiting to be processed.");
  metrics.declare(
      "xfmr:kv_cache_usage_perc", K::Gauge,
      "KV-cache usage: 1 means 100 percent (blocks held by running requests; "
      "blocks only the prefix cache holds count as free).");
  metrics.declare(
      "xfmr:kv_cache_blocks", K::Gauge,
      "KV-cache blocks by state (free; cached: held only by the prefix cache; "
      "used: held by running requests).");
  metrics.declare("xfmr:prompt_tokens_total", K::Counter,
                  "Prefill tokens processed.");
  metrics.declare("xfmr:generation_tokens_total", K::Counter,
                  "Generation tokens processed.");
  metrics.declare("xfmr:request_success_total", K::Counter,
                  "Requests finished, by finished_reason (stop, length, "
                  "cancelled, error).");
  metrics.declare("xfmr:num_preemptions_total", K::Counter, "Preemptions.");
  metrics.declare("xfmr:prefix_cache_queries_total", K::Counter,
                  "Prompt tokens looked up in the prefix cache.");
  metrics.declare("xfmr:prefix_cache_hits_total", K::Counter,
                  "Prompt tokens served by the prefix cache.");
  metrics.declare("xfmr:spec_decode_num_drafts_total", K::Counter,
                  "Speculative decoding: verification steps (steps that "
                  "checked proposed tokens).");
  metrics.declare("xfmr:spec_decode_num_draft_tokens_total", K::Counter,
                  "Speculative decoding: tokens proposed.");
  metrics.declare("xfmr:spec_decode_num_accepted_tokens_total", K::Counter,
                  "Speculative decoding: proposed tokens kept.");
  metrics.declare("xfmr:time_to_first_token_seconds", K::Histogram,
                  "Time from arrival to the first generated token.",
                  latencyBuckets());
  metrics.declare("xfmr:time_per_output_token_seconds", K::Histogram,
                  "Time between consecutive generated tokens of a request.",
                  latencyBuckets());
  metrics.declare("xfmr:e2e_request_latency_seconds", K::Histogram,
                  "Time from arrival to the last token.", latencyBuckets());
  metrics.declare(
      "xfmr:memory_read_bandwidth_bytes_per_second", K::Gauge,
      "The machine's read bandwidth measured at startup (all threads).");
  metrics.declare(
      "xfmr:decode_bandwidth_saturation", K::Gauge,
      "Weight and KV bytes a decode step read / its time / the measured read "
      "bandwidth, smoothed over recent decode steps.");
  metrics.declare("xfmr:decode_bytes_read_total", K::Counter,
                  "Weight and KV bytes read by decode steps.");
  metrics.declare("xfmr:decode_step_seconds_total", K::Counter,
                  "Time spent in decode steps.");
  metrics.declare("xfmr:step_seconds_total", K::Counter,
                  "Time spent in steps of any kind.");
  if (batchPrefill) {
    metrics.declare("xfmr:batch_prefill_tokens_per_step", K::Gauge,
                    "Prompt tokens the batch pool may add to a step, so that "
                    "a step costs at most 1 + --batch-prefill-slack decode "
                    "steps (learned from step times).");
    metrics.set("xfmr:batch_prefill_tokens_per_step", {{"model_name", options.modelName}},
                static_cast<double>(batchLimits.maxPrefillTokensPerStep));
  }
  metrics.set("xfmr:memory_read_bandwidth_bytes_per_second",
              {{"model_name", options.modelName}}, options.memoryReadBandwidth);
}

void EngineLoop::updateGauges() {
  const Engine &e = *engine;
  double total = static_cast<double>(e.totalBlocks());
  double held = static_cast<double>(e.blocksHeldByRequests());
  double cached = total - static_cast<double>(e.freeBlocks()) - held;
  bool single = pools.size() == 1;
  for (const auto &pool : pools) {
    Labels l = labels(*pool);
    RequestClass cls = pool->spec.cls;
    // One pool holds both classes; two pools hold one class each.
    double running = static_cast<double>(single ? e.numRunning() : e.numRunning(cls));
    double waiting = static_cast<double>(single ? e.numWaiting() : e.numWaiting(cls));
    double used = single ? held : static_cast<double>(e.blocksHeldByRequests(cls));
    double mine = single ? total : std::max(1.0, total * pool->spec.share);
    metrics.set("xfmr:num_requests_running", l, running);
    metrics.set("xfmr:num_requests_waiting", l, waiting);
    metrics.set("xfmr:kv_cache_usage_perc", l, mine > 0 ? used / mine : 0);
    auto with = [&](const char *state) {
      Labels s = l;
      s.emplace_back("state", state);
      return s;
    };
    metrics.set("xfmr:kv_cache_blocks", with("used"), used);
  }
  Labels m = {{"model_name", options.modelName}};
  auto with = [&](const char *state) {
    Labels s = m;
    s.emplace_back("state", state);
    return s;
  };
  metrics.set("xfmr:kv_cache_blocks", with("free"), static_cast<double>(e.freeBlocks()));
  metrics.set("xfmr:kv_cache_blocks", with("cached"), cached);
}

//===----------------------------------------------------------------------===//
// Jobs in, cancellations in
//===----------------------------------------------------------------------===//

std::optional<ApiError> EngineLoop::submit(Job job) {
  size_t p = job.pool < pools.size() ? job.pool : 0;
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (isDraining.load() || stopping) {
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = "the server is shutting down";
      return e;
    }
    if (waitingPerPool[p] >= options.maxWaiting) {
      ApiError e;
      e.status = 429;
      e.type = "rate_limit_error";
      e.message = formatString(
          "the %s pool's queue is full (%lld requests waiting); retry later",
          pools[p]->spec.name.c_str(),
          static_cast<long long>(waitingPerPool[p]));
      return e;
    }
    id = nextId++;
    ++waitingPerPool[p];
    ++live;
  }
  job.pool = p;
  job.id = id;
  job.header.id += std::to_string(id);
  // A client that goes away cancels its request (within a step). The
  // stream's headers go out before the engine thread can see the job, so
  // they precede every event.
  job.response->onClose([this, id] {
    std::lock_guard<std::mutex> lock(mutex);
    cancels.push_back(id);
    wake.notify_one();
  });
  if (job.stream)
    job.response->startEvents();
  std::lock_guard<std::mutex> lock(mutex);
  inbox.push_back(std::move(job));
  wake.notify_one();
  return std::nullopt;
}

bool EngineLoop::collect(std::vector<Job> &jobs,
                         std::vector<int64_t> &cancelled) {
  std::unique_lock<std::mutex> lock(mutex);
  if (engine->idle())
    wake.wait(lock, [&] {
      return stopping || cancelAll || !inbox.empty() || !cancels.empty();
    });
  if (stopping)
    return false;
  jobs.swap(inbox);
  cancelled.swap(cancels);
  if (cancelAll) {
    cancelAll = false;
    for (auto &[id, a] : active)
      if (!a->done && !a->cancelled) {
        a->cancelMessage = "the server is shutting down";
        cancelled.push_back(id);
      }
  }
  return true;
}

void EngineLoop::admit(Job job) {
  Pool &pool = *pools[job.pool];
  {
    std::lock_guard<std::mutex> lock(mutex);
    --waitingPerPool[job.pool];
  }
  int64_t id = job.id;
  if (job.response->closed()) {
    --live;
    return;
  }
  Request r;
  r.id = id;
  r.prompt = job.prompt;
  r.sampling = job.sampling;
  r.cls = pool.spec.cls == RequestClass::Batch ? RequestClass::Batch : job.cls;
  if (Status s = engine->submit(std::move(r)); !s) {
    ApiError e;
    e.message = s.error();
    job.response->respond(400, "application/json", errorBody(e));
    --live;
    return;
  }
  active[id] = std::make_unique<Active>(std::move(job), id, tokenizer, pool);
}

void EngineLoop::cancel(int64_t id) {
  auto it = active.find(id);
  if (it == active.end())
    return;
  if (it->second->done || it->second->cancelled)
    return;
  it->second->cancelled = true;
  engine->cancel(id);
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

std::unique_ptr<rt::PoolMirror> EngineLoop::mirrorToFollowers() {
  std::unique_ptr<rt::PoolMirror> mirror =
      rt::mirrorToFollowers(engine->numBlocks(), engine->hostSlots());
  engine->mirrorTo(mirror.get());
  return mirror;
}

void EngineLoop::start() {
  thread = std::thread([this] { run(); });
}

void EngineLoop::run() {
  std::vector<Job> jobs;
  std::vector<int64_t> cancelled;
  while (collect(jobs, cancelled)) {
    for (int64_t id : cancelled)
      cancel(id);
    for (Job &job : jobs)
      admit(std::move(job));
    jobs.clear();
    cancelled.clear();
    finishResults(); // cancellations end here without a step
    if (!engine->idle())
      runStep();
  }
}

void EngineLoop::runStep() {
  double t0 = steadySeconds();
  Expected<Engine::StepPlan> plan = engine->schedule();
  if (!plan)
    return failAll(plan.error());
  if (plan->empty())
    return finishResults();
  Expected<Tensor> logits = engine->execute(*plan);
  if (!logits)
    return failAll(logits.error());
  if (Status s = engine->update(*plan, *logits); !s)
    return failAll(s.error());
  double dt = steadySeconds() - t0;
  recordStep(*plan, dt);
  updateBatchPrefill(*plan, dt);
  publishTokens();
  finishResults();
}

void EngineLoop::recordStep(const Engine::StepPlan &plan, double dt) {
  // The pools with sequences in the step share its time and bytes.
  std::vector<bool> in(pools.size(), false);
  double bytes = static_cast<double>(artifact.weightsBytes());
  bool decodeOnly = true;
  for (const Engine::ScheduledSequence &s : plan.sequences) {
    auto it = active.find(s.requestId);
    if (it != active.end())
      in[it->second->job.pool] = true;
    decodeOnly &= s.numTokens == 1;
    bytes += kvBytesPerToken * static_cast<double>(s.firstPosition + s.numTokens);
  }
  double saturation = options.memoryReadBandwidth > 0 && dt > 0
                          ? bytes / dt / options.memoryReadBandwidth
                          : 0;
  for (size_t p = 0; p < pools.size(); ++p) {
    if (!in[p])
      continue;
    Pool &pool = *pools[p];
    Labels l = labels(pool);
    metrics.add("xfmr:step_seconds_total", l, dt);
    if (!decodeOnly || dt <= 0)
      continue;
    metrics.add("xfmr:decode_bytes_read_total", l, bytes);
    metrics.add("xfmr:decode_step_seconds_total", l, dt);
    if (saturation > 0) {
      pool.saturation = pool.saturation == 0 ? saturation
                                             : 0.8 * pool.saturation + 0.2 * saturation;
      metrics.set("xfmr:decode_bandwidth_saturation", l, pool.saturation);
    }
  }
  if (engine->preemptions() != preemptionsSeen) {
    metrics.add("xfmr:num_preemptions_total", {{"model_name", options.modelName}},
                static_cast<double>(engine->preemptions() - preemptionsSeen));
    preemptionsSeen = engine->preemptions();
  }
}

void EngineLoop::updateBatchPrefill(const Engine::StepPlan &plan, double dt) {
  if (!batchPrefill)
    return;
  int64_t prefill = 0;
  for (const Engine::ScheduledSequence &s : plan.sequences)
    if (s.numTokens > 1)
      prefill += s.numTokens;
  batchPrefill->observe(prefill, dt);
  if (batchPrefill->tokens() == batchLimits.maxPrefillTokensPerStep)
    return;
  batchLimits.maxPrefillTokensPerStep = batchPrefill->tokens();
  engine->setClassLimits(RequestClass::Batch, batchLimits);
  metrics.set("xfmr:batch_prefill_tokens_per_step", {{"model_name", options.modelName}},
              static_cast<double>(batchLimits.maxPrefillTokensPerStep));
}

void EngineLoop::publishTokens() {
  std::vector<std::pair<int64_t, int64_t>> tokens;
  tokens.swap(stepTokens);
  std::vector<int64_t> perPool(pools.size(), 0);
  for (const auto &[id, token] : tokens) {
    auto it = active.find(id);
    if (it == active.end() || it->second->done || it->second->cancelled)
      continue;
    ++perPool[it->second->job.pool];
    onToken(*it->second, token);
  }
  for (size_t p = 0; p < pools.size(); ++p)
    if (perPool[p])
      metrics.add("xfmr:generation_tokens_total", labels(*pools[p]),
                  static_cast<double>(perPool[p]));
}

void EngineLoop::onToken(Active &a, int64_t token) {
  double t = now();
  Labels l = labels(*a.pool);
  if (a.firstToken < 0) {
    a.firstToken = t;
    metrics.observe("xfmr:time_to_first_token_seconds", l, t - a.job.arrival);
  } else {
    metrics.observe("xfmr:time_per_output_token_seconds", l, t - a.lastToken);
  }
  a.lastToken = t;
  ++a.generated;
  if (a.stopTokens.count(token))
    return; // the engine finishes it; a stop token adds no text
  size_t from = a.sent;
  a.text += a.detok.step(token);
  // The earliest stop string in what was not sent yet ends the request.
  size_t cut = std::string::npos;
  for (const std::string &s : a.job.stop)
    cut = std::min(cut, a.text.find(s, from));
  if (cut != std::string::npos) {
    a.text.resize(cut);
    complete(a, "stop");
    engine->cancel(a.id);
    return;
  }
  flushText(a, false);
}

void EngineLoop::flushText(Active &a, bool final) {
  if (!a.job.stream)
    return;
  size_t end = a.text.size();
  if (!final)
    for (const std::string &s : a.job.stop)
      end = std::min(end, a.text.size() - partialStopSuffix(a.text, a.sent, s));
  if (end <= a.sent &&
      (a.roleSent || a.job.endpoint != Endpoint::ChatCompletions))
    return;
  bool role = a.job.endpoint == Endpoint::ChatCompletions && !a.roleSent;
  a.roleSent = true;
  a.job.response->send(sseEvent(streamChunk(a.job.endpoint, a.job.header,
                                            a.text.substr(a.sent, end - a.sent),
                                            nullptr, role)));
  a.sent = end;
}

void EngineLoop::complete(Active &a, const char *finishReason) {
  a.done = true;
  int64_t prompt = static_cast<int64_t>(a.job.prompt.size());
  json usage = usageJson(prompt, a.generated, 0);
  Labels l = labels(*a.pool);
  metrics.observe("xfmr:e2e_request_latency_seconds", l, now() - a.job.arrival);
  Labels r = l;
  r.emplace_back("finished_reason", finishReason);
  metrics.add("xfmr:request_success_total", r, 1);
  metrics.add("xfmr:prompt_tokens_total", l, static_cast<double>(prompt));
  Response &out = *a.job.response;
  if (!a.job.stream) {
    out.respond(200, "application/json",
                dumpJson(completionResponse(a.job.endpoint, a.job.header,
                                            a.text, finishReason, usage)));
    return;
  }
  flushText(a, true);
  out.send(sseEvent(
      streamChunk(a.job.endpoint, a.job.header, "", finishReason, false)));
  if (a.job.includeUsage)
    out.send(sseEvent(usageChunk(a.job.endpoint, a.job.header, usage)));
  out.send(sseDone());
  out.end();
}

void EngineLoop::finishResults() {
  for (RequestResult &r : engine->takeFinished()) {
    auto it = active.find(r.id);
    if (it == active.end())
      continue;
    Active &a = *it->second;
    Labels l = labels(*a.pool);
    metrics.add("xfmr:prefix_cache_queries_total", l,
                static_cast<double>(a.job.prompt.size()));
    metrics.add("xfmr:prefix_cache_hits_total", l,
                static_cast<double>(r.cachedPromptTokens));
    metrics.add("xfmr:spec_decode_num_drafts_total", l,
                static_cast<double>(r.speculativeSteps));
    metrics.add("xfmr:spec_decode_num_draft_tokens_total", l,
                static_cast<double>(r.proposedTokens));
    metrics.add("xfmr:spec_decode_num_accepted_tokens_total", l,
                static_cast<double>(r.acceptedTokens));
    if (a.done) {
      // Answered already (a stop string ended it).
    } else if (r.finishReason != FinishReason::Cancelled) {
      a.text += a.detok.flush();
      complete(a, reasonName(r.finishReason));
    } else {
      // Cancelled without an answer: the client is gone, or the server
      // is shutting down.
      Labels c = l;
      c.emplace_back("finished_reason", "cancelled");
      metrics.add("xfmr:request_success_total", c, 1);
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = a.cancelMessage ? a.cancelMessage : "cancelled";
      if (!a.job.response->closed()) {
        if (a.job.stream) {
          a.job.response->send("data: " + errorBody(e) + "\n\n");
          a.job.response->end();
        } else {
          a.job.response->respond(e.status, "application/json", errorBody(e));
        }
      }
    }
    active.erase(it);
    --live;
  }
  updateGauges();
}

void EngineLoop::failAll(const std::string &message) {
  std::fprintf(stderr, "xfmr-serve: error: step failed: %s\n", message.c_str());
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = "the model step failed: " + message;
  for (auto &[id, a] : active) {
    if (a->done)
      continue;
    a->done = true;
    if (a->job.stream) {
      a->job.response->send("data: " + errorBody(e) + "\n\n");
      a->job.response->end();
    } else {
      a->job.response->respond(500, "application/json", errorBody(e));
    }
    Labels l = labels(*a->pool);
    l.emplace_back("finished_reason", "error");
    metrics.add("xfmr:request_success_total", l, 1);
    engine->cancel(id);
  }
  stepTokens.clear();
  finishResults();
}

//===----------------------------------------------------------------------===//
// Shutdown
//===----------------------------------------------------------------------===//

void EngineLoop::drain(double timeoutSeconds) {
  isDraining = true;
  double deadline = now() + timeoutSeconds;
  while (live.load() > 0 && now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (live.load() == 0)
    return;
  // Cancel what is left: each gets a 503 (or an error event) on the engine
  // thread.
  {
    std::lock_guard<std::mutex> lock(mutex);
    cancelAll = true;
    wake.notify_one();
  }
  double hard = now() + 10;
  while (live.load() > 0 && now() < hard)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void EngineLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    wake.notify_one();
  }
  if (thread.joinable())
    thread.join();
}

//===----------------------------------------------------------------------===//
// Read bandwidth
//===----------------------------------------------------------------------===//

double measureReadBandwidth() {
  size_t threads = std::max(1u, std::thread::hardware_concurrency());
  size_t bytes = size_t(256) << 20;
  size_t n = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buffer(n, 1);
  std::vector<uint64_t> sums(threads * 8, 0);
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {
    double t0 = steadySeconds();
    std::vector<std::thread> workers;
    for (size_t t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (size_t i = lo; i + 4 <= hi; i += 4) {
          a += buffer[i];
          b += buffer[i + 1];
          c += buffer[i + 2];
          d += buffer[i + 3];
        }
        sums[t * 8] = a + b + c + d;
      });
    for (std::thread &w : workers)
      w.join();
    double dt = steadySeconds() - t0;
    if (pass > 0 && dt > 0) // the first pass faults pages in
      best = std::max(best, static_cast<double>(bytes) / dt);
  }
  uint64_t total = 0;
  for (uint64_t s : sums)
    total += s;
  return total ? best : 0;
}

} // namespace xfmr::serve
