//===- KernelBuilder.cpp - a block's program as phases --------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

using namespace mlir;

namespace xfmr::gpu {

Value KernelBuilder::f32(float v) {
  return arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat(v));
}

std::pair<Value, Value> KernelBuilder::splitTF32(Value x) {
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), x);
  Value mask = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0xFFFFE000);
  Value hi = arith::BitcastOp::create(b, loc, b.getF32Type(),
                                      arith::AndIOp::create(b, loc, bits, mask));
  Value lo = arith::SubFOp::create(b, loc, x, hi);
  return {hi, lo};
}

void KernelBuilder::loop(Value lb, Value ub, Value step, function_ref<void(Value)> body) {
  auto forOp = scf::ForOp::create(b, loc, lb, ub, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forOp.getBody());
  body(forOp.getInductionVar());
}

void KernelBuilder::when(Value cond, function_ref<void()> then,
                         function_ref<void()> otherwise) {
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/bool(otherwise));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  then();
  if (otherwise) {
    b.setInsertionPointToStart(ifOp.elseBlock());
    otherwise();
  }
}

Value KernelBuilder::orZero(Value cond, function_ref<Value()> make) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{b.getF32Type()}, cond, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, make());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, f32(0.0f));
  return ifOp.getResult(0);
}

void KernelBuilder::phase(Value gpuTid, function_ref<void(Value)> body) {
  if (!emulate) {
    body(gpuTid);
    mlir::gpu::BarrierOp::create(b, loc);
    return;
  }
  loop(threads, body);
}

void KernelBuilder::forShare(Value tid, int64_t count, function_ref<void(Value)> body) {
  assert(count % threads == 0 && "a tile the block shares evenly");
  loop(count / threads, [&](Value i) { body(add(mul(i, idx(threads)), tid)); });
}

void KernelBuilder::warpPhase(Value gpuTid, function_ref<void(Value)> body) {
  if (!emulate) {
    body(div(gpuTid, 32));
    mlir::gpu::BarrierOp::create(b, loc);
    return;
  }
  loop(threads / 32, body);
}

void KernelBuilder::grid(StringRef name, std::array<Value, 3> blocks,
                         ArrayRef<SmallVector<int64_t, 2>> shapes, BlockBody body) {
  MLIRContext *ctx = b.getContext();
  Type f32Type = b.getF32Type();
  Value one = idx(1);
  if (emulate) {
    SmallVector<Value> buffers;
    for (ArrayRef<int64_t> shape : shapes)
      buffers.push_back(memref::AllocOp::create(b, loc, MemRefType::get(shape, f32Type)));
    OpBuilder::InsertionGuard guard(b);
    for (Value buf : buffers)
      memref::DeallocOp::create(b, loc, buf);
    b.setInsertionPoint(buffers.back().getDefiningOp()->getNextNode());
    SmallVector<Value> iv;
    for (Value extent : {blocks[2], blocks[1], blocks[0]}) {
      auto forOp = scf::ForOp::create(b, loc, idx(0), extent, one);
      b.setInsertionPointToStart(forOp.getBody());
      iv.push_back(forOp.getInductionVar());
    }
    body(iv[2], iv[1], iv[0], Value(), buffers);
    return;
  }
  auto wg = mlir::gpu::AddressSpaceAttr::get(ctx, mlir::gpu::AddressSpace::Workgroup);
  SmallVector<Type> shared;
  for (ArrayRef<int64_t> shape : shapes)
    shared.push_back(MemRefType::get(shape, f32Type, MemRefLayoutAttrInterface(), wg));
  auto launch = mlir::gpu::LaunchOp::create(
      b, loc, blocks[0], blocks[1], blocks[2], idx(threads), one, one, nullptr, nullptr, {},
      shared, {}, nullptr, nullptr, nullptr, FlatSymbolRefAttr::get(ctx, "xfmr_kernels"),
      FlatSymbolRefAttr::get(ctx, name));
  Block &block = launch.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&block);
  mlir::gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&block);
  SmallVector<Value> buffers(launch.getWorkgroupAttributions());
  body(launch.getBlockIds().x, launch.getBlockIds().y, launch.getBlockIds().z,
       launch.getThreadIds().x, buffers);
}

