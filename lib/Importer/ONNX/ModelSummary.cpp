//===- ModelSummary.cpp - human-readable summary of an imported model -----===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Importer/ModelSummary.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

using namespace mlir;

namespace {
void printType(Type type, ArrayAttr dimParams, llvm::raw_ostream &os) {
  auto tensor = dyn_cast<TensorType>(type);
  if (!tensor) {
    os << type;
    return;
  }
  os << tensor.getElementType() << " ";
  if (!tensor.hasRank()) {
    os << "[*]";
    return;
  }
  os << "[";
  for (int64_t i = 0; i < tensor.getRank(); ++i) {
    if (i)
      os << ", ";
    StringRef param;
    if (dimParams && i < static_cast<int64_t>(dimParams.size()))
      if (auto s = dyn_cast<StringAttr>(dimParams[i]))
        param = s.getValue();
    if (!tensor.isDynamicDim(i))
      os << tensor.getDimSize(i);
    else
      os << (param.empty() ? "?" : param);
  }
  os << "]";
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::format(u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return out;
}
} // namespace

void xfmr::printModelSummary(ModuleOp module, llvm::raw_ostream &os) {
  if (auto opsets =
          module->getAttrOfType<DictionaryAttr>(onnx::kOpsetImportAttrName)) {
    os << "opsets:";
    for (NamedAttribute a : opsets)
      os << " " << a.getName().strref() << "="
         << cast<IntegerAttr>(a.getValue()).getInt();
    os << "\n";
  }
  if (auto producer = module->getAttrOfType<StringAttr>("onnx.producer"))
    os << "producer: " << producer.getValue() << "\n";
  module.walk([&](func::FuncOp func) {
    os << "function @" << func.getName() << "\n";
    os << "  inputs:\n";
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto name = func.getArgAttrOfType<StringAttr>(i, "onnx.name");
      os << "    " << (name ? name.getValue() : "?") << ": ";
      printType(func.getArgument(i).getType(),
                func.getArgAttrOfType<ArrayAttr>(i, "onnx.dim_params"), os);
      os << "\n";
    }
    os << "  outputs:\n";
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      os << "    " << (name ? name.getValue() : "?") << ": ";
      printType(func.getFunctionType().getResult(i),
                func.getResultAttrOfType<ArrayAttr>(i, "onnx.dim_params"), os);
      os << "\n";
    }
    uint64_t weightBytes = 0, weights = 0, total = 0;
    llvm::MapVector<StringRef, int64_t> counts;
    func.walk([&](Operation *op) {
      if (!isa<onnx::ONNXDialect>(op->getDialect()) || isa<onnx::NoValueOp>(op))
        return;
      if (auto c = dyn_cast<onnx::ConstantOp>(op)) {
        if (auto value = c.getValueAttr())
          if (isa<DenseResourceElementsAttr>(value)) {
            auto type = cast<ShapedType>(value.getType());
            ++weights;
            weightBytes +=
                type.getNumElements() *
                std::max<uint64_t>(1, type.getElementTypeBitWidth() / 8);
          }
        return;
      }
      ++total;
      ++counts[op->getName().getStringRef()];
    });
    os << "  weights: " << weights << " tensors, " << humanBytes(weightBytes)
       << "\n";
    os << "  ops: " << total << "\n";
    auto sorted = counts.takeVector();
    llvm::sort(sorted, [](auto &a, auto &b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    for (auto &[name, n] : sorted)
      os << "    "
         << llvm::format("%-40s %6lld", name.str().c_str(), (long long)n)
         << "\n";
  });
}
