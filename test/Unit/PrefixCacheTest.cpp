//===- PrefixCacheTest.cpp - radix tree of cached KV blocks ---------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PrefixCache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

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

/// A sequence of the 8 tokens from..from+7 that ran (its two blocks filled
/// through a cursor, each holding `from + i` in the mover) and stopped at
/// time 1, its path released with `keep`.
void stopped(BlockManager &m, PrefixCache &cache, FakeMover &mover, int64_t from,
             PrefixCache::Keep keep, double keepUntil = 0) {
  SequenceBlocks s;
  EXPECT_TRUE(s.reserve(m, 8));
  s.commit(8);
  for (size_t i = 0; i < s.table().size(); ++i)
    mover.device[static_cast<size_t>(s.table()[i])] = static_cast<int>(from) + static_cast<int>(i);
  PrefixCache::Cursor cursor;
  cache.extend(cursor, iota(8, from), 8, s.table(), 0);
  cache.release(cursor, 1, /*systemPrompt=*/false, keep, keepUntil);
  s.releaseAll(m);
}

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

// A preempted sequence that swaps: its blocks (never hit, so otherwise
// dropped when evicted) go to the host tier and come back, with their
// contents, when it resumes; once matched they are ordinary blocks again.
TEST(PrefixCacheTest, SwappedSequenceGoesToTheHostAndComesBack) {
  BlockManager m(4, 4);
  FakeMover mover(4, 4);
  PrefixCache cache(m, {}, &mover, /*hostSlots=*/4);
  stopped(m, cache, mover, 0, PrefixCache::Keep::Swap);
  stopped(m, cache, mover, 100, PrefixCache::Keep::None);
  std::vector<std::string> log;
  EXPECT_EQ(cache.evict(4, 2, &log), 4);
  EXPECT_EQ(cache.hostOffloads(), 2);
  EXPECT_EQ(cache.swapOffloads(), 2);
  EXPECT_EQ(cache.numHostBlocks(), 2) << "the swapped path only";
  EXPECT_EQ(cache.match(iota(9, 100), 3).tokens, 0) << "not swapped: recomputed";
  PrefixCache::Match back = cache.match(iota(9, 0), 3);
  ASSERT_EQ(back.tokens, 8);
  EXPECT_EQ(mover.device[back.blocks[0]], 0);
  EXPECT_EQ(mover.device[back.blocks[1]], 1);
  EXPECT_EQ(cache.checkInvariants(), "");
  cache.clear();
  EXPECT_EQ(m.numFree(), 4);
}

// A finished request's history is kept for its session until the session
// TTL: evicted before it, it goes to the host; after it, it is dropped like
// any block nobody hit.
TEST(PrefixCacheTest, SessionHistoryGoesToTheHostUntilItsTTL) {
  BlockManager m(4, 4);
  FakeMover mover(4, 4);
  PrefixCache cache(m, {}, &mover, /*hostSlots=*/4);
  stopped(m, cache, mover, 0, PrefixCache::Keep::Session, /*keepUntil=*/10);
  stopped(m, cache, mover, 100, PrefixCache::Keep::Session, /*keepUntil=*/3);
  EXPECT_EQ(cache.evict(4, 5), 4);
  EXPECT_EQ(cache.sessionOffloads(), 2);
  EXPECT_EQ(cache.swapOffloads(), 0);
  EXPECT_EQ(cache.match(iota(9, 100), 6).tokens, 0) << "its session expired";
  EXPECT_EQ(cache.match(iota(20, 0), 6).tokens, 8) << "the next turn reloads the history";
  EXPECT_EQ(cache.checkInvariants(), "");
}

