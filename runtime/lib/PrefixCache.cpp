//===- PrefixCache.cpp - radix tree of cached KV blocks -------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PrefixCache.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
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

/// The links of a node, one per kind of list it can be in.
enum Link { RecencyLink, EvictionLink, HostLink, NumLinks };

} // namespace

struct PrefixCache::Node {
  Node *parent = nullptr;
  std::vector<int64_t> tokens; ///< the block's contents (empty at the root)
  int32_t block = -1;          ///< device block, -1 when only the host has it
  int32_t hostSlot = -1;       ///< host copy, -1 when none
  double lastUse = 0;
  int64_t hitCount = 0; ///< requests that matched through this node
  int32_t residentChildren = 0;
  int32_t pins = 0; ///< cursors ending here
  bool systemPrompt = false;
  bool protectedNow = false;
  bool onPath = false; ///< part of the match being served: not evictable now
  /// To the host when evicted (before keepUntil), whatever its hits.
  Keep keep = Keep::None;
  double keepUntil = 0;
  struct {
    Node *prev = nullptr, *next = nullptr;
    const RecencyList *list = nullptr;
  } links[NumLinks];
  std::unordered_map<std::vector<int64_t>, std::unique_ptr<Node>, TokensHash> children;

  bool wantsProtection() const { return systemPrompt || hitCount >= 2; }
  bool resident() const { return block >= 0; }
};

//===----------------------------------------------------------------------===//
// RecencyList
//===----------------------------------------------------------------------===//

bool PrefixCache::RecencyList::contains(const Node *node) const {
  return node->links[link].list == this;
}

PrefixCache::Node *PrefixCache::RecencyList::next(const Node *node) const {
  return node->links[link].next;
}

void PrefixCache::RecencyList::insertBefore(Node *node, Node *pos) {
  auto &l = node->links[link];
  assert(!l.list && "a node is in at most one list per link");
  l.list = this;
  l.next = pos;
  l.prev = pos ? pos->links[link].prev : tail;
  (l.prev ? l.prev->links[link].next : head) = node;
  (pos ? pos->links[link].prev : tail) = node;
  ++count;
}

void PrefixCache::RecencyList::insert(Node *node, bool beforeTies) {
  double t = node->lastUse;
  // The node goes before the first node that is more recent (or as recent,
  // with beforeTies); walk in from both ends and stop at whichever finds it.
  auto belongsBefore = [&](const Node *n) { return beforeTies ? n->lastUse >= t : n->lastUse > t; };
  Node *fromHead = head, *fromTail = tail;
  while (true) {
    if (!fromHead || belongsBefore(fromHead))
      return insertBefore(node, fromHead);
    if (!fromTail || !belongsBefore(fromTail))
      return insertBefore(node, fromTail ? fromTail->links[link].next : head);
    fromHead = fromHead->links[link].next;
    fromTail = fromTail->links[link].prev;
  }
}

void PrefixCache::RecencyList::remove(Node *node) {
  auto &l = node->links[link];
  assert(l.list == this && "removing a node from a list it is not in");
  (l.prev ? l.prev->links[link].next : head) = l.next;
  (l.next ? l.next->links[link].prev : tail) = l.prev;
  l = {};
  --count;
}

//===----------------------------------------------------------------------===//
// PrefixCache
//===----------------------------------------------------------------------===//

PrefixCache::PrefixCache(BlockManager &blocks, PrefixCachePolicy policy, BlockMover *mover,
                         int64_t hostSlots)
    : manager(blocks), policy(policy), mover(mover), hostSlots(mover ? hostSlots : 0),
      root(std::make_unique<Node>()),
      blockNodes(static_cast<size_t>(blocks.numBlocks()), nullptr), evictPlain(EvictionLink),
      evictDemoted(EvictionLink), evictProtected(EvictionLink), protectedNodes(RecencyLink),
      overBudget(RecencyLink), hostCopies(HostLink) {
  for (int64_t i = this->hostSlots - 1; i >= 0; --i)
    hostFree.push_back(static_cast<int32_t>(i));
  manager.setListener(this);
}

