//===- ExpertParallel.cpp - MPI ranks of an expert-parallel artifact ------===//
//
// Part of xfmr. Built with MPI (OpenMPI from Debian) when CMake finds it
// (XFMR_WITH_MPI); without it, artifacts compiled for several ranks are
// refused with a message that says so.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/ExpertParallel.h"
#include "xfmr/runtime/Disaggregated.h"
#include "xfmr/runtime/PagedKV.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#ifdef XFMR_WITH_MPI
// The C API only (OpenMPI's and MPICH's headers otherwise pull in the
// deprecated C++ bindings, which need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace xfmr::rt {
namespace {

#ifdef XFMR_WITH_MPI
bool initialised = false;

struct CombineContext {
  int rank = 0, ranks = 1; ///< in MPI_COMM_WORLD
  double timeoutSeconds = 120;
  /// Tensor or expert parallelism: this rank's stage's ranks (all of them
  /// in one stage), rank r - r % N .. r - r % N + N - 1.
  MPI_Comm tensorGroup = MPI_COMM_WORLD;
  int tensorRanks = 1;
  /// Pipeline stages: the ranks of every stage at this rank's place in its
  /// stage (stage s at s N + r % N), ordered by stage.
  MPI_Comm stageColumn = MPI_COMM_WORLD;
  int stage = 0, stages = 1;
};
CombineContext combineContext;

/// Waits for `request`, polled so that a rank that never arrives ends the
/// job with a message instead of a hang.
void waitOrAbort(MPI_Request &request, const CombineContext &c, const char *what) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(c.timeoutSeconds);
  int done = 0;
  for (int spins = 0;; ++spins) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "xfmr: rank %d: %s waited %.0f s for the other ranks "
                   "(one died or stalled; XFMR_EP_TIMEOUT_S sets the limit): aborting\n",
                   c.rank, what, c.timeoutSeconds);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// xfmr_uk_moe_combine_fn: an in-place sum over the ranks.
void allReduce(float *data, int64_t count, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                 c->tensorGroup, &request);
  waitOrAbort(request, *c, "expert-parallel combine");
}

/// Every rank's `count` floats of `in`, rank after rank, in a buffer kept
/// between calls (polled like the combine; `what` names it in a timeout).
const std::vector<float> &gatherAll(const float *in, size_t count, const CombineContext &c,
                                    const char *what) {
  static thread_local std::vector<float> gathered;
  gathered.resize(count * c.tensorRanks);
  MPI_Request request;
  MPI_Iallgather(in, static_cast<int>(count), MPI_FLOAT, gathered.data(),
                 static_cast<int>(count), MPI_FLOAT, c.tensorGroup, &request);
  waitOrAbort(request, c, what);
  return gathered;
}

/// xfmr_uk_all_reduce_fn (tensor parallelism): every rank's partial sums
/// gathered, then added in rank order, so that every rank gets the same
/// bits whatever algorithm MPI picks (the ranks decide their next tokens
/// independently and must agree).
void gatherSum(const float *in, float *out, int64_t count, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  const std::vector<float> &parts =
      gatherAll(in, static_cast<size_t>(count), *c, "tensor-parallel all-reduce");
  std::copy_n(parts.data(), count, out);
  for (int r = 1; r < c->tensorRanks; ++r) {
    const float *part = parts.data() + static_cast<size_t>(r) * count;
    for (int64_t i = 0; i < count; ++i)
      out[i] += part[i];
  }
}

/// xfmr_uk_all_gather_fn: every rank's [rows, cols] slice gathered, then
/// laid side by side as [rows, ranks * cols].
void gatherColumns(const float *in, float *out, int64_t rows, int64_t cols, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  size_t count = static_cast<size_t>(rows * cols);
  const std::vector<float> &parts = gatherAll(in, count, *c, "tensor-parallel all-gather");
  for (int r = 0; r < c->tensorRanks; ++r)
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(parts.data() + r * count + i * cols, cols,
                  out + i * cols * c->tensorRanks + r * cols);
}

