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
// A preempted sequence that swaps (Engine::preempt) marks its path: those
// blocks are copied to the host when evicted even without hits, and come
// back when it resumes and matches them. A finished request's history is
// kept the same way, for a while, for its conversation's next turn.
//
// Work is proportional to what changes, not to what is cached: a running
// sequence adds its blocks one at a time as they fill, through a Cursor
// that remembers where its path ends; the eviction candidates (cache-only
// resident leaves) sit in recency-ordered intrusive lists that are updated
// when a block's owners change (BlockOwnershipListener), so an eviction
// takes the front of a list; the protection budget is two more such lists
// (protected, and wanting protection over the budget) instead of a sort of
// the tree.
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
  /// Copy a kept path (release's Keep::Swap, Keep::Session) to the host
  /// tier when it is released, not when it is evicted: with asynchronous
  /// copies this runs behind the next steps, and eviction finds the copy
  /// made (SGLang's write-through).
  bool writeBackKept = false;
  /// Copy every block to the host tier as it fills (extend()), so that a
  /// finished request's history is there before it is released: sessions
  /// with asynchronous copies, where histories are evicted soon after.
  bool writeThrough = false;
};

/// Copies one block's K/V (every layer) between the device pools and a host
/// slot; the host tier's storage belongs to the implementation.
class BlockMover {
public:
  virtual ~BlockMover() = default;
  virtual void offload(int32_t block, int32_t hostSlot) = 0;
  virtual void load(int32_t hostSlot, int32_t block) = 0;
};

class PrefixCache : private BlockOwnershipListener {
public:
  /// `hostSlots` blocks of host tier behind `mover` (0: no host tier).
  PrefixCache(BlockManager &blocks, PrefixCachePolicy policy = {}, BlockMover *mover = nullptr,
              int64_t hostSlots = 0);
  ~PrefixCache();
  PrefixCache(const PrefixCache &) = delete;
  PrefixCache &operator=(const PrefixCache &) = delete;

  struct Node;

  /// A running sequence's place in the tree: the node of its last cached
  /// block and how many of its blocks are cached. While a cursor holds a
  /// node, that node (and so its path) stays in the tree. Release it with
  /// release() before the sequence's blocks; clear() invalidates it.
  class Cursor {
  public:
    /// Leading full blocks of the sequence that are in the tree.
    int64_t blocks() const { return count; }
    bool holds() const { return node != nullptr; }

  private:
    friend class PrefixCache;
    Node *node = nullptr;
    int64_t count = 0;
  };

  struct Match {
    std::vector<int32_t> blocks; ///< to adopt with SequenceBlocks::adoptPrefix
    int64_t tokens = 0;          ///< blocks.size() * block size
  };
  /// The longest cached block-aligned prefix of `tokens`, leaving at least
  /// one token uncovered (the step needs a new token to produce logits).
  /// Counts a query and its hit tokens; marks the path used at `now`. Host
  /// copies on the path are loaded into device blocks (evicting others if
  /// needed); the match ends where no device block can be had. Loads are
  /// appended to `log` ("load host slot 2 -> block 9"). With `cursor`, it
  /// is set to the end of the match (released first if it held a node).
  Match match(const std::vector<int64_t> &tokens, double now,
              std::vector<std::string> *log = nullptr, Cursor *cursor = nullptr);

  /// Starts loading the host copies on `tokens`' cached path into device
  /// blocks (as match() does, evicting others if needed), without counting
  /// a query or a hit: a request about to be admitted (Engine, with
  /// asynchronous copies) finds them resident a step later. Returns the
  /// device blocks loads went to (none when the path is resident).
  std::vector<int32_t> prefetch(const std::vector<int64_t> &tokens, double now,
                                std::vector<std::string> *log = nullptr);

  /// The tokens match() would find for `tokens` (device or host blocks),
  /// without counting a query, loading or touching anything; with
  /// `residentTokens`, also those of them in device blocks (the rest would
  /// be loaded from the host).
  int64_t cachedTokens(const std::vector<int64_t> &tokens,
                       int64_t *residentTokens = nullptr) const;

