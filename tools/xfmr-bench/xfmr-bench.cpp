//===- xfmr-bench.cpp - replay request traces through the serving engine --===//
//
// Part of xfmr.
//
//   xfmr-bench STEP.xfa (--synthetic SPEC | --trace FILE) [--baseline sequential] [--warmup N]
//              [--json] [--trace-decisions] [engine options]
//
// Replays requests (arrival step, prompt and output lengths, shared
// prefixes, class, cancellation) through xfmr::rt::Engine on a step function
// compiled with `xfmr-compile --kv-cache=paged`, and reports throughput,
// TTFT/TPOT percentiles, KV usage, prefix hit rate and preemptions. With
// `--baseline sequential` it also runs the same requests one at a time in the
// same process and checks that greedy outputs are identical.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/ExpertParallel.h"
#include "xfmr/runtime/Disaggregated.h"
#include "xfmr/runtime/KVCacheBudget.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace xfmr::rt;

namespace {

const char *const kHelp =
    "usage: xfmr-bench STEP.xfa (--synthetic SPEC | --trace FILE) [options]\n"
    "\n"
    "Replays requests through the serving engine on a step function compiled with\n"
    "xfmr-compile --kv-cache=paged and reports throughput (generated tokens/s),\n"
    "TTFT and TPOT p50/p99, KV-cache usage, prefix hit rate and preemptions.\n"
    "\n"
    "  --synthetic SPEC    comma-separated key=value: requests=64, prompt=128,\n"
    "                      output=64, shared-prefix=0 (tokens every prompt\n"
    "                      starts with, a system prompt), batch=0 (fraction of\n"
    "                      batch-class requests), seed=0, sessions=0 and\n"
    "                      turns=1 (multi-turn chats: each of `sessions`\n"
    "                      conversations sends `turns` requests, the next when\n"
    "                      the previous one is done, each prompt the whole\n"
    "                      history, previous answers included, plus `prompt` new\n"
    "                      tokens; think=0: steps between a turn's answer and\n"
    "                      the next turn), every=0 (arrival steps\n"
    "                      between requests; 0: all at once)\n"
    "  --trace FILE        one request per line: `at=STEP prompt=N output=M\n"
    "                      [prefix=GROUP:LEN] [class=batch] [cancel=STEP]`\n"
    "                      or `at=STEP ids=1,2,3 output=M ...` with the prompt's\n"
    "                      token ids ('#' starts a comment); prompts of the same prefix\n"
    "                      group share their first LEN tokens; the group\n"
    "                      'system' is a system prompt (protected in the cache)\n"
    "  --baseline sequential  also run the requests one at a time (same\n"
    "                      process) and compare outputs and throughput\n"
    "  --baseline recompute  also run them with preemption by recomputation\n"
    "                      only (same process) and compare\n"
    "  --baseline device-only  also run them without the host tier (same\n"
    "                      process) and compare\n"
    "  --baseline plain    with --speculative: also run them without speculation\n"
    "                      (same process, same batching) and compare\n"
    "  --speculative ngram|draft:DIR  speculative decoding by prompt lookup or\n"
    "                      with the draft model DIR (xfmr-run generate --help);\n"
    "                      the JSON adds\n"
    "                      proposals, kept tokens, the acceptance rate and the\n"
    "                      mean tokens a verification step appends\n"
    "  --num-speculative K tokens proposed per step at most (1..64, default 4)\n"
    "  --disaggregate      under mpirun -np 2: rank 0 computes the prompts, rank 1\n"
    "                      decodes (each request's KV blocks move over MPI once\n"
    "                      its prompt is done); the JSON adds the hand-offs, their\n"
    "                      bytes and transfer time, and each rank's steps and\n"
    "                      prompt tokens computed (the decode rank's: 0). No\n"
    "                      conversations, cancellations or speculation\n"
    "  --json              print one JSON object instead of the table\n"
    "  --trace-decisions   print every scheduling and cache decision (the clock\n"
    "                      is then the step number: deterministic output)\n"
    "  --kv-cache-bytes N  KV cache size (default: half of MemAvailable, at most\n"
    "                      what every request needs at full length at once;\n"
    "                      the chosen size and its source go to stderr)\n"
    "  --max-num-seqs N    running sequences at most (default 256)\n"
    "  --max-tokens-per-step N  token budget of one step (default 2048)\n"
    "  --no-prefix-cache   disable prefix caching\n"
    "  --host-cache-bytes N  host tier of the prefix cache (default 0: none):\n"
    "                      evicted blocks that were reused move there and come\n"
    "                      back on a hit instead of being recomputed\n"
    "  --admission fifo|lpm  admission order within a class: arrival (default)\n"
    "                      or most cached prompt tokens first (SGLang's lpm)\n"
    "  --session-ttl S     seconds a finished request's history goes to the host\n"
    "                      tier when evicted, for its conversation's next turn\n"
    "                      (default 0: off; needs --host-cache-bytes)\n"
    "  --batch-aging N     steps a batch-class request waits before it is\n"
    "                      scheduled as interactive (default 64)\n"
    "  --preemption auto|recompute|swap\n"
    "                      what a preempted sequence's cached blocks become with\n"
    "                      --host-cache-bytes: swapped to the host tier and\n"
    "                      loaded back, or recomputed; auto (default) picks the\n"
    "                      cheaper from the measured copy and prefill rates\n"
    "  --prefix-wait-steps N\n"
    "                      steps a request may wait for prompt blocks a running\n"
    "                      sequence is computing, instead of computing its own\n"
    "                      copy (default 4; 0: never wait)\n"
    "  --preempt-every N   test hook: preempt the newest sequence every N steps\n"
    "  --host-copy-delay-ms X  test hook: each host-tier block copy also\n"
    "                      sleeps X ms (a slow link)\n"
    "  --sync-host-copies  run host-tier copies inside the step that needs them\n"
    "                      (default: on a copy thread, behind the steps)\n"
    "  --warmup N          replay the requests N times first, untimed, on engines\n"
    "                      of their own (default 0): the measured run then finds\n"
    "                      the process's memory warm, as a serving process does\n"
    "                      after its first requests\n";

int usage(const std::string &m) {
  std::fprintf(stderr, "xfmr-bench: error: %s (run 'xfmr-bench --help')\n", m.c_str());
  return 2;
}
int fail(const std::string &m) {
  std::fprintf(stderr, "xfmr-bench: error: %s\n", m.c_str());
  return 1;
}

struct TraceRequest {
  int64_t at = 0, prompt = 0, output = 0, prefixLen = 0, cancelAt = -1;
  std::string prefixGroup;
  RequestClass cls = RequestClass::Interactive;
  /// ids=...: the prompt's token ids, given instead of generated.
  std::vector<int64_t> ids;
  /// "trace.txt:3" for errors about this request ("" when synthetic).
  std::string where;
  /// A later turn of a conversation: the index of the previous turn, whose
  /// prompt and output begin this prompt; sent `at` steps after that one
  /// is done (the user's think time).
  int64_t after = -1;
};

/// "1,2,3" as token ids (any int64: the vocabulary is checked later, with
/// the artifact at hand).
bool parseIds(const std::string &list, std::vector<int64_t> &ids) {
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t id = 0;
    if (!parseInt(item, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), id))
      return false;
    ids.push_back(id);
  }
  return !ids.empty() && ids.size() <= (1u << 20);
}

