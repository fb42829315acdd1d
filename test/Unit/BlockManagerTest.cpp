//===- BlockManagerTest.cpp - paged KV-cache block allocation -------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/BlockManager.h"

#include <gtest/gtest.h>

using namespace xfmr::rt;

TEST(BlockManagerTest, AllocatesAndFreesByReferenceCount) {
  BlockManager m(4, 16);
  EXPECT_EQ(m.numFree(), 4);
  Expected<std::vector<int32_t>> a = m.allocate(3);
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(*a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m.numFree(), 1);
  Expected<std::vector<int32_t>> tooMany = m.allocate(2);
  ASSERT_FALSE(tooMany);
  EXPECT_NE(tooMany.error().find("need 2, 1 of 4 free"), std::string::npos) << tooMany.error();
  EXPECT_EQ(m.numFree(), 1) << "a failed allocation takes nothing";
  m.retain(1);
  EXPECT_EQ(m.refCount(1), 2);
  m.release(1);
  EXPECT_EQ(m.numFree(), 1);
  for (int32_t b : *a)
    m.release(b);
  EXPECT_EQ(m.numFree(), 4);
}

TEST(BlockManagerTest, SummaryLine) {
  BlockManager m(100, 16);
  EXPECT_EQ(m.summary(256),
            "KV cache: 100 blocks x 16 tokens = 1600 tokens; max concurrency at 256 tokens: 6.25x");
}

TEST(BlockManagerTest, SequenceGrowsBlockByBlock) {
  BlockManager m(8, 4);
  SequenceBlocks s;
  auto r = s.reserve(m, 6); // prompt of 6: two blocks
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->has_value());
  s.commit(6);
  EXPECT_EQ(s.table().size(), 2u);
  for (int i = 0; i < 2; ++i) { // decode: still in block 1
    ASSERT_TRUE(s.reserve(m, 1));
    s.commit(1);
  }
  EXPECT_EQ(s.table().size(), 2u);
  ASSERT_TRUE(s.reserve(m, 1)); // token 9 opens block 2
  s.commit(1);
  EXPECT_EQ(s.table().size(), 3u);
  EXPECT_EQ(s.numTokens(), 9);
  s.releaseAll(m);
  EXPECT_EQ(m.numFree(), 8);
}

TEST(BlockManagerTest, SharedPrefixIsCopiedOnWrite) {
  BlockManager m(8, 4);
  SequenceBlocks a;
  ASSERT_TRUE(a.reserve(m, 6));
  a.commit(6); // blocks {0, 1}; block 1 half full
  // b shares a's 6 tokens (a prefix-cache hit), then appends.
  SequenceBlocks b;
  b.adoptPrefix(m, a.table(), 6);
  EXPECT_EQ(m.refCount(0), 2);
  EXPECT_EQ(m.refCount(1), 2);
  auto copy = b.reserve(m, 1);
  ASSERT_TRUE(copy) << copy.error();
  ASSERT_TRUE(copy->has_value()) << "writing into the shared half-full block copies it";
  EXPECT_EQ((*copy)->src, 1);
  EXPECT_EQ((*copy)->dst, b.table()[1]);
  EXPECT_NE(b.table()[1], 1);
  EXPECT_EQ(b.table()[0], 0) << "the full shared block stays shared";
  EXPECT_EQ(m.refCount(1), 1);
  EXPECT_EQ(m.refCount(0), 2);
  b.commit(1);
  // A block-aligned shared prefix needs no copy: new tokens open a new block.
  SequenceBlocks c;
  c.adoptPrefix(m, {a.table()[0]}, 4);
  auto none = c.reserve(m, 2);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  a.releaseAll(m);
  b.releaseAll(m);
  c.releaseAll(m);
  EXPECT_EQ(m.numFree(), 8);
}

TEST(BlockManagerTest, ReserveIsAllOrNothing) {
  BlockManager m(3, 4);
  SequenceBlocks a, b;
  ASSERT_TRUE(a.reserve(m, 8));
  a.commit(8);
  auto r = b.reserve(m, 5); // needs 2 blocks, 1 free
  ASSERT_FALSE(r);
  EXPECT_EQ(m.numFree(), 1);
  EXPECT_TRUE(b.table().empty());
}

// Speculative decoding reserves room for proposed tokens and keeps fewer:
// releaseUnused gives back the blocks past the committed tokens, at a block
// boundary and inside a copied (formerly shared) block alike.
TEST(BlockManagerTest, RollbackReleasesUnusedBlocks) {
  BlockManager m(8, 4);
  SequenceBlocks s;
  ASSERT_TRUE(s.reserve(m, 3));
  s.commit(3);                  // one block, 3 of 4 used
  ASSERT_TRUE(s.reserve(m, 4)); // decode token + 3 proposals: tokens 3..6
  EXPECT_EQ(s.table().size(), 2u);
  s.commit(1); // only the decode token kept
  s.releaseUnused(m);
  EXPECT_EQ(s.table().size(), 1u);
  EXPECT_EQ(m.numFree(), 7);
  ASSERT_TRUE(s.reserve(m, 5)); // tokens 4..8 need blocks 1 and 2
  s.commit(3);                  // tokens 4..6 kept: block 1 stays, 2 goes
  s.releaseUnused(m);
  EXPECT_EQ(s.table().size(), 2u);
  EXPECT_EQ(m.numFree(), 6);

  // A sequence on a shared half-full block copies it before writing; its
  // rolled-back proposals leave the copy (it holds kept tokens) and the
  // shared original untouched.
  SequenceBlocks b;
  b.adoptPrefix(m, s.table(), 7);
  auto copy = b.reserve(m, 6); // tokens 7..12: copy of block 1, blocks for 8..12
  ASSERT_TRUE(copy && copy->has_value());
  b.commit(2);
  b.releaseUnused(m);
  EXPECT_EQ(b.table().size(), 3u) << "tokens 0..8 fill two blocks and one of the third";
  EXPECT_EQ(m.refCount(s.table()[1]), 1) << "the original is s's alone again";
  b.releaseAll(m);
  s.releaseAll(m);
  EXPECT_EQ(m.numFree(), 8);
}
