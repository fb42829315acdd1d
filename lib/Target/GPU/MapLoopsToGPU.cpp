//===- MapLoopsToGPU.cpp - parallel loop nests to gpu.launch --------------===//
//
// Part of xfmr.
//
// The GPU-independent program (linalg on buffers, lowered to scf.parallel
// loop nests with sequential reductions inside) runs on the device one loop
// nest per kernel. Each point of a nest is one thread: the nest's
// dimensions are linearised over a 1-D grid of `block-size` threads, which
// keeps a kernel's shape independent of the rank of the op it came from and
// makes neighbouring threads touch neighbouring innermost elements
// (coalesced loads and stores for row-major buffers).
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/Passes.h"

#include "KernelName.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;

namespace xfmr::gpu {
#define GEN_PASS_DEF_MAPLOOPSTOGPUPASS
#include "xfmr/Target/GPU/Passes.h.inc"
} // namespace xfmr::gpu

namespace xfmr::gpu {
namespace {

bool insideKernel(Operation *op) {
  return op->getParentOfType<mlir::gpu::LaunchOp>() ||
         op->getParentOfType<mlir::gpu::GPUModuleOp>();
}

/// memref.copy(src, dst) as an scf.parallel nest of loads and stores.
void copyToLoops(memref::CopyOp copy) {
  OpBuilder b(copy);
  Location loc = copy.getLoc();
  auto dstType = cast<MemRefType>(copy.getTarget().getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  if (dstType.getRank() == 0) {
    Value v = memref::LoadOp::create(b, loc, copy.getSource(), ValueRange{});
    memref::StoreOp::create(b, loc, v, copy.getTarget(), ValueRange{});
    copy.erase();
    return;
  }
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < dstType.getRank(); ++d) {
    lbs.push_back(zero);
    ubs.push_back(memref::DimOp::create(b, loc, copy.getTarget(), d));
    steps.push_back(one);
  }
  Value src = copy.getSource(), dst = copy.getTarget();
  scf::ParallelOp::create(b, loc, lbs, ubs, steps,
                          [&](OpBuilder &nb, Location l, ValueRange ivs) {
                            Value v = memref::LoadOp::create(nb, l, src, ivs);
                            memref::StoreOp::create(nb, l, v, dst, ivs);
                          });
  copy.erase();
}

/// Whether only kernels touch the buffer `v` (or views of it): every use is
/// inside a gpu.launch, a deallocation, a size query, or a view whose own
/// uses are such. Anything else (a host load, a call, a return, a loop's
/// carried value, a reshape's shape operand) needs host access.
bool onlyKernelsTouch(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (user->getParentOfType<mlir::gpu::LaunchOp>() ||
        isa<memref::DeallocOp, memref::DimOp>(user))
      continue;
    bool view = isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
                    memref::CastOp, memref::ReinterpretCastOp>(user) ||
                (isa<memref::ReshapeOp>(user) && use.getOperandNumber() == 0);
    if (view && onlyKernelsTouch(user->getResult(0)))
      continue;
    return false;
  }
  return true;
}

/// Buffers only kernels touch go to device memory (an asynchronous
/// gpu.alloc on the runtime's stream, the form gpu-to-llvm lowers); the rest
/// become unified memory the host reads too.
void allocToGPU(memref::AllocOp alloc) {
  OpBuilder b(alloc);
  Location loc = alloc.getLoc();
  Value memory;
  if (onlyKernelsTouch(alloc.getResult())) {
    Type token = mlir::gpu::AsyncTokenType::get(b.getContext());
    Value ready = mlir::gpu::WaitOp::create(b, loc, token, ValueRange{}).getAsyncToken();
    auto g = mlir::gpu::AllocOp::create(b, loc, alloc.getType(), token, ValueRange{ready},
                                        alloc.getDynamicSizes(), alloc.getSymbolOperands(),
                                        /*hostShared=*/false);
    mlir::gpu::WaitOp::create(b, loc, Type(), ValueRange{g.getAsyncToken()});
    memory = g.getMemref();
  } else {
    memory = mlir::gpu::AllocOp::create(b, loc, alloc.getType(), /*asyncToken=*/Type(),
                                        ValueRange{}, alloc.getDynamicSizes(),
                                        alloc.getSymbolOperands(), /*hostShared=*/true)
                 .getMemref();
  }
  alloc.replaceAllUsesWith(memory);
  alloc.erase();
}

/// Frees a unified buffer through the runtime (`xfmr_gpu_free(pointer)`):
/// upstream lowers only the asynchronous form of gpu.dealloc.
void deallocToGPU(memref::DeallocOp dealloc, func::FuncOp freeFn) {
  OpBuilder b(dealloc);
  Location loc = dealloc.getLoc();
  Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dealloc.getMemref());
  Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), ptr);
  func::CallOp::create(b, loc, freeFn, ValueRange{i64});
  dealloc.erase();
}

