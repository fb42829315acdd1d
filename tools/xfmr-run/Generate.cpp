//===- Generate.cpp - xfmr-run generate -----------------------------------===//
//
// Part of xfmr.
//
//   xfmr-run generate ARTIFACT --prompt-ids 1,2,3 [--prompt-ids 4,5] ...
//   xfmr-run generate ARTIFACT --prompt "text" | --chat "message" ...
//
// Generation through the serving engine (runtime/Engine.h) on a step
// function compiled with `xfmr-compile --kv-cache=paged`: every prompt is a
// request, all are batched together (continuous batching, chunked prefill,
// prefix caching, preemption under a KV budget), each with the same sampling
// parameters. Text prompts and chats go through the artifact's tokenizer and
// chat template (TextInterface.h) and print text.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"

#include "xfmr/runtime/Disaggregated.h"
#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/ExpertParallel.h"
#include "xfmr/runtime/KVCacheBudget.h"
#include "xfmr/runtime/Text.h"
#include "xfmr/runtime/TextInterface.h"
#include "xfmr/runtime/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

using namespace xfmr::rt;

namespace {

const char *const kGenerateHelp =
    "usage: xfmr-run generate ARTIFACT --prompt-ids ID,ID,... [--prompt-ids ...]\n"
    "                --max-new-tokens N [options]\n"
    "       xfmr-run generate ARTIFACT --prompt TEXT | --chat MESSAGE [...] [options]\n"
    "\n"
    "Generates through the serving engine on a step function (xfmr-compile\n"
    "--kv-cache=paged). Each --prompt-ids, --prompt or --chat is one request;\n"
    "all of them run together (continuous batching). Prints, one request after\n"
    "the other in the order given, the generated ids of a --prompt-ids\n"
    "(comma-separated, one line) and the generated text of a --prompt or --chat\n"
    "(special tokens skipped, then a newline); timings, the KV cache and peak\n"
    "RSS on stderr. --prompt and --chat need an artifact with a tokenizer\n"
    "(xfmr-compile from a model folder with tokenizer.json, or --tokenizer).\n"
    "\n"
    "options:\n"
    "  --prompt-ids LIST    a prompt's token ids (at least one); repeatable\n"
    "  --prompt TEXT        a prompt as text, encoded with the artifact's\n"
    "                       tokenizer as transformers' tokenizer(TEXT); repeatable\n"
    "  --chat MESSAGE       a user message, rendered with the artifact's chat\n"
    "                       template (add_generation_prompt) and encoded without\n"
    "                       adding special tokens again; repeatable\n"
    "  --system TEXT        a system message before each --chat message\n"
    "  --print-ids          print the generated ids of --prompt and --chat too\n"
    "                       (a line before the text)\n"
    "  --max-new-tokens N   tokens to generate per request (1..1000000; default:\n"
    "                       the artifact's generation_config.json max_new_tokens,\n"
    "                       else max_length less the prompt)\n"
    "  --stop-ids LIST      stop a request after it generates one of these\n"
    "                       (default: the artifact's eos ids, from the model\n"
    "                       folder's genai_config.json, generation_config.json\n"
    "                       and tokenizer_config.json)\n"
    "  --ignore-eos         do not stop at the artifact's eos ids\n"
    "  --temperature T      0: greedy; > 0: sample (default: the artifact's\n"
    "                       generation_config.json: greedy unless do_sample, as\n"
    "                       in transformers; so for top-k, top-p, repetition\n"
    "                       penalty and max new tokens)\n"
    "  --top-k K            keep the K most likely tokens (0: all)\n"
    "  --top-p P            keep the most likely tokens up to probability P (1: all)\n"
    "  --repetition-penalty R  > 1 discourages tokens already present (1: off)\n"
    "  --seed S             sampling seed (request i uses S + i)\n"
    "  --kv-cache-bytes N   KV cache size (default: half of MemAvailable, at most\n"
    "                       what every request needs at full length at once)\n"
    "  --speculative ngram  speculative decoding by prompt lookup:\n"
    "                       each decode step also verifies up to K tokens that\n"
    "                       followed the latest earlier occurrence of the last\n"
    "                       1-4 tokens; the output is plain decoding's (the\n"
    "                       same tokens for the same seed when sampling)\n"
    "  --speculative draft:DIR  speculative decoding with a draft model: the\n"
    "                       step artifact DIR (same vocabulary, e.g. this model\n"
    "                       quantized) decodes K tokens that one step verifies;\n"
    "                       greedy output is plain decoding's, sampled output\n"
    "                       has its distribution. Its KV cache holds as many\n"
    "                       tokens as this model's\n"
    "  --num-speculative K  tokens proposed per step at most (1..64, default 4;\n"
    "                       fewer while few proposals are kept)\n"
    "  --dump-logits DIR    write the logits each token of the first request is\n"
    "                       chosen from to DIR/step_K.npy (K from 0: the prefill)\n"
    "  --disaggregate       under mpirun -np 2: rank 0 computes the prompts, rank 1\n"
    "                       decodes (each request's KV blocks move over MPI once\n"
    "                       its prompt is done); rank 0 prints\n"
    "  --quiet              print only the ids, the text and errors\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "xfmr-run generate: error: %s (run 'xfmr-run generate --help')\n",
               message.c_str());
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "xfmr-run generate: error: %s\n", message.c_str());
  return 1;
}

