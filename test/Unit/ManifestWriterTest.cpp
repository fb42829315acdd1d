//===- ManifestWriterTest.cpp - formatManifest against parseManifest ------===//
//
// Part of xfmr.
//
// The artifact schema has one definition (Manifest.h): xfmr-compile writes
// a Manifest with formatManifest and the loader reads it with
// parseManifest. A manifest with every field set, for a CPU and for a GPU
// target, must come back equal, field by field, and its text must not
// change when it is parsed and written again.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Manifest.h"

#include <gtest/gtest.h>

#include <tuple>

namespace xfmr::rt {

// Equality of the parts of a Manifest, member by member (C++17 has no
// defaulted comparisons); a member left out here would go unchecked.

bool operator==(const Dim &a, const Dim &b) {
  return std::tie(a.value, a.symbol) == std::tie(b.value, b.symbol);
}
bool operator==(const TensorSpec &a, const TensorSpec &b) {
  return std::tie(a.name, a.dtype, a.shape, a.kvPool) ==
         std::tie(b.name, b.dtype, b.shape, b.kvPool);
}
bool operator==(const FileIntegrity &a, const FileIntegrity &b) {
  return std::tie(a.size, a.sha256) == std::tie(b.size, b.sha256);
}
bool operator==(const WeightSource &a, const WeightSource &b) {
  return std::tie(a.path, a.size, a.mtimeNs) ==
         std::tie(b.path, b.size, b.mtimeNs);
}
bool operator==(const WeightReference &a, const WeightReference &b) {
  return std::tie(a.source, a.offset, a.bytes, a.at, a.panelK, a.panelN,
                  a.elemBytes) == std::tie(b.source, b.offset, b.bytes, b.at,
                                           b.panelK, b.panelN, b.elemBytes);
}
bool operator==(const KVCacheSpec &a, const KVCacheSpec &b) {
  return std::tie(a.blockSize, a.numLayers, a.numKVHeads, a.headDim, a.dtype) ==
         std::tie(b.blockSize, b.numLayers, b.numKVHeads, b.headDim, b.dtype);
}
bool operator==(const GenerationDefaults &a, const GenerationDefaults &b) {
  return std::tie(a.doSample, a.temperature, a.topP, a.topK,
                  a.repetitionPenalty, a.maxNewTokens, a.maxLength) ==
         std::tie(b.doSample, b.temperature, b.topP, b.topK,
                  b.repetitionPenalty, b.maxNewTokens, b.maxLength);
}
bool operator==(const TextInterface &a, const TextInterface &b) {
  return std::tie(a.tokenizerFile, a.tokenizerConfigFile, a.chatTemplateFile,
                  a.files, a.bosToken, a.eosToken, a.bosId, a.eosIds,
                  a.addBosToken, a.addEosToken, a.defaults, a.from) ==
         std::tie(b.tokenizerFile, b.tokenizerConfigFile, b.chatTemplateFile,
                  b.files, b.bosToken, b.eosToken, b.bosId, b.eosIds,
                  b.addBosToken, b.addEosToken, b.defaults, b.from);
}
bool operator==(const GenerationConfig &a, const GenerationConfig &b) {
  return std::tie(a.eosTokenIds, a.contextLength, a.from) ==
         std::tie(b.eosTokenIds, b.contextLength, b.from);
}
bool operator==(const CompileOptions &a, const CompileOptions &b) {
  return std::tie(a.optLevel, a.weights, a.minWeightBytes, a.blasMinRows,
                  a.parallel, a.quant, a.quantSkip, a.calibration,
                  a.smoothAlpha) == std::tie(b.optLevel, b.weights,
                                             b.minWeightBytes, b.blasMinRows,
                                             b.parallel, b.quant, b.quantSkip,
                                             b.calibration, b.smoothAlpha);
}
bool operator==(const HostCodeTarget &a, const HostCodeTarget &b) {
  return std::tie(a.triple, a.cpu, a.features, a.requiredCPUFeatures) ==
         std::tie(b.triple, b.cpu, b.features, b.requiredCPUFeatures);
}
bool operator==(const KernelInfo &a, const KernelInfo &b) {
  return std::tie(a.name, a.registers, a.spillBytes, a.stackBytes,
                  a.sharedBytes, a.uses) == std::tie(b.name, b.registers,
                                                     b.spillBytes, b.stackBytes,
                                                     b.sharedBytes, b.uses);
}

} // namespace xfmr::rt

