//===- EngineTest.cpp - the serving engine's scheduler --------------------===//
//
// Part of xfmr.
//
// Runs the engine detached from any artifact (Engine::createDetached): the
// model call is a function here whose logits pick (last token + 1) mod the
// vocabulary, so the plans schedule() returns, the tokens update() appends
// and the reasons requests finish with are checked exactly, without a
// compiled step function.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"

#include <gtest/gtest.h>

#include <deque>
#include <limits>
#include <map>

#include <numeric>

using namespace xfmr::rt;

namespace {

constexpr int64_t kVocab = 8;

/// Logits whose argmax is (the sequence's last new token + 1) mod kVocab.
Expected<Tensor> nextTokenModel(const std::vector<StepSequence> &batch) {
  Expected<Tensor> logits =
      Tensor::create(DType::F32, {static_cast<int64_t>(batch.size()), kVocab}, "logits");
  if (!logits)
    return logits;
  float *out = logits->data<float>();
  std::fill(out, out + batch.size() * kVocab, 0.0f);
  for (size_t i = 0; i < batch.size(); ++i)
    out[i * kVocab + (batch[i].tokens.back() + 1) % kVocab] = 1.0f;
  return logits;
}

struct Harness {
  std::vector<std::string> trace;
  std::unique_ptr<Engine> engine;
  double now = 0;

  Harness(int64_t numBlocks, int64_t blockSize, EngineConfig config) {
    auto e = Engine::createDetached(
        nextTokenModel, kVocab, numBlocks, blockSize, config, [this] { return now; },
        [this](const std::string &line) { trace.push_back(line); });
    EXPECT_TRUE(e) << e.error();
    if (e)
      engine = e.take();
  }

  Status submit(int64_t id, std::vector<int64_t> prompt, int64_t maxTokens,
                RequestClass cls = RequestClass::Interactive) {
    Request r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.sampling.maxTokens = maxTokens;
    r.cls = cls;
    return engine->submit(std::move(r));
  }

  /// schedule(), execute(), update(); returns the plan.
  Engine::StepPlan step() {
    Expected<Engine::StepPlan> plan = engine->schedule();
    EXPECT_TRUE(plan) << plan.error();
    if (!plan || plan->empty())
      return plan ? *plan : Engine::StepPlan();
    Expected<Tensor> logits = engine->execute(*plan);
    EXPECT_TRUE(logits) << logits.error();
    if (logits) {
      Status s = engine->update(*plan, *logits);
      EXPECT_TRUE(s) << s.error();
    }
    now += 1;
    return *plan;
  }

  /// "id:tokens@position" for each scheduled sequence, '+' when admitted.
  static std::string describe(const Engine::StepPlan &plan) {
    std::string out;
    for (const Engine::ScheduledSequence &s : plan.sequences)
      out += (out.empty() ? "" : " ") + std::to_string(s.requestId) + ":" +
             std::to_string(s.numTokens) + "@" + std::to_string(s.firstPosition) +
             (s.admitted ? "+" : "");
    return out;
  }
};

std::vector<int64_t> prompt(int64_t n, int64_t first = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = (first + i) % kVocab;
  return v;
}

} // namespace

TEST(FinishReasonTest, NamesAreTheTraceWords) {
  EXPECT_STREQ(finishReasonName(FinishReason::Stop), "stop");
  EXPECT_STREQ(finishReasonName(FinishReason::Length), "length");
  EXPECT_STREQ(finishReasonName(FinishReason::Cancelled), "cancelled");
  EXPECT_EQ(toString(FinishReason::Cancelled), "cancelled");
  EXPECT_STREQ(finishReasonName(FinishReason::HandedOff), "handed_off");
}

