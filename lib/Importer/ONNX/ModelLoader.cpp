//===- ModelLoader.cpp - read, parse and check an ONNX model file ---------===//
//
// Part of xfmr.
//
// The entry points of the importer. Protobuf may throw (std::bad_alloc on a
// hostile length prefix); this file is built with exceptions and catches them
// here, before anything reaches MLIR (which is built without).
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "dialects/onnx/IR/ONNXOps.h"
#include "xfmr/Importer/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>

#include <sys/stat.h>

using namespace mlir;
using namespace xfmr::onnx_import;

namespace {
/// ONNX IR versions the importer understands (IR 3 = ONNX 1.0 release with
/// opset imports; IR 14 = ONNX 1.23, what its helpers write by default).
/// IR 13 and 14 add element types (2-bit integers, 6-bit floats) and no
/// structure the importer reads: tensors of types it does not know are
/// refused by type, as before.
constexpr int64_t kMinIRVersion = 3, kMaxIRVersion = 14;
constexpr uint64_t kProtobufLimit = (uint64_t(1) << 31) - 1;

OwningOpRef<ModuleOp> importBytes(const ImportContext &ic,
                                  llvm::StringRef bytes) {
  if (bytes.empty()) {
    ic.error() << "file is empty";
    return {};
  }
  if (bytes.size() > kProtobufLimit) {
    ic.error() << "file is " << bytes.size()
               << " bytes, above protobuf's 2 GiB limit; store the weights as "
                  "external data";
    return {};
  }
  pb::ModelProto model;
  try {
    google::protobuf::io::CodedInputStream stream(
        reinterpret_cast<const uint8_t *>(bytes.data()),
        static_cast<int>(bytes.size()));
    stream.SetRecursionLimit(64);
    if (!model.ParseFromCodedStream(&stream) ||
        !stream.ConsumedEntireMessage()) {
      ic.error() << "not a valid ONNX model (protobuf parse failed: truncated "
                    "or corrupt)";
      return {};
    }
  } catch (const std::exception &e) {
    ic.error() << "not a valid ONNX model (protobuf parse failed: " << e.what()
               << ")";
    return {};
  }
  if (!model.has_ir_version()) {
    ic.error() << "model has no ir_version";
    return {};
  }
  if (model.ir_version() < kMinIRVersion ||
      model.ir_version() > kMaxIRVersion) {
    ic.error() << "unsupported ir_version " << model.ir_version()
               << " (supported: " << kMinIRVersion << " to " << kMaxIRVersion
               << ")";
    return {};
  }
  try {
    return importGraph(ic, model);
  } catch (const std::exception &e) {
    ic.error() << "import failed: " << e.what();
    return {};
  }
}
} // namespace

InFlightDiagnostic ImportContext::error() const {
  return mlir::emitError(FileLineColLoc::get(ctx, displayName, 0, 0));
}

Location ImportContext::nodeLoc(const pb::NodeProto &node, int index) const {
  std::string name =
      node.name().empty() ? "#" + std::to_string(index) : node.name();
  return NameLoc::get(StringAttr::get(ctx, name),
                      NameLoc::get(StringAttr::get(ctx, node.op_type())));
}

std::string xfmr::onnx_import::describeNode(const pb::NodeProto &node,
                                            int index) {
  std::string name = node.name().empty() ? "#" + std::to_string(index)
                                         : "'" + node.name() + "'";
  return "node " + name + " (" + node.op_type() + ")";
}

void xfmr::registerONNXImportDialects(DialectRegistry &registry) {
  registry.insert<func::FuncDialect, xfmr::onnx::ONNXDialect>();
}

OwningOpRef<ModuleOp> xfmr::importONNXModel(llvm::StringRef path,
                                            MLIRContext *context,
                                            const ONNXImportOptions &options) {
  context->loadDialect<func::FuncDialect, xfmr::onnx::ONNXDialect>();
  ImportContext ic{context, path.str(), "", options};
  struct stat st;
  if (::stat(path.str().c_str(), &st) != 0) {
    ic.error() << "cannot open file";
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    ic.error() << "not a regular file";
    return {};
  }
  if (static_cast<uint64_t>(st.st_size) > kProtobufLimit) {
    ic.error() << "file is " << st.st_size
               << " bytes, above protobuf's 2 GiB limit; store the weights as "
                  "external data";
    return {};
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    ic.error() << "cannot read file: " << buffer.getError().message();
    return {};
  }
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  ic.baseDir = std::string(dir);
  return importBytes(ic, (*buffer)->getBuffer());
}

OwningOpRef<ModuleOp> xfmr::importONNXModelFromBuffer(
    llvm::StringRef bytes, llvm::StringRef displayName, llvm::StringRef baseDir,
    MLIRContext *context, const ONNXImportOptions &options) {
  context->loadDialect<func::FuncDialect, xfmr::onnx::ONNXDialect>();
  ImportContext ic{context, displayName.str(), baseDir.str(), options};
  return importBytes(ic, bytes);
}
