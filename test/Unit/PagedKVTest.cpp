//===- PagedKVTest.cpp - KV pools and step packing ------------------------===//
//
// Part of xfmr.
//
// Runs runtime/PagedKV.h against Inputs/fake_step_model.c, a hand-written
// step function that echoes, per packed token, the id, position, slot and
// its sequence's context length it was given, and writes the id into the
// pools at the slot: so the packing of ragged sequences, the slot arithmetic
// through block tables and the in-place pool update are checked exactly.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Engine.h"
#include "xfmr/runtime/PagedKV.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "TestArtifacts.h"

using namespace xfmr::rt;
namespace fs = std::filesystem;

namespace {

const char *const kStepManifest = R"({"format": "xfmr-artifact", "format_version": 2,
  "abi_version": 2, "compiler": "hand-written", "source": "fake_step_model.c",
  "checks": ["fake step: logits index outside the packed tokens"],
  "target": {"kind": "cpu", "triple": "x86_64-pc-linux-gnu", "requires": ["sse2"]},
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
    {"name": "key_cache.0", "dtype": "float32", "shape": ["num_blocks", 4, 1, 1], "role": "kv_pool"},
    {"name": "value_cache.0", "dtype": "float32", "shape": ["num_blocks", 4, 1, 1], "role": "kv_pool"}],
  "outputs": [{"name": "logits", "dtype": "float32", "shape": ["outputs", 4]}],
  "kv_cache": {"block_size": 4, "num_layers": 1, "num_kv_heads": 1, "head_dim": 1}})";

class PagedKVTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "xfmr-paged-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    root = pattern;
#ifdef XFMR_FAKE_STEP_MODEL_PATH
    std::string dir = root + "/step.xfa";
    fs::create_directory(dir);
    fs::copy_file(XFMR_FAKE_STEP_MODEL_PATH, dir + "/model.so");
    std::ofstream(dir + "/weights.bin", std::ios::binary);
    std::ofstream(dir + "/manifest.json") << test::sealManifest(kStepManifest, dir);
    Expected<std::unique_ptr<Artifact>> a = Artifact::load(dir);
    ASSERT_TRUE(a) << a.error();
    artifact = a.take();
#endif
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  std::string root;
  std::unique_ptr<Artifact> artifact;
};

#define REQUIRE_STEP_MODEL()                                                   \
  do {                                                                         \
    if (!artifact)                                                             \
      GTEST_SKIP() << "the fake step model is not built";                      \
  } while (false)

float at(const Tensor &t, int64_t row, int64_t col) {
  return t.data<float>()[row * t.shape()[1] + col];
}

} // namespace

TEST_F(PagedKVTest, PacksRaggedSequencesThroughBlockTables) {
  REQUIRE_STEP_MODEL();
  Expected<KVPools> pools = KVPools::allocate(*artifact, 5);
  ASSERT_TRUE(pools) << pools.error();
  EXPECT_EQ(pools->blockSize(), 4);
  EXPECT_EQ(pools->bytes(), 2u * 5 * 4 * sizeof(float));
  // A 3-token prefill in block 2, and one decode token at position 5 of a
  // sequence whose second block is block 3.
  std::vector<StepSequence> step{{{7, 8, 9}, 0, {2, 0}}, {{11}, 5, {1, 3}}};
  Expected<Tensor> logits = runStep(*artifact, *pools, step);
  ASSERT_TRUE(logits) << logits.error();
  // One row per sequence: its last new token (logits_indices = 2, 3).
  ASSERT_EQ(logits->shape(), (std::vector<int64_t>{2, 4}));
  float want[2][4] = {{9, 2, 10, 3}, {11, 5, 13, 6}};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(at(*logits, r, c), want[r][c]) << "row " << r << " col " << c;
  // The step wrote the pools in place, at the slots it was given.
  for (Tensor &pool : pools->tensors()) {
    const float *p = pool.data<float>();
    EXPECT_EQ(p[8], 7);
    EXPECT_EQ(p[9], 8);
    EXPECT_EQ(p[10], 9);
    EXPECT_EQ(p[13], 11);
    EXPECT_EQ(p[0], 0);
  }
}

