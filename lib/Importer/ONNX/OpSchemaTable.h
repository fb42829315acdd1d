//===- OpSchemaTable.h - what the importer knows of each ONNX op -*- C++
//-*-===//
//
// Part of xfmr. The table itself is generated (OpSchemaTable.inc) from ONNX's
// and onnxruntime's operator schemas by scripts/gen_onnx_dialect.py.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_IMPORTER_ONNX_OPSCHEMATABLE_H
#define XFMR_LIB_IMPORTER_ONNX_OPSCHEMATABLE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace xfmr::onnx_import {

enum class Param { Single, Optional, Variadic };
enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor };

struct FormalParam {
  const char *name;
  Param option;
  /// Type-constraint name ("T", "T1") or a literal type ("tensor(int64)").
  const char *typeStr;
  /// Bit i set when TensorProto data type i is allowed.
  uint32_t allowedTypes;
};

struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool required;
};

struct OpSchema {
  llvm::StringRef domain; ///< "" for ai.onnx
  llvm::StringRef name;
  llvm::StringRef mlirName;
  llvm::ArrayRef<int> importableVersions;
  llvm::ArrayRef<int> allVersions;
  llvm::ArrayRef<FormalParam> inputs;
  llvm::ArrayRef<FormalParam> outputs;
  llvm::ArrayRef<AttrSpec> attributes;

  const AttrSpec *findAttr(llvm::StringRef attr) const;
  /// ONNX's rule: the largest since-version not above `opset`; 0 if none.
  int resolveVersion(int64_t opset) const;
};

/// The schema of (domain, op type), or nullptr when xfmr does not import it.
/// "ai.onnx" is accepted as the default domain.
const OpSchema *lookupOpSchema(llvm::StringRef domain, llvm::StringRef opType);

/// True if any op of `domain` is known (to tell unknown ops from unknown
/// domains).
bool isKnownDomain(llvm::StringRef domain);

const char *attrKindName(AttrKind kind);

/// Newest opset of `domain` the table was generated from; 0 if unknown.
int64_t maxSupportedOpset(llvm::StringRef domain);

} // namespace xfmr::onnx_import

#endif // XFMR_LIB_IMPORTER_ONNX_OPSCHEMATABLE_H
