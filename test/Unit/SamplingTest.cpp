//===- SamplingTest.cpp - sampling parameters and the Sampler -------------===//
//
// Part of xfmr.
//
// Checks runtime/Sampling.h: greedy and its tie rule, top-k, top-p, the
// repetition penalty, NaN logits, validate(), and reproducibility, both as
// same seed -> same tokens and against a reference that draws from
// std::mt19937_64 by hand, so that the documented contract (one 64-bit draw
// per token, inverse CDF in probability order) cannot drift. Every random
// test uses a fixed seed and is deterministic.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace xfmr::rt;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> logOf(const std::vector<double> &probs) {
  std::vector<float> logits;
  for (double p : probs)
    logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

SamplingParams sampling(double temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

int64_t next(Sampler &sampler, const std::vector<float> &logits,
             const std::vector<int64_t> &previous = {}) {
  return sampler.next(logits.data(), static_cast<int64_t>(logits.size()),
                      previous);
}

/// How often each token comes out of `draws` calls.
std::vector<int64_t> histogram(Sampler &sampler,
                               const std::vector<float> &logits, int draws) {
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    int64_t token = next(sampler, logits);
    EXPECT_GE(token, 0);
    EXPECT_LT(token, static_cast<int64_t>(logits.size()));
    if (token >= 0 && token < static_cast<int64_t>(logits.size()))
      ++counts[token];
  }
  return counts;
}

/// Logits in [-4, 4) with frequent exact ties, from a generator whose output
/// the standard fixes (the distributions it does not).
std::vector<float> randomLogits(std::mt19937 &gen, size_t vocab) {
  std::vector<float> logits(vocab);
  for (float &l : logits)
    l = static_cast<float>(static_cast<int>(gen() % 32) - 16) / 4.0f;
  return logits;
}

std::string validationError(const SamplingParams &p, int64_t vocab = 100) {
  Status s = validate(p, vocab);
  EXPECT_FALSE(s.ok());
  return s.error();
}

//===----------------------------------------------------------------------===//
// Greedy
//===----------------------------------------------------------------------===//

TEST(SamplerTest, GreedyIsArgmax) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(next(s, {0.5f, -1.0f, 3.0f, 2.9f}), 2);
  EXPECT_EQ(next(s, {-3.0f, -2.0f, -5.0f}), 1);
  EXPECT_EQ(next(s, {7.0f}), 0);
}

TEST(SamplerTest, GreedyTieTakesLowestIndex) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(next(s, {1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(next(s, {4.0f, 4.0f, 4.0f}), 0);
  EXPECT_EQ(next(s, {0.0f, kInf, 1.0f, kInf}), 1);
}

TEST(SamplerTest, GreedySkipsNaN) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(next(s, {kNaN, 1.0f, 2.0f, kNaN}), 2);
  EXPECT_EQ(next(s, {kNaN, -1e30f, kNaN}), 1);
  // Nothing is possible: the tie rule still gives a valid token.
  EXPECT_EQ(next(s, {kNaN, kNaN, -kInf}), 0);
}

//===----------------------------------------------------------------------===//
// Top-k and top-p
//===----------------------------------------------------------------------===//

TEST(SamplerTest, TopKOneEqualsGreedyAtAnyTemperature) {
  std::mt19937 gen(7);
  for (double temperature : {1e-300, 1e-3, 0.5, 1.0, 2.0, 1e3, 1e300}) {
    SamplingParams p = sampling(temperature, 11);
    p.topK = 1;
    Sampler topOne(p);
    Sampler greedy(SamplingParams{});
    for (int row = 0; row < 200; ++row) {
      std::vector<float> logits = randomLogits(gen, 17);
      ASSERT_EQ(next(topOne, logits), next(greedy, logits))
          << "temperature " << temperature << ", row " << row;
    }
  }
}

TEST(SamplerTest, TinyTopPKeepsOnlyTheMax) {
  SamplingParams p = sampling(1.0, 3);
  p.topP = 1e-9;
  Sampler s(p);
  std::vector<int64_t> counts = histogram(s, logOf({0.1, 0.2, 0.3, 0.4}), 2000);
  EXPECT_EQ(counts[3], 2000);
  // Of two equally likely maxima the lower index comes first.
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(next(s, {2.0f, 5.0f, 5.0f, 1.0f}), 1);
}

TEST(SamplerTest, TopKTwoStaysInTheTwoLargest) {
  SamplingParams p = sampling(1.0, 5);
  p.topK = 2;
  Sampler s(p);
  std::vector<int64_t> counts =
      histogram(s, {1.0f, 3.0f, 0.5f, 2.5f, 2.0f}, 5000);
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);

  // A tie at the boundary keeps the lower index: 0 and 2, never 3.
  counts = histogram(s, {3.0f, 1.0f, 2.0f, 2.0f}, 5000);
  EXPECT_EQ(counts[1] + counts[3], 0);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[2], 0);
}

