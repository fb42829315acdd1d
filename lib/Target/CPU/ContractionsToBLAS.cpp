//===- ContractionsToBLAS.cpp - f32 matrix products as sgemm calls --------===//
//
// Part of xfmr.
//
// Prefill and batched decode multiply tens to thousands of rows by the same
// weights. The generated loop nest streams each weight row once per k and is
// at memory bandwidth for one row (decode), but it is not register-blocked,
// so with many rows it runs far below the core's FMA throughput. OpenBLAS's
// sgemm is (about 10x on AVX2 at a few hundred rows). This pass keeps both:
// a run-time test picks sgemm when the product is big enough and its operands
// have a layout BLAS accepts, and the original loop otherwise.
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"
#include "xfmr/Target/CPU/Passes.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_CONTRACTIONSTOBLASPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr llvm::StringLiteral kSgemm = "cblas_sgemm";
// CBLAS enumerators (cblas.h).
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

func::FuncOp declareSgemm(ModuleOp module) {
  if (auto f = module.lookupSymbol<func::FuncOp>(kSgemm))
    return f;
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), f32 = Float32Type::get(ctx);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  auto type = FunctionType::get(
      ctx, {i32, i32, i32, i32, i32, i32, f32, ptr, i32, ptr, i32, f32, ptr, i32},
      {});
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), kSgemm, type);
  f.setPrivate();
  return f;
}

/// One operand's base address and strides, read once before the loops.
struct View {
  Value aligned; // i64 byte address of the buffer
  Value offset;  // index, in elements
  SmallVector<Value> sizes, strides;
};

View describe(OpBuilder &b, Location loc, Value memref) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  View v;
  Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  v.aligned = arith::IndexCastOp::create(b, loc, b.getI64Type(), ptr);
  v.offset = meta.getOffset();
  llvm::append_range(v.sizes, meta.getSizes());
  llvm::append_range(v.strides, meta.getStrides());
  return v;
}

struct ContractionsToBLASPass
    : impl::ContractionsToBLASPassBase<ContractionsToBLASPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<std::pair<linalg::GenericOp, Product>> products;
    module.walk([&](linalg::GenericOp g) {
      if (!isa<func::FuncOp>(g->getParentOp()))
        return; // inside a loop: an attention tile
      if (!g.hasPureBufferSemantics())
        return;
      if (auto p = matchProduct(g); p && !p->packedB)
        products.push_back({g, *p});
    });
    if (products.empty())
      return;
    declareSgemm(module);
    for (auto &[g, p] : products)
      rewrite(g, p);
    numCalls += products.size();
  }

  void rewrite(linalg::GenericOp g, const Product &p) {
    OpBuilder b(g);
    Location loc = g.getLoc();
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Value a = g.getDpsInputOperand(0)->get();
    Value bm = g.getDpsInputOperand(1)->get();
    Value c = g.getDpsInitOperand(0)->get();
    View va = describe(b, loc, a), vb = describe(b, loc, bm), vc = describe(b, loc, c);
    auto idx = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    unsigned ra = va.sizes.size(), rb = vb.sizes.size(), rc = vc.sizes.size();
    Value M = vc.sizes[rc - 2], N = vc.sizes[rc - 1];
    Value K = p.a.transposed ? va.sizes[ra - 2] : va.sizes[ra - 1];
    Value lda = va.strides[ra - 2], ldb = vb.strides[rb - 2], ldc = vc.strides[rc - 2];

    // The run-time test: enough rows, unit inner strides, BLAS-valid leading
    // dimensions, and 32-bit extents.
    Value one = idx(1), int32Max = idx(std::numeric_limits<int32_t>::max());
    auto andAll = [&](ArrayRef<Value> cs) {
      Value r = cs.front();
      for (Value x : cs.drop_front())
        r = arith::AndIOp::create(b, loc, r, x);
      return r;
    };
    auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) -> Value {
      return arith::CmpIOp::create(b, loc, pred, x, y);
    };
    using P = arith::CmpIPredicate;
    SmallVector<Value> conds{cmp(P::sge, M, idx(minRows))};
    for (const View *v : {&va, &vb, &vc}) {
      unsigned r = v->sizes.size();
      Value inner = arith::MaxSIOp::create(b, loc, v->sizes[r - 1], one);
      conds.push_back(cmp(P::eq, v->strides[r - 1], one));
      conds.push_back(cmp(P::sge, v->strides[r - 2], inner));
      conds.push_back(cmp(P::sle, v->strides[r - 2], int32Max));
      conds.push_back(cmp(P::sle, v->sizes[r - 2], int32Max));
      conds.push_back(cmp(P::sle, v->sizes[r - 1], int32Max));
    }
    auto ifOp = scf::IfOp::create(b, loc, andAll(conds), /*withElseRegion=*/true);

    // Else: the loop nest as it was.
    b.setInsertionPointToStart(ifOp.elseBlock());
    b.clone(*g.getOperation());

    // Then: one sgemm per outer index.
    b.setInsertionPointToStart(ifOp.thenBlock());
    auto c32 = [&](int32_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, i32, v);
    };
    Value rowMajor = c32(kRowMajor), noTrans = c32(kNoTrans), trans = c32(kTrans);
    Value fone = arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat(1.0f));
    SmallVector<Value> ivs; // per outer loop dim of C, in order
    for (unsigned i = 0; i < p.outer.size(); ++i) {
      auto loop = scf::ForOp::create(b, loc, idx(0), vc.sizes[i], one);
      b.setInsertionPointToStart(loop.getBody());
      ivs.push_back(loop.getInductionVar());
    }
    auto address = [&](const View &v, const OperandLayout &l) -> Value {
      Value off = v.offset;
      for (auto [dim, memDim] : l.outer) {
        unsigned pos = llvm::find(p.outer, dim) - p.outer.begin();
        Value step = arith::MulIOp::create(b, loc, ivs[pos], v.strides[memDim]);
        off = arith::AddIOp::create(b, loc, off, step);
      }
      Value bytes = arith::MulIOp::create(
          b, loc, arith::IndexCastOp::create(b, loc, i64, off),
          arith::ConstantIntOp::create(b, loc, i64, 4));
      Value addr = arith::AddIOp::create(b, loc, v.aligned, bytes);
      return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()),
                                      addr);
    };
    auto to32 = [&](Value v) -> Value {
      return arith::IndexCastOp::create(b, loc, i32, v);
    };
    func::CallOp::create(
        b, loc, kSgemm, TypeRange{},
        ValueRange{rowMajor, p.a.transposed ? trans : noTrans,
                   p.b.transposed ? trans : noTrans, to32(M), to32(N),
                   to32(K), fone, address(va, p.a), to32(lda), address(vb, p.b),
                   to32(ldb), fone, address(vc, p.c), to32(ldc)});
    g.erase();
  }
};

} // namespace
} // namespace xfmr::cpu
