//===- ObjectEmitter.cpp - LLVM dialect to a host shared object -----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/ObjectEmitter.h"
#include "xfmr/runtime/CPUFeatures.h"
#include "xfmr/runtime/Manifest.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

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

LogicalResult emitSharedObject(ModuleOp module, const HostTarget &target,
                               llvm::StringRef entry, llvm::StringRef soPath,
                               int optLevel, std::string &error,
                               std::string *llvmIR) {
  registerBuiltinDialectTranslation(*module->getContext());
  registerLLVMDialectTranslation(*module->getContext());
  registerOpenMPDialectTranslation(*module->getContext());
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> m =
      translateModuleToLLVMIR(module, llvmContext, "xfmr_model");
  if (!m) {
    error = "translation to LLVM IR failed";
    return failure();
  }
  llvm::Triple triple(target.triple);
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return failure();
  llvm::TargetOptions options;
  auto level = optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
               : optLevel == 0 ? llvm::CodeGenOptLevel::None
                               : llvm::CodeGenOptLevel::Default;
  std::unique_ptr<llvm::TargetMachine> tm(llvmTarget->createTargetMachine(
      triple, target.cpu, target.features, options, llvm::Reloc::PIC_,
      std::nullopt, level));
  if (!tm) {
    error = "cannot create a target machine for " + target.triple;
    return failure();
  }
  m->setTargetTriple(triple);
  m->setDataLayout(tm->createDataLayout());
  if (!addEntryWrapper(*m, entry, error))
    return failure();
  for (llvm::Function &f : *m)
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", target.cpu);
      if (!target.features.empty())
        f.addFnAttr("target-features", target.features);
    }
  if (llvm::verifyModule(*m, &llvm::errs())) {
    error = "generated LLVM IR does not verify";
    return failure();
  }

  if (optLevel > 0) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions tuning;
    tuning.LoopVectorization = true;
    tuning.SLPVectorization = true;
    llvm::PassBuilder pb(tm.get(), tuning);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel ol = optLevel >= 3   ? llvm::OptimizationLevel::O3
                                 : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                 : llvm::OptimizationLevel::O1;
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(ol);
    mpm.run(*m, mam);
  }
  if (llvmIR) {
    llvm::raw_string_ostream os(*llvmIR);
    m->print(os, nullptr);
  }

  bool usesBLAS = m->getFunction("cblas_sgemm") != nullptr;
  // Quantized products call the micro-kernels (runtime/ukernels).
  bool usesUkernels = llvm::any_of(*m, [](const llvm::Function &f) {
    return f.isDeclaration() && f.getName().starts_with("xfmr_uk_");
  });
  // Products split across cores (xfmr-compile --threads) call LLVM's libomp.
  bool usesOpenMP = m->getFunction("__kmpc_fork_call") != nullptr;

  // Object file next to the shared object, removed after linking.
  std::string objPath = (soPath + ".o").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec, llvm::sys::fs::OF_None);
    if (ec) {
      error = "cannot write '" + objPath + "': " + ec.message();
      return failure();
    }
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      error = "the target cannot emit object files";
      return failure();
    }
    pm.run(*m);
  }
  std::string linker;
  for (const char *name : {"cc", "gcc", "clang-22", "clang"})
    if (auto p = llvm::sys::findProgramByName(name)) {
      linker = *p;
      break;
    }
  if (linker.empty()) {
    llvm::sys::fs::remove(objPath);
    error = "no C compiler driver (cc, gcc or clang) to link the shared object";
    return failure();
  }
  std::string so = soPath.str();
  llvm::SmallVector<llvm::StringRef> args{linker, "-shared", "-o", so, objPath,
                                          "-lm", "-Wl,-z,noexecstack"};
  if (usesUkernels)
    args.push_back(XFMR_UKERNELS_LIB);
  // xfmr-contractions-to-blas calls OpenBLAS's sgemm.
  if (usesBLAS)
    args.push_back("-lopenblas");
  if (usesOpenMP) {
    args.push_back("-L" XFMR_LIBOMP_DIR);
    args.push_back("-Wl,-rpath," XFMR_LIBOMP_DIR);
    args.push_back("-lomp");
  }
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 0, 0,
                                     &linkError);
  llvm::sys::fs::remove(objPath);
  if (rc != 0) {
    error = "linking '" + so + "' with " + linker + " failed" +
            (linkError.empty() ? "" : ": " + linkError);
    return failure();
  }
  return success();
}

} // namespace xfmr::cpu
