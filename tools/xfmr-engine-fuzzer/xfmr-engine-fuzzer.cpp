//===- xfmr-engine-fuzzer.cpp - libFuzzer target for the serving engine ---===//
//
// Part of xfmr. Drives xfmr::rt::Engine through its public request API with
// random sequences of submit, cancel and step on the hand-written step
// function test/Unit/Inputs/fake_step_model.c (its logits echo what it was
// given, so generation is deterministic and cheap). The input picks the
// engine's configuration (block size, a KV cache of a few blocks, step and
// sequence limits, prefix caching, host tier, aging, the preemption hook)
// and the requests: prompts with out-of-vocabulary ids, empty prompts, huge
// max_tokens, NaN and negative sampling parameters, duplicate ids, and
// cancellations of unknown and finished ids.
//
// What must hold, checked after every call (a violation aborts, which
// libFuzzer reports as a crash):
//  - submit accepts only a non-empty in-vocabulary prompt with valid
//    sampling parameters;
//  - step() never fails: every accepted request was checked to fit;
//  - every accepted request finishes exactly once (or is cancelled), with at
//    most max_tokens in-vocabulary tokens, "length" only at max_tokens and
//    "stop" only on a stop token;
//  - without the preemption test hook, stepping reaches idle in a bounded
//    number of steps;
//  - once idle and the prefix cache is cleared, every block is free.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/Digest.h"
#include "xfmr/runtime/Engine.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#ifndef XFMR_FAKE_STEP_MODEL_PATH
#error "XFMR_FAKE_STEP_MODEL_PATH must name the built fake step model library"
#endif

using namespace xfmr::rt;
namespace fs = std::filesystem;