// The plan of each step: running sequences first (a decode token, or the
// next chunk of a prompt), then admissions, within the token budget; each
// with the position its new tokens start at.
TEST(EngineTest, PlansChunkPromptsWithinTheTokenBudget) {
  EngineConfig config;
  config.maxTokensPerStep = 8;
  config.prefixCaching = false;
  Harness h(16, 4, config);
  ASSERT_TRUE(h.submit(0, prompt(6), 3));
  ASSERT_TRUE(h.submit(1, prompt(10, 3), 2));
  Engine::StepPlan p1 = h.step();
  EXPECT_EQ(p1.step, 1);
  EXPECT_EQ(Harness::describe(p1), "0:6@0+ 1:2@0+");
  EXPECT_EQ(p1.numTokens, 8);
  EXPECT_TRUE(p1.preempted.empty());
  EXPECT_TRUE(p1.copies.empty());
  // Request 0 decodes its first sampled token; request 1's prompt goes on.
  EXPECT_EQ(Harness::describe(h.step()), "0:1@6 1:7@2");
  EXPECT_EQ(Harness::describe(h.step()), "0:1@7 1:1@9");
  EXPECT_EQ(Harness::describe(h.step()), "1:1@10") << "request 0 finished at 3 tokens";
  EXPECT_TRUE(h.step().empty() || h.engine->idle());
  std::vector<RequestResult> done = h.engine->takeFinished();
  ASSERT_EQ(done.size(), 2u);
  // Each token is the previous one + 1: the model saw the right tokens.
  EXPECT_EQ(done[0].tokens, (std::vector<int64_t>{6, 7, 0}));
  EXPECT_EQ(done[0].finishReason, FinishReason::Length);
  EXPECT_EQ(done[1].tokens, (std::vector<int64_t>{5, 6}));
}

// Out of blocks, the most recently admitted sequence is preempted, named in
// the plan, and nothing is admitted in that step.
TEST(EngineTest, PlanNamesPreemptionsAndStopsAdmission) {
  EngineConfig config;
  config.prefixCaching = false;
  Harness h(4, 4, config); // 16 token slots
  ASSERT_TRUE(h.submit(0, prompt(4), 8));
  ASSERT_TRUE(h.submit(1, prompt(4), 8));
  Engine::StepPlan p = h.step();
  EXPECT_EQ(Harness::describe(p), "0:4@0+ 1:4@0+");
  ASSERT_TRUE(h.submit(2, prompt(2), 1));
  // Both need a second block now; the third request waits behind them.
  p = h.step();
  EXPECT_EQ(Harness::describe(p), "0:1@4 1:1@4");
  EXPECT_TRUE(p.preempted.empty());
  for (int i = 0; i < 3; ++i)
    h.step();
  // Each needs a third block: only one can have it.
  p = h.step();
  EXPECT_EQ(p.preempted, (std::vector<int64_t>{1}));
  EXPECT_TRUE(p.admissionStopped);
  EXPECT_EQ(Harness::describe(p), "0:1@8");
  for (int guard = 0; !h.engine->idle() && guard < 100; ++guard)
    h.step();
  EXPECT_TRUE(h.engine->idle());
  EXPECT_EQ(h.engine->preemptions(), 1);
  EXPECT_EQ(h.engine->freeBlocks(), 4);
}

// A step is scheduled once and updated once; a request cancelled while its
// step is planned finishes as cancelled when the step ends.
TEST(EngineTest, PlansAreUpdatedOnceAndCancellationWaitsForTheStep) {
  EngineConfig config;
  Harness h(8, 4, config);
  ASSERT_TRUE(h.submit(0, prompt(3), 5));
  Expected<Engine::StepPlan> plan = h.engine->schedule();
  ASSERT_TRUE(plan) << plan.error();
  Expected<Engine::StepPlan> again = h.engine->schedule();
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().find("not updated yet"), std::string::npos) << again.error();
  h.engine->cancel(0);
  EXPECT_TRUE(h.engine->takeFinished().empty()) << "deferred while planned";
  Expected<Tensor> logits = h.engine->execute(*plan);
  ASSERT_TRUE(logits) << logits.error();
  ASSERT_TRUE(h.engine->update(*plan, *logits));
  EXPECT_FALSE(h.engine->update(*plan, *logits)) << "a plan is updated once";
  std::vector<RequestResult> done = h.engine->takeFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finishReason, FinishReason::Cancelled);
  EXPECT_EQ(done[0].tokens.size(), 1u) << "the planned step still ran";
  EXPECT_TRUE(h.engine->idle());
}

