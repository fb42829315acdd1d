//===- ONNXOps.td - the onnx import dialect ----------------*- tablegen -*-===//
//
// The faithful import dialect: one op per supported ONNX op, the spec's
// attribute names and defaults, missing optional inputs and outputs as `none`
// values. The op definitions themselves are generated from ONNX's operator
// schemas (ONNXOps.gen.td); only the dialect, the base class and the
// hand-written ops live here.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_ONNX_OPS
#define XFMR_ONNX_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::xfmr::onnx";
  let summary = "Faithful import of ONNX graphs";
  let description = [{
    One op per ONNX operator with the spec's attributes. The module carries
    the model's opset imports as `onnx.opset_import` (a dictionary from domain
    to version); every op's location names the ONNX node and its op type.
    Weights are `dense_resource` blobs that point into the model file or its
    memory-mapped external data, never copied element by element.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 0;
}

/// ONNX uint4 and int4: upstream ODS has no 4-bit constraints.
def UI4 : UI<4>;
def I4 : I<4>;

/// An optional ONNX input or output: a tensor, or `none` when absent.
class ONNX_Optional<Type t> : AnyTypeOf<[t, NoneType]>;

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, !listconcat(traits, [Pure])> {
  let assemblyFormat = [{
    `(` operands `)` attr-dict `:` functional-type(operands, results)
  }];
}

def ONNX_NoValueOp : Op<ONNX_Dialect, "NoValue", [Pure, ConstantLike]> {
  let summary = "The absent value of an optional input";
  let description = [{
    Stands for an ONNX optional input that the node leaves empty (an empty
    name in the node's input list).

    ```mlir
    %none = onnx.NoValue : none
    ```
  }];
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasFolder = 1;
}

include "ONNXOps.gen.td"

#endif // XFMR_ONNX_OPS
