//===- AssembleKernels.cpp - PTX out of gpu.binary, through ptxas ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/GPUTarget.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace xfmr::gpu {

static LogicalResult writeFile(llvm::StringRef path, llvm::StringRef bytes,
                               std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    os << bytes;
  if (ec || os.has_error()) {
    error = ("cannot write '" + path + "': " + (ec ? ec : os.error()).message()).str();
    return failure();
  }
  return success();
}

FailureOr<std::vector<KernelReport>>
assembleKernels(ModuleOp module, const GPUTarget &target,
                const std::optional<std::string> &toolkit, llvm::StringRef dir,
                std::string &error) {
  std::vector<KernelReport> reports;
  auto binaries = llvm::to_vector(module.getOps<mlir::gpu::BinaryOp>());
  if (binaries.size() > 1) {
    error = "expected the kernels in one gpu.module (xfmr-gpu-merge-modules)";
    return failure();
  }
  for (mlir::gpu::BinaryOp binary : binaries) {
    SmallVector<Attribute> objects;
    for (Attribute a : binary.getObjectsAttr()) {
      auto object = cast<mlir::gpu::ObjectAttr>(a);
      if (object.getFormat() != mlir::gpu::CompilationTarget::Assembly) {
        objects.push_back(a);
        continue;
      }
      // The serializer leaves a trailing NUL for the JIT; the file has none.
      llvm::StringRef ptx = object.getObject().getValue().rtrim('\0');
      llvm::SmallString<256> ptxPath(dir);
      llvm::sys::path::append(ptxPath, "kernels.ptx");
      if (failed(writeFile(ptxPath, ptx, error)))
        return failure();
      reports = scanPTX(ptx);
      if (!toolkit) {
        objects.push_back(a);
        continue;
      }
      llvm::SmallString<256> cubinPath(dir);
      llvm::sys::path::append(cubinPath, ("kernels." + target.chip + ".cubin").str());
      std::string log;
      if (!assemblePTX(*toolkit, target, ptx, cubinPath, log, error))
        return failure();
      parsePtxasReport(log, reports);
      auto cubin = llvm::MemoryBuffer::getFile(cubinPath, /*IsText=*/false);
      if (!cubin) {
        error = ("cannot read '" + cubinPath + "': " + cubin.getError().message()).str();
        return failure();
      }
      objects.push_back(mlir::gpu::ObjectAttr::get(
          module.getContext(), object.getTarget(), mlir::gpu::CompilationTarget::Binary,
          StringAttr::get(module.getContext(), (*cubin)->getBuffer()), object.getProperties(),
          object.getKernels()));
    }
    binary.setObjectsAttr(ArrayAttr::get(module.getContext(), objects));
  }
  return reports;
}

} // namespace xfmr::gpu