/// "1,2,3" -> {1, 2, 3}; false on anything else.
bool parseIds(const std::string &text, std::vector<int64_t> &out) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos
                                                                    : comma - pos);
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
      return false;
    out.push_back(v);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return !out.empty();
}

/// One request as given on the command line.
struct PromptArg {
  enum Kind { Ids, Text, Chat } kind = Ids;
  std::vector<int64_t> ids; // Ids; the encoded prompt once tokenized
  std::string text;         // Text and Chat
};

/// "greedy, max_new_tokens 24": what the artifact's generation defaults
/// set, for the log.
std::string describeDefaults(const GenerationDefaults &d) {
  std::string s = d.doSample.value_or(false) ? "sampling" : "greedy";
  if (d.doSample.value_or(false))
    s += formatString(", temperature %g, top_k %lld", d.temperature.value_or(1.0),
                      static_cast<long long>(d.topK.value_or(50)));
  if (d.doSample.value_or(false) && d.topP)
    s += formatString(", top_p %g", *d.topP);
  if (d.repetitionPenalty)
    s += formatString(", repetition_penalty %g", *d.repetitionPenalty);
  if (d.maxNewTokens)
    s += formatString(", max_new_tokens %lld", static_cast<long long>(*d.maxNewTokens));
  else if (d.maxLength)
    s += formatString(", max_length %lld", static_cast<long long>(*d.maxLength));
  return s;
}

} // namespace

double peakResidentMiB(); // xfmr-run.cpp

