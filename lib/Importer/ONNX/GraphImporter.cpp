//===- GraphImporter.cpp - ONNX graph to a func of onnx ops ---------------===//
//
// Part of xfmr.
//
// Walks the graph once, in the order ONNX requires (topological), validating
// each node against the schema table before building its op: the op and its
// version exist, inputs are defined and not redefined, required inputs and
// attributes are present, attribute types match. Ops are verified as they are
// built; a verifier message is reported against the node.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"
#include "OpSchemaTable.h"

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace xfmr::onnx_import;

namespace {

/// Opset-13+ forms that older versions of some ops are upgraded to: the
/// attribute moves into a constant input at position 1.
struct Upgrade {
  llvm::StringLiteral op;
  int firstInputForm; ///< first since-version with the input form
  llvm::StringLiteral attr;
};
constexpr Upgrade kUpgrades[] = {
    {"ReduceSum", 13, "axes"},       {"ReduceMean", 18, "axes"},
    {"ReduceMax", 18, "axes"},       {"ReduceMin", 18, "axes"},
    {"ReduceProd", 18, "axes"},      {"ReduceL1", 18, "axes"},
    {"ReduceL2", 18, "axes"},        {"ReduceLogSum", 18, "axes"},
    {"ReduceLogSumExp", 18, "axes"}, {"ReduceSumSquare", 18, "axes"},
    {"Squeeze", 13, "axes"},         {"Unsqueeze", 13, "axes"},
    {"Split", 13, "split"},
};

const Upgrade *findUpgrade(const OpSchema &schema, int version) {
  if (!schema.domain.empty())
    return nullptr;
  for (const Upgrade &u : kUpgrades)
    if (schema.name == u.op && version < u.firstInputForm)
      return &u;
  return nullptr;
}

/// The kind an AttributeProto actually holds (its type field, or for old
/// models that leave it unset, the field that is filled).
std::optional<AttrKind> protoAttrKind(const pb::AttributeProto &a) {
  switch (a.type()) {
  case pb::AttributeProto::INT:
    return AttrKind::Int;
  case pb::AttributeProto::FLOAT:
    return AttrKind::Float;
  case pb::AttributeProto::STRING:
    return AttrKind::String;
  case pb::AttributeProto::INTS:
    return AttrKind::Ints;
  case pb::AttributeProto::FLOATS:
    return AttrKind::Floats;
  case pb::AttributeProto::STRINGS:
    return AttrKind::Strings;
  case pb::AttributeProto::TENSOR:
    return AttrKind::Tensor;
  case pb::AttributeProto::UNDEFINED:
    if (a.has_i())
      return AttrKind::Int;
    if (a.has_f())
      return AttrKind::Float;
    if (a.has_s())
      return AttrKind::String;
    if (a.has_t())
      return AttrKind::Tensor;
    if (a.ints_size())
      return AttrKind::Ints;
    if (a.floats_size())
      return AttrKind::Floats;
    if (a.strings_size())
      return AttrKind::Strings;
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

const char *protoAttrTypeName(const pb::AttributeProto &a) {
  if (pb::AttributeProto_AttributeType_IsValid(a.type()))
    return pb::AttributeProto_AttributeType_Name(a.type()).c_str();
  return "UNKNOWN";
}

class GraphImporter {
public:
  GraphImporter(const ImportContext &ic, pb::ModelProto &model)
      : ic(ic), model(model), builder(ic.ctx), external(ic) {}

  OwningOpRef<ModuleOp> run();

private:
  LogicalResult readOpsets();
  LogicalResult importInputs(func::FuncOp &func, Block *&body);
  LogicalResult importInitializers();
  LogicalResult importNode(pb::NodeProto &node, int index);

  /// A node's schema and, for an op whose attribute became an input in a
  /// later version, how to upgrade it.
  struct NodeSchema {
    const OpSchema *schema;
    const Upgrade *upgrade;
  };
  /// The node's converted attributes and the upgraded attribute's values.
  struct NodeAttributes {
    SmallVector<NamedAttribute> attrs;
    std::optional<SmallVector<int64_t>> upgradedInput;
  };
  /// importNode's phases, each reporting against `what` (the node).
  FailureOr<NodeSchema> resolveSchema(const pb::NodeProto &node, const std::string &what);
  FailureOr<NodeAttributes> importAttributes(pb::NodeProto &node, const NodeSchema &ns,
                                             const std::string &what);
  FailureOr<SmallVector<Value>>
  importOperands(const pb::NodeProto &node, const OpSchema &schema,
                 const std::optional<SmallVector<int64_t>> &upgradedInput, Location loc,
                 const std::string &what);
  Type outputType(const pb::NodeProto &node, const std::string &name, Type elem,
                  ArrayRef<NamedAttribute> attrs);
  LogicalResult importResults(const pb::NodeProto &node, const OpSchema &schema,
                              ArrayRef<Value> operands, ArrayRef<NamedAttribute> attrs,
                              const std::string &what, SmallVectorImpl<Type> &resultTypes,
                              SmallVectorImpl<std::string> &resultNames);
  FailureOr<Operation *> createVerified(OperationState &state, const std::string &what);
  LogicalResult defineValue(llvm::StringRef name, Value value,
                            llvm::StringRef by);
  FailureOr<Attribute> convertAttribute(pb::AttributeProto &a, AttrKind kind,
                                        const std::string &what);
  LogicalResult checkInputTypes(ArrayRef<const FormalParam *> formals,
                                ArrayRef<Value> operands, const pb::NodeProto &node,
                                const std::string &what);
  FailureOr<Type> resultElementType(const OpSchema &schema, unsigned outputIdx,
                                    ArrayRef<Value> operands,
                                    ArrayRef<NamedAttribute> attrs,
                                    const std::string &what);
  Value noValue();
  ArrayAttr dimParams(const pb::TypeProto &type);
  LogicalResult normalizeConstant(SmallVectorImpl<NamedAttribute> &attrs,
                                  const std::string &what);

  const ImportContext &ic;
  pb::ModelProto &model;
  OpBuilder builder;
  ExternalDataResolver external;
  OwningOpRef<ModuleOp> module;
  llvm::StringMap<Value> values;
  llvm::StringMap<TensorType> declaredTypes; ///< from value_info and outputs
  llvm::StringSet<> initializerNames;
  llvm::StringMap<int64_t> opsets;
  Value none;
};

Value GraphImporter::noValue() {
  if (!none)
    none = xfmr::onnx::NoValueOp::create(builder, builder.getUnknownLoc(),
                                         builder.getNoneType());
  return none;
}

LogicalResult GraphImporter::defineValue(llvm::StringRef name, Value value,
                                         llvm::StringRef by) {
  if (name.empty())
    return success();
  if (!values.try_emplace(name, value).second) {
    ic.error() << by << ": value '" << name << "' is defined more than once";
    return failure();
  }
  return success();
}

/// Constant's value_float/value_floats/value_int/value_ints forms become the
/// canonical `value` tensor, so folders and later passes see one form.
LogicalResult
GraphImporter::normalizeConstant(SmallVectorImpl<NamedAttribute> &attrs,
                                 const std::string &what) {
  if (attrs.size() != 1) {
    ic.error() << what << ": needs exactly one value attribute, got "
               << attrs.size();
    return failure();
  }
  StringRef name = attrs[0].getName().strref();
  Attribute v = attrs[0].getValue();
  ElementsAttr value;
  if (name == "value") {
    return success();
  } else if (name == "value_float") {
    value =
        DenseElementsAttr::get(RankedTensorType::get({}, builder.getF32Type()),
                               cast<FloatAttr>(v).getValue());
  } else if (name == "value_int") {
    value =
        DenseElementsAttr::get(RankedTensorType::get({}, builder.getI64Type()),
                               cast<IntegerAttr>(v).getValue());
  } else if (name == "value_floats" || name == "value_ints") {
    auto arr = cast<ArrayAttr>(v);
    Type elem = name == "value_ints" ? Type(builder.getI64Type())
                                     : builder.getF32Type();
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(arr.size())}, elem),
        arr.getValue());
  } else {
    ic.error() << what << ": attribute '" << name
               << "' (string constants) is not supported";
    return failure();
  }
  attrs[0] = NamedAttribute(builder.getStringAttr("value"), value);
  return success();
}