using namespace xfmr::rt;

namespace {

const char *const kFile = "model.xfa/manifest.json";

std::string hash(char digit) { return std::string(64, digit); }

TensorSpec spec(std::string name, DType dtype, std::vector<Dim> shape,
                bool kvPool = false) {
  return TensorSpec{std::move(name), dtype, std::move(shape), kvPool};
}

Dim dim(int64_t value) { return Dim{value, ""}; }
Dim dim(const char *symbol) { return Dim{-1, symbol}; }

/// A CPU step function with every field of the manifest set: weights
/// references, an int8 KV cache (with its scale pools), options with
/// calibration, generation, expert parallelism and a text interface.
Manifest fullCPUManifest() {
  Manifest m;
  m.formatVersion = kManifestFormatVersion;
  m.abiVersion = kArtifactABIVersion;
  m.compiler = "xfmr 0.1 (LLVM 22.1.8)";
  m.source = "model.onnx";
  m.targetKind = "cpu";
  m.targetTriple = "x86_64-pc-linux-gnu";
  m.targetCPU = "znver3";
  m.targetFeatures = "+avx2,+fma,-avx512f";
  m.requiredCPUFeatures = {"avx", "avx2", "fma"};
  m.library = "model.so";
  m.entry = "xfmr_entry";
  m.weightsFile = "weights.bin";
  m.weightsAlignment = 64;
  m.weightsCount = 3;
  m.weightSources = {
      {"/models/m/model.onnx.data", 1 << 20, 1796174659064396738},
      {"/models/m/more.data", 4096, 7}};
  // 8192 bytes as a [128, 16] f32 matrix in panels, 64 bytes as they are.
  m.weightReferences = {{0, 640, 8192, 0, 128, 16, 4},
                        {1, 0, 64, 8192, 0, 0, 0}};
  m.weightsSize = 8192 + 64 + 128;
  m.libraryIntegrity = {81920, hash('a')};
  m.weightsIntegrity = {128, hash('b')};
  m.checks = {"xfmr.embedding: token id: index out of range at "
              "loc(\"/model/embed_tokens/Gather\")",
              "a \"quoted\" message with a tab\tand a newline\n"};
  m.inputs = {spec("input_ids", DType::I64, {dim("tokens")}),
              spec("block_tables", DType::I32, {dim("seqs"), dim("?")})};
  for (const char *pool : {"key_cache.0", "value_cache.0"})
    m.inputs.push_back(spec(pool, DType::I8,
                            {dim("num_blocks"), dim(16), dim(2), dim(8)},
                            /*kvPool=*/true));
  for (const char *pool : {"key_scale.0", "value_scale.0"})
    m.inputs.push_back(spec(pool, DType::F32,
                            {dim("num_blocks"), dim(16), dim(2)},
                            /*kvPool=*/true));
  m.outputs = {spec("logits", DType::BF16, {dim("outputs"), dim(256)}),
               spec("scalar", DType::Bool, {})};
  m.kvCache = KVCacheSpec{16, 1, 2, 8, KVCacheDType::Int8};
  m.options = CompileOptions{3,
                             "reference",
                             512,
                             64,
                             false,
                             "w8a8",
                             {"lm_head", "q_proj"},
                             std::string("stats.json"),
                             0.85};
  m.generation = GenerationConfig{{2, 32000}, 4096, "genai_config.json"};
  m.expertParallelRanks = 2;
  m.expertParallelExperts = 8;
  TextInterface t;
  t.tokenizerFile = kTokenizerFileName;
  t.tokenizerConfigFile = kTokenizerConfigFileName;
  t.chatTemplateFile = kChatTemplateFileName;
  t.files = {{kTokenizerFileName, {4084, hash('c')}},
             {kTokenizerConfigFileName, {200, hash('d')}},
             {kChatTemplateFileName, {300, hash('e')}}};
  t.bosToken = "<s>";
  t.eosToken = "\xc4\x8a"; // "Ċ", not ASCII
  t.bosId = 1;
  t.eosIds = {2, 10};
  t.addBosToken = true;
  t.addEosToken = false;
  t.defaults = {true, 0.6, 0.9, 40, 1.1, 256, 4096};
  t.from = {"tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "generation_config.json"};
  m.text = std::move(t);
  return m;
}

/// The CPU manifest as a GPU artifact: device, kernel checks, the
/// informative GPU fields and the kernels.
Manifest fullCUDAManifest() {
  Manifest m = fullCPUManifest();
  m.targetKind = "cuda";
  m.targetChip = "sm_90a";
  m.targetComputeCapability = 90;
  m.kernelChecks = {"xfmr.attention: block table: index out of range"};
  m.targetPTXFeatures = "+ptx80";
  m.kernelsPTXFile = "kernels.ptx";
  m.kernelsCubinFile = "kernels.sm_90a.cubin";
  m.hostCalls = {"xfmr_uk_sample", "xfmr_uk_topk"};
  m.targetHost = {
      "x86_64-pc-linux-gnu", "znver3", "+avx2,+fma", {"avx", "avx2", "fma"}};
  m.kernels = {
      {"attention_kernel", 128, 0, 16, 49152, {"mma.sync", "cp.async"}},
      {"rms_norm_kernel", 32, 8, 0, 0, {}}};
  return m;
}

/// Every field, so that a failure names the one that differs.
void expectEqual(const Manifest &a, const Manifest &b) {
  EXPECT_EQ(a.formatVersion, b.formatVersion);
  EXPECT_EQ(a.abiVersion, b.abiVersion);
  EXPECT_EQ(a.compiler, b.compiler);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.targetKind, b.targetKind);
  EXPECT_EQ(a.targetTriple, b.targetTriple);
  EXPECT_EQ(a.targetCPU, b.targetCPU);
  EXPECT_EQ(a.targetFeatures, b.targetFeatures);
  EXPECT_EQ(a.targetChip, b.targetChip);
  EXPECT_EQ(a.targetComputeCapability, b.targetComputeCapability);
  EXPECT_EQ(a.kernelChecks, b.kernelChecks);
  EXPECT_EQ(a.targetPTXFeatures, b.targetPTXFeatures);
  EXPECT_EQ(a.kernelsPTXFile, b.kernelsPTXFile);
  EXPECT_EQ(a.kernelsCubinFile, b.kernelsCubinFile);
  EXPECT_EQ(a.hostCalls, b.hostCalls);
  EXPECT_TRUE(a.targetHost == b.targetHost);
  EXPECT_TRUE(a.kernels == b.kernels);
  EXPECT_EQ(a.requiredCPUFeatures, b.requiredCPUFeatures);
  EXPECT_EQ(a.library, b.library);
  EXPECT_EQ(a.entry, b.entry);
  EXPECT_EQ(a.weightsFile, b.weightsFile);
  EXPECT_EQ(a.weightsSize, b.weightsSize);
  EXPECT_EQ(a.weightsAlignment, b.weightsAlignment);
  EXPECT_EQ(a.weightsCount, b.weightsCount);
  EXPECT_TRUE(a.weightSources == b.weightSources);
  EXPECT_TRUE(a.weightReferences == b.weightReferences);
  EXPECT_TRUE(a.libraryIntegrity == b.libraryIntegrity);
  EXPECT_TRUE(a.weightsIntegrity == b.weightsIntegrity);
  EXPECT_EQ(a.checks, b.checks);
  EXPECT_TRUE(a.inputs == b.inputs);
  EXPECT_TRUE(a.outputs == b.outputs);
  EXPECT_TRUE(a.kvCache == b.kvCache);
  EXPECT_TRUE(a.options == b.options);
  EXPECT_TRUE(a.generation == b.generation);
  EXPECT_EQ(a.expertParallelRanks, b.expertParallelRanks);
  EXPECT_EQ(a.expertParallelExperts, b.expertParallelExperts);
  EXPECT_EQ(a.tensorParallelRanks, b.tensorParallelRanks);
  EXPECT_EQ(a.pipelineStages, b.pipelineStages);
  EXPECT_EQ(a.pipelineStage, b.pipelineStage);
  EXPECT_EQ(a.pipelineFirstLayer, b.pipelineFirstLayer);
  EXPECT_EQ(a.pipelineStageManifests, b.pipelineStageManifests);
  EXPECT_EQ(a.tensorParallelWeights, b.tensorParallelWeights);
  ASSERT_EQ(a.tensorParallelIntegrity.size(), b.tensorParallelIntegrity.size());
  for (size_t r = 0; r < a.tensorParallelIntegrity.size(); ++r) {
    EXPECT_EQ(a.tensorParallelIntegrity[r].size, b.tensorParallelIntegrity[r].size);
    EXPECT_EQ(a.tensorParallelIntegrity[r].sha256, b.tensorParallelIntegrity[r].sha256);
  }
  EXPECT_TRUE(a.text == b.text);
}

class ManifestRoundTripTest : public ::testing::TestWithParam<bool> {
protected:
  Manifest manifest() const {
    return GetParam() ? fullCUDAManifest() : fullCPUManifest();
  }
};

TEST_P(ManifestRoundTripTest, ParsesBackEqual) {
  Manifest m = manifest();
  std::string text = formatManifest(m);
  Expected<Manifest> parsed = parseManifest(text, kFile);
  ASSERT_TRUE(parsed) << parsed.error() << "\n" << text;
  expectEqual(m, *parsed);
}

TEST_P(ManifestRoundTripTest, ByteStable) {
  std::string text = formatManifest(manifest());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  Expected<Manifest> parsed = parseManifest(text, kFile);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(formatManifest(*parsed), text);
}

INSTANTIATE_TEST_SUITE_P(Targets, ManifestRoundTripTest,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "CUDA" : "CPU";
                         });

