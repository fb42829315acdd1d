//===- Calibration.h - activation statistics for quantization ---*- C++ -*-===//
//
// Part of xfmr.
//
// Activation-aware quantization (`--quant=int4-awq`, `--quant=w8a8`) needs
// to know how large each product's input channels are on real text. The
// statistics are measured by running the f32 model with extra outputs
// (xfmr-calibration-outputs) on calibration tokens, and consumed by
// xfmr-quantize-weights. Both passes run at the same point of the raise
// pipeline (right after onnx-simplify-shapes), so a product is named by its
// position among the module's onnx.MatMul ops in walk order; its K and
// weight name are kept to catch a file measured on another model.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_CONVERSION_CALIBRATION_H
#define XFMR_CONVERSION_CALIBRATION_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xfmr {

namespace onnx {
class MatMulOp;
} // namespace onnx

/// Per input channel statistics of one product's activations A ([..., K]),
/// over every row of every calibration window.
struct ChannelStats {
  int64_t product = 0;    ///< index among the module's onnx.MatMul ops (walk order)
  std::string weight;     ///< the weight's name, for people reading the file
  int64_t rows = 0;       ///< activation rows measured
  std::vector<float> maxAbs;     ///< max |a_k|
  std::vector<float> meanAbs;    ///< mean |a_k|
  std::vector<float> meanSquare; ///< mean a_k^2 (the diagonal of A^T A / rows)
  /// Rows of A sampled evenly over the calibration windows, [sampleRows,
  /// K] row-major: what AWQ's scale search measures output error on.
  std::vector<float> samples;
  int64_t sampleRows = 0;
  /// E[x x^T] over every row, [K, K] row-major: GPTQ's H (up to a factor
  /// of 2). Measured for `--quant=int4-gptq` only, on the product that
  /// carries the input's rows; written to the statistics file's binary
  /// companion (`<file>.gram`), not to its JSON.
  std::vector<float> gram;
};

struct CalibrationStats {
  std::string source;  ///< the token file
  int64_t tokens = 0;  ///< tokens run
  std::vector<ChannelStats> products;

  const ChannelStats *find(int64_t product) const;
};

/// The statistics `stat` of product `product` as the calibration artifact
/// names its output: "channels" (max |x|, mean |x|, mean x^2 per channel,
/// [3K]), "rows" (sampled rows, [S, K]) or "gram" (A^T A, [K, K]).
std::string calibrationOutputName(int64_t product, llvm::StringRef stat);

/// The calibration artifact's extra input: [S] i64 row indices at which
/// each measured input's rows are sampled ("rows" outputs).
llvm::StringRef calibrationRowsInputName();

/// Whether `name` is a calibration output; sets the product and the stat.
bool parseCalibrationOutputName(llvm::StringRef name, int64_t &product, std::string &stat);

/// Every onnx.MatMul of `module` in walk order, with its index.
void forEachProduct(mlir::ModuleOp module,
                    llvm::function_ref<void(onnx::MatMulOp, int64_t)> fn);

/// Writes / reads the JSON form (docs/quantization.md); errors name `path`.
/// Second moments go to `path` + ".gram" (raw little-endian f32, each
/// product's K x K at the byte offset its JSON entry's `gram_offset` gives).
bool writeCalibrationStats(const CalibrationStats &stats, llvm::StringRef path,
                           std::string &error);
std::optional<CalibrationStats> readCalibrationStats(llvm::StringRef path, std::string &error);

} // namespace xfmr

#endif // XFMR_CONVERSION_CALIBRATION_H
