//===- ObjectEmitter.cpp - LLVM dialect to a host shared object -----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/ObjectEmitter.h"
#include "xfmr/runtime/CPUFeatures.h"
#include "xfmr/runtime/Manifest.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <thread>

using namespace mlir;

namespace xfmr::cpu {

llvm::FailureOr<HostTarget> resolveHostTarget(llvm::StringRef cpu, std::string &error) {
  HostTarget t;
  t.triple = llvm::sys::getDefaultTargetTriple();
  llvm::SmallVector<std::string> enabled;
  if (cpu.empty() || cpu == "native") {
    t.cpu = llvm::sys::getHostCPUName().str();
    std::string features;
    for (auto &f : llvm::sys::getHostCPUFeatures()) {
      if (!features.empty())
        features += ",";
      features += (f.second ? "+" : "-") + f.first().str();
      if (f.second)
        enabled.push_back(f.first().str());
    }
    t.features = features;
  } else {
    if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) == llvm::X86::CK_None) {
      llvm::SmallVector<llvm::StringRef> names;
      llvm::X86::fillValidCPUArchList(names, /*Only64Bit=*/true);
      error = "unknown CPU '" + cpu.str() + "' (native, or one of: " +
              llvm::join(names, ", ") + ")";
      return failure();
    }
    t.cpu = cpu.str();
    llvm::SmallVector<llvm::StringRef> implied;
    llvm::X86::getFeaturesForCPU(cpu, implied, /*NeedPlus=*/false);
    for (llvm::StringRef f : implied)
      enabled.push_back(f.str());
  }
  llvm::sort(enabled);
  for (const std::string &f : enabled)
    if (rt::isCheckableCPUFeature(f))
      t.required.push_back(f);
  return t;
}

/// `void xfmr_entry(void **args)`: args[i] is the i-th argument of the C
/// interface function (the result area first, then one descriptor pointer
/// per argument); see docs/artifact.md.
static bool addEntryWrapper(llvm::Module &m, llvm::StringRef entry,
                            std::string &error) {
  llvm::Function *ciface = m.getFunction(("_mlir_ciface_" + entry).str());
  if (!ciface) {
    error = "no C interface for '" + entry.str() + "'";
    return false;
  }
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  auto *fnType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
  auto *fn = llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage,
                                    "xfmr_entry", m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::SmallVector<llvm::Value *> args;
  for (unsigned i = 0; i < ciface->arg_size(); ++i) {
    if (!ciface->getArg(i)->getType()->isPointerTy()) {
      error = "C interface argument " + std::to_string(i) + " is not a pointer";
      return false;
    }
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, fn->getArg(0), i);
    args.push_back(b.CreateLoad(ptr, slot));
  }
  b.CreateCall(ciface, args);
  b.CreateRetVoid();
  new llvm::GlobalVariable(m, llvm::Type::getInt32Ty(ctx), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx),
                                                  rt::kArtifactABIVersion),
                           "xfmr_abi_version");
  return true;
}

namespace {
/// What the generated code calls beyond libm: decides the link line.
struct LinkNeeds {
  /// OpenBLAS's sgemm (xfmr-contractions-to-blas).
  bool blas = false;
  /// The quantized micro-kernels and the buffer cache (runtime/ukernels).
  bool ukernels = false;
  /// LLVM's libomp (xfmr-compile --threads).
  bool openMP = false;

  void merge(const LinkNeeds &other) {
    blas |= other.blas;
    ukernels |= other.ukernels;
    openMP |= other.openMP;
  }
};
} // namespace

/// Translates `module` (LLVM dialect) to an LLVM module in `llvmContext`.
static std::unique_ptr<llvm::Module>
translateToLLVMIR(ModuleOp module, llvm::LLVMContext &llvmContext,
                  std::string &error) {
  std::unique_ptr<llvm::Module> m =
      translateModuleToLLVMIR(module, llvmContext, "xfmr_model");
  if (!m)
    error = "translation to LLVM IR failed";
  return m;
}