TEST_F(PagedKVTest, RejectsBadSteps) {
  REQUIRE_STEP_MODEL();
  Expected<KVPools> pools = KVPools::allocate(*artifact, 2);
  ASSERT_TRUE(pools) << pools.error();
  struct Case {
    std::vector<StepSequence> step;
    const char *message;
  } cases[] = {
      {{}, "a step needs at least one sequence"},
      {{{{}, 0, {0}}}, "sequence 0: no new tokens"},
      {{{{1, 2, 3, 4, 5}, 0, {0}}}, "sequence 0: 5 tokens do not fit its 1 blocks of 4"},
      {{{{1}, 0, {0}}, {{1}, 0, {2}}}, "sequence 1: block 2 outside the pool of 2"},
      {{{{1}, -1, {0}}}, "negative position"},
  };
  for (const Case &c : cases) {
    Expected<Tensor> r = runStep(*artifact, *pools, c.step);
    ASSERT_FALSE(r) << c.message;
    EXPECT_NE(r.error().find(c.message), std::string::npos) << r.error();
  }
  EXPECT_FALSE(KVPools::allocate(*artifact, 0));
  Expected<KVPools> huge = KVPools::allocate(*artifact, int64_t(1) << 40, uint64_t(1) << 30);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().find("exceed"), std::string::npos) << huge.error();
}

// A kv_pool input with a zero extent (found by xfmr-artifact-fuzzer): its
// pools would reach the model as the runtime's read-only stand-in for empty
// tensors, which the step function writes.
TEST_F(PagedKVTest, RejectsPoolsWithoutElements) {
  REQUIRE_STEP_MODEL();
  std::string manifest = kStepManifest;
  for (size_t at; (at = manifest.find("4, 1, 1], \"role\"")) != std::string::npos;)
    manifest.replace(at, 8, "4, 1, 0]");
  std::string dir = root + "/empty-pool.xfa";
  fs::create_directory(dir);
  fs::copy_file(XFMR_FAKE_STEP_MODEL_PATH, dir + "/model.so");
  std::ofstream(dir + "/weights.bin", std::ios::binary);
  std::ofstream(dir + "/manifest.json") << test::sealManifest(manifest, dir);
  Expected<std::unique_ptr<Artifact>> a = Artifact::load(dir);
  if (!a) { // the loader may reject it first: then naming the pool
    EXPECT_NE(a.error().find("key_cache.0"), std::string::npos) << a.error();
    return;
  }
  Expected<KVPools> pools = KVPools::allocate(**a, 2);
  ASSERT_FALSE(pools);
  EXPECT_NE(pools.error().find("holds nothing per block"), std::string::npos) << pools.error();
}

TEST_F(PagedKVTest, GreedyGenerationFeedsBackTheArgmax) {
  REQUIRE_STEP_MODEL();
  // One request through the engine: each token is the argmax of the logits
  // the engine hands to onLogits, and the next step feeds it back.
  auto generate = [&](std::vector<int64_t> prompt, std::vector<int64_t> stop,
                      std::vector<std::vector<float>> *rows) -> Expected<RequestResult> {
    EngineConfig config;
    config.kvCacheBytes = 32 * 8;
    if (rows)
      config.onLogits = [rows](int64_t, const float *logits, int64_t vocab) {
        rows->emplace_back(logits, logits + vocab);
      };
    auto e = Engine::create(*artifact, config, [] { return 0.0; });
    if (!e)
      return e.takeError();
    Request r;
    r.prompt = std::move(prompt);
    r.sampling.maxTokens = 5;
    r.sampling.stopTokens = std::move(stop);
    if (Status s = (*e)->submit(r); !s)
      return Error(s.error());
    while (!(*e)->idle())
      if (Status s = (*e)->step(); !s)
        return Error(s.error());
    std::vector<RequestResult> done = (*e)->takeFinished();
    if (done.size() != 1)
      return Error("expected one finished request");
    return std::move(done.front());
  };
  std::vector<std::vector<float>> rows;
  Expected<RequestResult> r = generate({0, 1}, {}, &rows);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->tokens.size(), 5u);
  ASSERT_EQ(rows.size(), 5u);
  // Step k>0 feeds token tokens[k-1] at position 2 + k - 1.
  for (size_t k = 1; k < r->tokens.size(); ++k) {
    EXPECT_EQ(rows[k][0], static_cast<float>(r->tokens[k - 1]));
    EXPECT_EQ(rows[k][1], static_cast<float>(k + 1));
    EXPECT_EQ(rows[k][3], static_cast<float>(k + 2)); // context grows by one
  }
  Expected<RequestResult> stopped = generate({0, 1}, {r->tokens[0]}, nullptr);
  ASSERT_TRUE(stopped) << stopped.error();
  EXPECT_EQ(stopped->tokens.size(), 1u);
  EXPECT_EQ(stopped->finishReason, FinishReason::Stop);
  EXPECT_FALSE(generate({}, {}, nullptr));
}