LogicalResult GraphImporter::readOpsets() {
  if (model.opset_import_size() == 0) {
    ic.error() << "model has no opset_import";
    return failure();
  }
  for (const pb::OperatorSetIdProto &o : model.opset_import()) {
    std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    llvm::StringRef shown =
        domain.empty() ? "ai.onnx" : llvm::StringRef(domain);
    if (o.version() <= 0) {
      ic.error() << "opset_import of domain '" << shown
                 << "' has invalid version " << o.version();
      return failure();
    }
    int64_t newest = maxSupportedOpset(domain);
    if (newest > 0 && o.version() > newest) {
      ic.error() << "opset " << o.version() << " of domain '" << shown
                 << "' is newer than supported (up to " << newest << ")";
      return failure();
    }
    if (!opsets.try_emplace(domain, o.version()).second) {
      ic.error() << "opset_import lists domain '" << domain << "' twice";
      return failure();
    }
  }
  return success();
}

FailureOr<Attribute> GraphImporter::convertAttribute(pb::AttributeProto &a,
                                                     AttrKind kind,
                                                     const std::string &what) {
  switch (kind) {
  case AttrKind::Int:
    return Attribute(builder.getI64IntegerAttr(a.i()));
  case AttrKind::Float:
    return Attribute(builder.getF32FloatAttr(a.f()));
  case AttrKind::String:
    return Attribute(builder.getStringAttr(a.s()));
  case AttrKind::Ints: {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    return Attribute(builder.getI64ArrayAttr(v));
  }
  case AttrKind::Floats: {
    SmallVector<float> v(a.floats().begin(), a.floats().end());
    return Attribute(builder.getF32ArrayAttr(v));
  }
  case AttrKind::Strings: {
    SmallVector<StringRef> v(a.strings().begin(), a.strings().end());
    return Attribute(builder.getStrArrayAttr(v));
  }
  case AttrKind::Tensor: {
    FailureOr<ElementsAttr> t = importTensor(
        ic, *a.mutable_t(), what + " attribute '" + a.name() + "'", external);
    if (failed(t))
      return failure();
    return Attribute(*t);
  }
  }
  return failure();
}