namespace {

/// The fake step model's logits have 4 columns: the vocabulary.
constexpr int64_t kVocab = 4;
/// Block sizes of the artifacts loaded at start-up.
constexpr int64_t kBlockSizes[] = {1, 2, 4, 8};
/// Bounds that keep one input fast: KV blocks, ops, prompt length.
constexpr int64_t kMaxBlocks = 32;
constexpr int kMaxOps = 48;
constexpr size_t kMaxPrompt = 40;

/// XFMR_FUZZ_TRACE=1 prints every call and the engine's trace (to read a
/// reproducer).
bool tracing() {
  static const bool on = std::getenv("XFMR_FUZZ_TRACE") != nullptr;
  return on;
}

void note(const std::string &line) {
  if (tracing())
    std::fprintf(stderr, "  %s\n", line.c_str());
}

[[noreturn]] void violated(const std::string &what) {
  std::fprintf(stderr, "xfmr-engine-fuzzer: invariant violated: %s\n",
               what.c_str());
  std::abort();
}

/// {"size": N, "sha256": "..."} of `bytes`.
std::string fileEntry(const std::string &bytes) {
  return "{\"size\": " + std::to_string(bytes.size()) + ", \"sha256\": \"" +
         sha256Hex(bytes.data(), bytes.size()) + "\"}";
}

/// The step manifest of test/Unit/PagedKVTest.cpp with a given block size,
/// for the library `library` and an empty weights file.
std::string stepManifest(int64_t blockSize, const std::string &library) {
  std::string bs = std::to_string(blockSize);
  return R"({"format": "xfmr-artifact", "format_version": )" +
         std::to_string(kManifestFormatVersion) + R"(, "abi_version": )" +
         std::to_string(kArtifactABIVersion) + R"(,
  "compiler": "hand-written", "source": "fake_step_model.c",
  "checks": ["fake step: logits index outside the packed tokens"],
  "target": {"kind": "cpu", "triple": "x86_64-pc-linux-gnu", "requires": []},
  "files": {"model.so": )" +
         fileEntry(library) + R"(, "weights.bin": )" + fileEntry("") + R"(},
  "library": "model.so", "entry": "xfmr_entry",
  "weights": {"file": "weights.bin", "size": 0, "alignment": 64, "count": 0},
  "inputs": [
    {"name": "input_ids", "dtype": "int64", "shape": ["tokens"]},
    {"name": "positions", "dtype": "int64", "shape": ["tokens"]},
    {"name": "slot_mapping", "dtype": "int64", "shape": ["tokens"]},
    {"name": "block_tables", "dtype": "int32", "shape": ["seqs", "max_blocks"]},
    {"name": "context_lens", "dtype": "int32", "shape": ["seqs"]},
    {"name": "query_start_loc", "dtype": "int32", "shape": ["seqs_plus_one"]},
    {"name": "logits_indices", "dtype": "int64", "shape": ["outputs"]},
    {"name": "key_cache.0", "dtype": "float32", "shape": ["num_blocks", )" +
         bs + R"(, 1, 1], "role": "kv_pool"},
    {"name": "value_cache.0", "dtype": "float32", "shape": ["num_blocks", )" +
         bs + R"(, 1, 1], "role": "kv_pool"}],
  "outputs": [{"name": "logits", "dtype": "float32", "shape": ["outputs", 4]}],
  "kv_cache": {"block_size": )" +
         bs + R"(, "num_layers": 1, "num_kv_heads": 1, "head_dim": 1}})";
}

/// One loaded step artifact per block size, for the life of the process.
std::vector<std::unique_ptr<Artifact>> &artifacts() {
  static std::vector<std::unique_ptr<Artifact>> loaded;
  return loaded;
}

void loadArtifacts() {
  char pattern[] = "/tmp/xfmr-engine-fuzzer-XXXXXX";
  if (!::mkdtemp(pattern))
    violated("cannot create a temporary directory");
  std::string root = pattern;
  std::ifstream file(XFMR_FAKE_STEP_MODEL_PATH, std::ios::binary);
  std::string library((std::istreambuf_iterator<char>(file)),
                      std::istreambuf_iterator<char>());
  for (int64_t bs : kBlockSizes) {
    std::string dir = root + "/bs" + std::to_string(bs) + ".xfa";
    fs::create_directory(dir);
    fs::copy_file(XFMR_FAKE_STEP_MODEL_PATH, dir + "/model.so");
    std::ofstream(dir + "/weights.bin", std::ios::binary);
    std::ofstream(dir + "/manifest.json") << stepManifest(bs, library);
    Expected<std::unique_ptr<Artifact>> a = Artifact::load(dir);
    if (!a)
      violated("cannot load the fake step model: " + a.error());
    artifacts().push_back(a.take());
  }
  // The libraries stay mapped; the directory is not needed any more.
  std::error_code ec;
  fs::remove_all(root, ec);
}

/// A token id: mostly in the vocabulary, sometimes just outside or extreme.
int64_t pickToken(FuzzedDataProvider &in) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
  case 0:
    return -1;
  case 1:
    return kVocab;
  case 2:
    return in.ConsumeIntegral<int64_t>();
  default:
    return in.ConsumeIntegralInRange<int64_t>(0, kVocab - 1);
  }
}

/// A double: mostly a sensible value from `usual`, sometimes NaN, an
/// infinity, a negative, zero or any bit pattern.
double pickDouble(FuzzedDataProvider &in, std::initializer_list<double> usual) {
  switch (in.ConsumeIntegralInRange<int>(0, 11)) {
  case 0:
    return std::numeric_limits<double>::quiet_NaN();
  case 1:
    return std::numeric_limits<double>::infinity();
  case 2:
    return -1.0;
  case 3:
    return 0.0;
  case 4: {
    uint64_t bits = in.ConsumeIntegral<uint64_t>();
    double d;
    static_assert(sizeof d == sizeof bits);
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  default:
    return *(usual.begin() +
             in.ConsumeIntegralInRange<size_t>(0, usual.size() - 1));
  }
}

/// The largest max_tokens drawn: Engine::submit compares prompt + max_tokens
/// with the cache without overflowing (it used to, found by this fuzzer).
constexpr int64_t kHugeMaxTokens = std::numeric_limits<int64_t>::max();

int64_t pickMaxTokens(FuzzedDataProvider &in) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
  case 0:
    return 0;
  case 1:
    return -in.ConsumeIntegralInRange<int64_t>(1, 3);
  case 2:
    return kHugeMaxTokens;
  case 3:
    return std::min(in.ConsumeIntegral<int64_t>(), kHugeMaxTokens);
  case 4:
    return in.ConsumeIntegralInRange<int64_t>(1, kMaxBlocks * 8);
  default:
    return in.ConsumeIntegralInRange<int64_t>(1, 12);
  }
}

SamplingParams pickSampling(FuzzedDataProvider &in) {
  SamplingParams p;
  if (in.ConsumeBool()) // greedy with defaults, the common case
    return p.maxTokens = pickMaxTokens(in), p;
  p.temperature = pickDouble(in, {0.0, 0.7, 1.0, 2.0});
  p.topK = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-2, 5)
                            : in.ConsumeIntegral<int64_t>();
  p.topP = pickDouble(in, {1.0, 0.9, 0.5, 1e-9});
  p.repetitionPenalty = pickDouble(in, {1.0, 1.2, 0.8});
  p.seed = in.ConsumeIntegral<uint64_t>();
  for (int n = in.ConsumeIntegralInRange<int>(0, 3); n > 0; --n)
    p.stopTokens.push_back(pickToken(in));
  p.maxTokens = pickMaxTokens(in);
  return p;
}

