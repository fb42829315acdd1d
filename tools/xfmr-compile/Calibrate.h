//===- Calibrate.h - xfmr-compile --calibration -----------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TOOLS_XFMR_COMPILE_CALIBRATE_H
#define XFMR_TOOLS_XFMR_COMPILE_CALIBRATE_H

#include "xfmr/Conversion/Calibration.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace xfmr::compile {

/// Runs the calibration artifact in `artifactDir` (the f32 model with
/// xfmr-calibration-outputs' results) over the tokens of `tokensPath` in
/// consecutive windows of `context` tokens and aggregates every product's
/// statistics over all rows (each input's second moment E[x x^T] too when
/// the artifact returns A^T A: GPTQ). `progress(done, total)` is called per
/// window.
std::optional<CalibrationStats>
measureCalibration(const std::string &artifactDir, const std::string &tokensPath,
                   int64_t context, const std::function<void(int64_t, int64_t)> &progress,
                   std::string &error);

} // namespace xfmr::compile

#endif // XFMR_TOOLS_XFMR_COMPILE_CALIBRATE_H
