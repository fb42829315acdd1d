//===- xfmr-serve.cpp - an OpenAI-compatible server for step artifacts ----===//
//
// Part of xfmr.
//
//   xfmr-serve STEP.xfa [--host 127.0.0.1] [--port 8000] [options]
//
// Serves a step function (xfmr-compile --kv-cache=paged) that carries its
// text interface (tokenizer, chat template) over OpenAI's HTTP API:
// /v1/completions and /v1/chat/completions (server-sent events with
// "stream": true), /v1/models, /health, /metrics (Prometheus), /tokenize,
// /detokenize. Flags are named like vLLM's where they mean the same.
// SIGTERM or SIGINT: stop accepting, let running requests finish (at most
// --drain-timeout seconds, then cancel them), exit 0.
//
//===----------------------------------------------------------------------===//

#include "Api.h"
#include "EngineLoop.h"
#include "xfmr/runtime/ExpertParallel.h"
#include "HttpServer.h"
#include "Metrics.h"

#include "../xfmr-run/CommandLine.h"

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/KVCacheBudget.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/Text.h"
#include "xfmr/runtime/TextInterface.h"

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <thread>

#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>

using namespace xfmr::rt;
using namespace xfmr::serve;

namespace {

const char *const kHelp =
    "usage: xfmr-serve STEP.xfa [options]\n"
    "\n"
    "Serves a step function (xfmr-compile --kv-cache=paged, compiled from a "
    "model\n"
    "folder with tokenizer.json or with --tokenizer) over OpenAI's HTTP API:\n"
    "POST /v1/completions, /v1/chat/completions (\"stream\": true for "
    "server-sent\n"
    "events), GET /v1/models, /health, /metrics (Prometheus text), POST "
    "/tokenize,\n"
    "/detokenize. SIGTERM/SIGINT drain running requests and exit 0.\n"
    "\n"
    "options:\n"
    "  --host ADDR              address to listen on (default 127.0.0.1)\n"
    "  --port N                 port (default 8000; 0: any free port, "
    "printed)\n"
    "  --served-model-name NAME the model's name in the API (default: the\n"
    "                           artifact directory's name)\n"
    "  --tokenizer PATH         a tokenizer.json (or a folder with one) "
    "instead of\n"
    "                           the artifact's\n"
    "  --max-model-len N        prompt + generated tokens of a request at "
    "most\n"
    "                           (default: the model's context length, else "
    "4096)\n"
    "  --max-num-seqs N         running sequences at most (default 256)\n"
    "  --max-num-batched-tokens N  token budget of one step (default 2048)\n"
    "  --kv-cache-bytes N       KV cache size (default: half of MemAvailable, "
    "at\n"
    "                           most max-num-seqs full-length sequences)\n"
    "  --no-enable-prefix-caching  disable the prefix cache\n"
    "  --host-cache-bytes N     host tier of the prefix cache (default 0)\n"
    "  --session-ttl S          seconds a finished request's history is kept for\n"
    "                           its chat's next turn, on the host tier when\n"
    "                           evicted (default 0: off; needs --host-cache-bytes)\n"
    "  --pools SPEC             interactive=0.875,batch=0.125: one pool per request\n"
    "                           class, each held to its share of the KV blocks, of\n"
    "                           every step's tokens and of the sequences, in the\n"
    "                           same steps; requests choose with \"priority\" or the\n"
    "                           X-Priority header (a name starting with 'batch' is\n"
    "                           the batch pool). Default: one pool, batch requests\n"
    "                           behind interactive ones until they age\n"
    "  --batch-prefill-slack F  with --pools: the prompt work the batch pool may\n"
    "                           add to a step, as a fraction of a decode step's\n"
    "                           measured time (default 0.5; 0: only its token\n"
    "                           share bounds it)\n"
    "  --max-waiting N          queued requests per pool before 429 (default "
    "4096)\n"
    "  --max-body-bytes N       larger request bodies get 413 (default 4 MiB)\n"
    "  --max-connections N      open connections at most, then 503 (default "
    "4096)\n"
    "  --io-threads N           HTTP I/O threads (default 2)\n"
    "  --memory-bandwidth B     the machine's read bandwidth in bytes/s for "
    "the\n"
    "                           saturation metric (default: measured at "
    "start)\n"
    "  --drain-timeout S        seconds SIGTERM lets requests finish (default "
    "30)\n"
    "  --seed S                 seed of requests that give none (default: "
    "random)\n"
    "  --speculative-config JSON  speculative decoding, as vLLM's flag:\n"
    "                           {\"method\": \"ngram\", \"num_speculative_tokens\": 4,\n"
    "                           \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 1,\n"
    "                           \"max_batch\": 8, \"max_verify_tokens\": 8} (prompt\n"
    "                           lookup; verification tokens per step shared by\n"
    "                           the running sequences, 0: no limit; the output is\n"
    "                           the same as without it, for greedy and seeded\n"
    "                           requests), or {\"method\": \"draft_model\",\n"
    "                           \"model\": DIR, \"num_speculative_tokens\": 4}\n"
    "                           (a draft step artifact of the same vocabulary,\n"
    "                           e.g. this model quantized; greedy output as\n"
    "                           without it, sampled output of its distribution)\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "xfmr-serve: error: %s (run 'xfmr-serve --help')\n",
               message.c_str());
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "xfmr-serve: error: %s\n", message.c_str());
  return 1;
}