TEST(SamplerTest, TopKAtLeastVocabIsOff) {
  SamplingParams p = sampling(1.0, 5);
  p.topK = 1000;
  Sampler s(p);
  std::vector<int64_t> counts = histogram(s, {0.0f, 0.0f, 0.0f}, 3000);
  for (int64_t c : counts)
    EXPECT_GT(c, 800);
}

TEST(SamplerTest, TopPHalfNeedsTheTwoMostLikely) {
  // 0.4 alone is below 0.5, so the prefix is {0.4, 0.3}, renormalised to
  // 4/7 and 3/7.
  SamplingParams p = sampling(1.0, 9);
  p.topP = 0.5;
  Sampler s(p);
  const int draws = 20000;
  std::vector<int64_t> counts =
      histogram(s, logOf({0.1, 0.2, 0.3, 0.4}), draws);
  EXPECT_EQ(counts[0] + counts[1], 0);
  EXPECT_NEAR(static_cast<double>(counts[3]) / draws, 4.0 / 7.0, 0.02);
  EXPECT_NEAR(static_cast<double>(counts[2]) / draws, 3.0 / 7.0, 0.02);
}

TEST(SamplerTest, TopKThenTopP) {
  // Top-k = 3 keeps 0.4, 0.3, 0.2 (renormalised 4/9, 3/9, 2/9); top-p = 0.7
  // then needs 4/9 + 3/9 = 7/9 >= 0.7.
  SamplingParams p = sampling(1.0, 13);
  p.topK = 3;
  p.topP = 0.7;
  Sampler s(p);
  std::vector<int64_t> counts = histogram(s, logOf({0.1, 0.2, 0.3, 0.4}), 5000);
  EXPECT_EQ(counts[0] + counts[1], 0);
  EXPECT_GT(counts[2], 0);
  EXPECT_GT(counts[3], 0);
}

//===----------------------------------------------------------------------===//
// Distribution and reproducibility
//===----------------------------------------------------------------------===//

TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  Sampler s(sampling(1.0, 2024));
  const int draws = 20000;
  std::vector<int64_t> counts = histogram(s, logOf(probs), draws);
  for (size_t i = 0; i < probs.size(); ++i)
    EXPECT_NEAR(static_cast<double>(counts[i]) / draws, probs[i], 0.02)
        << "token " << i;
}

TEST(SamplerTest, TemperatureFlattensAndSharpens) {
  // p ∝ exp(l / T): at T = 2 the odds of 0 vs 1 are e^1 instead of e^2.
  std::vector<float> logits = {2.0f, 0.0f};
  const int draws = 20000;
  Sampler hot(sampling(2.0, 4));
  std::vector<int64_t> counts = histogram(hot, logits, draws);
  EXPECT_NEAR(static_cast<double>(counts[0]) / draws,
              1.0 / (1.0 + std::exp(-1.0)), 0.02);
  Sampler cold(sampling(0.25, 4));
  counts = histogram(cold, logits, draws);
  EXPECT_NEAR(static_cast<double>(counts[0]) / draws,
              1.0 / (1.0 + std::exp(-8.0)), 0.02);
}

