//===- PipelineStages.cpp - one stage of a pipeline-parallel model --------===//
//
// Part of xfmr.
//
// Pipeline parallelism over M stages, decided on the paged step function:
// stage s keeps layers [s L / M, (s + 1) L / M). What crosses a stage
// boundary is the residual stream entering the next stage's first layer,
// [1, T, hidden]: after the previous layer's attention, the one value that
// everything later reads of the layers before (Cuts::residualEntering).
// The stage's function starts from an xfmr.stage_receive of it (s > 0), ends
// with an xfmr.stage_send of the next one (s < M - 1), and returns the logits
// the last stage broadcasts, so that every stage's step function has the same
// inputs (but its own layers' KV pools) and results. Everything the cut leaves
// without a use (the embedding, earlier layers, later layers, the LM head) is
// removed; a layer that reads more of the earlier ones than the residual stream
// keeps them alive and is an error. See docs/parallelism.md.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_SPLITPIPELINESTAGEPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;

constexpr StringLiteral kNameAttr = "onnx.name";
constexpr StringLiteral kPoolAttr = "xfmr.kv_pool";
constexpr StringLiteral kKVCacheAttr = "xfmr.kv_cache";

/// The step function's pools in argument order, each with its layer.
struct Pools {
  SmallVector<unsigned> args; ///< argument indices
  int64_t perLayer = 0;
  int64_t layerOf(size_t i) const { return static_cast<int64_t>(i) / perLayer; }
};

/// Where the layers of a step function can be cut: the ops of its body in
/// program order (a topological order), and the single value through which
/// everything after a point depends on the attention of earlier layers.
class Cuts {
public:
  explicit Cuts(func::FuncOp f) : block(f.getBody().front()) {
    for (Operation &op : block)
      position[&op] = static_cast<int64_t>(position.size());
  }

  /// The residual stream entering layer `layer`: the one value that is
  /// computed from the attention of layers before it and still used after
  /// it is defined, at the latest point between layer - 1's attention and
  /// layer's KV write where there is only one. What depends only on the
  /// step's inputs (RoPE tables, shapes) is not counted: a stage recomputes
  /// it. The value must be [1, tokens, hidden] f32 (not an attention's
  /// [tokens, heads, head_dim] output); an error if no point has one.
  FailureOr<Value> residualEntering(ArrayRef<PagedAttentionOp> attentions,
                                    ArrayRef<KVWriteOp> writes, int64_t layer);

  /// Erases the runtime checks (cf.assert, at any depth) of the ops before
  /// the cut at `from` or after the one at `to` (positions, -1: none): they
  /// check another stage's layers, which that stage checks. A check is not
  /// Pure; left in place, it would keep those layers alive.
  void dropOtherChecks(int64_t from, int64_t to);

  /// The position of the last cut residualEntering found.
  int64_t lastCut = -1;

private:
  int64_t positionOf(Operation *op) {
    Operation *top = block.findAncestorOpInBlock(*op);
    return top ? position.lookup(top) : -1;
  }

  Block &block;
  DenseMap<Operation *, int64_t> position;
};

