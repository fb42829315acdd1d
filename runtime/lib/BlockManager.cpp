//===- BlockManager.cpp - paged KV-cache block allocation -----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/BlockManager.h"

#include <cassert>
#include <cstdio>

namespace xfmr::rt {

BlockManager::BlockManager(int64_t numBlocks, int64_t blockSize)
    : tokensPerBlock(blockSize > 0 ? blockSize : 1),
      refCounts(static_cast<size_t>(numBlocks > 0 ? numBlocks : 0), 0) {
  freeList.reserve(refCounts.size());
  for (int64_t b = numBlocks - 1; b >= 0; --b)
    freeList.push_back(static_cast<int32_t>(b));
}

Expected<std::vector<int32_t>> BlockManager::allocate(int64_t n) {
  if (n < 0 || n > numFree())
    return Error("out of KV-cache blocks: need " + std::to_string(n) + ", " +
                 std::to_string(numFree()) + " of " + std::to_string(numBlocks()) + " free");
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int32_t b = freeList.back();
    freeList.pop_back();
    refCounts[b] = 1;
    out.push_back(b);
  }
  return out;
}

void BlockManager::retain(int32_t block) {
  int32_t &count = refCounts.at(block);
  assert(count > 0 && "retaining a free block");
  if (++count == 2 && listener)
    listener->blockShared(block);
}

void BlockManager::release(int32_t block) {
  int32_t &count = refCounts.at(block);
  assert(count > 0 && "releasing a free block");
  if (count <= 0)
    return;
  if (--count == 0)
    freeList.push_back(block);
  else if (count == 1 && listener)
    listener->blockUnshared(block);
}

std::string BlockManager::summary(int64_t tokensPerSequence) const {
  int64_t total = numBlocks() * tokensPerBlock;
  double concurrency =
      tokensPerSequence > 0
          ? static_cast<double>(numBlocks()) /
                static_cast<double>((tokensPerSequence + tokensPerBlock - 1) / tokensPerBlock)
          : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "KV cache: %lld blocks x %lld tokens = %lld tokens; max concurrency at %lld "
                "tokens: %.2fx",
                static_cast<long long>(numBlocks()), static_cast<long long>(tokensPerBlock),
                static_cast<long long>(total), static_cast<long long>(tokensPerSequence),
                concurrency);
  return buf;
}

Expected<std::optional<BlockCopy>> SequenceBlocks::reserve(BlockManager &manager,
                                                            int64_t newTokens) {
  if (newTokens < 0)
    return Error("cannot reserve a negative number of tokens");
  int64_t bs = manager.blockSize();
  int64_t missing = manager.blocksFor(tokens + newTokens) - static_cast<int64_t>(blocks.size());
  if (missing < 0)
    missing = 0;
  // The first new token lands in the last block when it is partially filled.
  bool writesLast = newTokens > 0 && tokens % bs != 0 && !blocks.empty();
  bool cow = writesLast && manager.refCount(blocks.back()) > 1;
  Expected<std::vector<int32_t>> fresh = manager.allocate(missing + (cow ? 1 : 0));
  if (!fresh)
    return fresh.takeError();
  std::optional<BlockCopy> copy;
  size_t next = 0;
  if (cow) {
    int32_t dst = (*fresh)[next++];
    copy = BlockCopy{blocks.back(), dst};
    manager.release(blocks.back());
    blocks.back() = dst;
  }
  for (; next < fresh->size(); ++next)
    blocks.push_back((*fresh)[next]);
  return copy;
}

void SequenceBlocks::releaseUnused(BlockManager &manager) {
  const size_t keep = static_cast<size_t>(manager.blocksFor(tokens));
  while (blocks.size() > keep) {
    manager.release(blocks.back());
    blocks.pop_back();
  }
}

void SequenceBlocks::adoptPrefix(BlockManager &manager, const std::vector<int32_t> &prefix,
                                 int64_t prefixTokens) {
  for (int32_t b : prefix) {
    manager.retain(b);
    blocks.push_back(b);
  }
  tokens = prefixTokens;
}

void SequenceBlocks::releaseAll(BlockManager &manager) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    manager.release(*it);
  blocks.clear();
  tokens = 0;
}

} // namespace xfmr::rt
