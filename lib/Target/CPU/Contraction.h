//===- Contraction.h - f32 matrix products in bufferized linalg -*- C++ -*-===//
//
// Part of xfmr. Recognizes `C[outer..., m, n] += A[.., m, k] * B[.., k, n]`
// among linalg.generic ops on memrefs (A and B possibly transposed, the
// outer dims shared or broadcast), for the passes that replace such products
// by faster code: xfmr-tile-contractions and xfmr-contractions-to-blas.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_TARGET_CPU_CONTRACTION_H
#define XFMR_LIB_TARGET_CPU_CONTRACTION_H

#include "xfmr/runtime/WeightLayout.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace xfmr::cpu {

/// How one operand is laid out: which of its memref dims are outer loop
/// dims, and whether its two innermost dims are swapped (transposed).
struct OperandLayout {
  llvm::SmallVector<std::pair<unsigned, unsigned>> outer; // (loop dim, memref dim)
  bool transposed = false;
};

struct Product {
  unsigned m, n, k;
  llvm::SmallVector<unsigned> outer; // C's leading loop dims, outermost first
  OperandLayout a, b, c;
  /// B is a constant packed by xfmr-pack-weights: [N / 16, K, 16], read
  /// through panelMap (b's layout is then empty).
  bool packedB = false;
  /// B holds integers of at most 8 bits that the body widens (sitofp):
  /// quantized weights before their scales (only with allowIntegerB).
  bool integerB = false;
};

/// Columns per panel of a packed weight matrix: two 8-float AVX registers
/// (the runtime packs the same layout at load time, WeightLayout.h).
constexpr int64_t kPanelWidth = rt::kPanelWidth;

/// (loops) -> (n floordiv 16, k, n mod 16): B[k, n] of a packed matrix.
mlir::AffineMap panelMap(mlir::MLIRContext *ctx, unsigned numDims, unsigned k, unsigned n);

/// Calls `chunk` with consecutive pieces of Bp [N / 16, K, 16], Bp[p, k, :]
/// being B[k, 16p : 16p + 16] of the row-major B [K, N] in `b`
/// (`elemBytes` per value): the panel layout, a group of 64 panels at a
/// time (B is read row by row, each byte once), never the whole matrix.
void forEachPanelChunk(llvm::ArrayRef<char> b, int64_t k, int64_t n, int64_t elemBytes,
                       llvm::function_ref<void(llvm::ArrayRef<char>)> chunk);

/// Whether `pack` is the panel packing xfmr-pack-weights leaves for
/// xfmr-externalize-weights to write: [K, N] -> [N / 16, K, 16], no padding.
bool isPanelPack(mlir::linalg::PackOp pack);

/// Indices of element (first, second) of an unpacked operand laid out as
/// `l` (rank `rank`), `first` being its row in the product's terms (m for A
/// and C, k for B) and `outerIvs` the values of `p.outer`'s loop dims.
/// Creates no ops.
llvm::SmallVector<mlir::Value> operandIndices(const Product &p, const OperandLayout &l,
                                              unsigned rank, mlir::ValueRange outerIvs,
                                              mlir::Value first, mlir::Value second);

/// The product `g` computes, if it is an f32 generic (on tensors or on
/// memrefs) whose body is exactly `out + in0 * in1` and whose result is not
/// transposed; with `allowIntegerB` also `out + in0 * sitofp(in1)` with B of
/// signless integers of at most 8 bits (Product::integerB).
std::optional<Product> matchProduct(mlir::linalg::GenericOp g, bool allowIntegerB = false);

/// Whether memref `v`'s innermost dim is statically contiguous (what
/// vector.load along it needs).
bool unitInnerStride(mlir::Value v);

/// Whether `g` (a product `p` inside a loop) is C[i, j] += A[i, d] * B[j, d]
/// on 2-d memrefs with A and B contiguous along d and d a static multiple of
/// 16: what tileDots takes (DotTiles.cpp).
bool canTileDots(mlir::linalg::GenericOp g, const Product &p);
/// Replaces `g` by 4 x 4 tiles of 16-lane dot products (DotTiles.cpp).
void tileDots(mlir::OpBuilder &b, mlir::linalg::GenericOp g, const Product &p);

} // namespace xfmr::cpu

#endif // XFMR_LIB_TARGET_CPU_CONTRACTION_H
