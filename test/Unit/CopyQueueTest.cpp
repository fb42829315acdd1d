//===- CopyQueueTest.cpp - KV block copies on a thread of their own -------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/CopyQueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

using namespace xfmr::rt;

namespace {
void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
} // namespace

// Offloads run in the order they were queued, off the caller's thread.
TEST(CopyQueueTest, RunsInOrderOnItsOwnThread) {
  std::vector<int> order;
  std::thread::id ran;
  {
    CopyQueue q(4, 4);
    for (int i = 0; i < 50; ++i) // offloads only: issue order
      q.enqueue(i % 4, i % 4, /*load=*/false, [&order, &ran, i] {
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
  CopyQueue q(4, 4);
  std::atomic<bool> fastDone{false}, slowDone{false};
  q.enqueue(0, 0, /*load=*/true, [&] { fastDone = true; });
  q.enqueue(1, 1, /*load=*/false, [&] {
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

// Loads go before queued write-backs unless they depend on one: a load
// into a block an earlier offload copies out, or from a slot an earlier
// offload writes, waits for it.
TEST(CopyQueueTest, LoadsOvertakeOnlyUnrelatedOffloads) {
  std::vector<std::string> order;
  std::mutex m;
  auto note = [&](std::string what) {
    std::lock_guard<std::mutex> lock(m);
    order.push_back(std::move(what));
  };
  {
    CopyQueue q(8, 8);
    q.enqueue(7, 7, /*load=*/false, [&] {
      sleepMs(50); // holds the thread while the rest is queued
      note("offload 7->7");
    });
    sleepMs(10);
    q.enqueue(1, 1, false, [&] { note("offload 1->1"); });
    q.enqueue(2, 2, false, [&] { note("offload 2->2"); });
    q.enqueue(3, 5, true, [&] { note("load 5->3"); });  // unrelated: first
    q.enqueue(1, 6, true, [&] { note("load 6->1"); });  // block 1 goes out first
    q.enqueue(4, 2, true, [&] { note("load 2->4"); });  // slot 2 is written first
    q.waitAll();
  }
  std::vector<std::string> want{"offload 7->7", "load 5->3", "offload 1->1", "load 6->1",
                                "offload 2->2", "load 2->4"};
  EXPECT_EQ(order, want);
}

// Destruction finishes what was queued.
TEST(CopyQueueTest, DestructorFinishesQueuedCopies) {
  int done = 0;
  {
    CopyQueue q(1, 1);
    for (int i = 0; i < 5; ++i)
      q.enqueue(0, 0, /*load=*/true, [&done] {
        sleepMs(2);
        ++done;
      });
  }
  EXPECT_EQ(done, 5);
}