/// A target machine generating position-independent code for `target` at
/// `optLevel`; null, with `error` set, if there is none.
static std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const HostTarget &target, int optLevel,
                    std::string &error) {
  llvm::Triple triple(target.triple);
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return nullptr;
  llvm::TargetOptions options;
  auto level = optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
               : optLevel == 0 ? llvm::CodeGenOptLevel::None
                               : llvm::CodeGenOptLevel::Default;
  std::unique_ptr<llvm::TargetMachine> tm(llvmTarget->createTargetMachine(
      triple, target.cpu, target.features, options, llvm::Reloc::PIC_,
      std::nullopt, level));
  if (!tm)
    error = "cannot create a target machine for " + target.triple;
  return tm;
}

/// Sets the target of `m`, adds the artifact ABI when `entry` is not empty,
/// marks every definition with the target CPU and features, and verifies.
static bool prepareModule(llvm::Module &m, llvm::TargetMachine &tm,
                          const HostTarget &target, llvm::StringRef entry,
                          std::string &error) {
  m.setTargetTriple(tm.getTargetTriple());
  m.setDataLayout(tm.createDataLayout());
  if (!entry.empty() && !addEntryWrapper(m, entry, error))
    return false;
  for (llvm::Function &f : m)
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", target.cpu);
      if (!target.features.empty())
        f.addFnAttr("target-features", target.features);
    }
  if (llvm::verifyModule(m, &llvm::errs())) {
    error = "generated LLVM IR does not verify";
    return false;
  }
  return true;
}

/// Runs LLVM's default per-module pipeline at `optLevel` (nothing at 0).
static void optimize(llvm::Module &m, llvm::TargetMachine &tm, int optLevel) {
  if (optLevel <= 0)
    return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel ol = optLevel >= 3   ? llvm::OptimizationLevel::O3
                               : optLevel == 2 ? llvm::OptimizationLevel::O2
                                               : llvm::OptimizationLevel::O1;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(ol);
  mpm.run(m, mam);
}

/// The libraries the optimized module `m` calls into.
static LinkNeeds scanLinkNeeds(const llvm::Module &m) {
  LinkNeeds needs;
  needs.blas = m.getFunction("cblas_sgemm") != nullptr;
  needs.ukernels = llvm::any_of(m, [](const llvm::Function &f) {
    return f.isDeclaration() && (f.getName().starts_with("xfmr_uk_") ||
                                 f.getName().starts_with("_mlir_memref_to_llvm_"));
  });
  needs.openMP = m.getFunction("__kmpc_fork_call") != nullptr;
  return needs;
}

/// Writes `m` as an object file to `objPath`.
static bool emitObject(llvm::Module &m, llvm::TargetMachine &tm,
                       llvm::StringRef objPath, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(objPath, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + objPath.str() + "': " + ec.message();
    return false;
  }
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  pm.run(m);
  // A write error (a full disk) would otherwise end the process when `os`
  // is destroyed, on whichever thread.
  os.close();
  if (os.has_error()) {
    error = "cannot write '" + objPath.str() + "': " + os.error().message();
    os.clear_error();
    return false;
  }
  return true;
}

/// Prepares (see prepareModule), optimizes and writes `m` to the object file
/// `objPath`, adding to `needs` what it calls. Prints the optimized IR to
/// `llvmIR` if given.
static bool compileModule(llvm::Module &m, const HostTarget &target,
                          llvm::StringRef entry, int optLevel,
                          llvm::StringRef objPath, LinkNeeds &needs,
                          std::string &error, std::string *llvmIR) {
  std::unique_ptr<llvm::TargetMachine> tm =
      createTargetMachine(target, optLevel, error);
  if (!tm || !prepareModule(m, *tm, target, entry, error))
    return false;
  optimize(m, *tm, optLevel);
  if (llvmIR) {
    llvm::raw_string_ostream os(*llvmIR);
    m.print(os, nullptr);
  }
  needs.merge(scanLinkNeeds(m));
  return emitObject(m, *tm, objPath, error);
}

