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

/// The Hugging Face / vLLM repetition penalty: a penalty above 1 lowers a
/// logit whatever its sign (dividing a negative one would raise it).
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
/// Probability follows logit, so this is the order by probability; taking
/// it on logits keeps apart tokens that exp() would round to equal
/// probabilities. A function object so that the algorithms inline it.
struct Better {
  template <typename C> bool operator()(const C &a, const C &b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.index < b.index);
  }
};

/// Softmax weights exp((l - max) / T) lie in [0, 1]. They are tallied by
/// binade, [2^-b, 2^-b+1) in bin b, with everything below 2^-(kBins - 2),
/// zeros included, in the last bin.
constexpr int kBins = 64;

int binOf(double weight) {
  constexpr double kSmallestBinned = 0x1.0p-62; // 2^-(kBins - 2)
  return weight >= kSmallestBinned ? -std::ilogb(weight) : kBins - 1;
}

/// The smallest weight of bins [0, bin]: 2^-bin, or 0 for the last bin.
double binFloor(int bin) { return bin < kBins - 1 ? std::ldexp(1.0, -bin) : 0; }

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

void Sampler::fillCandidates(const float *logits, int64_t vocab,
                             const std::vector<int64_t> &previousTokens) {
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
}

int64_t Sampler::next(const float *logits, int64_t vocab,
                      const std::vector<int64_t> &previousTokens) {
  if (vocab < 1 || !logits)
    return -1;

  double penalty = config.repetitionPenalty;
  bool penalised = penalty != 1.0 && penalty > 0 && std::isfinite(penalty);
  double temperature = config.temperature;
  bool greedy = !(temperature > 0) || !std::isfinite(temperature);
  if (greedy && !penalised) {
    // The argmax (lower index on ties; NaN never wins, as -inf in
    // logitAt) without building the candidates: the engine samples every
    // running sequence every step.
    int64_t best = 0;
    float bestLogit = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < vocab; ++i)
      if (logits[i] > bestLogit) {
        best = i;
        bestLogit = logits[i];
      }
    return best;
  }

  fillCandidates(logits, vocab, previousTokens);

  Better better;
  auto first = candidates.begin();
  auto last = candidates.end();
  auto best = [&] { return std::min_element(first, last, better); };

  if (greedy)
    return best()->index;

  // Drawn before anything can return early, so that each sampled token
  // advances the generator by exactly one draw.
  double u = drawUniform(rng);

  // [first, sortedEnd) holds the best kept tokens, best first.
  auto sortedEnd = first;
  int64_t k = config.topK;
  if (k > 0 && k < vocab) {
    std::nth_element(first, first + k, last, better);
    last = first + k;
    std::sort(first, last, better);
    sortedEnd = last;
  }

  // Softmax in double over the kept tokens, with the maximum subtracted
  // before dividing by the temperature: exp((l - max) / T) equals the
  // max-subtracted softmax of l / T, and cannot overflow or turn into
  // inf - inf however small T is. The weights are summed in index order, or
  // best first after top-k: an order that does not depend on the standard
  // library. Probabilities are weight / total, computed where they are used.
  auto top = sortedEnd != first ? first : best();
  double maxLogit = top->logit;
  if (maxLogit == -kInf)
    return top->index; // Every kept logit is -inf or NaN: nothing to draw.
  double total = 0;
  double binWeight[kBins] = {};
  for (auto it = first; it != last; ++it) {
    if (maxLogit == kInf) // +inf logits share all the probability.
      it->weight = it->logit == kInf ? 1.0 : 0.0;
    else
      it->weight = std::exp((it->logit - maxLogit) / temperature);
    total += it->weight;
    binWeight[binOf(it->weight)] += it->weight;
  }

  // Top-p and the draw walk the kept tokens best first until the running
  // probability reaches topP, or passes u. Without top-k, only the tokens
  // such a walk can reach are sorted: weight follows logit, so the tokens of
  // the heaviest bins are a prefix of the order, and the bins tell how many
  // of them hold enough probability (with a margin for rounding). That is
  // usually a few tokens of the whole vocabulary.
  if (sortedEnd != last) {
    double reach = config.topP < 1 ? config.topP : u;
    double needed = reach * total * (1 + 1e-9);
    int bin = 0;
    for (double covered = binWeight[0]; covered < needed && bin < kBins - 1;)
      covered += binWeight[++bin];
    double lightest = binFloor(bin);
    sortedEnd = std::partition(first, last, [lightest](const Candidate &c) {
      return c.weight >= lightest;
    });
    std::sort(first, sortedEnd, better);
  }
  // The kept tokens best first, as at(0), at(1), ...
  auto at = [&](size_t i) -> const Candidate & {
    if (first + i == sortedEnd) { // Rounding beyond the margin: sort the rest.
      std::sort(sortedEnd, last, better);
      sortedEnd = last;
    }
    return first[i];
  };

  // Top-p: the smallest prefix whose probability reaches topP, at least one
  // token. topP >= 1 keeps everything (the running sum may round below 1).
  size_t kept = static_cast<size_t>(last - first);
  size_t limit = kept;
  double mass = 1;
  if (config.topP < 1) {
    double cumulative = 0;
    size_t count = 0;
    do
      cumulative += at(count++).weight / total;
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
    cumulative += c.weight / total;
    if (cumulative > target)
      return c.index;
    if (c.weight > 0)
      lastPossible = c.index;
  }
  // Rounding left the running sum at or below the target (u within an ulp
  // or so of 1): the last token that had any probability.
  return lastPossible;
}

