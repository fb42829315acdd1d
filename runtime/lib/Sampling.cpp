//===- Sampling.cpp - choosing the next token from logits -----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Sampling.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace xfmr::rt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// The shortest text that reads back as `value` ("0.1", "nan", "-inf").
std::string formatDouble(double value) {
  char buffer[32];
  std::to_chars_result r = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, r.ptr);
}

/// Logit `index` as a double, with NaN read as -inf so that it is never
/// chosen and never poisons the softmax.
double logitAt(const float *logits, int64_t index) {
  double value = logits[index];
  return std::isnan(value) ? -kInf : value;
}

/// The Hugging Face / vLLM repetition penalty: it moves a logit towards
/// -inf whatever its sign (dividing a negative one would raise it).
double penalise(double logit, double penalty) {
  return logit > 0 ? logit / penalty : logit * penalty;
}

/// A uniform double in [0, 1) from one 64-bit draw: the top 53 bits scaled,
/// the same on every standard library.
double drawUniform(std::mt19937_64 &rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// The order of preference: higher (penalised) logit first, then lower
/// index. It is a strict total order, so every selection and sort built on
/// it yields the same tokens in the same order on every standard library.
/// Ordering on logits rather than on probabilities is the same order,
/// except that exp() cannot round two distinct logits to a tie. A function
/// object rather than a function so that the algorithms inline it.
struct Better {
  template <typename C> bool operator()(const C &a, const C &b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.index < b.index);
  }
};

/// The first chunk of the lazily sorted order (see Sampler::next): enough
/// for the usual peaked distribution, small enough to sort quickly.
constexpr size_t kFirstSortedChunk = 256;

} // namespace

Status validate(const SamplingParams &params, int64_t vocabSize) {
  std::string problems;
  auto fail = [&problems](const std::string &problem) {
    if (!problems.empty())
      problems += "; ";
    problems += problem;
  };

  if (vocabSize < 1)
    fail("vocabSize must be >= 1, got " + std::to_string(vocabSize));
  if (!std::isfinite(params.temperature) || params.temperature < 0)
    fail("temperature must be finite and >= 0 (0 = greedy), got " +
         formatDouble(params.temperature));
  if (params.topK < 0)
    fail("topK must be >= 0 (0 = off), got " + std::to_string(params.topK));
  if (!(params.topP > 0 && params.topP <= 1))
    fail("topP must be in (0, 1] (1 = off), got " + formatDouble(params.topP));
  if (!std::isfinite(params.repetitionPenalty) || params.repetitionPenalty <= 0)
    fail("repetitionPenalty must be finite and > 0 (1 = off), got " +
         formatDouble(params.repetitionPenalty));
  if (params.maxTokens < 1)
    fail("maxTokens must be >= 1, got " + std::to_string(params.maxTokens));
  // Without a valid vocabulary every stop token would be reported again.
  if (vocabSize >= 1)
    for (size_t i = 0; i < params.stopTokens.size(); ++i) {
      int64_t token = params.stopTokens[i];
      if (token < 0 || token >= vocabSize)
        fail("stopTokens[" + std::to_string(i) + "] must be in [0, " +
             std::to_string(vocabSize) + "), got " + std::to_string(token));
    }

  if (!problems.empty())
    return Error("invalid sampling parameters: " + problems);
  return Status();
}

Sampler::Sampler(SamplingParams params)
    : config(std::move(params)), rng(config.seed) {}

bool Sampler::isStop(int64_t token) const {
  const std::vector<int64_t> &stops = config.stopTokens;
  return std::find(stops.begin(), stops.end(), token) != stops.end();
}

