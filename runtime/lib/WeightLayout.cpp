//===- WeightLayout.cpp - the packed layout of product weights ------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/WeightLayout.h"

#include <cstring>

void xfmr::rt::packPanels(const char *src, int64_t k, int64_t n, int64_t elemBytes,
                          int64_t first, int64_t count, char *dst) {
  int64_t width = kPanelWidth * elemBytes;
  // Row by row: each source row is read once, front to back, and scattered
  // into the `count` panels (one 64-byte line each for f32).
  for (int64_t r = 0; r < k; ++r) {
    const char *row = src + r * n * elemBytes + first * width;
    for (int64_t p = 0; p < count; ++p)
      std::memcpy(dst + (p * k + r) * width, row + p * width, static_cast<size_t>(width));
  }
}
