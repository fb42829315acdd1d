//===- XfmrDialect.cpp - the xfmr transformer dialect ---------------------===//
//
// Part of xfmr.
//
// Registers the xfmr ops with the dialect.
//
//===----------------------------------------------------------------------===//

#include "dialects/xfmr/IR/XfmrDialect.h"

#include "dialects/xfmr/IR/XfmrOps.h"

using namespace mlir;
using namespace xfmr;

#include "dialects/xfmr/IR/XfmrDialect.cpp.inc"

void XfmrDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/xfmr/IR/XfmrOps.cpp.inc"
      >();
}