FailureOr<Value> Cuts::residualEntering(ArrayRef<PagedAttentionOp> attentions,
                                        ArrayRef<KVWriteOp> writes,
                                        int64_t layer) {
  // The values computed from layers [0, layer)'s attention outputs. A KV
  // write is state (the pools) and a shape query no value: neither carries
  // the dependence on.
  SetVector<Value> dependent;
  for (int64_t l = 0; l < layer; ++l)
    dependent.insert(attentions[l]->getResult(0));
  for (size_t i = 0; i < dependent.size(); ++i)
    for (Operation *user : dependent[i].getUsers()) {
      if (isa<KVWriteOp, onnx::ShapeOp, tensor::DimOp, func::ReturnOp>(user))
        continue;
      Operation *top = block.findAncestorOpInBlock(*user);
      if (top)
        for (Value r : top->getResults())
          dependent.insert(r);
    }
  struct Live {
    int64_t def, lastUse;
    Value value;
  };
  SmallVector<Live> lives;
  for (Value v : dependent) {
    int64_t def = positionOf(v.getDefiningOp()), last = def;
    for (Operation *user : v.getUsers())
      last = std::max(last, positionOf(user));
    lives.push_back({def, last, v});
  }
  int64_t from = positionOf(attentions[layer - 1]);
  int64_t to = positionOf(writes[layer]);
  for (int64_t p = to - 1; p >= from; --p) {
    Value only;
    int count = 0;
    for (const Live &l : lives)
      if (l.def <= p && p < l.lastUse && count++ == 0)
        only = l.value;
    // [1, tokens, hidden] f32: the batch of one a paged step runs at.
    auto type =
        count == 1 ? dyn_cast<RankedTensorType>(only.getType()) : nullptr;
    if (type && type.getRank() == 3 && type.getDimSize(0) <= 1 &&
        type.isDynamicDim(1) && !type.isDynamicDim(2) &&
        type.getElementType().isF32()) {
      lastCut = p;
      return only;
    }
  }
  return attentions[layer]->emitError()
         << "--pipeline-parallel: no single [1, tokens, hidden] f32 value "
            "carries layer "
         << layer - 1 << " into layer " << layer
         << " (a residual stream to send between stages)";
}

void Cuts::dropOtherChecks(int64_t from, int64_t to) {
  SmallVector<Operation *> checks;
  block.walk([&](cf::AssertOp check) {
    int64_t at = positionOf(check);
    if ((from >= 0 && at <= from) || (to >= 0 && at > to))
      checks.push_back(check);
  });
  for (Operation *check : checks)
    check->erase();
}

/// The argument named `name` (the step function's inputs).
std::optional<unsigned> argumentNamed(func::FuncOp f, StringRef name) {
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (auto n = f.getArgAttrOfType<StringAttr>(i, kNameAttr);
        n && n.getValue() == name)
      return i;
  return std::nullopt;
}

class StageSplitter {
public:
  StageSplitter(func::FuncOp f, int64_t stages, int64_t stage)
      : f(f), stages(stages), stage(stage) {}

  LogicalResult run(int64_t layers);

private:
  FailureOr<Pools> findPools(int64_t layers);
  LogicalResult findLayers(const Pools &pools);
  LogicalResult dropOtherLayers(const Pools &pools, int64_t first, int64_t end);

  func::FuncOp f;
  int64_t stages, stage;
  SmallVector<PagedAttentionOp> attentions; ///< per layer
  SmallVector<KVWriteOp> writes;            ///< per layer
};

FailureOr<Pools> StageSplitter::findPools(int64_t layers) {
  Pools pools;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (f.getArgAttr(i, kPoolAttr))
      pools.args.push_back(i);
  if (layers < 1 || pools.args.empty() || pools.args.size() % layers)
    return f.emitError() << "--pipeline-parallel: " << pools.args.size()
                         << " KV pools are not the same number for each of "
                         << layers << " layers";
  pools.perLayer = static_cast<int64_t>(pools.args.size()) / layers;
  return pools;
}

/// Layer l's KV write (of its key pool) and the paged attention that reads
/// what it wrote.
LogicalResult StageSplitter::findLayers(const Pools &pools) {
  int64_t layers = static_cast<int64_t>(pools.args.size()) / pools.perLayer;
  attentions.assign(layers, nullptr);
  writes.assign(layers, nullptr);
  for (int64_t l = 0; l < layers; ++l) {
    BlockArgument keyPool = f.getArgument(pools.args[l * pools.perLayer]);
    for (Operation *user : keyPool.getUsers())
      if (auto write = dyn_cast<KVWriteOp>(user))
        for (Operation *reader : write.getNewKeyPool().getUsers())
          if (auto attention = dyn_cast<PagedAttentionOp>(reader)) {
            attentions[l] = attention;
            writes[l] = write;
          }
    if (!attentions[l] || attentions[l]->getBlock() != &f.getBody().front())
      return f.emitError()
             << "--pipeline-parallel: layer " << l
             << "'s key pool is not written and read by one paged attention "
                "in the function's body";
  }
  return success();
}

