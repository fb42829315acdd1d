//===- Generate.cpp - xfmr-run generate -----------------------------------===//
//
// Part of xfmr.
//
//   xfmr-run generate ARTIFACT --prompt-ids 1,2,3 --max-new-tokens N
//
// Greedy generation for one prompt through a step function compiled with
// `xfmr-compile --kv-cache=paged`: allocates the KV pools the manifest
// describes, runs the prompt as one prefill step, then one decode step per
// token. The serving engine (scheduler, many requests) builds on the same
// runtime calls (xfmr/runtime/PagedKV.h).
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/TensorIO.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/stat.h>

using namespace xfmr::rt;

namespace {

const char *const kGenerateHelp =
    "usage: xfmr-run generate ARTIFACT --prompt-ids ID,ID,... --max-new-tokens N\n"
    "                [--stop-ids ID,...] [--dump-logits DIR] [--quiet]\n"
    "\n"
    "Greedy generation through a step function (xfmr-compile --kv-cache=paged):\n"
    "one prefill step over the prompt, then one decode step per new token.\n"
    "Prints the generated ids, comma-separated, on stdout; timings, KV pool\n"
    "size and peak RSS on stderr.\n"
    "\n"
    "options:\n"
    "  --prompt-ids LIST    the prompt's token ids (at least one)\n"
    "  --max-new-tokens N   tokens to generate (1..1000000)\n"
    "  --stop-ids LIST      stop after generating one of these ids\n"
    "  --dump-logits DIR    write each step's last-token logits to\n"
    "                       DIR/step_K.npy (K from 0; step 0 is the prefill)\n"
    "  --quiet              print only the ids and errors\n";

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

} // namespace

double peakResidentMiB(); // xfmr-run.cpp

int generateMain(int argc, char **argv) {
  std::string artifactDir, dumpDir;
  std::vector<int64_t> prompt, stop;
  int64_t maxNew = -1;
  bool quiet = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kGenerateHelp);
      return 0;
    }
    if (arg == "--quiet" || arg == "-q") {
      quiet = true;
      continue;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!artifactDir.empty())
        return usageError("more than one artifact given");
      artifactDir = arg;
      continue;
    }
    std::string name = arg, value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc)
        return usageError("option '" + name + "' needs a value");
      value = argv[++i];
    }
    if (name == "--prompt-ids") {
      if (!parseIds(value, prompt))
        return usageError("--prompt-ids expects comma-separated non-negative ids, got '" +
                          value + "'");
    } else if (name == "--stop-ids") {
      if (!parseIds(value, stop))
        return usageError("--stop-ids expects comma-separated ids, got '" + value + "'");
    } else if (name == "--max-new-tokens") {
      char *end = nullptr;
      errno = 0;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0 || n < 1 || n > 1000000)
        return usageError("--max-new-tokens expects 1..1000000, got '" + value + "'");
      maxNew = n;
    } else if (name == "--dump-logits") {
      dumpDir = value;
    } else {
      return usageError("unknown option '" + name + "'");
    }
  }
  if (artifactDir.empty())
    return usageError("no artifact given");
  if (prompt.empty())
    return usageError("--prompt-ids is required");
  if (maxNew < 0)
    return usageError("--max-new-tokens is required");

  Expected<std::unique_ptr<Artifact>> loaded = Artifact::load(artifactDir);
  if (!loaded)
    return fail(loaded.error());
  const Artifact &artifact = **loaded;
  if (!dumpDir.empty() && ::mkdir(dumpDir.c_str(), 0777) != 0 && errno != EEXIST)
    return fail(dumpDir + ": cannot create the directory");
  Expected<GreedyResult> result =
      generateGreedy(artifact, prompt, maxNew, stop, /*keepLogits=*/!dumpDir.empty());
  if (!result)
    return fail(result.error());
  for (size_t k = 0; k < result->lastLogits.size(); ++k)
    if (Status s = writeNpy(dumpDir + "/step_" + std::to_string(k) + ".npy",
                            result->lastLogits[k]);
        !s)
      return fail(s.error());
  for (size_t k = 0; k < result->tokens.size(); ++k)
    std::printf("%s%lld", k ? "," : "", static_cast<long long>(result->tokens[k]));
  std::printf("\n");
  if (!quiet) {
    const KVCacheSpec &kv = *artifact.manifest().kvCache;
    size_t decodeSteps = result->tokens.size() > 1 ? result->tokens.size() - 1 : 0;
    std::fprintf(stderr,
                 "prompt %zu tokens, generated %zu; prefill %.2f ms, decode %.2f ms/token; "
                 "KV cache: %d layers, block size %lld\n",
                 prompt.size(), result->tokens.size(), result->prefillMs,
                 decodeSteps ? result->decodeMs / decodeSteps : 0.0,
                 static_cast<int>(kv.numLayers), static_cast<long long>(kv.blockSize));
    if (double mib = peakResidentMiB(); mib >= 0)
      std::fprintf(stderr, "peak RSS: %.1f MiB\n", mib);
  }
  return 0;
}
