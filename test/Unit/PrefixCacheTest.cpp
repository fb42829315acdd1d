//===- PrefixCacheTest.cpp - radix tree of cached KV blocks ---------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PrefixCache.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace xfmr::rt;

namespace {

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

/// A finished sequence of `tokens` whose blocks went into the cache.
SequenceBlocks cached(BlockManager &m, PrefixCache &cache, const std::vector<int64_t> &tokens,
                      double now, bool systemPrompt = false) {
  SequenceBlocks s;
  EXPECT_TRUE(s.reserve(m, static_cast<int64_t>(tokens.size())));
  s.commit(static_cast<int64_t>(tokens.size()));
  cache.insert(tokens, s.table(), now, systemPrompt);
  return s;
}

} // namespace

TEST(PrefixCacheTest, MatchesBlockAlignedPrefixesByContent) {
  BlockManager m(16, 4);
  PrefixCache cache(m);
  SequenceBlocks a = cached(m, cache, iota(10), 0); // blocks for [0..3], [4..7]
  EXPECT_EQ(cache.numCachedBlocks(), 2);
  a.releaseAll(m); // the cache keeps its reference
  EXPECT_EQ(m.numFree(), 14);

  std::vector<int64_t> same = iota(9);
  PrefixCache::Match hit = cache.match(same, 1);
  EXPECT_EQ(hit.tokens, 8);
  EXPECT_EQ(hit.blocks.size(), 2u);

  std::vector<int64_t> diverges = iota(12);
  diverges[5] = 99; // second block differs
  EXPECT_EQ(cache.match(diverges, 2).tokens, 4);

  // A prompt that is exactly the cached blocks keeps its last token to compute.
  EXPECT_EQ(cache.match(iota(8), 3).tokens, 4);
  EXPECT_EQ(cache.match(iota(3, 100), 4).tokens, 0);
  EXPECT_EQ(cache.queries(), 4);
  EXPECT_EQ(cache.hits(), 3);
  EXPECT_EQ(cache.hitTokens(), 16);
  EXPECT_EQ(cache.queryTokens(), 9 + 12 + 8 + 3);
}

TEST(PrefixCacheTest, EvictsLeavesLeastRecentlyUsedFirstAndNeverBlocksInUse) {
  BlockManager m(6, 4);
  PrefixCache cache(m);
  SequenceBlocks a = cached(m, cache, iota(8), 0);     // path A: 2 blocks
  SequenceBlocks b = cached(m, cache, iota(8, 50), 1); // path B: 2 blocks
  a.releaseAll(m);
  EXPECT_EQ(m.numFree(), 2);
  // b still runs: its blocks are not evictable. A's leaf goes, then A's root.
  std::vector<std::string> log;
  EXPECT_EQ(cache.evict(4, 10, &log), 2);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "evict block 1 (lru, age 10.0s)");
  EXPECT_EQ(log[1], "evict block 0 (lru, age 10.0s)");
  EXPECT_EQ(cache.evict(5, 10, &log), 0) << "b's blocks are in use";
  b.releaseAll(m);
  EXPECT_EQ(cache.evict(6, 10, &log), 2);
  EXPECT_EQ(m.numFree(), 6);
  EXPECT_EQ(cache.numCachedBlocks(), 0);
}

TEST(PrefixCacheTest, ProtectionDelaysEvictionAndDecays) {
  PrefixCachePolicy policy;
  policy.protectionSeconds = 60;
  policy.protectionHalfLife = 10;
  policy.ttlSeconds = 1000;
  BlockManager m(4, 4);
  PrefixCache cache(m, policy);
  // A system prompt cached first (older) and a plain prompt cached later.
  cached(m, cache, iota(4, 0), 0, /*systemPrompt=*/true).releaseAll(m);
  cached(m, cache, iota(4, 10), 5).releaseAll(m);
  std::vector<std::string> log;
  // At t=6 the system prompt counts as used ~59s later: the plain one goes.
  EXPECT_EQ(cache.evict(3, 6, &log), 1);
  EXPECT_EQ(log.back(), "evict block 1 (lru, age 1.0s)");
  // Protection decays: long after, it is an ordinary old leaf again.
  cached(m, cache, iota(4, 20), 100).releaseAll(m);
  EXPECT_EQ(cache.evict(3, 101, &log), 1);
  EXPECT_EQ(log.back(), "evict block 0 (protected-lru, age 101.0s)");
}

TEST(PrefixCacheTest, ExpiredBlocksGoFirstAndBudgetLimitsProtection) {
  PrefixCachePolicy policy;
  policy.ttlSeconds = 50;
  policy.protectionBudget = 1;
  BlockManager m(4, 4);
  PrefixCache cache(m, policy);
  cached(m, cache, iota(4, 0), 0).releaseAll(m);   // block 0, will expire
  cached(m, cache, iota(4, 10), 40).releaseAll(m); // block 1, fresh
  std::vector<std::string> log;
  cache.evict(3, 60, &log);
  EXPECT_EQ(log.back(), "evict block 0 (ttl, age 60.0s)");
  // Two shared prompts want protection; the budget of one keeps the newer.
  cached(m, cache, iota(4, 30), 61).releaseAll(m);
  for (double t : {62.0, 63.0})
    cache.match(iota(5, 10), t); // block 1 hit twice, at 63
  for (double t : {64.0, 65.0})
    cache.match(iota(5, 30), t); // block 2 (the :30 prompt) hit twice, at 65
  cache.evict(3, 66, &log);
  EXPECT_EQ(log.back(), "evict block 1 (lru, age 3.0s)")
      << "over the budget, the less recently used shared block is unprotected";
}