/// Every explicit token id of the trace lies in the vocabulary.
Status checkTraceIds(const std::vector<TraceRequest> &trace, int64_t vocab) {
  for (const TraceRequest &r : trace)
    for (int64_t id : r.ids)
      if (id < 0 || id >= vocab)
        return Error(r.where + ": token " + std::to_string(id) + " outside the vocabulary of " +
                     std::to_string(vocab));
  return Status();
}

/// `sessions` conversations of `turns` requests each (session-major): turn 0
/// of session i arrives at step i * every, each later turn `think` steps
/// after the previous one is done.
std::vector<TraceRequest> sessionRequests(int64_t sessions, int64_t turns, int64_t prompt,
                                          int64_t output, int64_t shared, int64_t every,
                                          int64_t think) {
  std::vector<TraceRequest> out;
  for (int64_t i = 0; i < sessions; ++i)
    for (int64_t t = 0; t < turns; ++t) {
      TraceRequest r;
      r.at = t == 0 ? i * every : think;
      r.output = output;
      r.prompt = prompt + (t == 0 ? shared : 0);
      if (t == 0 && shared) {
        r.prefixGroup = "system";
        r.prefixLen = shared;
      }
      r.after = t == 0 ? -1 : static_cast<int64_t>(out.size()) - 1;
      out.push_back(r);
    }
  return out;
}

Expected<std::vector<TraceRequest>> synthetic(const std::string &spec) {
  std::map<std::string, std::string> kv{{"requests", "64"}, {"prompt", "128"}, {"output", "64"},
                                         {"shared-prefix", "0"}, {"batch", "0"}, {"seed", "0"},
                                         {"every", "0"}, {"sessions", "0"}, {"turns", "1"},
                                         {"think", "0"}};
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || !kv.count(item.substr(0, eq)))
      return Error("--synthetic: unknown item '" + item + "'");
    kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  int64_t n, prompt, output, shared, seed, every, sessions, turns, think;
  if (!parseInt(kv["requests"], 1, 100000, n) || !parseInt(kv["prompt"], 1, 1 << 20, prompt) ||
      !parseInt(kv["output"], 1, 1 << 20, output) ||
      !parseInt(kv["shared-prefix"], 0, 1 << 20, shared) || !parseInt(kv["seed"], 0, 1 << 30, seed) ||
      !parseInt(kv["every"], 0, 1 << 20, every) || !parseInt(kv["sessions"], 0, 10000, sessions) ||
      !parseInt(kv["turns"], 1, 1000, turns) || !parseInt(kv["think"], 0, 1 << 20, think))
    return Error("--synthetic: every value must be a non-negative integer in range");
  if (sessions)
    return sessionRequests(sessions, turns, prompt, output, shared, every, think);
  double batch = std::atof(kv["batch"].c_str());
  std::vector<TraceRequest> out;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  for (int64_t i = 0; i < n; ++i) {
    TraceRequest r;
    r.at = i * every;
    r.prompt = shared + prompt;
    r.output = output;
    if (shared) {
      r.prefixGroup = "system";
      r.prefixLen = shared;
    }
    r.cls = (static_cast<double>(rng() >> 11) * 0x1.0p-53) < batch ? RequestClass::Batch
                                                                     : RequestClass::Interactive;
    out.push_back(r);
  }
  return out;
}

