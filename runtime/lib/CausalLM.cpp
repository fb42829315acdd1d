//===- CausalLM.cpp - token files and a causal LM's window inputs ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/CausalLM.h"

#include "xfmr/runtime/TensorIO.h"

#include <algorithm>

namespace xfmr::rt {

Expected<std::vector<int64_t>> readTokenIds(const std::string &path) {
  Expected<Tensor> t = readTensor(path);
  if (!t)
    return t.takeError();
  const std::vector<int64_t> &shape = t->shape();
  if (!(shape.size() == 1 || (shape.size() == 2 && shape[0] == 1)))
    return Error(path + ": token ids must be [T] or [1, T], got " + formatShape(shape));
  std::vector<int64_t> ids(static_cast<size_t>(t->numel()));
  if (t->dtype() == DType::I64)
    std::copy(t->data<int64_t>(), t->data<int64_t>() + ids.size(), ids.begin());
  else if (t->dtype() == DType::I32)
    std::copy(t->data<int32_t>(), t->data<int32_t>() + ids.size(), ids.begin());
  else
    return Error(path + ": token ids must be i64 or i32, got " + dtypeName(t->dtype()));
  return ids;
}

namespace {
/// A past key or value input ([batch, heads, past, head_dim], heads and
/// head_dim static), fed empty.
bool isEmptyPast(const TensorSpec &spec) {
  bool named = spec.name.rfind("past_key_values.", 0) == 0 || spec.name.rfind("past.", 0) == 0;
  return named && spec.rank() == 4 && !spec.shape[2].isStatic() && spec.shape[1].isStatic() &&
         spec.shape[3].isStatic();
}
} // namespace

Expected<std::vector<Tensor>> causalLMInputs(const Manifest &m, const std::vector<int64_t> &ids,
                                             int64_t begin, int64_t length) {
  std::vector<Tensor> inputs;
  for (const TensorSpec &spec : m.inputs) {
    if (isEmptyPast(spec)) {
      // A model exported with a KV cache: the window starts from nothing.
      std::vector<int64_t> shape = {1, spec.shape[1].value, 0, spec.shape[3].value};
      Expected<Tensor> t = Tensor::create(spec.dtype, shape, spec.name);
      if (!t)
        return t.takeError();
      inputs.push_back(t.take());
      continue;
    }
    if (spec.rank() != 2 || (spec.name != "input_ids" && spec.name != "attention_mask" &&
                             spec.name != "position_ids"))
      return Error("the model's input '" + spec.name + "' " + formatSpecShape(spec) +
                   " is not one a causal LM window feeds (input_ids, attention_mask, "
                   "position_ids: [batch, sequence]; past_key_values.*: [batch, heads, "
                   "past, head_dim], fed empty)");
    Expected<Tensor> t = Tensor::create(spec.dtype, {1, length}, spec.name);
    if (!t)
      return t.takeError();
    for (int64_t i = 0; i < length; ++i) {
      int64_t v = spec.name == "input_ids" ? ids[begin + i] : spec.name == "position_ids" ? i : 1;
      if (spec.dtype == DType::I64)
        t->data<int64_t>()[i] = v;
      else if (spec.dtype == DType::I32)
        t->data<int32_t>()[i] = static_cast<int32_t>(v);
      else
        return Error("the model's input '" + spec.name + "' is " + dtypeName(spec.dtype) +
                     ", not i64 or i32");
    }
    inputs.push_back(t.take());
  }
  return inputs;
}

} // namespace xfmr::rt