namespace {

/// A host tier in plain memory: each device block and host slot holds one
/// number (the block's "contents"), so moves can be checked.
struct FakeMover : BlockMover {
  std::vector<int> device, host;
  std::vector<std::string> calls;
  FakeMover(int blocks, int slots) : device(blocks, -1), host(slots, -1) {}
  void offload(int32_t block, int32_t slot) override {
    host[slot] = device[block];
    calls.push_back("offload " + std::to_string(block) + "->" + std::to_string(slot));
  }
  void load(int32_t slot, int32_t block) override {
    device[block] = host[slot];
    calls.push_back("load " + std::to_string(slot) + "->" + std::to_string(block));
  }
};

} // namespace

TEST(PrefixCacheTest, HostTierKeepsReusedBlocksAndBringsThemBack) {
  BlockManager m(4, 4);
  FakeMover mover(4, 2);
  PrefixCache cache(m, {}, &mover, /*hostSlots=*/2);
  EXPECT_EQ(cache.hostCapacity(), 2);
  // A shared prompt (hit once, so likely reused) and a one-off prompt.
  SequenceBlocks shared = cached(m, cache, iota(8), 0);
  for (size_t i = 0; i < shared.table().size(); ++i)
    mover.device[shared.table()[i]] = 100 + static_cast<int>(i);
  shared.releaseAll(m);
  EXPECT_EQ(cache.match(iota(9), 1).tokens, 8);
  cached(m, cache, iota(4, 50), 2).releaseAll(m);

  // Pressure: everything goes; the one-off block is dropped, the shared
  // path moves to the host (leaf first), and both its nodes stay matchable.
  std::vector<std::string> log;
  EXPECT_EQ(cache.evict(4, 3, &log), 3);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0], "evict block 1 (lru, age 2.0s) -> host slot 0");
  EXPECT_EQ(log[1], "evict block 0 (lru, age 2.0s) -> host slot 1");
  EXPECT_EQ(log[2], "evict block 2 (lru, age 1.0s)");
  EXPECT_EQ(cache.numCachedBlocks(), 0);
  EXPECT_EQ(cache.numHostBlocks(), 2);
  EXPECT_EQ(m.numFree(), 4);

  // A hit loads the path back, root first, into fresh device blocks with
  // the contents they had.
  log.clear();
  PrefixCache::Match hit = cache.match(iota(10), 4, &log);
  EXPECT_EQ(hit.tokens, 8);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(mover.device[hit.blocks[0]], 100);
  EXPECT_EQ(mover.device[hit.blocks[1]], 101);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].rfind("load host slot 1 -> block", 0), 0u) << log[0];
  EXPECT_EQ(log[1].rfind("load host slot 0 -> block", 0), 0u) << log[1];
  EXPECT_EQ(cache.hostLoads(), 2);
  EXPECT_EQ(cache.hostOffloads(), 2);
  // Resident again and still on the host: a second eviction copies nothing.
  EXPECT_EQ(cache.evict(4, 5, &log), 2);
  EXPECT_EQ(cache.hostOffloads(), 2);
  cache.clear();
  EXPECT_EQ(m.numFree(), 4);
  EXPECT_EQ(cache.numHostBlocks(), 0);
}

TEST(PrefixCacheTest, HostTierIsBoundedAndDropsLeastRecentlyUsedCopies) {
  BlockManager m(2, 4);
  FakeMover mover(2, 1);
  PrefixCache cache(m, {}, &mover, /*hostSlots=*/1);
  auto reused = [&](int64_t from, double t) {
    cached(m, cache, iota(4, from), t).releaseAll(m);
    cache.match(iota(5, from), t); // one hit: worth keeping
  };
  reused(0, 0);
  reused(10, 1);
  std::vector<std::string> log;
  cache.evict(2, 2, &log); // both go; only one fits on the host
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0], "evict block 0 (lru, age 2.0s) -> host slot 0");
  EXPECT_EQ(log[1], "drop host slot 0 (lru)");
  EXPECT_EQ(log[2], "evict block 1 (lru, age 1.0s) -> host slot 0");
  EXPECT_EQ(cache.numHostBlocks(), 1);
  EXPECT_EQ(cache.match(iota(5, 0), 3).tokens, 0) << "dropped from the host: recomputed";
  EXPECT_EQ(cache.match(iota(5, 10), 3).tokens, 4) << "on the host: loaded";
  // No device block free for a load: the match stops there (nothing to evict
  // but blocks a sequence holds).
  SequenceBlocks busy;
  ASSERT_TRUE(busy.reserve(m, 4));
  cache.evict(2, 4); // the loaded block goes back to the host
  SequenceBlocks busy2;
  ASSERT_TRUE(busy2.reserve(m, 4));
  EXPECT_EQ(m.numFree(), 0);
  EXPECT_EQ(cache.match(iota(5, 10), 5).tokens, 0);
  busy.releaseAll(m);
  busy2.releaseAll(m);
  EXPECT_EQ(m.numFree(), 2);
}