// A running sequence hands the cache only its newly full blocks: nothing
// while a block fills, one node per filled block (the prefix is not
// re-inserted every step).
TEST(PrefixCacheTest, ExtendAddsOnlyNewlyFullBlocks) {
  BlockManager m(8, 4);
  PrefixCache cache(m);
  std::vector<int64_t> tokens = iota(12);
  SequenceBlocks s;
  PrefixCache::Cursor cursor;
  for (int64_t t = 1; t <= 12; ++t) { // one token per step, the clock is t
    ASSERT_TRUE(s.reserve(m, 1));
    s.commit(1);
    cache.extend(cursor, tokens, t, s.table(), static_cast<double>(t));
    EXPECT_EQ(cache.numCachedBlocks(), t / 4) << "after " << t << " tokens";
    EXPECT_EQ(cursor.blocks(), t / 4);
  }
  EXPECT_EQ(cache.checkInvariants(), "");
  // Another request sees the blocks while the first still runs.
  EXPECT_EQ(cache.match(iota(9), 13).tokens, 8);
  // Letting go through the cursor counts the whole path as used then; the
  // blocks become evictable once the sequence releases them, leaf first.
  cache.release(cursor, 13);
  EXPECT_EQ(cache.numEvictableBlocks(), 0) << "the sequence still holds them";
  s.releaseAll(m);
  EXPECT_EQ(cache.checkInvariants(), "");
  std::vector<std::string> log;
  EXPECT_EQ(cache.evict(8, 20, &log), 3);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0], "evict block 2 (lru, age 7.0s)");
  EXPECT_EQ(log[1], "evict block 1 (lru, age 7.0s)");
  EXPECT_EQ(log[2], "evict block 0 (lru, age 7.0s)");
}

// Blocks a sequence computed again under a cached prefix are not stored
// twice; the cursor follows the cached path and keeps adding below it.
TEST(PrefixCacheTest, ExtendKeepsTheCachedCopyOfADuplicateBlock) {
  BlockManager m(8, 4);
  PrefixCache cache(m);
  cached(m, cache, iota(4), 0).releaseAll(m); // block 0
  SequenceBlocks s;
  PrefixCache::Cursor cursor;
  ASSERT_TRUE(s.reserve(m, 8)); // blocks 1, 2: the first duplicates block 0
  s.commit(8);
  cache.extend(cursor, iota(8), 8, s.table(), 1);
  EXPECT_EQ(cache.numCachedBlocks(), 2);
  EXPECT_EQ(cursor.blocks(), 2);
  PrefixCache::Match hit = cache.match(iota(9), 2);
  EXPECT_EQ(hit.blocks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(cache.checkInvariants(), "");
  cache.release(cursor, 3);
  s.releaseAll(m);
  EXPECT_EQ(m.numFree(), 6) << "block 1, the duplicate, is free";
  cache.clear();
  EXPECT_EQ(m.numFree(), 8);
}

// Eviction takes the least recently used cache-only leaf: the sequence
// released first goes first, each path leaf to root; a hit moves a path to
// the back; blocks a running sequence holds are never candidates.
TEST(PrefixCacheTest, EvictionFollowsReleaseOrderLeafFirst) {
  BlockManager m(12, 4);
  PrefixCache cache(m);
  SequenceBlocks a = cached(m, cache, iota(8, 0), 0);   // blocks 0, 1
  SequenceBlocks b = cached(m, cache, iota(8, 100), 0); // blocks 2, 3
  SequenceBlocks c = cached(m, cache, iota(8, 200), 0); // blocks 4, 5
  EXPECT_EQ(cache.numEvictableBlocks(), 0) << "all three still run";
  PrefixCache::Cursor ca, cb;
  // Finish b at 1, then a at 2 (through their cursors: the paths count as
  // used when they let go); c keeps running.
  cache.match(iota(9, 100), 1, nullptr, &cb);
  cache.release(cb, 1);
  b.releaseAll(m);
  cache.match(iota(9, 0), 2, nullptr, &ca);
  cache.release(ca, 2);
  a.releaseAll(m);
  EXPECT_EQ(cache.numEvictableBlocks(), 2) << "one leaf per released path";
  EXPECT_EQ(cache.checkInvariants(), "");
  std::vector<std::string> log;
  EXPECT_EQ(cache.evict(12, 5, &log), 4);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0], "evict block 3 (lru, age 4.0s)");
  EXPECT_EQ(log[1], "evict block 2 (lru, age 4.0s)");
  EXPECT_EQ(log[2], "evict block 1 (lru, age 3.0s)");
  EXPECT_EQ(log[3], "evict block 0 (lru, age 3.0s)");
  EXPECT_EQ(cache.numCachedBlocks(), 2) << "c's blocks are in use";
  c.releaseAll(m);
  EXPECT_EQ(cache.checkInvariants(), "");
}

