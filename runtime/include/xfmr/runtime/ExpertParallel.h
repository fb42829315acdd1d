//===- ExpertParallel.h - MPI ranks of an expert-parallel artifact -*- C++ -*-===//
//
// Part of xfmr. An artifact compiled with `xfmr-compile --expert-parallel=N`
// runs as N processes under `mpirun -np N`: every rank runs the whole model
// on the same inputs (attention, norms and routing replicated), computes
// the experts it owns, and the ranks' partial MoE outputs are summed with
// an all-reduce after every MoE layer (runtime/ukernels/MoE.h). Rank 0
// writes the outputs. See docs/moe.md.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_EXPERTPARALLEL_H
#define XFMR_RUNTIME_EXPERTPARALLEL_H

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/Error.h"

#include <memory>

namespace xfmr::rt {

/// This process's place in the run.
struct ExpertParallelRank {
  int rank = 0, ranks = 1;
  bool isRoot() const { return rank == 0; }
};

/// Joins the run `artifact` was compiled for. Without --expert-parallel:
/// rank 0 of 1 (an error if mpirun started several processes). With N:
/// requires a launch by mpirun with N processes (MPI is initialised here),
/// then gives the model library its rank and the all-reduce. Every error
/// names the rank and says what to run instead; every rank sees it (no
/// collective is entered before the checks). A combine that waits longer
/// than XFMR_EP_TIMEOUT_S seconds (default 120) for the other ranks (one
/// died or stalled) prints which rank and aborts the job.
Expected<ExpertParallelRank> joinExpertParallel(const Artifact &artifact);

/// Finalises MPI if joinExpertParallel initialised it (idempotent), after
/// every rank got there (bounded), so that a refusal reaches every rank.
void leaveExpertParallel();

/// Calls leaveExpertParallel when the scope ends: declared before
/// joinExpertParallel, it covers the refusals and the normal end alike.
struct ExpertParallelScope {
  ExpertParallelScope() = default;
  ExpertParallelScope(const ExpertParallelScope &) = delete;
  ExpertParallelScope &operator=(const ExpertParallelScope &) = delete;
  ~ExpertParallelScope() { leaveExpertParallel(); }
};

/// A server of a tensor-parallel artifact: rank 0's engine schedules, the
/// other ranks (followers) do what it did, in the same order. On rank 0 of
/// several: a PoolMirror for Engine::mirrorTo that broadcasts each pool
/// copy, host-tier copy and step, after telling the followers the pools'
/// blocks and host slots; destroying it ends their followLeader. Null in
/// one process.
std::unique_ptr<PoolMirror> mirrorToFollowers(int64_t numBlocks, int64_t hostSlots);

/// On a follower: allocates the KV pools as rank 0 says, then applies its
/// commands (pool copies, host-tier copies, steps through `artifact`) until
/// it finishes. A step that fails here ends the job with a message: the
/// ranks' collectives would no longer match.
Status followLeader(const Artifact &artifact);

/// Whether this build can run expert-parallel artifacts (MPI found).
bool expertParallelAvailable();

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_EXPERTPARALLEL_H
