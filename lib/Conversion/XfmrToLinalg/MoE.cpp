//===- MoE.cpp - xfmr.moe to the routed-experts micro-kernel --------------===//
//
// Part of xfmr.
//
// xfmr.moe with constant f32 weights becomes calls of xfmr_uk_moe_f32
// (runtime/ukernels/MoE.c): the router, gate, up and down weights are
// packed at compile time into the kernel's 16-column panels; each call
// routes a block of tokens, groups them by expert and runs only the
// selected experts' products, so a decode step reads top_k of E experts.
// From kMoEParallelRows tokens on, blocks of kMoERowTile tokens are calls
// in a loop xfmr-parallelize-loops splits across threads; fewer (decode)
// are one call. A token's result depends on that token alone, so the
// blocking keeps batch invariance. Then xfmr_uk_moe_combine sums the
// ranks' partial outputs under expert parallelism (nothing otherwise).
// Sigmoid, group-limited routing (DeepSeek-V3) and gpt-oss's biases and
// clamped SwiGLU are the kernel's too: its flags and one constants buffer
// per layer (routed scale, SwiGLU constants, biases).
// Quantized experts (bf16, i8 or f8E4M3FN, xfmr-quantize-experts) are
// packed by xfmr_uk_pack_narrow, one matrix after the other, and called
// through xfmr_uk_moe_narrow with their column scales.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "runtime/ukernels/MatmulNarrow.h"
#include "runtime/ukernels/MoE.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cassert>
#include <cmath>
#include <cstring>

using namespace mlir;

namespace xfmr::lowering {
namespace {

constexpr llvm::StringLiteral kMoEKernel = "xfmr_uk_moe_f32";
constexpr llvm::StringLiteral kMoENarrowKernel = "xfmr_uk_moe_narrow";
constexpr llvm::StringLiteral kMoECombine = "xfmr_uk_moe_combine";
constexpr llvm::StringLiteral kMoEShared = "xfmr_uk_moe_shared_f32";
/// Tokens per call, and the fewest tokens for which calls run on several
/// cores.
constexpr int64_t kMoERowTile = 32, kMoEParallelRows = 64;

/// `count` row-major [k, n] f32 matrices (`w`) packed for the kernel, as a
/// read-only buffer; null unless `w` is a constant of that size.
Value packedWeights(OpBuilder &b, Location loc, Value w, int64_t count, int64_t k, int64_t n) {
  std::optional<ArrayRef<char>> bytes = constantBytes(w);
  if (!bytes || bytes->size() != static_cast<size_t>(count * k * n) * sizeof(float))
    return nullptr;
  std::vector<float> src(count * k * n);
  std::memcpy(src.data(), bytes->data(), bytes->size());
  int64_t floats = xfmr_uk_moe_packed_floats(count, k, n);
  std::vector<char> packed(floats * sizeof(float));
  xfmr_uk_moe_pack(src.data(), count, k, n, reinterpret_cast<float *>(packed.data()));
  Value t = constantTensor(b, loc, packed, {floats}, b.getF32Type(), "xfmr_moe_panels");
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get({floats}, b.getF32Type()), t, /*read_only=*/true);
}

/// `count` row-major [k, n] matrices of `elemBytes`-byte narrow values
/// (`w`), each packed by xfmr_uk_pack_narrow, one after the other, as a
/// read-only byte buffer; null unless `w` is a constant of that size.
Value packedNarrowWeights(OpBuilder &b, Location loc, Value w, int64_t count, int64_t k,
                          int64_t n, int64_t elemBytes) {
  std::optional<ArrayRef<char>> bytes = constantBytes(w);
  if (!bytes || bytes->size() != static_cast<size_t>(count * k * n * elemBytes))
    return nullptr;
  int64_t matrix = xfmr_uk_packed_narrow_bytes(n, k, elemBytes);
  std::vector<char> packed(count * matrix);
  for (int64_t m = 0; m < count; ++m)
    xfmr_uk_pack_narrow(reinterpret_cast<const uint8_t *>(bytes->data()) + m * k * n * elemBytes,
                        k, n, elemBytes, reinterpret_cast<uint8_t *>(&packed[m * matrix]));
  int64_t size = static_cast<int64_t>(packed.size());
  Value t = constantTensor(b, loc, packed, {size}, b.getI8Type(), "xfmr_moe_narrow_panels");
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get({size}, b.getI8Type()), t, /*read_only=*/true);
}