/// Whether `in` must be accepted as far as the request itself goes (the
/// engine may still reject one that can never fit its KV cache).
bool isValidRequest(const Request &r) {
  if (r.prompt.empty())
    return false;
  for (int64_t t : r.prompt)
    if (t < 0 || t >= kVocab)
      return false;
  return static_cast<bool>(validate(r.sampling, kVocab));
}

/// What the fuzzer knows about one accepted request.
struct Accepted {
  SamplingParams sampling;
  /// Whether cancel(id) was called after it was accepted.
  bool cancelRequested = false;
};

/// What came back for one request.
struct Finished {
  std::string reason;
  std::vector<int64_t> tokens;
};

/// The finish reason as text, whatever type RequestResult uses for it.
template <typename Reason> std::string reasonText(const Reason &reason) {
  if constexpr (std::is_convertible_v<Reason, std::string>)
    return reason;
  else
    return toString(reason); // found by ADL next to a FinishReason enum
}

/// Why `f` cannot be the result of `a` ("" when it can).
std::string inconsistency(const Finished &f, const Accepted &a) {
  auto n = static_cast<int64_t>(f.tokens.size());
  if (n > a.sampling.maxTokens)
    return "more than max_tokens " + std::to_string(a.sampling.maxTokens);
  for (int64_t t : f.tokens)
    if (t < 0 || t >= kVocab)
      return "generated token " + std::to_string(t) + " outside the vocabulary";
  if (f.reason == "cancelled")
    return a.cancelRequested ? "" : "cancelled without a cancel";
  if (f.reason == "length")
    return n == a.sampling.maxTokens ? "" : "'length' before max_tokens";
  if (f.reason == "stop") {
    const std::vector<int64_t> &stops = a.sampling.stopTokens;
    if (n == 0 ||
        std::find(stops.begin(), stops.end(), f.tokens.back()) == stops.end())
      return "'stop' without a stop token last";
    return "";
  }
  return "unknown finish reason";
}

