//===- ONNXImporter.h - ONNX model to onnx dialect --------------*- C++ -*-===//
//
// Part of xfmr.
//
// Imports an ONNX model file into a module holding one func.func of onnx
// dialect ops. The model is validated first (structure, shapes, tensor data,
// attributes, external data); a bad model yields one error diagnostic naming
// the file and the node or tensor, and a null module. Weights become
// dense_resource blobs: embedded ones are moved out of the parsed protobuf,
// external ones are memory-mapped, so importing costs memory proportional to
// the graph, not to the weights.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_IMPORTER_ONNXIMPORTER_H
#define XFMR_IMPORTER_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir

namespace xfmr {

struct ONNXImportOptions {
  /// Name of the function the graph becomes.
  std::string functionName = "main";
  /// Tensors with at most this many elements become inline dense attributes
  /// (readable and foldable); larger ones become resource blobs.
  int64_t inlineElementLimit = 64;
  /// Run shape inference and fold the exporter's shape arithmetic.
  bool simplifyShapes = false;
  /// Upper bounds applied to every tensor type in the model.
  int64_t maxRank = 32;
  int64_t maxDim = int64_t(1) << 32;
  /// Largest element count of any tensor type (2^36: 256 GiB of fp32).
  int64_t maxElements = int64_t(1) << 36;
};

/// Registers the dialects an imported module uses.
void registerONNXImportDialects(mlir::DialectRegistry &registry);

/// Imports the model at `path`. On failure, an error diagnostic has been
/// emitted through `context` and the result is null.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXModel(llvm::StringRef path, mlir::MLIRContext *context,
                const ONNXImportOptions &options = {});

/// Imports a model held in memory (the fuzzer's entry point). External data
/// is resolved against `baseDir`; an empty one rejects external data.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXModelFromBuffer(llvm::StringRef bytes, llvm::StringRef displayName,
                          llvm::StringRef baseDir, mlir::MLIRContext *context,
                          const ONNXImportOptions &options = {});

} // namespace xfmr

#endif // XFMR_IMPORTER_ONNXIMPORTER_H
