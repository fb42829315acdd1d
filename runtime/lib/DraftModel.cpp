//===- DraftModel.cpp - a draft model's proposals for speculation ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/DraftModel.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>

namespace xfmr::rt {
namespace {

/// The request's sampling parameters with a seed of the draft's own: the
/// draft's draws must not be the target's (verification compares them).
SamplingParams draftParams(const SamplingParams &params) {
  SamplingParams p = params;
  p.seed ^= 0x9e3779b97f4a7c15ull;
  return p;
}

} // namespace

DraftModel::Sequence::Sequence(const SamplingParams &params)
    : sampler(draftParams(params)) {}

DraftModel::DraftModel(const Artifact *artifact, ModelCall model,
                       int64_t numBlocks, int64_t blockSize, int64_t vocab,
                       int64_t maxTokensPerStep)
    : artifact(artifact), model(std::move(model)), blocks(numBlocks, blockSize),
      vocab(vocab), maxTokensPerStep(maxTokensPerStep) {}

DraftModel::~DraftModel() = default;

Expected<std::unique_ptr<DraftModel>>
DraftModel::create(const Artifact &artifact, int64_t vocab,
                   int64_t kvCacheTokens, int64_t maxTokensPerStep) {
  if (!artifact.manifest().kvCache)
    return Error(artifact.directory() +
                 ": the draft model is not a step function (compile it "
                 "with --kv-cache=paged)");
  int64_t own = stepVocabulary(artifact);
  if (own != vocab)
    return Error(artifact.directory() + ": the draft model's vocabulary has " +
                 std::to_string(own) + " tokens, the target's " +
                 std::to_string(vocab));
  int64_t blockSize = artifact.manifest().kvCache->blockSize;
  int64_t numBlocks =
      std::max<int64_t>(1, (kvCacheTokens + blockSize - 1) / blockSize);
  return std::unique_ptr<DraftModel>(
      new DraftModel(&artifact, nullptr, numBlocks, blockSize, vocab,
                     std::max<int64_t>(maxTokensPerStep, 1)));
}

Expected<std::unique_ptr<DraftModel>>
DraftModel::load(const std::string &dir, int64_t vocab, int64_t kvCacheTokens,
                 int64_t maxTokensPerStep) {
  Expected<std::unique_ptr<Artifact>> artifact = Artifact::load(dir);
  if (!artifact)
    return artifact.takeError();
  Expected<std::unique_ptr<DraftModel>> draft =
      create(**artifact, vocab, kvCacheTokens, maxTokensPerStep);
  if (draft)
    (*draft)->owned = artifact.take();
  return draft;
}

std::unique_ptr<DraftModel>
DraftModel::createDetached(ModelCall model, int64_t vocab, int64_t numBlocks,
                           int64_t blockSize, int64_t maxTokensPerStep,
                           bool shareKV) {
  std::unique_ptr<DraftModel> d(
      new DraftModel(nullptr, std::move(model), numBlocks, blockSize, vocab,
                     std::max<int64_t>(maxTokensPerStep, 1)));
  d->shared = shareKV;
  return d;
}

bool sameKVLayout(const Manifest &a, const Manifest &b) {
  if (!a.kvCache || !b.kvCache)
    return false;
  const KVCacheSpec &x = *a.kvCache, &y = *b.kvCache;
  if (x.blockSize != y.blockSize || x.numLayers != y.numLayers ||
      x.numKVHeads != y.numKVHeads || x.headDim != y.headDim ||
      x.dtype != y.dtype || x.valueDim() != y.valueDim())
    return false;
  std::vector<const TensorSpec *> pa, pb;
  for (const TensorSpec &s : a.inputs)
    if (s.kvPool)
      pa.push_back(&s);
  for (const TensorSpec &s : b.inputs)
    if (s.kvPool)
      pb.push_back(&s);
  if (pa.size() != pb.size())
    return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i]->dtype != pb[i]->dtype || pa[i]->rank() != pb[i]->rank())
      return false;
    for (size_t d = 1; d < pa[i]->rank(); ++d)
      if (!pa[i]->shape[d].isStatic() || !pb[i]->shape[d].isStatic() ||
          pa[i]->shape[d].value != pb[i]->shape[d].value)
        return false;
  }
  return true;
}

Status DraftModel::attach(KVPools *targetPools, const Manifest *target) {
  if (!artifact)
    return {}; // detached: createDetached decided
  if (targetPools && target && sameKVLayout(artifact->manifest(), *target)) {
    sharedPools = targetPools;
    shared = true;
    return {};
  }
  Expected<KVPools> own = KVPools::allocate(*artifact, blocks.numBlocks());
  if (!own)
    return Error(artifact->directory() +
                 ": the draft model's KV cache: " + own.error());
  pools = own.take();
  return {};
}

std::string DraftModel::summary() const {
  std::string name = artifact ? artifact->directory() : std::string("(detached)");
  if (shared)
    return "draft model " + name + ": on the target's KV cache (the same layout)";
  return formatString("draft model %s: own KV cache of %lld blocks x %lld tokens", name.c_str(),
                      static_cast<long long>(blocks.numBlocks()),
                      static_cast<long long>(blocks.blockSize()));
}

void DraftModel::release(Sequence &seq) {
  seq.blocks.releaseAll(blocks);
  seq.computed.clear();
}

void DraftModel::forget(int64_t id) {
  auto it = sequences.find(id);
  if (it == sequences.end())
    return;
  release(*it->second);
  sequences.erase(it);
}