namespace {

/// xfmr-run generate's command line.
struct GenerateOptions {
  std::string artifactDir, dumpDir, system;
  std::vector<PromptArg> args;
  std::vector<int64_t> stopIds;
  // Flags given override the artifact's generation defaults.
  std::optional<double> temperature, topP, repetitionPenalty;
  std::optional<int64_t> topK;
  int64_t maxNew = -1, kvBytes = 0, seed = 0, numSpeculative = 4;
  std::string speculative; ///< "", "ngram" or "draft:DIR"
  bool quiet = false, ignoreEos = false, stopGiven = false, printIds = false;
  bool disaggregate = false;
};

/// Parses argv[2..]: -1 to go on, else the exit status (0 after --help).
int parseOptions(int argc, char **argv, GenerateOptions &o) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kGenerateHelp);
      return 0;
    }
    bool *flag = arg == "--quiet" || arg == "-q" ? &o.quiet
                 : arg == "--ignore-eos"         ? &o.ignoreEos
                 : arg == "--print-ids"          ? &o.printIds
                 : arg == "--disaggregate"       ? &o.disaggregate
                                                 : nullptr;
    if (flag) {
      *flag = true;
      continue;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!o.artifactDir.empty())
        return usageError("more than one artifact given");
      o.artifactDir = arg;
      continue;
    }
    std::string name, value;
    if (!xfmr::run::splitOption(argc, argv, i, name, value))
      return usageError("option '" + name + "' needs a value");
    bool ok = true;
    double number = 0;
    int64_t integer = 0;
    if (name == "--prompt-ids") {
      o.args.emplace_back();
      ok = parseIds(value, o.args.back().ids);
    } else if (name == "--prompt" || name == "--chat") {
      PromptArg p;
      p.kind = name == "--prompt" ? PromptArg::Text : PromptArg::Chat;
      p.text = value;
      o.args.push_back(std::move(p));
    } else if (name == "--system") {
      o.system = value;
    } else if (name == "--stop-ids") {
      ok = parseIds(value, o.stopIds);
      o.stopGiven = true;
    } else if (name == "--max-new-tokens") {
      ok = parseInt(value, 1, 1000000, o.maxNew);
    } else if (name == "--temperature") {
      if ((ok = parseDouble(value, number)))
        o.temperature = number;
    } else if (name == "--top-k") {
      if ((ok = parseInt(value, 0, INT32_MAX, integer)))
        o.topK = integer;
    } else if (name == "--top-p") {
      if ((ok = parseDouble(value, number)))
        o.topP = number;
    } else if (name == "--repetition-penalty") {
      if ((ok = parseDouble(value, number)))
        o.repetitionPenalty = number;
    } else if (name == "--seed") {
      ok = parseInt(value, 0, INT64_MAX, o.seed);
    } else if (name == "--kv-cache-bytes") {
      ok = parseInt(value, 1, int64_t(1) << 46, o.kvBytes);
    } else if (name == "--dump-logits") {
      o.dumpDir = value;
    } else if (name == "--speculative") {
      o.speculative = value;
      ok = value == "ngram" ||
           (value.rfind("draft:", 0) == 0 && value.size() > 6);
    } else if (name == "--num-speculative") {
      ok = parseInt(value, 1, 64, o.numSpeculative);
    } else {
      return usageError("unknown option '" + name + "'");
    }
    if (!ok)
      return usageError("bad value for " + name + ": '" + value + "'");
  }
  if (o.artifactDir.empty())
    return usageError("no artifact given");
  if (o.args.empty())
    return usageError("--prompt-ids, --prompt or --chat is required");
  bool anyChat =
      std::any_of(o.args.begin(), o.args.end(),
                  [](const PromptArg &p) { return p.kind == PromptArg::Chat; });
  if (!o.system.empty() && !anyChat)
    return usageError("--system applies to --chat messages, and none is given");
  return -1;
}

/// Encodes the --prompt and --chat arguments with the artifact's tokenizer
/// and chat template (loaded into `text` when any is given).
Status encodePrompts(const Artifact &artifact, GenerateOptions &o,
                     std::optional<TextModel> &text) {
  if (std::any_of(o.args.begin(), o.args.end(), [](const PromptArg &p) {
        return p.kind != PromptArg::Ids;
      })) {
    Expected<TextModel> model = loadTextModel(artifact);
    if (!model)
      return model.takeError();
    text.emplace(model.take());
  }
  for (PromptArg &p : o.args) {
    if (p.kind == PromptArg::Text) {
      p.ids = encodePrompt(*text, p.text);
    } else if (p.kind == PromptArg::Chat) {
      nlohmann::json messages = nlohmann::json::array();
      if (!o.system.empty())
        messages.push_back({{"role", "system"}, {"content", o.system}});
      messages.push_back({{"role", "user"}, {"content", p.text}});
      Expected<std::vector<int64_t>> ids =
          encodeChat(*text, messages, /*addGenerationPrompt=*/true);
      if (!ids)
        return ids.takeError();
      p.ids = ids.take();
    }
    if (p.ids.empty())
      return Error("a prompt encodes to no tokens");
  }
  return {};
}