Expected<std::vector<TraceRequest>> readTrace(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return Error(path + ": cannot open");
  std::vector<TraceRequest> out;
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    line = line.substr(0, line.find('#'));
    std::stringstream ss(line);
    std::string item;
    TraceRequest r;
    bool any = false;
    while (ss >> item) {
      any = true;
      size_t eq = item.find('=');
      std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
      bool ok = true;
      if (key == "at")
        ok = parseInt(value, 0, 1 << 30, r.at);
      else if (key == "prompt")
        ok = parseInt(value, 1, 1 << 20, r.prompt);
      else if (key == "output")
        ok = parseInt(value, 1, 1 << 20, r.output);
      else if (key == "cancel")
        ok = parseInt(value, 0, 1 << 30, r.cancelAt);
      else if (key == "class")
        ok = value == "batch" || value == "interactive",
        r.cls = value == "batch" ? RequestClass::Batch : RequestClass::Interactive;
      else if (key == "ids") {
        ok = parseIds(value, r.ids);
        r.prompt = static_cast<int64_t>(r.ids.size());
      } else if (key == "prefix") {
        size_t colon = value.find(':');
        ok = colon != std::string::npos && colon > 0 &&
             parseInt(value.substr(colon + 1), 1, 1 << 20, r.prefixLen);
        r.prefixGroup = value.substr(0, colon);
      } else
        ok = false;
      if (!ok)
        return Error(path + ":" + std::to_string(lineNo) + ": bad item '" + item + "'");
    }
    if (!any)
      continue;
    r.where = path + ":" + std::to_string(lineNo);
    if (!r.ids.empty() && (r.prompt != static_cast<int64_t>(r.ids.size()) || r.prefixLen > 0))
      return Error(r.where + ": ids= gives the whole prompt (no prompt= or prefix= beside it)");
    if (r.prompt == 0 || r.output == 0 || r.prefixLen > r.prompt)
      return Error(path + ":" + std::to_string(lineNo) +
                   ": a request needs prompt= and output= (prefix no longer than the prompt)");
    out.push_back(r);
  }
  if (out.empty())
    return Error(path + ": no requests");
  return out;
}

/// Prompt token ids: a group's shared prefix is the same for every request
/// of the group; the rest is distinct per request.
std::vector<int64_t> promptTokens(const TraceRequest &r, size_t index, int64_t vocab) {
  if (!r.ids.empty())
    return r.ids;
  std::vector<int64_t> t;
  std::mt19937_64 prefixRng(std::hash<std::string>{}(r.prefixGroup) * 31 + 7);
  for (int64_t i = 0; i < r.prefixLen; ++i)
    t.push_back(static_cast<int64_t>(prefixRng() % static_cast<uint64_t>(vocab)));
  std::mt19937_64 rng(1000003ull * (index + 1));
  for (int64_t i = r.prefixLen; i < r.prompt; ++i)
    t.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
  return t;
}

/// The KV cache every request of `trace` needs at its full length at once:
/// more than this is never used.
uint64_t workloadBytes(const Manifest &manifest, const std::vector<TraceRequest> &trace) {
  if (!manifest.kvCache || manifest.kvCache->blockSize < 1)
    return 0;
  uint64_t bs = static_cast<uint64_t>(manifest.kvCache->blockSize), blocks = 0;
  std::vector<uint64_t> length(trace.size()); // a later turn's prompt holds the history
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceRequest &r = trace[i];
    length[i] = (r.after >= 0 ? length[static_cast<size_t>(r.after)] : 0) +
                static_cast<uint64_t>(r.prompt + r.output);
    blocks += (length[i] + bs - 1) / bs;
  }
  return blocks * KVPools::bytesPerBlock(manifest);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct RunStats {
  double seconds = 0, throughput = 0, ttftP50 = 0, ttftP99 = 0, tpotP50 = 0, tpotP99 = 0;
  double hitRate = 0, peakUsage = 0;
  int64_t generated = 0, preemptions = 0, freeAfter = 0, total = 0, steps = 0;
  int64_t hostBlocks = 0, hostOffloads = 0, hostLoads = 0;
  int64_t swapPreemptions = 0, swapOffloads = 0, sessionOffloads = 0;
  /// Prompt tokens sent, and those the steps computed (not cached).
  int64_t promptTokens = 0, promptTokensComputed = 0;
  /// TTFT p50 of later turns of conversations (--synthetic sessions=).
  double ttftLaterP50 = 0;
  TransferStats transfers;
  double prefillRate = 0;
  int64_t speculativeSteps = 0, proposed = 0, accepted = 0;
  std::map<int64_t, std::vector<int64_t>> outputs;
  std::optional<DisaggregationStats> disaggregated; ///< --disaggregate
  std::string error;
};