/// The least a manifest holds: no optional section is written.
TEST(ManifestWriterTest, OptionalSectionsOnlyWhenPresent) {
  Manifest m = fullCPUManifest();
  m.compiler.clear();
  m.source.clear();
  m.options.reset();
  m.generation.reset();
  m.expertParallelRanks = 1;
  m.expertParallelExperts = 0;
  m.text.reset();
  m.kvCache.reset();
  for (TensorSpec &in : m.inputs)
    in.kvPool = false;
  m.weightSources.clear();
  m.weightReferences.clear();
  m.weightsSize = m.weightsIntegrity.size;
  std::string text = formatManifest(m);
  for (const char *key :
       {"\"compiler\"", "\"source\"", "\"options\"", "\"generation\"",
        "\"expert_parallel\"", "\"text\"", "\"kv_cache\"", "\"role\"",
        "\"sources\"", "\"references\"", "\"kernels\"", "\"host\""})
    EXPECT_EQ(text.find(key), std::string::npos) << key << " in\n" << text;
  Expected<Manifest> parsed = parseManifest(text, kFile);
  ASSERT_TRUE(parsed) << parsed.error();
  expectEqual(m, *parsed);
}

/// --tensor-parallel: one weights file per rank, each in "files" with the
/// first file's size; a rank count, file list or size that disagrees is
/// refused, and so is a combination with expert parallelism.
TEST(ManifestWriterTest, TensorParallelWeights) {
  Manifest m = fullCPUManifest();
  m.expertParallelRanks = 1;
  m.expertParallelExperts = 0;
  m.tensorParallelRanks = 2;
  m.tensorParallelWeights = {m.weightsFile, "weights.rank1.bin"};
  FileIntegrity rank1 = m.weightsIntegrity;
  rank1.sha256 = std::string(64, 'e');
  m.tensorParallelIntegrity = {m.weightsIntegrity, rank1};
  std::string text = formatManifest(m);
  Expected<Manifest> parsed = parseManifest(text, kFile);
  ASSERT_TRUE(parsed) << parsed.error() << "\n" << text;
  expectEqual(m, *parsed);
  EXPECT_EQ(formatManifest(*parsed), text);

  auto refused = [&](Manifest bad, const std::string &what) {
    Expected<Manifest> p = parseManifest(formatManifest(bad), kFile);
    ASSERT_FALSE(p) << what;
    EXPECT_NE(p.error().find(what), std::string::npos) << p.error();
  };
  Manifest shortList = m;
  shortList.tensorParallelWeights.pop_back();
  shortList.tensorParallelIntegrity.pop_back();
  refused(shortList, "tensor_parallel.weights: must name one file per rank (2)");
  Manifest otherSize = m;
  otherSize.tensorParallelIntegrity[1].size += 64;
  refused(otherSize, "every rank's weights have one layout");
  Manifest firstNotWeights = m;
  std::swap(firstNotWeights.tensorParallelWeights[0], firstNotWeights.tensorParallelWeights[1]);
  refused(firstNotWeights, "must be weights.file");
  Manifest both = m;
  both.expertParallelRanks = 2;
  both.expertParallelExperts = 8;
  refused(both, "cannot be combined with expert_parallel");
}