TEST_F(PagedKVTest, BudgetAndBlockCopies) {
  REQUIRE_STEP_MODEL();
  // Each block: 4 tokens x 1 head x 1 dim x 4 bytes, in 2 pools = 32 bytes.
  EXPECT_EQ(KVPools::bytesPerBlock(artifact->manifest()), 32u);
  Expected<KVPools> pools = KVPools::allocateForBudget(*artifact, 100);
  ASSERT_TRUE(pools) << pools.error();
  EXPECT_EQ(pools->numBlocks(), 3);
  Expected<KVPools> none = KVPools::allocateForBudget(*artifact, 31);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("one block is 32 bytes"), std::string::npos) << none.error();
  // A prefill into block 0, then block 0 copied to block 2 in both pools.
  ASSERT_TRUE(runStep(*artifact, *pools, {{{5, 6}, 0, {0}}}));
  pools->copyBlock(0, 2);
  for (Tensor &pool : pools->tensors()) {
    const float *p = pool.data<float>();
    EXPECT_EQ(p[8], 5);
    EXPECT_EQ(p[9], 6);
    EXPECT_EQ(p[4], 0) << "block 1 untouched";
  }
}

// The engine on the echo model (whose tokens depend on the slots, so outputs
// are compared with the sequential run only on real models, in
// Integration/CPU/serving-trace.test): every request finishes with its
// max_tokens, a tight cache preempts, an impossible request is rejected, and
// every block comes back.
TEST_F(PagedKVTest, EngineCompletesEveryRequestUnderPressure) {
  REQUIRE_STEP_MODEL();
  auto run = [&](int64_t maxNumSeqs, uint64_t bytes, int64_t *preemptions,
                 std::vector<std::string> *trace) {
    EngineConfig config;
    config.kvCacheBytes = bytes; // 32 bytes per block of 4 tokens
    config.maxNumSeqs = maxNumSeqs;
    config.maxTokensPerStep = 16;
    double clock = 0;
    Engine::Trace log;
    if (trace)
      log = [trace](const std::string &l) { trace->push_back(l); };
    auto e = Engine::create(*artifact, config, [&] { return clock; }, log);
    EXPECT_TRUE(e) << e.error();
    std::map<int64_t, std::vector<int64_t>> outputs;
    if (!e)
      return outputs;
    for (int64_t id = 0; id < 4; ++id) {
      Request r;
      r.id = id;
      r.prompt = {id % 4, 1, 2, 3, 0};
      r.sampling.maxTokens = 6;
      EXPECT_TRUE((*e)->submit(r));
    }
    Request huge;
    huge.id = 9;
    huge.prompt = std::vector<int64_t>(100, 1); // 100 + 16 tokens: 29 blocks
    Status rejected = (*e)->submit(huge);
    EXPECT_FALSE(rejected);
    for (int guard = 0; !(*e)->idle() && guard < 1000; ++guard, clock += 1)
      EXPECT_TRUE((*e)->step());
    for (RequestResult &r : (*e)->takeFinished())
      outputs[r.id] = r.tokens;
    *preemptions = (*e)->preemptions();
    (*e)->clearPrefixCache();
    EXPECT_EQ((*e)->freeBlocks(), (*e)->totalBlocks());
    return outputs;
  };
  int64_t p1 = 0, p2 = 0;
  std::vector<std::string> trace;
  auto sequential = run(1, 32 * 16, &p1, nullptr);
  auto batched = run(8, 32 * 8, &p2, &trace); // 8 blocks: 4 sequences of 11 tokens need 12
  ASSERT_EQ(sequential.size(), 4u);
  ASSERT_EQ(batched.size(), 4u);
  for (auto &[id, tokens] : batched)
    EXPECT_EQ(tokens.size(), 6u) << "request " << id;
  EXPECT_GT(p2, 0) << "the tight cache must preempt";
  EXPECT_EQ(trace.front(), "KV cache: 8 blocks x 4 tokens = 32 tokens; max concurrency at 4 tokens: 8.00x");
}
