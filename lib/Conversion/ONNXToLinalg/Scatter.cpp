//===- Scatter.cpp - data-dependent placement: Scatter*, NonZero, TopK ----===//
//
// Part of xfmr.
//
// ScatterND and ScatterElements become an scf.for over the updates that
// inserts into the running tensor (bufferized in place); NonZero counts, then
// fills its [rank, count] result in one loop; TopK ranks every element of a
// row against the others (ties: lower index first) and picks ranks 0..k-1,
// O(n^2) per row, meant for routing-sized rows (MoE experts), not vocabularies.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {

Value combine(OpBuilder &b, Location loc, StringRef reduction, Value cur, Value upd,
              bool uns) {
  bool fp = isa<FloatType>(cur.getType());
  if (reduction == "add")
    return fp ? arith::AddFOp::create(b, loc, cur, upd).getResult()
              : arith::AddIOp::create(b, loc, cur, upd).getResult();
  if (reduction == "mul")
    return fp ? arith::MulFOp::create(b, loc, cur, upd).getResult()
              : arith::MulIOp::create(b, loc, cur, upd).getResult();
  if (reduction == "max")
    return fp ? arith::MaximumFOp::create(b, loc, cur, upd).getResult()
           : uns ? arith::MaxUIOp::create(b, loc, cur, upd).getResult()
                 : arith::MaxSIOp::create(b, loc, cur, upd).getResult();
  if (reduction == "min")
    return fp ? arith::MinimumFOp::create(b, loc, cur, upd).getResult()
           : uns ? arith::MinUIOp::create(b, loc, cur, upd).getResult()
                 : arith::MinSIOp::create(b, loc, cur, upd).getResult();
  return upd;
}

Value product(OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Value n = indexConstant(b, loc, 1);
  for (Value x : v)
    n = arith::MulIOp::create(b, loc, n, x);
  return n;
}

/// Row-major coordinates of linear index `lin` in a tensor of extents `dims`.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value lin,
                               ArrayRef<Value> dims) {
  SmallVector<Value> out(dims.size());
  for (int64_t d = dims.size() - 1; d >= 0; --d) {
    out[d] = arith::RemUIOp::create(b, loc, lin, dims[d]);
    lin = arith::DivUIOp::create(b, loc, lin, dims[d]);
  }
  return out;
}

SmallVector<Value> allDims(OpBuilder &b, Location loc, Value t) {
  SmallVector<Value> d;
  for (int64_t i = 0; i < cast<RankedTensorType>(t.getType()).getRank(); ++i)
    d.push_back(dimValue(b, loc, t, i));
  return d;
}