/// Removes the pools of layers outside [first, end) from the results, then
/// everything left without a use, then those pools from the inputs.
LogicalResult StageSplitter::dropOtherLayers(const Pools &pools, int64_t first,
                                             int64_t end) {
  auto ret = cast<func::ReturnOp>(f.getBody().back().getTerminator());
  DenseMap<unsigned, int64_t> layerOfArg;
  for (auto [i, arg] : llvm::enumerate(pools.args))
    layerOfArg[arg] = pools.layerOf(i);
  auto keeps = [&](int64_t layer) { return layer >= first && layer < end; };

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  SmallVector<unsigned>
      resultArgs; // the argument each kept pool result updates
  for (auto [i, r] : llvm::enumerate(ret.getOperands())) {
    auto pool = f.getResultAttrOfType<IntegerAttr>(i, kPoolAttr);
    if (pool && !keeps(layerOfArg.lookup(pool.getInt())))
      continue;
    results.push_back(r);
    resultAttrs.push_back(f.getResultAttrDict(i));
    resultArgs.push_back(pool ? pool.getInt() : ~0u);
  }
  OpBuilder b(ret);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();

  IRRewriter rewriter(f.getContext());
  (void)runRegionDCE(rewriter, f->getRegions());

  llvm::BitVector erase(f.getNumArguments());
  for (auto [i, arg] : llvm::enumerate(pools.args)) {
    int64_t layer = pools.layerOf(i);
    if (keeps(layer))
      continue;
    if (!f.getArgument(arg).use_empty())
      return f.emitError()
             << "--pipeline-parallel: stage " << stage << " (layers " << first
             << ".." << end - 1 << ") still reads layer " << layer
             << "'s KV pool: its layers use more of the other layers than the "
                "residual stream";
    erase.set(arg);
  }
  // The argument index each kept pool result aliases, after the erasure.
  SmallVector<unsigned> newIndex(f.getNumArguments());
  for (unsigned i = 0, n = 0; i < f.getNumArguments(); ++i)
    newIndex[i] = erase.test(i) ? ~0u : n++;
  if (failed(f.eraseArguments(erase)))
    return f.emitError(
        "--pipeline-parallel: cannot remove the other layers' pools");
  SmallVector<Type> resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());
  f.setType(
      FunctionType::get(f.getContext(), f.getArgumentTypes(), resultTypes));
  for (auto [i, attrs] : llvm::enumerate(resultAttrs)) {
    NamedAttrList list(attrs);
    if (resultArgs[i] != ~0u)
      list.set(kPoolAttr, b.getI64IntegerAttr(newIndex[resultArgs[i]]));
    resultAttrs[i] = list.getDictionary(f.getContext());
  }
  f.setAllResultAttrs(resultAttrs);
  return success();
}

