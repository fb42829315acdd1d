//===- KernelName.h - kernel names from the ops they compute ----*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_TARGET_GPU_KERNELNAME_H
#define XFMR_LIB_TARGET_GPU_KERNELNAME_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"

#include <string>

namespace xfmr::gpu {

/// "k12_model_layers_0_mlp_down_proj_MatMul": a prefix, the kernel's number
/// and the ONNX node it computes (the first name in `loc`), as a PTX
/// identifier of at most 96 characters.
inline std::string kernelName(mlir::Location loc, llvm::StringRef prefix, unsigned index) {
  std::string node;
  loc->walk([&](mlir::Location l) {
    if (auto name = mlir::dyn_cast<mlir::NameLoc>(l)) {
      node = name.getName().str();
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  std::string name = prefix.str() + std::to_string(index) + "_";
  for (char c : node) {
    bool ok = llvm::isAlnum(c);
    if (!ok && name.back() == '_')
      continue;
    name += ok ? c : '_';
  }
  while (name.back() == '_')
    name.pop_back();
  return name.substr(0, 96);
}

} // namespace xfmr::gpu

#endif // XFMR_LIB_TARGET_GPU_KERNELNAME_H
