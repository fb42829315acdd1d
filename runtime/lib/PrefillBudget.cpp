//===- PrefillBudget.cpp - Prompt tokens a step can take in time ----------===//

#include "xfmr/runtime/PrefillBudget.h"

#include <algorithm>
#include <cmath>

namespace xfmr::rt {

namespace {
/// Weight of the newest step in the decaying averages.
constexpr double kAlpha = 0.2;

double decay(double average, double sample) {
  return average == 0 ? sample : (1 - kAlpha) * average + kAlpha * sample;
}
} // namespace

PrefillBudget::PrefillBudget(double slack, int64_t floorTokens, int64_t ceilingTokens)
    : slack(slack), floor(std::max<int64_t>(1, floorTokens)),
      ceiling(std::max(floor, ceilingTokens)), current(floor) {}

void PrefillBudget::observe(int64_t prefillTokens, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds))
    return;
  shortestStep = shortestStep == 0 ? seconds : std::min(shortestStep, seconds);
  if (prefillTokens == 0) {
    decodeSeconds = decay(decodeSeconds, seconds);
    return;
  }
  if (prefillTokens < std::min(kMinSampleTokens, floor))
    return;
  // A step no slower than a decode step says its prompt tokens were free.
  double base = decodeSeconds > 0 ? decodeSeconds : shortestStep;
  double sample = std::max(0.0, seconds - base) / static_cast<double>(prefillTokens);
  perToken = measured ? (1 - kAlpha) * perToken + kAlpha * sample : sample;
  measured = true;
  double target = perToken > 0 ? slack * base / perToken : static_cast<double>(ceiling);
  int64_t next = target >= static_cast<double>(ceiling) ? ceiling : static_cast<int64_t>(target);
  current = std::clamp(std::min(next, 2 * current), floor, ceiling);
}

} // namespace xfmr::rt
