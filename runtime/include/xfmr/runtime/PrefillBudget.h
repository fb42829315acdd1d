//===- PrefillBudget.h - Prompt tokens a step can take in time --*- C++ -*-===//
//
// How many prompt tokens one engine step may take so that it costs at most
// `slack` times a step without prompt work, learned from the steps that ran.
// xfmr-serve gives the result to the batch pool
// (ClassLimits::maxPrefillTokensPerStep): an interactive request that
// arrives while a step runs waits for that step, so the batch pool's prompt
// chunks, not its share of a large token budget, decide interactive TTFT.
// Decode tokens are not bounded: a step reads the weights once for all of
// them, so on a machine bound by memory bandwidth they ride along.
//
// The model is a step's time = d + c * prefillTokens: d, the time of a step
// with no prompt work, is averaged over such steps (until one is seen, the
// shortest step so far stands in for it); c over the steps with at least
// min(kMinSampleTokens, floor) prompt tokens, as (time - d) / tokens. Both averages
// decay, so the budget follows the context lengths and batch sizes of the
// moment. The budget moves at most 2x per step and stays within
// [floor, ceiling]; until c is known it is the floor.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_PREFILLBUDGET_H
#define XFMR_RUNTIME_PREFILLBUDGET_H

#include <cstdint>

namespace xfmr::rt {

class PrefillBudget {
public:
  static constexpr int64_t kMinSampleTokens = 8;

  /// `slack`: the prompt work one step may add, as a fraction of a step
  /// without any (0.5: a step takes at most ~1.5x a decode step).
  PrefillBudget(double slack, int64_t floorTokens, int64_t ceilingTokens);

  /// One step that ran: the prompt tokens in it and its time.
  void observe(int64_t prefillTokens, double seconds);

  /// Prompt tokens the next step may take.
  int64_t tokens() const { return current; }
  /// The estimates (0 until measured).
  double decodeStepSeconds() const { return decodeSeconds; }
  double secondsPerPrefillToken() const { return perToken; }

private:
  double slack;
  int64_t floor, ceiling, current;
  double decodeSeconds = 0; ///< average of steps without prompt work
  double shortestStep = 0;  ///< stands in for decodeSeconds until one is seen
  double perToken = 0;
  bool measured = false; ///< perToken holds a sample
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_PREFILLBUDGET_H
