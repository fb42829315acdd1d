//===- xfmr-opt.cpp - xfmr's opt driver -----------------------------------===//
//
// Part of xfmr. MlirOptMain with exactly the dialects and passes xfmr uses.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"
#include "dialects/xfmr/IR/XfmrOps.h"
#include "xfmr/Conversion/Passes.h"
#include "xfmr/Pipelines/Pipelines.h"
#include "xfmr/Target/CPU/Passes.h"
#include "xfmr/Target/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // Every upstream dialect and pass, so that each stage of the pipelines
  // (linalg on tensors, buffers, LLVM) can be parsed, run and tested.
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR (NVPTX).
  mlir::registerAllToLLVMIRTranslations(registry);
  registry.insert<xfmr::onnx::ONNXDialect, xfmr::XfmrDialect>();
  mlir::registerAllPasses();
  xfmr::onnx::registerONNXTransformsPasses();
  xfmr::registerXfmrConversionPasses();
  xfmr::cpu::registerXfmrCPUPasses();
  xfmr::gpu::registerXfmrGPUPasses();
  xfmr::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "xfmr optimizer driver\n", registry));
}