/// Whether every result can be paired with its own accepted request
/// (submit does not reject a duplicate id, so which request a result
/// belongs to is only known up to a matching).
bool perfectMatching(const std::vector<Finished> &results,
                     const std::vector<Accepted> &requests) {
  std::vector<int> owner(requests.size(), -1);
  std::function<bool(size_t, std::vector<bool> &)> augment =
      [&](size_t r, std::vector<bool> &seen) {
        for (size_t q = 0; q < requests.size(); ++q) {
          if (seen[q] || !inconsistency(results[r], requests[q]).empty())
            continue;
          seen[q] = true;
          if (owner[q] < 0 || augment(static_cast<size_t>(owner[q]), seen)) {
            owner[q] = static_cast<int>(r);
            return true;
          }
        }
        return false;
      };
  for (size_t r = 0; r < results.size(); ++r) {
    std::vector<bool> seen(requests.size(), false);
    if (!augment(r, seen))
      return false;
  }
  return true;
}

class Session {
public:
  explicit Session(Engine &engine) : engine(engine) {}

  void submit(Request r) {
    bool valid = isValidRequest(r);
    int64_t id = r.id;
    size_t promptLength = r.prompt.size();
    SamplingParams sampling = r.sampling;
    if (tracing()) {
      std::string p;
      for (int64_t t : r.prompt)
        p += (p.empty() ? "" : " ") + std::to_string(t);
      std::string stops;
      for (int64_t t : r.sampling.stopTokens)
        stops += (stops.empty() ? "" : " ") + std::to_string(t);
      note("submit id " + std::to_string(id) + " prompt [" + p +
           "] max_tokens " + std::to_string(r.sampling.maxTokens) + " stop [" +
           stops + "] temperature " + std::to_string(r.sampling.temperature) +
           " " + (r.cls == RequestClass::Batch ? "batch" : "interactive") +
           (r.systemPrompt ? " system" : ""));
    }
    Status s = engine.submit(std::move(r));
    note(s ? "  accepted" : "  rejected: " + s.error());
    if (s && !valid)
      violated("submit accepted an invalid request " + std::to_string(id));
    if (!s)
      return;
    requests[id].accepted.push_back({sampling});
    work += static_cast<int64_t>(promptLength) +
            std::min<int64_t>(sampling.maxTokens, kMaxBlocks * 8);
  }

  /// Tokens the accepted requests prefill and generate at most.
  int64_t totalWork() const { return work; }

  void cancel(int64_t id) {
    note("cancel " + std::to_string(id));
    auto it = requests.find(id);
    if (it != requests.end())
      for (Accepted &a : it->second.accepted)
        a.cancelRequested = true;
    engine.cancel(id);
    collect();
  }

  void step() {
    note("step");
    if (Status s = engine.step(); !s)
      violated("step() failed: " + s.error());
    if (engine.freeBlocks() < 0 || engine.freeBlocks() > engine.totalBlocks())
      violated("free blocks " + std::to_string(engine.freeBlocks()) +
               " outside [0, " + std::to_string(engine.totalBlocks()) + "]");
    collect();
  }

  /// Steps to idle; returns false if that took more than `limit` steps.
  bool drain(int64_t limit) {
    for (int64_t i = 0; i < limit && !engine.idle(); ++i)
      step();
    return engine.idle();
  }

  void cancelAll() {
    for (auto &[id, history] : requests)
      for (size_t i = history.finished.size(); i < history.accepted.size(); ++i)
        cancel(id);
  }

  /// Takes the engine's results: none may come back more often than its id
  /// was accepted, and a request without a duplicate id must be consistent
  /// with its result now.
  void collect() {
    for (RequestResult &r : engine.takeFinished()) {
      std::string reason = reasonText(r.finishReason);
      note("finished " + std::to_string(r.id) + " (" + reason + ", " +
           std::to_string(r.tokens.size()) + " tokens)");
      auto it = requests.find(r.id);
      if (it == requests.end())
        violated("request " + std::to_string(r.id) +
                 " finished but was never accepted");
      History &h = it->second;
      h.finished.push_back({reason, std::move(r.tokens)});
      if (h.finished.size() > h.accepted.size())
        violated("request " + std::to_string(r.id) + " finished " +
                 std::to_string(h.finished.size()) +
                 " times but was accepted " +
                 std::to_string(h.accepted.size()));
      if (h.accepted.size() == 1)
        if (std::string why = inconsistency(h.finished[0], h.accepted[0]);
            !why.empty())
          violated("request " + std::to_string(r.id) + " finished with '" +
                   reason + "' and " +
                   std::to_string(h.finished[0].tokens.size()) +
                   " tokens: " + why);
    }
  }