TEST(EngineTest, UpdateChecksTheLogitsShape) {
  Harness h(8, 4, EngineConfig());
  ASSERT_TRUE(h.submit(0, prompt(3), 5));
  Expected<Engine::StepPlan> plan = h.engine->schedule();
  ASSERT_TRUE(plan) << plan.error();
  Expected<Tensor> wrong = Tensor::create(DType::F32, {2, kVocab}, "logits");
  ASSERT_TRUE(wrong);
  Status s = h.engine->update(*plan, *wrong);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("not f32 [1, 8]"), std::string::npos) << s.error();
  // The step was abandoned; the next one schedules the request again.
  EXPECT_EQ(Harness::describe(h.step()), "0:3@0");
}

// max_tokens near INT64_MAX is a request that can never fit, not an
// overflowed sum that admits it (found by xfmr-engine-fuzzer).
TEST(EngineTest, HugeMaxTokensCanNeverFit) {
  Harness h(8, 4, EngineConfig());
  Status s = h.submit(0, prompt(1), std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("can never fit"), std::string::npos) << s.error();
  EXPECT_TRUE(h.engine->idle());
}

// Stop tokens and max_tokens finish a request with their reason.
TEST(EngineTest, FinishReasons) {
  Harness h(16, 4, EngineConfig());
  Request stop;
  stop.id = 7;
  stop.prompt = {1, 2};
  stop.sampling.maxTokens = 10;
  stop.sampling.stopTokens = {5}; // generates 3, 4, 5
  ASSERT_TRUE(h.engine->submit(stop));
  ASSERT_TRUE(h.submit(8, {1}, 2));
  for (int guard = 0; !h.engine->idle() && guard < 20; ++guard)
    h.step();
  std::vector<RequestResult> done = h.engine->takeFinished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id, 8);
  EXPECT_EQ(done[0].finishReason, FinishReason::Length);
  EXPECT_EQ(done[1].id, 7);
  EXPECT_EQ(done[1].finishReason, FinishReason::Stop);
  EXPECT_EQ(done[1].tokens, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(h.trace.back(), "finish req 7: 3 tokens (stop)");
}

// onToken sees every sampled token as update() samples it, in order, the
// stop token included: what a server streams before the request finishes.
TEST(EngineTest, OnTokenStreamsEveryTokenBeforeTheFinish) {
  EngineConfig config;
  std::vector<std::pair<int64_t, int64_t>> seen;
  config.onToken = [&](int64_t id, int64_t token) { seen.emplace_back(id, token); };
  Harness h(16, 4, config);
  Request r;
  r.id = 3;
  r.prompt = {1, 2};
  r.sampling.maxTokens = 10;
  r.sampling.stopTokens = {5};
  ASSERT_TRUE(h.engine->submit(r));
  h.step(); // the prompt and the first token
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{3, 3}}));
  EXPECT_TRUE(h.engine->takeFinished().empty());
  for (int guard = 0; !h.engine->idle() && guard < 20; ++guard)
    h.step();
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {3, 4}, {3, 5}}));
}

// Class limits split the engine between interactive and batch requests
// (xfmr-serve --pools): the batch class's prompt chunks stay within its
// share of the step, its blocks within its share of the cache (it preempts
// its own newest sequence, never an interactive one), and a request larger
// than its class's share is refused at submission.
TEST(EngineTest, ClassLimitsSplitTheStepAndTheCache) {
  EngineConfig config;
  config.maxTokensPerStep = 16;
  config.batchAgingSteps = 1 << 30;
  config.classLimits[1].maxTokensPerStep = 4; // batch
  config.classLimits[1].maxBlocks = 4;        // of 16 blocks of 4 tokens
  Harness h(16, 4, config);
  ASSERT_TRUE(h.submit(1, prompt(6), 8, RequestClass::Batch)); // 14 tokens: 4 blocks
  ASSERT_TRUE(h.submit(4, prompt(6, 30), 6, RequestClass::Batch));
  ASSERT_TRUE(h.submit(2, prompt(10, 50), 8, RequestClass::Interactive));
  // Batch prompts get 4 tokens a step between them, the interactive one the
  // rest.
  EXPECT_EQ(Harness::describe(h.step()), "2:10@0+ 1:4@0+");
  EXPECT_EQ(Harness::describe(h.step()), "2:1@10 1:2@4 4:2@0+");
  // Both batch sequences together outgrow the class's 4 blocks: the newest
  // batch sequence is preempted, never the interactive one.
  std::vector<RequestResult> done;
  for (int guard = 0; !h.engine->idle() && guard < 60; ++guard) {
    h.step();
    for (RequestResult &r : h.engine->takeFinished())
      done.push_back(std::move(r));
  }
  ASSERT_EQ(done.size(), 3u);
  EXPECT_GE(h.engine->preemptions(), 1);
  for (const RequestResult &r : done)
    EXPECT_EQ(r.preemptions > 0, r.id == 4) << r.id;
  for (const std::string &line : h.trace) {
    if (line.rfind("preempt", 0) == 0) {
      EXPECT_NE(line.find("req 4 (batch): out of its class's KV blocks"), std::string::npos)
          << line;
    }
  }
  Status tooBig = h.submit(3, prompt(4), 30, RequestClass::Batch);
  ASSERT_FALSE(tooBig);
  EXPECT_NE(tooBig.error().find("the batch class may hold 4"), std::string::npos)
      << tooBig.error();
}

