//===- xfmr-import-fuzzer.cpp - libFuzzer target for the ONNX importer ----===//
//
// Part of xfmr. Feeds arbitrary bytes to the importer as a model file, then
// simplifies shapes and verifies. Any crash, sanitizer report, or a module
// that fails to verify after a successful import is a bug.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"
#include "xfmr/Importer/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A fresh context per input: resource blobs live as long as the context.
  mlir::DialectRegistry registry;
  xfmr::registerONNXImportDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  xfmr::ONNXImportOptions options;
  options.simplifyShapes = true;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = xfmr::importONNXModelFromBuffer(
      bytes, "<fuzz>", /*baseDir=*/"", &context, options);
  if (module && mlir::failed(mlir::verify(*module)))
    std::abort(); // an accepted model must verify
  return 0;
}