LogicalResult StageSplitter::run(int64_t layers) {
  if (layers % stages)
    return f.emitError()
           << "--pipeline-parallel=" << stages << ": " << layers
           << " layers do not split evenly over " << stages
           << " stages (every stage's KV blocks must be the same size)";
  FailureOr<Pools> pools = findPools(layers);
  if (failed(pools))
    return failure();
  if (failed(findLayers(*pools)))
    return failure();
  int64_t first = stage * layers / stages, end = (stage + 1) * layers / stages;
  std::optional<unsigned> tokens = argumentNamed(f, "input_ids");
  std::optional<unsigned> rows = argumentNamed(f, "logits_indices");
  if (!tokens || !rows)
    return f.emitError(
        "--pipeline-parallel: the step function has no input_ids or "
        "logits_indices input (compile with --kv-cache=paged)");
  auto ret = cast<func::ReturnOp>(f.getBody().back().getTerminator());
  Value logits = ret.getNumOperands() ? ret.getOperand(0) : Value();
  auto logitsType =
      logits ? dyn_cast<RankedTensorType>(logits.getType()) : nullptr;
  if (!logitsType || logitsType.getRank() != 2 || logitsType.isDynamicDim(1) ||
      !logitsType.getElementType().isF32())
    return f.emitError(
        "--pipeline-parallel: the step function's first result is not "
        "[rows, vocab] f32 logits");

  // Both cuts are found before either is made.
  Cuts cuts(f);
  FailureOr<Value> in, out;
  int64_t from = -1, to = -1;
  if (stage > 0) {
    if (failed(in = cuts.residualEntering(attentions, writes, first)))
      return failure();
    from = cuts.lastCut;
  }
  if (stage + 1 < stages) {
    if (failed(out = cuts.residualEntering(attentions, writes, end)))
      return failure();
    to = cuts.lastCut;
  }
  cuts.dropOtherChecks(from, to);

  Location loc = f.getLoc();
  OpBuilder b(f.getContext());
  if (stage > 0) {
    b.setInsertionPointToStart(&f.getBody().front());
    // [1, T, hidden]: the batch of one the paged step runs at, the tokens.
    auto type = cast<RankedTensorType>((*in).getType());
    SmallVector<Value> sizes;
    if (type.isDynamicDim(0))
      sizes.push_back(arith::ConstantIndexOp::create(b, loc, 1));
    if (type.isDynamicDim(1))
      sizes.push_back(tensor::DimOp::create(b, loc, f.getArgument(*tokens), 0));
    Value received = StageReceiveOp::create(b, loc, type, sizes);
    (*in).replaceAllUsesWith(received);
  }
  b.setInsertionPoint(ret);
  Value result;
  if (stage + 1 < stages) {
    Value n = tensor::DimOp::create(b, loc, f.getArgument(*rows), 0);
    SmallVector<Value> sizes;
    if (logitsType.isDynamicDim(0))
      sizes.push_back(n);
    result = StageSendOp::create(b, loc, logitsType, *out, sizes);
  } else {
    result = StageBroadcastOp::create(b, loc, logits);
  }
  ret->setOperand(0, result);
  return dropOtherLayers(*pools, first, end);
}

struct SplitPipelineStagePass
    : impl::SplitPipelineStagePassBase<SplitPipelineStagePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 1 || stage < 0 || stage >= stages) {
      module.emitError() << "xfmr-split-pipeline-stage: stage " << stage
                         << " of " << stages;
      return signalPassFailure();
    }
    if (stages == 1)
      return;
    auto kv = module->getAttrOfType<DictionaryAttr>(kKVCacheAttr);
    auto layers = kv ? kv.getAs<IntegerAttr>("num_layers") : nullptr;
    if (!layers) {
      module.emitError("--pipeline-parallel needs the paged step function "
                       "(--kv-cache=paged)");
      return signalPassFailure();
    }
    if (kv.get("latent")) {
      module.emitError(
          "--pipeline-parallel: latent (MLA) attention is not split into "
          "stages yet");
      return signalPassFailure();
    }
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      if (failed(StageSplitter(f, stages, stage).run(layers.getInt())))
        return signalPassFailure();
    }
    OpBuilder b(&getContext());
    NamedAttrList entries(kv);
    entries.set("num_layers", b.getI64IntegerAttr(layers.getInt() / stages));
    module->setAttr(kKVCacheAttr, entries.getDictionary(&getContext()));
    module->setAttr("xfmr.pipeline_stage",
                    b.getDictionaryAttr({
                        b.getNamedAttr("stages", b.getI64IntegerAttr(stages)),
                        b.getNamedAttr("stage", b.getI64IntegerAttr(stage)),
                        b.getNamedAttr("first_layer",
                                       b.getI64IntegerAttr(
                                           stage * layers.getInt() / stages)),
                        b.getNamedAttr("layers", b.getI64IntegerAttr(
                                                     layers.getInt() / stages)),
                    }));
  }
};

} // namespace
} // namespace xfmr
