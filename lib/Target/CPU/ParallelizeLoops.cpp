//===- ParallelizeLoops.cpp - marked scf.for loops to scf.parallel --------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_PARALLELIZELOOPSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr llvm::StringLiteral kMark = "xfmr.independent_iterations";

struct ParallelizeLoopsPass : impl::ParallelizeLoopsPassBase<ParallelizeLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) {
      if (loop->hasAttr(kMark) && loop.getNumResults() == 0)
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops) {
      OpBuilder b(loop);
      auto par = scf::ParallelOp::create(b, loop.getLoc(), ValueRange{loop.getLowerBound()},
                                         ValueRange{loop.getUpperBound()},
                                         ValueRange{loop.getStep()});
      Block *body = par.getBody();
      // Move the loop body in front of scf.parallel's own terminator.
      Block *old = loop.getBody();
      old->getTerminator()->erase();
      body->getOperations().splice(body->begin(), old->getOperations());
      loop.getInductionVar().replaceAllUsesWith(par.getInductionVars()[0]);
      loop.erase();
      ++numParallel;
    }
  }
};

} // namespace
} // namespace xfmr::cpu
