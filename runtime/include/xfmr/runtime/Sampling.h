//===- Sampling.h - choosing the next token from logits ---------*- C++ -*-===//
//
// Part of xfmr.
//
// The per-request sampling parameters of the serving runtime and a Sampler
// that turns one row of logits into the next token, with vLLM / Hugging Face
// semantics: repetition penalty, then greedy argmax or temperature, top-k,
// top-p and a draw from what is left.
//
// Sampling is reproducible: a Sampler owns a std::mt19937_64 seeded with
// SamplingParams::seed and takes exactly one 64-bit draw per sampled token,
// turned into a uniform u in [0, 1) as (x >> 11) * 2^-53. The token is the
// first one, in the order of the kept tokens by probability (descending,
// lower index first on ties), at which the cumulative renormalised
// probability exceeds u. The standard distributions are not used because
// their outputs differ between standard libraries.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_SAMPLING_H
#define XFMR_RUNTIME_SAMPLING_H

#include "xfmr/runtime/Error.h"

#include <cstdint>
#include <random>
#include <vector>

namespace xfmr::rt {

/// How one request picks its tokens. Check with validate() before use.
struct SamplingParams {
  /// Softmax temperature; 0 selects greedy decoding (argmax).
  double temperature = 0;
  /// Keep only the topK most likely tokens; 0 disables the filter.
  int64_t topK = 0;
  /// Keep the smallest set of most likely tokens whose probability reaches
  /// topP; 1 disables the filter.
  double topP = 1.0;
  /// Penalty (> 1 discourages) for tokens already in the sequence; 1 is off.
  double repetitionPenalty = 1.0;
  /// Seed of the Sampler's random number generator.
  uint64_t seed = 0;
  /// Tokens that end the sequence (see Sampler::isStop).
  std::vector<int64_t> stopTokens;
  /// The most tokens to generate; enforced by the caller.
  int64_t maxTokens = 16;
};

/// Checks `params` against a vocabulary of `vocabSize` tokens. A failure
/// lists every invalid field, each with its value and the allowed range,
/// separated by "; ".
Status validate(const SamplingParams &params, int64_t vocabSize);

/// Picks tokens for one sequence. Not thread-safe: one Sampler per sequence.
class Sampler {
public:
  /// `params` should have passed validate(); next() does not check them
  /// again but stays well-defined: a temperature that is not positive and
  /// finite means greedy, a topK < 1 or topP >= 1 (or NaN) disables that
  /// filter, a repetitionPenalty that is not positive and finite is off.
  explicit Sampler(SamplingParams params);

  /// The next token given the `vocab` logits of the last position and the
  /// tokens of the sequence so far (prompt and generated; ids outside
  /// [0, vocab) are ignored). NaN logits count as -inf and are never chosen
  /// while any token has a finite or +inf logit; if some are +inf, those
  /// share all the probability. If every kept logit is -inf, the lowest
  /// kept index is returned. Returns -1 when `vocab` < 1 (a caller bug).
  /// Greedy decoding draws no random number; sampling draws exactly one.
  int64_t next(const float *logits, int64_t vocab,
               const std::vector<int64_t> &previousTokens);

  /// The distribution next() draws from, one probability per token:
  /// penalties, temperature, top-k and top-p applied, the rest 0; one-hot
  /// for greedy decoding. Draws nothing.
  void distribution(const float *logits, int64_t vocab,
                    const std::vector<int64_t> &previousTokens, std::vector<float> &probs);

  /// One token drawn from `probs` (a distribution over `vocab` tokens):
  /// the first index at which the cumulative probability exceeds a uniform
  /// draw. One draw.
  int64_t draw(const float *probs, int64_t vocab);

  /// Speculative sampling's verification of a draft model's `proposal`,
  /// drawn from the draft's distribution `draftProbs` (q), given the target
  /// model's `logits` (p after this sampler's processing): the proposal is
  /// kept with probability min(1, p(x) / q(x)); otherwise the token is
  /// drawn from max(0, p - q) normalised. Either way the returned token is
  /// distributed as next()'s would be (Leviathan et al. 2023, Chen et al.
  /// 2023). Greedy decoding returns the argmax, as next(). One draw when
  /// the proposal is kept, two when not.
  int64_t verify(const float *logits, int64_t vocab, const std::vector<int64_t> &previousTokens,
                 int64_t proposal, const float *draftProbs);

  /// Whether next() draws at all (temperature > 0): a greedy sampler's
  /// distribution is one-hot.
  bool sampling() const;

  /// Skips `n` draws, as if next() had sampled n tokens (a sequence whose
  /// first token another engine sampled with the same seed).
  void skipDraws(int64_t n) { rng.discard(static_cast<unsigned long long>(n)); }

  /// Whether `token` is one of the stop tokens.
  bool isStop(int64_t token) const;

  const SamplingParams &params() const { return config; }

private:
  /// A token with its penalised logit (NaN read as -inf), which orders the
  /// tokens, and its unnormalised softmax weight once that has run.
  struct Candidate {
    double logit;
    double weight;
    int64_t index;
  };

  /// `candidates` := every token with its logit, repetition penalty applied.
  void fillCandidates(const float *logits, int64_t vocab,
                      const std::vector<int64_t> &previousTokens);

  SamplingParams config;
  std::mt19937_64 rng;
  /// Reused between calls so that next() allocates only when the vocabulary
  /// grows.
  std::vector<Candidate> candidates;
  std::vector<float> targetProbs; ///< verify()'s p
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_SAMPLING_H