  /// Adds a running sequence's blocks that became full since the cursor's
  /// last call: block i holds tokens [i*B, (i+1)*B) and is full once
  /// `computedTokens` covers it. Costs one tree step per new block. A block
  /// already cached for the same tokens is kept (the sequence's duplicate
  /// is not stored); a stored block takes a reference. `systemPrompt`
  /// protects the added nodes.
  void extend(Cursor &cursor, const std::vector<int64_t> &tokens, int64_t computedTokens,
              const std::vector<int32_t> &blocks, double now, bool systemPrompt = false);

  /// The sequence stops running (finished, preempted, cancelled): its path
  /// counts as used at `now` (the blocks it held are the most recently used
  /// once it lets go of them; `systemPrompt` protects the path), and the
  /// cursor lets go of its node.
  /// Why a released path should go to the host tier when evicted, whatever
  /// its hits: a preempted sequence that swaps (until a match uses the
  /// blocks again), or a finished request's history kept for its session's
  /// next turn (until `keepUntil`).
  enum class Keep { None, Swap, Session };
  void release(Cursor &cursor, double now, bool systemPrompt = false, Keep keep = Keep::None,
               double keepUntil = 0);

  /// Stores the full blocks of a whole sequence at once (extend from an
  /// empty cursor, then let go): every node on the path counts as used.
  void insert(const std::vector<int64_t> &tokens, const std::vector<int32_t> &blocks, double now,
              bool systemPrompt = false);

  /// Frees cache-only blocks until `needed` blocks are free in the block
  /// manager or nothing is evictable; returns how many it freed. Each
  /// eviction is appended to `log` when given ("evict block 7 (lru, age
  /// 12.0s)", with " -> host slot 3" when the block moved to the host tier).
  int64_t evict(int64_t needed, double now, std::vector<std::string> *log = nullptr);

  /// Releases every cached block. Cursors point into the tree: release
  /// them first.
  void clear();

  /// Device blocks the cache holds.
  int64_t numCachedBlocks() const { return cachedBlocks; }
  /// Of those, the ones eviction could free now (cache-only leaves).
  int64_t numEvictableBlocks() const {
    return evictPlain.size() + evictDemoted.size() + evictProtected.size();
  }
  /// Nodes holding soft protection (at most the policy's budget).
  int64_t numProtected() const { return protectedNodes.size(); }

  /// Walks the whole tree and checks the incrementally kept state against
  /// it (list membership and order, counters, block ownership): a message
  /// naming the first mismatch, or "" (tests only; O(tree)).
  std::string checkInvariants() const;
  /// Host slots holding a copy, and the host tier's size.
  int64_t numHostBlocks() const { return hostSlots - static_cast<int64_t>(hostFree.size()); }
  int64_t hostCapacity() const { return hostSlots; }
  int64_t hostOffloads() const { return numOffloads; }
  /// Of those, the copies made only because a preempted sequence swapped,
  /// or to keep a session's history.
  int64_t swapOffloads() const { return numSwapOffloads; }
  int64_t sessionOffloads() const { return numSessionOffloads; }
  /// Device blocks freed by evict() so far.
  int64_t evictions() const { return numEvictions; }
  int64_t hostLoads() const { return numLoads; }
  int64_t queries() const { return numQueries; }
  int64_t hits() const { return numHits; }
  int64_t queryTokens() const { return numQueryTokens; }
  int64_t hitTokens() const { return numHitTokens; }
  /// Hit tokens / queried tokens (0 before any query).
  double hitRate() const {
    return numQueryTokens ? static_cast<double>(numHitTokens) / numQueryTokens : 0.0;
  }

private:
  /// Nodes in recency order (least recently used first), threaded through
  /// one of the nodes' links: O(1) insertion at either end and removal,
  /// no allocation.
  class RecencyList {
  public:
    explicit RecencyList(int link) : link(link) {}
    Node *front() const { return head; }
    Node *back() const { return tail; }
    int64_t size() const { return count; }
    bool empty() const { return count == 0; }
    bool contains(const Node *node) const;
    /// Inserts `node` by its lastUse, after the nodes used at the same time
    /// (or before them with `beforeTies`). Scans from both ends at once, so
    /// a node that belongs near either end costs O(1): a node just used
    /// goes last, the parent of an evicted leaf goes first.
    void insert(Node *node, bool beforeTies = false);
    void remove(Node *node);
    Node *next(const Node *node) const;