// A class's prefill limit bounds its prompt chunks only: its decoding
// sequences each still get their token, however many there are.
TEST(EngineTest, PrefillLimitLeavesDecodeTokensAlone) {
  EngineConfig config;
  config.maxTokensPerStep = 64;
  config.batchAgingSteps = 1 << 30;
  config.classLimits[1].maxPrefillTokensPerStep = 3; // batch
  Harness h(64, 4, config);
  ASSERT_TRUE(h.submit(1, prompt(2), 8, RequestClass::Batch));
  ASSERT_TRUE(h.submit(2, prompt(2, 30), 8, RequestClass::Batch));
  ASSERT_TRUE(h.submit(3, prompt(7, 50), 4, RequestClass::Batch));
  ASSERT_TRUE(h.submit(4, prompt(9, 70), 4, RequestClass::Interactive));
  // 3 prompt tokens of the batch class a step; interactive is not bound.
  EXPECT_EQ(Harness::describe(h.step()), "4:9@0+ 1:2@0+ 2:1@0+");
  // A prompt's last token is not a chunk to bound (it is a step's one
  // token, like a decode token); decoding batch sequences take a token each
  // beside the next chunk.
  EXPECT_EQ(Harness::describe(h.step()), "4:1@9 1:1@2 2:1@1 3:3@0+");
  EXPECT_EQ(Harness::describe(h.step()), "4:1@10 1:1@3 2:1@2 3:3@3");
}

// A batch request waits behind interactive ones until it has waited
// batchAgingSteps steps; then it counts as interactive and, queued first,
// goes first.
TEST(EngineTest, BatchRequestsAgeIntoTheInteractiveClass) {
  EngineConfig config;
  config.maxTokensPerStep = 4; // one 4-token prompt per step
  config.batchAgingSteps = 3;
  config.prefixCaching = false;
  Harness h(64, 4, config);
  ASSERT_TRUE(h.submit(0, prompt(4), 1, RequestClass::Batch));
  for (int64_t id = 1; id <= 4; ++id)
    ASSERT_TRUE(h.submit(id, prompt(4), 1));
  EXPECT_EQ(Harness::describe(h.step()), "1:4@0+");
  EXPECT_EQ(Harness::describe(h.step()), "2:4@0+");
  EXPECT_EQ(Harness::describe(h.step()), "0:4@0+") << "aged at step 3";
  EXPECT_EQ(Harness::describe(h.step()), "3:4@0+");
  bool sawAged = false;
  for (const std::string &line : h.trace)
    sawAged |= line == "admit req 0 (batch, aged): 0 cached tokens, chunk 4";
  EXPECT_TRUE(sawAged);
}

// Full blocks go to the prefix cache as they are computed, so a request
// admitted while another still runs reuses its prompt.
TEST(EngineTest, RunningPromptsAreSharedAsTheirBlocksFill) {
  EngineConfig config;
  config.maxTokensPerStep = 4;
  Harness h(32, 4, config);
  ASSERT_TRUE(h.submit(0, prompt(12), 4));
  h.step();
  h.step(); // 8 of 12 prompt tokens computed: two full blocks cached
  EXPECT_EQ(h.engine->prefixCache().numCachedBlocks(), 2);
  ASSERT_TRUE(h.submit(1, prompt(12), 1));
  Engine::StepPlan p = h.step();
  EXPECT_EQ(Harness::describe(p), "0:4@8") << "the budget is spent";
  p = h.step();
  EXPECT_EQ(Harness::describe(p), "0:1@12 1:3@8+") << "admitted on 8 cached tokens";
  EXPECT_EQ(h.engine->prefixCache().checkInvariants(), "");
}