/// Replays `trace`; with `draftDir`, speculation proposes with that draft
/// model (loaded before the clock starts).
RunStats replay(const Artifact &artifact, EngineConfig config,
                const std::vector<TraceRequest> &trace, bool printDecisions, int64_t vocab,
                const std::string &draftDir) {
  RunStats s;
  auto start = std::chrono::steady_clock::now();
  int64_t step = 0;
  // Decision traces use the step number as the clock, so that ages (LRU,
  // TTL, protection) and the printed lines are deterministic.
  auto now = [&] {
    return printDecisions
               ? static_cast<double>(step)
               : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Engine::Trace log;
  if (printDecisions)
    log = [](const std::string &l) { std::printf("%s\n", l.c_str()); };
  int64_t typical = trace.front().prompt + trace.front().output;
  Expected<std::unique_ptr<Engine>> made = Engine::create(artifact, config, now, log, typical);
  if (!made) {
    s.error = made.error();
    return s;
  }
  Engine &e = **made;
  if (!draftDir.empty() && config.speculative.enabled()) {
    Expected<std::unique_ptr<DraftModel>> draft =
        DraftModel::load(draftDir, vocab, e.totalBlocks() * artifact.manifest().kvCache->blockSize,
                         config.maxTokensPerStep);
    if (!draft) {
      s.error = draft.error();
      return s;
    }
    if (Status st = e.setDraft(draft.take()); !st) {
      s.error = st.error();
      return s;
    }
    start = std::chrono::steady_clock::now();
  }
  std::vector<double> ttft, tpot, ttftLater;
  int64_t used = 0;
  std::map<int64_t, int64_t> cancels; // step -> id
  // Requests go in trace order once their step comes; a conversation's
  // later turn also waits for the previous one, whose prompt and output
  // (`history`) begin its prompt.
  size_t firstPending = 0;
  std::vector<char> submitted(trace.size()), done(trace.size());
  std::vector<int64_t> doneAt(trace.size(), 0); // the step a request finished
  std::vector<std::vector<int64_t>> history(trace.size());
  auto submit = [&](size_t i) {
    const TraceRequest &r = trace[i];
    Request req;
    req.id = static_cast<int64_t>(i);
    req.prompt = r.after >= 0 ? history[static_cast<size_t>(r.after)] : std::vector<int64_t>();
    std::vector<int64_t> fresh = promptTokens(r, i, vocab);
    req.prompt.insert(req.prompt.end(), fresh.begin(), fresh.end());
    history[i] = req.prompt;
    s.promptTokens += static_cast<int64_t>(req.prompt.size());
    req.sampling.maxTokens = r.output;
    req.cls = r.cls;
    req.systemPrompt = r.prefixGroup == "system";
    submitted[i] = 1;
    if (Status st = e.submit(std::move(req)); !st) {
      done[i] = 1; // a later turn goes on without its answer
      doneAt[i] = step;
      if (printDecisions)
        std::printf("reject: %s\n", st.error().c_str());
      else
        std::fprintf(stderr, "xfmr-bench: rejected: %s\n", st.error().c_str());
    }
    if (r.cancelAt >= 0)
      cancels[r.cancelAt] = static_cast<int64_t>(i);
  };
  while (firstPending < trace.size() || !e.idle()) {
    for (size_t i = firstPending; i < trace.size(); ++i) {
      const TraceRequest &r = trace[i];
      if (submitted[i])
        continue;
      if (r.after < 0 && r.at > step)
        break;
      bool due = r.after < 0 ? r.at <= step
                             : done[static_cast<size_t>(r.after)] &&
                                   doneAt[static_cast<size_t>(r.after)] + r.at <= step;
      if (due)
        submit(i);
    }
    while (firstPending < trace.size() && submitted[firstPending])
      ++firstPending;
    if (auto it = cancels.find(step); it != cancels.end()) {
      if (printDecisions)
        std::printf("cancel req %lld\n", static_cast<long long>(it->second));
      e.cancel(it->second);
    }
    if (Status st = e.step(); !st) {
      s.error = st.error();
      return s;
    }
    used = std::max(used, e.totalBlocks() - e.freeBlocks());
    ++step;
    for (RequestResult &r : e.takeFinished()) {
      s.generated += static_cast<int64_t>(r.tokens.size());
      s.speculativeSteps += r.speculativeSteps;
      s.proposed += r.proposedTokens;
      s.accepted += r.acceptedTokens;
      size_t i = static_cast<size_t>(r.id);
      done[i] = 1;
      doneAt[i] = step;
      history[i].insert(history[i].end(), r.tokens.begin(), r.tokens.end());
      if (r.firstToken >= 0) {
        ttft.push_back((r.firstToken - r.arrival) * 1e3);
        if (trace[i].after >= 0)
          ttftLater.push_back(ttft.back());
        if (r.tokens.size() > 1)
          tpot.push_back((r.finish - r.firstToken) * 1e3 / static_cast<double>(r.tokens.size() - 1));
      }
      s.outputs[r.id] = std::move(r.tokens);
    }
  }
  s.seconds = now();
  s.throughput = s.generated / std::max(s.seconds, 1e-9);
  s.ttftP50 = percentile(ttft, 0.5);
  s.ttftP99 = percentile(ttft, 0.99);
  s.ttftLaterP50 = percentile(ttftLater, 0.5);
  s.promptTokensComputed = e.computedPromptTokens();
  s.tpotP50 = percentile(tpot, 0.5);
  s.tpotP99 = percentile(tpot, 0.99);
  s.hitRate = e.prefixCache().hitRate();
  s.preemptions = e.preemptions();
  s.total = e.totalBlocks();
  s.peakUsage = static_cast<double>(used) / static_cast<double>(std::max<int64_t>(s.total, 1));
  s.steps = e.steps();
  s.hostBlocks = e.hostBlocks();
  s.hostOffloads = e.prefixCache().hostOffloads();
  s.hostLoads = e.prefixCache().hostLoads();
  s.swapPreemptions = e.swapPreemptions();
  s.swapOffloads = e.prefixCache().swapOffloads();
  s.sessionOffloads = e.prefixCache().sessionOffloads();
  s.transfers = e.transfers();
  s.prefillRate = e.prefillRate();
  // Both tiers' bookkeeping (blocks, host slots) against the tree.
  if (std::string broken = e.prefixCache().checkInvariants(); !broken.empty()) {
    s.error = "prefix cache: " + broken;
    return s;
  }
  e.clearPrefixCache();
  s.freeAfter = e.freeBlocks();
  if (printDecisions)
    std::printf("done: %lld steps, %lld preemptions, free blocks %lld of %lld\n",
                static_cast<long long>(s.steps), static_cast<long long>(s.preemptions),
                static_cast<long long>(s.freeAfter), static_cast<long long>(s.total));
  return s;
}

/// --disaggregate: replays `trace` on this rank's engine in `role` (arrival
/// steps count the prefill rank's loop passes). The prefill rank's RunStats
/// hold every request's result; the decode rank's only its own counts.
RunStats replayDisaggregated(const Artifact &artifact, const EngineConfig &config,
                             const std::vector<TraceRequest> &trace, ServingRole role,
                             bool printDecisions, int64_t vocab) {
  RunStats s;
  auto start = std::chrono::steady_clock::now();
  auto now = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const char *who = role == ServingRole::Prefill ? "prefill" : "decode";
  Engine::Trace log;
  if (printDecisions)
    log = [who](const std::string &l) { std::printf("%s: %s\n", who, l.c_str()); };
  Expected<std::unique_ptr<Engine>> made =
      Engine::create(artifact, config, now, log, trace.front().prompt + trace.front().output);
  if (!made) {
    s.error = made.error();
    return s;
  }
  std::vector<Request> requests;
  for (size_t i = 0; i < trace.size(); ++i) {
    Request req;
    req.id = static_cast<int64_t>(i);
    req.prompt = promptTokens(trace[i], i, vocab);
    req.sampling.maxTokens = trace[i].output;
    req.cls = trace[i].cls;
    req.systemPrompt = trace[i].prefixGroup == "system";
    s.promptTokens += static_cast<int64_t>(req.prompt.size());
    requests.push_back(std::move(req));
  }
  DisaggregationStats stats;
  Expected<std::map<int64_t, RequestResult>> results = runDisaggregated(
      **made, role, requests, stats,
      [&](size_t i, int64_t pass) { return trace[i].at <= pass; }, now);
  if (!results) {
    s.error = results.error();
    return s;
  }
  s.seconds = now();
  std::vector<double> ttft, tpot;
  for (auto &[id, r] : *results) {
    s.generated += static_cast<int64_t>(r.tokens.size());
    if (r.firstToken >= 0) {
      ttft.push_back((r.firstToken - r.arrival) * 1e3);
      if (r.tokens.size() > 1)
        tpot.push_back((r.finish - r.firstToken) * 1e3 / static_cast<double>(r.tokens.size() - 1));
    }
    s.outputs[id] = std::move(r.tokens);
  }
  Engine &e = **made;
  s.throughput = s.generated / std::max(s.seconds, 1e-9);
  s.ttftP50 = percentile(ttft, 0.5);
  s.ttftP99 = percentile(ttft, 0.99);
  s.tpotP50 = percentile(tpot, 0.5);
  s.tpotP99 = percentile(tpot, 0.99);
  s.promptTokensComputed = e.computedPromptTokens();
  s.hitRate = e.prefixCache().hitRate();
  s.preemptions = e.preemptions() + stats.peerPreemptions;
  s.total = e.totalBlocks();
  s.steps = e.steps();
  s.prefillRate = e.prefillRate();
  e.clearPrefixCache();
  s.freeAfter = e.freeBlocks();
  s.disaggregated = stats;
  return s;
}

/// Tokens per expert per MoE layer as a JSON array of arrays.
std::string loadJSON(const std::vector<std::vector<uint64_t>> &load) {
  std::string out = "[";
  for (size_t layer = 0; layer < load.size(); ++layer) {
    out += layer ? ", [" : "[";
    for (size_t e = 0; e < load[layer].size(); ++e)
      out += (e ? ", " : "") + std::to_string(load[layer][e]);
    out += "]";
  }
  return out + "]";
}

} // namespace

