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
// One FIFO thread keeps every hazard ordered: a load into a block queued
// after an offload from it runs after it, and so does a copy into a host
// slot after one out of it.
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
  /// Copies touching blocks 0..numBlocks-1 of the device pools.
  explicit CopyQueue(int64_t numBlocks);
  ~CopyQueue(); // finishes the queued copies first
  CopyQueue(const CopyQueue &) = delete;
  CopyQueue &operator=(const CopyQueue &) = delete;

  /// Runs `copy` on the copy thread after everything queued before it;
  /// `block` stays pending until it has run. `writes`: the copy writes the
  /// block (a load from the host), not only reads it (an offload).
  void enqueue(int32_t block, bool writes, std::function<void()> copy);
  /// Whether a queued copy still touches `block`, or still writes it.
  bool pending(int32_t block) const;
  bool writePending(int32_t block) const;
  /// Returns once no queued copy touches any of `blocks`.
  void waitForBlocks(const std::vector<int32_t> &blocks);
  /// Returns once the queue is empty.
  void waitAll();

  /// Seconds the copy thread spent copying, and the engine spent waiting
  /// for it (the copy time not hidden behind other work).
  double busySeconds() const;
  double waitSeconds() const { return waited; }

private:
  void run();

  struct Job {
    int32_t block;
    bool writes;
    std::function<void()> copy;
  };
  mutable std::mutex mutex;
  std::condition_variable wake, idle;
  std::deque<Job> jobs;
  std::vector<int32_t> pendingPerBlock, writesPerBlock;
  bool stopping = false;
  double busy = 0;   ///< guarded by mutex
  double waited = 0; ///< the engine's thread only
  std::thread worker; ///< last: starts once the rest is set up
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_COPYQUEUE_H
