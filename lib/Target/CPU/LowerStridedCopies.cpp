//===- LowerStridedCopies.cpp - memref.copy of views to linalg.copy -------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_LOWERSTRIDEDCOPIESPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

bool isContiguous(Type t) {
  auto m = dyn_cast<MemRefType>(t);
  return m && m.getLayout().isIdentity();
}

struct LowerStridedCopiesPass
    : impl::LowerStridedCopiesPassBase<LowerStridedCopiesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp c) {
      if (!isContiguous(c.getSource().getType()) ||
          !isContiguous(c.getTarget().getType()))
        copies.push_back(c);
    });
    for (memref::CopyOp c : copies) {
      OpBuilder b(c);
      linalg::CopyOp::create(b, c.getLoc(), c.getSource(), c.getTarget());
      c.erase();
    }
  }
};

} // namespace
} // namespace xfmr::cpu