TEST(SamplerTest, SameSeedSameSequence) {
  std::mt19937 gen(3);
  std::vector<float> logits = randomLogits(gen, 50);
  auto run = [&](uint64_t seed) {
    SamplingParams p = sampling(1.0, seed);
    p.topK = 40;
    p.topP = 0.95;
    Sampler s(p);
    std::vector<int64_t> tokens;
    for (int i = 0; i < 1000; ++i)
      tokens.push_back(next(s, logits));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(SamplerTest, MatchesHandDrawnReference) {
  // The contract of Sampling.h spelled out: one mt19937_64 draw per token,
  // u = (x >> 11) * 2^-53, inverse CDF over tokens by probability,
  // descending: here 3 (0.4), 2 (0.3), 1 (0.2), 0 (0.1). Greedy calls in
  // between draw nothing.
  const uint64_t seed = 123456789;
  Sampler s(sampling(1.0, seed));
  std::vector<float> logits = logOf({0.1, 0.2, 0.3, 0.4});
  std::mt19937_64 reference(seed);
  for (int i = 0; i < 1000; ++i) {
    double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    int64_t expected = u < 0.4 ? 3 : u < 0.7 ? 2 : u < 0.9 ? 1 : 0;
    ASSERT_EQ(next(s, logits), expected) << "draw " << i << ", u = " << u;
  }
}

TEST(SamplerTest, CertainTokensStillDrawOnce) {
  // A token that is certain (one token, one +inf logit, nothing possible)
  // still takes its draw, so it does not shift the random stream of the
  // tokens after it.
  const uint64_t seed = 77;
  Sampler s(sampling(1.0, seed));
  std::vector<float> logits = logOf({0.1, 0.2, 0.3, 0.4});
  std::mt19937_64 reference(seed);
  for (int i = 0; i < 300; ++i) {
    switch (i % 4) {
    case 0:
      ASSERT_EQ(next(s, {1.0f}), 0);
      break;
    case 1:
      ASSERT_EQ(next(s, {0.0f, kInf, 0.0f}), 1);
      break;
    case 2:
      ASSERT_EQ(next(s, {kNaN, -kInf}), 0);
      break;
    default:
      break;
    }
    if (i % 4 != 3) {
      reference();
      continue;
    }
    double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    int64_t expected = u < 0.4 ? 3 : u < 0.7 ? 2 : u < 0.9 ? 1 : 0;
    ASSERT_EQ(next(s, logits), expected) << "draw " << i;
  }
}

/// The pipeline of Sampling.h written out plainly, with full sorts, for one
/// token: divide by T, top-k, softmax, stable sort by probability, top-p,
/// renormalise, inverse CDF with `u`.
int64_t referenceSample(std::vector<float> logits, const SamplingParams &p,
                        double u) {
  size_t vocab = logits.size();
  std::vector<double> scaled(vocab);
  for (size_t i = 0; i < vocab; ++i)
    scaled[i] = (std::isnan(logits[i]) ? -HUGE_VAL : logits[i]) / p.temperature;
  std::vector<size_t> order(vocab);
  for (size_t i = 0; i < vocab; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scaled[a] > scaled[b]; });
  if (p.topK > 0 && static_cast<size_t>(p.topK) < vocab)
    order.resize(p.topK);
  double maxScaled = scaled[order[0]];
  std::vector<double> prob(vocab, 0.0);
  double total = 0;
  for (size_t i : order)
    total += prob[i] = std::exp(scaled[i] - maxScaled);
  for (size_t i : order)
    prob[i] /= total;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return prob[a] > prob[b]; });
  if (p.topP < 1) {
    double cumulative = 0;
    size_t count = 0;
    while (count < order.size() && (count == 0 || cumulative < p.topP))
      cumulative += prob[order[count++]];
    order.resize(count);
  }
  double mass = 0;
  for (size_t i : order)
    mass += prob[i];
  double cumulative = 0;
  for (size_t i : order) {
    cumulative += prob[i] / mass;
    if (cumulative > u)
      return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(order.back());
}

TEST(SamplerTest, MatchesPlainReferencePipeline) {
  // The Sampler selects lazily (nth_element, a heap popped only as far as
  // needed); on random inputs with ties it must agree with full sorts.
  std::mt19937 gen(99);
  const double temperatures[] = {0.3, 1.0, 2.5};
  const int64_t topKs[] = {0, 1, 5, 40, 300};
  const double topPs[] = {1.0, 0.9, 0.5, 0.05};
  uint64_t seed = 1000;
  for (double temperature : temperatures)
    for (int64_t topK : topKs)
      for (double topP : topPs) {
        SamplingParams p = sampling(temperature, ++seed);
        p.topK = topK;
        p.topP = topP;
        Sampler s(p);
        std::mt19937_64 reference(seed);
        for (int row = 0; row < 100; ++row) {
          std::vector<float> logits = randomLogits(gen, 200);
          logits[gen() % 200] = kNaN;
          double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
          ASSERT_EQ(next(s, logits), referenceSample(logits, p, u))
              << "T " << temperature << ", top-k " << topK << ", top-p " << topP
              << ", row " << row;
        }
      }
}

//===----------------------------------------------------------------------===//
// Repetition penalty
//===----------------------------------------------------------------------===//