int64_t Sampler::next(const float *logits, int64_t vocab,
                      const std::vector<int64_t> &previousTokens) {
  if (vocab < 1 || !logits)
    return -1;

  // resize() keeps the capacity: this allocates only for a larger vocabulary.
  candidates.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    candidates[i] = {logitAt(logits, i), 0.0, i};

  double penalty = config.repetitionPenalty;
  if (penalty != 1.0 && penalty > 0 && std::isfinite(penalty))
    for (int64_t token : previousTokens)
      // Recomputed from the original logit, so that a token seen many times
      // is penalised once, as each distinct id is in vLLM.
      if (token >= 0 && token < vocab)
        candidates[token].logit = penalise(logitAt(logits, token), penalty);

  Better better;
  auto first = candidates.begin();
  auto last = candidates.end();
  auto best = [&] { return std::min_element(first, last, better); };

  double temperature = config.temperature;
  if (!(temperature > 0) || !std::isfinite(temperature))
    return best()->index;

  // Drawn before anything can return early, so that each sampled token
  // advances the generator by exactly one draw.
  double u = drawUniform(rng);

  // [first, sortedEnd) holds the best kept tokens in order, best first.
  auto sortedEnd = first;
  int64_t k = config.topK;
  if (k > 0 && k < vocab) {
    std::nth_element(first, first + k, last, better);
    last = first + k;
    // Sorted now, which also fixes the order of the softmax sum below.
    std::sort(first, last, better);
    sortedEnd = last;
  }

  // Softmax in double over the kept tokens (in index order, or best first
  // after top-k), with the maximum subtracted before dividing by the
  // temperature: exp((l - max) / T) equals the max-subtracted softmax of
  // l / T, and cannot overflow or turn into inf - inf however small T is.
  auto top = sortedEnd != first ? first : best();
  double maxLogit = top->logit;
  if (maxLogit == -kInf)
    return top->index; // Every kept logit is -inf or NaN: nothing to draw.
  double total = 0;
  for (auto it = first; it != last; ++it) {
    if (maxLogit == kInf) // +inf logits share all the probability.
      it->prob = it->logit == kInf ? 1.0 : 0.0;
    else
      it->prob = std::exp((it->logit - maxLogit) / temperature);
    total += it->prob;
  }
  double mass = 0;
  for (auto it = first; it != last; ++it) {
    it->prob /= total;
    mass += it->prob;
  }

  // The kept tokens best first, as at(0), at(1), ... Top-p and the draw
  // usually stop after a few tokens, so without top-k the order is built a
  // chunk at a time, each chunk selected from the rest and sorted, growing
  // so that a flat distribution costs a few selections and not a heap pop
  // per token.
  size_t kept = static_cast<size_t>(last - first);
  auto at = [&](size_t i) -> const Candidate & {
    if (first + i == sortedEnd) {
      size_t chunk = std::max(kFirstSortedChunk, 3 * i);
      auto chunkEnd = static_cast<size_t>(last - sortedEnd) > chunk
                          ? sortedEnd + chunk
                          : last;
      if (chunkEnd != last)
        std::nth_element(sortedEnd, chunkEnd, last, better);
      std::sort(sortedEnd, chunkEnd, better);
      sortedEnd = chunkEnd;
    }
    return first[i];
  };

  // Top-p: the smallest prefix whose probability reaches topP, at least one
  // token. topP >= 1 keeps everything (the running sum may round below 1).
  size_t limit = kept;
  if (config.topP < 1) {
    double cumulative = 0;
    size_t count = 0;
    do
      cumulative += at(count++).prob;
    while (count < kept && cumulative < config.topP);
    limit = count;
    mass = cumulative;
  }

  // Inverse CDF over the prefix renormalised to `mass`.
  double target = u * mass;
  double cumulative = 0;
  int64_t lastPossible = -1;
  for (size_t i = 0; i < limit; ++i) {
    const Candidate &c = at(i);
    cumulative += c.prob;
    if (cumulative > target)
      return c.index;
    if (c.prob > 0)
      lastPossible = c.index;
  }
  // Rounding left the running sum at or below the target (u within an ulp
  // or so of 1): the last token that had any probability.
  return lastPossible;
}

} // namespace xfmr::rt