PrefixCache::~PrefixCache() {
  clear();
  manager.setListener(nullptr);
}

void PrefixCache::blockShared(int32_t block) {
  if (Node *n = blockNodes[static_cast<size_t>(block)])
    refreshEvictable(n);
}

void PrefixCache::blockUnshared(int32_t block) {
  if (Node *n = blockNodes[static_cast<size_t>(block)])
    refreshEvictable(n);
}

double PrefixCache::effectiveTime(const Node &node, double now) const {
  if (!node.protectedNow)
    return node.lastUse;
  double age = std::max(0.0, now - node.lastUse);
  return node.lastUse + policy.protectionSeconds * std::exp2(-age / policy.protectionHalfLife);
}

void PrefixCache::touch(Node *node, double now) {
  // Out of every list while its recency changes, back in by the new one.
  for (RecencyList *l : {&evictPlain, &evictDemoted, &evictProtected, &protectedNodes, &overBudget})
    if (l->contains(node))
      l->remove(node);
  bool hosted = hostCopies.contains(node);
  if (hosted)
    hostCopies.remove(node);
  node->lastUse = now;
  if (hosted)
    hostCopies.insert(node);
  if (node->wantsProtection())
    placeWanting(node);
  refreshEvictable(node);
}

void PrefixCache::setProtected(Node *node, bool on) {
  if (node->protectedNow == on)
    return;
  node->protectedNow = on;
  refreshEvictable(node); // to the eviction list of its new standing
}

void PrefixCache::placeWanting(Node *node) {
  if (protectedNodes.contains(node))
    protectedNodes.remove(node);
  else if (overBudget.contains(node))
    overBudget.remove(node);
  // Older than a node over the budget: it cannot hold protection either.
  bool over = !overBudget.empty() && node->lastUse < overBudget.back()->lastUse;
  (over ? overBudget : protectedNodes).insert(node);
  setProtected(node, !over);
  balanceProtection();
}

void PrefixCache::balanceProtection() {
  int64_t budget = std::max<int64_t>(policy.protectionBudget, 0);
  while (protectedNodes.size() > budget) {
    Node *n = protectedNodes.front();
    protectedNodes.remove(n);
    overBudget.insert(n);
    setProtected(n, false);
  }
  while (protectedNodes.size() < budget && !overBudget.empty()) {
    Node *n = overBudget.back();
    overBudget.remove(n);
    protectedNodes.insert(n);
    setProtected(n, true);
  }
}

bool PrefixCache::evictable(const Node &node) const {
  return node.resident() && !node.onPath && node.pins == 0 && node.residentChildren == 0 &&
         manager.refCount(node.block) == 1;
}

PrefixCache::RecencyList &PrefixCache::evictionListFor(const Node &node) {
  if (node.protectedNow)
    return evictProtected;
  return node.wantsProtection() ? evictDemoted : evictPlain;
}

void PrefixCache::refreshEvictable(Node *node, bool beforeTies) {
  RecencyList *want = evictable(*node) ? &evictionListFor(*node) : nullptr;
  RecencyList *have = nullptr;
  for (RecencyList *l : {&evictPlain, &evictDemoted, &evictProtected})
    if (l->contains(node))
      have = l;
  if (have == want)
    return;
  if (have)
    have->remove(node);
  if (want)
    want->insert(node, beforeTies);
}

void PrefixCache::makeResident(Node *node, int32_t block) {
  node->block = block;
  blockNodes[static_cast<size_t>(block)] = node;
  ++cachedBlocks;
  if (node->parent && node->parent->residentChildren++ == 0 && node->parent != root.get())
    refreshEvictable(node->parent);
}

