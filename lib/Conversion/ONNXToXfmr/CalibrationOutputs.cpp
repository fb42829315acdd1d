//===- CalibrationOutputs.cpp - product input statistics as results -------===//
//
// Part of xfmr.
//
// The calibration artifact of `xfmr-compile --calibration` is the f32 model
// with, per quantizable product, its input's channel statistics as extra
// results (xfmr_calibration.<i>.max / .mean_abs / .mean_square, [K] f32).
// xfmr-compile runs it on the calibration tokens and hands the aggregated
// statistics to xfmr-quantize-weights (include/xfmr/Conversion/Calibration.h).
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "xfmr/Conversion/Calibration.h"
#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_CALIBRATIONOUTPUTSPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;

struct ChannelOutput {
  Value value;
  std::string name;
};

/// max |a|, mean |a| and mean a^2 of `a` ([..., K]) over every axis but
/// the last, and `a` as [rows, K] (the host samples rows), built after `mm`.
SmallVector<ChannelOutput, 4> channelStatistics(onnx::MatMulOp mm, int64_t index,
                                                bool withRows) {
  OpBuilder b(mm);
  b.setInsertionPointAfter(mm);
  Location loc = mm.getLoc();
  Value a = mm.getA();
  int64_t rank = rankOf(a), k = dimOf(mm.getB(), 0);
  auto type = RankedTensorType::get({k}, b.getF32Type());
  SmallVector<int64_t> leading;
  for (int64_t d = 0; d + 1 < rank; ++d)
    leading.push_back(d);
  Value axes = i64Constant(b, loc, leading);
  IntegerAttr drop = b.getI64IntegerAttr(0), noop = b.getI64IntegerAttr(0);
  Value abs = onnx::AbsOp::create(b, loc, a.getType(), a);
  Value square = onnx::MulOp::create(b, loc, a.getType(), a, a);
  Value rows;
  if (withRows) {
    auto rowsType = RankedTensorType::get({ShapedType::kDynamic, k}, b.getF32Type());
    rows = onnx::ReshapeOp::create(b, loc, rowsType, a, i64Constant(b, loc, {-1, k}),
                                   b.getI64IntegerAttr(0));
  }
  SmallVector<ChannelOutput, 4> outputs = {
      {onnx::ReduceMaxOp::create(b, loc, type, abs, axes, drop, noop),
       calibrationOutputName(index, "max")},
      {onnx::ReduceMeanOp::create(b, loc, type, abs, axes, drop, noop),
       calibrationOutputName(index, "mean_abs")},
      {onnx::ReduceMeanOp::create(b, loc, type, square, axes, drop, noop),
       calibrationOutputName(index, "mean_square")},
  };
  if (withRows)
    outputs.push_back({rows, calibrationOutputName(index, "rows")});
  return outputs;
}

struct CalibrationOutputsPass : impl::CalibrationOutputsPassBase<CalibrationOutputsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseMap<func::FuncOp, SmallVector<ChannelOutput>> added;
    DenseSet<Value> sampled; // inputs whose rows are returned already
    forEachProduct(module, [&](onnx::MatMulOp mm, int64_t index) {
      auto f = dyn_cast<func::FuncOp>(mm->getParentOp());
      if (!f || !constantWeight(mm, 1) || rankOf(mm.getA()) < 2)
        return; // in a nested region, not quantized, or a single row
      ++numMeasured;
      // Products that share an input (q/k/v) share its rows: the first one
      // returns them, and xfmr-quantize-weights reads a group's statistics
      // from its first product.
      added[f].append(channelStatistics(mm, index, sampled.insert(mm.getA()).second));
    });
    for (auto &[f, stats] : added) {
      auto ret = cast<func::ReturnOp>(f.getBody().back().getTerminator());
      MLIRContext *ctx = f.getContext();
      for (const ChannelOutput &s : stats) {
        unsigned at = f.getNumResults();
        auto attrs = DictionaryAttr::get(
            ctx, {NamedAttribute(StringAttr::get(ctx, "onnx.name"), StringAttr::get(ctx, s.name))});
        if (failed(f.insertResult(at, s.value.getType(), attrs))) {
          f.emitError() << "xfmr-calibration-outputs: cannot add result '" << s.name << "'";
          return signalPassFailure();
        }
        ret->insertOperands(ret->getNumOperands(), s.value);
      }
    }
  }
};

} // namespace
} // namespace xfmr