/// --disaggregate's fields (with a trailing ", "), or nothing.
std::string disaggregationJSON(const RunStats &run) {
  if (!run.disaggregated)
    return "";
  const DisaggregationStats &d = *run.disaggregated;
  return formatString(
      "\"handed_off\": %lld, \"handoff_kv_bytes\": %llu, \"handoff_transfer_ms\": %.3f, "
      "\"handoff_wait_ms\": %.3f, \"prefill_steps\": %lld, "
      "\"prefill_prompt_tokens_computed\": %lld, \"decode_steps\": %lld, "
      "\"decode_prompt_tokens_computed\": %lld, \"decode_preemptions\": %lld, ",
      static_cast<long long>(d.handedOff), static_cast<unsigned long long>(d.kvBytes),
      1e3 * d.transferSeconds, 1e3 * d.transferWaitSeconds, static_cast<long long>(d.steps),
      static_cast<long long>(d.promptTokens), static_cast<long long>(d.peerSteps),
      static_cast<long long>(d.peerPromptTokens), static_cast<long long>(d.peerPreemptions));
}

/// The run (and the baseline's numbers) as one JSON object.
void printJSON(size_t requests, const RunStats &run, const RunStats &base, bool identical,
               const std::vector<std::vector<uint64_t>> &expertLoad) {
  std::printf("{\"requests\": %zu, \"generated_tokens\": %lld, \"seconds\": %.6f, "
              "\"throughput_tok_s\": %.3f, \"baseline_throughput_tok_s\": %.3f, "
              "\"speedup\": %.3f, \"outputs_identical\": %s, \"ttft_p50_ms\": %.3f, "
              "\"ttft_p99_ms\": %.3f, \"tpot_p50_ms\": %.3f, \"tpot_p99_ms\": %.3f, "
              "\"prefix_hit_rate\": %.4f, \"preemptions\": %lld, \"peak_kv_usage\": %.4f, "
              "\"steps\": %lld, \"host_blocks\": %lld, \"host_offloads\": %lld, "
              "\"host_loads\": %lld, \"free_blocks_after\": %lld, \"total_blocks\": %lld, "
              "\"speculative_steps\": %lld, \"proposed_tokens\": %lld, "
              "\"accepted_tokens\": %lld, \"acceptance_rate\": %.4f, "
              "\"tokens_per_verification\": %.3f, \"swap_preemptions\": %lld, "
              "\"swap_offloads\": %lld, \"offloaded_bytes\": %llu, \"loaded_bytes\": %llu, "
              "\"copy_ms\": %.3f, \"copy_wait_ms\": %.3f, \"prefill_tokens_per_s\": %.1f, "
              "\"session_offloads\": %lld, \"prompt_tokens\": %lld, "
              "\"prompt_tokens_computed\": %lld, \"ttft_later_turns_p50_ms\": %.3f, "
              "\"baseline_prompt_tokens_computed\": %lld, "
              "\"baseline_ttft_later_turns_p50_ms\": %.3f, %s"
              "\"moe_expert_tokens\": %s}\n",
              requests, static_cast<long long>(run.generated), run.seconds, run.throughput,
              base.throughput, base.throughput > 0 ? run.throughput / base.throughput : 0.0,
              identical ? "true" : "false", run.ttftP50, run.ttftP99, run.tpotP50, run.tpotP99,
              run.hitRate, static_cast<long long>(run.preemptions), run.peakUsage,
              static_cast<long long>(run.steps), static_cast<long long>(run.hostBlocks),
              static_cast<long long>(run.hostOffloads), static_cast<long long>(run.hostLoads),
              static_cast<long long>(run.freeAfter), static_cast<long long>(run.total),
              static_cast<long long>(run.speculativeSteps), static_cast<long long>(run.proposed),
              static_cast<long long>(run.accepted),
              run.proposed ? static_cast<double>(run.accepted) / run.proposed : 0.0,
              run.speculativeSteps
                  ? static_cast<double>(run.accepted + run.speculativeSteps) / run.speculativeSteps
                  : 0.0,
              static_cast<long long>(run.swapPreemptions),
              static_cast<long long>(run.swapOffloads),
              static_cast<unsigned long long>(run.transfers.offloadedBytes),
              static_cast<unsigned long long>(run.transfers.loadedBytes),
              1e3 * run.transfers.copySeconds, 1e3 * run.transfers.waitSeconds, run.prefillRate,
              static_cast<long long>(run.sessionOffloads), static_cast<long long>(run.promptTokens),
              static_cast<long long>(run.promptTokensComputed), run.ttftLaterP50,
              static_cast<long long>(base.promptTokensComputed), base.ttftLaterP50,
              disaggregationJSON(run).c_str(), loadJSON(expertLoad).c_str());
}

