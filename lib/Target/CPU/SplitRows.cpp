//===- SplitRows.cpp - row-parallel elementwise and row-wise ops ----------===//
//
// Part of xfmr.
//
// Products run on every core (xfmr-tile-contractions' panel loop, the
// micro-kernels' column tiles), attention over sequences; everything else a
// layer computes (norms, RoPE, activations, residual adds, the int8
// quantization of activations) ran on one core while the others waited: in
// a 2048-token prefill on two cores about a fifth of the time, more once the
// products are int8. This pass gives those ops rows: a top-level
// linalg.generic whose outermost (non-unit) loop is parallel becomes a loop
// over blocks of rows, marked `xfmr.independent_iterations`
// (xfmr-parallelize-loops makes it an scf.parallel), each iteration the same
// generic on subviews of its rows; when there are fewer rows than
// `min-rows` (decode steps) the op stays as it was, so a step of a few
// tokens does not pay for waking threads.
//
// Every element is computed by the same scalar code in the same order: only
// which thread computes a row changes, so results are bit-identical.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_SPLITROWSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr llvm::StringLiteral kMark = "xfmr.independent_iterations";
/// Static ops of fewer iterations stay on one core.
constexpr int64_t kMinWork = 16384;

/// The loops `g` may be split along: its leading parallel loops (before the
/// first reduction) that are not statically of size 1, used by every output
/// as a plain dimension (no two iterations write the same element) and by
/// no operand in a compound expression (so a block of rows is a subview).
/// At most two: a [batch, sequence, ...] op has its rows in the first or the
/// second, which only the run time knows.
SmallVector<unsigned> rowLoops(linalg::GenericOp g) {
  SmallVector<int64_t> ranges = g.getStaticLoopRanges();
  auto iterators = g.getIteratorTypesArray();
  SmallVector<unsigned> loops;
  for (unsigned d = 0; d < ranges.size() && loops.size() < 2; ++d) {
    if (iterators[d] != utils::IteratorType::parallel)
      break;
    if (ranges[d] == 1)
      continue;
    bool ok = true;
    for (OpOperand &operand : g->getOpOperands()) {
      bool plain = false;
      for (AffineExpr e : g.getMatchingIndexingMap(&operand).getResults()) {
        if (auto dim = dyn_cast<AffineDimExpr>(e))
          plain |= dim.getPosition() == d;
        else
          ok &= !e.isFunctionOfDim(d);
      }
      ok &= plain || !g.isDpsInit(&operand);
    }
    if (ok)
      loops.push_back(d);
  }
  return loops;
}

