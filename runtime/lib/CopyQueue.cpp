//===- CopyQueue.cpp - KV block copies on a thread of their own -----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/CopyQueue.h"

#include <chrono>

namespace xfmr::rt {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
} // namespace

CopyQueue::CopyQueue(int64_t numBlocks, int64_t numSlots)
    : pendingPerBlock(static_cast<size_t>(numBlocks), 0),
      writesPerBlock(static_cast<size_t>(numBlocks), 0),
      offloadsFromBlock(static_cast<size_t>(numBlocks), 0),
      offloadsIntoSlot(static_cast<size_t>(numSlots), 0), worker([this] { run(); }) {}

CopyQueue::~CopyQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  worker.join();
}

void CopyQueue::enqueue(int32_t block, int32_t slot, bool load, std::function<void()> copy) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++pendingPerBlock[static_cast<size_t>(block)];
    writesPerBlock[static_cast<size_t>(block)] += load;
    if (!load) {
      ++offloadsFromBlock[static_cast<size_t>(block)];
      ++offloadsIntoSlot[static_cast<size_t>(slot)];
    }
    jobs.push_back({block, slot, load, std::move(copy)});
  }
  wake.notify_one();
}

bool CopyQueue::pending(int32_t block) const {
  std::lock_guard<std::mutex> lock(mutex);
  return pendingPerBlock[static_cast<size_t>(block)] > 0;
}

bool CopyQueue::writePending(int32_t block) const {
  std::lock_guard<std::mutex> lock(mutex);
  return writesPerBlock[static_cast<size_t>(block)] > 0;
}

void CopyQueue::waitForBlocks(const std::vector<int32_t> &blocks) {
  waitUntilClear(blocks, pendingPerBlock);
}

void CopyQueue::waitForLoads(const std::vector<int32_t> &blocks) {
  waitUntilClear(blocks, writesPerBlock);
}

void CopyQueue::waitUntilClear(const std::vector<int32_t> &blocks,
                               const std::vector<int32_t> &perBlock) {
  auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mutex);
  auto clear = [&] {
    for (int32_t b : blocks)
      if (b >= 0 && perBlock[static_cast<size_t>(b)] > 0)
        return false;
    return true;
  };
  if (!clear()) {
    idle.wait(lock, clear);
    waited += since(start);
  }
}

void CopyQueue::waitAll() {
  auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mutex);
  if (!jobs.empty() || running) {
    idle.wait(lock, [&] { return jobs.empty() && !running; });
    waited += since(start);
  }
}

double CopyQueue::busySeconds() const {
  std::lock_guard<std::mutex> lock(mutex);
  return busy;
}

std::deque<CopyQueue::Job>::iterator CopyQueue::next() {
  for (auto it = jobs.begin(); it != jobs.end(); ++it)
    if (it->load && offloadsFromBlock[static_cast<size_t>(it->block)] == 0 &&
        offloadsIntoSlot[static_cast<size_t>(it->slot)] == 0)
      return it;
  return jobs.begin();
}

void CopyQueue::run() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    wake.wait(lock, [&] { return stopping || !jobs.empty(); });
    if (jobs.empty())
      return; // stopping, and everything queued has run
    auto it = next();
    Job job = std::move(*it);
    jobs.erase(it);
    ++running;
    lock.unlock();
    auto start = Clock::now();
    job.copy();
    double took = since(start);
    lock.lock();
    busy += took;
    --running;
    --pendingPerBlock[static_cast<size_t>(job.block)];
    writesPerBlock[static_cast<size_t>(job.block)] -= job.load;
    if (!job.load) {
      --offloadsFromBlock[static_cast<size_t>(job.block)];
      --offloadsIntoSlot[static_cast<size_t>(job.slot)];
    }
    idle.notify_all();
  }
}

} // namespace xfmr::rt