/// Links `objects` into the shared object `soPath` with the system C
/// compiler driver, and removes them.
static bool linkSharedObject(llvm::ArrayRef<std::string> objects,
                             llvm::StringRef soPath, const LinkNeeds &needs,
                             std::string &error) {
  llvm::scope_exit removeObjects([&] {
    for (const std::string &object : objects)
      llvm::sys::fs::remove(object);
  });
  std::string linker;
  for (const char *name : {"cc", "gcc", "clang-22", "clang"})
    if (auto p = llvm::sys::findProgramByName(name)) {
      linker = *p;
      break;
    }
  if (linker.empty()) {
    error = "no C compiler driver (cc, gcc or clang) to link the shared object";
    return false;
  }
  std::string so = soPath.str();
  llvm::SmallVector<llvm::StringRef> args{linker, "-shared", "-o", so};
  args.append(objects.begin(), objects.end());
  args.append({"-lm", "-Wl,-z,noexecstack"});
  if (needs.ukernels)
    args.push_back(XFMR_UKERNELS_LIB);
  if (needs.blas)
    args.push_back("-lopenblas");
  if (needs.openMP) {
    args.push_back("-L" XFMR_LIBOMP_DIR);
    args.push_back("-Wl,-rpath," XFMR_LIBOMP_DIR);
    args.push_back("-lomp");
  }
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 0, 0,
                                     &linkError);
  if (rc != 0) {
    error = "linking '" + so + "' with " + linker + " failed" +
            (linkError.empty() ? "" : ": " + linkError);
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Generating code on several threads
//===----------------------------------------------------------------------===//
//
// Decoder layers are outlined into one function (xfmr_layer_N) that
// xfmr_main calls once per layer, so a model has two or more big functions.
// LLVM optimizes and generates code function by function, so the functions
// are split into partitions, each its own module, LLVM context and object
// file, compiled on its own thread and linked together: on 2 cores a 22-layer
// model's codegen otherwise runs on one core while the other idles.
//
// A partition defines its functions and declares the others'; symbols of
// local linkage used across partitions become hidden external symbols, so
// the objects link but model.so exports no more than before.

namespace {
/// Which partition defines each function and global of the module.
struct PartitionPlan {
  unsigned numPartitions = 0;
  /// The defining partition of every definition (globals: partition 0).
  llvm::DenseMap<StringAttr, unsigned> owner;
  /// Definitions of local linkage used from another partition than their
  /// own: external and hidden in every partition.
  llvm::DenseSet<StringAttr> shared;
};

/// One partition's module and results, owned by its thread while it runs.
struct Partition {
  OwningOpRef<ModuleOp> module;
  std::string objPath;
  LinkNeeds needs;
  bool ok = false;
  std::string error;
};
} // namespace

/// The linkage of `op`, an llvm.func or llvm.mlir.global.
static LLVM::Linkage getLinkage(Operation *op) {
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op))
    return func.getLinkage();
  return cast<LLVM::GlobalOp>(op).getLinkage();
}

/// Whether `op` (an llvm.func or llvm.mlir.global) has a body or a value.
static bool isDefinition(Operation *op) {
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op))
    return !func.isExternal();
  auto global = cast<LLVM::GlobalOp>(op);
  return global.getValueOrNull() || !global.getInitializerRegion().empty();
}

/// Whether `op` is invisible outside its module (private or internal).
static bool hasLocalLinkage(Operation *op) {
  LLVM::Linkage linkage = getLinkage(op);
  return linkage == LLVM::Linkage::Private ||
         linkage == LLVM::Linkage::Internal;
}

/// Gives `op` external linkage and hidden visibility.
static void makeHiddenExternal(Operation *op) {
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op)) {
    func.setLinkage(LLVM::Linkage::External);
    func.setVisibility_(LLVM::Visibility::Hidden);
    return;
  }
  auto global = cast<LLVM::GlobalOp>(op);
  global.setLinkage(LLVM::Linkage::External);
  global.setVisibility_(LLVM::Visibility::Hidden);
}

/// Turns the copy `op` of a definition of another partition (its regions not
/// copied) into an external declaration.
static void makeDeclaration(Operation *op) {
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op)) {
    func.setLinkage(LLVM::Linkage::External);
    return;
  }
  auto global = cast<LLVM::GlobalOp>(op);
  global.removeValueAttr();
  global.setLinkage(LLVM::Linkage::External);
}