PrefixCache::Node *PrefixCache::childFor(Node *node, const int64_t *tokens) {
  std::vector<int64_t> key(tokens, tokens + manager.blockSize());
  auto it = node->children.find(key);
  if (it != node->children.end())
    return it->second.get();
  auto child = std::make_unique<Node>();
  child->parent = node;
  child->tokens = key;
  return node->children.emplace(std::move(key), std::move(child)).first->second.get();
}

void PrefixCache::pin(Cursor &cursor, Node *node, int64_t count) {
  if (cursor.node != node) {
    unpin(cursor);
    if (node && node != root.get()) {
      cursor.node = node;
      ++node->pins;
      refreshEvictable(node);
    }
  }
  cursor.count = count;
}

void PrefixCache::unpin(Cursor &cursor) {
  Node *node = cursor.node;
  cursor = Cursor();
  if (!node)
    return;
  --node->pins;
  refreshEvictable(node);
}

int64_t PrefixCache::cachedTokens(const std::vector<int64_t> &tokens,
                                  int64_t *residentTokens) const {
  std::vector<Node *> path = findPath(tokens);
  // Resident nodes form the top of the path.
  if (residentTokens)
    *residentTokens =
        std::count_if(path.begin(), path.end(), [](Node *n) { return n->resident(); }) *
        manager.blockSize();
  return static_cast<int64_t>(path.size()) * manager.blockSize();
}

std::vector<PrefixCache::Node *> PrefixCache::findPath(const std::vector<int64_t> &tokens) const {
  int64_t bs = manager.blockSize();
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
  return path;
}

std::vector<PrefixCache::Node *> PrefixCache::loadPath(const std::vector<Node *> &path, double now,
                                                       std::vector<std::string> *log, bool hit) {
  for (Node *n : path) {
    n->onPath = true;
    refreshEvictable(n);
  }
  std::vector<Node *> used;
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
      makeResident(n, (*got)[0]);
      mover->load(n->hostSlot, n->block);
      ++numLoads;
      if (log)
        log->push_back(formatString("load host slot %d -> block %d", n->hostSlot, n->block));
    }
    if (hit) { // before touch(): hits decide protection
      ++n->hitCount;
      n->keep = Keep::None;
    }
    used.push_back(n);
  }
  for (Node *n : used)
    touch(n, now);
  // Leaf first, so that of equally recent nodes the deepest goes first.
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    (*it)->onPath = false;
    refreshEvictable(*it);
  }
  return used;
}

PrefixCache::Match PrefixCache::match(const std::vector<int64_t> &tokens, double now,
                                      std::vector<std::string> *log, Cursor *cursor) {
  if (cursor)
    unpin(*cursor);
  ++numQueries;
  numQueryTokens += static_cast<int64_t>(tokens.size());
  std::vector<Node *> used = loadPath(findPath(tokens), now, log, /*hit=*/true);
  Match m;
  for (Node *n : used)
    m.blocks.push_back(n->block);
  if (cursor)
    pin(*cursor, used.empty() ? nullptr : used.back(), static_cast<int64_t>(used.size()));
  m.tokens = static_cast<int64_t>(m.blocks.size()) * manager.blockSize();
  numHitTokens += m.tokens;
  numHits += m.tokens > 0;
  return m;
}

std::vector<int32_t> PrefixCache::prefetch(const std::vector<int64_t> &tokens, double now,
                                           std::vector<std::string> *log) {
  std::vector<Node *> path = findPath(tokens);
  std::vector<bool> wasResident;
  for (Node *n : path)
    wasResident.push_back(n->resident());
  std::vector<int32_t> loaded;
  if (std::all_of(wasResident.begin(), wasResident.end(), [](bool r) { return r; }))
    return loaded;
  std::vector<Node *> used = loadPath(path, now, log, /*hit=*/false);
  for (size_t i = 0; i < used.size(); ++i)
    if (!wasResident[i])
      loaded.push_back(used[i]->block);
  return loaded;
}

