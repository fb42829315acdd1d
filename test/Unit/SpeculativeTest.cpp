//===- SpeculativeTest.cpp - speculative decoding in the engine -----------===//
//
// Part of xfmr.
//
// Prompt-lookup proposals (proposeNgram) and the engine's verification
// steps, on detached engines whose model call is a rule here: the argmax
// after token t at position p is rule(t, p), with a row for every token of
// a sequence that asks for all its logits. Greedy output with speculation
// must equal greedy output without it, token for token, whether the
// proposals are kept or rejected, and a rejected proposal's blocks go back.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace xfmr::rt;

namespace {

constexpr int64_t kVocab = 8;
using Rule = std::function<int64_t(int64_t token, int64_t position)>;

/// A model call whose logits row after token t at position p is filled by
/// `fill(row, t, p)`, with a row for every token of a sequence that asks for
/// all its logits.
using RowFill =
    std::function<void(float *row, int64_t token, int64_t position)>;
Engine::ModelCall rowsModel(RowFill fill) {
  return [fill](const std::vector<StepSequence> &batch) -> Expected<Tensor> {
    int64_t rows = 0;
    for (const StepSequence &s : batch)
      rows += s.allLogits ? static_cast<int64_t>(s.tokens.size()) : 1;
    Expected<Tensor> logits =
        Tensor::create(DType::F32, {rows, kVocab}, "logits");
    if (!logits)
      return logits;
    float *out = logits->data<float>();
    std::fill(out, out + rows * kVocab, 0.0f);
    int64_t row = 0;
    for (const StepSequence &s : batch)
      for (size_t i = s.allLogits ? 0 : s.tokens.size() - 1;
           i < s.tokens.size(); ++i, ++row)
        fill(out + row * kVocab, s.tokens[i],
             s.firstPosition + static_cast<int64_t>(i));
    return logits;
  };
}

/// The argmax after token t at position p is rule(t, p).
Engine::ModelCall ruleModel(Rule rule) {
  return rowsModel(
      [rule](float *row, int64_t t, int64_t p) { row[rule(t, p)] = 1.0f; });
}

/// Runs `prompts` (request i: prompts[i], maxTokens[i]) to completion and
/// returns each request's tokens; `trace` collects the engine's lines.
std::map<int64_t, RequestResult>
runAll(const Rule &rule, EngineConfig config,
       const std::vector<std::vector<int64_t>> &prompts, int64_t maxTokens,
       int64_t numBlocks, int64_t blockSize,
       std::vector<std::string> *trace = nullptr, int64_t *leaked = nullptr,
       const Rule &draftRule = nullptr, int64_t draftBlocks = 512,
       bool sharedKV = false) {
  double now = 0;
  auto e = Engine::createDetached(
      ruleModel(rule), kVocab, numBlocks, blockSize, config,
      [&] { return now; },
      [&](const std::string &line) {
        if (trace)
          trace->push_back(line);
      });
  EXPECT_TRUE(e) << e.error();
  std::map<int64_t, RequestResult> out;
  if (!e)
    return out;
  std::unique_ptr<Engine> engine = e.take();
  if (draftRule) {
    EXPECT_TRUE(engine->setDraft(DraftModel::createDetached(
        ruleModel(draftRule), kVocab, draftBlocks, blockSize, 64, sharedKV)));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.id = static_cast<int64_t>(i);
    r.prompt = prompts[i];
    r.sampling.maxTokens = maxTokens + static_cast<int64_t>(i % 5);
    EXPECT_TRUE(engine->submit(std::move(r)));
  }
  for (int guard = 0; !engine->idle() && guard < 10000; ++guard) {
    Status s = engine->step();
    EXPECT_TRUE(s) << s.error();
    now += 1;
    if (!s)
      break;
  }
  for (RequestResult &r : engine->takeFinished())
    out[r.id] = std::move(r);
  engine->clearPrefixCache();
  if (leaked)
    *leaked = engine->totalBlocks() - engine->freeBlocks();
  if (const DraftModel *draft = engine->draft()) {
    EXPECT_EQ(draft->numSequences(), 0) << "finished requests' drafts are dropped";
    EXPECT_EQ(draft->freeBlocks(), draft->totalBlocks());
  }
  return out;
}

std::vector<std::vector<int64_t>> mixedPrompts(int64_t n) {
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> p;
    for (int64_t j = 0; j < 3 + (i * 7) % 19; ++j)
      p.push_back((i * 3 + j * (1 + i % 3)) % kVocab);
    prompts.push_back(p);
  }
  return prompts;
}

} // namespace