struct ScatterNDLowering : ONNXOpLowering<onnx::ScatterNDOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ScatterNDOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
ScatterNDLowering::lower(onnx::ScatterNDOp op, OpAdaptor adaptor,
                         ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value data = operands[0], indices = operands[1], updates = operands[2];
  auto dType = cast<RankedTensorType>(data.getType());
  auto iType = cast<RankedTensorType>(indices.getType());
  int64_t r = dType.getRank(), q = iType.getRank();
  if (q == 0 || iType.isDynamicDim(q - 1))
    return unsupported(op, "indices without a static last dim");
  int64_t k = iType.getDimSize(q - 1);
  if (k > r)
    return unsupported(op, "index tuples longer than the data rank");
  StringRef reduction = op.getReduction();
  bool uns = isUnsignedInt(elementType(op->getOperand(0)));
  Type elem = dType.getElementType();
  SmallVector<Value> dataDims = allDims(rewriter, loc, data);
  SmallVector<OpFoldResult> dataSizes = mixedSizes(rewriter, loc, data);
  SmallVector<Value> iDims = allDims(rewriter, loc, indices);
  Value count = product(rewriter, loc, ArrayRef<Value>(iDims).drop_back());
  // indices -> [T, k]; updates -> [T, data dims k..r-1].
  Value idx2 = reshapeTo(rewriter, loc, indices,
                         RankedTensorType::get({ShapedType::kDynamic, k},
                                               iType.getElementType()),
                         {count, indexConstant(rewriter, loc, k)});
  SmallVector<int64_t> sliceShape(dType.getShape().drop_front(k));
  SmallVector<Value> updSizes{count};
  SmallVector<int64_t> upd2Shape{ShapedType::kDynamic};
  for (int64_t d = k; d < r; ++d) {
    updSizes.push_back(dataDims[d]);
    upd2Shape.push_back(dType.getDimSize(d));
  }
  Value upd2 = reshapeTo(rewriter, loc, updates, RankedTensorType::get(upd2Shape, elem),
                         updSizes);
  auto sliceType = RankedTensorType::get(sliceShape, elem);
  auto loop = scf::ForOp::create(
      rewriter, loc, indexConstant(rewriter, loc, 0), count, indexConstant(rewriter, loc, 1),
      ValueRange{data},
      [&](OpBuilder &b, Location l, Value t, ValueRange acc) {
        SmallVector<OpFoldResult> offsets, sizes, strides;
        for (int64_t j = 0; j < k; ++j) {
          Value i = tensor::ExtractOp::create(b, l, idx2, ValueRange{t, indexConstant(b, l, j)});
          offsets.push_back(checkedIndex(b, l, i, dataDims[j], false, "ScatterND"));
          sizes.push_back(b.getIndexAttr(1));
        }
        for (int64_t d = k; d < r; ++d) {
          offsets.push_back(b.getIndexAttr(0));
          sizes.push_back(dataSizes[d]);
        }
        strides.assign(r, b.getIndexAttr(1));
        SmallVector<OpFoldResult> uOff{t}, uSizes{b.getIndexAttr(1)};
        for (int64_t d = k; d < r; ++d) {
          uOff.push_back(b.getIndexAttr(0));
          uSizes.push_back(dataSizes[d]);
        }
        SmallVector<OpFoldResult> uStrides(r - k + 1, b.getIndexAttr(1));
        Value slice = tensor::ExtractSliceOp::create(b, l, sliceType, upd2, uOff,
                                                     uSizes, uStrides);
        if (reduction != "none") {
          Value cur = tensor::ExtractSliceOp::create(b, l, sliceType, acc[0], offsets,
                                                     sizes, strides);
          SmallVector<OpFoldResult> sl(sizes.begin() + k, sizes.end());
          slice = buildElementwise(
              b, l, sliceType, ValueRange{cur, slice},
              [&](OpBuilder &nb, Location nl, ValueRange a) {
                return combine(nb, nl, reduction, a[0], a[1], uns);
              },
              ArrayRef<OpFoldResult>(sl));
        }
        Value next = tensor::InsertSliceOp::create(b, l, slice, acc[0], offsets,
                                                   sizes, strides);
        scf::YieldOp::create(b, l, next);
      });
  Value result = loop.getResult(0);
  if (result.getType() != resultType(op))
    result = tensor::CastOp::create(rewriter, loc, resultType(op), result);
  rewriter.replaceOp(op, result);
  return success();
}

struct ScatterElementsLowering : ONNXOpLowering<onnx::ScatterElementsOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ScatterElementsOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
ScatterElementsLowering::lower(onnx::ScatterElementsOp op, OpAdaptor adaptor,
                               ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value data = operands[0], indices = operands[1], updates = operands[2];
  int64_t r = cast<RankedTensorType>(data.getType()).getRank();
  if (cast<RankedTensorType>(indices.getType()).getRank() != r)
    return unsupported(op, "indices rank differs from data rank");
  int64_t axisAttr = op.getAxis();
  auto axis = normalizeAxis(axisAttr, r);
  if (!axis)
    return unsupported(op, "axis out of range");
  StringRef reduction = op.getReduction();
  bool uns = isUnsignedInt(elementType(op->getOperand(0)));
  SmallVector<Value> iDims = allDims(rewriter, loc, indices);
  Value axisDim = dimValue(rewriter, loc, data, *axis);
  int64_t ax = *axis;
  auto loop = scf::ForOp::create(
      rewriter, loc, indexConstant(rewriter, loc, 0), product(rewriter, loc, iDims),
      indexConstant(rewriter, loc, 1), ValueRange{data},
      [&](OpBuilder &b, Location l, Value lin, ValueRange acc) {
        SmallVector<Value> p = delinearize(b, l, lin, iDims);
        Value i = tensor::ExtractOp::create(b, l, indices, p);
        Value u = tensor::ExtractOp::create(b, l, updates, p);
        SmallVector<Value> at = p;
        at[ax] = checkedIndex(b, l, i, axisDim, false, "ScatterElements");
        if (reduction != "none")
          u = combine(b, l, reduction, tensor::ExtractOp::create(b, l, acc[0], at), u,
                      uns);
        scf::YieldOp::create(b, l,
                             tensor::InsertOp::create(b, l, u, acc[0], at).getResult());
      });
  Value result = loop.getResult(0);
  if (result.getType() != resultType(op))
    result = tensor::CastOp::create(rewriter, loc, resultType(op), result);
  rewriter.replaceOp(op, result);
  return success();
}

