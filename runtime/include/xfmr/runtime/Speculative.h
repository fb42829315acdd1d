//===- Speculative.h - speculative decoding proposals -----------*- C++ -*-===//
//
// Part of xfmr. Speculative decoding proposes a few tokens cheaply and lets
// one step of the target model verify them all: a decode step reads every
// weight once, for one position or for k + 1 (Engine's verification steps,
// EngineConfig::speculative). The proposer here is prompt lookup (vLLM's
// `ngram`, llama.cpp's lookup decoding): the tokens that followed the most
// recent earlier occurrence of the sequence's last n tokens.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_SPECULATIVE_H
#define XFMR_RUNTIME_SPECULATIVE_H

#include <cstdint>
#include <vector>

namespace xfmr::rt {

struct SpeculativeConfig {
  /// Tokens proposed per sequence and step (k); 0 turns speculation off.
  int64_t numTokens = 0;
  /// Match lengths tried, longest first.
  int64_t ngramMin = 1, ngramMax = 4;
  /// Speculate only while at most this many sequences run: verification
  /// multiplies a step's tokens, which a large batch pays for in compute.
  int64_t maxBatch = 8;
  /// Tokens a step may verify per running sequence, decode token included,
  /// times the running sequences: a sequence proposes at most
  /// maxVerifyTokens / running - 1 (0: no limit). Verifying K + 1 tokens
  /// costs what decoding one does only while the step stays bound by the
  /// weight read; on a 2-core CPU a 135M model's step turns compute-bound
  /// near 8 tokens (SmolLM2 with an int4 self-draft: 1.97x at 1 sequence x
  /// 7 tokens, 1.42x at 2 x 4, 1.26x at 2 x 7, 0.98x at 4 x 7). A GPU's
  /// balance point is far higher: raise it there.
  int64_t maxVerifyTokens = 8;
  /// Each sequence proposes fewer tokens while few of its proposals are
  /// kept (adaptiveProposals), up to numTokens.
  bool adaptive = true;
  bool enabled() const { return numTokens > 0; }
};

/// How many tokens a sequence that kept `kept` of `proposed` so far should
/// propose, at most `limit`: its expected run of kept tokens, a / (1 - a)
/// with a = (kept + 1) / (proposed + 2), rounded up, plus one (a verified
/// position costs little next to the weight read, so err long). 2 before
/// any evidence; `limit` once 4 of 5 are kept.
int64_t adaptiveProposals(int64_t kept, int64_t proposed, int64_t limit);

/// Prompt lookup: for n from `maxN` down to `minN`, the last n tokens of
/// `tokens` are searched for among the earlier ones, latest occurrence
/// first; the up to `k` tokens after the first match are the proposal.
/// Empty when nothing matches. O(length x maxN).
std::vector<int64_t> proposeNgram(const std::vector<int64_t> &tokens,
                                  int64_t minN, int64_t maxN, int64_t k);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_SPECULATIVE_H