/// xfmr_uk_stage_send_fn: the residual stream to the next stage's rank at
/// this rank's place (point to point, polled like the combine).
constexpr int kStageTag = 40;
void stageSend(const float *data, int64_t count, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  MPI_Request request;
  MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, c->rank + c->tensorRanks, kStageTag,
            MPI_COMM_WORLD, &request);
  waitOrAbort(request, *c, "pipeline-stage send");
}

/// xfmr_uk_stage_transfer_fn: the previous stage's residual stream.
void stageReceive(float *data, int64_t count, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  MPI_Request request;
  MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, c->rank - c->tensorRanks, kStageTag,
            MPI_COMM_WORLD, &request);
  waitOrAbort(request, *c, "pipeline-stage receive");
}

/// xfmr_uk_stage_transfer_fn: the last stage's logits to every stage.
void stageBroadcast(float *data, int64_t count, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  MPI_Request request;
  MPI_Ibcast(data, static_cast<int>(count), MPI_FLOAT, c->stages - 1, c->stageColumn, &request);
  waitOrAbort(request, *c, "pipeline logits broadcast");
}
#endif

Error rankError(int rank, const std::string &what) {
  return Error("rank " + std::to_string(rank) + ": " + what);
}

#ifdef XFMR_WITH_MPI
/// MPI_Init_thread waits for every rank to start; a rank that never does
/// (it died before, or hangs) would block it forever: a watchdog ends the
/// process with a message after the combine's timeout.
bool initialiseMPI(int rank) {
  if (initialised)
    return true;
  if (const char *t = std::getenv("XFMR_EP_TIMEOUT_S"))
    combineContext.timeoutSeconds = std::max(1.0, std::atof(t));
  std::mutex m;
  std::condition_variable cv;
  bool started = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, std::chrono::duration<double>(combineContext.timeoutSeconds),
                     [&] { return started; })) {
      std::fprintf(stderr,
                   "xfmr: rank %d: the other MPI ranks did not start within %.0f s (one died "
                   "or hangs; XFMR_EP_TIMEOUT_S sets the limit)\n",
                   rank, combineContext.timeoutSeconds);
      std::_Exit(1);
    }
  });
  int provided = 0;
  bool ok = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) == MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(m);
    started = true;
  }
  cv.notify_one();
  watchdog.join();
  initialised = ok;
  return ok;
}

/// Waits for every rank (polled, bounded like the combine), so that none
/// exits, and makes mpirun kill the others, before all have reported.
void waitForAll() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(combineContext.timeoutSeconds);
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
#endif

} // namespace

bool expertParallelAvailable() {
#ifdef XFMR_WITH_MPI
  return true;
#else
  return false;
#endif
}

/// The flags an artifact for several ranks was compiled with.
static std::string parallelFlags(const Manifest &m) {
  std::string flags;
  if (m.pipelineStages > 1)
    flags = "--pipeline-parallel=" + std::to_string(m.pipelineStages);
  if (m.tensorParallelRanks > 1)
    flags += (flags.empty() ? "" : " ") + std::string("--tensor-parallel=") +
             std::to_string(m.tensorParallelRanks);
  if (m.expertParallelRanks > 1)
    flags += (flags.empty() ? "" : " ") + std::string("--expert-parallel=") +
             std::to_string(m.expertParallelRanks);
  return flags;
}