struct NonZeroLowering : ONNXOpLowering<onnx::NonZeroOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::NonZeroOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
NonZeroLowering::lower(onnx::NonZeroOp op, OpAdaptor adaptor,
                       ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t r = xType.getRank();
  if (r == 0)
    return unsupported(op, "scalar input");
  Type elem = xType.getElementType();
  auto isNonZero = [&](OpBuilder &b, Location l, Value v) -> Value {
    if (isa<FloatType>(elem))
      return arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, v,
                                   scalarConstant(b, l, elem, 0));
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, v,
                                 scalarConstant(b, l, elem, 0));
  };
  SmallVector<Value> dims = allDims(rewriter, loc, x);
  Value total = product(rewriter, loc, dims);
  // Pass 1: count.
  auto countLoop = scf::ForOp::create(
      rewriter, loc, indexConstant(rewriter, loc, 0), total, indexConstant(rewriter, loc, 1),
      ValueRange{indexConstant(rewriter, loc, 0)},
      [&](OpBuilder &b, Location l, Value lin, ValueRange acc) {
        Value v = tensor::ExtractOp::create(b, l, x, delinearize(b, l, lin, dims));
        Value one = arith::SelectOp::create(b, l, isNonZero(b, l, v), indexConstant(b, l, 1),
                                            indexConstant(b, l, 0));
        scf::YieldOp::create(b, l, arith::AddIOp::create(b, l, acc[0], one).getResult());
      });
  Value nnz = countLoop.getResult(0);
  RankedTensorType type = resultType(op);
  Value init = emptyTensor(rewriter, loc, type,
                           {rewriter.getIndexAttr(r), OpFoldResult(nnz)});
  // Pass 2: fill the coordinates column by column.
  auto fillLoop = scf::ForOp::create(
      rewriter, loc, indexConstant(rewriter, loc, 0), total, indexConstant(rewriter, loc, 1),
      ValueRange{init, indexConstant(rewriter, loc, 0)},
      [&](OpBuilder &b, Location l, Value lin, ValueRange acc) {
        SmallVector<Value> p = delinearize(b, l, lin, dims);
        Value v = tensor::ExtractOp::create(b, l, x, p);
        auto ifOp = scf::IfOp::create(
            b, l, isNonZero(b, l, v),
            [&](OpBuilder &tb, Location tl) {
              Value t = acc[0];
              for (int64_t d = 0; d < r; ++d) {
                Value c = arith::IndexCastOp::create(tb, tl, tb.getI64Type(), p[d]);
                t = tensor::InsertOp::create(tb, tl, c, t,
                                             ValueRange{indexConstant(tb, tl, d), acc[1]});
              }
              Value n = arith::AddIOp::create(tb, tl, acc[1], indexConstant(tb, tl, 1));
              scf::YieldOp::create(tb, tl, ValueRange{t, n});
            },
            [&](OpBuilder &eb, Location el) {
              scf::YieldOp::create(eb, el, ValueRange{acc[0], acc[1]});
            });
        scf::YieldOp::create(b, l, ifOp.getResults());
      });
  rewriter.replaceOp(op, fillLoop.getResult(0));
  return success();
}

