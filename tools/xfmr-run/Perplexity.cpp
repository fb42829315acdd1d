//===- Perplexity.cpp - xfmr-run perplexity -------------------------------===//
//
// Part of xfmr.
//
//   xfmr-run perplexity ARTIFACT --tokens FILE.npy [--context N] [--json]
//
// The perplexity of a causal LM (a forward artifact: input_ids [B, S] and
// optionally attention_mask and position_ids in; logits [B, S, V] out; or a
// paged-KV step function, whose window runs through the KV pools in prompt
// chunks, so a quantized cache (--kv-dtype) is measured as serving reads it)
// on a token file: the text is cut into consecutive windows of N tokens, each
// run as one batch-1 sequence, and every token but a window's first is scored
// from the logits of the position before it:
//
//   perplexity = exp(-(1 / T) * sum_t log softmax(logits[t - 1])[token_t])
//
// in double precision. It is how quantization modes are compared (issue 12:
// perplexity relative to fp32 on held-out text).
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/CausalLM.h"
#include "xfmr/runtime/ExpertParallel.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/TensorIO.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace xfmr::rt;

namespace {

const char *const kPerplexityHelp =
    "usage: xfmr-run perplexity ARTIFACT --tokens FILE [--context N] [--json]\n"
    "\n"
    "The perplexity of a causal LM on a token file. ARTIFACT is a forward\n"
    "artifact (xfmr-compile without --kv-cache): input_ids [batch, sequence]\n"
    "and optionally attention_mask and position_ids in, logits [batch,\n"
    "sequence, vocab] first out; or a step function (--kv-cache=paged), run\n"
    "in chunks of --chunk tokens through its KV pools (e.g. to measure\n"
    "--kv-dtype=int8). The tokens are cut into consecutive windows\n"
    "of N; each window runs as one sequence and every token but its first is\n"
    "scored from the logits before it. Prints 'perplexity: X' (and the token\n"
    "and window counts on stderr).\n"
    "\n"
    "options:\n"
    "  --tokens FILE   token ids, .npy or .pb, int64 or int32, [T] or [1, T]\n"
    "  --context N     tokens per window (default: the artifact's context\n"
    "                  length from genai_config.json, else 512)\n"
    "  --chunk N       step functions: tokens per step (default 128)\n"
    "  --json          print {\"perplexity\": X, \"tokens\": T} instead\n"
    "  --quiet         print only the result and errors\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "xfmr-run perplexity: error: %s (run 'xfmr-run perplexity --help')\n",
               message.c_str());
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "xfmr-run perplexity: error: %s\n", message.c_str());
  return 1;
}

/// -log softmax(row)[target], in double.
double negativeLogLikelihood(const float *row, int64_t vocab, int64_t target) {
  double maxLogit = row[0];
  for (int64_t v = 1; v < vocab; ++v)
    maxLogit = std::max<double>(maxLogit, row[v]);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += std::exp(static_cast<double>(row[v]) - maxLogit);
  return maxLogit + std::log(sum) - static_cast<double>(row[target]);
}

struct Window {
  int64_t begin, length;
};

/// Logits [length, vocab] of one window of a forward artifact.
Expected<Tensor> forwardLogits(const Artifact &artifact, const std::vector<int64_t> &ids,
                               Window w) {
  Expected<std::vector<Tensor>> inputs = causalLMInputs(artifact.manifest(), ids, w.begin, w.length);
  if (!inputs)
    return inputs.takeError();
  std::vector<const Tensor *> args;
  for (const Tensor &t : *inputs)
    args.push_back(&t);
  Expected<std::vector<Tensor>> out = artifact.run(args);
  if (!out)
    return out.takeError();
  const Tensor &logits = (*out)[0];
  if (logits.dtype() != DType::F32 || logits.shape()[0] != 1 || logits.shape()[1] != w.length)
    return Error(std::string("logits are ") + dtypeName(logits.dtype()) + " " + formatShape(logits.shape()) +
                 ", expected float32 (1, " + std::to_string(w.length) + ", vocab)");
  Expected<Tensor> t = Tensor::create(DType::F32, {w.length, logits.shape()[2]}, "logits");
  if (t)
    std::copy(logits.data<float>(), logits.data<float>() + t->numel(), t->data<float>());
  return t;
}

/// Logits [length, vocab] of one window of a step function: one sequence in
/// blocks 0.. of `pools`, `chunk` tokens per step, logits for every token.
Expected<Tensor> stepLogits(const Artifact &artifact, KVPools &pools,
                            const std::vector<int64_t> &ids, Window w, int64_t chunk) {
  std::vector<int32_t> table(static_cast<size_t>(pools.numBlocks()));
  for (size_t b = 0; b < table.size(); ++b)
    table[b] = static_cast<int32_t>(b);
  std::vector<float> all;
  int64_t vocab = 0;
  for (int64_t first = 0; first < w.length; first += chunk) {
    StepSequence s;
    s.firstPosition = first;
    s.tokens.assign(ids.begin() + w.begin + first,
                    ids.begin() + w.begin + std::min(w.length, first + chunk));
    s.blockTable = table;
    s.allLogits = true;
    Expected<Tensor> logits = runStep(artifact, pools, {s});
    if (!logits)
      return logits.takeError();
    vocab = logits->shape()[1];
    all.insert(all.end(), logits->data<float>(), logits->data<float>() + logits->numel());
  }
  Expected<Tensor> t = Tensor::create(DType::F32, {w.length, vocab}, "logits");
  if (t)
    std::copy(all.begin(), all.end(), t->data<float>());
  return t;
}

} // namespace

