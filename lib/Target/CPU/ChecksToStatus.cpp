//===- ChecksToStatus.cpp - run-time checks become an error status -------===//
//
// Part of xfmr.
//
// The lowerings guard what data can break (token ids, gather indices, KV
// slots, block tables, dynamic extents that must agree) with `cf.assert`,
// which the LLVM lowering turns into abort(): one bad request would kill a
// server. This pass gives the entry function a status buffer instead and
// turns each check into a recorded failure:
//
// - a check in the function's own control flow (after convert-scf-to-cf,
//   that is any loop nest that runs on one thread) branches to an exit block
//   that records the check's number and returns null descriptors;
// - a check inside a region the function cannot return from (an OpenMP
//   parallel loop) records the number and carries on; the lowering clamped
//   whatever the check guards, so nothing is read out of bounds, and the
//   caller discards the results.
//
// The messages go to the module attribute `xfmr.checks`, which xfmr-compile
// writes into the manifest; the runtime prints message N for status N + 1.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_CHECKSTOSTATUSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr llvm::StringLiteral kChecksAttr = "xfmr.checks";

/// A function callers reach through its C interface (xfmr-prepare-entry
/// marks the public ones): each gets a status buffer.
bool isEntry(func::FuncOp fn) {
  return fn.isPublic() && !fn.isExternal() && fn->hasAttr("llvm.emit_c_interface");
}

/// The LLVM struct a memref descriptor of `type` lowers to.
Type descriptorType(MemRefType type) {
  MLIRContext *ctx = type.getContext();
  Type ptr = LLVM::LLVMPointerType::get(ctx, type.getMemorySpaceAsInt());
  Type i64 = IntegerType::get(ctx, 64);
  SmallVector<Type> fields{ptr, ptr, i64};
  if (type.getRank() > 0) {
    Type sizes = LLVM::LLVMArrayType::get(i64, type.getRank());
    fields.append({sizes, sizes});
  }
  return LLVM::LLVMStructType::getLiteral(ctx, fields);
}

/// status[0] = code unless an earlier failure is recorded there; atomic,
/// since checks in parallel loops record from several threads.
void recordFailure(OpBuilder &b, Location loc, Value status, Value code) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  auto rmw = memref::GenericAtomicRMWOp::create(b, loc, status, ValueRange{zero});
  OpBuilder body = OpBuilder::atBlockEnd(rmw.getBody(), b.getListener());
  Value current = rmw.getCurrentValue();
  Value none = arith::ConstantIntOp::create(body, loc, 0, 64);
  Value first = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::eq, current, none);
  memref::AtomicYieldOp::create(body, loc,
                                arith::SelectOp::create(body, loc, first, code, current));
}