bool DraftModel::evictOne(const std::vector<Work> &inUse) {
  Sequence *victim = nullptr;
  for (auto &[id, seq] : sequences) {
    if (seq->blocks.table().empty())
      continue;
    bool used = std::any_of(inUse.begin(), inUse.end(),
                            [&](const Work &w) { return w.seq == seq.get(); });
    if (!used && (!victim || seq->lastUsed < victim->lastUsed))
      victim = seq.get();
  }
  if (!victim)
    return false;
  release(*victim);
  return true;
}

bool DraftModel::prepare(Sequence &seq, const Request &request,
                         std::vector<Work> &work) {
  const std::vector<int64_t> &tokens = *request.tokens;
  // Keep the K/V of the longest common prefix, but not of the last token:
  // the first proposal is drawn from its logits.
  size_t common = static_cast<size_t>(
      std::mismatch(seq.computed.begin(), seq.computed.end(), tokens.begin(),
                    tokens.end())
          .first -
      seq.computed.begin());
  common = std::min(common, tokens.size() - 1);
  seq.computed.resize(common);
  seq.blocks.truncate(blocks, static_cast<int64_t>(common));
  Work &w = work.back();
  w.pending.assign(tokens.begin() + static_cast<long>(common), tokens.end());
  // Proposals but the last are computed too.
  int64_t needed =
      static_cast<int64_t>(w.pending.size()) + request.numTokens - 1;
  while (!seq.blocks.reserve(blocks, needed))
    if (!evictOne(work)) {
      release(seq);
      return false;
    }
  seq.lastUsed = clock;
  return true;
}

Expected<std::vector<DraftModel::Proposal>>
DraftModel::propose(const std::vector<Request> &requests) {
  ++clock;
  std::vector<Proposal> out(requests.size());
  std::vector<Work> work;
  work.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request &r = requests[i];
    if (r.numTokens <= 0 || !r.tokens || r.tokens->empty() || !r.sampling ||
        (shared && !r.blockTable))
      continue;
    std::unique_ptr<Sequence> &seq = sequences[r.id];
    if (!seq)
      seq = std::make_unique<Sequence>(*r.sampling);
    work.push_back({seq.get(),
                    {},
                    *r.tokens,
                    r.numTokens,
                    &out[i],
                    r.position,
                    r.blockTable});
    if (shared) // the target's K/V up to its last token: nothing to catch up
      work.back().pending.assign(1, r.tokens->back());
    else if (!prepare(*seq, r, work))
      work.pop_back();
  }
  std::vector<Work *> active;
  for (Work &w : work)
    active.push_back(&w);
  while (!active.empty())
    if (Status s = step(active); !s)
      return s.takeError();
  return out;
}

Status DraftModel::step(std::vector<Work *> &active) {
  // Each sequence's pending tokens, within the step's budget (a long
  // catch-up takes several steps; every sequence gets at least a token
  // once those before it are served).
  std::vector<StepSequence> batch;
  std::vector<Work *> in;
  int64_t budget = maxTokensPerStep;
  for (Work *w : active) {
    if (budget <= 0)
      break;
    int64_t n =
        std::min<int64_t>(static_cast<int64_t>(w->pending.size()), budget);
    budget -= n;
    batch.push_back(
        {std::vector<int64_t>(w->pending.begin(), w->pending.begin() + n),
         shared ? w->position : w->seq->blocks.numTokens(),
         shared ? *w->blockTable : w->seq->blocks.table(), false});
    in.push_back(w);
  }
  Expected<Tensor> logits =
      model ? model(batch)
            : rt::runStep(*artifact, shared ? *sharedPools : pools, batch);
  if (!logits)
    return Error("draft model: " + logits.error());
  if (logits->dtype() != DType::F32 || logits->rank() != 2 ||
      logits->shape()[0] != static_cast<int64_t>(batch.size()) ||
      logits->shape()[1] != vocab)
    return Error(formatString("draft model: the logits are not f32 [%zu, %lld]",
                              batch.size(), static_cast<long long>(vocab)));
  ++numSteps;
  for (size_t j = 0; j < in.size(); ++j) {
    Work &w = *in[j];
    Sequence &seq = *w.seq;
    const std::vector<int64_t> &fed = batch[j].tokens;
    numTokens += static_cast<int64_t>(fed.size());
    if (shared) {
      w.position += static_cast<int64_t>(fed.size());
    } else {
      seq.blocks.commit(static_cast<int64_t>(fed.size()));
      seq.computed.insert(seq.computed.end(), fed.begin(), fed.end());
    }
    w.pending.erase(w.pending.begin(),
                    w.pending.begin() + static_cast<long>(fed.size()));
    if (!w.pending.empty())
      continue; // more of a catch-up to compute
    const float *row = logits->data<float>() + static_cast<int64_t>(j) * vocab;
    int64_t token;
    if (seq.sampler.sampling()) {
      std::vector<float> q;
      seq.sampler.distribution(row, vocab, w.history, q);
      token = seq.sampler.draw(q.data(), vocab);
      w.out->probs.insert(w.out->probs.end(), q.begin(), q.end());
    } else {
      token = seq.sampler.next(row, vocab, w.history);
    }
    w.out->tokens.push_back(token);
    w.history.push_back(token);
    if (static_cast<int64_t>(w.out->tokens.size()) < w.wanted)
      w.pending.push_back(token);
  }
  active.erase(std::remove_if(active.begin(), active.end(),
                              [](Work *w) {
                                return static_cast<int64_t>(
                                           w->out->tokens.size()) >= w->wanted;
                              }),
               active.end());
  return {};
}

} // namespace xfmr::rt