/// --pipeline-parallel: stage 0 lists the other stages' manifest digests
/// (absent while xfmr-compile assembles them), stage s > 0 lists none; a
/// stage out of range, a wrong digest count or a non-digest is refused;
/// stages of expert-parallel ranks run as stages x ranks.
TEST(ManifestWriterTest, PipelineStages) {
  Manifest m = fullCPUManifest();
  m.expertParallelRanks = 1;
  m.expertParallelExperts = 0;
  m.pipelineStages = 3;
  m.pipelineStage = 0;
  m.pipelineFirstLayer = 0;
  m.pipelineStageManifests = {std::string(64, 'a'), std::string(64, 'b')};
  std::string text = formatManifest(m);
  Expected<Manifest> parsed = parseManifest(text, kFile);
  ASSERT_TRUE(parsed) << parsed.error() << "\n" << text;
  EXPECT_EQ(parsed->pipelineStages, 3);
  EXPECT_EQ(parsed->pipelineStageManifests, m.pipelineStageManifests);
  EXPECT_EQ(parsed->parallelRanks(), 3);
  EXPECT_EQ(formatManifest(*parsed), text);

  Manifest later = m;
  later.pipelineStage = 2;
  later.pipelineFirstLayer = 8;
  later.pipelineStageManifests.clear();
  parsed = parseManifest(formatManifest(later), kFile);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->pipelineStage, 2);
  EXPECT_EQ(parsed->pipelineFirstLayer, 8);

  auto refused = [&](Manifest bad, const std::string &what) {
    Expected<Manifest> p = parseManifest(formatManifest(bad), kFile);
    ASSERT_FALSE(p) << what;
    EXPECT_NE(p.error().find(what), std::string::npos) << p.error();
  };
  Manifest outOfRange = later;
  outOfRange.pipelineStage = 3;
  refused(outOfRange, "pipeline_parallel.stage: must be below pipeline_parallel.stages");
  Manifest oneDigest = m;
  oneDigest.pipelineStageManifests.pop_back();
  refused(oneDigest, "pipeline_parallel.stage_manifests: must hold one SHA-256 per stage "
                     "after the first (2)");
  Manifest notDigest = m;
  notDigest.pipelineStageManifests[1] = "stage1/manifest.json";
  refused(notDigest, "is not a SHA-256 in lowercase hex");
  // Stages of expert-parallel ranks: 3 stages of 2 run as 6 ranks.
  Manifest withExperts = m;
  withExperts.expertParallelRanks = 2;
  withExperts.expertParallelExperts = 8;
  parsed = parseManifest(formatManifest(withExperts), kFile);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->stageRanks(), 2);
  EXPECT_EQ(parsed->parallelRanks(), 6);
}

