//===- TileBuilder.h - FlashAttention tile steps on tensors -----*- C++ -*-===//
//
// Part of xfmr. The pieces of FlashAttention's online softmax, on one
// query tile [tq, D] and one key/value tile [tk, D] / [tk, Dv], as linalg
// ops on dynamically sized tensors. Dense attention (Attention.cpp) and
// paged attention (PagedAttention.cpp) differ only in where the tiles come
// from and how scores are masked; both are built from these. Accumulation
// is f32 whatever the operands' type.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOLINALG_TILEBUILDER_H
#define XFMR_LIB_CONVERSION_XFMRTOLINALG_TILEBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace xfmr::lowering {

/// Running state of one query tile: row maxima m [tq], row sums l [tq],
/// unnormalized output acc [tq, Dv], all f32.
struct SoftmaxState {
  mlir::Value max, sum, acc;
};

/// A linalg.generic with one result; `body` gets the block arguments and
/// returns the value to yield.
using GenericBody =
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;
mlir::Value generic(mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange ins,
                    mlir::Value init, llvm::ArrayRef<mlir::AffineMap> maps,
                    llvm::ArrayRef<mlir::utils::IteratorType> iterators, GenericBody body);
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<mlir::OpFoldResult> sizes, mlir::Type element);
mlir::Value filled(mlir::OpBuilder &b, mlir::Location loc,
                   llvm::ArrayRef<mlir::OpFoldResult> sizes, double value);

/// m = -inf, l = 0, acc = 0 for `rows` query rows and `dv` value features.
SoftmaxState initialState(mlir::OpBuilder &b, mlir::Location loc, mlir::OpFoldResult rows,
                          mlir::OpFoldResult dv);

/// Scores [tq, tk] = scale * q · kᵀ, then `mask(b, loc, i, j, score)` per
/// element (i, j index the tile) returns the masked score (-inf to drop).
using MaskFn = llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                              mlir::Value i, mlir::Value j,
                                              mlir::Value score)>;
/// A quantized key tile (i8 or f8E4M3FN) comes with its rows' scales
/// `kScales` [tk]: the product widens k in registers (KVQuant.h) and the
/// scores are multiplied by the scales.
mlir::Value scoreTile(mlir::OpBuilder &b, mlir::Location loc, mlir::Value q, mlir::Value k,
                      double scale, MaskFn mask, mlir::Value kScales = nullptr);

/// `cap * tanh(score / cap)` (attention logit soft-capping) when `cap` is
/// set, else `score`; for a MaskFn, before the mask applies.
mlir::Value softcapScore(mlir::OpBuilder &b, mlir::Location loc, mlir::Value score,
                         std::optional<llvm::APFloat> cap);

/// The sinks of an attention op as an f32 constant tensor [Hq] (null
/// without sinks).
mlir::Value sinksConstant(mlir::OpBuilder &b, mlir::Location loc,
                          std::optional<llvm::ArrayRef<float>> sinks);

/// Attention sinks (gpt-oss): a logit per query head that joins every row's
/// softmax without a value. The state starts as if that key had been folded
/// in: m = the row's sink, l = 1, acc = 0. `sinkOfRow(b, loc, i)` is row i's
/// sink (f32).
using RowFn = llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::Value)>;
SoftmaxState withSinks(mlir::OpBuilder &b, mlir::Location loc, SoftmaxState state,
                       RowFn sinkOfRow);

/// One online-softmax step: folds the scores [tq, tk] and values [tk, Dv]
/// into the state.
/// A quantized value tile comes with its rows' scales `vScales` [tk], folded
/// into the probabilities before the product.
SoftmaxState softmaxStep(mlir::OpBuilder &b, mlir::Location loc, const SoftmaxState &state,
                         mlir::Value scores, mlir::Value v, mlir::Value vScales = nullptr);

/// acc / l as a [tq, Dv] tensor of `element` (rows that saw no key are 0).
mlir::Value finishTile(mlir::OpBuilder &b, mlir::Location loc, const SoftmaxState &state,
                       mlir::Type element);

/// The score with -inf where `key` > `lastVisible` (index values): the causal
/// rule of both kernels, with their own notion of the last visible key.
mlir::Value hideAfter(mlir::OpBuilder &b, mlir::Location loc, mlir::Value key,
                      mlir::Value lastVisible, mlir::Value score);

/// The buffer of tensor `t` for a fused kernel's op on buffers: a read-only
/// `bufferization.to_buffer` with a fully dynamic strided layout, so that
/// views are read in place.
mlir::Value readOnlyBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Value t);

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_XFMRTOLINALG_TILEBUILDER_H