bool Sampler::sampling() const {
  return config.temperature > 0 && std::isfinite(config.temperature);
}

void Sampler::distribution(const float *logits, int64_t vocab,
                           const std::vector<int64_t> &previousTokens,
                           std::vector<float> &probs) {
  probs.assign(static_cast<size_t>(std::max<int64_t>(vocab, 0)), 0.0f);
  if (vocab < 1 || !logits)
    return;
  if (!sampling()) {
    // next() draws nothing: the argmax of the penalised logits.
    int64_t token = next(logits, vocab, previousTokens);
    probs[static_cast<size_t>(token)] = 1;
    return;
  }
  fillCandidates(logits, vocab, previousTokens);

  // The kept tokens, as next() keeps them: top-k, then (sorted best first)
  // the smallest prefix whose probability reaches top-p.
  Better better;
  auto first = candidates.begin(), last = candidates.end();
  int64_t k = config.topK;
  if (k > 0 && k < vocab) {
    std::nth_element(first, first + k, last, better);
    last = first + k;
  }
  auto top = std::min_element(first, last, better);
  double maxLogit = top->logit;
  if (maxLogit == -kInf) { // nothing to draw: next() returns the best
    probs[static_cast<size_t>(top->index)] = 1;
    return;
  }
  double total = 0;
  for (auto it = first; it != last; ++it) {
    it->weight = maxLogit == kInf ? (it->logit == kInf ? 1.0 : 0.0)
                                  : std::exp((it->logit - maxLogit) / config.temperature);
    total += it->weight;
  }
  double mass = 1;
  if (config.topP < 1) {
    std::sort(first, last, better);
    double cumulative = 0;
    auto end = first;
    do
      cumulative += (end++)->weight / total;
    while (end != last && cumulative < config.topP);
    last = end;
    mass = cumulative;
  }
  for (auto it = first; it != last; ++it)
    probs[static_cast<size_t>(it->index)] = static_cast<float>(it->weight / total / mass);
}

int64_t Sampler::draw(const float *probs, int64_t vocab) {
  double u = drawUniform(rng);
  double cumulative = 0;
  int64_t lastPossible = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    cumulative += probs[i];
    if (probs[i] > 0) {
      if (cumulative > u)
        return i;
      lastPossible = i;
    }
  }
  return lastPossible; // rounding left the sum at or below u
}

int64_t Sampler::verify(const float *logits, int64_t vocab,
                        const std::vector<int64_t> &previousTokens, int64_t proposal,
                        const float *draftProbs) {
  if (!sampling() || proposal < 0 || proposal >= vocab)
    return next(logits, vocab, previousTokens);
  distribution(logits, vocab, previousTokens, targetProbs);
  double p = targetProbs[proposal], q = draftProbs[proposal];
  // Kept with probability min(1, p / q): u < p / q without dividing.
  if (drawUniform(rng) * q < p)
    return proposal;
  // The residual max(0, p - q), normalised; in place of p.
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    float r = std::max(0.0f, targetProbs[i] - draftProbs[i]);
    targetProbs[i] = r;
    total += r;
  }
  if (!(total > 0)) // p == q up to rounding: the proposal had p / q >= 1
    return proposal;
  for (float &r : targetProbs)
    r = static_cast<float>(r / total);
  return draw(targetProbs.data(), vocab);
}

} // namespace xfmr::rt