void PrefixCache::extend(Cursor &cursor, const std::vector<int64_t> &tokens,
                         int64_t computedTokens, const std::vector<int32_t> &blocks, double now,
                         bool systemPrompt) {
  int64_t bs = manager.blockSize();
  int64_t full = std::min<int64_t>(
      std::min<int64_t>(computedTokens, static_cast<int64_t>(tokens.size())) / bs,
      static_cast<int64_t>(blocks.size()));
  if (full <= cursor.count)
    return;
  Node *node = cursor.node ? cursor.node : root.get();
  int64_t b = cursor.count;
  for (; b < full; ++b) {
    Node *child = childFor(node, tokens.data() + b * bs);
    if (!child->resident()) { // new, or only on the host: this block is resident now
      int32_t block = blocks[static_cast<size_t>(b)];
      if (blockNodes[static_cast<size_t>(block)]) {
        // The block is cached under other tokens (cannot happen for a
        // well-formed sequence); stop rather than break the tree.
        if (child->children.empty() && child->hostSlot < 0) {
          std::vector<int64_t> key = child->tokens; // not a reference into the node erased
          node->children.erase(key);
        }
        break;
      }
      makeResident(child, block);
      manager.retain(block);
    }
    child->systemPrompt |= systemPrompt;
    touch(child, now);
    if (policy.writeThrough)
      writeBack(child);
    node = child;
  }
  pin(cursor, node, b);
}

void PrefixCache::release(Cursor &cursor, double now, bool systemPrompt, Keep keep,
                          double keepUntil) {
  if (keep == Keep::Swap)
    keepUntil = std::numeric_limits<double>::infinity();
  for (Node *n = cursor.node; n && n != root.get(); n = n->parent) {
    n->systemPrompt |= systemPrompt;
    if (keep != Keep::None && (n->keep == Keep::None || keepUntil > n->keepUntil)) {
      n->keep = keep;
      n->keepUntil = keepUntil;
    }
    if (keep != Keep::None && policy.writeBackKept)
      writeBack(n);
    touch(n, now);
  }
  unpin(cursor);
}

void PrefixCache::insert(const std::vector<int64_t> &tokens, const std::vector<int32_t> &blocks,
                         double now, bool systemPrompt) {
  Cursor cursor;
  extend(cursor, tokens, static_cast<int64_t>(tokens.size()), blocks, now, systemPrompt);
  unpin(cursor);
}

void PrefixCache::writeBack(Node *n) {
  if (!n->resident() || n->hostSlot >= 0 || hostSlots == 0)
    return;
  n->onPath = true; // its own copy is not the one dropped to make room
  int32_t slot = takeHostSlot(nullptr);
  n->onPath = false;
  refreshEvictable(n);
  if (slot < 0)
    return;
  mover->offload(n->block, slot);
  n->hostSlot = slot;
  hostCopies.insert(n);
  ++numOffloads;
  bool reused = n->hitCount >= policy.hostMinHits || n->systemPrompt;
  numSwapOffloads += !reused && n->keep == Keep::Swap;
  numSessionOffloads += !reused && n->keep == Keep::Session;
}

PrefixCache::Node *PrefixCache::pickVictim(double now, bool &expired) {
  // Each list's front is its best victim; of those, expired ones first,
  // then by effective recency (protection delays a node, never exempts it).
  Node *victim = nullptr;
  double victimTime = 0;
  expired = false;
  for (RecencyList *l : {&evictPlain, &evictDemoted, &evictProtected}) {
    Node *n = l->front();
    if (!n)
      continue;
    bool isExpired = now - n->lastUse > policy.ttlSeconds;
    double t = effectiveTime(*n, now);
    bool better = !victim || (isExpired && !expired) ||
                  (isExpired == expired &&
                   (t < victimTime || (t == victimTime && n->block < victim->block)));
    if (better) {
      victim = n;
      expired = isExpired;
      victimTime = t;
    }
  }
  return victim;
}