TEST(ProposeNgramTest, LatestLongestMatch) {
  // ... 1 2 3 [4 5] ... 1 2 3 [6 7] ... 1 2 3: the latest "1 2 3" wins.
  std::vector<int64_t> t{1, 2, 3, 4, 5, 0, 1, 2, 3, 6, 7, 0, 1, 2, 3};
  EXPECT_EQ(proposeNgram(t, 1, 3, 2), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(proposeNgram(t, 1, 3, 5), (std::vector<int64_t>{6, 7, 0, 1, 2}));
  // The longest match decides before a more recent shorter one: "9 3"
  // occurs earlier, "3" alone later.
  std::vector<int64_t> u{9, 3, 5, 3, 6, 9, 3};
  EXPECT_EQ(proposeNgram(u, 1, 2, 1), (std::vector<int64_t>{5}));
  EXPECT_EQ(proposeNgram(u, 1, 1, 1), (std::vector<int64_t>{6}));
  // Nothing repeats, or nothing asked.
  EXPECT_TRUE(proposeNgram({1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(proposeNgram(t, 1, 3, 0).empty());
  EXPECT_TRUE(proposeNgram({5}, 1, 3, 4).empty());
  // A match overlapping the suffix proposes what follows it, up to the end.
  EXPECT_EQ(proposeNgram({4, 4, 4}, 1, 1, 3), (std::vector<int64_t>{4}));
}

// Fewer proposals while few are kept: 2 without evidence, 1 + the expected
// run of kept tokens, the limit once most are kept.
TEST(ProposeNgramTest, AdaptiveProposals) {
  EXPECT_EQ(adaptiveProposals(0, 0, 4), 2);
  EXPECT_EQ(adaptiveProposals(0, 20, 4), 2) << "a = 1/22: run 0.05 -> 1 + 1";
  EXPECT_EQ(adaptiveProposals(10, 20, 4), 2) << "a = 0.5: run 1 -> 1 + 1";
  EXPECT_EQ(adaptiveProposals(12, 20, 8), 3) << "a = 0.59: run 1.44 -> 2 + 1";
  EXPECT_EQ(adaptiveProposals(17, 20, 4), 4) << "a = 0.82: run 4.5 -> capped";
  EXPECT_EQ(adaptiveProposals(0, 0, 1), 1);
  EXPECT_EQ(adaptiveProposals(1000, 1000, 64), 64);
}

// A model whose next token is (t + 1) mod 8 repeats its prompt's pattern:
// every proposal is kept, and the output equals plain greedy decoding.
TEST(SpeculativeTest, KeptProposalsGiveTheGreedyTokens) {
  Rule cycle = [](int64_t t, int64_t) { return (t + 1) % kVocab; };
  EngineConfig plain;
  plain.maxTokensPerStep = 64;
  EngineConfig spec = plain;
  spec.speculative.numTokens = 4;
  std::vector<std::vector<int64_t>> prompts{{0, 1, 2, 3, 4, 5, 6, 7, 0, 1}};
  std::vector<std::string> trace;
  auto want = runAll(cycle, plain, prompts, 20, 64, 4);
  int64_t leaked = -1;
  auto got = runAll(cycle, spec, prompts, 20, 64, 4, &trace, &leaked);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].tokens, want[0].tokens);
  EXPECT_EQ(got[0].proposedTokens, got[0].acceptedTokens);
  EXPECT_GE(got[0].acceptedTokens, 12);
  EXPECT_EQ(leaked, 0);
  EXPECT_NE(std::find(trace.begin(), trace.end(),
                      "verify req 0: 4 of 4 proposed kept, 0 rolled back"),
            trace.end());
}

// A model that depends on the position rejects most proposals; the engine
// rolls them back (their K/V slots and any block they alone needed) and
// still produces plain greedy decoding's tokens, alone and batched, across
// block boundaries, with the prefix cache on and off.
TEST(SpeculativeTest, RejectedProposalsRollBack) {
  Rule mixed = [](int64_t t, int64_t p) { return (t * 3 + p / 3) % kVocab; };
  for (bool caching : {false, true})
    for (int64_t batch : {1, 64}) {
      EngineConfig plain;
      plain.maxTokensPerStep = 256;
      plain.prefixCaching = caching;
      plain.maxNumSeqs = batch;
      EngineConfig spec = plain;
      spec.speculative.numTokens = 3;
      spec.speculative.maxBatch = 64;
      spec.speculative.maxVerifyTokens = 0;
      std::vector<std::vector<int64_t>> prompts = mixedPrompts(64);
      auto want = runAll(mixed, plain, prompts, 24, 512, 4);
      int64_t leaked = -1;
      auto got = runAll(mixed, spec, prompts, 24, 512, 4, nullptr, &leaked);
      ASSERT_EQ(got.size(), want.size());
      int64_t proposed = 0, accepted = 0;
      for (auto &[id, r] : got) {
        EXPECT_EQ(r.tokens, want[id].tokens)
            << "request " << id << " batch " << batch;
        proposed += r.proposedTokens;
        accepted += r.acceptedTokens;
      }
      EXPECT_GT(proposed, accepted) << "some proposals are rejected";
      EXPECT_GT(accepted, 0) << "some are kept";
      EXPECT_EQ(leaked, 0) << "caching " << caching << " batch " << batch;
    }
}

// Speculation stays off above maxBatch running sequences.
TEST(SpeculativeTest, OffForLargeBatches) {
  Rule cycle = [](int64_t t, int64_t) { return (t + 1) % kVocab; };
  EngineConfig spec;
  spec.speculative.numTokens = 4;
  spec.speculative.maxBatch = 2;
  spec.prefixWaitSteps = 0; // the same prompts, admitted in one step
  std::vector<int64_t> p{0, 1, 2, 3, 0, 1};
  // Three requests admitted together (max_tokens 10, 11, 12): request 0
  // finishes first, so it only ever ran beside two others.
  auto three = runAll(cycle, spec, {p, p, p}, 10, 64, 4);
  EXPECT_EQ(three[0].proposedTokens, 0);
  EXPECT_GT(three[2].proposedTokens, 0) << "alone at the end, it speculates";
}

// The step's verification budget (maxVerifyTokens) is shared by the running
// sequences: with 8 tokens, a sequence alone proposes up to 7 (here the
// limit, 6), two running together up to 3 each.
TEST(SpeculativeTest, VerificationBudgetSharedByTheBatch) {
  Rule cycle = [](int64_t t, int64_t) { return (t + 1) % kVocab; };
  EngineConfig spec;
  spec.speculative.numTokens = 6;
  spec.speculative.adaptive = false;
  spec.speculative.maxVerifyTokens = 8;
  spec.prefixWaitSteps = 0; // the same prompts, admitted in one step
  std::vector<int64_t> p{0, 1, 2, 3, 4, 5, 6, 7, 0, 1};
  auto largest = [](const std::vector<std::string> &trace, const std::string &req) {
    int64_t most = 0;
    for (const std::string &line : trace)
      if (line.rfind("propose " + req + ": ", 0) == 0)
        most = std::max<int64_t>(most, std::stoll(line.substr(req.size() + 10)));
    return most;
  };
  std::vector<std::string> alone, two;
  runAll(cycle, spec, {p}, 30, 64, 4, &alone);
  EXPECT_EQ(largest(alone, "req 0"), 6);
  // Request 0 (max_tokens 30) finishes before request 1 (31): it never
  // ran alone.
  auto got = runAll(cycle, spec, {p, p}, 30, 64, 4, &two);
  EXPECT_EQ(largest(two, "req 0"), 3);
  EXPECT_GT(got[0].acceptedTokens, 0);
}

namespace {

/// A model with a soft next-token distribution: after token t, v has
/// probability proportional to 1 + (5t + 3v) mod 8 (every token possible).
double weightAfter(int64_t t, int64_t v) {
  return 1.0 + static_cast<double>((5 * t + 3 * v) % 8);
}

Engine::ModelCall softModel() {
  return rowsModel([](float *row, int64_t t, int64_t) {
    for (int64_t v = 0; v < kVocab; ++v)
      row[v] = static_cast<float>(std::log(weightAfter(t, v)));
  });
}

/// Runs `n` sampled requests (seed = id) of `prompt`, `maxTokens` each.
std::vector<RequestResult> sampleMany(EngineConfig config,
                                      const std::vector<int64_t> &prompt,
                                      int64_t n, int64_t maxTokens,
                                      Engine::ModelCall draft = nullptr) {
  double now = 0;
  config.maxNumSeqs = 256;
  config.prefixCaching = false;
  auto e = Engine::createDetached(softModel(), kVocab, 2048, 4, config,
                                  [&] { return now; });
  EXPECT_TRUE(e) << e.error();
  std::vector<RequestResult> out;
  if (!e)
    return out;
  std::unique_ptr<Engine> engine = e.take();
  if (draft) {
    EXPECT_TRUE(engine->setDraft(
        DraftModel::createDetached(std::move(draft), kVocab, 2048, 4, 4096)));
  }
  for (int64_t id = 0; id < n; ++id) {
    Request r;
    r.id = id;
    r.prompt = prompt;
    r.sampling.maxTokens = maxTokens;
    r.sampling.temperature = 1.0;
    r.sampling.seed = static_cast<uint64_t>(id);
    EXPECT_TRUE(engine->submit(std::move(r)));
  }
  while (!engine->idle()) {
    Status s = engine->step();
    EXPECT_TRUE(s) << s.error();
    if (!s)
      break;
    for (RequestResult &r : engine->takeFinished())
      out.push_back(std::move(r));
  }
  return out;
}

/// The chi-square statistic's p-value for `df` degrees of freedom
/// (Wilson-Hilferty).
double chiSquarePValue(double chi2, double df) {
  double z =
      (std::cbrt(chi2 / df) - (1 - 2 / (9 * df))) / std::sqrt(2 / (9 * df));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

/// 3-token continuations after token 2 of the soft model: how far their
/// counts are from p(x1 | 2) p(x2 | x1) p(x3 | x2) (chi-square over the
/// 512 continuations), and the proposals made and kept.
struct ContinuationTally {
  double chi2 = 0;
  int64_t counted = 0, proposed = 0, accepted = 0;
};
ContinuationTally tallyContinuations(const std::vector<RequestResult> &got) {
  auto prob = [](int64_t t, int64_t v) {
    double total = 0;
    for (int64_t u = 0; u < kVocab; ++u)
      total += weightAfter(t, u);
    return weightAfter(t, v) / total;
  };
  ContinuationTally t;
  std::vector<int64_t> counts(kVocab * kVocab * kVocab, 0);
  for (const RequestResult &r : got) {
    if (r.tokens.size() != 3)
      continue;
    ++counts[(r.tokens[0] * kVocab + r.tokens[1]) * kVocab + r.tokens[2]];
    ++t.counted;
    t.proposed += r.proposedTokens;
    t.accepted += r.acceptedTokens;
  }
  for (int64_t a = 0; a < kVocab; ++a)
    for (int64_t b = 0; b < kVocab; ++b)
      for (int64_t c = 0; c < kVocab; ++c) {
        double expected = t.counted * prob(2, a) * prob(a, b) * prob(b, c);
        double d = static_cast<double>(counts[(a * kVocab + b) * kVocab + c]) -
                   expected;
        t.chi2 += d * d / expected;
      }
  return t;
}

} // namespace

// Sampled requests speculate too: a proposal is kept when the sampler draws
// it (probability p(x), speculative sampling's rule for a proposal of
// probability 1), otherwise the drawn token stands. Each token still takes
// one draw in order, so a seed gives the same tokens as without speculation.
TEST(SpeculativeTest, SampledRequestsKeepTheirSeededTokens) {
  EngineConfig plain, spec;
  spec.speculative.numTokens = 3;
  spec.speculative.maxBatch = 256;
  spec.speculative.maxVerifyTokens = 0;
  std::vector<int64_t> prompt{1, 2, 1, 2, 1};
  std::vector<RequestResult> want = sampleMany(plain, prompt, 64, 12);
  std::vector<RequestResult> got = sampleMany(spec, prompt, 64, 12);
  ASSERT_EQ(got.size(), want.size());
  std::map<int64_t, std::vector<int64_t>> byId;
  for (const RequestResult &r : want)
    byId[r.id] = r.tokens;
  int64_t proposed = 0, accepted = 0;
  for (const RequestResult &r : got) {
    EXPECT_EQ(r.tokens, byId[r.id]) << "request " << r.id;
    proposed += r.proposedTokens;
    accepted += r.acceptedTokens;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(proposed, accepted);
}

// The distribution of sampled continuations with speculation is the
// model's: 100,000 requests of 3 tokens after [1, 2, 1, 2] (proposals from
// the repeated pattern, kept and rejected), the counts of the 512
// continuations against p(x1 | 2) p(x2 | x1) p(x3 | x2): chi-square with
// 511 degrees of freedom, p-value from the Wilson-Hilferty approximation.
TEST(SpeculativeTest, SampledContinuationsFollowTheModel) {
  EngineConfig spec;
  spec.speculative.numTokens = 3;
  spec.speculative.maxBatch = 256;
  spec.speculative.maxVerifyTokens = 0;
  const int64_t n = 100000;
  std::vector<RequestResult> got = sampleMany(spec, {1, 2, 1, 2}, n, 3);
  ASSERT_EQ(static_cast<int64_t>(got.size()), n);
  ContinuationTally t = tallyContinuations(got);
  ASSERT_EQ(t.counted, n) << "every request generated 3 tokens";
  double chi2 = t.chi2;
  int64_t proposed = t.proposed, accepted = t.accepted;
  const double df = kVocab * kVocab * kVocab - 1;
  EXPECT_GT(chiSquarePValue(chi2, df), 0.01)
      << "chi2 " << chi2 << " over " << df << " degrees of freedom";
  EXPECT_GT(accepted, n / 100) << "proposals were kept";
  EXPECT_GT(proposed - accepted, n / 100) << "and rejected";
}

//===----------------------------------------------------------------------===//
// Draft models
//===----------------------------------------------------------------------===//


// A draft equal to the target proposes what the target decodes: every
// proposal is kept, which holds only if the draft's positions and K/V
// follow its request through catch-up, proposals and rollback (a rule of
// the position would otherwise disagree), in its own cache and on the
// target's.
TEST(DraftModelTest, IdenticalDraftIsAlwaysKept) {
  Rule mixed = [](int64_t t, int64_t p) { return (t * 3 + p / 3) % kVocab; };
  EngineConfig plain;
  plain.maxTokensPerStep = 256;
  EngineConfig spec = plain;
  spec.speculative.numTokens = 4;
  spec.speculative.adaptive = false;
  spec.speculative.maxVerifyTokens = 0;
  std::vector<std::vector<int64_t>> prompts = mixedPrompts(4);
  auto want = runAll(mixed, plain, prompts, 30, 512, 4);
  for (bool sharedKV : {false, true}) {
    std::vector<std::string> trace;
    auto got = runAll(mixed, spec, prompts, 30, 512, 4, &trace, nullptr, mixed,
                      512, sharedKV);
    ASSERT_EQ(got.size(), want.size());
    for (auto &[id, r] : got) {
      EXPECT_EQ(r.tokens, want[id].tokens) << "request " << id;
      EXPECT_GT(r.proposedTokens, 0);
      EXPECT_EQ(r.acceptedTokens, r.proposedTokens)
          << "request " << id << " shared " << sharedKV;
    }
    EXPECT_NE(std::find(trace.begin(), trace.end(),
                        "propose req 0: 4 tokens from the draft"),
              trace.end());
  }
}

// A draft that disagrees at some positions: greedy output is still plain
// decoding's, for 64 requests of mixed lengths alone and batched, with a
// roomy draft cache, with one too small for every sequence (those that do
// not fit propose nothing) and on the target's cache; both caches end
// empty.
TEST(DraftModelTest, GreedyOutputIsPlainDecoding) {
  Rule target = [](int64_t t, int64_t p) { return (t * 3 + p / 3) % kVocab; };
  Rule draft = [&](int64_t t, int64_t p) {
    return p % 5 == 0 ? (t + 1) % kVocab : target(t, p);
  };
  // Blocks 0: the draft shares the target's cache.
  for (int64_t draftBlocks : {512, 12, 0})
    for (int64_t batch : {1, 64}) {
      EngineConfig plain;
      plain.maxTokensPerStep = 256;
      plain.maxNumSeqs = batch;
      EngineConfig spec = plain;
      spec.speculative.numTokens = 3;
      spec.speculative.maxBatch = 64;
      spec.speculative.maxVerifyTokens = 0;
      std::vector<std::vector<int64_t>> prompts = mixedPrompts(64);
      auto want = runAll(target, plain, prompts, 24, 512, 4);
      int64_t leaked = -1;
      auto got = runAll(target, spec, prompts, 24, 512, 4, nullptr, &leaked,
                        draft, std::max<int64_t>(draftBlocks, 1),
                        draftBlocks == 0);
      ASSERT_EQ(got.size(), want.size());
      int64_t proposed = 0, accepted = 0;
      for (auto &[id, r] : got) {
        EXPECT_EQ(r.tokens, want[id].tokens)
            << "request " << id << " batch " << batch;
        proposed += r.proposedTokens;
        accepted += r.acceptedTokens;
      }
      EXPECT_GT(proposed, accepted) << "some proposals are rejected";
      EXPECT_GT(accepted, proposed / 2) << "most are kept";
      EXPECT_EQ(leaked, 0);
    }
}

// Sampler::verify's rule alone: proposals drawn from q, verified against p
// (temperature 0.7, top-k 6 of 8 logits), give tokens distributed as p.
TEST(DraftModelTest, VerifyFollowsTheTargetDistribution) {
  const float logits[kVocab] = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 1.0f, 3.0f, -2.0f};
  const float q[kVocab] = {0.3f, 0.05f, 0.2f, 0.05f, 0.1f, 0.1f, 0.1f, 0.1f};
  SamplingParams params;
  params.temperature = 0.7;
  params.topK = 6;
  Sampler target(params), reference(params);
  SamplingParams drafting;
  drafting.temperature = 1;
  drafting.seed = 99;
  Sampler draft(drafting);
  std::vector<float> p;
  reference.distribution(logits, kVocab, {}, p);
  EXPECT_EQ(p[2], 0.0f) << "top-k drops the two lowest";
  EXPECT_EQ(p[7], 0.0f);
  const int64_t n = 200000;
  std::vector<int64_t> counts(kVocab, 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = draft.draw(q, kVocab);
    int64_t token = target.verify(logits, kVocab, {}, x, q);
    ++counts[token];
    kept += token == x;
  }
  double chi2 = 0;
  for (int64_t v = 0; v < kVocab; ++v) {
    if (p[v] == 0) {
      EXPECT_EQ(counts[v], 0) << "token " << v;
      continue;
    }
    double d = static_cast<double>(counts[v]) - n * p[v];
    chi2 += d * d / (n * p[v]);
  }
  EXPECT_GT(chiSquarePValue(chi2, 5), 0.01) << "chi2 " << chi2;
  double overlap = 0;
  for (int64_t v = 0; v < kVocab; ++v)
    overlap += std::min(p[v], q[v]);
  EXPECT_NEAR(static_cast<double>(kept) / n, overlap, 0.01)
      << "kept with probability sum min(p, q)";
}

// Sampled continuations with a draft whose distribution differs from the
// target's follow the target: 100,000 requests of 3 tokens after [1, 2],
// chi-square over the 512 continuations as above.
TEST(DraftModelTest, SampledContinuationsFollowTheTarget) {
  EngineConfig spec;
  spec.speculative.numTokens = 3;
  spec.speculative.maxBatch = 256;
  spec.speculative.maxVerifyTokens = 0;
  spec.speculative.adaptive = false;
  Engine::ModelCall draft = rowsModel([](float *row, int64_t t, int64_t) {
    for (int64_t v = 0; v < kVocab; ++v)
      row[v] = static_cast<float>(std::log(1.0 + (3 * t + 5 * v) % 8));
  });
  const int64_t n = 100000;
  std::vector<RequestResult> got = sampleMany(spec, {1, 2}, n, 3, draft);
  ASSERT_EQ(static_cast<int64_t>(got.size()), n);
  ContinuationTally t = tallyContinuations(got);
  ASSERT_EQ(t.counted, n) << "every request generated 3 tokens";
  double chi2 = t.chi2;
  int64_t proposed = t.proposed, accepted = t.accepted;
  EXPECT_GT(chiSquarePValue(chi2, 511), 0.01) << "chi2 " << chi2;
  EXPECT_GT(accepted, n / 10) << "proposals were kept";
  EXPECT_GT(proposed - accepted, n / 10) << "and rejected";
}