/// The artifact's generation defaults (generation_config.json), then the
/// flags given.
SamplingParams samplingFor(const GenerationDefaults &defaults,
                           const GenerateOptions &o) {
  SamplingParams sampling = applyGenerationDefaults(defaults);
  if (o.temperature)
    sampling.temperature = *o.temperature;
  if (o.topK)
    sampling.topK = *o.topK;
  if (o.topP)
    sampling.topP = *o.topP;
  if (o.repetitionPenalty)
    sampling.repetitionPenalty = *o.repetitionPenalty;
  if (o.stopGiven)
    sampling.stopTokens = o.stopIds;
  return sampling;
}

/// Tokens to generate per request: --max-new-tokens, else the defaults'
/// max_new_tokens, else max_length less the prompt; empty when none says.
std::vector<int64_t> maxTokensFor(const GenerationDefaults &defaults,
                                  const GenerateOptions &o) {
  std::vector<int64_t> maxTokens;
  for (const PromptArg &p : o.args) {
    int64_t n = o.maxNew;
    if (n < 0 && defaults.maxNewTokens)
      n = *defaults.maxNewTokens;
    else if (n < 0 && defaults.maxLength)
      n = std::max<int64_t>(1, *defaults.maxLength -
                                   static_cast<int64_t>(p.ids.size()));
    if (n < 0)
      return {};
    maxTokens.push_back(std::min<int64_t>(n, 1000000));
  }
  return maxTokens;
}

/// The KV cache's size: --kv-cache-bytes, else every request at its full
/// length at once, in whole blocks (the most the cache could hold), capped
/// by the memory available.
KVCacheBudget kvBudgetFor(const Artifact &artifact, const GenerateOptions &o,
                          const std::vector<int64_t> &maxTokens) {
  uint64_t blocksNeeded = 0,
           bs = static_cast<uint64_t>(artifact.manifest().kvCache->blockSize);
  for (size_t i = 0; i < o.args.size(); ++i)
    blocksNeeded +=
        (o.args[i].ids.size() + static_cast<uint64_t>(maxTokens[i]) + bs - 1) /
        bs;
  return o.kvBytes > 0
             ? explicitKVCacheBudget(static_cast<uint64_t>(o.kvBytes),
                                     "--kv-cache-bytes")
             : defaultKVCacheBudget(
                   blocksNeeded * KVPools::bytesPerBlock(artifact.manifest()),
                   availableMemoryBytes());
}

/// --dump-logits: writes each logits row request 0's tokens are chosen
/// from to DIR/step_K.npy; the first failure is kept in `error`.
std::function<void(int64_t, const float *, int64_t)>
logitsDumper(const std::string &dir, std::string &error) {
  auto dumped = std::make_shared<int64_t>(0);
  return [dir, dumped, &error](int64_t id, const float *logits, int64_t vocab) {
    if (id != 0 || !error.empty())
      return;
    Expected<Tensor> row = Tensor::create(DType::F32, {vocab}, "logits");
    if (!row) {
      error = row.error();
      return;
    }
    std::memcpy(row->bytes(), logits,
                static_cast<size_t>(vocab) * sizeof(float));
    if (Status s = writeNpy(
            dir + "/step_" + std::to_string((*dumped)++) + ".npy", *row);
        !s)
      error = s.error();
  };
}

/// --speculative draft:DIR: loads the draft and gives it to `engine`.
Status attachDraft(Engine &engine, const Artifact &artifact,
                   const GenerateOptions &o, const EngineConfig &config) {
  Expected<std::unique_ptr<DraftModel>> draft = DraftModel::load(
      o.speculative.substr(6), engine.vocabulary(),
      engine.totalBlocks() * artifact.manifest().kvCache->blockSize,
      config.maxTokensPerStep);
  if (!draft)
    return draft.takeError();
  if (Status s = engine.setDraft(draft.take()); !s)
    return s;
  if (!o.quiet)
    std::fprintf(stderr, "%s\n", engine.draft()->summary().c_str());
  return {};
}