/// A constant f32 tensor as a read-only buffer of its row-major values.
Value scaleBuffer(OpBuilder &b, Location loc, Value s) {
  int64_t n = cast<RankedTensorType>(s.getType()).getNumElements();
  Value t = constantTensor(b, loc, *constantBytes(s), {n}, b.getF32Type(), "xfmr_moe_scales");
  return bufferization::ToBufferOp::create(b, loc, MemRefType::get({n}, b.getF32Type()), t,
                                           /*read_only=*/true);
}

bool isStaticF32(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.hasStaticShape() && type.getElementType().isF32();
}

/// The kernel's format of the expert weights' element type, if it has one.
std::optional<int64_t> expertFormat(Type elem) {
  if (elem.isF32())
    return XFMR_UK_MOE_F32;
  if (elem.isBF16())
    return XFMR_UK_MOE_BF16;
  if (elem.isInteger(8))
    return XFMR_UK_MOE_I8;
  if (isa<Float8E4M3FNType>(elem))
    return XFMR_UK_MOE_FP8;
  return std::nullopt;
}

/// The kernel's flags for `op`: renormalisation, scoring, activation and
/// groups (MoE.h).
int64_t routingFlags(MoEOp op) {
  int64_t flags = (op.getNormalizeTopK() ? XFMR_UK_MOE_NORMALIZE : 0) |
                  (op.hasSigmoidScoring() ? XFMR_UK_MOE_SIGMOID : 0) |
                  (static_cast<int64_t>(op.getActivation()) << XFMR_UK_MOE_ACTIVATION_SHIFT);
  if (op.getGroups() > 1)
    flags |= (op.getGroups() << XFMR_UK_MOE_GROUPS_SHIFT) |
             (op.getTopGroups() << XFMR_UK_MOE_TOP_GROUPS_SHIFT);
  if (op.hasClampedSwiGLU())
    flags |= XFMR_UK_MOE_CLAMPED_SWIGLU;
  if (op.getRouterBias())
    flags |= XFMR_UK_MOE_ROUTER_BIAS;
  if (op.getSelectionBias())
    flags |= XFMR_UK_MOE_SELECTION_BIAS;
  if (op.getWGateBias())
    flags |= XFMR_UK_MOE_EXPERT_BIASES;
  return flags;
}

/// The kernel's constants buffer for `op` (MoE.h: routed scale, SwiGLU
/// constants, then the biases `flags` names), a read-only f32 buffer.
Value constantsBuffer(OpBuilder &b, Location loc, MoEOp op, int64_t flags, int64_t experts,
                      int64_t h, int64_t inter) {
  std::optional<APFloat> limit = op.getSwigluLimit();
  std::vector<float> c = {op.getRoutedScale().convertToFloat(),
                          op.getSwigluAlpha().convertToFloat(),
                          limit ? limit->convertToFloat() : INFINITY,
                          op.getUpOffset().convertToFloat()};
  for (Value v : {op.getRouterBias(), op.getSelectionBias(), op.getWGateBias(), op.getWUpBias(),
                  op.getWDownBias()}) {
    if (!v)
      continue;
    ArrayRef<char> bytes = *constantBytes(v);
    const float *f = reinterpret_cast<const float *>(bytes.data());
    c.insert(c.end(), f, f + bytes.size() / sizeof(float));
  }
  assert(static_cast<int64_t>(c.size()) ==
         xfmr_uk_moe_constants_floats(flags, experts, h, inter));
  int64_t n = static_cast<int64_t>(c.size());
  ArrayRef<char> raw(reinterpret_cast<const char *>(c.data()), c.size() * sizeof(float));
  Value t = constantTensor(b, loc, raw, {n}, b.getF32Type(), "xfmr_moe_constants");
  return bufferization::ToBufferOp::create(b, loc, MemRefType::get({n}, b.getF32Type()), t,
                                           /*read_only=*/true);
}

