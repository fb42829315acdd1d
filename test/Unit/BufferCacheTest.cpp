//===- BufferCacheTest.cpp - the generated code's heap allocations --------===//
//
// Part of xfmr.
//
// runtime/ukernels/BufferCache.c: large freed blocks come back for requests
// of about their size (never smaller, never more than a quarter larger),
// small ones go straight to malloc/free, the limit bounds what is held (the
// least recently freed block goes first), every block is a malloc block the
// caller may free() and size with malloc_usable_size (the artifact ABI), and
// concurrent use from several threads keeps the accounting exact.
//
//===----------------------------------------------------------------------===//

#include "runtime/ukernels/BufferCache.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kMiB = size_t(1) << 20;

class BufferCacheTest : public ::testing::Test {
protected:
  void SetUp() override { xfmr_uk_buffer_cache_set_limit(64 * kMiB); }
  void TearDown() override { xfmr_uk_buffer_cache_release(); }
};

TEST_F(BufferCacheTest, ReusesALargeBlockOfTheSameSize) {
  void *a = _mlir_memref_to_llvm_alloc(8 * kMiB);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, 8 * kMiB);
  _mlir_memref_to_llvm_free(a);
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 1);
  EXPECT_GE(xfmr_uk_buffer_cache_bytes(), 8 * kMiB);
  void *b = _mlir_memref_to_llvm_alloc(8 * kMiB);
  EXPECT_EQ(a, b);
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 0);
  EXPECT_EQ(xfmr_uk_buffer_cache_bytes(), 0u);
  _mlir_memref_to_llvm_free(b);
}

TEST_F(BufferCacheTest, FitsWithinAQuarterAndPicksTheSmallest) {
  void *big = _mlir_memref_to_llvm_alloc(10 * kMiB);
  void *mid = _mlir_memref_to_llvm_alloc(8 * kMiB);
  _mlir_memref_to_llvm_free(big);
  _mlir_memref_to_llvm_free(mid);
  // 7 MiB: 8 MiB fits (a seventh more), 10 MiB would too but is larger.
  void *p = _mlir_memref_to_llvm_alloc(7 * kMiB);
  EXPECT_EQ(p, mid);
  // 6 MiB: 10 MiB is two thirds more: a fresh block.
  void *q = _mlir_memref_to_llvm_alloc(6 * kMiB);
  EXPECT_NE(q, big);
  // 11 MiB: nothing held is large enough.
  void *r = _mlir_memref_to_llvm_alloc(11 * kMiB);
  EXPECT_NE(r, big);
  EXPECT_GE(malloc_usable_size(r), 11 * kMiB);
  for (void *x : {p, q, r})
    _mlir_memref_to_llvm_free(x);
}

TEST_F(BufferCacheTest, SmallBlocksAreNotHeld) {
  void *p = _mlir_memref_to_llvm_alloc(XFMR_UK_CACHED_MIN_BYTES / 2);
  ASSERT_NE(p, nullptr);
  _mlir_memref_to_llvm_free(p);
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 0);
  _mlir_memref_to_llvm_free(nullptr);
}

TEST_F(BufferCacheTest, TheLimitEvictsTheLeastRecentlyFreed) {
  xfmr_uk_buffer_cache_set_limit(20 * kMiB);
  void *a = _mlir_memref_to_llvm_alloc(8 * kMiB);
  void *b = _mlir_memref_to_llvm_alloc(8 * kMiB);
  void *c = _mlir_memref_to_llvm_alloc(8 * kMiB);
  _mlir_memref_to_llvm_free(a);
  _mlir_memref_to_llvm_free(b);
  _mlir_memref_to_llvm_free(c); // a goes
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 2);
  EXPECT_LE(xfmr_uk_buffer_cache_bytes(), 20 * kMiB);
  void *x = _mlir_memref_to_llvm_alloc(8 * kMiB);
  void *y = _mlir_memref_to_llvm_alloc(8 * kMiB);
  EXPECT_TRUE((x == b && y == c) || (x == c && y == b));
  // A block over the whole limit is freed at once.
  void *huge = _mlir_memref_to_llvm_alloc(32 * kMiB);
  _mlir_memref_to_llvm_free(huge);
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 0);
  _mlir_memref_to_llvm_free(x);
  _mlir_memref_to_llvm_free(y);
}

TEST_F(BufferCacheTest, ZeroLimitHoldsNothing) {
  xfmr_uk_buffer_cache_set_limit(0);
  void *p = _mlir_memref_to_llvm_alloc(8 * kMiB);
  _mlir_memref_to_llvm_free(p);
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 0);
  EXPECT_EQ(xfmr_uk_buffer_cache_bytes(), 0u);
}

TEST_F(BufferCacheTest, BlocksAreMallocBlocks) {
  // A step's outputs leave the generated code and are freed by the runtime.
  void *p = _mlir_memref_to_llvm_alloc(4 * kMiB);
  _mlir_memref_to_llvm_free(p);
  void *q = _mlir_memref_to_llvm_alloc(4 * kMiB);
  EXPECT_GE(malloc_usable_size(q), 4 * kMiB);
  std::free(q);
  void *a = _mlir_memref_to_llvm_aligned_alloc(64, 3 * kMiB + 1);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  _mlir_memref_to_llvm_free(a); // held: any malloc block may be
  EXPECT_EQ(xfmr_uk_buffer_cache_blocks(), 1);
}

TEST_F(BufferCacheTest, ThreadsKeepTheAccountingExact) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        size_t bytes = (1 + (i + t) % 3) * kMiB;
        auto *p = static_cast<char *>(_mlir_memref_to_llvm_alloc(bytes));
        p[0] = p[bytes - 1] = char(i);
        _mlir_memref_to_llvm_free(p);
      }
    });
  for (std::thread &th : threads)
    th.join();
  int blocks = xfmr_uk_buffer_cache_blocks();
  EXPECT_GE(blocks, 1);
  EXPECT_LE(blocks, 12);
  EXPECT_LE(xfmr_uk_buffer_cache_bytes(), 64 * kMiB);
}

} // namespace