/// Each request's ids (when asked or given as ids) and text, in order.
void printResults(const GenerateOptions &o,
                  const std::optional<TextModel> &text,
                  const std::map<int64_t, RequestResult> &results) {
  for (const auto &[id, r] : results) {
    const PromptArg &p = o.args[static_cast<size_t>(id)];
    if (p.kind == PromptArg::Ids || o.printIds) {
      for (size_t k = 0; k < r.tokens.size(); ++k)
        std::printf("%s%lld", k ? "," : "",
                    static_cast<long long>(r.tokens[k]));
      std::printf("\n");
    }
    if (p.kind != PromptArg::Ids) {
      std::string generated = decodeText(*text, r.tokens);
      std::fwrite(generated.data(), 1, generated.size(), stdout);
      std::printf("\n");
    }
  }
}

/// Per request: prompt and generated lengths, first-token and per-token
/// times, speculation's proposals.
void printRequestStats(const GenerateOptions &o, bool speculative,
                       const std::map<int64_t, RequestResult> &results) {
  for (const auto &[id, r] : results) {
    double decode = r.tokens.size() > 1
                        ? (r.finish - r.firstToken) / (r.tokens.size() - 1)
                        : 0;
    std::fprintf(stderr,
                 "request %lld: prompt %zu tokens, generated %zu (%s); first "
                 "token %.2f ms, "
                 "then %.2f ms/token\n",
                 static_cast<long long>(id),
                 o.args[static_cast<size_t>(id)].ids.size(), r.tokens.size(),
                 finishReasonName(r.finishReason),
                 1e3 * (r.firstToken - r.arrival), 1e3 * decode);
    if (speculative)
      std::fprintf(
          stderr,
          "request %lld: speculative: %lld proposed, %lld kept (%.0f%%)\n",
          static_cast<long long>(id), static_cast<long long>(r.proposedTokens),
          static_cast<long long>(r.acceptedTokens),
          r.proposedTokens ? 100.0 * r.acceptedTokens / r.proposedTokens : 0.0);
  }
}

/// MoE counters: what the decode steps (after `afterPrefill`) read of the
/// expert weights, and the tokens per expert over the whole run.
void printMoEStats(const Artifact &artifact,
                   const std::optional<Artifact::MoEStats> &afterPrefill,
                   int64_t engineSteps) {
  if (auto end = artifact.moeStats(); end && afterPrefill) {
    uint64_t tokens = end->tokens - afterPrefill->tokens;
    uint64_t read = end->expertBytesRead - afterPrefill->expertBytesRead;
    uint64_t dense = end->expertBytesDense - afterPrefill->expertBytesDense;
    if (tokens && dense) {
      // Every layer's call counts the step's tokens once: per token and
      // layer, then times the layers (calls per step).
      uint64_t calls = end->calls - afterPrefill->calls;
      uint64_t steps =
          static_cast<uint64_t>(engineSteps) - 1; // after the prefill
      double perStep = steps ? static_cast<double>(read) / steps : 0;
      double densePerStep = steps ? static_cast<double>(dense) / steps : 0;
      double others =
          static_cast<double>(artifact.weightsBytes()) - densePerStep;
      std::fprintf(stderr,
                   "moe: decode steps read %.2f MB of expert weights per step "
                   "(%.3f of all "
                   "experts, %llu layer calls, %.2f tokens per call); weights "
                   "read per step "
                   "%.2f MB of %.2f MB (%.3f)\n",
                   perStep / 1e6, static_cast<double>(read) / dense,
                   static_cast<unsigned long long>(calls),
                   static_cast<double>(tokens) / std::max<uint64_t>(1, calls),
                   (others + perStep) / 1e6,
                   static_cast<double>(artifact.weightsBytes()) / 1e6,
                   (others + perStep) /
                       static_cast<double>(artifact.weightsBytes()));
    }
  }
  // Load statistics over the whole run (prefill and decode): tokens per
  // expert, and the busiest expert against the mean (1.00 = balanced).
  std::vector<std::vector<uint64_t>> load = artifact.moeExpertTokens();
  for (size_t layer = 0; layer < load.size(); ++layer) {
    uint64_t total = 0, most = 0;
    std::string counts;
    for (uint64_t n : load[layer]) {
      total += n;
      most = std::max(most, n);
      counts += (counts.empty() ? "" : " ") + std::to_string(n);
    }
    double mean = load[layer].empty()
                      ? 0
                      : static_cast<double>(total) / load[layer].size();
    std::fprintf(
        stderr,
        "moe: layer %zu tokens per expert: %s (busiest %.2fx the mean)\n",
        layer, counts.c_str(),
        mean > 0 ? static_cast<double>(most) / mean : 0.0);
  }
}

} // namespace

