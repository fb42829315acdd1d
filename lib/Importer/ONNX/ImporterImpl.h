//===- ImporterImpl.h - shared state of the ONNX importer -------*- C++ -*-===//
//
// Part of xfmr. Internal to lib/Importer/ONNX.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_IMPORTER_ONNX_IMPORTERIMPL_H
#define XFMR_LIB_IMPORTER_ONNX_IMPORTERIMPL_H

#include "xfmr/Importer/ONNXImporter.h"
#include "xfmr/Support/MappedSources.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"

#include "onnx/onnx_pb.h"

#include <memory>

namespace xfmr::onnx_import {

namespace pb = ::onnx;

/// Where diagnostics go and what limits apply while importing one model.
struct ImportContext {
  mlir::MLIRContext *ctx;
  std::string displayName; ///< the model path as the user gave it
  std::string baseDir;     ///< directory external data is resolved against
  ONNXImportOptions options;

  /// An error about the model file as a whole; callers stream the details.
  mlir::InFlightDiagnostic error() const;
  /// Location of a node: its name (or "node #i") with the op type inside.
  mlir::Location nodeLoc(const pb::NodeProto &node, int index) const;
};

/// "node 'name' (OpType)" or "node #3 (OpType)" for unnamed nodes.
std::string describeNode(const pb::NodeProto &node, int index);

/// A read-only mapping of one external data file, shared by the blobs that
/// point into it; registered in xfmr::MappedSources while it lives.
struct MappedFile {
  llvm::sys::fs::mapped_file_region region;
  uint64_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile &) = delete;
  ~MappedFile() {
    if (region)
      xfmr::MappedSources::get().remove(region.const_data());
  }
};

/// Resolves and checks external data references of one model.
class ExternalDataResolver {
public:
  explicit ExternalDataResolver(const ImportContext &ic) : ic(ic) {}

  /// Checks `tensor`'s external_data entries (location containment, no links,
  /// numeric in-bounds offset/length, exact length == `expectedBytes`) and
  /// returns the bytes, kept alive by `keepAlive`.
  mlir::FailureOr<llvm::ArrayRef<char>>
  resolve(const pb::TensorProto &tensor, uint64_t expectedBytes,
          std::shared_ptr<MappedFile> &keepAlive);

private:
  mlir::FailureOr<std::shared_ptr<MappedFile>> open(llvm::StringRef tensorName,
                                                    llvm::StringRef location);
  const ImportContext &ic;
  llvm::StringMap<std::shared_ptr<MappedFile>> files;
};

/// Checks dims (non-negative, bounded, element count without int64 overflow)
/// and returns the element count. `what` names the tensor for errors.
mlir::FailureOr<int64_t> checkDims(const ImportContext &ic,
                                   llvm::StringRef what,
                                   llvm::ArrayRef<int64_t> dims);

/// Bytes per element of an ONNX data type as stored in raw_data, with int4
/// types reported as 0 (packed two per byte); -1 when unsupported.
int64_t rawElementBytes(int32_t dataType);

/// Imports a tensor (initializer or attribute value) as an ElementsAttr:
/// small ones inline, larger ones as resource blobs that take over the
/// protobuf's buffer or point into mapped external data. `tensor` may be
/// modified (its raw_data is moved out).
mlir::FailureOr<mlir::ElementsAttr>
importTensor(const ImportContext &ic, pb::TensorProto &tensor,
             llvm::StringRef what, ExternalDataResolver &external);

/// Converts a value's TypeProto into a tensor type; dims with dim_param (or
/// no value) become dynamic. `what` names the value for errors.
mlir::FailureOr<mlir::TensorType> importValueType(const ImportContext &ic,
                                                  const pb::TypeProto &type,
                                                  llvm::StringRef what);

/// Imports a validated ModelProto into a module.
mlir::OwningOpRef<mlir::ModuleOp> importGraph(const ImportContext &ic,
                                              pb::ModelProto &model);

} // namespace xfmr::onnx_import

#endif // XFMR_LIB_IMPORTER_ONNX_IMPORTERIMPL_H