/// The element type of a value as ONNX names it ("float", "int64").
static std::string onnxTypeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return "float16";
  if (t.isInteger(1))
    return "bool";
  if (auto i = dyn_cast<IntegerType>(t))
    return (i.isUnsigned() ? "uint" : "int") + std::to_string(i.getWidth());
  os << t;
  return s;
}

/// ONNX type constraints: every input's element type is one its formal
/// parameter allows, and inputs bound to the same type parameter ("T") have
/// one element type (Add(float, int64) is no Add; onnx.checker and
/// onnxruntime reject it, and the lowering would build invalid IR).
LogicalResult GraphImporter::checkInputTypes(ArrayRef<const FormalParam *> formals,
                                             ArrayRef<Value> operands,
                                             const pb::NodeProto &node,
                                             const std::string &what) {
  llvm::StringMap<std::pair<Type, unsigned>> bound;
  for (unsigned i = 0; i < operands.size() && i < formals.size(); ++i) {
    const FormalParam *fp = formals[i];
    auto type = operands[i] ? dyn_cast<TensorType>(operands[i].getType()) : TensorType();
    if (!fp || !type)
      continue;
    Type elem = type.getElementType();
    auto describe = [&](unsigned k) {
      return "input " + std::to_string(k) + " ('" +
             (k < static_cast<unsigned>(node.input_size()) ? node.input(k) : std::string()) +
             "')";
    };
    std::string input = describe(i);
    bool allowed = false;
    for (uint32_t mask = fp->allowedTypes; mask && !allowed; mask &= mask - 1)
      allowed = xfmr::onnx::convertONNXElementType(ic.ctx, llvm::countr_zero(mask)) == elem;
    if (!allowed && fp->allowedTypes) {
      ic.error() << what << ": " << input << " has element type " << onnxTypeName(elem)
                 << ", which '" << fp->name << "' (" << fp->typeStr << ") does not allow";
      return failure();
    }
    if (StringRef(fp->typeStr).starts_with("tensor("))
      continue; // a fixed type, not a parameter shared with other inputs
    auto [it, inserted] = bound.try_emplace(fp->typeStr, elem, i);
    if (!inserted && it->second.first != elem) {
      unsigned j = it->second.second;
      ic.error() << what << ": " << describe(j) << " and " << input
                 << " share type constraint " << fp->typeStr
                 << " but have element types " << onnxTypeName(it->second.first) << " and "
                 << onnxTypeName(elem);
      return failure();
    }
  }
  return success();
}