/// --disaggregate: runs this rank's role (rank 0 prefill, rank 1 decode);
/// rank 0 prints the results and what each rank moved and computed.
int generateDisaggregated(const GenerateOptions &o, const std::optional<TextModel> &text,
                          Engine &engine, ServingRole role, const std::vector<Request> &requests) {
  DisaggregationStats stats;
  Expected<std::map<int64_t, RequestResult>> results =
      runDisaggregated(engine, role, requests, stats);
  if (!results)
    return fail(results.error());
  bool prefill = role == ServingRole::Prefill;
  if (!prefill)
    return 0;
  printResults(o, text, *results);
  if (!o.quiet)
    std::fprintf(stderr,
                 "prefill rank: %lld steps, %lld prompt tokens computed; %lld requests handed "
                 "off, %.2f MiB of KV sent in %.3f s (overlapped with the next steps), %.3f s "
                 "waited\n"
                 "decode rank: %lld steps, %lld prompt tokens computed, %lld preemptions\n",
                 static_cast<long long>(stats.steps), static_cast<long long>(stats.promptTokens),
                 static_cast<long long>(stats.handedOff),
                 static_cast<double>(stats.kvBytes) / (1 << 20), stats.transferSeconds,
                 stats.transferWaitSeconds, static_cast<long long>(stats.peerSteps),
                 static_cast<long long>(stats.peerPromptTokens),
                 static_cast<long long>(stats.peerPreemptions));
  return 0;
}

