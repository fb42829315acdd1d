//===- ExpertParallel.cpp - MPI ranks of an expert-parallel artifact ------===//
//
// Part of xfmr. Built with MPI (OpenMPI from Debian) when CMake finds it
// (XFMR_WITH_MPI); without it, artifacts compiled for several ranks are
// refused with a message that says so.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/ExpertParallel.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#ifdef XFMR_WITH_MPI
// The C API only (OpenMPI's and MPICH's headers otherwise pull in the
// deprecated C++ bindings, which need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace xfmr::rt {
namespace {

/// The process count of an MPI launcher's environment (OpenMPI, PMI,
/// PMIx), or 0 when not started by one.
int launcherSize() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

int launcherRank() {
  for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

#ifdef XFMR_WITH_MPI
bool initialised = false;

struct CombineContext {
  int rank = 0;
  double timeoutSeconds = 120;
};
CombineContext combineContext;

/// xfmr_uk_moe_combine_fn: an in-place sum over the ranks, polled so that a
/// rank that never arrives ends the job with a message instead of a hang.
void allReduce(float *data, int64_t count, void *context) {
  auto *c = static_cast<CombineContext *>(context);
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                 MPI_COMM_WORLD, &request);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(c->timeoutSeconds);
  int done = 0;
  for (int spins = 0;; ++spins) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "xfmr: rank %d: expert-parallel combine waited %.0f s for the other ranks "
                   "(one died or stalled; XFMR_EP_TIMEOUT_S sets the limit): aborting\n",
                   c->rank, c->timeoutSeconds);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
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

Expected<ExpertParallelRank> joinExpertParallel(const Artifact &artifact) {
  const int64_t wanted = artifact.manifest().expertParallelRanks;
  const int size = launcherSize(), rank = launcherRank();
  const std::string art = artifact.directory();
#ifdef XFMR_WITH_MPI
  // Under mpirun MPI starts first, refusals included: leaveExpertParallel
  // then lets every rank report before any exits.
  if (size > 1 && !initialiseMPI(rank))
    return rankError(rank, "MPI_Init_thread failed");
#endif
  if (wanted <= 1) {
    if (size > 1)
      return rankError(rank, art + " was not compiled for expert parallelism "
                                   "(xfmr-compile --expert-parallel=N); run it without mpirun "
                                   "(mpirun started " + std::to_string(size) + " processes)");
    return ExpertParallelRank{};
  }
  std::string run = "mpirun -np " + std::to_string(wanted) + " ...";
  if (size == 0)
    return Error(art + " was compiled with --expert-parallel=" + std::to_string(wanted) +
                 ": run it as " + std::to_string(wanted) + " processes (" + run + ")");
  if (size != wanted)
    return rankError(rank, art + " was compiled with --expert-parallel=" +
                               std::to_string(wanted) + " but mpirun started " +
                               std::to_string(size) + " processes (" + run + ")");
#ifndef XFMR_WITH_MPI
  return rankError(rank, "this xfmr was built without MPI (libopenmpi-dev): it cannot run "
                         "the expert-parallel artifact " + art);
#else
  using SetPartition = void (*)(int64_t, int64_t, void (*)(float *, int64_t, void *), void *);
  auto setPartition =
      reinterpret_cast<SetPartition>(artifact.librarySymbol("xfmr_uk_moe_set_partition"));
  if (!setPartition)
    return rankError(rank, art + ": model.so has no mixture-of-experts kernel to partition");
  if (!initialiseMPI(rank))
    return rankError(rank, "MPI_Init_thread failed");
  int mpiRank = 0, mpiSize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpiSize);
  if (mpiSize != wanted)
    return rankError(mpiRank, "MPI reports " + std::to_string(mpiSize) + " ranks, the artifact "
                              "wants " + std::to_string(wanted));
  combineContext.rank = mpiRank;
  setPartition(mpiRank, mpiSize, allReduce, &combineContext);
  return ExpertParallelRank{mpiRank, mpiSize};
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