Expected<ExpertParallelRank> joinExpertParallel(const Artifact &artifact) {
  const Manifest &m = artifact.manifest();
  const int64_t wanted = m.parallelRanks();
  const bool tensor = m.tensorParallelRanks > 1, pipeline = m.pipelineStages > 1;
  const std::string flags = parallelFlags(m);
  const int size = parallelLauncherSize(), rank = parallelLauncherRank();
  const std::string art = artifact.directory();
#ifdef XFMR_WITH_MPI
  // Under mpirun MPI starts first, refusals included: leaveExpertParallel
  // then lets every rank report before any exits.
  if (size > 1 && !initialiseMPI(rank))
    return rankError(rank, "MPI_Init_thread failed");
#endif
  if (wanted <= 1) {
    if (size > 1)
      return rankError(rank, art + " was not compiled for several ranks (xfmr-compile "
                                   "--tensor-parallel=N, --pipeline-parallel=M or "
                                   "--expert-parallel=N); run it without mpirun (mpirun "
                                   "started " +
                                   std::to_string(size) + " processes)");
    return ExpertParallelRank{};
  }
  std::string run = "mpirun -np " + std::to_string(wanted) + " ...";
  if (size == 0)
    return Error(art + " was compiled with " + flags + ": run it as " + std::to_string(wanted) +
                 " processes (" + run + ")");
  if (size != wanted)
    return rankError(rank, art + " was compiled with " + flags + " but mpirun started " +
                               std::to_string(size) + " processes (" + run + ")");
#ifndef XFMR_WITH_MPI
  return rankError(rank, "this xfmr was built without MPI (libopenmpi-dev): it cannot run "
                         "the parallel artifact " + art);
#else
  using SetPartition = void (*)(int64_t, int64_t, void (*)(float *, int64_t, void *), void *);
  using SetCollectives =
      void (*)(int64_t, void (*)(const float *, float *, int64_t, void *),
               void (*)(const float *, float *, int64_t, int64_t, void *), void *);
  using SetPipeline = void (*)(void (*)(const float *, int64_t, void *),
                               void (*)(float *, int64_t, void *),
                               void (*)(float *, int64_t, void *), void *);
  void *partition = nullptr, *collectives = nullptr, *stages = nullptr;
  if (tensor && !(collectives = artifact.librarySymbol("xfmr_uk_set_collectives")))
    return rankError(rank, art + ": model.so has no tensor-parallel all-reduce");
  if (pipeline && !(stages = artifact.librarySymbol("xfmr_uk_set_pipeline")))
    return rankError(rank, art + ": model.so has no pipeline-stage transfers");
  if (m.expertParallelRanks > 1 &&
      !(partition = artifact.librarySymbol("xfmr_uk_moe_set_partition")))
    return rankError(rank, art + ": model.so has no mixture-of-experts kernel to partition");
  if (!initialiseMPI(rank))
    return rankError(rank, "MPI_Init_thread failed");
  int mpiRank = 0, mpiSize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpiSize);
  if (mpiSize != wanted)
    return rankError(mpiRank, "MPI reports " + std::to_string(mpiSize) + " ranks, the artifact "
                              "wants " + std::to_string(wanted));
  const int group = static_cast<int>(m.stageRanks());
  if (pipeline && m.pipelineStage != mpiRank / group)
    return rankError(mpiRank, artifact.directory() + " is stage " +
                                  std::to_string(m.pipelineStage) + ", rank " +
                                  std::to_string(mpiRank) + " runs stage " +
                                  std::to_string(mpiRank / group));
  CombineContext &c = combineContext;
  c.rank = mpiRank;
  c.ranks = mpiSize;
  c.tensorRanks = group;
  c.stages = static_cast<int>(m.pipelineStages);
  c.stage = mpiRank / c.tensorRanks;
  if (pipeline) {
    // Every rank gets here (the same checks passed everywhere): the splits
    // are collective over MPI_COMM_WORLD.
    MPI_Comm_split(MPI_COMM_WORLD, c.stage, mpiRank % c.tensorRanks, &c.tensorGroup);
    MPI_Comm_split(MPI_COMM_WORLD, mpiRank % c.tensorRanks, c.stage, &c.stageColumn);
    reinterpret_cast<SetPipeline>(stages)(stageSend, stageReceive, stageBroadcast, &c);
  }
  if (tensor)
    reinterpret_cast<SetCollectives>(collectives)(c.tensorRanks, gatherSum, gatherColumns, &c);
  if (partition)
    reinterpret_cast<SetPartition>(partition)(mpiRank % group, group, allReduce, &c);
  return ExpertParallelRank{mpiRank, mpiSize};