  private:
    void insertBefore(Node *node, Node *pos);
    int link;
    Node *head = nullptr, *tail = nullptr;
    int64_t count = 0;
  };

  void blockShared(int32_t block) override;
  void blockUnshared(int32_t block) override;

  double effectiveTime(const Node &node, double now) const;
  /// Marks `node` used at `now`: moves it to the back of its lists.
  void touch(Node *node, double now);
  /// Puts a node that wants protection in the protected list or the one
  /// over the budget, by recency, and restores the budget.
  void placeWanting(Node *node);
  /// Gives or takes a node's protection (and moves its eviction list).
  void setProtected(Node *node, bool on);
  /// Moves nodes between the protected list and the one over the budget
  /// until the budget's most recently used nodes hold protection.
  void balanceProtection();
  /// Whether eviction could take `node` now.
  bool evictable(const Node &node) const;
  /// Puts `node` in the eviction list it belongs to now, or in none.
  void refreshEvictable(Node *node, bool beforeTies = false);
  RecencyList &evictionListFor(const Node &node);
  /// The next block to evict: the front of one of the eviction lists.
  Node *pickVictim(double now, bool &expired);
  /// Gives `node` device block `block` (a reference the cache holds).
  void makeResident(Node *node, int32_t block);
  /// The child of `node` for one block of tokens, created if missing.
  Node *childFor(Node *node, const int64_t *tokens);
  void pin(Cursor &cursor, Node *node, int64_t count);
  void unpin(Cursor &cursor);
  /// The cached path of `tokens`' full blocks, leaving at least one token.
  std::vector<Node *> findPath(const std::vector<int64_t> &tokens) const;
  /// Makes the path resident from its root, loading host copies into
  /// device blocks (evicting others if needed) until none can be had;
  /// returns the resident prefix, touched at `now` (and counted as hit by
  /// a request with `hit`).
  std::vector<Node *> loadPath(const std::vector<Node *> &path, double now,
                               std::vector<std::string> *log, bool hit);
  /// A free host slot, dropping the least recently used copy if none is
  /// free; -1 when every slot is taken by a node on the current path.
  int32_t takeHostSlot(std::vector<std::string> *log);
  /// Copies a resident node without a host copy to the host tier now
  /// (PrefixCachePolicy::writeBackKept).
  void writeBack(Node *n);
  /// Removes `node` and its (host-only) subtree from the tree.
  void erase(Node *node);
  /// Takes `node` out of every list.
  void unlink(Node *node);

  BlockManager &manager;
  PrefixCachePolicy policy;
  BlockMover *mover;
  int64_t hostSlots;
  std::vector<int32_t> hostFree;
  std::unique_ptr<Node> root;
  /// The node holding each device block (nullptr: none).
  std::vector<Node *> blockNodes;
  /// Eviction candidates by protection: none wanted, wanted but over the
  /// budget, held. Each is in recency order, so its front is its best
  /// victim (a protected node's bonus only grows with its recency).
  RecencyList evictPlain, evictDemoted, evictProtected;
  /// Nodes that want protection: the most recently used ones holding it
  /// (at most the budget), and the rest.
  RecencyList protectedNodes, overBudget;
  /// Nodes with a host copy.
  RecencyList hostCopies;
  int64_t cachedBlocks = 0;
  int64_t numOffloads = 0, numLoads = 0, numEvictions = 0, numSwapOffloads = 0,
          numSessionOffloads = 0;
  int64_t numQueries = 0, numHits = 0, numQueryTokens = 0, numHitTokens = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_PREFIXCACHE_H