// In-batch prefix sharing: requests arriving together on one prefix wait
// for the first one's blocks instead of computing copies of them; a request
// on another prefix behind them is admitted meanwhile, and the waiting ones
// keep their queue order.
TEST(EngineTest, BurstOnOnePrefixWaitsForItsBlocks) {
  EngineConfig config;
  config.maxTokensPerStep = 64;
  Harness h(64, 4, config);
  std::vector<int64_t> shared = prompt(12);
  for (int64_t id : {0, 1, 2}) {
    std::vector<int64_t> p = shared;
    p.push_back(id); // a 13-token prompt: 12 shared tokens, 3 full blocks
    p.push_back(7);
    ASSERT_TRUE(h.submit(id, p, 2));
  }
  ASSERT_TRUE(h.submit(3, prompt(14, 5), 2)); // another prefix
  Engine::StepPlan p1 = h.step();
  EXPECT_EQ(Harness::describe(p1), "0:14@0+ 3:14@0+");
  EXPECT_NE(std::find(h.trace.begin(), h.trace.end(),
                      "defer req 1: its first 12 tokens are being computed by req 0"),
            h.trace.end());
  Engine::StepPlan p2 = h.step();
  EXPECT_EQ(Harness::describe(p2), "0:1@14 3:1@14 1:2@12+ 2:2@12+")
      << "both admitted on the 12 cached tokens, in queue order";
  while (!h.engine->idle())
    h.step();
  std::map<int64_t, RequestResult> byId;
  for (RequestResult &r : h.engine->takeFinished())
    byId[r.id] = std::move(r);
  EXPECT_EQ(byId[1].cachedPromptTokens, 12);
  EXPECT_EQ(byId[2].cachedPromptTokens, 12);
  EXPECT_EQ(byId[3].cachedPromptTokens, 0);
  EXPECT_EQ(h.engine->freeBlocks() + h.engine->prefixCache().numCachedBlocks(),
            h.engine->totalBlocks());
  EXPECT_EQ(h.engine->prefixCache().checkInvariants(), "");
}

// prefixWaitSteps bounds the wait (0: never): then the burst computes its
// own copies, as before.
TEST(EngineTest, PrefixWaitIsBounded) {
  EngineConfig config;
  config.maxTokensPerStep = 64;
  config.prefixWaitSteps = 0;
  Harness h(64, 4, config);
  ASSERT_TRUE(h.submit(0, prompt(14), 2));
  ASSERT_TRUE(h.submit(1, prompt(14), 2));
  EXPECT_EQ(Harness::describe(h.step()), "0:14@0+ 1:14@0+");
  for (const std::string &line : h.trace)
    EXPECT_EQ(line.rfind("defer", 0), std::string::npos) << line;
}

// A waiting request whose producer goes away (cancelled) is admitted at
// the next step and computes the prefix itself.
TEST(EngineTest, PrefixWaitEndsWithItsProducer) {
  EngineConfig config;
  config.maxTokensPerStep = 64;
  Harness h(64, 4, config);
  ASSERT_TRUE(h.submit(0, prompt(14), 2));
  ASSERT_TRUE(h.submit(1, prompt(14), 2));
  Expected<Engine::StepPlan> plan = h.engine->schedule();
  ASSERT_TRUE(plan);
  EXPECT_EQ(Harness::describe(*plan), "0:14@0+");
  h.engine->cancel(0); // cancelled when the step ends
  Expected<Tensor> logits = h.engine->execute(*plan);
  ASSERT_TRUE(logits);
  ASSERT_TRUE(h.engine->update(*plan, *logits));
  Engine::StepPlan p2 = h.step();
  ASSERT_EQ(p2.sequences.size(), 1u);
  EXPECT_EQ(p2.sequences[0].requestId, 1);
  EXPECT_TRUE(p2.sequences[0].admitted);
}

