//===- OutlineLayers.cpp - one function per repeated decoder layer --------===//
//
// Part of xfmr.
//
// A decoder repeats one layer N times; lowered as written, code generation
// compiles it N times. This pass finds the layers by the node names their
// ops carry (`/model/layers.3/attn/...`), checks which layers are
// structurally the same, and replaces each group by calls of one function.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Regex.h"

#include <functional>
#include <map>
#include <set>

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_OUTLINELAYERSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

/// Constants at least this large are weights: passed to the layer function
/// (xfmr-externalize-weights moves them out of the entry), never cloned.
constexpr int64_t kWeightBytes = 256;

/// The layer a location names: `layers.3`, `layer.3`, `h.3` or `blocks.3`
/// as a component of a node path (`/model/layers.3/mlp/...`) or a dotted
/// name; -1 when it names none. Fused locations name a layer only when all
/// their parts agree.
const llvm::Regex &layerPattern() {
  static const llvm::Regex pattern("(^|[/.])(layers|layer|h|blocks)\\.([0-9]+)([/.]|$)");
  return pattern;
}

int64_t layerOf(Location loc) {
  const llvm::Regex &pattern = layerPattern();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    int64_t layer = -1;
    for (Location part : fused.getLocations()) {
      int64_t l = layerOf(part);
      if (l >= 0 && layer >= 0 && l != layer)
        return -1;
      layer = std::max(layer, l);
    }
    return layer;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    SmallVector<StringRef> groups;
    if (pattern.match(name.getName().getValue(), &groups)) {
      int64_t layer;
      if (!groups[3].getAsInteger(10, layer))
        return layer;
    }
    return layerOf(name.getChildLoc());
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return layerOf(callSite.getCallee());
  return -1;
}

/// Whether `loc` names a node (of no layer: the lm_head, say) rather than
/// being one a lowering made up (the file, unknown).
bool namesNode(Location loc) {
  bool named = false;
  loc->walk([&](Location part) {
    named |= isa<NameLoc>(part);
    return WalkResult::advance();
  });
  return named;
}

/// The op of `block` that contains `op` (or `op` itself).
Operation *topLevel(Operation *op, Block *block) {
  while (op && op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

/// The top-level op that defines `v` (null for arguments of the entry).
Operation *topLevelDef(Value v, Block *block) {
  if (Operation *def = v.getDefiningOp())
    return topLevel(def, block);
  return topLevel(cast<BlockArgument>(v).getOwner()->getParentOp(), block);
}

/// A value a layer function may recreate instead of taking it as an
/// argument: a small constant or an empty tensor.
bool isCloneable(Operation *def) {
  if (!def || def->getNumOperands() != 0 || def->getNumRegions() != 0 ||
      !isMemoryEffectFree(def))
    return false;
  if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto elements = dyn_cast<ElementsAttr>(cst.getValue());
    if (!elements)
      return true;
    auto type = cast<ShapedType>(elements.getType());
    if (!type.getElementType().isIntOrFloat())
      return false;
    int64_t bits = type.getElementType().getIntOrFloatBitWidth();
    return type.getNumElements() * std::max<int64_t>(bits / 8, 1) < kWeightBytes;
  }
  return isa<tensor::EmptyOp>(def);
}

/// An op a layer recomputes rather than takes from outside: an empty
/// tensor, or a fill of one (CSE shares a product's zero-filled init
/// between layers; passed in, bufferization would write it in place).
bool isRematerializable(Operation *op) {
  if (isa_and_nonnull<tensor::EmptyOp>(op))
    return true;
  auto fill = dyn_cast_or_null<linalg::FillOp>(op);
  return fill && fill.hasPureTensorSemantics() &&
         isRematerializable(fill.getDpsInitOperand(0)->get().getDefiningOp());
}

/// One layer: its ops in order, the values it reads from outside (each
/// use, in walk order) and the values others read from it.
struct Layer {
  int64_t index = -1;
  SmallVector<Operation *> ops;
  llvm::DenseSet<Operation *> members;
  SmallVector<Value> inputs;  // one entry per use, in walk order
  SmallVector<Value> outputs; // distinct, in op order

  bool contains(Operation *op, Block *block) const {
    return members.contains(topLevel(op, block));
  }

  /// Gives the layer its own copy of every empty or filled tensor it reads
  /// from outside, placed before the first op that reads it.
  void rematerialize(Block *block) {
    DenseMap<Value, Value> copies;
    SmallVector<Operation *> reordered;
    std::function<Value(Value, Operation *)> copy = [&](Value v, Operation *before) -> Value {
      if (Value known = copies.lookup(v))
        return known;
      Operation *def = v.getDefiningOp();
      OpBuilder b(before);
      IRMapping map;
      if (auto fill = dyn_cast<linalg::FillOp>(def))
        map.map(fill.getDpsInitOperand(0)->get(),
                copy(fill.getDpsInitOperand(0)->get(), before));
      Operation *clone = b.clone(*def, map);
      reordered.push_back(clone);
      members.insert(clone);
      Value result = clone->getResult(cast<OpResult>(v).getResultNumber());
      copies[v] = result;
      return result;
    };
    for (Operation *op : ops) {
      op->walk([&](Operation *nested) {
        for (OpOperand &use : nested->getOpOperands()) {
          Operation *def = use.get().getDefiningOp();
          if (def && def->getBlock() == block && !members.contains(def) &&
              def->getNumOperands() > 0 && isRematerializable(def))
            use.set(copy(use.get(), op));
        }
      });
      reordered.push_back(op);
    }
    ops = std::move(reordered);
  }

  void collectInputs(Block *block) {
    inputs.clear();
    for (Operation *op : ops)
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *def = topLevelDef(v, block);
          if (!def || !members.contains(def))
            inputs.push_back(v);
        }
      });
  }

  void collectOutputs(Block *block) {
    outputs.clear();
    for (Operation *op : ops)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *user) { return !contains(user, block); }))
          outputs.push_back(r);
  }
};

