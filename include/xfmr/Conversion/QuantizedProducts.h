//===- QuantizedProducts.h - int8-activation micro-kernel calls -*- C++ -*-===//
//
// Part of xfmr. The quantized product as onnxruntime computes MatMulNBits at
// accuracy_level 4: A's rows quantized to int8 per block at run time, exact
// integer block sums against 4- or 8-bit weights packed at compile time,
// scaled per block. Built for com.microsoft MatMulNBits
// (convert-onnx-to-linalg) and for xfmr.linear on 8-bit !quant.uniform
// weights with `int8_activations` (convert-xfmr-to-linalg).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_CONVERSION_QUANTIZEDPRODUCTS_H
#define XFMR_CONVERSION_QUANTIZEDPRODUCTS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>
#include <vector>

namespace xfmr::lowering {

inline constexpr llvm::StringLiteral kMatmulQ4Q8 = "xfmr_uk_matmul_q4q8";
inline constexpr llvm::StringLiteral kMatmulQ8Q8 = "xfmr_uk_matmul_q8q8";

/// Constant weights packed for one micro-kernel.
struct KernelWeights {
  llvm::StringRef kernel;      // xfmr_uk_matmul_q4q8 or xfmr_uk_matmul_q8q8
  int64_t blk;                 // values of K per block of the kernel and of A's quantization
  std::vector<char> w, sw, zw; // zw empty: no zero points (f32 for q4q8, uint8 for q8q8)
};

/// 8-bit weights in xfmr_uk_pack_q8's layout from `bytes` ([N, ld] uint8,
/// row n holding column n's K values q + zp), `scales` ([N, K / blk] f32)
/// and `zeros` ([N, K / blk] uint8; empty: 128, MatMulNBits' default).
/// K must be a whole number of blocks.
KernelWeights packQ8Weights(llvm::ArrayRef<char> bytes, int64_t ld, llvm::ArrayRef<char> scales,
                            llvm::ArrayRef<char> zeros, int64_t n, int64_t k, int64_t blk);

/// `a` ([..., K] f32, K static) times the packed weights (`n` columns):
/// A's rows quantized to int8 per block of kw.blk (xfmr_uk_quantize_rows;
/// K need not be a whole number of blocks: the weights then hold the last
/// block padded, as MatMulNBits stores it), then kw.kernel over columnTile(K) columns per call, in a loop
/// xfmr-parallelize-loops may split across threads. Returns the f32
/// product of type `accType` ([..., N]; `sizes` its dims). `name` prefixes
/// the packed constants' resource names.
mlir::Value int8ActivationProduct(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *anchor,
                                  mlir::Value a, const KernelWeights &kw, int64_t k, int64_t n,
                                  mlir::RankedTensorType accType,
                                  llvm::ArrayRef<mlir::OpFoldResult> sizes, llvm::StringRef name);

} // namespace xfmr::lowering

#endif // XFMR_CONVERSION_QUANTIZEDPRODUCTS_H