TEST(SamplerTest, RepetitionPenaltyDividesPositiveLogits) {
  SamplingParams p;
  p.repetitionPenalty = 2.0;
  Sampler s(p);
  // 2.0 / 2 = 1.0 < 1.5.
  EXPECT_EQ(next(s, {2.0f, 1.5f, 0.1f}), 0);
  EXPECT_EQ(next(s, {2.0f, 1.5f, 0.1f}, {0}), 1);
}

TEST(SamplerTest, RepetitionPenaltyMultipliesNegativeLogits) {
  SamplingParams p;
  p.repetitionPenalty = 2.0;
  Sampler s(p);
  // -1.0 * 2 = -2.0 < -1.5: dividing would have raised it to -0.5.
  EXPECT_EQ(next(s, {-1.0f, -1.5f, -3.0f}), 0);
  EXPECT_EQ(next(s, {-1.0f, -1.5f, -3.0f}, {0}), 1);
  // A penalty below 1 encourages instead.
  p.repetitionPenalty = 0.5;
  Sampler encourage(p);
  EXPECT_EQ(next(encourage, {-1.0f, -1.5f, -3.0f}, {1}), 1);
}

TEST(SamplerTest, RepetitionPenaltyOncePerDistinctToken) {
  SamplingParams p;
  p.repetitionPenalty = 1.5;
  Sampler s(p);
  // Once: 2.0 / 1.5 = 1.33 > 1.2 keeps token 0; twice would give 0.89.
  EXPECT_EQ(next(s, {2.0f, 1.2f}, {0, 0, 0}), 0);
  // Both penalised: the order is unchanged.
  EXPECT_EQ(next(s, {2.0f, 1.2f}, {1, 0, 1, 0}), 0);
}

TEST(SamplerTest, RepetitionPenaltyIgnoresIdsOutsideTheVocabulary) {
  SamplingParams p;
  p.repetitionPenalty = 4.0;
  Sampler s(p);
  EXPECT_EQ(next(s, {1.0f, 2.0f, 0.0f}, {-1, 3, 1000}), 1);
}

TEST(SamplerTest, RepetitionPenaltyAppliesWhenSampling) {
  SamplingParams p = sampling(1.0, 8);
  p.repetitionPenalty = 1000.0;
  p.topK = 1;
  Sampler s(p);
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(next(s, {5.0f, 4.0f, 3.0f}, {0}), 1);
}

//===----------------------------------------------------------------------===//
// Non-finite logits
//===----------------------------------------------------------------------===//

TEST(SamplerTest, NaNIsNeverSampled) {
  std::vector<float> logits = {kNaN, 0.0f, kNaN, 0.0f, kNaN};
  SamplingParams plain = sampling(1.0, 21);
  SamplingParams filtered = plain;
  filtered.topK = 4;
  filtered.topP = 0.9;
  SamplingParams hot = sampling(1e6, 21);
  for (const SamplingParams &p : {plain, filtered, hot}) {
    Sampler s(p);
    std::vector<int64_t> counts = histogram(s, logits, 5000);
    EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
    EXPECT_GT(counts[1], 0);
    EXPECT_GT(counts[3], 0);
  }
  // Also when the penalty meets a NaN.
  SamplingParams penalised = plain;
  penalised.repetitionPenalty = 1.3;
  Sampler s(penalised);
  for (int i = 0; i < 1000; ++i) {
    int64_t token = next(s, logits, {0, 1, 2});
    ASSERT_TRUE(token == 1 || token == 3) << token;
  }
}

TEST(SamplerTest, PositiveInfinityTakesAllTheProbability) {
  Sampler s(sampling(1.0, 31));
  std::vector<int64_t> counts = histogram(s, {5.0f, kInf, kNaN, kInf}, 4000);
  EXPECT_EQ(counts[0] + counts[2], 0);
  EXPECT_GT(counts[1], 1000);
  EXPECT_GT(counts[3], 1000);
}

TEST(SamplerTest, NothingPossibleGivesLowestIndex) {
  Sampler s(sampling(1.0, 1));
  EXPECT_EQ(next(s, {kNaN, -kInf, kNaN}), 0);
}

//===----------------------------------------------------------------------===//
// Other behaviour
//===----------------------------------------------------------------------===//

TEST(SamplerTest, VocabularyMayChangeBetweenCalls) {
  Sampler s(sampling(1.0, 17));
  for (size_t vocab : {1000u, 3u, 50000u, 2u}) {
    std::vector<float> logits(vocab, -10.0f);
    logits[vocab - 1] = 50.0f;
    EXPECT_EQ(next(s, logits), static_cast<int64_t>(vocab - 1));
  }
}

