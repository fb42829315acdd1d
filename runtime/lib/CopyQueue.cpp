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

CopyQueue::CopyQueue(int64_t numBlocks)
    : pendingPerBlock(static_cast<size_t>(numBlocks), 0),
      writesPerBlock(static_cast<size_t>(numBlocks), 0), worker([this] { run(); }) {}

CopyQueue::~CopyQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  worker.join();
}

void CopyQueue::enqueue(int32_t block, bool writes, std::function<void()> copy) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++pendingPerBlock[static_cast<size_t>(block)];
    writesPerBlock[static_cast<size_t>(block)] += writes;
    jobs.push_back({block, writes, std::move(copy)});
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
  auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mutex);
  auto clear = [&] {
    for (int32_t b : blocks)
      if (b >= 0 && pendingPerBlock[static_cast<size_t>(b)] > 0)
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
  if (!jobs.empty()) {
    idle.wait(lock, [&] { return jobs.empty(); });
    waited += since(start);
  }
}

double CopyQueue::busySeconds() const {
  std::lock_guard<std::mutex> lock(mutex);
  return busy;
}

void CopyQueue::run() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    wake.wait(lock, [&] { return stopping || !jobs.empty(); });
    if (jobs.empty())
      return; // stopping, and everything queued has run
    // The job stays at the front (so waitAll sees it) while it runs.
    std::function<void()> copy = std::move(jobs.front().copy);
    lock.unlock();
    auto start = Clock::now();
    copy();
    double took = since(start);
    lock.lock();
    busy += took;
    --pendingPerBlock[static_cast<size_t>(jobs.front().block)];
    writesPerBlock[static_cast<size_t>(jobs.front().block)] -= jobs.front().writes;
    jobs.pop_front();
    idle.notify_all();
  }
}

} // namespace xfmr::rt