static int64_t leadingDim(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getDimSize(1);
}

void KernelBuilder::warpProduct(const SplitTile &a, const SplitTile &bt, int64_t depth,
                                int64_t frags, Value out, Value outRow, Value outCol,
                                bool accumulate) {
  assert(depth % kFragK == 0 && "whole WMMA steps");
  if (emulate) {
    // Scalar loops, per result the same three terms per step of K.
    loop(kFrag, [&](Value r) {
      loop(kFrag * frags, [&](Value c) {
        SmallVector<Value> at = {add(outRow, r), add(outCol, c)};
        Value acc = accumulate ? load(out, at) : f32(0.0f);
        auto forOp = scf::ForOp::create(b, loc, idx(0), idx(depth), idx(1), ValueRange{acc});
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(forOp.getBody());
          Value k = forOp.getInductionVar(), sum = forOp.getRegionIterArgs()[0];
          auto term = [&](Value x, Value y) {
            Value av = load(x, {add(a.row, r), add(a.col, k)});
            Value bv = load(y, {add(bt.row, k), add(bt.col, c)});
            sum = arith::AddFOp::create(b, loc, sum, arith::MulFOp::create(b, loc, av, bv));
          };
          term(a.lo, bt.hi);
          if (bt.lo)
            term(a.hi, bt.lo);
          term(a.hi, bt.hi);
          scf::YieldOp::create(b, loc, sum);
        }
        store(forOp.getResult(0), out, at);
      });
    });
    return;
  }
  Type f32Type = b.getF32Type();
  auto cType = mlir::gpu::MMAMatrixType::get({kFrag, kFrag}, f32Type, "COp");
  auto aType = mlir::gpu::MMAMatrixType::get({kFrag, kFragK}, f32Type, "AOp");
  auto bType = mlir::gpu::MMAMatrixType::get({kFragK, kFrag}, f32Type, "BOp");
  auto loadFrag = [&](Value buf, Type t, Value r, Value c) -> Value {
    return mlir::gpu::SubgroupMmaLoadMatrixOp::create(
        b, loc, t, buf, ValueRange{r, c}, b.getIndexAttr(leadingDim(buf)), UnitAttr());
  };
  SmallVector<Value> accs;
  for (int64_t j = 0; j < frags; ++j)
    accs.push_back(accumulate
                       ? loadFrag(out, cType, outRow, add(outCol, idx(j * kFrag)))
                       : mlir::gpu::SubgroupMmaConstantMatrixOp::create(b, loc, cType,
                                                                        f32(0.0f))
                             .getResult());
  // Steps of 8 unrolled: depth is a small constant.
  for (int64_t k = 0; k < depth; k += kFragK) {
    Value ak = add(a.col, idx(k)), bk = add(bt.row, idx(k));
    Value aHi = loadFrag(a.hi, aType, a.row, ak), aLo = loadFrag(a.lo, aType, a.row, ak);
    for (int64_t j = 0; j < frags; ++j) {
      Value c = add(bt.col, idx(j * kFrag));
      Value bHi = loadFrag(bt.hi, bType, bk, c);
      Value bLo = bt.lo ? loadFrag(bt.lo, bType, bk, c) : Value();
      for (auto [x, y] : {std::pair{aLo, bHi}, {aHi, bLo}, {aHi, bHi}})
        if (y)
          accs[j] = mlir::gpu::SubgroupMmaComputeOp::create(b, loc, x, y, accs[j], UnitAttr(),
                                                            UnitAttr());
    }
  }
  for (int64_t j = 0; j < frags; ++j)
    mlir::gpu::SubgroupMmaStoreMatrixOp::create(b, loc, accs[j], out,
                                                ValueRange{outRow, add(outCol, idx(j * kFrag))},
                                                b.getIndexAttr(leadingDim(out)), UnitAttr());
}

} // namespace xfmr::gpu