int generateMain(int argc, char **argv) {
  GenerateOptions o;
  if (int rc = parseOptions(argc, argv, o); rc >= 0)
    return rc;
  Expected<std::unique_ptr<Artifact>> loaded = Artifact::load(o.artifactDir);
  if (!loaded)
    return fail(loaded.error());
  const Artifact &artifact = **loaded;
  if (!artifact.manifest().kvCache)
    return fail(
        o.artifactDir +
        ": not a step function (compile with xfmr-compile --kv-cache=paged)");
  std::optional<TextModel> text;
  if (Status s = encodePrompts(artifact, o, text); !s)
    return fail(s.error());

  const std::optional<TextInterface> &textInfo = artifact.manifest().text;
  GenerationDefaults defaults =
      textInfo ? textInfo->defaults : GenerationDefaults();
  if (!o.quiet && !defaults.empty())
    std::fprintf(stderr,
                 "generation defaults from the artifact: %s (flags override)\n",
                 describeDefaults(defaults).c_str());
  SamplingParams sampling = samplingFor(defaults, o);
  std::vector<int64_t> maxTokens = maxTokensFor(defaults, o);
  if (maxTokens.empty())
    return usageError(
        "--max-new-tokens is required (the artifact states no max_new_tokens "
        "or max_length)");
  // Under mpirun (--expert-parallel artifacts) every rank generates the
  // same tokens in the same steps; rank 0 prints them.
  ExpertParallelScope scope;
  std::optional<ServingRole> role;
  if (o.disaggregate) {
    if (!o.speculative.empty())
      return usageError("--disaggregate does not speculate yet (drop --speculative)");
    Expected<ServingRole> joined = joinDisaggregated(artifact);
    if (!joined)
      return fail(joined.error());
    role = *joined;
  }
  Expected<ExpertParallelRank> rank =
      role ? Expected<ExpertParallelRank>(ExpertParallelRank{*role == ServingRole::Decode, 2})
           : joinExpertParallel(artifact);
  if (!rank)
    return fail(rank.error());
  if (!rank->isRoot()) {
    o.quiet = true;
    o.dumpDir.clear();
  }
  const std::vector<int64_t> eos = artifact.manifest().stopTokenIds();
  if (!o.stopGiven && !o.ignoreEos && !eos.empty()) {
    sampling.stopTokens = eos;
    if (!o.quiet) {
      std::string list;
      for (int64_t id : eos)
        list += (list.empty() ? "" : ",") + std::to_string(id);
      std::fprintf(
          stderr,
          "stopping at the artifact's eos ids %s (--ignore-eos: don't)\n",
          list.c_str());
    }
  }
  if (!o.dumpDir.empty() && ::mkdir(o.dumpDir.c_str(), 0777) != 0 &&
      errno != EEXIST)
    return fail(o.dumpDir + ": cannot create the directory");

  KVCacheBudget budget = kvBudgetFor(artifact, o, maxTokens);
  if (!o.quiet)
    std::fprintf(stderr, "%s\n", budget.describe().c_str());
  EngineConfig config;
  config.kvCacheBytes = budget.bytes;
  if (!o.speculative.empty())
    config.speculative.numTokens = o.numSpeculative;
  std::string dumpError;
  if (!o.dumpDir.empty())
    config.onLogits = logitsDumper(o.dumpDir, dumpError);
  auto start = std::chrono::steady_clock::now();
  auto clock = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  int64_t longest = 0;
  for (size_t i = 0; i < o.args.size(); ++i)
    longest = std::max<int64_t>(
        longest, static_cast<int64_t>(o.args[i].ids.size()) + maxTokens[i]);
  Expected<std::unique_ptr<Engine>> engine = Engine::create(
      artifact, config, clock,
      o.quiet ? Engine::Trace() : [](const std::string &line) {
        if (line.rfind("KV cache:", 0) == 0 || line.rfind("host tier:", 0) == 0)
          std::fprintf(stderr, "%s\n", line.c_str());
      },
      longest);
  if (!engine)
    return fail(engine.error());
  if (o.speculative.rfind("draft:", 0) == 0)
    if (Status s = attachDraft(**engine, artifact, o, config); !s)
      return fail(s.error());
  std::vector<Request> requests;
  for (size_t i = 0; i < o.args.size(); ++i) {
    Request r;
    r.id = static_cast<int64_t>(i);
    r.prompt = o.args[i].ids;
    r.sampling = sampling;
    r.sampling.maxTokens = maxTokens[i];
    r.sampling.seed = static_cast<uint64_t>(o.seed) + i;
    requests.push_back(std::move(r));
  }
  if (role)
    return generateDisaggregated(o, text, **engine, *role, requests);
  for (Request &r : requests)
    if (Status s = (*engine)->submit(std::move(r)); !s)
      return fail(s.error());
  std::map<int64_t, RequestResult> results;
  // MoE counters after the first step (the prefill of every prompt) and at
  // the end: what the decode steps read of the expert weights.
  std::optional<Artifact::MoEStats> moeAfterPrefill;
  while (!(*engine)->idle()) {
    if (Status s = (*engine)->step(); !s)
      return fail(s.error());
    if (!moeAfterPrefill)
      moeAfterPrefill = artifact.moeStats();
    if (!dumpError.empty())
      return fail(dumpError);
    for (RequestResult &r : (*engine)->takeFinished())
      results[r.id] = std::move(r);
  }
  if (rank->isRoot())
    printResults(o, text, results);
  if (!o.quiet) {
    printRequestStats(o, config.speculative.enabled(), results);
    printMoEStats(artifact, moeAfterPrefill, (*engine)->steps());
    std::fprintf(stderr, "%lld steps, %lld preemptions\n",
                 static_cast<long long>((*engine)->steps()),
                 static_cast<long long>((*engine)->preemptions()));
    if (double mib = peakResidentMiB(); mib >= 0)
      std::fprintf(stderr, "peak RSS: %.1f MiB\n", mib);
  }
  return 0;
}