/// The run as a few lines of text (the baseline's beside it).
void printTable(size_t requests, const RunStats &run, const RunStats &base, bool identical,
                const std::string &baseline, bool speculative) {
  std::printf("requests %zu, generated %lld tokens in %.3f s: %.1f tok/s\n", requests,
              static_cast<long long>(run.generated), run.seconds, run.throughput);
  if (!baseline.empty())
    std::printf("%s baseline: %.1f tok/s -> %.2fx; outputs %s\n", baseline.c_str(),
                base.throughput, run.throughput / std::max(base.throughput, 1e-9),
                identical ? "identical" : "DIFFER");
  if (speculative)
    std::printf("speculative: %lld verification steps, %lld proposed, %lld kept (%.1f%%), "
                "%.2f tokens per verification\n",
                static_cast<long long>(run.speculativeSteps),
                static_cast<long long>(run.proposed), static_cast<long long>(run.accepted),
                run.proposed ? 100.0 * run.accepted / run.proposed : 0.0,
                run.speculativeSteps ? static_cast<double>(run.accepted + run.speculativeSteps) /
                                           run.speculativeSteps
                                     : 0.0);
  std::printf("TTFT p50 %.2f ms, p99 %.2f ms; TPOT p50 %.3f ms, p99 %.3f ms\n", run.ttftP50,
              run.ttftP99, run.tpotP50, run.tpotP99);
  std::printf("prefix hit rate %.3f, preemptions %lld, peak KV usage %.1f%%, free blocks after "
              "%lld of %lld\n",
              run.hitRate, static_cast<long long>(run.preemptions), 100 * run.peakUsage,
              static_cast<long long>(run.freeAfter), static_cast<long long>(run.total));
  if (run.ttftLaterP50 > 0)
    std::printf("later turns: TTFT p50 %.2f ms%s; prompt tokens computed %lld of %lld\n",
                run.ttftLaterP50,
                base.ttftLaterP50 > 0
                    ? formatString(" (baseline %.2f ms, %.2fx lower)", base.ttftLaterP50,
                                   base.ttftLaterP50 / run.ttftLaterP50)
                          .c_str()
                    : "",
                static_cast<long long>(run.promptTokensComputed),
                static_cast<long long>(run.promptTokens));
  if (run.hostBlocks)
    std::printf("host tier: %lld preemptions swapped (%lld blocks), %lld recomputed; copies "
                "%.1f MiB out, %.1f MiB in, %.2f ms (%.2f ms waited for)\n",
                static_cast<long long>(run.swapPreemptions),
                static_cast<long long>(run.swapOffloads),
                static_cast<long long>(run.preemptions - run.swapPreemptions),
                static_cast<double>(run.transfers.offloadedBytes) / (1 << 20),
                static_cast<double>(run.transfers.loadedBytes) / (1 << 20),
                1e3 * run.transfers.copySeconds, 1e3 * run.transfers.waitSeconds);
}

