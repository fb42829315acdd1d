//===- LoweringUtils.cpp - builders shared by the lowerings ---------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/LoweringUtils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace xfmr::lowering {

FloatType accumulatorType(Type element) {
  auto f = cast<FloatType>(element);
  return f.getWidth() < 32 ? Float32Type::get(element.getContext()) : f;
}

Value convertFloat(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  unsigned fromWidth = cast<FloatType>(from).getWidth();
  unsigned toWidth = cast<FloatType>(to).getWidth();
  if (fromWidth < toWidth)
    return arith::ExtFOp::create(b, loc, to, v);
  if (fromWidth > toWidth)
    return arith::TruncFOp::create(b, loc, to, v);
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  return arith::TruncFOp::create(b, loc, to, wide);
}

Value floatConstant(OpBuilder &b, Location loc, FloatType type, double v) {
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
}

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value dimValue(OpBuilder &b, Location loc, Value t, int64_t d) {
  return getValueOrCreateConstantIndexOp(b, loc, tensor::getMixedSize(b, loc, t, d));
}

void runtimeCheck(OpBuilder &b, Location loc, Value cond, const llvm::Twine &message) {
  std::string where;
  llvm::raw_string_ostream os(where);
  loc.print(os);
  cf::AssertOp::create(b, loc, cond, (message + " at " + where).str());
}

Value checkedIndex(OpBuilder &b, Location loc, Value i, Value dim, bool isUnsigned,
                   llvm::StringRef what) {
  if (!isa<IndexType>(i.getType())) {
    if (isUnsigned || i.getType().isInteger(1))
      i = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), i);
    else
      i = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  }
  Value zero = indexConstant(b, loc, 0);
  Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  i = arith::SelectOp::create(b, loc, neg, arith::AddIOp::create(b, loc, i, dim), i);
  Value ok = arith::AndIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i, zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, dim));
  runtimeCheck(b, loc, ok, what + llvm::Twine(": index out of range"));
  // Execution goes on after a failed check (the entry point reports it when
  // it returns): index 0 stands in for the bad one. An empty `dim` has no
  // element to read; its users read nothing when the extent is 0.
  return arith::SelectOp::create(b, loc, ok, i, zero);
}

std::optional<ArrayRef<char>> constantBytes(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  ElementsAttr attr;
  if (auto cst = dyn_cast<arith::ConstantOp>(def))
    attr = dyn_cast<ElementsAttr>(cst.getValue());
  else if (def->getName().getStringRef() == "onnx.Constant")
    attr = dyn_cast_or_null<ElementsAttr>(def->getAttr("value"));
  if (auto res = dyn_cast_or_null<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(attr); dense && !dense.isSplat())
    return dense.getRawData();
  return std::nullopt;
}

Value constantTensor(OpBuilder &b, Location loc, ArrayRef<char> bytes, ArrayRef<int64_t> shape,
                     Type element, StringRef name) {
  auto type = RankedTensorType::get(shape, element);
  auto attr = DenseResourceElementsAttr::get(
      type, name, HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, 64));
  return arith::ConstantOp::create(b, loc, type, attr);
}

/// Marks the copies kernelInput makes, for mergeKernelInputs.
static constexpr llvm::StringLiteral kKernelInput = "xfmr.kernel_input";

Value kernelInput(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(b, loc, t, d));
  Value init = bufferization::AllocTensorOp::create(b, loc, type, dyn);
  auto copy = linalg::CopyOp::create(b, loc, t, init);
  copy->setAttr(kKernelInput, b.getUnitAttr());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), copy.getResult(0),
      /*read_only=*/true);
}

/// Whether `x` and `y` hold the same value: equal, or results of
/// equivalent pure ops on operands that are the same (at most `depth` ops
/// up).
static bool sameValue(Value x, Value y, int depth) {
  if (x == y)
    return true;
  auto rx = dyn_cast<OpResult>(x), ry = dyn_cast<OpResult>(y);
  if (depth == 0 || !rx || !ry || rx.getResultNumber() != ry.getResultNumber() ||
      !isPure(rx.getOwner()) || !isPure(ry.getOwner()) ||
      rx.getOwner()->getNumRegions() != 0)
    return false;
  return OperationEquivalence::isEquivalentTo(
      rx.getOwner(), ry.getOwner(),
      [&](Value l, Value r) { return success(sameValue(l, r, depth - 1)); },
      /*markEquivalent=*/nullptr, OperationEquivalence::IgnoreLocations);
}

void mergeKernelInputs(Operation *root) {
  // Per block, the kernel-input copies seen so far, in order.
  DenseMap<Block *, SmallVector<linalg::CopyOp>> seen;
  SmallVector<linalg::CopyOp> redundant;
  root->walk([&](linalg::CopyOp copy) {
    if (!copy->hasAttr(kKernelInput) || !copy->getResult(0).hasOneUse())
      return;
    SmallVector<linalg::CopyOp> &earlier = seen[copy->getBlock()];
    Value source = copy.getInputs()[0];
    for (linalg::CopyOp e : earlier)
      if (e->getResult(0).getType() == copy->getResult(0).getType() &&
          sameValue(e.getInputs()[0], source, /*depth=*/4)) {
        auto mine = cast<bufferization::ToBufferOp>(*copy->getResult(0).getUsers().begin());
        auto theirs = cast<bufferization::ToBufferOp>(*e->getResult(0).getUsers().begin());
        if (mine.getType() != theirs.getType())
          continue;
        mine.getResult().replaceAllUsesWith(theirs.getResult());
        redundant.push_back(copy);
        return;
      }
    earlier.push_back(copy);
  });
  for (linalg::CopyOp copy : redundant) {
    Operation *buffer = *copy->getResult(0).getUsers().begin();
    Operation *init = copy.getOutputs()[0].getDefiningOp();
    buffer->erase();
    copy->erase();
    if (init && init->use_empty())
      init->erase();
  }
}

void declareKernel(OpBuilder &b, Operation *anchor, StringRef name, TypeRange args) {
  auto module = anchor->getParentOfType<ModuleOp>();
  if (module.lookupSymbol(name))
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                FunctionType::get(b.getContext(), args, {}));
  f.setPrivate();
}

void forRowBlocks(OpBuilder &b, Location loc, Value rows, Value rows64, int64_t tile,
                  int64_t parallelRows, llvm::function_ref<void(OpBuilder &, Value, Value)> call) {
  Type i64 = b.getI64Type();
  auto c64 = [&](int64_t v) -> Value { return arith::ConstantIntOp::create(b, loc, i64, v); };
  Value many = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, rows64, c64(parallelRows));
  auto ifOp = scf::IfOp::create(b, loc, many, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value tiles = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, rows, indexConstant(b, loc, tile - 1)),
      indexConstant(b, loc, tile));
  auto loop =
      scf::ForOp::create(b, loc, indexConstant(b, loc, 0), tiles, indexConstant(b, loc, 1));
  loop->setAttr("xfmr.independent_iterations", b.getUnitAttr());
  b.setInsertionPointToStart(loop.getBody());
  Value r0 = arith::MulIOp::create(
      b, loc, arith::IndexCastOp::create(b, loc, i64, loop.getInductionVar()), c64(tile));
  Value count =
      arith::MinSIOp::create(b, loc, c64(tile), arith::SubIOp::create(b, loc, rows64, r0));
  call(b, r0, count);
  b.setInsertionPointToStart(ifOp.elseBlock());
  call(b, c64(0), rows64);
}

Value addressOf(OpBuilder &b, Location loc, Value memref) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), i64);
}

} // namespace xfmr::lowering
