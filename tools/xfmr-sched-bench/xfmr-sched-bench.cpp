//===- xfmr-sched-bench.cpp - the serving engine's scheduler overhead -----===//
//
// Part of xfmr.
//
//   xfmr-sched-bench [--cached-blocks N] [--running N] [--steps N] [options]
//
// Measures what the serving engine spends per step outside the model call:
// schedule() (block reservation, eviction, admission), packing the plan into
// the model's inputs, and update() (committing tokens, adding newly full
// blocks to the prefix cache, sampling, finishing). The engine is detached
// (Engine::createDetached): the model call builds logits that pick the next
// token and is timed separately, then subtracted.
//
// The scenario: first, requests with distinct prompts run to completion and
// leave --cached-blocks blocks in the prefix cache; then --running requests,
// each sharing half its prompt with a cached one, are admitted and
// prefilled; then --steps decode steps of all of them are timed.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/Text.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace xfmr::rt;

namespace {

const char *const kHelp =
    "usage: xfmr-sched-bench [options]\n"
    "\n"
    "The serving engine's work per step outside the model call, with a fake\n"
    "model: schedule(), packing the plan, update(). Prints per-step times of\n"
    "the timed decode steps (mean, p50, p99, max).\n"
    "\n"
    "  --cached-blocks N   blocks left in the prefix cache by finished requests\n"
    "                      before the timed steps (default 10000)\n"
    "  --running N         sequences decoding during the timed steps (default 256)\n"
    "  --steps N           timed decode steps (default 200)\n"
    "  --block-size N      tokens per KV block (default 16)\n"
    "  --prompt N          prompt tokens per request, a multiple of the block\n"
    "                      size (default 512)\n"
    "  --vocab N           logits per token; greedy sampling scans them all\n"
    "                      (default 1024)\n"
    "  --spare-blocks N    free blocks beyond what the running sequences need;\n"
    "                      fewer than the timed steps need makes every step\n"
    "                      evict cached blocks (default: no eviction)\n"
    "  --max-tokens-per-step N  (default 8192)\n"
    "  --json              one JSON object\n";

int usage(const std::string &m) {
  std::fprintf(stderr, "xfmr-sched-bench: error: %s (run 'xfmr-sched-bench --help')\n",
               m.c_str());
  return 2;
}

struct Options {
  int64_t cachedBlocks = 10000, running = 256, steps = 200, blockSize = 16, prompt = 512;
  int64_t vocab = 1024, spareBlocks = -1, maxTokensPerStep = 8192;
  bool json = false;
};

/// This thread's CPU time in seconds: unlike wall time, it leaves out the
/// time the process waits for a core (other jobs on a shared machine).
double threadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// The fake model: logits that pick (last new token + 1) mod vocab. Its
/// time is measured so that it can be left out.
struct FakeModel {
  int64_t vocab;
  double seconds = 0, cpuSeconds = 0;
  Expected<Tensor> operator()(const std::vector<StepSequence> &batch) {
    auto start = std::chrono::steady_clock::now();
    double cpuStart = threadSeconds();
    Expected<Tensor> logits =
        Tensor::create(DType::F32, {static_cast<int64_t>(batch.size()), vocab}, "logits");
    if (logits) {
      float *out = logits->data<float>();
      std::fill(out, out + batch.size() * static_cast<size_t>(vocab), 0.0f);
      for (size_t i = 0; i < batch.size(); ++i)
        out[i * static_cast<size_t>(vocab) +
            static_cast<size_t>((batch[i].tokens.back() + 1) % vocab)] = 1.0f;
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cpuSeconds += threadSeconds() - cpuStart;
    return logits;
  }
};

/// Per-step times of the timed steps, in seconds.
struct StepTimes {
  std::vector<double> schedule, pack, update, total;
  /// The total in CPU time of this thread.
  std::vector<double> cpu;
  int64_t minCached = INT64_MAX, maxCached = 0, minRunning = INT64_MAX;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

double mean(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

/// A prompt of `n` tokens: `shared` from `prefixSeed`, the rest from `seed`.
std::vector<int64_t> promptTokens(int64_t n, int64_t shared, uint64_t prefixSeed, uint64_t seed,
                                  int64_t vocab) {
  std::vector<int64_t> t;
  std::mt19937_64 prefix(prefixSeed), rest(seed);
  for (int64_t i = 0; i < n; ++i)
    t.push_back(static_cast<int64_t>((i < shared ? prefix() : rest()) % static_cast<uint64_t>(vocab)));
  return t;
}

/// One step with each part timed; false on an error (printed).
bool timedStep(Engine &e, FakeModel &model, StepTimes *times) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  double cpu0 = threadSeconds(), modelCpu0 = model.cpuSeconds;
  auto t0 = Clock::now();
  Expected<Engine::StepPlan> plan = e.schedule();
  auto t1 = Clock::now();
  if (!plan) {
    std::fprintf(stderr, "xfmr-sched-bench: error: %s\n", plan.error().c_str());
    return false;
  }
  if (plan->empty())
    return true;
  double modelBefore = model.seconds;
  Expected<Tensor> logits = e.execute(*plan);
  auto t2 = Clock::now();
  if (!logits) {
    std::fprintf(stderr, "xfmr-sched-bench: error: %s\n", logits.error().c_str());
    return false;
  }
  Status s = e.update(*plan, *logits);
  auto t3 = Clock::now();
  double cpu = threadSeconds() - cpu0 - (model.cpuSeconds - modelCpu0);
  if (!s) {
    std::fprintf(stderr, "xfmr-sched-bench: error: %s\n", s.error().c_str());
    return false;
  }
  if (times) {
    double pack = seconds(t1, t2) - (model.seconds - modelBefore);
    times->schedule.push_back(seconds(t0, t1));
    times->pack.push_back(pack);
    times->update.push_back(seconds(t2, t3));
    times->total.push_back(seconds(t0, t1) + pack + seconds(t2, t3));
    times->cpu.push_back(cpu);
    times->minCached = std::min(times->minCached, e.prefixCache().numCachedBlocks());
    times->maxCached = std::max(times->maxCached, e.prefixCache().numCachedBlocks());
    times->minRunning = std::min(times->minRunning, e.numRunning());
  }
  return true;
}

int run(const Options &o) {
  int64_t blocksPerPrompt = o.prompt / o.blockSize;
  int64_t fillRequests = (o.cachedBlocks + blocksPerPrompt - 1) / blocksPerPrompt;
  // The running requests decode through prefill, the timed steps and a
  // margin, without finishing.
  int64_t maxTokens = o.steps + 16;
  int64_t perRunning = (o.prompt + maxTokens + o.blockSize - 1) / o.blockSize;
  int64_t spare = o.spareBlocks >= 0 ? o.spareBlocks : perRunning * o.running;
  int64_t numBlocks = fillRequests * blocksPerPrompt + spare + 1;
  EngineConfig config;
  config.maxNumSeqs = o.running;
  config.maxTokensPerStep = o.maxTokensPerStep;
  FakeModel model{o.vocab};
  double step = 0;
  Expected<std::unique_ptr<Engine>> made = Engine::createDetached(
      [&model](const std::vector<StepSequence> &b) { return model(b); }, o.vocab, numBlocks,
      o.blockSize, config, [&step] { return step; });
  if (!made) {
    std::fprintf(stderr, "xfmr-sched-bench: error: %s\n", made.error().c_str());
    return 1;
  }
  Engine &e = **made;
  auto submit = [&](int64_t id, std::vector<int64_t> prompt, int64_t tokens) {
    Request r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.sampling.maxTokens = tokens;
    Status s = e.submit(std::move(r));
    if (!s)
      std::fprintf(stderr, "xfmr-sched-bench: error: %s\n", s.error().c_str());
    return static_cast<bool>(s);
  };
  // Fill the prefix cache: prompts that are whole blocks, one output token
  // (its block is not full, so only the prompt's blocks stay cached).
  for (int64_t i = 0; i < fillRequests; ++i)
    if (!submit(i, promptTokens(o.prompt, 0, 0, 1000 + i, o.vocab), 1))
      return 1;
  for (; !e.idle(); step += 1)
    if (!timedStep(e, model, nullptr))
      return 1;
  int64_t cachedBefore = e.prefixCache().numCachedBlocks();
  // The running requests: half of each prompt is a cached one's.
  for (int64_t i = 0; i < o.running; ++i) {
    int64_t shared = fillRequests ? o.prompt / 2 : 0;
    uint64_t prefixSeed = 1000 + (fillRequests ? i % fillRequests : 0);
    if (!submit(fillRequests + i, promptTokens(o.prompt, shared, prefixSeed, 900000 + i, o.vocab),
                maxTokens))
      return 1;
  }
  // Admission and prefill, until every one decodes.
  for (int guard = 0; e.numRunning() < o.running || e.numWaiting() > 0; ++guard, step += 1)
    if (guard > 100000 || !timedStep(e, model, nullptr))
      return 1;
  for (int i = 0; i < 2; ++i, step += 1) // the last prompt chunks
    if (!timedStep(e, model, nullptr))
      return 1;
  StepTimes t;
  int64_t evictionsBefore = e.prefixCache().evictions();
  for (int64_t i = 0; i < o.steps; ++i, step += 1)
    if (!timedStep(e, model, &t))
      return 1;
  int64_t evictions = e.prefixCache().evictions() - evictionsBefore;
  auto ms = [](double s) { return s * 1e3; };
  if (o.json) {
    std::printf("{\"steps\": %zu, \"running_min\": %lld, \"cached_blocks_before\": %lld, "
                "\"cached_blocks_min\": %lld, \"cached_blocks_max\": %lld, \"evictions\": %lld, "
                "\"total_blocks\": "
                "%lld, \"block_size\": %lld, \"vocab\": %lld, \"schedule_ms\": %.4f, "
                "\"pack_ms\": %.4f, \"update_ms\": %.4f, \"mean_ms\": %.4f, \"p50_ms\": %.4f, "
                "\"p99_ms\": %.4f, \"max_ms\": %.4f, \"cpu_mean_ms\": %.4f, \"cpu_p50_ms\": %.4f, "
                "\"cpu_p99_ms\": %.4f, \"cpu_max_ms\": %.4f}\n",
                t.total.size(), static_cast<long long>(t.minRunning),
                static_cast<long long>(cachedBefore), static_cast<long long>(t.minCached),
                static_cast<long long>(t.maxCached), static_cast<long long>(evictions),
                static_cast<long long>(numBlocks), static_cast<long long>(o.blockSize),
                static_cast<long long>(o.vocab), ms(mean(t.schedule)), ms(mean(t.pack)), ms(mean(t.update)), ms(mean(t.total)),
                ms(percentile(t.total, 0.5)), ms(percentile(t.total, 0.99)),
                ms(percentile(t.total, 1.0)), ms(mean(t.cpu)), ms(percentile(t.cpu, 0.5)),
                ms(percentile(t.cpu, 0.99)), ms(percentile(t.cpu, 1.0)));
    return 0;
  }
  std::printf("%zu decode steps, at least %lld running sequences, %lld..%lld blocks in the "
              "prefix cache (%lld after the fill), %lld evicted, %lld blocks of %lld tokens, "
              "vocab %lld\n",
              t.total.size(), static_cast<long long>(t.minRunning),
              static_cast<long long>(t.minCached), static_cast<long long>(t.maxCached),
              static_cast<long long>(cachedBefore), static_cast<long long>(evictions),
              static_cast<long long>(numBlocks), static_cast<long long>(o.blockSize),
              static_cast<long long>(o.vocab));
  std::printf("per step outside the model: mean %.3f ms (schedule %.3f, pack %.3f, update "
              "%.3f), p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
              ms(mean(t.total)), ms(mean(t.schedule)), ms(mean(t.pack)), ms(mean(t.update)),
              ms(percentile(t.total, 0.5)), ms(percentile(t.total, 0.99)),
              ms(percentile(t.total, 1.0)));
  std::printf("the same in CPU time of the thread: mean %.3f ms, p50 %.3f ms, p99 %.3f ms, "
              "max %.3f ms\n",
              ms(mean(t.cpu)), ms(percentile(t.cpu, 0.5)), ms(percentile(t.cpu, 0.99)),
              ms(percentile(t.cpu, 1.0)));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kHelp);
      return 0;
    }
    if (arg == "--json") {
      o.json = true;
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
    int64_t *target = name == "--cached-blocks"          ? &o.cachedBlocks
                      : name == "--running"              ? &o.running
                      : name == "--steps"                ? &o.steps
                      : name == "--block-size"           ? &o.blockSize
                      : name == "--prompt"               ? &o.prompt
                      : name == "--vocab"                ? &o.vocab
                      : name == "--spare-blocks"         ? &o.spareBlocks
                      : name == "--max-tokens-per-step"  ? &o.maxTokensPerStep
                                                         : nullptr;
    int64_t lo = name == "--spare-blocks" || name == "--cached-blocks" ? 0 : 1;
    if (!target || !parseInt(value, lo, int64_t(1) << 24, *target))
      return usage("bad option or value '" + arg + "'");
  }
  if (o.prompt % o.blockSize != 0 || o.prompt < 2 * o.blockSize)
    return usage("--prompt must be a multiple of the block size, at least two blocks");
  return run(o);
}
