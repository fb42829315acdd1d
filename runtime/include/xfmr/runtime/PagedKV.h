//===- PagedKV.h - driving a paged-KV step function -------------*- C++ -*-===//
//
// Part of xfmr. An artifact compiled with --kv-cache=paged is a step
// function: it takes the packed tokens of a ragged batch of sequences (new
// prompt chunks and decode tokens alike), their positions and KV-cache slots,
// each sequence's block table, context length and token range, and one key
// and one value pool per layer that it updates in place; it returns logits
// for every packed token. This file holds the pools and builds one step's
// inputs; the block allocation policy belongs to the caller (the serving
// engine, Engine.h).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_PAGEDKV_H
#define XFMR_RUNTIME_PAGEDKV_H

#include "xfmr/runtime/Artifact.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace xfmr::rt {

/// The KV pools of one step-function artifact, zero-initialized.
class KVPools {
public:
  /// `numBlocks` blocks of the manifest's block size per pool. Fails if the
  /// artifact is not a step function or the pools would exceed `maxBytes`.
  static Expected<KVPools> allocate(const Artifact &artifact, int64_t numBlocks,
                                    uint64_t maxBytes = uint64_t(64) << 30);
  /// As many blocks as fit in `budgetBytes` (vLLM's --kv-cache-bytes);
  /// fails when not even one does, naming the block's size.
  static Expected<KVPools> allocateForBudget(const Artifact &artifact, uint64_t budgetBytes);
  /// Bytes one block takes across all pools (every layer's K and V).
  static uint64_t bytesPerBlock(const Manifest &manifest);
  /// Copies block `src` to `dst` in every pool (copy-on-write of a shared
  /// prefix block, see BlockManager.h).
  void copyBlock(int32_t src, int32_t dst);
  /// Copies block `block` of every pool to `dst` (bytesPerBlock bytes), and
  /// back: the host tier's transfers.
  void copyOut(int32_t block, uint8_t *dst) const;
  void copyIn(const uint8_t *src, int32_t block);
  int64_t numBlocks() const { return blocks; }
  int64_t blockSize() const { return tokensPerBlock; }
  uint64_t bytes() const;
  /// Bytes of one block across all pools (0 for no pools).
  uint64_t blockBytes() const { return blocks ? bytes() / static_cast<uint64_t>(blocks) : 0; }
  /// In the manifest's kv_pool input order.
  std::vector<Tensor> &tensors() { return pools; }

private:
  std::vector<Tensor> pools;
  int64_t blocks = 0;
  int64_t tokensPerBlock = 0;
};

/// Host memory for copies of KV blocks (the prefix cache's host tier):
/// `numSlots()` slots of one block of every pool each, bounded by a byte
/// budget.
class HostKVPool {
public:
  /// As many slots as fit in `budgetBytes` (0 slots for a budget below one
  /// block).
  static Expected<HostKVPool> allocateForBudget(const KVPools &device, uint64_t budgetBytes);
  int64_t numSlots() const { return slots; }
  uint64_t bytes() const { return perSlot * static_cast<uint64_t>(slots); }
  void store(const KVPools &device, int32_t block, int32_t slot) {
    device.copyOut(block, memory.get() + perSlot * static_cast<uint64_t>(slot));
  }
  void load(int32_t slot, KVPools &device, int32_t block) const {
    device.copyIn(memory.get() + perSlot * static_cast<uint64_t>(slot), block);
  }

private:
  std::unique_ptr<uint8_t[]> memory; ///< untouched until a slot is used
  uint64_t perSlot = 0;
  int64_t slots = 0;
};

/// The vocabulary of a step function: its logits' static second dimension
/// (0 when it has no [tokens, vocab] output).
int64_t stepVocabulary(const Artifact &artifact);

/// One sequence's share of a step: its new tokens, the positions they take
/// (the sequence's cached length before the step onwards) and its blocks.
struct StepSequence {
  std::vector<int64_t> tokens;
  int64_t firstPosition = 0;
  std::vector<int32_t> blockTable;
  /// Logits for every new token instead of only the last (perplexity).
  bool allLogits = false;
};

/// Runs one step over `sequences` (each with at least one new token and
/// enough blocks for firstPosition + tokens) and returns the logits of each
/// sequence's last new token, [sequences, vocab] (the step function's
/// logits_indices input: no lm_head work for the rest of a prompt chunk);
/// a sequence with allLogits contributes a row for each of its tokens.
Expected<Tensor> runStep(const Artifact &artifact, KVPools &pools,
                         const std::vector<StepSequence> &sequences);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_PAGEDKV_H
