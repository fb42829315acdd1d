//===- XfmrDialect.h - the xfmr transformer dialect -------------*- C++ -*-===//
//
// Part of xfmr.
//
// Declares xfmr::XfmrDialect, the dialect of transformer building blocks.
// Include XfmrOps.h for the ops.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DIALECTS_XFMR_IR_XFMRDIALECT_H
#define XFMR_DIALECTS_XFMR_IR_XFMRDIALECT_H

#include "mlir/Dialect/Quant/IR/Quant.h"
#include "mlir/Dialect/Quant/IR/QuantTypes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/xfmr/IR/XfmrDialect.h.inc"

#endif // XFMR_DIALECTS_XFMR_IR_XFMRDIALECT_H