struct MoELowering : public OpRewritePattern<MoEOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(MoEOp op, PatternRewriter &b) const override {
    auto xType = op.getInput().getType();
    if (!xType.getElementType().isF32() || xType.isDynamicDim(1))
      return b.notifyMatchFailure(op, "needs f32 tokens with a static hidden size");
    // Every weight a constant (checked before any IR is created: the
    // conversion does not roll back).
    // Expert weights f32 or narrow (with f32 scales), the rest f32.
    if (op.getGroups() > XFMR_UK_MOE_MAX_GROUPS)
      return b.notifyMatchFailure(op, "more expert groups than the kernel takes");
    std::optional<int64_t> format = expertFormat(op.getWGate().getType().getElementType());
    if (!format)
      return b.notifyMatchFailure(op, "expert weights of a type the kernel does not read");
    for (Value w : op->getOperands().drop_front()) {
      auto type = cast<RankedTensorType>(w.getType());
      bool expert = w == op.getWGate() || w == op.getWUp() || w == op.getWDown();
      if (!type.hasStaticShape() || !constantBytes(w) || (!expert && !isStaticF32(w)))
        return b.notifyMatchFailure(op, "weights are not constant tensors");
    }
    Location loc = op.getLoc();
    auto gType = op.getWGate().getType();
    int64_t experts = gType.getDimSize(0), h = gType.getDimSize(1), inter = gType.getDimSize(2);
    bool narrow = *format != XFMR_UK_MOE_F32;
    int64_t elemBytes = gType.getElementTypeBitWidth() / 8;
    auto expertWeights = [&](Value w, int64_t k, int64_t n) {
      return narrow ? packedNarrowWeights(b, loc, w, experts, k, n, elemBytes)
                    : packedWeights(b, loc, w, experts, k, n);
    };
    Value router = packedWeights(b, loc, op.getRouter(), 1, h, experts);
    Value wg = expertWeights(op.getWGate(), h, inter);
    Value wu = expertWeights(op.getWUp(), h, inter);
    Value wd = expertWeights(op.getWDown(), inter, h);

    MLIRContext *ctx = b.getContext();
    Type i64 = b.getI64Type(), f32 = b.getF32Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    if (narrow)
      declareKernel(b, op, kMoENarrowKernel, {ptr, i64, i64, i64, i64, i64, i64, i64, ptr, ptr,
                                              ptr, ptr, ptr, ptr, ptr, ptr, ptr});
    else
      declareKernel(b, op, kMoEKernel,
                    {ptr, i64, i64, i64, i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr});
    // Column scales (int8, fp8), or null pointers.
    SmallVector<Value> scaleP;
    for (Value s : {op.getWGateScales(), op.getWUpScales(), op.getWDownScales()})
      scaleP.push_back(s ? addressOf(b, loc, scaleBuffer(b, loc, s))
                         : LLVM::ZeroOp::create(b, loc, ptr).getResult());
    declareKernel(b, op, kMoECombine, {ptr, i64});
    Value x = op.getInput();
    Value rows = tensor::DimOp::create(b, loc, x, 0);
    SmallVector<Value> dyn;
    if (xType.isDynamicDim(0))
      dyn.push_back(rows);
    // The kernel reads the tokens through a pointer the tensor analysis
    // cannot see: a copy of their own (see narrowProduct in MLP.cpp).
    auto memType = MemRefType::get(xType.getShape(), f32);
    Value in = kernelInput(b, loc, x);
    Value out = memref::AllocOp::create(b, loc, memType, dyn);