/// Sets the engine option `name` (an xfmr-bench flag) to `value`; false
/// when it is not one or the value is bad.
bool engineOption(const std::string &name, const std::string &value, EngineConfig &config) {
  int64_t n = 0;
  double x = 0;
  if (name == "--host-cache-bytes" && parseInt(value, 0, int64_t(1) << 46, n))
    config.hostCacheBytes = static_cast<uint64_t>(n);
  else if (name == "--max-num-seqs" && parseInt(value, 1, 1 << 20, n))
    config.maxNumSeqs = n;
  else if (name == "--max-tokens-per-step" && parseInt(value, 1, 1 << 24, n))
    config.maxTokensPerStep = n;
  else if (name == "--preempt-every" && parseInt(value, 1, 1 << 20, n))
    config.preemptEvery = n;
  else if (name == "--batch-aging" && parseInt(value, 0, 1 << 30, n))
    config.batchAgingSteps = n;
  else if (name == "--preemption" && value == "auto")
    config.preemption = PreemptionMode::Auto;
  else if (name == "--preemption" && value == "recompute")
    config.preemption = PreemptionMode::Recompute;
  else if (name == "--preemption" && value == "swap")
    config.preemption = PreemptionMode::Swap;
  else if (name == "--admission" && value == "fifo")
    config.admissionOrder = AdmissionOrder::Fifo;
  else if (name == "--admission" && value == "lpm")
    config.admissionOrder = AdmissionOrder::LongestPrefix;
  else if (name == "--session-ttl" && parseDouble(value, x) && x >= 0 && x <= 1e9)
    config.sessionTtlSeconds = x;
  else if (name == "--host-copy-delay-ms" && parseDouble(value, x) && x >= 0 && x <= 1e4)
    config.hostCopyDelaySeconds = x / 1e3;
  else if (name == "--prefix-wait-steps" && parseInt(value, 0, 1 << 30, n))
    config.prefixWaitSteps = n;
  else
    return false;
  return true;
}