/// The run-time checks of `layer`, in walk order.
SmallVector<cf::AssertOp> checksOf(const Layer &layer) {
  SmallVector<cf::AssertOp> checks;
  for (Operation *op : layer.ops)
    op->walk([&](cf::AssertOp check) { checks.push_back(check); });
  return checks;
}

/// `message` with its layer number replaced by N, and which layers N may
/// be: a failed check in a layer function cannot tell which call failed.
std::string layerMessage(StringRef message, ArrayRef<int64_t> layers) {
  const llvm::Regex &pattern = layerPattern();
  std::string out = message.str();
  std::string error;
  while (pattern.match(out) && error.empty())
    out = pattern.sub("\\1\\2.N\\4", out, &error);
  bool contiguous = layers.back() - layers.front() + 1 == static_cast<int64_t>(layers.size());
  out += " (a layer function: N is ";
  if (contiguous)
    out += "one of " + std::to_string(layers.front()) + ".." + std::to_string(layers.back());
  else
    for (auto [i, l] : llvm::enumerate(layers))
      out += (i ? ", " : "one of ") + std::to_string(l);
  return out + ")";
}

/// Whether `layer` has the structure of `rep`: the same ops with the same
/// attributes, types and regions, internal operands in the same places,
/// and inputs repeating where the representative's repeat.
bool sameStructure(const Layer &rep, const Layer &layer, Block *block) {
  if (rep.ops.size() != layer.ops.size() || rep.inputs.size() != layer.inputs.size())
    return false;
  // Run-time check messages name their layer's node; compare without them.
  SmallVector<cf::AssertOp> repChecks = checksOf(rep), checks = checksOf(layer);
  if (repChecks.size() != checks.size())
    return false;
  SmallVector<StringAttr> messages;
  for (auto [a, b] : llvm::zip_equal(repChecks, checks)) {
    messages.push_back(b.getMsgAttr());
    b.setMsgAttr(a.getMsgAttr());
  }
  llvm::scope_exit restore([&] {
    for (auto [check, message] : llvm::zip_equal(checks, messages))
      check.setMsgAttr(message);
  });
  DenseMap<Value, Value> equivalent;
  auto check = [&](Value a, Value b) -> LogicalResult {
    if (Value known = equivalent.lookup(a))
      return success(known == b);
    Operation *da = topLevelDef(a, block), *db = topLevelDef(b, block);
    bool externalA = !da || !rep.members.contains(da);
    bool externalB = !db || !layer.members.contains(db);
    return success(externalA && externalB && a.getType() == b.getType());
  };
  auto mark = [&](Value a, Value b) { equivalent[a] = b; };
  for (auto [a, b] : llvm::zip_equal(rep.ops, layer.ops)) {
    if (!OperationEquivalence::isEquivalentTo(a, b, check, mark,
                                              OperationEquivalence::IgnoreLocations))
      return false;
    for (auto [ra, rb] : llvm::zip_equal(a->getResults(), b->getResults()))
      equivalent[ra] = rb;
  }
  // Inputs that are one value in the representative must be one value here.
  DenseMap<Value, Value> seen;
  for (auto [a, b] : llvm::zip_equal(rep.inputs, layer.inputs)) {
    auto [it, inserted] = seen.try_emplace(a, b);
    if (!inserted && it->second != b)
      return false;
  }
  return true;
}

