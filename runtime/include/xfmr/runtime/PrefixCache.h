//===- PrefixCache.h - radix tree of cached KV blocks -----------*- C++ -*-===//
//
// Part of xfmr. Automatic prefix caching (SGLang's RadixAttention, vLLM's
// prefix caching): a tree whose nodes are full KV-cache blocks, keyed by the
// exact tokens each block holds, so a new request whose prompt starts with
// tokens another request already computed reuses those blocks instead of
// recomputing them. Matching compares token contents (a hash only selects
// the bucket). The cache holds one reference on every block it stores
// (BlockManager), so a block lives while the cache or a sequence uses it.
//
// Eviction frees blocks only the cache holds, leaves first, least recently
// used first. Blocks older than the TTL go before everything else. Nodes
// that several requests hit, or that were inserted as a system prompt, get
// soft protection: their recency counts `protection` seconds later, a bonus
// that halves every `protectionHalfLife` seconds since their last use, and
// at most `protectionBudget` blocks hold it at a time (the least recently
// used lose it first). Protection never pins a block: under pressure a
// protected leaf is still evicted once nothing else is left.
//
// Host tier (SGLang's HiCache, vLLM's CPU offload): with a BlockMover and
// host slots, an evicted block that is likely to be reused (hit by at least
// `hostMinHits` requests, or a system prompt) is copied to a host slot and
// its node stays in the tree without a device block. A later match that
// reaches it copies it back into a free device block instead of
// recomputing it. Device-resident nodes always form the top of the tree
// (a node's ancestors are resident), so "leaf" for device eviction means a
// node without resident children. The host pool is bounded: when full, the
// least recently used host copy goes (a host-only leaf leaves the tree).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_PREFIXCACHE_H
#define XFMR_RUNTIME_PREFIXCACHE_H

#include "xfmr/runtime/BlockManager.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace xfmr::rt {

struct PrefixCachePolicy {
  double ttlSeconds = 600;
  double protectionSeconds = 60;
  double protectionHalfLife = 30;
  int64_t protectionBudget = 1024; ///< blocks
  /// Hits a block needs before eviction moves it to the host tier.
  int64_t hostMinHits = 1;
};

/// Copies one block's K/V (every layer) between the device pools and a host
/// slot; the host tier's storage belongs to the implementation.
class BlockMover {
public:
  virtual ~BlockMover() = default;
  virtual void offload(int32_t block, int32_t hostSlot) = 0;
  virtual void load(int32_t hostSlot, int32_t block) = 0;
};

class PrefixCache {
public:
  /// `hostSlots` blocks of host tier behind `mover` (0: no host tier).
  PrefixCache(BlockManager &blocks, PrefixCachePolicy policy = {}, BlockMover *mover = nullptr,
              int64_t hostSlots = 0);
  ~PrefixCache();
  PrefixCache(const PrefixCache &) = delete;
  PrefixCache &operator=(const PrefixCache &) = delete;

  struct Match {
    std::vector<int32_t> blocks; ///< to adopt with SequenceBlocks::adoptPrefix
    int64_t tokens = 0;          ///< blocks.size() * block size
  };
  /// The longest cached block-aligned prefix of `tokens`, leaving at least
  /// one token uncovered (the step needs a new token to produce logits).
  /// Counts a query and its hit tokens; marks the path used at `now`. Host
  /// copies on the path are loaded into device blocks (evicting others if
  /// needed); the match ends where no device block can be had. Loads are
  /// appended to `log` ("load host slot 2 -> block 9").
  Match match(const std::vector<int64_t> &tokens, double now,
              std::vector<std::string> *log = nullptr);

  /// Stores the full blocks of a sequence: block i holds tokens
  /// [i*B, (i+1)*B). Blocks already cached for the same tokens are kept (the
  /// sequence's duplicates are not stored); new nodes take a reference.
  /// `systemPrompt` protects the inserted path.
  void insert(const std::vector<int64_t> &tokens, const std::vector<int32_t> &blocks, double now,
              bool systemPrompt = false);

  /// Frees cache-only blocks until `needed` blocks are free in the block
  /// manager or nothing is evictable; returns how many it freed. Each
  /// eviction is appended to `log` when given ("evict block 7 (lru, age
  /// 12.0s)", with " -> host slot 3" when the block moved to the host tier).
  int64_t evict(int64_t needed, double now, std::vector<std::string> *log = nullptr);

  /// Releases every cached block.
  void clear();

  /// Device blocks the cache holds.
  int64_t numCachedBlocks() const { return cachedBlocks; }
  /// Host slots holding a copy, and the host tier's size.
  int64_t numHostBlocks() const { return hostSlots - static_cast<int64_t>(hostFree.size()); }
  int64_t hostCapacity() const { return hostSlots; }
  int64_t hostOffloads() const { return numOffloads; }
  int64_t hostLoads() const { return numLoads; }
  int64_t queries() const { return numQueries; }
  int64_t hits() const { return numHits; }
  int64_t queryTokens() const { return numQueryTokens; }
  int64_t hitTokens() const { return numHitTokens; }
  /// Hit tokens / queried tokens (0 before any query).
  double hitRate() const {
    return numQueryTokens ? static_cast<double>(numHitTokens) / numQueryTokens : 0.0;
  }

  struct Node;

private:
  double effectiveTime(const Node &node, double now) const;
  void enforceProtectionBudget();
  /// A free host slot, dropping the least recently used copy if none is
  /// free; -1 when every slot is taken by a node on the current path.
  int32_t takeHostSlot(std::vector<std::string> *log);
  /// Removes `node` and its (host-only) subtree from the tree.
  void erase(Node *node);

  BlockManager &manager;
  PrefixCachePolicy policy;
  BlockMover *mover;
  int64_t hostSlots;
  std::vector<int32_t> hostFree;
  std::unique_ptr<Node> root;
  int64_t cachedBlocks = 0;
  int64_t numOffloads = 0, numLoads = 0;
  int64_t numQueries = 0, numHits = 0, numQueryTokens = 0, numHitTokens = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_PREFIXCACHE_H