/// Element type of output `outputIdx`: the type of the input sharing its type
/// constraint, the constraint's only type, or an attribute-driven rule.
FailureOr<Type> GraphImporter::resultElementType(const OpSchema &schema,
                                                 unsigned outputIdx,
                                                 ArrayRef<Value> operands,
                                                 ArrayRef<NamedAttribute> attrs,
                                                 const std::string &what) {
  auto attr = [&](StringRef name) -> Attribute {
    for (const NamedAttribute &a : attrs)
      if (a.getName() == name)
        return a.getValue();
    return {};
  };
  auto elemOf = [](Value v) -> Type {
    if (!v || isa<NoneType>(v.getType()))
      return {};
    return cast<TensorType>(v.getType()).getElementType();
  };
  auto dtype = [&](int64_t dt) {
    return xfmr::onnx::convertONNXElementType(ic.ctx, dt);
  };
  StringRef name = schema.name;
  if (schema.domain.empty()) {
    if (name == "Cast")
      if (auto to = dyn_cast_or_null<IntegerAttr>(attr("to")))
        if (Type t = dtype(to.getInt()))
          return t;
    if (name == "CastLike")
      return elemOf(operands[1]);
    if (name == "Constant") {
      if (auto v = dyn_cast_or_null<ElementsAttr>(attr("value")))
        return v.getElementType();
    }
    if (name == "ConstantOfShape") {
      if (auto v = dyn_cast_or_null<ElementsAttr>(attr("value")))
        return v.getElementType();
      return Type(builder.getF32Type());
    }
    if (name == "EyeLike") {
      if (auto d = dyn_cast_or_null<IntegerAttr>(attr("dtype")))
        if (Type t = dtype(d.getInt()))
          return t;
      return elemOf(operands[0]);
    }
    if (name == "QuantizeLinear") {
      if (Type zp = operands.size() > 2 ? elemOf(operands[2]) : Type())
        return zp;
      if (auto d = dyn_cast_or_null<IntegerAttr>(attr("output_dtype")))
        if (d.getInt() != 0)
          if (Type t = dtype(d.getInt()))
            return t;
      return Type(IntegerType::get(ic.ctx, 8, IntegerType::Unsigned));
    }
    if (name == "DequantizeLinear") {
      if (auto d = dyn_cast_or_null<IntegerAttr>(attr("output_dtype")))
        if (d.getInt() != 0)
          if (Type t = dtype(d.getInt()))
            return t;
      return elemOf(operands[1]);
    }
    if (name == "LayerNormalization" && outputIdx > 0) {
      auto st = dyn_cast_or_null<IntegerAttr>(attr("stash_type"));
      if (Type t = dtype(st ? st.getInt() : 1))
        return t;
    }
  }
  const FormalParam &out =
      schema.outputs[std::min<size_t>(outputIdx, schema.outputs.size() - 1)];
  // Same type constraint as an input: same element type.
  size_t pos = 0;
  for (const FormalParam &in : schema.inputs) {
    if (StringRef(in.typeStr) == out.typeStr && in.option != Param::Variadic) {
      if (pos < operands.size())
        if (Type t = elemOf(operands[pos]))
          return t;
    } else if (StringRef(in.typeStr) == out.typeStr && pos < operands.size()) {
      if (Type t = elemOf(operands[pos]))
        return t;
    }
    ++pos;
  }
  if (llvm::popcount(out.allowedTypes) == 1)
    return dtype(llvm::countr_zero(out.allowedTypes));
  ic.error() << what << ": cannot determine the element type of output '"
             << out.name << "'";
  return failure();
}

FailureOr<GraphImporter::NodeSchema>
GraphImporter::resolveSchema(const pb::NodeProto &node, const std::string &what) {
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  const OpSchema *schema = lookupOpSchema(domain, node.op_type());
  if (!schema) {
    if (!isKnownDomain(domain))
      ic.error() << what << ": unsupported domain '" << domain << "'";
    else
      ic.error() << what << ": unsupported op '" << node.op_type() << "'"
                 << (domain.empty() ? "" : " in domain '" + domain + "'")
                 << " (see docs/onnx-ops.md)";
    return failure();
  }
  auto opsetIt = opsets.find(domain);
  if (opsetIt == opsets.end()) {
    ic.error() << what << ": the model imports no opset for domain '"
               << (domain.empty() ? "ai.onnx" : domain) << "'";
    return failure();
  }
  int version = schema->resolveVersion(opsetIt->second);
  if (version == 0) {
    ic.error() << what << ": op does not exist in opset " << opsetIt->second;
    return failure();
  }
  const Upgrade *upgrade = findUpgrade(*schema, version);
  if (!upgrade && !llvm::is_contained(schema->importableVersions, version)) {
    ic.error() << what << ": version " << version << " (opset "
               << opsetIt->second << ") is not supported";
    return failure();
  }
  return NodeSchema{schema, upgrade};
}