int perplexityMain(int argc, char **argv) {
  std::string artifactDir, tokensPath;
  int64_t context = 0, chunk = 128;
  bool json = false, quiet = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kPerplexityHelp);
      return 0;
    }
    if (arg == "--json" || arg == "--quiet" || arg == "-q") {
      (arg == "--json" ? json : quiet) = true;
      continue;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!artifactDir.empty())
        return usageError("more than one artifact given");
      artifactDir = arg;
      continue;
    }
    std::string name, value;
    if (!xfmr::run::splitOption(argc, argv, i, name, value))
      return usageError("option '" + name + "' needs a value");
    if (name == "--tokens") {
      tokensPath = value;
    } else if (name == "--context" || name == "--chunk") {
      const int64_t lowest = name == "--context" ? 2 : 1;
      char *end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end || n < lowest || n > 1000000)
        return usageError("bad value for " + name + ": '" + value + "' (" +
                          std::to_string(lowest) + "..1000000)");
      (name == "--context" ? context : chunk) = n;
    } else {
      return usageError("unknown option '" + name + "'");
    }
  }
  if (artifactDir.empty())
    return usageError("no artifact given");
  if (tokensPath.empty())
    return usageError("--tokens is required");

  Expected<std::unique_ptr<Artifact>> loaded = Artifact::load(artifactDir);
  if (!loaded)
    return fail(loaded.error());
  const Artifact &artifact = **loaded;
  const Manifest &m = artifact.manifest();
  // Under mpirun (--tensor-parallel or --expert-parallel artifacts) every
  // rank runs the same windows; rank 0 prints.
  ExpertParallelScope scope;
  Expected<ExpertParallelRank> rank = joinExpertParallel(artifact);
  if (!rank)
    return fail(rank.error());
  if (!rank->isRoot()) {
    quiet = true;
    if (!std::freopen("/dev/null", "w", stdout))
      return fail("cannot silence rank " + std::to_string(rank->rank) + "'s output");
  }
  if (!m.kvCache && (m.outputs.empty() || m.outputs[0].rank() != 3))
    return fail(artifactDir + ": the first output is not logits [batch, sequence, vocab]");
  Expected<std::vector<int64_t>> ids = readTokenIds(tokensPath);
  if (!ids)
    return fail(ids.error());
  if (ids->size() < 2)
    return fail(tokensPath + ": fewer than 2 tokens");
  if (context == 0)
    context = m.contextLength() > 1 ? m.contextLength() : 512;
  if (!m.kvCache) {
    // The model's inputs are checked once, before any window runs.
    Expected<std::vector<Tensor>> probe =
        causalLMInputs(m, *ids, 0, std::min<int64_t>(2, static_cast<int64_t>(ids->size())));
    if (!probe)
      return fail(artifactDir + ": " + probe.error());
  }
  std::optional<KVPools> pools;
  if (m.kvCache) {
    int64_t bs = m.kvCache->blockSize;
    Expected<KVPools> p = KVPools::allocate(artifact, (context + bs - 1) / bs,
                                            uint64_t(1) << 40);
    if (!p)
      return fail(p.error());
    pools.emplace(p.take());
  }

  double nll = 0;
  int64_t scored = 0, windows = 0;
  for (int64_t begin = 0; begin + 1 < static_cast<int64_t>(ids->size()); begin += context) {
    Window w{begin, std::min<int64_t>(context, static_cast<int64_t>(ids->size()) - begin)};
    Expected<Tensor> out = pools ? stepLogits(artifact, *pools, *ids, w, chunk)
                                 : forwardLogits(artifact, *ids, w);
    if (!out)
      return fail(tokensPath + ": tokens " + std::to_string(w.begin) + ".." +
                  std::to_string(w.begin + w.length - 1) + ": " + out.error());
    const Tensor &logits = *out;
    int64_t vocab = logits.shape()[1];
    for (int64_t i = 1; i < w.length; ++i) {
      int64_t target = (*ids)[w.begin + i];
      if (target < 0 || target >= vocab)
        return fail(tokensPath + ": token " + std::to_string(w.begin + i) + " is " +
                    std::to_string(target) + ", outside the vocabulary [0, " +
                    std::to_string(vocab) + ")");
      nll += negativeLogLikelihood(logits.data<float>() + (i - 1) * vocab, vocab, target);
      ++scored;
    }
    ++windows;
  }
  double ppl = std::exp(nll / static_cast<double>(scored));
  if (json)
    std::printf("{\"perplexity\": %.17g, \"tokens\": %lld}\n", ppl,
                static_cast<long long>(scored));
  else
    std::printf("perplexity: %.6f\n", ppl);
  if (!quiet)
    std::fprintf(stderr, "%lld tokens scored in %lld windows of up to %lld\n",
                 static_cast<long long>(scored), static_cast<long long>(windows),
                 static_cast<long long>(context));
  return 0;
}