/// The text xfmr-compile writes, for a small manifest: keys sorted,
/// indented by 2, the runtime's dtype names and kv_cache dtype names.
TEST(ManifestWriterTest, Layout) {
  Manifest m;
  m.formatVersion = kManifestFormatVersion;
  m.abiVersion = kArtifactABIVersion;
  m.targetKind = "cpu";
  m.library = "model.so";
  m.entry = "xfmr_entry";
  m.weightsFile = "weights.bin";
  m.weightsAlignment = 64;
  m.libraryIntegrity = {1, hash('a')};
  m.weightsIntegrity = {0, hash('b')};
  m.inputs = {
      spec("k", DType::F8E4M3FN, {dim("num_blocks"), dim(1), dim(1), dim(4)},
           /*kvPool=*/true),
      spec("v", DType::F8E4M3FN, {dim("num_blocks"), dim(1), dim(1), dim(4)},
           /*kvPool=*/true),
      spec("ks", DType::F32, {dim("num_blocks"), dim(1), dim(1)},
           /*kvPool=*/true),
      spec("vs", DType::F32, {dim("num_blocks"), dim(1), dim(1)},
           /*kvPool=*/true)};
  m.kvCache = KVCacheSpec{1, 1, 1, 4, KVCacheDType::FP8E4M3};
  std::string text = formatManifest(m);
  EXPECT_NE(text.find("{\n  \"abi_version\": 2,\n  \"checks\": [],\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"dtype\": \"float8e4m3fn\",\n      \"name\": \"k\",\n"
                      "      \"role\": \"kv_pool\",\n      \"shape\": [\n"
                      "        \"num_blocks\",\n        1,"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"kv_cache\": {\n    \"block_size\": 1,\n"
                      "    \"dtype\": \"fp8-e4m3\",\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  \"target\": {\n    \"cpu\": \"\",\n"
                      "    \"features\": \"\",\n    \"kind\": \"cpu\",\n"
                      "    \"requires\": [],\n    \"triple\": \"\"\n  },\n"),
            std::string::npos)
      << text;
  ASSERT_TRUE(parseManifest(text, kFile));
}