/// "interactive=0.75,batch=0.25" -> pools; the class follows the name
/// ("batch..." pools hold batch-class requests).
bool parsePools(const std::string &text, std::vector<PoolSpec> &out) {
  double total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(
        pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return false;
    PoolSpec spec;
    spec.name = item.substr(0, eq);
    if (!parseDouble(item.substr(eq + 1), spec.share) || spec.share <= 0 ||
        spec.share > 1)
      return false;
    spec.cls = spec.name.rfind("batch", 0) == 0 ? RequestClass::Batch
                                                : RequestClass::Interactive;
    for (const PoolSpec &p : out)
      if (p.name == spec.name || p.cls == spec.cls) // one pool per class
        return false;
    total += spec.share;
    out.push_back(spec);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return !out.empty() && total <= 1.0 + 1e-9;
}

std::string baseName(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// vLLM's --speculative-config for prompt lookup; an error names the key.
bool parseSpeculativeConfig(const std::string &text, SpeculativeConfig &out,
                            std::string &draftModel, std::string &error) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    error = "not a JSON object";
    return false;
  }
  auto integer = [&](const char *key, int64_t lo, int64_t hi, int64_t &field) {
    auto it = j.find(key);
    if (it == j.end())
      return true;
    if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
      error = std::string(key) + " must be an integer in [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]";
      return false;
    }
    field = it->get<int64_t>();
    return true;
  };
  for (auto &[key, value] : j.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_max" &&
        key != "prompt_lookup_min" && key != "max_batch" && key != "max_verify_tokens" &&
        key != "model") {
      error = "unknown key '" + key + "'";
      return false;
    }
  // vLLM infers the method from "model" when it is left out.
  auto method = j.find("method"), model = j.find("model");
  std::string name = method != j.end() && method->is_string() ? method->get<std::string>()
                     : method == j.end() && model != j.end()  ? "draft_model"
                                                              : "";
  if (name != "ngram" && name != "draft_model") {
    error = "method must be \"ngram\" (prompt lookup) or \"draft_model\"";
    return false;
  }
  draftModel.clear();
  if (name == "draft_model") {
    if (model == j.end() || !model->is_string() || model->get<std::string>().empty()) {
      error = "method \"draft_model\" needs \"model\": the draft artifact's directory";
      return false;
    }
    draftModel = model->get<std::string>();
  } else if (model != j.end()) {
    error = "\"model\" is for method \"draft_model\"";
    return false;
  }
  out = SpeculativeConfig();
  out.numTokens = 4;
  if (!integer("num_speculative_tokens", 1, 64, out.numTokens) ||
      !integer("prompt_lookup_max", 1, 64, out.ngramMax) ||
      !integer("prompt_lookup_min", 1, 64, out.ngramMin) ||
      !integer("max_batch", 1, 1 << 20, out.maxBatch) ||
      !integer("max_verify_tokens", 0, 1 << 20, out.maxVerifyTokens))
    return false;
  if (out.ngramMin > out.ngramMax) {
    error = "prompt_lookup_min exceeds prompt_lookup_max";
    return false;
  }
  return true;
}