FailureOr<GraphImporter::NodeAttributes>
GraphImporter::importAttributes(pb::NodeProto &node, const NodeSchema &ns,
                                const std::string &what) {
  NodeAttributes out;
  llvm::StringSet<> seen;
  for (pb::AttributeProto &a : *node.mutable_attribute()) {
    if (!seen.insert(a.name()).second) {
      ic.error() << what << ": attribute '" << a.name() << "' is given twice";
      return failure();
    }
    if (!a.ref_attr_name().empty()) {
      ic.error()
          << what << ": attribute '" << a.name()
          << "' references a function attribute; functions are not supported";
      return failure();
    }
    if (ns.upgrade && a.name() == ns.upgrade->attr.str()) {
      if (protoAttrKind(a) != AttrKind::Ints) {
        ic.error() << what << ": attribute '" << a.name()
                   << "' must be INTS, got " << protoAttrTypeName(a);
        return failure();
      }
      out.upgradedInput.emplace(a.ints().begin(), a.ints().end());
      continue;
    }
    const AttrSpec *spec = ns.schema->findAttr(a.name());
    if (!spec) {
      ic.error() << what << ": unknown attribute '" << a.name() << "'";
      return failure();
    }
    std::optional<AttrKind> kind = protoAttrKind(a);
    if (!kind || *kind != spec->kind) {
      ic.error() << what << ": attribute '" << a.name() << "' must be "
                 << attrKindName(spec->kind) << ", got "
                 << protoAttrTypeName(a);
      return failure();
    }
    FailureOr<Attribute> value = convertAttribute(a, *kind, what);
    if (failed(value))
      return failure();
    out.attrs.emplace_back(builder.getStringAttr(a.name()), *value);
  }
  if (ns.schema->domain.empty() && ns.schema->name == "Constant" &&
      failed(normalizeConstant(out.attrs, what)))
    return failure();
  for (const AttrSpec &spec : ns.schema->attributes)
    if (spec.required && !seen.contains(spec.name)) {
      ic.error() << what << ": required attribute '" << spec.name
                 << "' is missing";
      return failure();
    }
  return out;
}

FailureOr<SmallVector<Value>>
GraphImporter::importOperands(const pb::NodeProto &node, const OpSchema &schema,
                              const std::optional<SmallVector<int64_t>> &upgradedInput,
                              Location loc, const std::string &what) {
  SmallVector<Value> operands;
  auto lookup = [&](const std::string &name, unsigned pos) -> FailureOr<Value> {
    auto it = values.find(name);
    if (it == values.end()) {
      ic.error() << what << ": input " << pos << " '" << name
                 << "' is used before it is defined (unsorted graph, cycle, or "
                    "missing value)";
      return failure();
    }
    return it->second;
  };
  int nIn = node.input_size();
  int pos = 0;
  // The formal parameter of each operand (null for the upgraded attribute).
  SmallVector<const FormalParam *> operandFormals;
  for (size_t f = 0; f < schema.inputs.size(); ++f) {
    const FormalParam &fp = schema.inputs[f];
    operandFormals.resize(operands.size(), nullptr);
    if (upgradedInput && f == 1) {
      // The upgraded attribute becomes this (optional) input.
      auto type = RankedTensorType::get(
          {static_cast<int64_t>(upgradedInput->size())}, builder.getI64Type());
      auto attr = DenseIntElementsAttr::get(type, *upgradedInput);
      operands.push_back(xfmr::onnx::ConstantOp::create(
          builder, loc, type, attr, nullptr, nullptr, nullptr, nullptr, nullptr,
          nullptr));
      continue;
    }
    if (fp.option == Param::Variadic) {
      if (pos >= nIn) {
        ic.error() << what << ": variadic input '" << fp.name
                   << "' needs at least one value";
        return failure();
      }
      for (; pos < nIn; ++pos) {
        if (node.input(pos).empty()) {
          ic.error() << what << ": input " << pos << " has an empty name";
          return failure();
        }
        FailureOr<Value> v = lookup(node.input(pos), pos);
        if (failed(v))
          return failure();
        operands.push_back(*v);
        operandFormals.push_back(&fp);
      }
      continue;
    }
    if (pos >= nIn || node.input(pos).empty()) {
      if (fp.option == Param::Single) {
        ic.error() << what << ": required input " << pos << " ('" << fp.name
                   << "') is " << (pos >= nIn ? "missing" : "empty");
        return failure();
      }
      operands.push_back(noValue());
      ++pos;
      continue;
    }
    FailureOr<Value> v = lookup(node.input(pos), pos);
    if (failed(v))
      return failure();
    operands.push_back(*v);
    operandFormals.push_back(&fp);
    ++pos;
  }
  if (pos < nIn) {
    ic.error() << what << ": has " << nIn << " inputs, the op takes at most "
               << pos;
    return failure();
  }
  operandFormals.resize(operands.size(), nullptr);
  if (failed(checkInputTypes(operandFormals, operands, node, what)))
    return failure();
  return operands;
}

