//===- PrefixCache.cpp - radix tree of cached KV blocks -------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PrefixCache.h"

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
  int32_t block = -1;
  double lastUse = 0;
  int64_t hitCount = 0; ///< requests that matched through this node
  bool systemPrompt = false;
  bool protectedNow = false;
  std::unordered_map<std::vector<int64_t>, std::unique_ptr<Node>, TokensHash> children;

  bool wantsProtection() const { return systemPrompt || hitCount >= 2; }
};

PrefixCache::PrefixCache(BlockManager &blocks, PrefixCachePolicy policy)
    : manager(blocks), policy(policy), root(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() { clear(); }

PrefixCache::Match PrefixCache::match(const std::vector<int64_t> &tokens, double now) {
  int64_t bs = manager.blockSize();
  ++numQueries;
  numQueryTokens += static_cast<int64_t>(tokens.size());
  Match m;
  Node *node = root.get();
  // Leave at least one token for the step to compute.
  int64_t usable = tokens.empty() ? 0 : (static_cast<int64_t>(tokens.size()) - 1) / bs;
  std::vector<int64_t> key(static_cast<size_t>(bs));
  for (int64_t b = 0; b < usable; ++b) {
    std::copy(tokens.begin() + b * bs, tokens.begin() + (b + 1) * bs, key.begin());
    auto it = node->children.find(key);
    if (it == node->children.end())
      break;
    node = it->second.get();
    node->lastUse = now;
    ++node->hitCount;
    m.blocks.push_back(node->block);
  }
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
      child->block = blocks[b];
      manager.retain(blocks[b]);
      ++cachedBlocks;
      it = node->children.emplace(std::move(key), std::move(child)).first;
    }
    node = it->second.get();
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
  std::vector<Node *> stack{root.get()};
  while (!stack.empty()) {
    Node *n = stack.back();
    stack.pop_back();
    for (auto &[key, child] : n->children) {
      child->protectedNow = false;
      if (child->wantsProtection())
        wanting.push_back(child.get());
      stack.push_back(child.get());
    }
  }
  std::sort(wanting.begin(), wanting.end(),
            [](const Node *a, const Node *b) { return a->lastUse > b->lastUse; });
  for (size_t i = 0; i < wanting.size() && static_cast<int64_t>(i) < policy.protectionBudget; ++i)
    wanting[i]->protectedNow = true;
}

int64_t PrefixCache::evict(int64_t needed, double now, std::vector<std::string> *log) {
  int64_t freed = 0;
  while (manager.numFree() < needed) {
    // Candidates: leaves only the cache holds. Expired ones first, then by
    // effective recency (protection delays a node, never exempts it).
    Node *victim = nullptr;
    bool victimExpired = false;
    double victimTime = 0;
    std::vector<Node *> stack{root.get()};
    while (!stack.empty()) {
      Node *n = stack.back();
      stack.pop_back();
      for (auto &[key, child] : n->children)
        stack.push_back(child.get());
      if (n == root.get() || !n->children.empty() || manager.refCount(n->block) != 1)
        continue;
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
    }
    if (!victim)
      break;
    if (log) {
      char line[160];
      std::snprintf(line, sizeof line, "evict block %d (%s, age %.1fs)", victim->block,
                    victimExpired ? "ttl" : (victim->protectedNow ? "protected-lru" : "lru"),
                    now - victim->lastUse);
      log->push_back(line);
    }
    manager.release(victim->block);
    --cachedBlocks;
    ++freed;
    Node *parent = victim->parent;
    std::vector<int64_t> key = victim->tokens; // not a reference into the node erased
    parent->children.erase(key);
  }
  return freed;
}

void PrefixCache::clear() {
  std::vector<Node *> stack{root.get()};
  while (!stack.empty()) {
    Node *n = stack.back();
    stack.pop_back();
    for (auto &[key, child] : n->children) {
      manager.release(child->block);
      stack.push_back(child.get());
    }
  }
  root = std::make_unique<Node>();
  cachedBlocks = 0;
}

} // namespace xfmr::rt
