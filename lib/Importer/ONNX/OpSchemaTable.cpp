//===- OpSchemaTable.cpp - expands the generated op schema table ----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "OpSchemaTable.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <vector>

using namespace xfmr::onnx_import;

namespace {
#define ONNX_LIST(...) __VA_ARGS__

// First pass over the table: only the opset it was generated for.
#define ONNX_OP(...)
#define ONNX_MAX_OPSET(N) constexpr int64_t kMaxDefaultOpset = N;
#include "OpSchemaTable.inc"
#undef ONNX_OP
#undef ONNX_MAX_OPSET
#define ONNX_MAX_OPSET(N)

struct Entry {
  std::vector<int> importable, all;
  std::vector<FormalParam> inputs, outputs;
  std::vector<AttrSpec> attrs;
  OpSchema schema;
};

std::vector<Entry> &entries() {
  static std::vector<Entry> table = [] {
    std::vector<Entry> t;
#define ONNX_OP(DOMAIN, NAME, MLIR, IMPORTABLE, ALL, INS, OUTS, ATTRS)         \
  t.push_back(Entry{{IMPORTABLE}, {ALL}, {INS}, {OUTS}, {ATTRS}, {}});         \
  t.back().schema.domain = DOMAIN;                                             \
  t.back().schema.name = NAME;                                                 \
  t.back().schema.mlirName = MLIR;
#include "OpSchemaTable.inc"
#undef ONNX_OP
    for (Entry &e : t) {
      e.schema.importableVersions = e.importable;
      e.schema.allVersions = e.all;
      e.schema.inputs = e.inputs;
      e.schema.outputs = e.outputs;
      e.schema.attributes = e.attrs;
    }
    return t;
  }();
  return table;
}

const llvm::StringMap<const OpSchema *> &index() {
  static llvm::StringMap<const OpSchema *> map = [] {
    llvm::StringMap<const OpSchema *> m;
    for (const Entry &e : entries())
      m[(llvm::Twine(e.schema.domain) + "::" + e.schema.name).str()] =
          &e.schema;
    return m;
  }();
  return map;
}
} // namespace

const AttrSpec *OpSchema::findAttr(llvm::StringRef attr) const {
  for (const AttrSpec &a : attributes)
    if (attr == a.name)
      return &a;
  return nullptr;
}

int OpSchema::resolveVersion(int64_t opset) const {
  int best = 0;
  for (int v : allVersions)
    if (v <= opset && v > best)
      best = v;
  return best;
}

const OpSchema *xfmr::onnx_import::lookupOpSchema(llvm::StringRef domain,
                                                  llvm::StringRef opType) {
  if (domain == "ai.onnx")
    domain = "";
  auto it = index().find((llvm::Twine(domain) + "::" + opType).str());
  return it == index().end() ? nullptr : it->second;
}

bool xfmr::onnx_import::isKnownDomain(llvm::StringRef domain) {
  return domain.empty() || domain == "ai.onnx" || domain == "com.microsoft";
}

const char *xfmr::onnx_import::attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "INT";
  case AttrKind::Float:
    return "FLOAT";
  case AttrKind::String:
    return "STRING";
  case AttrKind::Ints:
    return "INTS";
  case AttrKind::Floats:
    return "FLOATS";
  case AttrKind::Strings:
    return "STRINGS";
  case AttrKind::Tensor:
    return "TENSOR";
  }
  return "?";
}

int64_t xfmr::onnx_import::maxSupportedOpset(llvm::StringRef domain) {
  if (domain.empty() || domain == "ai.onnx")
    return kMaxDefaultOpset;
  if (domain == "com.microsoft")
    return 1;
  return 0;
}
