//===- QuantizedProducts.cpp - int8-activation micro-kernel calls ---------===//
//
// Part of xfmr. See include/xfmr/Conversion/QuantizedProducts.h.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/QuantizedProducts.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "runtime/ukernels/QuantizedMatmul.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <string>

using namespace mlir;

namespace xfmr::lowering {
namespace {

/// Columns per micro-kernel call: the unit xfmr-parallelize-loops splits
/// across threads. Each call reads all of A's rows once (a prefill's A is
/// rows * K bytes, megabytes, from L3), so a wide K takes 128 columns per
/// call, halving that stream: [2048, 2816] x [2816, 1024] on 2 threads ran
/// at 400 against 315 G multiply-adds/s (medians of 8 alternated runs); at
/// K = 1024 (A of 2 MB, mostly in L2) 64 and 128 are alike.
int64_t columnTile(int64_t k) { return k >= 2048 ? 128 : 64; }

constexpr llvm::StringLiteral kQuantizeRows = "xfmr_uk_quantize_rows";
/// Rows of A per call of kQuantizeRows, and the fewest rows for which the
/// calls run on several cores (fewer, as in decode steps, is one call).
constexpr int64_t kQuantizeRowTile = 32, kQuantizeParallelRows = 64;

/// A's rows quantized to int8 per block of `blk`, as onnxruntime's MLAS
/// does (QuantizeARow_CompInt8; runtime/ukernels/QuantizeRows.c):
/// {q [rows, Kp] i8, scale, sum [rows, blocks]} as buffers, Kp = blocks *
/// blk = K rounded up to a whole block (a partial last block: its missing
/// values 0). The kernel reads
/// a copy of A (a to_buffer of A itself would let a later in-place write
/// reuse A's buffer, see narrowProduct in XfmrToLinalg/MLP.cpp); from
/// kQuantizeParallelRows rows on, blocks of kQuantizeRowTile rows in a loop
/// xfmr-parallelize-loops splits across threads.
struct QuantizedRows {
  Value q, scale, sum;
};
QuantizedRows quantizeRows(OpBuilder &b, Location loc, Operation *anchor, Value a2, int64_t k,
                           int64_t blk) {
  MLIRContext *ctx = b.getContext();
  auto aType = cast<RankedTensorType>(a2.getType());
  int64_t blocks = llvm::divideCeil(k, blk), kp = blocks * blk;
  Type f32 = b.getF32Type(), i8 = b.getI8Type(), i32 = b.getI32Type(), i64 = b.getI64Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  declareKernel(b, anchor, kQuantizeRows, {ptr, i64, i64, i64, ptr, ptr, ptr});
  Value rows = tensor::DimOp::create(b, loc, a2, 0);
  SmallVector<Value> dyn;
  if (aType.isDynamicDim(0))
    dyn.push_back(rows);
  Value a = kernelInput(b, loc, a2);
  auto alloc = [&](int64_t cols, Type e) -> Value {
    return memref::AllocOp::create(b, loc, MemRefType::get({aType.getDimSize(0), cols}, e), dyn);
  };
  QuantizedRows out{alloc(kp, i8), alloc(blocks, f32), alloc(blocks, i32)};
  auto c64 = [&](int64_t v) -> Value { return arith::ConstantIntOp::create(b, loc, i64, v); };
  Value aP = addressOf(b, loc, a), qP = addressOf(b, loc, out.q);
  Value sP = addressOf(b, loc, out.scale), sumP = addressOf(b, loc, out.sum);
  // Rows [r0, r0 + count) of A into the outputs.
  auto call = [&](OpBuilder &cb, Value r0, Value count) {
    Value aRow = LLVM::GEPOp::create(cb, loc, ptr, f32, aP,
                                     ValueRange{arith::MulIOp::create(cb, loc, r0, c64(k))});
    Value qRow = LLVM::GEPOp::create(cb, loc, ptr, i8, qP,
                                     ValueRange{arith::MulIOp::create(cb, loc, r0, c64(kp))});
    Value bRow = arith::MulIOp::create(cb, loc, r0, c64(blocks));
    Value sRow = LLVM::GEPOp::create(cb, loc, ptr, f32, sP, ValueRange{bRow});
    Value sumRow = LLVM::GEPOp::create(cb, loc, ptr, i32, sumP, ValueRange{bRow});
    func::CallOp::create(cb, loc, kQuantizeRows, TypeRange{},
                         ValueRange{aRow, count, c64(k), c64(blk), qRow, sRow, sumRow});
  };
  Value rows64 = arith::IndexCastOp::create(b, loc, i64, rows);
  forRowBlocks(b, loc, rows, rows64, kQuantizeRowTile, kQuantizeParallelRows, call);
  return out;
}

} // namespace

KernelWeights packQ8Weights(ArrayRef<char> bytes, int64_t ld, ArrayRef<char> scales,
                            ArrayRef<char> zeros, int64_t n, int64_t k, int64_t blk) {
  int64_t blocks = k / blk;
  int64_t groups = (n + XFMR_UK_Q8_COLUMNS - 1) / XFMR_UK_Q8_COLUMNS;
  int64_t perGroup = groups * XFMR_UK_Q8_COLUMNS * blocks;
  KernelWeights kw{kMatmulQ8Q8, blk, std::vector<char>(xfmr_uk_packed_q8_bytes(n, k, blk)),
                   std::vector<char>(perGroup * sizeof(float)),
                   std::vector<char>(zeros.empty() ? 0 : perGroup)};
  xfmr_uk_pack_q8(reinterpret_cast<const uint8_t *>(bytes.data()), ld,
                  reinterpret_cast<const float *>(scales.data()),
                  zeros.empty() ? nullptr : reinterpret_cast<const uint8_t *>(zeros.data()), n, k,
                  blk, reinterpret_cast<uint8_t *>(kw.w.data()),
                  reinterpret_cast<float *>(kw.sw.data()),
                  kw.zw.empty() ? nullptr : reinterpret_cast<uint8_t *>(kw.zw.data()));
  return kw;
}

Value int8ActivationProduct(OpBuilder &b, Location loc, Operation *anchor, Value a,
                            const KernelWeights &kw, int64_t k, int64_t n,
                            RankedTensorType accType, ArrayRef<OpFoldResult> sizes,
                            StringRef name) {
  auto aType = cast<RankedTensorType>(a.getType());
  MLIRContext *ctx = b.getContext();
  Type i8 = IntegerType::get(ctx, 8), i64 = b.getI64Type();
  Type f32 = b.getF32Type(), ptr = LLVM::LLVMPointerType::get(ctx);
  declareKernel(b, anchor, kw.kernel,
                {ptr, ptr, ptr, i64, i64, i64, ptr, ptr, ptr, i64, i64, ptr, i64});

  // A [..., K] -> [rows, K].
  int64_t rank = aType.getRank();
  ReassociationIndices lead;
  for (int64_t d = 0; d + 1 < rank; ++d)
    lead.push_back(d);
  SmallVector<ReassociationIndices> reassoc{lead, {rank - 1}};
  Value a2 = tensor::CollapseShapeOp::create(b, loc, a, reassoc);
  Value rows = tensor::DimOp::create(b, loc, a2, 0);
  auto buffer = [&](Value t) {
    auto type = cast<RankedTensorType>(t.getType());
    return bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), t, /*read_only=*/true);
  };

  QuantizedRows rowsQ = quantizeRows(b, loc, anchor, a2, k, kw.blk);
  // A packed array as a 1-D constant buffer of `element`.
  auto packed = [&](const std::vector<char> &bytes, Type element, const char *suffix) -> Value {
    int64_t count = bytes.size() / (element.getIntOrFloatBitWidth() / 8);
    return buffer(constantTensor(b, loc, bytes, {count}, element, (name + suffix).str()));
  };
  Value w = packed(kw.w, i8, "_weights"), sw = packed(kw.sw, f32, "_scales");
  // Zero points: f32 for the 4-bit kernel (float offsets), uint8 for the 8-bit one.
  Value zp = kw.zw.empty() ? Value() : packed(kw.zw, kw.kernel == kMatmulQ4Q8 ? f32 : i8, "_zeros");
  Value aq = rowsQ.q, sa = rowsQ.scale, suma = rowsQ.sum;
  // The product [..., N] (identity layout: row m of [rows, N] at m * N).
  SmallVector<Value> outDims;
  for (auto [d, size] : llvm::enumerate(sizes))
    if (accType.isDynamicDim(d))
      outDims.push_back(getValueOrCreateConstantIndexOp(b, loc, size));
  Value out = memref::AllocOp::create(b, loc, MemRefType::get(accType.getShape(), f32), outDims);

  auto c64 = [&](int64_t v) -> Value { return arith::ConstantIntOp::create(b, loc, i64, v); };
  Value rows64 = arith::IndexCastOp::create(b, loc, i64, rows);
  Value aqP = addressOf(b, loc, aq), saP = addressOf(b, loc, sa), sumP = addressOf(b, loc, suma);
  Value wP = addressOf(b, loc, w), swP = addressOf(b, loc, sw), outP = addressOf(b, loc, out);
  Value zpP = zp ? addressOf(b, loc, zp) : LLVM::ZeroOp::create(b, loc, ptr).getResult();
  int64_t tile = columnTile(k);
  // The kernels take A's quantized rows with K rounded up to whole blocks.
  int64_t kp = llvm::divideCeil(k, kw.blk) * kw.blk;
  int64_t tiles = (n + tile - 1) / tile;
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  auto loop = scf::ForOp::create(b, loc, idx(0), idx(tiles), idx(1));
  loop->setAttr("xfmr.independent_iterations", b.getUnitAttr());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = arith::IndexCastOp::create(b, loc, i64, loop.getInductionVar());
    Value n0 = arith::MulIOp::create(b, loc, t, c64(tile));
    Value n1 = arith::MinSIOp::create(b, loc, arith::AddIOp::create(b, loc, n0, c64(tile)),
                                      c64(n));
    func::CallOp::create(b, loc, kw.kernel, TypeRange{},
                         ValueRange{aqP, saP, sumP, rows64, c64(kp), c64(kw.blk), wP, swP, zpP,
                                    n0, n1, outP, c64(n)});
  }
  return bufferization::ToTensorOp::create(b, loc, accType, out, b.getUnitAttr(),
                                           b.getUnitAttr());
}

} // namespace xfmr::lowering
