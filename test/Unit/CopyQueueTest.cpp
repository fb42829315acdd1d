//===- CopyQueueTest.cpp - KV block copies on a thread of their own -------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/CopyQueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

using namespace xfmr::rt;

namespace {
void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
} // namespace

// Copies run in the order they were queued (the hazards between an offload
// from a block and a later load into it depend on it), off the caller's
// thread.
TEST(CopyQueueTest, RunsInOrderOnItsOwnThread) {
  std::vector<int> order;
  std::thread::id ran;
  {
    CopyQueue q(4);
    for (int i = 0; i < 50; ++i)
      q.enqueue(i % 4, i % 2 == 1, [&order, &ran, i] {
        order.push_back(i);
        ran = std::this_thread::get_id();
      });
    q.waitAll();
    EXPECT_EQ(order.size(), 50u);
  }
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(ran, std::this_thread::get_id());
}

// A caller waits only for copies of the blocks it names: a slow copy of
// another block goes on behind it, and the wait is counted.
TEST(CopyQueueTest, WaitsOnlyForTheNamedBlocks) {
  CopyQueue q(4);
  std::atomic<bool> fastDone{false}, slowDone{false};
  q.enqueue(0, /*writes=*/true, [&] { fastDone = true; });
  q.enqueue(1, /*writes=*/false, [&] {
    sleepMs(200);
    slowDone = true;
  });
  q.waitForBlocks({0, 2});
  EXPECT_TRUE(fastDone);
  EXPECT_FALSE(slowDone) << "block 1's copy was not waited for";
  EXPECT_TRUE(q.pending(1));
  EXPECT_FALSE(q.writePending(1)) << "an offload only reads its block";
  q.waitForBlocks({1});
  EXPECT_TRUE(slowDone);
  EXPECT_FALSE(q.pending(1));
  EXPECT_GT(q.waitSeconds(), 0.1);
  EXPECT_GT(q.busySeconds(), 0.19);
}

// Destruction finishes what was queued.
TEST(CopyQueueTest, DestructorFinishesQueuedCopies) {
  int done = 0;
  {
    CopyQueue q(1);
    for (int i = 0; i < 5; ++i)
      q.enqueue(0, true, [&done] {
        sleepMs(2);
        ++done;
      });
  }
  EXPECT_EQ(done, 5);
}
