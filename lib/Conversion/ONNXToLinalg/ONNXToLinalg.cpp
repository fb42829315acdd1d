//===- ONNXToLinalg.cpp - the convert-onnx-to-linalg pass -----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"
#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_CONVERTONNXTOLINALGPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

/// "node 'name' (Op)" from an importer location `loc("name"("Op"))`.
std::string describeNode(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  StringRef type = op->getName().stripDialect();
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    os << "node '" << name.getName().getValue() << "' (" << type << ")";
  else
    os << "op '" << type << "'";
  return s;
}

struct ConvertONNXToLinalgPass
    : impl::ConvertONNXToLinalgPassBase<ConvertONNXToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    lowering::ONNXTypeConverter converter(ctx);
    lowering::UnsupportedLog log;
    RewritePatternSet patterns(ctx);
    lowering::populateElementwisePatterns(patterns, converter, log);
    lowering::populateReductionPatterns(patterns, converter, log);
    lowering::populateLinearPatterns(patterns, converter, log);
    lowering::populateQuantizePatterns(patterns, converter, log);
    lowering::populateShapePatterns(patterns, converter, log);
    lowering::populateIndexingPatterns(patterns, converter, log);
    lowering::populateScatterPatterns(patterns, converter, log);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateReturnOpTypeConversionPattern(patterns, converter);

    ConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           tensor::TensorDialect, math::MathDialect,
                           cf::ControlFlowDialect, scf::SCFDialect,
                           bufferization::BufferizationDialect>();
    target.addIllegalDialect<onnx::ONNXDialect>();
    target.addLegalOp<onnx::NoValueOp>();
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp f) {
      return converter.isSignatureLegal(f.getFunctionType()) &&
             converter.isLegal(&f.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp>(
        [&](func::ReturnOp r) { return converter.isLegal(r); });
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });

    int64_t before = 0;
    module.walk([&](Operation *op) {
      if (isa<onnx::ONNXDialect>(op->getDialect()) && !isa<onnx::NoValueOp>(op))
        ++before;
    });
    ConversionConfig config;
    config.allowPatternRollback = false;
    LogicalResult result = success();
    {
      // The driver's "failed to legalize" is replaced by our own message.
      ScopedDiagnosticHandler silence(ctx, [](Diagnostic &) { return success(); });
      result = applyPartialConversion(module, target, std::move(patterns), config);
    }
    if (failed(result)) {
      // Report the first op left that recorded why, else the first op left.
      Operation *culprit = nullptr, *firstLeft = nullptr;
      module.walk([&](Operation *op) {
        if (!isa<onnx::ONNXDialect>(op->getDialect()) || isa<onnx::NoValueOp>(op))
          return WalkResult::advance();
        if (!firstLeft)
          firstLeft = op;
        if (!log.reasons.count(op))
          return WalkResult::advance();
        culprit = op;
        return WalkResult::interrupt();
      });
      if (!culprit)
        culprit = firstLeft;
      if (culprit) {
        auto it = log.reasons.find(culprit);
        std::string why = it != log.reasons.end() ? it->second : "no lowering for this op";
        culprit->emitError() << describeNode(culprit) << ": unsupported: " << why;
      } else {
        module.emitError() << "convert-onnx-to-linalg failed";
      }
      return signalPassFailure();
    }
    module.walk([&](onnx::NoValueOp op) {
      if (op->use_empty())
        op->erase();
    });
    lowering::mergeKernelInputs(module);
    numConverted = before;
  }
};

} // namespace
} // namespace xfmr
