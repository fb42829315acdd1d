//===- Speculative.cpp - prompt-lookup proposals --------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Speculative.h"

#include <algorithm>
#include <cmath>

namespace xfmr::rt {

int64_t adaptiveProposals(int64_t kept, int64_t proposed, int64_t limit) {
  double a =
      (static_cast<double>(kept) + 1) / (static_cast<double>(proposed) + 2);
  double run = a / (1 - a);
  double k = std::ceil(run) + 1;
  return std::clamp<int64_t>(
      k > static_cast<double>(limit) ? limit : static_cast<int64_t>(k), 1,
      std::max<int64_t>(limit, 1));
}

std::vector<int64_t> proposeNgram(const std::vector<int64_t> &tokens,
                                  int64_t minN, int64_t maxN, int64_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || minN < 1)
    return {};
  for (int64_t n = std::min(maxN, len - 1); n >= minN; --n) {
    const int64_t suffix = len - n;
    // Latest earlier occurrence: a start s < suffix with tokens[s, s + n)
    // equal to the suffix; what follows it is proposed.
    for (int64_t s = suffix - 1; s >= 0; --s) {
      if (!std::equal(tokens.begin() + s, tokens.begin() + s + n,
                      tokens.begin() + suffix))
        continue;
      int64_t from = s + n, to = std::min(len, from + k);
      return std::vector<int64_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

} // namespace xfmr::rt
