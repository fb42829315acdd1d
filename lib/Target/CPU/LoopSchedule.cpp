//===- LoopSchedule.cpp - a schedule for OpenMP worksharing loops ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_LOOPSCHEDULEPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

struct LoopSchedulePass : impl::LoopSchedulePassBase<LoopSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<omp::ClauseScheduleKind> parsed = omp::symbolizeClauseScheduleKind(kind);
    if (!parsed || (*parsed != omp::ClauseScheduleKind::Static &&
                    *parsed != omp::ClauseScheduleKind::Dynamic &&
                    *parsed != omp::ClauseScheduleKind::Guided &&
                    *parsed != omp::ClauseScheduleKind::Runtime)) {
      getOperation().emitError("xfmr-loop-schedule: kind must be static, dynamic, guided or "
                               "runtime, not '")
          << kind << "'";
      return signalPassFailure();
    }
    if (chunk < 1) {
      getOperation().emitError("xfmr-loop-schedule: chunk must be at least 1");
      return signalPassFailure();
    }
    if (*parsed == omp::ClauseScheduleKind::Static)
      return; // libomp's default: nothing to add
    bool chunked = *parsed != omp::ClauseScheduleKind::Runtime;
    getOperation().walk([&](omp::WsloopOp loop) {
      if (loop.getScheduleKindAttr())
        return; // scheduled by whoever made it
      auto nest = dyn_cast<omp::LoopNestOp>(loop.getWrappedLoop());
      if (!nest)
        return;
      loop.setScheduleKindAttr(omp::ClauseScheduleKindAttr::get(&getContext(), *parsed));
      if (chunked) {
        // The chunk has the induction variable's type, defined just before
        // the loop (inside the parallel region the loop belongs to).
        OpBuilder b(loop);
        Type ivType = nest.getLoopLowerBounds().front().getType();
        Value size = arith::ConstantOp::create(b, loop.getLoc(), b.getIntegerAttr(ivType, chunk));
        loop.getScheduleChunkMutable().assign(size);
      }
      ++numLoops;
    });
  }
};

} // namespace
} // namespace xfmr::cpu