struct Flags {
  std::string artifact, tokenizer, modelName, pools;
  SpeculativeConfig speculative;
  std::string draftModel; ///< --speculative-config's "model"
  HttpServerOptions http;
  int64_t maxModelLen = 0, maxNumSeqs = 256, maxTokensPerStep = 2048,
          kvCacheBytes = 0, hostCacheBytes = 0, maxWaiting = 4096, seed = -1;
  bool prefixCaching = true;
  double memoryBandwidth = 0, drainTimeout = 30, batchPrefillSlack = 0.5, sessionTtl = 0;
};

/// 0: parsed; else the exit code.
int parseFlags(int argc, char **argv, Flags &f) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kHelp);
      return -1;
    }
    if (arg == "--no-enable-prefix-caching") {
      f.prefixCaching = false;
      continue;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!f.artifact.empty())
        return usageError("more than one artifact given");
      f.artifact = arg;
      continue;
    }
    std::string name, value;
    if (!xfmr::run::splitOption(argc, argv, i, name, value))
      return usageError("option '" + name + "' needs a value");
    int64_t n = 0;
    bool ok = true;
    if (name == "--host") {
      f.http.host = value;
    } else if (name == "--port") {
      ok = parseInt(value, 0, 65535, n);
      f.http.port = static_cast<int>(n);
    } else if (name == "--served-model-name") {
      f.modelName = value;
      ok = !value.empty();
    } else if (name == "--tokenizer") {
      f.tokenizer = value;
    } else if (name == "--max-model-len") {
      ok = parseInt(value, 1, int64_t(1) << 30, f.maxModelLen);
    } else if (name == "--max-num-seqs") {
      ok = parseInt(value, 1, 1 << 20, f.maxNumSeqs);
    } else if (name == "--max-num-batched-tokens") {
      ok = parseInt(value, 1, 1 << 24, f.maxTokensPerStep);
    } else if (name == "--kv-cache-bytes") {
      ok = parseInt(value, 1, int64_t(1) << 46, f.kvCacheBytes);
    } else if (name == "--host-cache-bytes") {
      ok = parseInt(value, 0, int64_t(1) << 46, f.hostCacheBytes);
    } else if (name == "--session-ttl") {
      ok = parseDouble(value, f.sessionTtl) && f.sessionTtl >= 0 && f.sessionTtl <= 1e9;
    } else if (name == "--pools") {
      f.pools = value;
    } else if (name == "--batch-prefill-slack") {
      ok = parseDouble(value, f.batchPrefillSlack) && f.batchPrefillSlack >= 0 &&
           f.batchPrefillSlack <= 1000;
    } else if (name == "--max-waiting") {
      ok = parseInt(value, 1, int64_t(1) << 30, f.maxWaiting);
    } else if (name == "--max-body-bytes") {
      ok = parseInt(value, 1, int64_t(1) << 34, n);
      f.http.maxBodyBytes = static_cast<uint64_t>(n);
    } else if (name == "--max-connections") {
      ok = parseInt(value, 1, 1 << 20, f.http.maxConnections);
    } else if (name == "--io-threads") {
      ok = parseInt(value, 1, 256, n);
      f.http.ioThreads = static_cast<int>(n);
    } else if (name == "--memory-bandwidth") {
      ok = parseDouble(value, f.memoryBandwidth) && f.memoryBandwidth > 0;
    } else if (name == "--drain-timeout") {
      ok = parseDouble(value, f.drainTimeout) && f.drainTimeout >= 0;
    } else if (name == "--seed") {
      ok = parseInt(value, 0, INT64_MAX, f.seed);
    } else if (name == "--speculative-config") {
      std::string why;
      if (!parseSpeculativeConfig(value, f.speculative, f.draftModel, why))
        return usageError("bad --speculative-config: " + why);
    } else {
      return usageError("unknown option '" + name + "'");
    }
    if (!ok)
      return usageError("bad value for " + name + ": '" + value + "'");
  }
  if (f.artifact.empty())
    return usageError("no artifact given");
  return 0;
}

