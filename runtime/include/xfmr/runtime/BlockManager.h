//===- BlockManager.h - paged KV-cache block allocation ---------*- C++ -*-===//
//
// Part of xfmr. The bookkeeping half of a paged KV cache (vLLM's block
// manager): a fixed number of blocks of `block_size` token slots, each with a
// reference count so that sequences sharing a prompt prefix share its blocks,
// and per-sequence block tables that grow as tokens are appended. Writing
// into a shared block first moves the sequence to a private copy
// (copy-on-write); the copy of the K/V data is the caller's (KVPools::
// copyBlock). The pools themselves are runtime/PagedKV.h.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_BLOCKMANAGER_H
#define XFMR_RUNTIME_BLOCKMANAGER_H

#include "xfmr/runtime/Error.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xfmr::rt {

/// Told when a block's reference count crosses between one and two owners.
/// The prefix cache listens: a block it holds whose count drops to one is
/// held by the cache alone and may become an eviction candidate, without
/// the cache polling every block it holds.
class BlockOwnershipListener {
public:
  virtual ~BlockOwnershipListener() = default;
  /// `block` went from one owner to two.
  virtual void blockShared(int32_t block) = 0;
  /// `block` went from two owners to one.
  virtual void blockUnshared(int32_t block) = 0;
};

class BlockManager {
public:
  BlockManager(int64_t numBlocks, int64_t blockSize);

  /// At most one listener (nullptr: none).
  void setListener(BlockOwnershipListener *l) { listener = l; }

  int64_t numBlocks() const { return static_cast<int64_t>(refCounts.size()); }
  int64_t blockSize() const { return tokensPerBlock; }
  int64_t numFree() const { return static_cast<int64_t>(freeList.size()); }
  /// Blocks needed to hold `tokens` token slots.
  int64_t blocksFor(int64_t tokens) const {
    // Not (tokens + bs - 1) / bs: that overflows near INT64_MAX.
    return tokens / tokensPerBlock + (tokens % tokensPerBlock != 0);
  }

  /// `n` fresh blocks with reference count 1, or an error naming how many
  /// were needed and how many are free (nothing is allocated then).
  Expected<std::vector<int32_t>> allocate(int64_t n);
  /// One more owner of an allocated block (a shared prefix).
  void retain(int32_t block);
  /// One owner fewer; the block is free again at zero.
  void release(int32_t block);
  int32_t refCount(int32_t block) const { return refCounts.at(block); }

  /// "KV cache: N blocks x B tokens = T tokens; max concurrency at L
  /// tokens: k.kx" (how many L-token sequences fit at once).
  std::string summary(int64_t tokensPerSequence) const;

private:
  int64_t tokensPerBlock;
  BlockOwnershipListener *listener = nullptr;
  std::vector<int32_t> refCounts;
  /// Free block ids; allocation pops from the back (lowest ids first).
  std::vector<int32_t> freeList;
};

/// A block-to-block copy the caller must apply to the KV pools before the
/// next step writes into `dst` (copy-on-write of a shared block).
struct BlockCopy {
  int32_t src;
  int32_t dst;
};

/// One sequence's block table and length.
class SequenceBlocks {
public:
  const std::vector<int32_t> &table() const { return blocks; }
  int64_t numTokens() const { return tokens; }

  /// Makes room for `newTokens` more tokens: allocates the blocks that are
  /// missing and, when the sequence would write into a shared (last,
  /// partially filled) block, replaces it by a private copy, returned as a
  /// BlockCopy. All or nothing: on error (not enough free blocks) nothing
  /// changed. Then commit(newTokens) once the step ran.
  Expected<std::optional<BlockCopy>> reserve(BlockManager &manager, int64_t newTokens);
  void commit(int64_t newTokens) { tokens += newTokens; }
  /// Releases the blocks past the committed tokens (reserved for tokens a
  /// step computed but the sequence did not keep: rejected speculation).
  void releaseUnused(BlockManager &manager);
  /// Shortens the sequence to its first `newTokens` tokens (no-op if it is
  /// not longer) and releases the blocks past them. For private blocks: a
  /// shared block kept partially would be written by both holders.
  void truncate(BlockManager &manager, int64_t newTokens) {
    tokens = std::min(tokens, newTokens);
    releaseUnused(manager);
  }

  /// Starts the sequence on `prefix` blocks owned by others (a prefix-cache
  /// hit covering `prefixTokens` tokens): retains each.
  void adoptPrefix(BlockManager &manager, const std::vector<int32_t> &prefix,
                   int64_t prefixTokens);
  /// Releases every block (finished, cancelled or preempted sequence), the
  /// last block first: blocks the prefix cache then holds alone become
  /// eviction candidates leaf first, like vLLM's free block queue.
  void releaseAll(BlockManager &manager);

private:
  std::vector<int32_t> blocks;
  int64_t tokens = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_BLOCKMANAGER_H