struct TopKLowering : ONNXOpLowering<onnx::TopKOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::TopKOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult TopKLowering::lower(onnx::TopKOp op, OpAdaptor adaptor,
                                  ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t r = xType.getRank();
  int64_t axisAttr = op.getAxis();
  auto axis = normalizeAxis(axisAttr, r);
  if (!axis || r == 0)
    return unsupported(op, "axis out of range");
  bool largest = op.getLargest();
  bool uns = isUnsignedInt(elementType(op->getOperand(0)));
  Type elem = xType.getElementType();
  MLIRContext *ctx = rewriter.getContext();
  int64_t ax = *axis;
  Value kv = tensor::ExtractOp::create(rewriter, loc, operands[1],
                                       ValueRange{indexConstant(rewriter, loc, 0)});
  Value k = toIndex(rewriter, loc, kv);
  Value n = dimValue(rewriter, loc, x, ax);
  runtimeCheck(rewriter, loc,
               arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ule, k, n),
               "TopK: k larger than the axis");
  auto before = [&](OpBuilder &b, Location l, Value xj, Value xi, Value j,
                    Value i) -> Value {
    Value strict, eq;
    if (isa<FloatType>(elem)) {
      strict = arith::CmpFOp::create(
          b, l, largest ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT, xj, xi);
      eq = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, xj, xi);
    } else {
      using P = arith::CmpIPredicate;
      strict = arith::CmpIOp::create(
          b, l, largest ? (uns ? P::ugt : P::sgt) : (uns ? P::ult : P::slt), xj, xi);
      eq = arith::CmpIOp::create(b, l, P::eq, xj, xi);
    }
    Value lower = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, j, i);
    return arith::OrIOp::create(b, l, strict, arith::AndIOp::create(b, l, eq, lower));
  };
  // rank[i] = #{j : x[j] comes before x[i]} along the axis.
  int64_t loops = r + 1;
  SmallVector<AffineExpr> idExprs, jExprs;
  for (int64_t d = 0; d < r; ++d) {
    idExprs.push_back(getAffineDimExpr(d, ctx));
    jExprs.push_back(getAffineDimExpr(d == ax ? r : d, ctx));
  }
  auto rankType = RankedTensorType::get(xType.getShape(), rewriter.getIndexType());
  Value rankInit = filledTensor(rewriter, loc, rankType, mixedSizes(rewriter, loc, x),
                                indexConstant(rewriter, loc, 0));
  SmallVector<utils::IteratorType> iters(r, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  Value ranks =
      linalg::GenericOp::create(
          rewriter, loc, TypeRange{rankType}, ValueRange{x, x}, ValueRange{rankInit},
          SmallVector<AffineMap>{AffineMap::get(loops, 0, idExprs, ctx),
                                 AffineMap::get(loops, 0, jExprs, ctx),
                                 AffineMap::get(loops, 0, idExprs, ctx)},
          iters,
          [&](OpBuilder &b, Location l, ValueRange a) {
            Value i = linalg::IndexOp::create(b, l, ax);
            Value j = linalg::IndexOp::create(b, l, r);
            Value inc = arith::SelectOp::create(b, l, before(b, l, a[1], a[0], j, i),
                                                indexConstant(b, l, 1), indexConstant(b, l, 0));
            linalg::YieldOp::create(b, l, arith::AddIOp::create(b, l, a[2], inc).getResult());
          })
          .getResult(0);
  // Output position p takes the element of rank p.
  RankedTensorType vType = resultType(op, 0), iType = resultType(op, 1);
  SmallVector<OpFoldResult> sizes = mixedSizes(rewriter, loc, x);
  sizes[ax] = k;
  Value vInit = filledTensor(rewriter, loc, vType, sizes, scalarConstant(rewriter, loc, elem, 0));
  Value iInit = filledTensor(rewriter, loc, iType, sizes,
                             scalarConstant(rewriter, loc, rewriter.getI64Type(), 0));
  auto pick = linalg::GenericOp::create(
      rewriter, loc, TypeRange{vType, iType}, ValueRange{x, ranks},
      ValueRange{vInit, iInit},
      SmallVector<AffineMap>{AffineMap::get(loops, 0, jExprs, ctx),
                             AffineMap::get(loops, 0, jExprs, ctx),
                             AffineMap::get(loops, 0, idExprs, ctx),
                             AffineMap::get(loops, 0, idExprs, ctx)},
      iters, [&](OpBuilder &b, Location l, ValueRange a) {
        Value p = linalg::IndexOp::create(b, l, ax);
        Value i = linalg::IndexOp::create(b, l, r);
        Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, a[1], p);
        Value i64 = arith::IndexCastOp::create(b, l, b.getI64Type(), i);
        linalg::YieldOp::create(
            b, l,
            ValueRange{arith::SelectOp::create(b, l, hit, a[0], a[2]),
                       arith::SelectOp::create(b, l, hit, i64, a[3])});
      });
  rewriter.replaceOp(op, pick.getResults());
  return success();
}

} // namespace

void populateScatterPatterns(RewritePatternSet &patterns,
                             const TypeConverter &converter, UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<ScatterNDLowering>(converter, ctx, log);
  patterns.add<ScatterElementsLowering>(converter, ctx, log);
  patterns.add<NonZeroLowering>(converter, ctx, log);
  patterns.add<TopKLowering>(converter, ctx, log);
}

} // namespace xfmr::lowering
