//===- xfmr-opt.cpp - xfmr's opt driver -----------------------------------===//
//
// Part of xfmr. MlirOptMain with exactly the dialects and passes xfmr uses.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"
#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, xfmr::onnx::ONNXDialect,
                  xfmr::XfmrDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  xfmr::onnx::registerONNXTransformsPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "xfmr optimizer driver\n", registry));
}
