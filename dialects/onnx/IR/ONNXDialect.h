//===- ONNXDialect.h - the onnx import dialect ------------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DIALECTS_ONNX_IR_ONNXDIALECT_H
#define XFMR_DIALECTS_ONNX_IR_ONNXDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/onnx/IR/ONNXDialect.h.inc"

#endif // XFMR_DIALECTS_ONNX_IR_ONNXDIALECT_H
