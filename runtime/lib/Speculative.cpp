//===- Speculative.cpp - prompt-lookup proposals --------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Speculative.h"

#include <algorithm>

namespace xfmr::rt {

std::vector<int64_t> proposeNgram(const std::vector<int64_t> &tokens, int64_t minN,
                                  int64_t maxN, int64_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || minN < 1)
    return {};
  for (int64_t n = std::min(maxN, len - 1); n >= minN; --n) {
    const int64_t suffix = len - n;
    // Latest earlier occurrence: a start s < suffix with tokens[s, s + n)
    // equal to the suffix; what follows it is proposed.
    for (int64_t s = suffix - 1; s >= 0; --s) {
      if (!std::equal(tokens.begin() + s, tokens.begin() + s + n, tokens.begin() + suffix))
        continue;
      int64_t from = s + n, to = std::min(len, from + k);
      return std::vector<int64_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

} // namespace xfmr::rt
