//===- DraftModel.h - a draft model's proposals for speculation -*- C++ -*-===//
//
// Part of xfmr. Speculative decoding with a draft model: a second step
// artifact over the target's vocabulary (typically the same model quantized,
// a self-draft) proposes k tokens per sequence by decoding k steps of its
// own; the target verifies them in one step (Engine, EngineConfig::
// speculative). The draft keeps its own KV pools and block tables, one
// draft sequence per request, beside the target's.
//
// When the draft's KV layout is the target's (a self-draft: same
// architecture, KV dtype and block size; sameKVLayout), the draft shares
// the target's pools and block tables instead: it reads the target's K/V of
// the context and writes its own only into the slots of the positions the
// target's verification step then computes (the last token and the
// proposals), so it keeps no cache and never prefills. Otherwise a draft
// sequence follows its request: before proposing, the tokens the
// request kept since the last proposal are compared with what the draft
// computed, the draft's K/V past the common prefix are dropped (rejected
// proposals) and the missing tokens are computed in the first draft step
// (a prompt is prefilled there, in chunks of `maxTokensPerStep`). All the
// proposing sequences share each draft step, so k draft steps run per
// target step, whatever the batch.
//
// Proposals are the draft's greedy choice for greedy requests; sampled
// requests draw from the draft's distribution q (the request's sampling
// parameters applied to the draft's logits), which is returned for the
// target's verification (Sampler::verify).
//
// Drafting is best effort: when the draft's KV pool cannot hold a
// sequence, the least recently used other draft sequences are dropped, and
// if that is not enough the sequence proposes nothing this step.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_DRAFTMODEL_H
#define XFMR_RUNTIME_DRAFTMODEL_H

#include "xfmr/runtime/BlockManager.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/Sampling.h"

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace xfmr::rt {

/// Whether two step functions' KV pools are interchangeable: the same
/// layers, heads, head sizes, dtype, block size and kv_pool inputs.
bool sameKVLayout(const Manifest &a, const Manifest &b);

class DraftModel {
public:
  /// One step's model call, as Engine::ModelCall: the logits of each
  /// sequence's last new token, [sequences, vocab].
  using ModelCall =
      std::function<Expected<Tensor>(const std::vector<StepSequence> &)>;

  /// What one sequence asks of the draft.
  struct Request {
    int64_t id = 0;
    const std::vector<int64_t> *tokens =
        nullptr;                              ///< prompt and generated so far
    int64_t numTokens = 0;                    ///< k: tokens to propose
    const SamplingParams *sampling = nullptr; ///< the request's
    /// The target's block table and K/V length (tokens->size() - 1, blocks
    /// reserved for numTokens more): read and written when the KV is shared.
    const std::vector<int32_t> *blockTable = nullptr;
    int64_t position = 0;
  };
  /// The draft's answer to one Request.
  struct Proposal {
    std::vector<int64_t>
        tokens; ///< up to numTokens; empty when it could not run
    /// For a sampled request, q: a distribution [tokens.size(), vocab] the
    /// tokens were drawn from. Empty for greedy requests (q is one-hot).
    std::vector<float> probs;
  };

  /// A draft over `artifact` (a paged step function whose logits have
  /// `vocab` columns, the target's), with KV pools for `kvCacheTokens`
  /// tokens (the tools give it as many as the target's cache holds).
  /// Draft steps take at most `maxTokensPerStep` tokens.
  static Expected<std::unique_ptr<DraftModel>> create(const Artifact &artifact,
                                                      int64_t vocab,
                                                      int64_t kvCacheTokens,
                                                      int64_t maxTokensPerStep);
  /// The same for the artifact in directory `dir`, loaded and owned by the
  /// draft (xfmr-run/xfmr-bench `--speculative draft:DIR`).
  static Expected<std::unique_ptr<DraftModel>> load(const std::string &dir,
                                                    int64_t vocab,
                                                    int64_t kvCacheTokens,
                                                    int64_t maxTokensPerStep);
  /// A draft whose steps call `model`, with `numBlocks` blocks of
  /// `blockSize` tokens, or sharing the target's KV cache (tests).
  static std::unique_ptr<DraftModel>
  createDetached(ModelCall model, int64_t vocab, int64_t numBlocks,
                 int64_t blockSize, int64_t maxTokensPerStep,
                 bool shareKV = false);
  /// Joins the target (Engine::setDraft): shares `targetPools` when the
  /// draft's KV layout is `target`'s, else allocates its own pools.
  Status attach(KVPools *targetPools, const Manifest *target);
  /// Whether the draft reads and writes the target's pools.
  bool sharesKV() const { return shared; }
  /// "draft model DIR: on the target's KV cache" or "...: own KV cache of
  /// N blocks x B tokens" (the tools' startup line).
  std::string summary() const;

  /// Proposes for every request (batched draft steps); one Proposal each,
  /// in order. A model failure fails the whole call.
  Expected<std::vector<Proposal>> propose(const std::vector<Request> &requests);
  /// Drops request `id`'s draft sequence (finished or cancelled).
  void forget(int64_t id);

  int64_t numSequences() const {
    return static_cast<int64_t>(sequences.size());
  }
  int64_t freeBlocks() const { return blocks.numFree(); }
  int64_t totalBlocks() const { return blocks.numBlocks(); }
  /// Draft model calls and tokens computed so far (benchmarks).
  int64_t steps() const { return numSteps; }
  int64_t tokensComputed() const { return numTokens; }

  ~DraftModel();

private:
  struct Sequence {
    SequenceBlocks blocks;
    std::vector<int64_t> computed; ///< tokens whose K/V the draft holds
    Sampler sampler;
    int64_t lastUsed = 0;
    explicit Sequence(const SamplingParams &params);
  };
  /// A proposing sequence during propose().
  struct Work {
    Sequence *seq;
    std::vector<int64_t> pending; ///< tokens to compute before the next draw
    std::vector<int64_t> history; ///< the request's tokens, then proposals
    int64_t wanted;
    Proposal *out;
    int64_t position;                       ///< shared KV: the next token's
    const std::vector<int32_t> *blockTable; ///< shared KV: the target's
  };

  DraftModel(const Artifact *artifact, ModelCall model, int64_t numBlocks,
             int64_t blockSize, int64_t vocab, int64_t maxTokensPerStep);
  /// Rolls `seq` back to its common prefix with the request's tokens, sets
  /// the last work item's pending tokens and reserves room for them plus
  /// k - 1 proposals, dropping other sequences (least recently used first,
  /// none of `work`) when blocks run out. False: no room.
  bool prepare(Sequence &seq, const Request &request, std::vector<Work> &work);
  /// Frees the blocks of the least recently used sequence not in use now.
  bool evictOne(const std::vector<Work> &inUse);
  /// Runs the draft on each work item's next tokens (at most one chunk of a
  /// long catch-up) and draws a token for those whose pending tokens are
  /// all computed.
  /// Drops finished items from `active`.
  Status step(std::vector<Work *> &active);
  void release(Sequence &seq);

  std::unique_ptr<Artifact> owned; ///< load()'s
  const Artifact *artifact;        ///< nullptr for a detached draft
  ModelCall model;
  KVPools pools;                  ///< its own (attach), unless shared
  KVPools *sharedPools = nullptr; ///< the target's, when shared
  bool shared = false;
  BlockManager blocks;
  int64_t vocab;
  int64_t maxTokensPerStep;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences;
  int64_t clock = 0, numSteps = 0, numTokens = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_DRAFTMODEL_H