// AdmissionOrder::LongestPrefix admits first the queued request with the
// most cached prompt tokens (a conversation's next turn) although it came
// later; in arrival order (the default) the other one goes first.
TEST(EngineTest, LongestPrefixAdmissionOrder) {
  for (AdmissionOrder order : {AdmissionOrder::Fifo, AdmissionOrder::LongestPrefix}) {
    EngineConfig config;
    config.maxTokensPerStep = 64;
    config.maxNumSeqs = 1;
    config.admissionOrder = order;
    Harness h(32, 4, config);
    ASSERT_TRUE(h.submit(0, prompt(8), 1));
    while (!h.engine->idle())
      h.step();
    ASSERT_TRUE(h.submit(1, prompt(9, 3), 1)); // nothing cached
    std::vector<int64_t> next = prompt(8);
    next.push_back(5); // request 0's prompt and one more token: 8 cached
    ASSERT_TRUE(h.submit(2, next, 1));
    Engine::StepPlan p = h.step();
    EXPECT_EQ(Harness::describe(p), order == AdmissionOrder::Fifo ? "1:9@0+" : "2:1@8+");
  }
}

// Disaggregated prefill and decode: a prefill engine hands each request
// off once its first token is sampled; a decode engine adopts it with its
// prompt already computed. Together they produce a single engine's tokens,
// and no step of the decode engine computes a prompt chunk.
TEST(EngineTest, HandedOffRequestsDecodeElsewhereWithTheSameTokens) {
  EngineConfig config;
  config.maxTokensPerStep = 8;
  std::vector<std::pair<std::vector<int64_t>, int64_t>> work = {
      {prompt(6), 5}, {prompt(3, 2), 1}, {prompt(11, 5), 7}, {prompt(2, 1), 4}};
  std::map<int64_t, std::vector<int64_t>> single;
  {
    Harness h(32, 4, config);
    for (size_t i = 0; i < work.size(); ++i)
      ASSERT_TRUE(h.submit(static_cast<int64_t>(i), work[i].first, work[i].second));
    while (!h.engine->idle())
      h.step();
    for (RequestResult &r : h.engine->takeFinished())
      single[r.id] = r.tokens;
  }
  Harness prefill(32, 4, config), decode(8, 4, config);
  std::vector<PrefilledRequest> handedOff;
  prefill.engine->setHandOff([&](PrefilledRequest &&p) { handedOff.push_back(std::move(p)); });
  std::map<int64_t, Request> requests;
  for (size_t i = 0; i < work.size(); ++i) {
    Request r;
    r.id = static_cast<int64_t>(i);
    r.prompt = work[i].first;
    r.sampling.maxTokens = work[i].second;
    requests[r.id] = r;
    ASSERT_TRUE(prefill.engine->submit(r));
  }
  std::map<int64_t, std::vector<int64_t>> split;
  while (!prefill.engine->idle())
    prefill.step();
  for (RequestResult &r : prefill.engine->takeFinished()) {
    if (r.finishReason == FinishReason::HandedOff)
      EXPECT_EQ(r.tokens.size(), 1u) << "request " << r.id;
    else
      split[r.id] = r.tokens; // max_tokens 1: done at its first token
  }
  ASSERT_EQ(handedOff.size(), 3u);
  EXPECT_TRUE(split.count(1));
  // A hand-off that is not the prompt and one token is refused.
  PrefilledRequest wrong = handedOff.front();
  wrong.tokens.pop_back();
  EXPECT_FALSE(decode.engine->adoptPrefilled(requests[wrong.id], wrong));
  // The decode engine's 8 blocks of 4 hold two of them at a time: the
  // third waits until blocks are free.
  std::deque<PrefilledRequest> pending(handedOff.begin(), handedOff.end());
  int waited = 0;
  while (!pending.empty() || !decode.engine->idle()) {
    while (!pending.empty()) {
      Expected<bool> adopted =
          decode.engine->adoptPrefilled(requests[pending.front().id], pending.front());
      ASSERT_TRUE(adopted) << adopted.error();
      if (!*adopted) {
        ++waited;
        break;
      }
      pending.pop_front();
    }
    decode.step();
    for (RequestResult &r : decode.engine->takeFinished())
      split[r.id] = r.tokens;
  }
  EXPECT_GT(waited, 0);
  EXPECT_EQ(split, single);
  EXPECT_EQ(decode.engine->computedPromptTokens(), 0);
  EXPECT_GT(prefill.engine->computedPromptTokens(), 0);
  for (const std::string &line : decode.trace)
    EXPECT_EQ(line.find("admit"), std::string::npos) << line;
}