TEST(SamplerTest, EmptyVocabularyIsMinusOne) {
  Sampler s(SamplingParams{});
  float logit = 0;
  EXPECT_EQ(s.next(&logit, 0, {}), -1);
  EXPECT_EQ(s.next(nullptr, 4, {}), -1);
}

TEST(SamplerTest, IsStop) {
  SamplingParams p;
  p.stopTokens = {2, 50256};
  Sampler s(p);
  EXPECT_TRUE(s.isStop(2));
  EXPECT_TRUE(s.isStop(50256));
  EXPECT_FALSE(s.isStop(0));
  EXPECT_FALSE(s.isStop(-1));
  EXPECT_FALSE(Sampler(SamplingParams{}).isStop(0));
}

//===----------------------------------------------------------------------===//
// validate()
//===----------------------------------------------------------------------===//

TEST(ValidateSamplingTest, AcceptsDefaultsAndEdges) {
  EXPECT_TRUE(validate(SamplingParams{}, 100).ok());
  SamplingParams p;
  p.temperature = 0.7;
  p.topK = 100000; // more than the vocabulary: no filtering
  p.topP = 1.0;
  p.repetitionPenalty = 0.5;
  p.maxTokens = 1;
  p.stopTokens = {0, 99};
  Status s = validate(p, 100);
  EXPECT_TRUE(s.ok()) << s.error();
}

TEST(ValidateSamplingTest, Temperature) {
  for (double bad : {-1.0, std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    SamplingParams p;
    p.temperature = bad;
    std::string error = validationError(p);
    EXPECT_NE(error.find("temperature"), std::string::npos) << error;
    EXPECT_NE(error.find(">= 0"), std::string::npos) << error;
  }
  SamplingParams p;
  p.temperature = -0.5;
  EXPECT_NE(validationError(p).find("got -0.5"), std::string::npos);
  p.temperature = std::nan("");
  EXPECT_NE(validationError(p).find("got nan"), std::string::npos);
}

TEST(ValidateSamplingTest, TopK) {
  SamplingParams p;
  p.topK = -1;
  std::string error = validationError(p);
  EXPECT_NE(error.find("topK must be >= 0"), std::string::npos) << error;
  EXPECT_NE(error.find("got -1"), std::string::npos) << error;
}

TEST(ValidateSamplingTest, TopP) {
  for (double bad : {0.0, -0.1, 1.0000001, 2.0, std::nan("")}) {
    SamplingParams p;
    p.topP = bad;
    std::string error = validationError(p);
    EXPECT_NE(error.find("topP must be in (0, 1]"), std::string::npos) << error;
  }
  SamplingParams p;
  p.topP = 1.5;
  EXPECT_NE(validationError(p).find("got 1.5"), std::string::npos);
}

TEST(ValidateSamplingTest, RepetitionPenalty) {
  for (double bad : {0.0, -1.0, HUGE_VAL, std::nan("")}) {
    SamplingParams p;
    p.repetitionPenalty = bad;
    std::string error = validationError(p);
    EXPECT_NE(error.find("repetitionPenalty must be finite and > 0"),
              std::string::npos)
        << error;
  }
}

TEST(ValidateSamplingTest, MaxTokens) {
  SamplingParams p;
  p.maxTokens = 0;
  std::string error = validationError(p);
  EXPECT_NE(error.find("maxTokens must be >= 1, got 0"), std::string::npos)
      << error;
}

TEST(ValidateSamplingTest, StopTokens) {
  SamplingParams p;
  p.stopTokens = {5, 100, -1};
  std::string error = validationError(p, 100);
  EXPECT_NE(error.find("stopTokens[1] must be in [0, 100), got 100"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("stopTokens[2] must be in [0, 100), got -1"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("stopTokens[0]"), std::string::npos) << error;
}

TEST(ValidateSamplingTest, ReportsEveryBadField) {
  SamplingParams p;
  p.temperature = -1;
  p.topK = -2;
  p.topP = 0;
  p.repetitionPenalty = 0;
  p.maxTokens = -3;
  std::string error = validationError(p);
  for (const char *field :
       {"temperature", "topK", "topP", "repetitionPenalty", "maxTokens"})
    EXPECT_NE(error.find(field), std::string::npos) << field << ": " << error;
}

TEST(ValidateSamplingTest, VocabSize) {
  std::string error = validationError(SamplingParams{}, 0);
  EXPECT_NE(error.find("vocabSize must be >= 1"), std::string::npos) << error;
}

} // namespace