#endif
}

Expected<ServingRole> joinDisaggregated(const Artifact &artifact) {
  const int size = parallelLauncherSize(), rank = parallelLauncherRank();
  const std::string art = artifact.directory();
  if (size != 2)
    return Error(size == 0 ? "--disaggregate runs as two processes, one prefill rank and one "
                             "decode rank: mpirun -np 2 ..."
                           : "rank " + std::to_string(rank) + ": --disaggregate runs as two "
                                 "processes (mpirun -np 2 ...), mpirun started " +
                                 std::to_string(size));
#ifndef XFMR_WITH_MPI
  return rankError(rank, "this xfmr was built without MPI (libopenmpi-dev): it cannot run "
                         "--disaggregate");
#else
  if (!initialiseMPI(rank))
    return rankError(rank, "MPI_Init_thread failed");
  if (artifact.manifest().parallelRanks() > 1)
    return rankError(rank, art + " was compiled for several ranks; --disaggregate runs a "
                                 "one-process artifact on each of its two ranks");
  if (!artifact.manifest().kvCache)
    return rankError(rank, art + " is not a paged step function (xfmr-compile "
                                 "--kv-cache=paged): --disaggregate moves KV blocks");
  int mpiRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
  combineContext.rank = mpiRank;
  combineContext.ranks = 2;
  return mpiRank == 0 ? ServingRole::Prefill : ServingRole::Decode;
#endif
}