/// The type of the node's output `name` (formal output `f`, element type
/// `elem`): a Constant's value has its own shape; a value_info that
/// disagrees (onnxruntime-genai's builder declares its [1] constants as
/// scalars) is not the node's output. Else the declared shape, if any.
Type GraphImporter::outputType(const pb::NodeProto &node, const std::string &name,
                               Type elem, ArrayRef<NamedAttribute> attrs) {
  ShapedType value;
  for (const NamedAttribute &a : attrs)
    if (auto elements = dyn_cast<ElementsAttr>(a.getValue());
        elements && a.getName() == "value")
      value = elements.getShapedType();
  if (node.op_type() == "Constant" && value && value.hasRank())
    return RankedTensorType::get(value.getShape(), elem);
  if (auto it = declaredTypes.find(name); it != declaredTypes.end())
    if (auto ranked = dyn_cast<RankedTensorType>(it->second))
      return RankedTensorType::get(ranked.getShape(), elem);
  return UnrankedTensorType::get(elem);
}

LogicalResult GraphImporter::importResults(const pb::NodeProto &node, const OpSchema &schema,
                                           ArrayRef<Value> operands,
                                           ArrayRef<NamedAttribute> attrs,
                                           const std::string &what,
                                           SmallVectorImpl<Type> &resultTypes,
                                           SmallVectorImpl<std::string> &resultNames) {
  int nOut = node.output_size();
  int outPos = 0;
  for (size_t f = 0; f < schema.outputs.size(); ++f) {
    const FormalParam &fp = schema.outputs[f];
    int count = fp.option == Param::Variadic ? std::max(0, nOut - outPos) : 1;
    if (fp.option == Param::Variadic && count == 0) {
      ic.error() << what << ": variadic output '" << fp.name
                 << "' needs at least one value";
      return failure();
    }
    for (int k = 0; k < count; ++k, ++outPos) {
      std::string name = outPos < nOut ? node.output(outPos) : std::string();
      if (name.empty()) {
        if (fp.option == Param::Single) {
          ic.error() << what << ": required output " << outPos << " ('"
                     << fp.name << "') has no name";
          return failure();
        }
        resultTypes.push_back(builder.getNoneType());
        resultNames.push_back("");
        continue;
      }
      FailureOr<Type> elem = resultElementType(schema, f, operands, attrs, what);
      if (failed(elem) || !*elem) {
        if (succeeded(elem))
          ic.error() << what
                     << ": cannot determine the element type of output '"
                     << name << "'";
        return failure();
      }
      resultTypes.push_back(outputType(node, name, *elem, attrs));
      resultNames.push_back(name);
    }
  }
  if (outPos < nOut) {
    ic.error() << what << ": has " << nOut
               << " outputs, the op produces at most " << outPos;
    return failure();
  }
  return success();
}

FailureOr<Operation *> GraphImporter::createVerified(OperationState &state,
                                                     const std::string &what) {
  Operation *op = builder.create(state);
  xfmr::onnx::inferResultTypes(op);
  // Verify now so that a bad attribute value is reported against this node.
  std::string verifierMessage;
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler capture(ic.ctx, [&](Diagnostic &diag) {
      if (verifierMessage.empty())
        verifierMessage = diag.str();
      return success();
    });
    verified = mlir::verify(op, /*verifyRecursively=*/false);
  }
  if (failed(verified)) {
    ic.error() << what << ": " << verifierMessage;
    return failure();
  }
  return op;
}