/// Positions of `layer.outputs` within its ops, as (op index, result index).
SmallVector<std::pair<unsigned, unsigned>> outputPositions(const Layer &layer) {
  DenseMap<Operation *, unsigned> index;
  for (auto [i, op] : llvm::enumerate(layer.ops))
    index[op] = i;
  SmallVector<std::pair<unsigned, unsigned>> positions;
  for (Value out : layer.outputs) {
    auto r = cast<OpResult>(out);
    positions.push_back({index.lookup(r.getOwner()), r.getResultNumber()});
  }
  return positions;
}

struct OutlineLayersPass : impl::OutlineLayersPassBase<OutlineLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fn : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (fn.isPublic() && !fn.isExternal() && fn.getBody().hasOneBlock())
        outline(module, fn);
  }

  /// The layers of `fn`'s body in order of their index; ops that do not
  /// depend on any layer's data flow are nobody's.
  std::vector<Layer> findLayers(Block &body) {
    llvm::DenseSet<Operation *> invariant;
    DenseMap<Operation *, int64_t> layerOfOp;
    // Ops without a node location that read some layer's data, with the
    // layers they read from.
    SmallVector<std::pair<Operation *, int64_t>> unlocated;
    for (Operation &op : body.without_terminator()) {
      int64_t index = layerOf(op.getLoc());
      // The layers of the data this op reads (-1: data of no layer, the
      // function's arguments included).
      llvm::SmallSetVector<int64_t, 2> sources;
      op.walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *def = topLevelDef(v, &body);
          if (!def) {
            sources.insert(-1);
            continue;
          }
          if (def == &op || invariant.contains(def) ||
              (def->getNumOperands() == 0 && def->getNumRegions() == 0))
            continue;
          auto it = layerOfOp.find(def);
          sources.insert(it == layerOfOp.end() ? -1 : it->second);
        }
      });
      if (index >= 0 && sources.empty())
        invariant.insert(&op);
      else if (index >= 0)
        layerOfOp[&op] = index;
      else if (!sources.empty() && !namesNode(op.getLoc()))
        unlocated.push_back({&op, sources.size() == 1 ? sources.front() : -1});
    }
    // An op the lowering gave no node location belongs to the layer that
    // uses it, else to the one whose data it reads.
    for (auto [op, source] : llvm::reverse(unlocated)) {
      llvm::SmallSetVector<int64_t, 2> users;
      for (Operation *user : op->getUsers()) {
        auto it = layerOfOp.find(topLevel(user, &body));
        users.insert(it == layerOfOp.end() ? -1 : it->second);
      }
      int64_t index = users.size() == 1 && users.front() >= 0 ? users.front() : source;
      if (index >= 0)
        layerOfOp[op] = index;
    }
    std::map<int64_t, Layer> layers;
    for (Operation &op : body.without_terminator()) {
      auto it = layerOfOp.find(&op);
      if (it == layerOfOp.end())
        continue;
      Layer &layer = layers[it->second];
      layer.index = it->second;
      layer.ops.push_back(&op);
      layer.members.insert(&op);
    }
    // Every layer's copies first: a copy of a shared empty tensor may read
    // another layer's extents, which makes them that layer's outputs.
    for (auto &[index, layer] : layers)
      layer.rematerialize(&body);
    std::vector<Layer> result;
    for (auto &[index, layer] : layers) {
      layer.collectInputs(&body);
      layer.collectOutputs(&body);
      result.push_back(std::move(layer));
    }
    return result;
  }

  /// Moves the ops that stand among `layer`'s ops but read its results
  /// (a later layer's first op, placed before this layer's last one) behind
  /// its last op, where the call will stand. Fails, moving nothing, when
  /// one of the layer's ops reads such an op.
  static bool sinkEarlyUsers(const Layer &layer, Block *block) {
    Operation *last = layer.ops.back();
    llvm::DenseSet<Operation *> dependent;
    SmallVector<Operation *> moved;
    for (Operation *op = layer.ops.front(); op != last;) {
      op = op->getNextNode();
      if (op == last)
        break;
      bool reads = false;
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *def = topLevelDef(v, block);
          if (def && def != op && (dependent.contains(def) || layer.members.contains(def)))
            reads = true;
        }
      });
      if (layer.members.contains(op))
        continue; // checked below, regions included
      if (reads) {
        dependent.insert(op);
        moved.push_back(op);
      }
    }
    // A layer op that reads a moved op would then come before it.
    for (Operation *op : layer.ops) {
      bool blocked = false;
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (dependent.contains(topLevelDef(v, block)))
            blocked = true;
      });
      if (blocked)
        return false;
    }
    Operation *after = last;
    for (Operation *op : moved) {
      op->moveAfter(after);
      after = op;
    }
    return true;
  }

  void outline(ModuleOp module, func::FuncOp fn) {
    Block &body = fn.getBody().front();
    std::vector<Layer> layers = findLayers(body);
    std::vector<bool> done(layers.size(), false), movable;
    for (const Layer &layer : layers)
      movable.push_back(sinkEarlyUsers(layer, &body));
    for (size_t r = 0; r < layers.size(); ++r) {
      if (done[r] || !movable[r])
        continue;
      // An earlier group's calls replaced values these layers read (and
      // erased their definitions): read the inputs afresh.
      layers[r].collectInputs(&body);
      SmallVector<size_t> group{r};
      for (size_t m = r + 1; m < layers.size(); ++m) {
        if (done[m] || !movable[m])
          continue;
        layers[m].collectInputs(&body);
        if (sameStructure(layers[r], layers[m], &body))
          group.push_back(m);
      }
      if (group.size() < 2)
        continue;
      for (size_t m : group)
        done[m] = true;
      outlineGroup(module, fn, layers, group);
    }
  }

  void outlineGroup(ModuleOp module, func::FuncOp fn, std::vector<Layer> &layers,
                    ArrayRef<size_t> group) {
    Block &body = fn.getBody().front();
    Layer &rep = layers[group.front()];
    for (size_t m : group)
      layers[m].collectOutputs(&body);
    // Outputs: the union over the group, by position.
    std::set<std::pair<unsigned, unsigned>> positions;
    for (size_t m : group)
      for (auto p : outputPositions(layers[m]))
        positions.insert(p);

    // Arguments: distinct inputs of the representative, unless the same
    // small constant in every layer (then the function makes its own).
    llvm::MapVector<Value, unsigned> firstUse; // rep input -> first use index
    for (auto [i, v] : llvm::enumerate(rep.inputs))
      firstUse.insert({v, i});
    SmallVector<unsigned> argUses; // use index of each argument
    SmallVector<Value> cloned;     // rep inputs the function recreates
    for (auto [v, use] : firstUse) {
      Operation *def = v.getDefiningOp();
      bool sameEverywhere = isCloneable(def) && llvm::all_of(group, [&](size_t m) {
        Operation *other = layers[m].inputs[use].getDefiningOp();
        return other && OperationEquivalence::isEquivalentTo(
                            def, other, OperationEquivalence::IgnoreLocations);
      });
      if (sameEverywhere)
        cloned.push_back(v);
      else
        argUses.push_back(use);
    }

    // The function, from the representative.
    SmallVector<Type> argTypes, resultTypes;
    for (unsigned use : argUses)
      argTypes.push_back(rep.inputs[use].getType());
    for (auto [op, res] : positions)
      resultTypes.push_back(rep.ops[op]->getResult(res).getType());
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    std::string name = "xfmr_layer_" + std::to_string(rep.index);
    auto callee = func::FuncOp::create(b, rep.ops.front()->getLoc(), name,
                                       b.getFunctionType(argTypes, resultTypes));
    callee.setPrivate();
    SymbolTable(module).insert(callee); // renames on a clash
    Block *entry = callee.addEntryBlock();
    b.setInsertionPointToStart(entry);
    IRMapping map;
    for (auto [i, use] : llvm::enumerate(argUses))
      map.map(rep.inputs[use], entry->getArgument(i));
    for (Value v : cloned)
      map.map(v, b.clone(*v.getDefiningOp())->getResult(cast<OpResult>(v).getResultNumber()));
    for (Operation *op : rep.ops)
      b.clone(*op, map);
    SmallVector<Value> returned;
    for (auto [op, res] : positions)
      returned.push_back(map.lookup(rep.ops[op]->getResult(res)));
    func::ReturnOp::create(b, callee.getLoc(), returned);
    SmallVector<int64_t> indices;
    for (size_t m : group)
      indices.push_back(layers[m].index);
    callee.walk([&](cf::AssertOp check) {
      check.setMsg(layerMessage(check.getMsg(), indices));
    });
    ++numFunctions;

    // Each layer becomes a call.
    for (size_t m : group) {
      Layer &layer = layers[m];
      // Earlier calls replaced what this layer reads from the layer before.
      layer.collectInputs(&body);
      SmallVector<Value> operands;
      for (unsigned use : argUses)
        operands.push_back(layer.inputs[use]);
      OpBuilder at(layer.ops.back()->getContext());
      at.setInsertionPointAfter(layer.ops.back());
      auto call = func::CallOp::create(at, layer.ops.front()->getLoc(), callee, operands);
      for (auto [i, pos] : llvm::enumerate(positions)) {
        Value old = layer.ops[pos.first]->getResult(pos.second);
        old.replaceUsesWithIf(call.getResult(i), [&](OpOperand &use) {
          return !layer.contains(use.getOwner(), &body);
        });
      }
      for (Operation *op : llvm::reverse(layer.ops)) {
        op->dropAllUses();
        op->erase();
      }
      ++numCalls;
    }
  }
};

} // namespace
} // namespace xfmr::cpu
