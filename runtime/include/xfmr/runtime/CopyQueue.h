//===- CopyQueue.h - KV block copies on a thread of their own ---*- C++ -*-===//
//
// Part of xfmr. The host tier's transfers (offloads of device blocks to
// host slots, loads back) run on one copy thread, in the order they were
// issued, while the engine goes on: the engine waits only where a step is
// about to read or write a block that a pending copy still touches
// (waitForBlocks). On a GPU the same calls would be cudaMemcpyAsync on a
// copy stream with pinned host memory and an event per block; here the
// "device" pools are host memory too, so the thread is the stream.
//
// One thread runs them: loads first (a step or an admission waits for
// them; offloads are written back ahead of need), each kind in issue order.
// A load never overtakes an offload it depends on: one from the block it
// writes (the block was evicted and reused) or into the host slot it reads
// (a write-back not done yet) runs first.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_COPYQUEUE_H
#define XFMR_RUNTIME_COPYQUEUE_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace xfmr::rt {

class CopyQueue {
public:
  /// Copies between blocks 0..numBlocks-1 of the device pools and host
  /// slots 0..numSlots-1.
  CopyQueue(int64_t numBlocks, int64_t numSlots);
  ~CopyQueue(); // finishes the queued copies first
  CopyQueue(const CopyQueue &) = delete;
  CopyQueue &operator=(const CopyQueue &) = delete;

  /// Runs `copy` (between device block `block` and host slot `slot`) on
  /// the copy thread; `block` stays pending until it has run. `load`: the
  /// copy writes the block from the slot, else it copies the block out to
  /// the slot.
  void enqueue(int32_t block, int32_t slot, bool load, std::function<void()> copy);
  /// Whether a queued copy still touches `block`, or still writes it.
  bool pending(int32_t block) const;
  bool writePending(int32_t block) const;
  /// Returns once no queued copy touches any of `blocks`, or (waitForLoads)
  /// once no queued load writes any of them.
  void waitForBlocks(const std::vector<int32_t> &blocks);
  void waitForLoads(const std::vector<int32_t> &blocks);
  /// Returns once the queue is empty.
  void waitAll();

  /// Seconds the copy thread spent copying, and the engine spent waiting
  /// for it (the copy time not hidden behind other work).
  double busySeconds() const;
  double waitSeconds() const { return waited; }

private:
  void run();
  /// Waits until no entry of `perBlock` for `blocks` is positive.
  void waitUntilClear(const std::vector<int32_t> &blocks, const std::vector<int32_t> &perBlock);

  struct Job {
    int32_t block, slot;
    bool load;
    std::function<void()> copy;
  };
  /// The next job to run: the oldest load that no queued offload must
  /// precede, else the oldest job. Under the mutex; jobs is not empty.
  std::deque<Job>::iterator next();
  mutable std::mutex mutex;
  std::condition_variable wake, idle;
  std::deque<Job> jobs;
  std::vector<int32_t> pendingPerBlock, writesPerBlock;
  /// Queued offloads per block (from it) and per slot (into it).
  std::vector<int32_t> offloadsFromBlock, offloadsIntoSlot;
  int64_t running = 0; ///< jobs taken off the queue and not done
  bool stopping = false;
  double busy = 0;   ///< guarded by mutex
  double waited = 0; ///< the engine's thread only
  std::thread worker; ///< last: starts once the rest is set up
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_COPYQUEUE_H