int32_t PrefixCache::takeHostSlot(std::vector<std::string> *log) {
  if (!hostFree.empty()) {
    int32_t slot = hostFree.back();
    hostFree.pop_back();
    return slot;
  }
  // The least recently used copy: of a host-only leaf (the node goes) or of
  // a resident node (only the copy goes). A host-only node with children
  // waits for them, which were evicted (and copied) before it.
  Node *victim = hostCopies.front();
  while (victim && (victim->onPath || (!victim->resident() && !victim->children.empty())))
    victim = hostCopies.next(victim);
  if (!victim)
    return -1;
  int32_t slot = victim->hostSlot;
  victim->hostSlot = -1;
  hostCopies.remove(victim);
  if (log)
    log->push_back(formatString("drop host slot %d (lru)", slot));
  if (!victim->resident())
    erase(victim);
  return slot;
}

void PrefixCache::unlink(Node *node) {
  for (RecencyList *l : {&evictPlain, &evictDemoted, &evictProtected, &protectedNodes,
                         &overBudget, &hostCopies})
    if (l->contains(node))
      l->remove(node);
}

void PrefixCache::erase(Node *node) {
  std::vector<Node *> subtree{node};
  for (size_t i = 0; i < subtree.size(); ++i)
    for (auto &[key, child] : subtree[i]->children)
      subtree.push_back(child.get());
  bool wasProtected = false;
  for (Node *n : subtree) {
    wasProtected |= n->protectedNow;
    unlink(n);
    if (n->resident()) {
      blockNodes[static_cast<size_t>(n->block)] = nullptr; // before the release below
      manager.release(n->block);
      --cachedBlocks;
    }
    if (n->hostSlot >= 0)
      hostFree.push_back(n->hostSlot);
  }
  Node *parent = node->parent;
  if (node->resident())
    --parent->residentChildren;
  std::vector<int64_t> key = node->tokens; // not a reference into the node erased
  parent->children.erase(key);
  if (wasProtected)
    balanceProtection();
  if (parent != root.get())
    refreshEvictable(parent, /*beforeTies=*/true);
}

int64_t PrefixCache::evict(int64_t needed, double now, std::vector<std::string> *log) {
  int64_t freed = 0;
  while (manager.numFree() < needed) {
    bool expired = false;
    Node *victim = pickVictim(now, expired);
    if (!victim)
      break;
    // Out of the lists while it goes; also keeps its own copy from being
    // the one dropped to make room on the host.
    victim->onPath = true;
    refreshEvictable(victim);
    std::string line =
        formatString("evict block %d (%s, age %.1fs)", victim->block,
                     expired ? "ttl" : (victim->protectedNow ? "protected-lru" : "lru"),
                     now - victim->lastUse);
    // Likely to be reused: keep a host copy (it may have one already).
    bool reused = victim->hitCount >= policy.hostMinHits || victim->systemPrompt;
    bool kept = victim->keep != Keep::None && now < victim->keepUntil;
    bool reusable = !expired && (reused || kept);
    if (victim->hostSlot < 0 && reusable && hostSlots > 0) {
      int32_t slot = takeHostSlot(log);
      if (slot >= 0) {
        mover->offload(victim->block, slot);
        victim->hostSlot = slot;
        hostCopies.insert(victim);
        ++numOffloads;
        numSwapOffloads += !reused && victim->keep == Keep::Swap;
        numSessionOffloads += !reused && victim->keep == Keep::Session;
      }
    }
    if (victim->hostSlot >= 0)
      line += formatString(" -> host slot %d", victim->hostSlot);
    if (log)
      log->push_back(line);
    blockNodes[static_cast<size_t>(victim->block)] = nullptr;
    manager.release(victim->block);
    victim->block = -1;
    victim->onPath = false;
    --cachedBlocks;
    ++freed;
    ++numEvictions;
    Node *parent = victim->parent;
    --parent->residentChildren;
    if (victim->hostSlot < 0) {
      erase(victim); // refreshes the parent
      continue;
    }
    // The parent may be a leaf now: next to go among equally recent nodes.
    if (parent != root.get())
      refreshEvictable(parent, /*beforeTies=*/true);
  }
  return freed;
}