    auto c64 = [&](int64_t v) -> Value { return arith::ConstantIntOp::create(b, loc, i64, v); };
    int64_t flags = routingFlags(op);
    Value inP = addressOf(b, loc, in), outP = addressOf(b, loc, out);
    Value rP = addressOf(b, loc, router), gP = addressOf(b, loc, wg);
    // The routing and expert constants beyond the weights.
    Value constantsP =
        addressOf(b, loc, constantsBuffer(b, loc, op, flags, experts, h, inter));
    Value uP = addressOf(b, loc, wu), dP = addressOf(b, loc, wd);
    // Tokens [r0, r0 + count).
    auto call = [&](OpBuilder &cb, Value r0, Value count) {
      Value offset = arith::MulIOp::create(cb, loc, r0, c64(h));
      Value xRow = LLVM::GEPOp::create(cb, loc, ptr, f32, inP, ValueRange{offset});
      Value outRow = LLVM::GEPOp::create(cb, loc, ptr, f32, outP, ValueRange{offset});
      if (narrow)
        func::CallOp::create(cb, loc, kMoENarrowKernel, TypeRange{},
                             ValueRange{xRow, count, c64(h), c64(inter), c64(experts),
                                        c64(op.getTopK()), c64(flags), c64(*format), rP, gP, uP,
                                        dP, scaleP[0], scaleP[1], scaleP[2], constantsP,
                                        outRow});
      else
        func::CallOp::create(cb, loc, kMoEKernel, TypeRange{},
                             ValueRange{xRow, count, c64(h), c64(inter), c64(experts),
                                        c64(op.getTopK()), c64(flags), rP, gP, uP, dP,
                                        constantsP, outRow});
    };
    Value rows64 = arith::IndexCastOp::create(b, loc, i64, rows);
    forRowBlocks(b, loc, rows, rows64, kMoERowTile, kMoEParallelRows, call);
    // Expert parallel: the ranks' partial outputs summed (a no-op in one
    // process), once per layer, outside the threaded loop.
    func::CallOp::create(b, loc, kMoECombine, TypeRange{},
                         ValueRange{outP, arith::MulIOp::create(b, loc, rows64, c64(h))});
    // The shared expert, on every rank after the combine (so that the sum
    // is the one of a single process), added to the routed result.
    if (op.getSharedWGate()) {
      int64_t sharedInter = cast<RankedTensorType>(op.getSharedWGate().getType()).getDimSize(1);
      Value sg = packedWeights(b, loc, op.getSharedWGate(), 1, h, sharedInter);
      Value su = packedWeights(b, loc, op.getSharedWUp(), 1, h, sharedInter);
      Value sd = packedWeights(b, loc, op.getSharedWDown(), 1, sharedInter, h);
      Value sgate = op.getSharedGate() ? packedWeights(b, loc, op.getSharedGate(), 1, h, 1)
                                       : Value();
      declareKernel(b, op, kMoEShared, {ptr, i64, i64, i64, i64, ptr, ptr, ptr, ptr, ptr});
      Value sgP = addressOf(b, loc, sg), suP = addressOf(b, loc, su), sdP = addressOf(b, loc, sd);
      Value scaleP = sgate ? addressOf(b, loc, sgate)
                           : LLVM::ZeroOp::create(b, loc, ptr).getResult();
      auto shared = [&](OpBuilder &cb, Value r0, Value count) {
        Value offset = arith::MulIOp::create(cb, loc, r0, c64(h));
        Value xRow = LLVM::GEPOp::create(cb, loc, ptr, f32, inP, ValueRange{offset});
        Value outRow = LLVM::GEPOp::create(cb, loc, ptr, f32, outP, ValueRange{offset});
        func::CallOp::create(
            cb, loc, kMoEShared, TypeRange{},
            ValueRange{xRow, count, c64(h), c64(sharedInter),
                       c64(static_cast<int64_t>(op.getActivation())), sgP, suP, sdP, scaleP,
                       outRow});
      };
      forRowBlocks(b, loc, rows, rows64, kMoERowTile, kMoEParallelRows, shared);
    }
    Value result = bufferization::ToTensorOp::create(b, loc, xType, out, b.getUnitAttr(),
                                                     b.getUnitAttr());
    b.replaceOp(op, result);
    return success();
  }
};

} // namespace

void populateMoELoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<MoELowering>(patterns.getContext());
}

} // namespace xfmr::lowering