  /// Checks, once idle, that every accepted request finished exactly once
  /// with a result consistent with it.
  void checkAllFinished() {
    collect();
    for (auto &[id, h] : requests) {
      if (h.finished.size() != h.accepted.size())
        violated("idle, but request " + std::to_string(id) + " finished " +
                 std::to_string(h.finished.size()) + " of " +
                 std::to_string(h.accepted.size()) + " times");
      if (!perfectMatching(h.finished, h.accepted))
        violated("the results of the requests with id " + std::to_string(id) +
                 " match no assignment to what was submitted");
    }
  }

  /// An id to cancel: one accepted before, finished or not, or any.
  int64_t pickId(FuzzedDataProvider &in) const {
    if (!requests.empty() && in.ConsumeIntegralInRange<int>(0, 3) != 0) {
      auto it = requests.begin();
      std::advance(it,
                   in.ConsumeIntegralInRange<size_t>(0, requests.size() - 1));
      return it->first;
    }
    return in.ConsumeIntegral<int64_t>();
  }

private:
  /// Every request accepted with one id (several when ids repeat) and what
  /// came back for them.
  struct History {
    std::vector<Accepted> accepted;
    std::vector<Finished> finished;
  };

  Engine &engine;
  std::map<int64_t, History> requests;
  int64_t work = 0;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loadArtifacts();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Artifact &artifact = *artifacts()[in.ConsumeIntegralInRange<size_t>(
      0, std::size(kBlockSizes) - 1)];
  uint64_t perBlock = KVPools::bytesPerBlock(artifact.manifest());