/// Whether `g`'s body may be reassociated (a sum ONNX's ReduceSum/Mean
/// lowering lets LLVM vectorize, RMSNorm's sum of squares): LLVM may then
/// vectorize a split copy and an unsplit copy differently, and a row's
/// result would depend on the number of rows. Such ops are split without
/// the unsplit copy: one loop over blocks of rows for every row count, so
/// every row runs the same code (a decode step pays one fork of the thread
/// team per such op).
bool reassociates(linalg::GenericOp g) {
  return g.getBody()
      ->walk([](arith::ArithFastMathInterface op) {
        arith::FastMathFlagsAttr flags = op.getFastMathFlagsAttr();
        return flags && bitEnumContainsAny(flags.getValue(), arith::FastMathFlags::reassoc)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

class RowSplitter {
public:
  RowSplitter(linalg::GenericOp g, ArrayRef<unsigned> loops, int64_t minRows, int64_t rowsPerTask)
      : g(g), loops(loops), minRows(minRows), rowsPerTask(rowsPerTask), b(g) {}

  /// if size(loops[0]) >= min-rows: split it; else if size(loops[1]) >=
  /// min-rows: split that; else `g` as it was.
  void run() {
    Location loc = g.getLoc();
    for (unsigned d : loops) {
      Value rows = loopSize(d);
      Value enough = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, rows, idx(minRows));
      auto ifOp = scf::IfOp::create(b, loc, enough, /*withElseRegion=*/true);
      b.setInsertionPointToStart(ifOp.thenBlock());
      split(d, rows);
      b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    }
    g->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
  }

  /// Splits loops[0] whatever its size: `g` becomes the loop.
  void runAlways() {
    split(loops[0], loopSize(loops[0]));
    g->erase();
  }

private:
  /// A loop over blocks of loop d's rows, each the generic on its rows.
  void split(unsigned d, Value rows) {
    OpBuilder::InsertionGuard guard(b);
    Location loc = g.getLoc();
    auto loop = scf::ForOp::create(b, loc, idx(0), rows, idx(rowsPerTask));
    loop->setAttr(kMark, b.getUnitAttr());
    b.setInsertionPointToStart(loop.getBody());
    Value first = loop.getInductionVar();
    Value count = arith::MinSIOp::create(
        b, loc, idx(rowsPerTask), arith::SubIOp::create(b, loc, rows, first));
    SmallVector<Value> operands;
    for (OpOperand &operand : g->getOpOperands())
      operands.push_back(rowsOf(operand, d, first, count));
    Operation *block = b.clone(*g.getOperation());
    block->setOperands(operands);
    offsetIndices(cast<linalg::GenericOp>(block), d, first);
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, g.getLoc(), v); }

  /// The size of loop d, from the first operand dimension that is d.
  Value loopSize(unsigned d) {
    for (OpOperand &operand : g->getOpOperands())
      for (auto [pos, e] : llvm::enumerate(g.getMatchingIndexingMap(&operand).getResults()))
        if (auto dim = dyn_cast<AffineDimExpr>(e); dim && dim.getPosition() == d)
          return memref::DimOp::create(b, g.getLoc(), operand.get(), pos);
    llvm_unreachable("rowLoops checked that an output uses the loop");
  }

  /// `operand` restricted to rows [first, first + count) of loop d.
  Value rowsOf(OpOperand &operand, unsigned d, Value first, Value count) {
    Value v = operand.get();
    auto type = dyn_cast<MemRefType>(v.getType());
    if (!type)
      return v; // a scalar
    Location loc = g.getLoc();
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes = memref::getMixedSizes(b, loc, v);
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    bool split = false;
    for (auto [pos, e] : llvm::enumerate(g.getMatchingIndexingMap(&operand).getResults()))
      if (auto dim = dyn_cast<AffineDimExpr>(e); dim && dim.getPosition() == d) {
        offsets[pos] = first;
        sizes[pos] = count;
        split = true;
      }
    if (!split)
      return v; // broadcast along the rows: every block reads all of it
    return memref::SubViewOp::create(b, loc, v, offsets, sizes, strides);
  }

  /// linalg.index of loop d in `block` counts from the block's first row.
  void offsetIndices(linalg::GenericOp block, unsigned d, Value first) {
    block.walk([&](linalg::IndexOp index) {
      if (index.getDim() != d)
        return;
      OpBuilder ib(index->getContext());
      ib.setInsertionPointAfter(index);
      auto global = arith::AddIOp::create(ib, index.getLoc(), index, first);
      index.getResult().replaceAllUsesExcept(global, global);
    });
  }

  linalg::GenericOp g;
  SmallVector<unsigned> loops;
  int64_t minRows, rowsPerTask;
  OpBuilder b;
};

struct SplitRowsPass : impl::SplitRowsPassBase<SplitRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (minRows < 1 || rowsPerTask < 1) {
      getOperation().emitError("xfmr-split-rows: min-rows and rows-per-task must be positive");
      return signalPassFailure();
    }
    // Copies, transposes, fills and broadcasts as generics, so they split
    // like the rest (the copy of A behind the int8 kernels, the transposes
    // around attention).
    SmallVector<linalg::LinalgOp> named;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (isa<func::FuncOp>(op->getParentOp()) && op.hasPureBufferSemantics() &&
          isa<linalg::CopyOp, linalg::TransposeOp, linalg::FillOp, linalg::BroadcastOp>(op))
        named.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, op);
    }
    SmallVector<std::pair<linalg::GenericOp, SmallVector<unsigned>>> ops;
    getOperation().walk([&](linalg::GenericOp g) {
      if (!isa<func::FuncOp>(g->getParentOp()) || !g.hasPureBufferSemantics())
        return; // inside a loop (an attention tile, a sequence) or on tensors
      SmallVector<int64_t> ranges = g.getStaticLoopRanges();
      if (llvm::none_of(ranges, ShapedType::isDynamic)) {
        int64_t work = 1;
        for (int64_t r : ranges)
          work *= r;
        if (work < kMinWork)
          return; // less than waking the threads costs
      }
      SmallVector<unsigned> loops;
      for (unsigned d : rowLoops(g)) {
        int64_t size = g.getStaticLoopRanges()[d];
        if (ShapedType::isDynamic(size) || size >= minRows)
          loops.push_back(d);
      }
      if (!loops.empty())
        ops.push_back({g, loops});
    });
    for (auto &[g, loops] : ops) {
      RowSplitter splitter(g, loops, minRows, rowsPerTask);
      if (reassociates(g))
        splitter.runAlways();
      else
        splitter.run();
    }
    numSplit += ops.size();
  }
};

} // namespace
} // namespace xfmr::cpu