func::FuncOp declareFree(ModuleOp module) {
  constexpr llvm::StringLiteral name = "xfmr_gpu_free";
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                b.getFunctionType({b.getI64Type()}, {}));
  f.setPrivate();
  return f;
}

/// Iterations of one dimension: ceil((ub - lb) / step).
Value tripCount(OpBuilder &b, Location loc, Value lb, Value ub, Value step) {
  Value span = arith::SubIOp::create(b, loc, ub, lb);
  return arith::CeilDivSIOp::create(b, loc, span, step);
}

/// The body of thread `tid` of block `bid`: the point of the nest whose
/// row-major index is bid * bs + tid, if there is one.
void emitThread(OpBuilder &b, scf::ParallelOp par, Value bid, Value tid, Value bs, Value total,
                ArrayRef<Value> counts) {
  Location loc = par.getLoc();
  Value gid = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, bid, bs), tid);
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, gid, total);
  auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  IRMapping map;
  Value rest = gid;
  int64_t rank = par.getNumLoops();
  for (int64_t d = rank - 1; d >= 0; --d) {
    Value idx = d == 0 ? rest : arith::RemSIOp::create(b, loc, rest, counts[d]);
    if (d > 0)
      rest = arith::DivSIOp::create(b, loc, rest, counts[d]);
    Value scaled = arith::MulIOp::create(b, loc, idx, par.getStep()[d]);
    map.map(par.getInductionVars()[d],
            arith::AddIOp::create(b, loc, par.getLowerBound()[d], scaled).getResult());
  }
  for (Operation &op : par.getBody()->without_terminator())
    b.clone(op, map);
}

/// One nest, one kernel: thread t of the linearised space runs the body at
/// the point whose row-major index is t. With `emulate`, the grid is a loop
/// nest over blocks and threads on the host instead (the same index
/// arithmetic, guard and body, run by the CPU lowering in tests).
void nestToLaunch(scf::ParallelOp par, int64_t blockSize, unsigned index, bool emulate) {
  OpBuilder b(par);
  Location loc = par.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value bs = arith::ConstantIndexOp::create(b, loc, blockSize);
  SmallVector<Value> counts;
  Value total = one;
  for (auto [lb, ub, step] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    Value n = tripCount(b, loc, lb, ub, step);
    n = arith::MaxSIOp::create(b, loc, n, zero);
    counts.push_back(n);
    total = arith::MulIOp::create(b, loc, total, n);
  }
  // An empty nest still launches one block (a zero grid is a launch error);
  // its threads all fail the bound check.
  Value blocks = arith::CeilDivSIOp::create(b, loc, total, bs);
  blocks = arith::MaxSIOp::create(b, loc, blocks, one);
  if (emulate) {
    auto blockLoop = scf::ForOp::create(b, loc, zero, blocks, one);
    b.setInsertionPointToStart(blockLoop.getBody());
    auto threadLoop = scf::ForOp::create(b, loc, zero, bs, one);
    b.setInsertionPointToStart(threadLoop.getBody());
    emitThread(b, par, blockLoop.getInductionVar(), threadLoop.getInductionVar(), bs, total,
               counts);
    par.erase();
    return;
  }
  // Every kernel goes into one gpu.module, named after what it computes.
  auto launch = mlir::gpu::LaunchOp::create(
      b, loc, blocks, one, one, bs, one, one, /*dynamicSharedMemorySize=*/nullptr,
      /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{}, /*workgroupAttributions=*/{},
      /*privateAttributions=*/{}, nullptr, nullptr, nullptr,
      FlatSymbolRefAttr::get(b.getContext(), "xfmr_kernels"),
      FlatSymbolRefAttr::get(b.getContext(), kernelName(loc, "k", index)));
  Block &body = launch.getBody().front();
  b.setInsertionPointToStart(&body);
  mlir::gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&body);
  emitThread(b, par, launch.getBlockIds().x, launch.getThreadIds().x, bs, total, counts);
  par.erase();
}