LogicalResult GraphImporter::importNode(pb::NodeProto &node, int index) {
  std::string what = describeNode(node, index);
  FailureOr<NodeSchema> ns = resolveSchema(node, what);
  if (failed(ns))
    return failure();
  Location loc = ic.nodeLoc(node, index);
  builder.setInsertionPointToEnd(builder.getInsertionBlock());
  // Attributes: known, of the declared kind, required ones present.
  FailureOr<NodeAttributes> attrs = importAttributes(node, *ns, what);
  if (failed(attrs))
    return failure();
  // Operands by formal parameter; absent optionals are `none`.
  FailureOr<SmallVector<Value>> operands =
      importOperands(node, *ns->schema, attrs->upgradedInput, loc, what);
  if (failed(operands))
    return failure();
  // Results: one per formal output (variadic: one per node output).
  SmallVector<Type> resultTypes;
  SmallVector<std::string> resultNames;
  if (failed(importResults(node, *ns->schema, *operands, attrs->attrs, what, resultTypes,
                           resultNames)))
    return failure();

  OperationState state(loc, ns->schema->mlirName);
  state.addOperands(*operands);
  state.addTypes(resultTypes);
  state.addAttributes(attrs->attrs);
  FailureOr<Operation *> op = createVerified(state, what);
  if (failed(op))
    return failure();
  for (auto [name, result] : llvm::zip(resultNames, (*op)->getResults()))
    if (failed(defineValue(name, result, what)))
      return failure();
  return success();
}

/// The dim_param names of a value's dims ("" for dims without one).
ArrayAttr GraphImporter::dimParams(const pb::TypeProto &type) {
  SmallVector<Attribute> params;
  if (type.has_tensor_type() && type.tensor_type().has_shape())
    for (const auto &d : type.tensor_type().shape().dim())
      params.push_back(
          builder.getStringAttr(d.has_dim_param() ? d.dim_param() : ""));
  return builder.getArrayAttr(params);
}

LogicalResult GraphImporter::importInputs(func::FuncOp &func, Block *&body) {
  const pb::GraphProto &g = model.graph();
  llvm::StringMap<const pb::TensorProto *> inits;
  for (const pb::TensorProto &t : g.initializer())
    inits[t.name()] = &t;

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<Attribute> argDimParams;
  for (const pb::ValueInfoProto &in : g.input()) {
    std::string what = "graph input '" + in.name() + "'";
    if (in.name().empty()) {
      ic.error() << "a graph input has an empty name";
      return failure();
    }
    FailureOr<TensorType> type = importValueType(ic, in.type(), what);
    if (failed(type))
      return failure();
    if (auto it = inits.find(in.name()); it != inits.end()) {
      // IR >= 4: an initializer with an input's name is that input's default.
      // Its type must agree with the declared one.
      const pb::TensorProto *t = it->second;
      Type elem = xfmr::onnx::convertONNXElementType(ic.ctx, t->data_type());
      bool same = elem == type->getElementType();
      if (same && type->hasRank()) {
        same = type->getRank() == t->dims_size();
        for (int i = 0; same && i < t->dims_size(); ++i)
          same = type->isDynamicDim(i) || type->getDimSize(i) == t->dims(i);
      }
      if (!same) {
        ic.error() << what << " clashes with the initializer of the same name: "
                   << "its type differs";
        return failure();
      }
      continue; // overridable initializer: imported as a constant
    }
    argTypes.push_back(*type);
    argNames.push_back(in.name());
    argDimParams.push_back(dimParams(in.type()));
  }
  SmallVector<Type> resultTypes;
  for (const pb::ValueInfoProto &out : g.output()) {
    if (out.name().empty()) {
      ic.error() << "a graph output has an empty name";
      return failure();
    }
    FailureOr<TensorType> type =
        importValueType(ic, out.type(), "graph output '" + out.name() + "'");
    if (failed(type))
      return failure();
    resultTypes.push_back(*type);
    declaredTypes[out.name()] = *type;
  }
  auto fnType = builder.getFunctionType(argTypes, resultTypes);
  func = func::FuncOp::create(builder,
                              FileLineColLoc::get(ic.ctx, ic.displayName, 0, 0),
                              ic.options.functionName, fnType);
  body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, "onnx.name", builder.getStringAttr(name));
    func.setArgAttr(i, "onnx.dim_params", argDimParams[i]);
    if (failed(defineValue(name, body->getArgument(i), "graph input")))
      return failure();
  }
  for (auto [i, out] : llvm::enumerate(g.output())) {
    func.setResultAttr(i, "onnx.name", builder.getStringAttr(out.name()));
    func.setResultAttr(i, "onnx.dim_params", dimParams(out.type()));
  }
  return success();
}