#ifdef XFMR_WITH_MPI
namespace {

/// A follower's command: {kind, a, b, payload length}, then the payload.
enum Command : int64_t { kEnd, kSetup, kCopy, kOffload, kLoad, kStep };

/// Broadcasts `data` from rank 0, polled. Rank 0 waits at most the timeout;
/// a follower waits for the next command without one (an idle server),
/// sleeping between polls.
void broadcast(int64_t *data, int64_t count, bool leader) {
  MPI_Request request;
  MPI_Ibcast(data, static_cast<int>(count), MPI_INT64_T, 0, MPI_COMM_WORLD, &request);
  if (leader) {
    waitOrAbort(request, combineContext, "step broadcast");
    return;
  }
  int done = 0;
  for (int spins = 0; !done; ++spins) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done && spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class MPIPoolMirror : public PoolMirror {
public:
  MPIPoolMirror(int64_t numBlocks, int64_t hostSlots) { send(kSetup, numBlocks, hostSlots); }
  ~MPIPoolMirror() override { send(kEnd, 0, 0); }
  void copyBlock(int32_t src, int32_t dst) override { send(kCopy, src, dst); }
  void offload(int32_t block, int32_t slot) override { send(kOffload, block, slot); }
  void load(int32_t slot, int32_t block) override { send(kLoad, slot, block); }
  void step(const std::vector<StepSequence> &batch) override {
    std::vector<int64_t> payload{static_cast<int64_t>(batch.size())};
    for (const StepSequence &s : batch) {
      payload.push_back(static_cast<int64_t>(s.tokens.size()));
      payload.insert(payload.end(), s.tokens.begin(), s.tokens.end());
      payload.push_back(s.firstPosition);
      payload.push_back(static_cast<int64_t>(s.blockTable.size()));
      payload.insert(payload.end(), s.blockTable.begin(), s.blockTable.end());
      payload.push_back(s.allLogits);
    }
    send(kStep, 0, 0, &payload);
  }

private:
  void send(int64_t kind, int64_t a, int64_t b, std::vector<int64_t> *payload = nullptr) {
    int64_t header[4] = {kind, a, b, payload ? static_cast<int64_t>(payload->size()) : 0};
    broadcast(header, 4, /*leader=*/true);
    if (payload)
      broadcast(payload->data(), header[3], /*leader=*/true);
  }
};

/// The batch a kStep payload describes, or an empty one if malformed.
std::vector<StepSequence> decodeStep(const std::vector<int64_t> &p) {
  std::vector<StepSequence> batch;
  size_t at = 0;
  auto next = [&](int64_t &v) {
    if (at >= p.size())
      return false;
    v = p[at++];
    return true;
  };
  int64_t count = 0, n = 0, flag = 0;
  if (!next(count) || count < 0)
    return {};
  for (int64_t i = 0; i < count; ++i) {
    StepSequence s;
    if (!next(n) || n < 0 || at + static_cast<size_t>(n) > p.size())
      return {};
    s.tokens.assign(p.begin() + at, p.begin() + at + n);
    at += n;
    if (!next(s.firstPosition) || !next(n) || n < 0 || at + static_cast<size_t>(n) > p.size())
      return {};
    for (int64_t j = 0; j < n; ++j)
      s.blockTable.push_back(static_cast<int32_t>(p[at++]));
    if (!next(flag))
      return {};
    s.allLogits = flag != 0;
    batch.push_back(std::move(s));
  }
  return batch;
}

[[noreturn]] void followerFailed(const std::string &what) {
  std::fprintf(stderr, "xfmr: rank %d: %s: ending the job (the ranks' steps no longer match)\n",
               combineContext.rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 4);
  std::abort();
}

} // namespace
#endif

std::unique_ptr<PoolMirror> mirrorToFollowers(int64_t numBlocks, int64_t hostSlots) {
#ifdef XFMR_WITH_MPI
  if (initialised && combineContext.ranks > 1 && combineContext.rank == 0)
    return std::make_unique<MPIPoolMirror>(numBlocks, hostSlots);
#endif
  return nullptr;
}

Status followLeader(const Artifact &artifact) {
#ifndef XFMR_WITH_MPI
  return Error("this xfmr was built without MPI: no leader to follow");
#else
  if (!initialised || combineContext.rank == 0)
    return Error("followLeader: not a follower rank of a parallel run");
  std::optional<KVPools> pools;
  std::optional<HostKVPool> host;
  for (;;) {
    int64_t header[4];
    broadcast(header, 4, /*leader=*/false);
    std::vector<int64_t> payload(static_cast<size_t>(std::max<int64_t>(header[3], 0)));
    if (header[3] > 0)
      broadcast(payload.data(), header[3], /*leader=*/false);
    int64_t a = header[1], b = header[2];
    switch (header[0]) {
    case kEnd:
      return {};
    case kSetup: {
      Expected<KVPools> p = KVPools::allocate(artifact, a);
      if (!p)
        followerFailed(p.error());
      pools.emplace(p.take());
      uint64_t perSlot = a ? pools->bytes() / static_cast<uint64_t>(a) : 0;
      Expected<HostKVPool> h =
          HostKVPool::allocateForBudget(*pools, perSlot * static_cast<uint64_t>(b));
      if (!h || h->numSlots() != b)
        followerFailed("cannot allocate the host KV tier of " + std::to_string(b) + " blocks");
      host.emplace(h.take());
      break;
    }
    case kCopy:
    case kOffload:
    case kLoad:
    case kStep:
      if (!pools)
        followerFailed("a command before the pools were set up");
      if (header[0] == kCopy)
        pools->copyBlock(static_cast<int32_t>(a), static_cast<int32_t>(b));
      else if (header[0] == kOffload)
        host->store(*pools, static_cast<int32_t>(a), static_cast<int32_t>(b));
      else if (header[0] == kLoad)
        host->load(static_cast<int32_t>(a), *pools, static_cast<int32_t>(b));
      else {
        std::vector<StepSequence> batch = decodeStep(payload);
        if (batch.empty())
          followerFailed("a malformed step from rank 0");
        Expected<Tensor> logits = runStep(artifact, *pools, batch);
        if (!logits)
          followerFailed(logits.error());
      }
      break;
    default:
      followerFailed("an unknown command from rank 0");
    }
  }
#endif
}

void leaveExpertParallel() {
#ifdef XFMR_WITH_MPI
  if (initialised) {
    waitForAll();
    MPI_Finalize();
    initialised = false;
  }
#endif
}

} // namespace xfmr::rt