/// The number of partitions worth making: one per core, at most one per
/// function with a body.
static unsigned countPartitions(ModuleOp module) {
  unsigned functions = llvm::count_if(
      module.getOps<LLVM::LLVMFuncOp>(),
      [](LLVM::LLVMFuncOp func) { return !func.isExternal(); });
  return std::min(functions, std::max(1u, std::thread::hardware_concurrency()));
}

/// Assigns the functions with a body to `plan.numPartitions` partitions,
/// balancing their op counts greedily (the largest first, each onto the
/// least loaded partition), and the globals to partition 0.
static void assignDefinitions(ModuleOp module, PartitionPlan &plan) {
  llvm::SmallVector<std::pair<int64_t, Operation *>> functions;
  for (Operation &op : module.getBody()->getOperations()) {
    if (!isDefinition(&op))
      continue;
    if (isa<LLVM::GlobalOp>(op)) {
      plan.owner[SymbolTable::getSymbolName(&op)] = 0;
      continue;
    }
    int64_t size = 0;
    op.walk([&](Operation *) { ++size; });
    functions.push_back({size, &op});
  }
  llvm::stable_sort(functions, [](const auto &a, const auto &b) {
    return a.first > b.first;
  });
  llvm::SmallVector<int64_t> load(plan.numPartitions, 0);
  for (auto [size, op] : functions) {
    unsigned least = llvm::min_element(load) - load.begin();
    load[least] += size;
    plan.owner[SymbolTable::getSymbolName(op)] = least;
  }
}

/// Collects into `plan.shared` the local definitions used from another
/// partition than their own; `ciface` is used from partition 0 (the entry
/// wrapper). Fails if some uses cannot be known.
static LogicalResult findSharedSymbols(ModuleOp module, llvm::StringRef ciface,
                                       PartitionPlan &plan) {
  llvm::DenseSet<StringAttr> locals;
  for (Operation &op : module.getBody()->getOperations())
    if (isDefinition(&op) && hasLocalLinkage(&op))
      locals.insert(SymbolTable::getSymbolName(&op));
  auto use = [&](StringAttr symbol, unsigned partition) {
    if (locals.contains(symbol) && plan.owner.lookup(symbol) != partition)
      plan.shared.insert(symbol);
  };
  use(StringAttr::get(module.getContext(), ciface), 0);
  for (Operation &op : module.getBody()->getOperations()) {
    if (!isDefinition(&op))
      continue;
    std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(&op);
    if (!uses)
      return failure();
    unsigned partition = plan.owner.lookup(SymbolTable::getSymbolName(&op));
    for (const SymbolTable::SymbolUse &u : *uses)
      use(u.getSymbolRef().getRootReference(), partition);
  }
  return success();
}

/// Plans the partitions of `module`, or fails where it is not worth it (one
/// core, one function) or not known to be safe: an MLIR context that must
/// not be used from several threads, module-level ops other than functions
/// and globals, or linkages other than external, private and internal.
static FailureOr<PartitionPlan> planPartitions(ModuleOp module,
                                               llvm::StringRef ciface) {
  if (!module->getContext()->isMultithreadingEnabled())
    return failure();
  for (Operation &op : module.getBody()->getOperations()) {
    if (!isa<LLVM::LLVMFuncOp, LLVM::GlobalOp>(op))
      return failure();
    if (isDefinition(&op) && getLinkage(&op) != LLVM::Linkage::External &&
        !hasLocalLinkage(&op))
      return failure();
  }
  PartitionPlan plan;
  plan.numPartitions = countPartitions(module);
  if (plan.numPartitions < 2)
    return failure();
  assignDefinitions(module, plan);
  if (failed(findSharedSymbols(module, ciface, plan)))
    return failure();
  return plan;
}

