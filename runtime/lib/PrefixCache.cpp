//===- PrefixCache.cpp - radix tree of cached KV blocks -------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PrefixCache.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace xfmr::rt {

namespace {

/// Hash of one block's tokens; the map's equality compares the tokens.
struct TokensHash {
  size_t operator()(const std::vector<int64_t> &tokens) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t t : tokens) {
      h ^= static_cast<uint64_t>(t);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

} // namespace

struct PrefixCache::Node {
  Node *parent = nullptr;
  std::vector<int64_t> tokens; ///< the block's contents (empty at the root)
  int32_t block = -1;          ///< device block, -1 when only the host has it
  int32_t hostSlot = -1;       ///< host copy, -1 when none
  double lastUse = 0;
  int64_t hitCount = 0; ///< requests that matched through this node
  bool systemPrompt = false;
  bool protectedNow = false;
  bool onPath = false; ///< part of the match being served: not evictable now
  std::unordered_map<std::vector<int64_t>, std::unique_ptr<Node>, TokensHash> children;

  bool wantsProtection() const { return systemPrompt || hitCount >= 2; }
  bool resident() const { return block >= 0; }
  bool hasResidentChild() const {
    for (auto &[key, child] : children)
      if (child->resident())
        return true;
    return false;
  }
};

namespace {

/// Every node below `root`, parents before children.
template <typename Fn> void forEachNode(PrefixCache::Node *root, Fn fn) {
  std::vector<PrefixCache::Node *> stack{root};
  while (!stack.empty()) {
    PrefixCache::Node *n = stack.back();
    stack.pop_back();
    for (auto &[key, child] : n->children) {
      fn(child.get());
      stack.push_back(child.get());
    }
  }
}

} // namespace

PrefixCache::PrefixCache(BlockManager &blocks, PrefixCachePolicy policy, BlockMover *mover,
                         int64_t hostSlots)
    : manager(blocks), policy(policy), mover(mover), hostSlots(mover ? hostSlots : 0),
      root(std::make_unique<Node>()) {
  for (int64_t i = this->hostSlots - 1; i >= 0; --i)
    hostFree.push_back(static_cast<int32_t>(i));
}

PrefixCache::~PrefixCache() { clear(); }

PrefixCache::Match PrefixCache::match(const std::vector<int64_t> &tokens, double now,
                                      std::vector<std::string> *log) {
  int64_t bs = manager.blockSize();
  ++numQueries;
  numQueryTokens += static_cast<int64_t>(tokens.size());
  // Leave at least one token for the step to compute.
  int64_t usable = tokens.empty() ? 0 : (static_cast<int64_t>(tokens.size()) - 1) / bs;
  std::vector<Node *> path;
  std::vector<int64_t> key(static_cast<size_t>(bs));
  for (Node *node = root.get(); static_cast<int64_t>(path.size()) < usable;) {
    int64_t b = static_cast<int64_t>(path.size());
    std::copy(tokens.begin() + b * bs, tokens.begin() + (b + 1) * bs, key.begin());
    auto it = node->children.find(key);
    if (it == node->children.end())
      break;
    node = it->second.get();
    path.push_back(node);
  }
  for (Node *n : path)
    n->onPath = true;
  Match m;
  for (Node *n : path) {
    if (!n->resident()) {
      // A host copy: bring it back into a device block.
      if (manager.numFree() < 1)
        evict(1, now, log);
      if (manager.numFree() < 1)
        break;
      Expected<std::vector<int32_t>> got = manager.allocate(1);
      if (!got)
        break;
      n->block = (*got)[0];
      mover->load(n->hostSlot, n->block);
      ++cachedBlocks;
      ++numLoads;
      if (log)
        log->push_back(formatString("load host slot %d -> block %d", n->hostSlot, n->block));
    }
    n->lastUse = now;
    ++n->hitCount;
    m.blocks.push_back(n->block);
  }
  for (Node *n : path)
    n->onPath = false;
  m.tokens = static_cast<int64_t>(m.blocks.size()) * bs;
  numHitTokens += m.tokens;
  numHits += m.tokens > 0;
  enforceProtectionBudget();
  return m;
}

void PrefixCache::insert(const std::vector<int64_t> &tokens, const std::vector<int32_t> &blocks,
                         double now, bool systemPrompt) {
  int64_t bs = manager.blockSize();
  int64_t full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / bs,
                                   static_cast<int64_t>(blocks.size()));
  Node *node = root.get();
  for (int64_t b = 0; b < full; ++b) {
    std::vector<int64_t> key(tokens.begin() + b * bs, tokens.begin() + (b + 1) * bs);
    auto it = node->children.find(key);
    if (it == node->children.end()) {
      auto child = std::make_unique<Node>();
      child->parent = node;
      child->tokens = key;
      it = node->children.emplace(std::move(key), std::move(child)).first;
    }
    node = it->second.get();
    if (!node->resident()) { // new, or only on the host: this block is resident now
      node->block = blocks[b];
      manager.retain(blocks[b]);
      ++cachedBlocks;
    }
    node->lastUse = now;
    node->systemPrompt |= systemPrompt;
  }
  enforceProtectionBudget();
}