// Random sequences of the cache's operations, with a small protection
// budget and a host tier: after each one, the lists and counters kept
// incrementally agree with a walk of the tree, and no block leaks.
TEST(PrefixCacheTest, IncrementalStateMatchesTheTreeUnderRandomOperations) {
  int64_t evicted = 0, offloads = 0, loads = 0, protectedSeen = 0, kept = 0, prefetched = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
    BlockManager m(24, 2);
    FakeMover mover(24, 4);
    PrefixCachePolicy policy;
    policy.protectionBudget = 3;
    policy.ttlSeconds = 40;
    // Half the runs: every evicted block that is not expired goes to the
    // host; the other half: only kept paths (swap, session), written back
    // when released.
    policy.hostMinHits = seed % 2 ? 0 : 1000;
    policy.writeBackKept = seed % 2 == 0;
    PrefixCache cache(m, policy, &mover, /*hostSlots=*/4);
    struct Running {
      std::vector<int64_t> tokens;
      int64_t computed = 0;
      SequenceBlocks blocks;
      PrefixCache::Cursor cursor;
    };
    std::vector<Running> running;
    double now = 0;
    for (int op = 0; op < 400; ++op, now += 1) {
      int kind = static_cast<int>(pick(5));
      if (kind == 0 && running.size() < 4) { // admit: prompts from a few shared prefixes
        Running r;
        int64_t prefix = pick(3) * 100;
        for (int64_t i = 0, n = 2 + pick(7); i < n; ++i)
          r.tokens.push_back(i < 6 ? prefix + i : pick(3));
        PrefixCache::Match hit = cache.match(r.tokens, now, nullptr, &r.cursor);
        r.blocks.adoptPrefix(m, hit.blocks, hit.tokens);
        r.computed = hit.tokens;
        running.push_back(std::move(r));
      } else if (kind <= 2 && !running.empty()) { // a step: one more token computed
        Running &r = running[static_cast<size_t>(pick(static_cast<int64_t>(running.size())))];
        if (r.computed == static_cast<int64_t>(r.tokens.size()))
          r.tokens.push_back(pick(3));
        if (m.numFree() < 2)
          cache.evict(2, now);
        if (r.blocks.reserve(m, 1)) {
          r.blocks.commit(1);
          ++r.computed;
          cache.extend(r.cursor, r.tokens, r.computed, r.blocks.table(), now, pick(4) == 0);
        }
      } else if (kind == 3 && !running.empty()) { // finish or preempt
        size_t i = static_cast<size_t>(pick(static_cast<int64_t>(running.size())));
        auto keep = static_cast<PrefixCache::Keep>(pick(3));
        kept += keep != PrefixCache::Keep::None;
        cache.release(running[i].cursor, now, /*systemPrompt=*/false, keep, now + pick(20));
        running[i].blocks.releaseAll(m);
        running.erase(running.begin() + static_cast<long>(i));
      } else if (pick(4) == 0) { // a queued request's prefix starts loading
        std::vector<int64_t> tokens;
        int64_t prefix = pick(3) * 100;
        for (int64_t i = 0; i < 6; ++i)
          tokens.push_back(prefix + i);
        prefetched += static_cast<int64_t>(cache.prefetch(tokens, now).size());
      } else {
        evicted += cache.evict(m.numFree() + 1 + pick(6), now);
      }
      protectedSeen += cache.numProtected() > 0;
      std::string why = cache.checkInvariants();
      ASSERT_EQ(why, "") << "seed " << seed << ", operation " << op;
    }
    for (Running &r : running) {
      cache.release(r.cursor, now);
      r.blocks.releaseAll(m);
    }
    offloads += cache.hostOffloads();
    loads += cache.hostLoads();
    cache.clear();
    EXPECT_EQ(m.numFree(), 24) << "seed " << seed;
  }
  // The runs did reach the paths under test.
  EXPECT_GT(evicted, 100);
  EXPECT_GT(offloads, 10);
  EXPECT_GT(loads, 10);
  EXPECT_GT(protectedSeen, 100);
  EXPECT_GT(kept, 100);
  EXPECT_GT(prefetched, 5);
}