void PrefixCache::clear() {
  std::vector<Node *> all;
  for (auto &[key, child] : root->children)
    all.push_back(child.get());
  for (size_t i = 0; i < all.size(); ++i)
    for (auto &[key, child] : all[i]->children)
      all.push_back(child.get());
  for (Node *n : all) {
    unlink(n);
    if (n->resident()) {
      blockNodes[static_cast<size_t>(n->block)] = nullptr;
      manager.release(n->block);
    }
  }
  root = std::make_unique<Node>();
  cachedBlocks = 0;
  hostFree.clear();
  for (int64_t i = hostSlots - 1; i >= 0; --i)
    hostFree.push_back(static_cast<int32_t>(i));
}

std::string PrefixCache::checkInvariants() const {
  std::vector<const Node *> nodes;
  for (auto &[key, child] : root->children)
    nodes.push_back(child.get());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (auto &[key, child] : nodes[i]->children)
      nodes.push_back(child.get());
  auto at = [](const Node *n) { return formatString("node of block %d", n->block); };
  int64_t resident = 0, wanting = 0;
  for (const Node *n : nodes) {
    int32_t residentChildren = 0;
    for (auto &[key, child] : n->children)
      residentChildren += child->resident();
    if (residentChildren != n->residentChildren)
      return at(n) + ": resident children miscounted";
    if (n->resident()) {
      ++resident;
      if (n->parent != root.get() && !n->parent->resident())
        return at(n) + ": resident below a host-only node";
      if (blockNodes[static_cast<size_t>(n->block)] != n)
        return at(n) + ": block not mapped to its node";
    }
    const RecencyList *want =
        evictable(*n) ? &const_cast<PrefixCache *>(this)->evictionListFor(*n) : nullptr;
    for (const RecencyList *l : {&evictPlain, &evictDemoted, &evictProtected})
      if (l->contains(n) != (l == want))
        return at(n) + ": in the wrong eviction list";
    wanting += n->wantsProtection();
    if (n->wantsProtection() && !protectedNodes.contains(n) && !overBudget.contains(n))
      return at(n) + ": wants protection but is in no protection list";
    if (n->protectedNow != protectedNodes.contains(n))
      return at(n) + ": protection flag and list disagree";
    if ((n->hostSlot >= 0) != hostCopies.contains(n))
      return at(n) + ": host copy and host list disagree";
  }
  if (resident != cachedBlocks)
    return "cached block count is " + std::to_string(cachedBlocks) + ", the tree holds " +
           std::to_string(resident);
  if (wanting != protectedNodes.size() + overBudget.size())
    return "protection lists hold nodes that do not want it";
  if (protectedNodes.size() > std::max<int64_t>(policy.protectionBudget, 0) ||
      (protectedNodes.size() < policy.protectionBudget && !overBudget.empty()))
    return "protection budget not filled by the most recent nodes";
  if (!overBudget.empty() && !protectedNodes.empty() &&
      overBudget.back()->lastUse > protectedNodes.front()->lastUse)
    return "a node over the budget is more recent than a protected one";
  for (const RecencyList *l : {&evictPlain, &evictDemoted, &evictProtected, &protectedNodes,
                               &overBudget, &hostCopies}) {
    int64_t count = 0;
    for (const Node *n = l->front(); n; n = l->next(n), ++count)
      if (l->next(n) && l->next(n)->lastUse < n->lastUse)
        return "a recency list is out of order at " + at(n);
    if (count != l->size())
      return "a recency list miscounts its nodes";
  }
  int64_t mapped = 0;
  for (const Node *n : blockNodes)
    mapped += n != nullptr;
  if (mapped != cachedBlocks)
    return "blocks mapped to nodes that are gone";
  return "";
}

} // namespace xfmr::rt