double PrefixCache::effectiveTime(const Node &node, double now) const {
  if (!node.protectedNow)
    return node.lastUse;
  double age = std::max(0.0, now - node.lastUse);
  return node.lastUse + policy.protectionSeconds * std::exp2(-age / policy.protectionHalfLife);
}

void PrefixCache::enforceProtectionBudget() {
  // Gather the nodes that want protection; the most recently used keep it.
  std::vector<Node *> wanting;
  forEachNode(root.get(), [&](Node *n) {
    n->protectedNow = false;
    if (n->wantsProtection())
      wanting.push_back(n);
  });
  std::sort(wanting.begin(), wanting.end(),
            [](const Node *a, const Node *b) { return a->lastUse > b->lastUse; });
  for (size_t i = 0; i < wanting.size() && static_cast<int64_t>(i) < policy.protectionBudget; ++i)
    wanting[i]->protectedNow = true;
}

int32_t PrefixCache::takeHostSlot(std::vector<std::string> *log) {
  if (!hostFree.empty()) {
    int32_t slot = hostFree.back();
    hostFree.pop_back();
    return slot;
  }
  // The least recently used copy: of a host-only leaf (the node goes) or of
  // a resident node (only the copy goes).
  Node *victim = nullptr;
  forEachNode(root.get(), [&](Node *n) {
    if (n->hostSlot < 0 || n->onPath || (!n->resident() && !n->children.empty()))
      return;
    if (!victim || n->lastUse < victim->lastUse ||
        (n->lastUse == victim->lastUse && n->hostSlot < victim->hostSlot))
      victim = n;
  });
  if (!victim)
    return -1;
  int32_t slot = victim->hostSlot;
  victim->hostSlot = -1;
  if (log)
    log->push_back(formatString("drop host slot %d (lru)", slot));
  if (!victim->resident())
    erase(victim);
  return slot;
}

void PrefixCache::erase(Node *node) {
  std::vector<Node *> subtree{node};
  forEachNode(node, [&](Node *n) { subtree.push_back(n); });
  for (Node *n : subtree) {
    if (n->resident()) {
      manager.release(n->block);
      --cachedBlocks;
    }
    if (n->hostSlot >= 0)
      hostFree.push_back(n->hostSlot);
  }
  std::vector<int64_t> key = node->tokens; // not a reference into the node erased
  node->parent->children.erase(key);
}

int64_t PrefixCache::evict(int64_t needed, double now, std::vector<std::string> *log) {
  int64_t freed = 0;
  while (manager.numFree() < needed) {
    // Candidates: resident blocks only the cache holds, without resident
    // children. Expired ones first, then by effective recency (protection
    // delays a node, never exempts it).
    Node *victim = nullptr;
    bool victimExpired = false;
    double victimTime = 0;
    forEachNode(root.get(), [&](Node *n) {
      if (!n->resident() || n->onPath || n->hasResidentChild() ||
          manager.refCount(n->block) != 1)
        return;
      bool expired = now - n->lastUse > policy.ttlSeconds;
      double t = effectiveTime(*n, now);
      bool better = !victim || (expired && !victimExpired) ||
                    (expired == victimExpired &&
                     (t < victimTime || (t == victimTime && n->block < victim->block)));
      if (better) {
        victim = n;
        victimExpired = expired;
        victimTime = t;
      }
    });
    if (!victim)
      break;
    std::string line = formatString("evict block %d (%s, age %.1fs)", victim->block,
                              victimExpired ? "ttl"
                                            : (victim->protectedNow ? "protected-lru" : "lru"),
                              now - victim->lastUse);
    // Likely to be reused: keep a host copy (it may have one already).
    bool reusable = !victimExpired && (victim->hitCount >= policy.hostMinHits ||
                                       victim->systemPrompt);
    if (victim->hostSlot < 0 && reusable && hostSlots > 0) {
      victim->onPath = true; // not the copy dropped to make room
      int32_t slot = takeHostSlot(log);
      victim->onPath = false;
      if (slot >= 0) {
        mover->offload(victim->block, slot);
        victim->hostSlot = slot;
        ++numOffloads;
      }
    }
    if (victim->hostSlot >= 0)
      line += formatString(" -> host slot %d", victim->hostSlot);
    if (log)
      log->push_back(line);
    manager.release(victim->block);
    victim->block = -1;
    --cachedBlocks;
    ++freed;
    if (victim->hostSlot < 0)
      erase(victim);
  }
  return freed;
}

void PrefixCache::clear() {
  forEachNode(root.get(), [&](Node *n) {
    if (n->resident())
      manager.release(n->block);
  });
  root = std::make_unique<Node>();
  cachedBlocks = 0;
  hostFree.clear();
  for (int64_t i = hostSlots - 1; i >= 0; --i)
    hostFree.push_back(static_cast<int32_t>(i));
}

} // namespace xfmr::rt