/// Clones into the kernel the constant globals it reads, so that outlining
/// copies the globals into the gpu.module (device memory) instead of passing
/// host addresses.
void sinkGlobals(mlir::gpu::LaunchOp launch) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(launch.getBody(), above);
  for (Value v : above) {
    auto get = v.getDefiningOp<memref::GetGlobalOp>();
    if (!get)
      continue;
    OpBuilder b(&launch.getBody().front(), launch.getBody().front().begin());
    Operation *clone = b.clone(*get);
    replaceAllUsesInRegionWith(v, clone->getResult(0), launch.getBody());
  }
}

constexpr llvm::StringLiteral kCheckWord = "xfmr_kernel_check";

/// A run-time check inside a kernel cannot return an error status (and a
/// trap would poison the CUDA context): the kernel stores the check's number
/// (1-based, in module attribute `xfmr.kernel_checks`) into the device word
/// `xfmr_kernel_check`, which the runtime reads and clears after each call.
/// The lowerings clamp what their checks guard, so the kernel stays in
/// bounds.
void checksToDeviceWord(ModuleOp module, ArrayRef<mlir::gpu::LaunchOp> launches) {
  SmallVector<cf::AssertOp> asserts;
  for (mlir::gpu::LaunchOp l : launches)
    l.walk([&](cf::AssertOp a) { asserts.push_back(a); });
  if (asserts.empty())
    return;
  MLIRContext *ctx = module.getContext();
  auto wordType = MemRefType::get({1}, IntegerType::get(ctx, 64));
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  if (!module.lookupSymbol(kCheckWord))
    memref::GlobalOp::create(mb, module.getLoc(), kCheckWord, mb.getStringAttr("public"),
                             wordType, mb.getZeroAttr(RankedTensorType::get({1}, mb.getI64Type())),
                             /*constant=*/false, /*alignment=*/IntegerAttr());
  SmallVector<Attribute> messages;
  if (auto old = module->getAttrOfType<ArrayAttr>("xfmr.kernel_checks"))
    messages.assign(old.begin(), old.end());
  for (cf::AssertOp a : asserts) {
    messages.push_back(a.getMsgAttr());
    OpBuilder b(a);
    Location loc = a.getLoc();
    Value failed = arith::XOrIOp::create(
        b, loc, a.getArg(), arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
    auto ifOp = scf::IfOp::create(b, loc, failed, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value word = memref::GetGlobalOp::create(b, loc, wordType, kCheckWord);
    Value code = arith::ConstantIntOp::create(b, loc, b.getI64Type(), messages.size());
    memref::StoreOp::create(b, loc, code, word,
                            ValueRange{arith::ConstantIndexOp::create(b, loc, 0)});
    a.erase();
  }
  module->setAttr("xfmr.kernel_checks", ArrayAttr::get(ctx, messages));
}

struct MapLoopsToGPUPass : impl::MapLoopsToGPUPassBase<MapLoopsToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<memref::CopyOp> copies;
    module.walk([&](memref::CopyOp c) {
      if (!insideKernel(c))
        copies.push_back(c);
    });
    for (memref::CopyOp c : copies)
      copyToLoops(c);
    numCopies += copies.size();

    SmallVector<scf::ParallelOp> nests;
    module.walk([&](scf::ParallelOp p) {
      if (!p->getParentOfType<scf::ParallelOp>() && !insideKernel(p))
        nests.push_back(p);
    });
    unsigned index = 0;
    for (scf::ParallelOp p : nests) {
      if (llvm::any_of(p.getInitVals(), [](Value) { return true; })) {
        p.emitError("a parallel loop with reductions has no GPU mapping");
        return signalPassFailure();
      }
      nestToLaunch(p, blockSize, index++, emulate);
    }
    numKernels += nests.size();
    if (emulate)
      return;

    SmallVector<memref::AllocOp> allocs;
    SmallVector<memref::DeallocOp> deallocs;
    module.walk([&](Operation *op) {
      if (insideKernel(op))
        return;
      if (auto a = dyn_cast<memref::AllocOp>(op))
        allocs.push_back(a);
      else if (auto d = dyn_cast<memref::DeallocOp>(op))
        deallocs.push_back(d);
    });
    for (memref::AllocOp a : allocs)
      allocToGPU(a);
    if (!deallocs.empty()) {
      func::FuncOp freeFn = declareFree(module);
      for (memref::DeallocOp d : deallocs)
        deallocToGPU(d, freeFn);
    }
    SmallVector<mlir::gpu::LaunchOp> launches;
    module.walk([&](mlir::gpu::LaunchOp l) { launches.push_back(l); });
    checksToDeviceWord(module, launches);
    for (mlir::gpu::LaunchOp l : launches)
      sinkGlobals(l);
    module->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
  }
};

} // namespace
} // namespace xfmr::gpu