int main(int argc, char **argv) {
  std::string artifactDir, spec, tracePath, baseline;
  bool speculative = false;
  std::string draftDir; // --speculative draft:DIR
  int64_t numSpeculative = 4;
  bool json = false, decisions = false, disaggregate = false;
  EngineConfig config;
  uint64_t kvCacheBytes = 0; // 0: the default budget
  int64_t warmup = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kHelp);
      return 0;
    }
    if (arg == "--json") {
      json = true;
      continue;
    }
    if (arg == "--trace-decisions") {
      decisions = true;
      continue;
    }
    if (arg == "--disaggregate") {
      disaggregate = true;
      continue;
    }
    if (arg == "--sync-host-copies") {
      config.asyncHostCopies = false;
      continue;
    }
    if (arg == "--no-prefix-cache") {
      config.prefixCaching = false;
      continue;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!artifactDir.empty())
        return usage("more than one artifact given");
      artifactDir = arg;
      continue;
    }
    std::string name = arg, value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc)
        return usage("option '" + name + "' needs a value");
      value = argv[++i];
    }
    int64_t n = 0;
    if (name == "--synthetic")
      spec = value;
    else if (name == "--trace")
      tracePath = value;
    else if (name == "--baseline") {
      if (value != "sequential" && value != "plain" && value != "recompute" &&
          value != "device-only")
        return usage("--baseline supports 'sequential', 'plain', 'recompute' and 'device-only'");
      baseline = value;
    } else if (name == "--speculative") {
      if (value.rfind("draft:", 0) == 0 && value.size() > 6)
        draftDir = value.substr(6);
      else if (value != "ngram")
        return usage("--speculative supports 'ngram' and 'draft:DIR'");
      speculative = true;
    } else if (name == "--num-speculative" && parseInt(value, 1, 64, n))
      numSpeculative = n;
    else if (name == "--kv-cache-bytes" && parseInt(value, 1, int64_t(1) << 46, n))
      kvCacheBytes = static_cast<uint64_t>(n);
    else if (name == "--warmup" && parseInt(value, 0, 100, n))
      warmup = n;
    else if (!engineOption(name, value, config))
      return usage("bad option or value '" + arg + "'");
  }
  if (artifactDir.empty())
    return usage("no artifact given");
  if (speculative)
    config.speculative.numTokens = numSpeculative;
  if (baseline == "plain" && !speculative)
    return usage("--baseline plain compares against --speculative");
  if (spec.empty() == tracePath.empty())
    return usage("give exactly one of --synthetic and --trace");
  Expected<std::vector<TraceRequest>> trace = spec.empty() ? readTrace(tracePath) : synthetic(spec);
  if (!trace)
    return fail(trace.error());
  // By arrival step; conversations (sessions=) come in order already and
  // their later turns name earlier ones by index.
  if (std::none_of(trace->begin(), trace->end(),
                   [](const TraceRequest &r) { return r.after >= 0; }))
    std::stable_sort(trace->begin(), trace->end(),
                     [](const TraceRequest &a, const TraceRequest &b) { return a.at < b.at; });
  Expected<std::unique_ptr<Artifact>> artifact = Artifact::load(artifactDir);
  if (!artifact)
    return fail(artifact.error());
  // Under mpirun (--expert-parallel artifacts) every rank replays the same
  // trace; rank 0 reports. Arrival times are replayed by step, not by the
  // clock, so the ranks take the same steps.
  ExpertParallelScope scope;
  std::optional<ServingRole> role;
  if (disaggregate) {
    if (speculative || std::any_of(trace->begin(), trace->end(), [](const TraceRequest &r) {
          return r.after >= 0 || r.cancelAt >= 0;
        }))
      return usage("--disaggregate replays no conversations, cancellations or speculation yet");
    Expected<ServingRole> joined = joinDisaggregated(**artifact);
    if (!joined)
      return fail(joined.error());
    role = *joined;
  }
  Expected<ExpertParallelRank> rank =
      role ? Expected<ExpertParallelRank>(ExpertParallelRank{*role == ServingRole::Decode, 2})
           : joinExpertParallel(**artifact);
  if (!rank)
    return fail(rank.error());
  if (!rank->isRoot() && !decisions && !std::freopen("/dev/null", "w", stdout))
    return fail("cannot silence rank " + std::to_string(rank->rank));
  int64_t vocab = 0;
  for (const TensorSpec &out : (*artifact)->manifest().outputs)
    if (out.rank() == 2 && out.shape[1].isStatic())
      vocab = out.shape[1].value;
  if (vocab < 1)
    return fail(artifactDir + ": not a step function (compile with --kv-cache=paged)");
  if (Status ids = checkTraceIds(*trace, vocab); !ids)
    return fail(ids.error());
  KVCacheBudget budget = kvCacheBytes
                             ? explicitKVCacheBudget(kvCacheBytes, "--kv-cache-bytes")
                             : defaultKVCacheBudget(workloadBytes((*artifact)->manifest(), *trace),
                                                    availableMemoryBytes());
  std::fprintf(stderr, "%s\n", budget.describe().c_str());
  config.kvCacheBytes = budget.bytes;

  for (int64_t i = 0; i < warmup; ++i)
    if (RunStats w = replay(**artifact, config, *trace, false, vocab, draftDir); !w.error.empty())
      return fail(w.error);
  (*artifact)->resetMoEStats(); // load statistics of the timed replay only
  RunStats run = role ? replayDisaggregated(**artifact, config, *trace, *role, decisions, vocab)
                      : replay(**artifact, config, *trace, decisions, vocab, draftDir);
  if (role == ServingRole::Decode)
    return run.error.empty() ? 0 : fail(run.error);
  std::vector<std::vector<uint64_t>> expertLoad = (*artifact)->moeExpertTokens();
  if (!run.error.empty())
    return fail(run.error);
  RunStats base;
  bool identical = true;
  if (!baseline.empty()) {
    EngineConfig seq = config;
    if (baseline == "plain")
      seq.speculative = SpeculativeConfig();
    else if (baseline == "recompute")
      seq.preemption = PreemptionMode::Recompute;
    else if (baseline == "device-only")
      seq.hostCacheBytes = 0;
    else
      seq.maxNumSeqs = 1;
    base = replay(**artifact, seq, *trace, false, vocab, draftDir);
    if (!base.error.empty())
      return fail(base.error);
    identical = base.outputs == run.outputs;
  }
  if (json)
    printJSON(trace->size(), run, base, identical, expertLoad);
  else if (!decisions)
    printTable(trace->size(), run, base, identical, baseline, speculative);
  if (run.disaggregated && !json) {
    const DisaggregationStats &d = *run.disaggregated;
    std::printf("disaggregated: %lld hand-offs, %.2f MiB of KV in %.3f s (%.3f s waited); "
                "prefill rank %lld steps, %lld prompt tokens; decode rank %lld steps, %lld "
                "prompt tokens, %lld preemptions\n",
                static_cast<long long>(d.handedOff), static_cast<double>(d.kvBytes) / (1 << 20),
                d.transferSeconds, d.transferWaitSeconds, static_cast<long long>(d.steps),
                static_cast<long long>(d.promptTokens), static_cast<long long>(d.peerSteps),
                static_cast<long long>(d.peerPromptTokens),
                static_cast<long long>(d.peerPreemptions));
  }
  return identical ? 0 : 1;
}