  EngineConfig config;
  // A few blocks, sometimes less than one (create must fail cleanly).
  config.kvCacheBytes =
      in.ConsumeIntegralInRange<uint64_t>(0, kMaxBlocks) * perBlock +
      in.ConsumeIntegralInRange<uint64_t>(0, perBlock - 1);
  config.maxNumSeqs = in.ConsumeIntegralInRange<int64_t>(0, 8);
  config.maxTokensPerStep = in.ConsumeIntegralInRange<int64_t>(0, 64);
  config.prefixCaching = in.ConsumeBool();
  config.hostCacheBytes =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 8) * perBlock
                       : 0;
  config.batchAgingSteps = in.ConsumeIntegralInRange<int64_t>(0, 8);
  config.preemptEvery =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(1, 6) : 0;
  config.cachePolicy.ttlSeconds = in.ConsumeIntegralInRange<int>(0, 20);
  config.cachePolicy.protectionSeconds = in.ConsumeIntegralInRange<int>(0, 20);
  config.cachePolicy.protectionHalfLife = in.ConsumeIntegralInRange<int>(1, 20);
  config.cachePolicy.protectionBudget =
      in.ConsumeIntegralInRange<int64_t>(0, kMaxBlocks);
  config.cachePolicy.hostMinHits = in.ConsumeIntegralInRange<int64_t>(0, 3);
  config.prefixWaitSteps = in.ConsumeIntegralInRange<int64_t>(0, 4);
  config.sessionTtlSeconds = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(1, 20) : 0;
  config.admissionOrder =
      in.ConsumeBool() ? AdmissionOrder::LongestPrefix : AdmissionOrder::Fifo;
  config.preemption = static_cast<PreemptionMode>(in.ConsumeIntegralInRange<int>(0, 2));
  config.asyncHostCopies = in.ConsumeBool();
  config.onLogits = [](int64_t, const float *logits, int64_t vocab) {
    if (vocab != kVocab || !logits)
      violated("onLogits got a vocabulary of " + std::to_string(vocab));
  };
  // A clock that moves one second per call, so TTLs and aging expire.
  auto now = std::make_shared<double>(0);
  Engine::Clock clock = [now] { return *now += 1; };
  Engine::Trace trace;
  if (tracing())
    trace = [](const std::string &line) { note("  engine: " + line); };
  if (in.ConsumeBool() && !tracing())
    trace = [](const std::string &line) {
      if (line.empty())
        violated("empty trace line");
    };

  Expected<std::unique_ptr<Engine>> created =
      Engine::create(artifact, config, clock, trace);
  if (!created) {
    if (config.kvCacheBytes >= perBlock && config.maxNumSeqs >= 1 &&
        config.maxTokensPerStep >= 1)
      violated("create failed for a valid configuration: " + created.error());
    return 0;
  }
  Engine &engine = **created;
  if (tracing())
    std::fprintf(
        stderr,
        "config: block size %lld, %lld blocks, max seqs %lld, tokens/step "
        "%lld, "
        "prefix caching %d, host %llu bytes, aging %lld, preempt every %lld\n",
        (long long)artifact.manifest().kvCache->blockSize,
        (long long)engine.totalBlocks(), (long long)config.maxNumSeqs,
        (long long)config.maxTokensPerStep, config.prefixCaching,
        (unsigned long long)config.hostCacheBytes,
        (long long)config.batchAgingSteps, (long long)config.preemptEvery);
  if (engine.freeBlocks() != engine.totalBlocks())
    violated("a new engine has blocks in use");
  Session session(engine);

  int64_t nextId = 0;
  for (int op = 0; op < kMaxOps && in.remaining_bytes() > 0; ++op) {
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
    case 1:
    case 2: {
      Request r;
      r.id = in.ConsumeIntegralInRange<int>(0, 7) == 0
                 ? in.ConsumeIntegralInRange<int64_t>(0, nextId)
                 : nextId;
      ++nextId;
      size_t length = in.ConsumeIntegralInRange<size_t>(0, kMaxPrompt);
      // Prompts share prefixes (the prefix cache's case) when drawn from a
      // small alphabet; one odd token now and then leaves the vocabulary.
      for (size_t i = 0; i < length; ++i)
        r.prompt.push_back(
            in.ConsumeIntegralInRange<int>(0, 31) == 0 ? pickToken(in) : 1);
      for (size_t i = 0; i < length && in.ConsumeBool(); ++i)
        r.prompt[i] = in.ConsumeIntegralInRange<int64_t>(0, kVocab - 1);
      r.sampling = pickSampling(in);
      r.cls =
          in.ConsumeBool() ? RequestClass::Interactive : RequestClass::Batch;
      r.systemPrompt = in.ConsumeIntegralInRange<int>(0, 3) == 0;
      session.submit(std::move(r));
      break;
    }
    case 3:
      session.cancel(session.pickId(in));
      break;
    default:
      for (int n = in.ConsumeIntegralInRange<int>(1, 4); n > 0; --n)
        session.step();
      break;
    }
  }

  // Every step computes at least one token of some request unless it
  // preempts; a livelock runs forever, so a generous bound is cheap. The
  // preemption test hook may preempt a long prompt before it ever completes
  // a chunk: with it, give up sooner and cancel what is left.
  int64_t limit = config.preemptEvery ? 4 * session.totalWork() + 100
                                      : 64 * session.totalWork() + 1000;
  if (!session.drain(limit)) {
    if (config.preemptEvery == 0)
      violated("not idle after " + std::to_string(limit) + " steps");
    session.cancelAll();
    if (!session.drain(1))
      violated("not idle after cancelling every request");
  }
  session.checkAllFinished();
  engine.clearPrefixCache();
  if (engine.freeBlocks() != engine.totalBlocks())
    violated("idle with an empty prefix cache, but " +
             std::to_string(engine.freeBlocks()) + " of " +
             std::to_string(engine.totalBlocks()) + " blocks are free");
  return 0;
}
