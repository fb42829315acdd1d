//===- Disaggregated.h - prefill and decode on separate ranks -*- C++ -*-===//
//
// Part of xfmr. Disaggregated serving (DistServe, Dynamo, SGLang's PD
// disaggregation) under `mpirun -np 2`: rank 0's engine only computes
// prompts, rank 1's only decodes. When a request's prompt is done and its
// first token sampled on rank 0, the engine hands it off
// (Engine::setHandOff): its prompt's KV blocks go to rank 1 over MPI
// (MPI_Isend, so the next prompt's steps run while they travel), rank 1
// copies them into its own pools (Engine::adoptPrefilled) and decodes; the
// finished tokens come back to rank 0, which prints them. No step of rank
// 1's engine computes a prompt chunk (its computedPromptTokens() stays 0)
// unless it preempts a sequence, which then recomputes (counted). Both
// ranks run the same one-process artifact and know the same requests by
// id. See docs/parallelism.md.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_DISAGGREGATED_H
#define XFMR_RUNTIME_DISAGGREGATED_H

#include "xfmr/runtime/Engine.h"

#include <functional>
#include <map>

namespace xfmr::rt {

enum class ServingRole { Prefill, Decode };

/// What a disaggregated run moved and did (xfmr-bench's JSON, xfmr-run
/// generate's summary).
struct DisaggregationStats {
  int64_t handedOff = 0; ///< requests whose K/V went to the decode rank
  uint64_t kvBytes = 0;  ///< those K/V bytes
  /// Prefill rank: seconds from each hand-off's send to its completion
  /// (the transfer, overlapped with the steps after it).
  double transferSeconds = 0;
  /// Prefill rank: seconds its engine waited for transfers (at the end).
  double transferWaitSeconds = 0;
  /// This rank's engine: steps, and prompt tokens its steps computed (0 on
  /// the decode rank unless it preempted).
  int64_t steps = 0, promptTokens = 0, preemptions = 0;
  /// Prefill rank: the decode rank's steps, prompt tokens computed and
  /// preemptions, which it reports at the end.
  int64_t peerSteps = 0, peerPromptTokens = 0, peerPreemptions = 0;
};

/// Under `mpirun -np 2` with a one-process artifact: starts MPI and returns
/// this rank's role (rank 0 prefill, rank 1 decode). An error naming the
/// rank otherwise (no mpirun, another process count, a parallel artifact,
/// a build without MPI).
Expected<ServingRole> joinDisaggregated(const Artifact &artifact);

/// Runs `engine` in `role` until every one of `requests` (the same list on
/// both ranks) is done. The prefill rank submits them in order, each once
/// `due(i, iteration)` says so (null: all at once; `iteration` counts its
/// loop's passes, a step or an idle pass each, as xfmr-bench's arrival
/// steps do), hands them off and returns every
/// request's result: the decode rank's tokens and finish reason, its own
/// arrival and first-token times, and `clock()` when the tokens came back
/// as the finish time. The decode rank returns its own results. At the end
/// the decode rank sends its engine's counts (DisaggregationStats::peer*).
/// A peer that sends nothing for XFMR_EP_TIMEOUT_S seconds while this rank
/// has nothing to do ends the job with a message.
Expected<std::map<int64_t, RequestResult>>
runDisaggregated(Engine &engine, ServingRole role,
                 const std::vector<Request> &requests,
                 DisaggregationStats &stats,
                 std::function<bool(size_t, int64_t)> due = nullptr,
                 std::function<double()> clock = nullptr);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_DISAGGREGATED_H
