//===- PagedKV.cpp - driving a paged-KV step function ---------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PagedKV.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <map>

namespace xfmr::rt {
namespace {

template <typename T>
Expected<Tensor> vectorTensor(DType dtype, const std::vector<T> &values,
                              std::vector<int64_t> shape, const std::string &name) {
  Expected<Tensor> t = Tensor::create(dtype, std::move(shape), name);
  if (!t)
    return t;
  if (!values.empty())
    std::memcpy(t->bytes(), values.data(), values.size() * sizeof(T));
  return t;
}

std::string quoted(const std::string &s) { return "'" + s + "'"; }

} // namespace

uint64_t KVPools::bytes() const {
  uint64_t total = 0;
  for (const Tensor &t : pools)
    total += t.byteSize();
  return total;
}

uint64_t KVPools::bytesPerBlock(const Manifest &m) {
  uint64_t total = 0;
  for (const TensorSpec &spec : m.inputs) {
    if (!spec.kvPool)
      continue;
    uint64_t perBlock = dtypeSize(spec.dtype);
    for (size_t d = 1; d < spec.rank(); ++d)
      perBlock *= static_cast<uint64_t>(spec.shape[d].value);
    total += perBlock;
  }
  return total;
}

Expected<KVPools> KVPools::allocateForBudget(const Artifact &artifact, uint64_t budgetBytes) {
  uint64_t perBlock = bytesPerBlock(artifact.manifest());
  if (perBlock == 0)
    return Error(artifact.directory() + ": not a step function (no kv_pool inputs)");
  if (budgetBytes < perBlock)
    return Error("a KV-cache budget of " + std::to_string(budgetBytes) +
                 " bytes holds no block (one block is " + std::to_string(perBlock) + " bytes)");
  return allocate(artifact, static_cast<int64_t>(budgetBytes / perBlock), budgetBytes);
}

void KVPools::copyBlock(int32_t src, int32_t dst) {
  for (Tensor &pool : pools) {
    size_t perBlock = pool.byteSize() / static_cast<size_t>(blocks);
    std::memcpy(pool.bytes() + perBlock * dst, pool.bytes() + perBlock * src, perBlock);
  }
}

void KVPools::copyOut(int32_t block, uint8_t *dst) const {
  for (const Tensor &pool : pools) {
    size_t perBlock = pool.byteSize() / static_cast<size_t>(blocks);
    std::memcpy(dst, pool.bytes() + perBlock * block, perBlock);
    dst += perBlock;
  }
}

void KVPools::copyIn(const uint8_t *src, int32_t block) {
  for (Tensor &pool : pools) {
    size_t perBlock = pool.byteSize() / static_cast<size_t>(blocks);
    std::memcpy(pool.bytes() + perBlock * block, src, perBlock);
    src += perBlock;
  }
}

Expected<HostKVPool> HostKVPool::allocateForBudget(const KVPools &device, uint64_t budgetBytes) {
  HostKVPool h;
  h.perSlot = device.numBlocks() ? device.bytes() / static_cast<uint64_t>(device.numBlocks()) : 0;
  if (h.perSlot == 0)
    return h;
  h.slots = static_cast<int64_t>(budgetBytes / h.perSlot);
  if (h.slots == 0)
    return h;
  h.memory.reset(new (std::nothrow) uint8_t[h.perSlot * static_cast<uint64_t>(h.slots)]);
  if (!h.memory)
    return Error("cannot allocate a host KV tier of " + std::to_string(budgetBytes) + " bytes");
  return h;
}

Expected<KVPools> KVPools::allocate(const Artifact &artifact, int64_t numBlocks,
                                    uint64_t maxBytes) {
  const Manifest &m = artifact.manifest();
  if (!m.kvCache)
    return Error(artifact.directory() +
                 ": not a step function (compile with xfmr-compile --kv-cache=paged)");
  if (numBlocks < 1)
    return Error("the KV cache needs at least one block, got " + std::to_string(numBlocks));
  KVPools p;
  p.blocks = numBlocks;
  p.tokensPerBlock = m.kvCache->blockSize;
  uint64_t total = 0;
  for (const TensorSpec &spec : m.inputs) {
    if (!spec.kvPool)
      continue;
    uint64_t perBlock = dtypeSize(spec.dtype);
    for (size_t d = 1; d < spec.rank(); ++d)
      perBlock *= static_cast<uint64_t>(spec.shape[d].value);
    // A pool without elements would reach the model as the runtime's
    // read-only stand-in for empty tensors, and the model writes K/V.
    if (perBlock == 0)
      return Error(artifact.directory() + ": KV pool " + quoted(spec.name) + " of shape " +
                   formatSpecShape(spec) + " holds nothing per block");
    if (static_cast<uint64_t>(numBlocks) > (maxBytes - total) / perBlock)
      return Error("KV pools of " + std::to_string(numBlocks) + " blocks exceed the " +
                   std::to_string(maxBytes) + "-byte limit");
    total += perBlock * numBlocks;
    std::vector<int64_t> shape{numBlocks};
    for (size_t d = 1; d < spec.rank(); ++d)
      shape.push_back(spec.shape[d].value);
    Expected<Tensor> t = Tensor::create(spec.dtype, shape, spec.name); // zero-filled
    if (!t)
      return t.takeError();
    p.pools.push_back(t.take());
  }
  return Expected<KVPools>(std::move(p));
}

Expected<Tensor> runStep(const Artifact &artifact, KVPools &pools,
                         const std::vector<StepSequence> &sequences) {
  const Manifest &m = artifact.manifest();
  if (!m.kvCache)
    return Error(artifact.directory() + ": not a step function");
  if (sequences.empty())
    return Error("a step needs at least one sequence");
  int64_t bs = pools.blockSize();
  size_t maxBlocks = 0;
  for (const StepSequence &s : sequences)
    maxBlocks = std::max(maxBlocks, s.blockTable.size());
  std::vector<int64_t> ids, positions, slots;
  std::vector<int32_t> tables(sequences.size() * std::max<size_t>(maxBlocks, 1), 0);
  std::vector<int32_t> lens, starts{0};
  for (size_t i = 0; i < sequences.size(); ++i) {
    const StepSequence &s = sequences[i];
    int64_t end = s.firstPosition + static_cast<int64_t>(s.tokens.size());
    if (s.tokens.empty() || s.firstPosition < 0)
      return Error("sequence " + std::to_string(i) + ": no new tokens or a negative position");
    if (end > static_cast<int64_t>(s.blockTable.size()) * bs)
      return Error("sequence " + std::to_string(i) + ": " + std::to_string(end) +
                   " tokens do not fit its " + std::to_string(s.blockTable.size()) +
                   " blocks of " + std::to_string(bs));
    for (int32_t b : s.blockTable)
      if (b < 0 || b >= pools.numBlocks())
        return Error("sequence " + std::to_string(i) + ": block " + std::to_string(b) +
                     " outside the pool of " + std::to_string(pools.numBlocks()));
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      int64_t pos = s.firstPosition + static_cast<int64_t>(t);
      ids.push_back(s.tokens[t]);
      positions.push_back(pos);
      slots.push_back(int64_t(s.blockTable[pos / bs]) * bs + pos % bs);
    }
    std::copy(s.blockTable.begin(), s.blockTable.end(), tables.begin() + i * maxBlocks);
    lens.push_back(static_cast<int32_t>(end));
    starts.push_back(static_cast<int32_t>(ids.size()));
  }
  int64_t n = static_cast<int64_t>(ids.size());
  int64_t seqs = static_cast<int64_t>(sequences.size());
  // The one row each sequence needs logits for: its last new token (all of
  // them with allLogits).
  std::vector<int64_t> lastRows;
  for (size_t i = 1; i < starts.size(); ++i)
    for (int64_t r = sequences[i - 1].allLogits ? starts[i - 1] : starts[i] - 1; r < starts[i];
         ++r)
      lastRows.push_back(r);
  const int64_t rows = static_cast<int64_t>(lastRows.size());
  std::map<std::string, Tensor> owned;
  auto add = [&](Expected<Tensor> t) -> std::optional<Error> {
    if (!t)
      return t.takeError();
    std::string name = t->name();
    owned.emplace(name, t.take());
    return std::nullopt;
  };
  for (auto err : {add(vectorTensor(DType::I64, ids, {n}, "input_ids")),
                   add(vectorTensor(DType::I64, positions, {n}, "positions")),
                   add(vectorTensor(DType::I64, slots, {n}, "slot_mapping")),
                   add(vectorTensor(DType::I32, tables,
                                    {seqs, static_cast<int64_t>(std::max<size_t>(maxBlocks, 1))},
                                    "block_tables")),
                   add(vectorTensor(DType::I32, lens, {seqs}, "context_lens")),
                   add(vectorTensor(DType::I32, starts, {seqs + 1}, "query_start_loc")),
                   add(vectorTensor(DType::I64, lastRows, {rows}, "logits_indices"))})
    if (err)
      return std::move(*err);
  std::vector<const Tensor *> inputs;
  size_t pool = 0;
  for (const TensorSpec &spec : m.inputs) {
    if (spec.kvPool) {
      if (pool >= pools.tensors().size())
        return Error("fewer KV pools than the manifest's kv_pool inputs");
      inputs.push_back(&pools.tensors()[pool++]);
      continue;
    }
    auto it = owned.find(spec.name);
    if (it == owned.end())
      return Error(artifact.directory() + ": step input " + quoted(spec.name) +
                   " is not one the runtime provides");
    if (it->second.dtype() != spec.dtype) {
      // Token ids and positions follow the exported model's integer type.
      if (spec.dtype != DType::I32 || it->second.dtype() != DType::I64)
        return Error(artifact.directory() + ": step input " + quoted(spec.name) +
                     " has dtype " + manifestDTypeName(spec.dtype));
      Expected<Tensor> narrow = Tensor::create(DType::I32, it->second.shape(), spec.name);
      if (!narrow)
        return narrow.takeError();
      for (int64_t i = 0; i < it->second.numel(); ++i)
        narrow->data<int32_t>()[i] = static_cast<int32_t>(it->second.data<int64_t>()[i]);
      it->second = narrow.take();
    }
    inputs.push_back(&it->second);
  }
  Expected<std::vector<Tensor>> out = artifact.run(inputs);
  if (!out)
    return out.takeError();
  if (out->empty() || (*out)[0].rank() != 2 || (*out)[0].shape()[0] != rows ||
      (*out)[0].dtype() != DType::F32)
    return Error(artifact.directory() + ": the step did not return f32 logits [rows, vocab]");
  return std::move((*out)[0]);
}

int64_t stepVocabulary(const Artifact &artifact) {
  int64_t vocab = 0;
  for (const TensorSpec &out : artifact.manifest().outputs)
    if (out.rank() == 2 && out.shape[1].isStatic())
      vocab = out.shape[1].value;
  return vocab;
}

} // namespace xfmr::rt