/// A copy of `module` that defines partition `index`'s functions and globals
/// and declares the rest it may use. Copies only the bodies it defines.
static OwningOpRef<ModuleOp> buildPartition(ModuleOp module,
                                            const PartitionPlan &plan,
                                            unsigned index) {
  OwningOpRef<ModuleOp> partition = module.cloneWithoutRegions();
  partition->getBodyRegion().emplaceBlock();
  OpBuilder b = OpBuilder::atBlockEnd(partition->getBody());
  for (Operation &op : module.getBody()->getOperations()) {
    StringAttr name = SymbolTable::getSymbolName(&op);
    auto owner = plan.owner.find(name);
    bool defined = owner == plan.owner.end() || owner->second == index;
    bool shared = plan.shared.contains(name);
    // Local definitions of other partitions that this one does not use.
    if (!defined && !shared && hasLocalLinkage(&op))
      continue;
    Operation *copy = defined ? b.clone(op) : b.cloneWithoutRegions(op);
    if (!defined)
      makeDeclaration(copy);
    if (shared)
      makeHiddenExternal(copy);
    // Outlined layers are internal to model.so.
    else if (name.getValue().starts_with("xfmr_layer_") &&
             getLinkage(copy) == LLVM::Linkage::External)
      makeHiddenExternal(copy);
  }
  return partition;
}

/// Translates, optimizes and writes `partition`'s object, adding the entry
/// wrapper for `entry` if not empty. Runs on the partition's own thread.
static void generatePartition(Partition &partition, const HostTarget &target,
                              llvm::StringRef entry, int optLevel) {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> m =
      translateToLLVMIR(*partition.module, llvmContext, partition.error);
  partition.module = nullptr; // Not needed any more.
  if (!m)
    return;
  partition.ok = compileModule(*m, target, entry, optLevel, partition.objPath,
                               partition.needs, partition.error,
                               /*llvmIR=*/nullptr);
}

/// Compiles the partitions of `plan` on one thread each and links their
/// objects into `soPath`. Partition 0 carries the entry wrapper.
static bool emitPartitioned(ModuleOp module, const PartitionPlan &plan,
                            const HostTarget &target, llvm::StringRef entry,
                            llvm::StringRef soPath, int optLevel,
                            std::string &error) {
  // Copies are made here: the threads only touch their own copy.
  std::vector<Partition> partitions(plan.numPartitions);
  for (unsigned i = 0; i < plan.numPartitions; ++i) {
    partitions[i].module = buildPartition(module, plan, i);
    partitions[i].objPath = (soPath + "." + llvm::Twine(i) + ".o").str();
  }
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < plan.numPartitions; ++i)
    threads.emplace_back(generatePartition, std::ref(partitions[i]),
                         std::cref(target), i == 0 ? entry : "", optLevel);
  for (std::thread &thread : threads)
    thread.join();

  llvm::SmallVector<std::string> objects;
  LinkNeeds needs;
  for (Partition &partition : partitions) {
    objects.push_back(partition.objPath);
    needs.merge(partition.needs);
  }
  auto failedPartition = llvm::find_if(
      partitions, [](const Partition &partition) { return !partition.ok; });
  if (failedPartition != partitions.end()) {
    for (const std::string &object : objects)
      llvm::sys::fs::remove(object);
    error = failedPartition->error;
    return false;
  }
  return linkSharedObject(objects, soPath, needs, error);
}

LogicalResult emitSharedObject(ModuleOp module, const HostTarget &target,
                               llvm::StringRef entry, llvm::StringRef soPath,
                               int optLevel, std::string &error,
                               std::string *llvmIR) {
  registerBuiltinDialectTranslation(*module->getContext());
  registerLLVMDialectTranslation(*module->getContext());
  registerOpenMPDialectTranslation(*module->getContext());
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  // The printed IR is of one module.
  if (!llvmIR) {
    FailureOr<PartitionPlan> plan =
        planPartitions(module, ("_mlir_ciface_" + entry).str());
    if (succeeded(plan))
      return success(emitPartitioned(module, *plan, target, entry, soPath,
                                     optLevel, error));
  }

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> m =
      translateToLLVMIR(module, llvmContext, error);
  if (!m)
    return failure();
  // Object file next to the shared object, removed after linking.
  std::string objPath = (soPath + ".o").str();
  LinkNeeds needs;
  if (!compileModule(*m, target, entry, optLevel, objPath, needs, error,
                     llvmIR)) {
    llvm::sys::fs::remove(objPath);
    return failure();
  }
  return success(linkSharedObject({objPath}, soPath, needs, error));
}

} // namespace xfmr::cpu
