//===- XfmrOps.h - xfmr dialect ops -----------------------------*- C++ -*-===//
//
// Part of xfmr.
//
// Declares the xfmr ops (xfmr::AttentionOp, xfmr::RMSNormOp, ...) and the
// xfmr::Activation enum. The op definitions live in XfmrOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DIALECTS_XFMR_IR_XFMROPS_H
#define XFMR_DIALECTS_XFMR_IR_XFMROPS_H

#include "dialects/xfmr/IR/XfmrDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/xfmr/IR/XfmrEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/xfmr/IR/XfmrOps.h.inc"

#endif // XFMR_DIALECTS_XFMR_IR_XFMROPS_H
