//===- CalibrationOutputs.cpp - product input statistics as results -------===//
//
// Part of xfmr.
//
// The calibration artifact of `xfmr-compile --calibration` is the f32 model
// with, per quantizable product, its input's channel statistics as extra
// results (xfmr_calibration.<i>.channels: max |x|, mean |x|, mean x^2, [3K]
// f32; .rows, sampled rows [S, K]; .gram, A^T A [K, K]).
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
/// the last; with `picks` ([S] row indices, the function's argument), rows
/// of `a` and, with `gram`, A^T A; built after `mm`.
SmallVector<ChannelOutput, 3> channelStatistics(onnx::MatMulOp mm, int64_t index, Value picks,
                                                bool gram) {
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
  // One result for the three: hundreds of products' results are the
  // entry's return value, a struct whose every field LLVM carries through
  // code generation (with three results per product, 28 of SmolLM2's 36 s
  // calibration compile).
  Value channels = onnx::ConcatOp::create(
      b, loc, RankedTensorType::get({3 * k}, b.getF32Type()),
      ValueRange{onnx::ReduceMaxOp::create(b, loc, type, abs, axes, drop, noop),
                 onnx::ReduceMeanOp::create(b, loc, type, abs, axes, drop, noop),
                 onnx::ReduceMeanOp::create(b, loc, type, square, axes, drop, noop)},
      b.getI64IntegerAttr(0));
  SmallVector<ChannelOutput, 3> outputs = {{channels, calibrationOutputName(index, "channels")}};
  if (!picks)
    return outputs;
  auto rowsType = RankedTensorType::get({ShapedType::kDynamic, k}, b.getF32Type());
  Value rows = onnx::ReshapeOp::create(b, loc, rowsType, a, i64Constant(b, loc, {-1, k}),
                                       b.getI64IntegerAttr(0));
  int64_t count = cast<RankedTensorType>(picks.getType()).getDimSize(0);
  outputs.push_back({onnx::GatherOp::create(b, loc,
                                            RankedTensorType::get({count, k}, b.getF32Type()),
                                            rows, picks, b.getI64IntegerAttr(0)),
                     calibrationOutputName(index, "rows")});
  if (gram) {
    auto transposed = RankedTensorType::get({k, ShapedType::kDynamic}, b.getF32Type());
    Value t = onnx::TransposeOp::create(b, loc, transposed, rows, b.getI64ArrayAttr({1, 0}));
    outputs.push_back({onnx::MatMulOp::create(b, loc, RankedTensorType::get({k, k}, b.getF32Type()),
                                              t, rows),
                       calibrationOutputName(index, "gram")});
  }
  return outputs;
}

struct CalibrationOutputsPass : impl::CalibrationOutputsPassBase<CalibrationOutputsPass> {
  using Base::Base;

  /// `f`'s new last argument `xfmr_calibration.rows`: the [samples] row
  /// indices each product's sampled rows are gathered at, chosen by the
  /// host per run (rows spread evenly over the window). An argument rather
  /// than arithmetic on the tokens' shape: it belongs to no layer, so
  /// xfmr-outline-layers passes it to every layer alike.
  LogicalResult addPicksArgument(func::FuncOp f, Value &picks) {
    MLIRContext *ctx = f.getContext();
    auto type = RankedTensorType::get({samples}, IntegerType::get(ctx, 64));
    auto attrs = DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, "onnx.name"),
                             StringAttr::get(ctx, calibrationRowsInputName()))});
    unsigned at = f.getNumArguments();
    if (failed(f.insertArgument(at, type, attrs, f.getLoc())))
      return f.emitError() << "xfmr-calibration-outputs: cannot add argument '"
                           << calibrationRowsInputName() << "'";
    picks = f.getArgument(at);
    return success();
  }

  void runOnOperation() override {
    if (samples < 1 || samples > 4096) {
      getOperation().emitError() << "xfmr-calibration-outputs: samples must be in 1..4096";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    DenseMap<func::FuncOp, SmallVector<ChannelOutput>> added;
    DenseSet<Value> sampled; // inputs whose rows are returned already
    // The products first: A^T A is one more onnx.MatMul, which must not
    // shift the indices (xfmr-quantize-weights counts the model's own).
    SmallVector<std::pair<onnx::MatMulOp, int64_t>> products;
    forEachProduct(module, [&](onnx::MatMulOp mm, int64_t index) {
      products.push_back({mm, index});
    });
    DenseMap<func::FuncOp, Value> picksOf; // each function's row indices
    for (auto [mm, index] : products) {
      auto f = dyn_cast<func::FuncOp>(mm->getParentOp());
      if (!f || !constantWeight(mm) || rankOf(mm.getA()) < 2)
        continue; // in a nested region, not quantized, or a single row
      ++numMeasured;
      // Products that share an input (q/k/v) share its rows: the first one
      // returns them, and xfmr-quantize-weights reads a group's statistics
      // from its first product.
      Value picks;
      if (sampled.insert(mm.getA()).second && !(picks = picksOf.lookup(f))) {
        if (failed(addPicksArgument(f, picks)))
          return signalPassFailure();
        picksOf[f] = picks;
      }
      added[f].append(channelStatistics(mm, index, picks, secondMoments));
    }
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