/// The text interface: the artifact's, or --tokenizer's tokenizer with the
/// artifact's other text settings.
Expected<TextModel> loadText(const Artifact &artifact, const Flags &f) {
  if (f.tokenizer.empty())
    return loadTextModel(artifact);
  std::string path = f.tokenizer;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    path += "/tokenizer.json";
  Expected<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromFile(path);
  if (!tokenizer)
    return tokenizer.takeError();
  TextModel text;
  if (artifact.manifest().text) {
    Expected<TextModel> own = loadTextModel(artifact);
    if (own)
      text = own.take();
  }
  text.tokenizer = tokenizer.take();
  if (text.eosIds.empty())
    text.eosIds = artifact.manifest().stopTokenIds();
  text.name = f.tokenizer;
  return text;
}

/// Thousands of streams are thousands of sockets: the soft limit on open
/// files goes up to the hard limit.
void raiseOpenFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

/// Blocks SIGTERM/SIGINT in every thread made after it; a thread of its
/// own waits for them and shuts the server down.
sigset_t shutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return set;
}

} // namespace

int main(int argc, char **argv) {
  Flags f;
  if (int rc = parseFlags(argc, argv, f))
    return rc < 0 ? 0 : rc;
  sigset_t signals = shutdownSignals();
  raiseOpenFileLimit();

  Expected<std::unique_ptr<Artifact>> loaded = Artifact::load(f.artifact);
  if (!loaded)
    return fail(loaded.error());
  const Artifact &artifact = **loaded;
  const Manifest &manifest = artifact.manifest();
  if (!manifest.kvCache)
    return fail(
        f.artifact +
        ": not a step function (compile with xfmr-compile --kv-cache=paged)");
  if (manifest.expertParallelRanks > 1)
    return fail(f.artifact +
                ": expert-parallel artifacts are not served yet (use xfmr-run "
                "generate or xfmr-bench under mpirun)");
  // A tensor- or pipeline-parallel artifact under mpirun: rank 0 serves,
  // and the other ranks do each pool copy and step it does (each its own
  // shard or stage; docs/parallelism.md).
  if ((manifest.tensorParallelRanks > 1 || manifest.pipelineStages > 1) &&
      (!f.draftModel.empty() || !f.pools.empty()))
    return fail(f.artifact +
                ": a tensor- or pipeline-parallel server has one pool and no draft model yet "
                "(drop --pools and --draft-model)");
  ExpertParallelScope scope;
  Expected<ExpertParallelRank> rank = joinExpertParallel(artifact);
  if (!rank)
    return fail(rank.error());
  if (!rank->isRoot()) {
    if (Status s = followLeader(artifact); !s)
      return fail(s.error());
    return 0;
  }
  Expected<TextModel> text = loadText(artifact, f);
  if (!text)
    return fail(text.error());

  std::vector<PoolSpec> pools;
  if (f.pools.empty())
    pools.push_back({"default", 1.0, RequestClass::Interactive});
  else if (!parsePools(f.pools, pools))
    return usageError(
        "bad value for --pools: '" + f.pools +
        "' (want interactive=SHARE,batch=SHARE: at most one pool per request "
        "class, shares in (0, 1] summing to at most 1)");
  if (f.modelName.empty())
    f.modelName = baseName(f.artifact);
  int64_t maxModelLen = f.maxModelLen                  ? f.maxModelLen
                        : manifest.contextLength() > 0 ? manifest.contextLength()
                                                       : 4096;

  EngineLoopOptions options;
  options.modelName = f.modelName;
  options.pools = pools;
  options.maxWaiting = f.maxWaiting;
  options.batchPrefillSlack = f.batchPrefillSlack;
  options.engine.maxNumSeqs = f.maxNumSeqs;
  options.engine.maxTokensPerStep = f.maxTokensPerStep;
  options.engine.prefixCaching = f.prefixCaching;
  options.engine.hostCacheBytes = static_cast<uint64_t>(f.hostCacheBytes);
  options.engine.sessionTtlSeconds = f.sessionTtl;
  options.engine.speculative = f.speculative;
  options.draftModel = f.draftModel;
  uint64_t fullLength =
      static_cast<uint64_t>(f.maxNumSeqs) *
      static_cast<uint64_t>(maxModelLen + manifest.kvCache->blockSize) /
      static_cast<uint64_t>(manifest.kvCache->blockSize) *
      KVPools::bytesPerBlock(manifest);
  KVCacheBudget budget =
      f.kvCacheBytes > 0
          ? explicitKVCacheBudget(static_cast<uint64_t>(f.kvCacheBytes),
                                  "--kv-cache-bytes")
          : defaultKVCacheBudget(fullLength, availableMemoryBytes());
  options.engine.kvCacheBytes = budget.bytes;
  std::fprintf(stderr, "%s\n", budget.describe().c_str());
  options.memoryReadBandwidth =
      f.memoryBandwidth > 0 ? f.memoryBandwidth : measureReadBandwidth();
  std::fprintf(stderr, "memory read bandwidth: %.1f GB/s (%s)\n",
               options.memoryReadBandwidth / 1e9,
               f.memoryBandwidth > 0 ? "--memory-bandwidth" : "measured");

  Metrics metrics;
  Expected<std::unique_ptr<EngineLoop>> loop =
      EngineLoop::create(artifact, *text->tokenizer, options, metrics);
  if (!loop)
    return fail(loop.error());
  std::fprintf(stderr, "%s", (*loop)->describe().c_str());
  std::unique_ptr<PoolMirror> mirror = (*loop)->mirrorToFollowers();

  ApiOptions apiOptions;
  apiOptions.modelName = f.modelName;
  apiOptions.maxModelLen = maxModelLen;
  apiOptions.vocabSize = text->tokenizer->vocabSize();
  for (const TensorSpec &out : manifest.outputs)
    if (out.shape.size() == 2 && out.shape[1].isStatic())
      apiOptions.vocabSize = std::min(apiOptions.vocabSize, out.shape[1].value);
  apiOptions.created = static_cast<int64_t>(std::time(nullptr));
  apiOptions.seedBase =
      f.seed >= 0 ? static_cast<uint64_t>(f.seed) : std::random_device()();
  Api api(*text, **loop, metrics, apiOptions);

  Expected<std::unique_ptr<HttpServer>> server = HttpServer::listen(
      f.http, [&api](HttpRequest request, std::shared_ptr<Response> response) {
        api.handle(std::move(request), std::move(response));
      });
  if (!server)
    return fail(server.error());
  (*loop)->start();
  std::printf("xfmr-serve: serving %s as '%s' on http://%s:%d\n",
              f.artifact.c_str(), f.modelName.c_str(), f.http.host.c_str(),
              (*server)->port());
  std::fflush(stdout);

  std::thread signalThread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == 0)
      return;
    std::fprintf(stderr, "xfmr-serve: %s: draining (at most %.0f s)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", f.drainTimeout);
    (*server)->stopAccepting();
    (*loop)->drain(f.drainTimeout);
    (*server)->stop();
  });
  (*server)->run();
  (*loop)->stop();
  mirror.reset(); // the other ranks' followLeader ends
  // The signal thread has returned (run() ends only after stop()).
  signalThread.join();
  std::fprintf(stderr, "xfmr-serve: stopped\n");
  return 0;
}
