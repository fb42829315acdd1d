//===- WeightLayout.h - the packed layout of product weights ----*- C++ -*-===//
//
// Part of xfmr. Constant right-hand sides of f32 matrix products are stored
// as panels: the row-major [k, n] matrix becomes [n / kPanelWidth, k,
// kPanelWidth], so that the generated micro-kernel reads one contiguous
// stream per panel (docs/cpu-backend.md). xfmr-compile packs them into
// weights.bin; with --weights=reference the loader packs them from the
// model's own files. Both use this one routine.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_WEIGHTLAYOUT_H
#define XFMR_RUNTIME_WEIGHTLAYOUT_H

#include <cstdint>

namespace xfmr::rt {

/// Columns per panel.
inline constexpr int64_t kPanelWidth = 16;

/// Writes panels [first, first + count) of the row-major [k, n] matrix
/// `src` (elements of `elemBytes` bytes; n a multiple of kPanelWidth) to
/// `dst`, panel after panel, each k rows of kPanelWidth elements.
void packPanels(const char *src, int64_t k, int64_t n, int64_t elemBytes, int64_t first,
                int64_t count, char *dst);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_WEIGHTLAYOUT_H