struct ChecksToStatusPass : impl::ChecksToStatusPassBase<ChecksToStatusPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Attribute> messages;
    DenseMap<func::FuncOp, Value> statusOf;
    for (auto fn : module.getOps<func::FuncOp>())
      if (isEntry(fn)) {
        Value status = addStatusArgument(fn);
        if (!status || failed(convertChecks(fn, status, messages)))
          return signalPassFailure();
        statusOf[fn] = status;
      }
    // Functions the entries call (xfmr-outline-layers' layers) record into
    // the caller's status and carry on, as checks in parallel loops do.
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (isEntry(fn) || fn.isExternal() ||
          !fn.walk([](cf::AssertOp) { return WalkResult::interrupt(); }).wasInterrupted())
        continue;
      Value status = addStatusArgument(fn);
      if (!status || failed(convertChecks(fn, status, messages, /*canReturn=*/false)))
        return signalPassFailure();
      SmallVector<func::CallOp> calls;
      module.walk([&](func::CallOp call) {
        if (call.getCallee() == fn.getSymName())
          calls.push_back(call);
      });
      for (func::CallOp call : calls) {
        Value callerStatus = statusOf.lookup(call->getParentOfType<func::FuncOp>());
        if (!callerStatus) {
          call.emitError("xfmr-checks-to-status: a function with run-time checks called "
                         "from a function without a status");
          return signalPassFailure();
        }
        call.getOperandsMutable().append(callerStatus);
      }
    }
    // A check anywhere else would have no status to report to.
    WalkResult left = module.walk([&](cf::AssertOp check) {
      check.emitError("run-time check outside a public function: it has no status to "
                      "report its failure to");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      return signalPassFailure();
    module->setAttr(kChecksAttr, ArrayAttr::get(&getContext(), messages));
  }

  /// Turns the checks of `entry` into failures recorded in `status`,
  /// numbered after `messages`, to which their messages are appended.
  /// Without `canReturn` every check records and carries on.
  LogicalResult convertChecks(func::FuncOp entry, Value status,
                              SmallVectorImpl<Attribute> &messages, bool canReturn = true) {
    SmallVector<cf::AssertOp> checks;
    entry.walk([&](cf::AssertOp check) { checks.push_back(check); });
    Block *exit = nullptr;
    for (cf::AssertOp check : checks) {
      messages.push_back(check.getMsgAttr());
      int64_t code = static_cast<int64_t>(messages.size()); // 0 means success
      if (canReturn && check->getParentRegion() == &entry.getBody()) {
        if (!exit && !(exit = createExitBlock(entry, status)))
          return failure();
        branchToExit(check, exit, code);
        ++numReturning;
      } else {
        recordAndContinue(check, status, code);
        ++numRecording;
      }
    }
    return success();
  }

  /// Appends `memref<2xi64>`: [0] the failed check's number
  /// plus one (0: none), [1] reserved; the caller zeroes it.
  Value addStatusArgument(func::FuncOp entry) {
    MLIRContext *ctx = &getContext();
    auto type = MemRefType::get({2}, IntegerType::get(ctx, 64));
    unsigned index = entry.getNumArguments();
    // No argument attribute marks it: the LLVM translation would warn about
    // one it does not know. It is the last argument, by the ABI.
    if (failed(entry.insertArgument(index, type, DictionaryAttr::get(ctx), entry.getLoc()))) {
      entry.emitError("cannot add the status argument");
      return nullptr;
    }
    return entry.getArgument(index);
  }

  /// ^exit(%code: i64): record %code, return null descriptors (the caller
  /// reads no result of a failed call).
  Block *createExitBlock(func::FuncOp entry, Value status) {
    Location loc = entry.getLoc();
    OpBuilder b(&getContext());
    Block *exit = b.createBlock(&entry.getBody(), entry.getBody().end(),
                                {b.getI64Type()}, {loc});
    recordFailure(b, loc, status, exit->getArgument(0));
    SmallVector<Value> results;
    for (Type type : entry.getResultTypes()) {
      auto memref = dyn_cast<MemRefType>(type);
      if (!memref) {
        entry.emitError("xfmr-checks-to-status: result of type ")
            << type << " (only memrefs can be returned after a failed check)";
        return nullptr;
      }
      Value null = LLVM::ZeroOp::create(b, loc, descriptorType(memref));
      results.push_back(
          UnrealizedConversionCastOp::create(b, loc, TypeRange{type}, ValueRange{null})
              .getResult(0));
    }
    func::ReturnOp::create(b, loc, results);
    return exit;
  }

  /// cf.assert %ok -> cf.cond_br %ok, ^rest, ^exit(code).
  void branchToExit(cf::AssertOp check, Block *exit, int64_t code) {
    Block *block = check->getBlock();
    Block *rest = block->splitBlock(std::next(check->getIterator()));
    OpBuilder b = OpBuilder::atBlockEnd(block);
    Value number = arith::ConstantIntOp::create(b, check.getLoc(), code, 64);
    cf::CondBranchOp::create(b, check.getLoc(), check.getArg(), rest, ValueRange{}, exit,
                             ValueRange{number});
    check.erase();
  }

  /// cf.assert %ok -> cf.cond_br %ok, ^rest, ^record; ^record: status; br ^rest.
  void recordAndContinue(cf::AssertOp check, Value status, int64_t code) {
    Block *block = check->getBlock();
    Block *rest = block->splitBlock(std::next(check->getIterator()));
    OpBuilder b(&getContext());
    Block *record = b.createBlock(rest->getParent(), Region::iterator(rest));
    recordFailure(b, check.getLoc(), status,
                  arith::ConstantIntOp::create(b, check.getLoc(), code, 64));
    cf::BranchOp::create(b, check.getLoc(), rest);
    b.setInsertionPointToEnd(block);
    cf::CondBranchOp::create(b, check.getLoc(), check.getArg(), rest, record);
    check.erase();
  }
};

} // namespace
} // namespace xfmr::cpu
