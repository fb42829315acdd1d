//===- Passes.h - xfmr conversion passes ------------------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_CONVERSION_PASSES_H
#define XFMR_CONVERSION_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/onnx/IR/ONNXDialect.h"
#include "dialects/xfmr/IR/XfmrDialect.h"

namespace xfmr {

#define GEN_PASS_DECL
#include "xfmr/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "xfmr/Conversion/Passes.h.inc"

} // namespace xfmr

#endif // XFMR_CONVERSION_PASSES_H
