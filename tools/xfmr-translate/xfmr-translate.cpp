//===- xfmr-translate.cpp - ONNX import driver ----------------------------===//
//
// Part of xfmr.
//
//   xfmr-translate --import-onnx model.onnx [-o model.mlir]
//
// Its own main rather than MlirTranslateMain: that reads the whole input into
// memory first, while the importer maps the file (and its external data).
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/xfmr/IR/XfmrOps.h"
#include "xfmr/Importer/ModelSummary.h"
#include "xfmr/Importer/ONNXImporter.h"
#include "xfmr/Importer/ResourcePrinting.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("xfmr-translate options");
cl::opt<std::string> inputFilename(cl::Positional, cl::desc("<model.onnx>"),
                                   cl::Required, cl::cat(category));
cl::opt<std::string> outputFilename("o",
                                    cl::desc("Output file (default: stdout)"),
                                    cl::value_desc("filename"), cl::init("-"),
                                    cl::cat(category));
cl::opt<bool>
    importONNX("import-onnx",
               cl::desc("Import an ONNX model (.onnx) into the onnx dialect"),
               cl::cat(category));
cl::opt<bool> simplifyShapes(
    "onnx-simplify-shapes",
    cl::desc(
        "After import, infer shapes and fold the exporter's shape arithmetic"),
    cl::init(false), cl::cat(category));
cl::opt<int64_t>
    inlineLimit("onnx-inline-limit",
                cl::desc("Tensors with at most this many elements become "
                         "inline dense attributes, larger ones resource blobs"),
                cl::init(64), cl::cat(category));
cl::opt<bool>
    summary("onnx-summary",
            cl::desc("Print a summary of the imported model instead of the IR"),
            cl::init(false), cl::cat(category));
cl::opt<std::string> functionName("onnx-function-name",
                                  cl::desc("Name of the imported function"),
                                  cl::init("main"), cl::cat(category));
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "xfmr translation driver\n\n"
      "  xfmr-translate --import-onnx model.onnx [-o model.mlir]\n\n"
      "MLIR's printing flags (--mlir-print-debuginfo,\n"
      "--mlir-elide-resource-strings-if-larger=N, ...) are accepted too;\n"
      "--help-hidden lists them.\n");
  if (!importONNX) {
    llvm::errs()
        << "xfmr-translate: error: choose a translation (--import-onnx)\n";
    return 1;
  }
  mlir::DialectRegistry registry;
  xfmr::registerONNXImportDialects(registry);
  registry.insert<xfmr::XfmrDialect>();
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);

  xfmr::ONNXImportOptions options;
  options.simplifyShapes = simplifyShapes;
  options.inlineElementLimit = inlineLimit;
  options.functionName = functionName;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      xfmr::importONNXModel(inputFilename, &context, options);
  if (!module)
    return 1;

  std::string error;
  auto output = mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "xfmr-translate: error: " << error << "\n";
    return 1;
  }
  if (summary) {
    xfmr::printModelSummary(*module, output->os());
  } else {
    mlir::OpPrintingFlags flags; // from the command line's --mlir-* flags
    if (std::optional<uint64_t> limit = flags.getLargeResourceStringLimit())
      xfmr::elideLargeResourceBlobs(&context, *limit);
    module->print(output->os(), flags);
  }
  output->os() << "\n";
  output->keep();
  return 0;
}