TEST(ManifestWriterTest, KVCacheDTypeNames) {
  for (KVCacheDType d :
       {KVCacheDType::F32, KVCacheDType::F64, KVCacheDType::F16,
        KVCacheDType::BF16, KVCacheDType::Int8, KVCacheDType::FP8E4M3})
    EXPECT_EQ(kvCacheDTypeFromName(kvCacheDTypeName(d)), d);
  EXPECT_STREQ(kvCacheDTypeName(KVCacheDType::FP8E4M3), "fp8-e4m3");
  EXPECT_EQ(kvPoolDType(KVCacheDType::FP8E4M3), DType::F8E4M3FN);
  EXPECT_EQ(kvPoolDType(KVCacheDType::Int8), DType::I8);
  EXPECT_FALSE(kvCacheDTypeFromName("int4"));
  EXPECT_FALSE(kvCacheDTypeFromName("float32"));
}

/// The informative fields never make a manifest fail: one of another type
/// is ignored, as before they were read.
TEST(ManifestWriterTest, InformativeFieldsAreLenient) {
  Manifest m = fullCUDAManifest();
  std::string text = formatManifest(m);
  auto replace = [&](const std::string &from, const std::string &to) {
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("\"opt_level\": 3", "\"opt_level\": \"fast\"");
  replace("\"quant_skip\": [", "\"quant_skip\": [7, ");
  replace("\"ptx_features\": \"+ptx80\"", "\"ptx_features\": 80");
  replace("\"kernels\": [", "\"kernels\": [\"not an object\", ");
  replace("\"from\": \"genai_config.json\"", "\"from\": [1]");
  Expected<Manifest> parsed = parseManifest(text, kFile);
  ASSERT_TRUE(parsed) << parsed.error();
  ASSERT_TRUE(parsed->options);
  EXPECT_EQ(parsed->options->optLevel, 2); // the default
  EXPECT_EQ(parsed->options->quantSkip, m.options->quantSkip);
  EXPECT_EQ(parsed->targetPTXFeatures, "");
  EXPECT_TRUE(parsed->kernels == m.kernels);
  EXPECT_EQ(parsed->generation->from, "");
}

} // namespace