LogicalResult GraphImporter::importInitializers() {
  pb::GraphProto &g = *model.mutable_graph();
  if (g.sparse_initializer_size() > 0) {
    ic.error() << "sparse initializers are not supported";
    return failure();
  }
  for (pb::TensorProto &t : *g.mutable_initializer()) {
    std::string what = "initializer '" + t.name() + "'";
    if (t.name().empty()) {
      ic.error() << "an initializer has an empty name";
      return failure();
    }
    if (!initializerNames.insert(t.name()).second) {
      ic.error() << what << " is defined more than once";
      return failure();
    }
    FailureOr<ElementsAttr> attr = importTensor(ic, t, what, external);
    if (failed(attr))
      return failure();
    Location loc = NameLoc::get(builder.getStringAttr(t.name()));
    auto c = xfmr::onnx::ConstantOp::create(builder, loc, attr->getType(),
                                            *attr, nullptr, nullptr, nullptr,
                                            nullptr, nullptr, nullptr);
    // An initializer shadowing a graph input is that input's default value;
    // the input (declared first) wins.
    values.try_emplace(t.name(), c.getResult());
  }
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  if (!model.has_graph()) {
    ic.error() << "model has no graph";
    return {};
  }
  if (failed(readOpsets()))
    return {};
  module = ModuleOp::create(FileLineColLoc::get(ic.ctx, ic.displayName, 0, 0));
  SmallVector<NamedAttribute> opsetAttrs;
  // The default domain is spelled "ai.onnx": an empty key does not parse back.
  for (auto &e : opsets)
    opsetAttrs.emplace_back(
        builder.getStringAttr(e.getKey().empty() ? "ai.onnx" : e.getKey()),
        builder.getI64IntegerAttr(e.getValue()));
  llvm::sort(opsetAttrs, [](const NamedAttribute &a, const NamedAttribute &b) {
    return a.getName().strref() < b.getName().strref();
  });
  (*module)->setAttr(xfmr::onnx::kOpsetImportAttrName,
                     builder.getDictionaryAttr(opsetAttrs));
  (*module)->setAttr("onnx.ir_version",
                     builder.getI64IntegerAttr(model.ir_version()));
  if (!model.producer_name().empty())
    (*module)->setAttr(
        "onnx.producer",
        builder.getStringAttr(model.producer_version().empty()
                                  ? model.producer_name()
                                  : model.producer_name() + " " +
                                        model.producer_version()));

  pb::GraphProto &g = *model.mutable_graph();
  for (const pb::ValueInfoProto &vi : g.value_info()) {
    if (vi.name().empty() || !vi.has_type() || !vi.type().has_tensor_type())
      continue;
    FailureOr<TensorType> t =
        importValueType(ic, vi.type(), "value_info '" + vi.name() + "'");
    if (failed(t))
      return {};
    declaredTypes[vi.name()] = *t;
  }

  // Check the weights' dims first: a bad initializer is the root cause even
  // when a declared output repeats its shape.
  for (const pb::TensorProto &t : g.initializer()) {
    SmallVector<int64_t> dims(t.dims().begin(), t.dims().end());
    if (failed(checkDims(ic, "initializer '" + t.name() + "'", dims)))
      return {};
  }

  builder.setInsertionPointToEnd(module->getBody());
  func::FuncOp func;
  Block *body = nullptr;
  if (failed(importInputs(func, body)))
    return {};
  builder.setInsertionPointToEnd(body);
  if (failed(importInitializers()))
    return {};
  for (int i = 0; i < g.node_size(); ++i)
    if (failed(importNode(*g.mutable_node(i), i)))
      return {};

  SmallVector<Value> results;
  for (const pb::ValueInfoProto &out : g.output()) {
    auto it = values.find(out.name());
    if (it == values.end()) {
      ic.error() << "graph output '" << out.name()
                 << "' is not produced by any node";
      return {};
    }
    results.push_back(it->second);
  }
  builder.setInsertionPointToEnd(body);
  func::ReturnOp::create(builder, func.getLoc(), results);
  // Returned values may be more or less precise than the declared outputs:
  // the signature follows what is returned.
  func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(),
                                               TypeRange(ValueRange(results))));
  if (ic.options.simplifyShapes && failed(xfmr::onnx::simplifyShapes(*module)))
    return {};
  if (failed(mlir::verify(*module))) {
    ic.error() << "the imported module does not verify";
    return {};
  }
  return std::move(module);
}
} // namespace

OwningOpRef<ModuleOp> xfmr::onnx_import::importGraph(const ImportContext &ic,
                                                     pb::ModelProto &model) {
  return GraphImporter(ic, model).run();
}
