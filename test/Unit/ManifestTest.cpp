//===- ManifestTest.cpp - manifest.json of a compiled artifact ------------===//
//
// Part of xfmr.
//
// A valid manifest (the example of docs/artifact.md) and one mutation of it
// per rejected case; every rejection must name the file and the field.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Manifest.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

using namespace xfmr::rt;
namespace fs = std::filesystem;

namespace {

const char *const kFile = "model.xfa/manifest.json";

const char *const kManifest = R"json({
  "format": "xfmr-artifact",
  "format_version": 2,
  "abi_version": 2,
  "compiler": "xfmr 0.1 (LLVM 22.1.8)",
  "source": "model.onnx",
  "target": {"kind": "cpu", "triple": "x86_64-pc-linux-gnu", "cpu": "znver3",
             "features": "+avx2,+fma", "requires": ["avx2", "fma"]},
  "options": {"opt_level": 3},
  "library": "model.so",
  "entry": "xfmr_entry",
  "weights": {"file": "weights.bin", "size": 123456, "alignment": 64, "count": 12},
  "files": {"model.so": {"size": 4096, "sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
            "weights.bin": {"size": 123456, "sha256": "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"}},
  "checks": ["xfmr.embedding: token id: index out of range at loc(\"ids\")"],
  "inputs":  [{"name": "input_ids", "dtype": "int64", "shape": ["batch", "sequence"]},
              {"name": "mask", "dtype": "bool", "shape": ["batch", "?"]}],
  "outputs": [{"name": "logits", "dtype": "float32", "shape": ["batch", "sequence", 256]}]
})json";

/// kManifest with the one occurrence of `from` replaced by `to`.
std::string mutated(const std::string &from, const std::string &to) {
  std::string s = kManifest;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not in the manifest";
  EXPECT_EQ(s.find(from, at + 1), std::string::npos)
      << "'" << from << "' is ambiguous";
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

TEST(ManifestTest, DocumentedExample) {
  Expected<Manifest> m = parseManifest(kManifest, kFile);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->formatVersion, 2);
  EXPECT_EQ(m->abiVersion, 2);
  EXPECT_EQ(m->requiredCPUFeatures, (std::vector<std::string>{"avx2", "fma"}));
  EXPECT_EQ(m->libraryIntegrity.size, 4096u);
  EXPECT_EQ(m->libraryIntegrity.sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  EXPECT_EQ(m->weightsIntegrity.size, 123456u);
  ASSERT_EQ(m->checks.size(), 1u);
  EXPECT_EQ(m->checks[0], "xfmr.embedding: token id: index out of range at loc(\"ids\")");
  EXPECT_EQ(m->compiler, "xfmr 0.1 (LLVM 22.1.8)");
  EXPECT_EQ(m->source, "model.onnx");
  EXPECT_EQ(m->targetKind, "cpu");
  EXPECT_EQ(m->targetTriple, "x86_64-pc-linux-gnu");
  EXPECT_EQ(m->targetCPU, "znver3");
  EXPECT_EQ(m->targetFeatures, "+avx2,+fma");
  EXPECT_EQ(m->library, "model.so");
  EXPECT_EQ(m->entry, "xfmr_entry");
  EXPECT_EQ(m->weightsFile, "weights.bin");
  EXPECT_EQ(m->weightsSize, 123456u);
  EXPECT_EQ(m->weightsAlignment, 64u);
  EXPECT_EQ(m->weightsCount, 12u);

  ASSERT_EQ(m->inputs.size(), 2u);
  const TensorSpec &ids = m->inputs[0];
  EXPECT_EQ(ids.name, "input_ids");
  EXPECT_EQ(ids.dtype, DType::I64);
  ASSERT_EQ(ids.rank(), 2u);
  EXPECT_FALSE(ids.shape[0].isStatic());
  EXPECT_FALSE(ids.shape[0].isAnonymous());
  EXPECT_EQ(ids.shape[0].symbol, "batch");
  EXPECT_EQ(formatSpecShape(ids), "[batch, sequence]");
  EXPECT_EQ(m->inputs[1].dtype, DType::Bool);
  EXPECT_TRUE(m->inputs[1].shape[1].isAnonymous());
  EXPECT_EQ(formatSpecShape(m->inputs[1]), "[batch, ?]");

  ASSERT_EQ(m->outputs.size(), 1u);
  const TensorSpec &logits = m->outputs[0];
  EXPECT_EQ(logits.name, "logits");
  EXPECT_EQ(logits.dtype, DType::F32);
  ASSERT_EQ(logits.rank(), 3u);
  EXPECT_TRUE(logits.shape[2].isStatic());
  EXPECT_EQ(logits.shape[2].value, 256);
  EXPECT_EQ(formatSpecShape(logits), "[batch, sequence, 256]");
}

TEST(ManifestTest, OptionalFieldsAndScalars) {
  const char *minimal = R"json({
    "format": "xfmr-artifact", "format_version": 2, "abi_version": 2,
    "target": {"kind": "cpu", "requires": []}, "library": "m.so", "entry": "run_1",
    "weights": {"file": "w.bin", "size": 0, "alignment": 64, "count": 0},
    "files": {"m.so": {"size": 1, "sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, "w.bin": {"size": 0, "sha256": "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"}},
    "checks": [],
    "inputs": [], "outputs": [{"name": "y", "dtype": "f16", "shape": []}],
    "future_field": {"ignored": true}
  })json";
  Expected<Manifest> m = parseManifest(minimal, kFile);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->compiler, "");
  EXPECT_EQ(m->targetTriple, "");
  EXPECT_TRUE(m->inputs.empty());
  ASSERT_EQ(m->outputs.size(), 1u);
  EXPECT_EQ(m->outputs[0].dtype, DType::F16); // short alias of float16
  EXPECT_EQ(formatSpecShape(m->outputs[0]), "[]");
}

TEST(ManifestTest, DTypeNames) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(dtypeFromManifestName(manifestDTypeName(d)), d);
    EXPECT_EQ(dtypeFromManifestName(dtypeName(d)), d);
  }
  EXPECT_STREQ(manifestDTypeName(DType::BF16), "bfloat16");
  EXPECT_FALSE(dtypeFromManifestName("float128"));
  EXPECT_FALSE(dtypeFromManifestName(""));
}

struct BadCase {
  const char *label;
  std::string from, to;
  /// What the message must contain besides the file name.
  std::string field, why;
};

class ManifestRejectTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ManifestRejectTest, NamesFileAndField) {
  const BadCase &c = GetParam();
  Expected<Manifest> m = parseManifest(mutated(c.from, c.to), kFile);
  ASSERT_FALSE(m) << "accepted; expected: " << c.field << ": " << c.why;
  std::string expected = std::string(kFile) + ": " + c.field;
  EXPECT_EQ(m.error().rfind(expected, 0), 0u)
      << "does not start with '" << expected << "': " << m.error();
  EXPECT_NE(m.error().find(c.why), std::string::npos)
      << "does not say '" << c.why << "': " << m.error();
}

const std::string kIds = R"("name": "input_ids", "dtype": "int64")";
const std::string kIdsShape = R"(["batch", "sequence"])";

INSTANTIATE_TEST_SUITE_P(
    Mutations, ManifestRejectTest,
    ::testing::Values(
        BadCase{"Truncated", "\"outputs\"", "]", "not valid JSON",
                "parse error at line"},
        BadCase{"Format", "\"xfmr-artifact\"", "\"onnx\"", "format",
                "expected 'xfmr-artifact', got 'onnx'"},
        BadCase{"MissingFormatVersion", "\"format_version\": 2,", "",
                "format_version", "missing"},
        BadCase{"FormatVersion1", "\"format_version\": 2",
                "\"format_version\": 1", "format_version",
                "unsupported version 1 (this runtime reads 2)"},
        BadCase{"AbiVersionString", "\"abi_version\": 2",
                "\"abi_version\": \"2\"", "abi_version",
                "expected an integer, got string"},
        BadCase{"AbiVersion7", "\"abi_version\": 2", "\"abi_version\": 7",
                "abi_version", "unsupported version 7"},
        BadCase{"MissingFiles", "\"files\"", "\"filez\"", "files", "missing"},
        BadCase{"MissingLibraryEntry", "\"model.so\": {", "\"other.so\": {", "files",
                "'other.so' is neither the library nor the weights file"},
        BadCase{"ShortDigest", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"", "0123\"", "files.model.so.sha256",
                "expected 64 lowercase hex digits"},
        BadCase{"FilesSizeDisagrees", "\"size\": 123456, \"sha256\"",
                "\"size\": 5, \"sha256\"", "files.weights.bin.size",
                "5 disagrees with weights.size 123456"},
        BadCase{"NegativeFileSize", "\"size\": 4096", "\"size\": -1",
                "files.model.so.size", "must not be negative"},
        BadCase{"MissingRequires", "\"requires\"", "\"requirez\"", "target.requires",
                "missing"},
        BadCase{"RequiresNumber", "[\"avx2\", \"fma\"]", "[\"avx2\", 3]",
                "target.requires[1]", "expected a string, got number"},
        BadCase{"MissingChecks", "\"checks\"", "\"chex\"", "checks", "missing"},
        BadCase{"EmptyCheck", "[\"xfmr.embedding", "[\"\", \"xfmr.embedding", "checks[0]",
                "must have 1 to"},
        BadCase{"MissingTarget", "\"target\"", "\"tarjet\"", "target",
                "missing"},
        BadCase{"TargetKindNumber", "\"kind\": \"cpu\"", "\"kind\": 1",
                "target.kind", "expected a string, got number"},
        BadCase{"LibraryPath", "\"library\": \"model.so\"", "\"library\": \"../evil.so\"", "library",
                "'../evil.so' must be a file name inside the artifact"},
        BadCase{"EntryNotIdentifier", "\"xfmr_entry\"", "\"1 entry\"", "entry",
                "'1 entry' is not a C identifier"},
        BadCase{"MissingWeightsSize", "\"size\": 123456, \"alignment", "\"alignment", "weights.size",
                "missing"},
        BadCase{"NegativeWeightsSize", "123456, \"alignment", "-5, \"alignment", "weights.size",
                "must not be negative, got -5"},
        BadCase{"HugeWeightsSize", "123456, \"alignment", "18446744073709551615, \"alignment",
                "weights.size", "is too large"},
        BadCase{"FractionalWeightsSize", "123456, \"alignment", "1.5, \"alignment", "weights.size",
                "expected an integer, got a fractional number"},
        BadCase{"WeightsAlignment", "\"alignment\": 64", "\"alignment\": 48",
                "weights.alignment", "must be a power of two, got 48"},
        BadCase{"InputsNotArray", "\"inputs\":  [",
                "\"inputs\": \"x\", \"y\": [", "inputs",
                "expected an array, got string"},
        BadCase{"OutputsNotArray", "\"outputs\": [", "\"outputs\": 3, \"x\": [",
                "outputs", "expected an array, got number"},
        BadCase{"UnknownDType", "\"dtype\": \"bool\"",
                "\"dtype\": \"float128\"", "inputs[1].dtype",
                "unknown dtype 'float128'"},
        BadCase{"MissingName", R"("name": "mask", )", "", "inputs[1].name",
                "missing"},
        BadCase{"EmptyName", R"("name": "mask")", R"("name": "")",
                "inputs[1].name", "must not be empty"},
        BadCase{"DuplicateInput", R"("name": "mask")", R"("name": "input_ids")",
                "inputs[1].name", "duplicate name 'input_ids'"},
        BadCase{"InputNotObject",
                R"({"name": "mask", "dtype": "bool", )"
                R"("shape": ["batch", "?"]})",
                "\"mask\"", "inputs[1]", "expected an object, got string"},
        BadCase{"NegativeDim", "[\"batch\", \"sequence\", 256]",
                "[\"batch\", -3, 256]", "outputs[0].shape[1]",
                "negative dim -3"},
        BadCase{"FractionalDim", "\"sequence\", 256]", "\"sequence\", 2.5]",
                "outputs[0].shape[2]", "got a fractional number"},
        BadCase{"BoolDim", "\"sequence\", 256]", "\"sequence\", true]",
                "outputs[0].shape[2]",
                "expected an integer or a string, got boolean"},
        BadCase{"EmptySymbol", kIdsShape, "[\"\", \"sequence\"]",
                "inputs[0].shape[0]", "must have a name"},
        BadCase{"AbsurdRank", kIdsShape,
                "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                "1,1,1]",
                "inputs[0].shape", "rank 33 exceeds the limit of 32"},
        BadCase{"ShapeMissing", kIds + ", \"shape\": " + kIdsShape, kIds,
                "inputs[0].shape", "missing"}),
    [](const ::testing::TestParamInfo<BadCase> &info) {
      return std::string(info.param.label);
    });

TEST(ManifestTest, NotJSONOrNotAnObject) {
  for (const char *text : {"", "{", "[1, 2]", "null", "{\"format\": }"}) {
    Expected<Manifest> m = parseManifest(text, kFile);
    ASSERT_FALSE(m) << text;
    EXPECT_EQ(m.error().rfind(std::string(kFile) + ": ", 0), 0u) << m.error();
  }
  EXPECT_NE(parseManifest("[1]", kFile).error().find("expected a JSON object"),
            std::string::npos);
  EXPECT_NE(parseManifest("{\"a\": 1,}", kFile).error().find("not valid JSON"),
            std::string::npos);
}

TEST(ManifestTest, ReadFromDisk) {
  std::string dir = ::testing::TempDir() + "xfmr-manifest-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr) << std::strerror(errno);
  std::string path = dir + "/manifest.json";
  {
    std::ofstream out(path);
    out << kManifest;
  }
  Expected<Manifest> m = readManifest(path);
  EXPECT_TRUE(m) << m.error();

  Expected<Manifest> missing = readManifest(dir + "/nope.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find(dir + "/nope.json: cannot open"),
            std::string::npos)
      << missing.error();
  Expected<Manifest> directory = readManifest(dir);
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().find("not a regular file"), std::string::npos)
      << directory.error();

  std::error_code ec;
  fs::remove_all(dir, ec);
}

} // namespace

namespace {

/// A step function's manifest (xfmr-compile --kv-cache=paged), one layer;
/// the value pool has the key pool's shape unless `valueShape` is given.
std::string stepManifest(const std::string &kv, const std::string &poolShape,
                         const std::string &valueShape = "") {
  std::string s = kManifest;
  std::string inputs =
      R"("inputs":  [{"name": "input_ids", "dtype": "int64", "shape": ["tokens"]},
              {"name": "key_cache.0", "dtype": "float32", "shape": )" +
      poolShape + R"(, "role": "kv_pool"},
              {"name": "value_cache.0", "dtype": "float32", "shape": )" +
      (valueShape.empty() ? poolShape : valueShape) + R"(, "role": "kv_pool"}],)";
  size_t begin = s.find("\"inputs\"");
  size_t end = s.find("\"outputs\"");
  s.replace(begin, end - begin, inputs + "\n  ");
  if (!kv.empty())
    s.insert(s.rfind('}'), ",\n  \"kv_cache\": " + kv + "\n");
  return s;
}

const char *const kKV =
    R"({"block_size": 16, "num_layers": 1, "num_kv_heads": 2, "head_dim": 8})";
const char *const kPool = R"(["num_blocks", 16, 2, 8])";

} // namespace

TEST(ManifestTest, StepFunctionKVCache) {
  Expected<Manifest> m = parseManifest(stepManifest(kKV, kPool), kFile);
  ASSERT_TRUE(m) << m.error();
  ASSERT_TRUE(m->kvCache.has_value());
  EXPECT_EQ(m->kvCache->blockSize, 16);
  EXPECT_EQ(m->kvCache->numLayers, 1);
  EXPECT_EQ(m->kvCache->numKVHeads, 2);
  EXPECT_EQ(m->kvCache->headDim, 8);
  ASSERT_EQ(m->inputs.size(), 3u);
  EXPECT_FALSE(m->inputs[0].kvPool);
  EXPECT_TRUE(m->inputs[1].kvPool);
  EXPECT_TRUE(m->inputs[2].kvPool);
  // A plain model has none.
  Expected<Manifest> plain = parseManifest(kManifest, kFile);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_FALSE(plain->kvCache.has_value());
}

// Latent attention (DeepSeek's MLA): value pools hold the latent (16), key
// pools the RoPE key (4); value_head_dim says so.
TEST(ManifestTest, StepFunctionLatentKVCache) {
  const std::string kv = R"({"block_size": 16, "num_layers": 1, "num_kv_heads": 1,
                             "head_dim": 4, "value_head_dim": 16})";
  Expected<Manifest> m =
      parseManifest(stepManifest(kv, R"(["num_blocks", 16, 1, 4])", R"(["num_blocks", 16, 1, 16])"),
                    kFile);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->kvCache->headDim, 4);
  EXPECT_EQ(m->kvCache->valueHeadDim, 16);
  EXPECT_EQ(m->kvCache->valueDim(), 16);
  // Without value_head_dim the value pools are head_dim wide.
  EXPECT_EQ(parseManifest(stepManifest(kKV, kPool), kFile)->kvCache->valueDim(), 8);
  struct Case {
    std::string text, expected;
  } cases[] = {
      {stepManifest(kv, R"(["num_blocks", 16, 1, 4])", R"(["num_blocks", 16, 1, 4])"),
       "'value_cache.0' is not [num_blocks, 16, 1, 16] (value_head_dim)"},
      {stepManifest(kKV, kPool, R"(["num_blocks", 16, 2, 16])"),
       "'value_cache.0' is not [num_blocks, 16, 2, 8] (head_dim)"},
      {stepManifest(R"({"block_size": 16, "num_layers": 1, "num_kv_heads": 2, "head_dim": 8,
                        "value_head_dim": 0})",
                    kPool),
       "kv_cache.value_head_dim: must be positive"},
  };
  for (const Case &c : cases) {
    Expected<Manifest> bad = parseManifest(c.text, kFile);
    ASSERT_FALSE(bad) << c.expected;
    EXPECT_NE(bad.error().find(c.expected), std::string::npos) << bad.error();
  }
}

TEST(ManifestTest, StepFunctionRejections) {
  struct Case {
    std::string text, expected;
  } cases[] = {
      {stepManifest("", kPool), "kv_cache: missing, but inputs have role \"kv_pool\""},
      {stepManifest(R"({"block_size": 16, "num_layers": 2, "num_kv_heads": 2, "head_dim": 8})",
                    kPool),
       "2 layers need 4 kv_pool inputs, the manifest has 2"},
      {stepManifest(R"({"block_size": 0, "num_layers": 1, "num_kv_heads": 2, "head_dim": 8})",
                    kPool),
       "kv_cache.block_size: must be positive"},
      {stepManifest(kKV, R"(["num_blocks", 32, 2, 8])"), "'key_cache.0' is not [num_blocks, 16, 2"},
      {stepManifest(kKV, R"([4, 16, 2, 8])"), "'key_cache.0' is not [num_blocks"},
      {stepManifest("[1]", kPool), "kv_cache: expected an object"},
      // Found by the artifact fuzzer: a pool whose head_dim is not kv_cache's.
      {stepManifest(kKV, R"(["num_blocks", 16, 2, 1000])"), "'key_cache.0' is not [num_blocks, 16, 2"},
      // Found by the artifact fuzzer: 2 * num_layers overflowed int64.
      {stepManifest(R"({"block_size": 16, "num_layers": 4611686018427387905, "num_kv_heads": 2,
                        "head_dim": 8})",
                    kPool),
       "kv_cache.num_layers: 4611686018427387905 is too large"},
  };
  for (const Case &c : cases) {
    Expected<Manifest> m = parseManifest(c.text, kFile);
    ASSERT_FALSE(m) << c.expected;
    EXPECT_NE(m.error().find(kFile), std::string::npos) << m.error();
    EXPECT_NE(m.error().find(c.expected), std::string::npos) << m.error();
  }
  std::string badRole = mutated(R"("name": "mask", "dtype": "bool")",
                                R"("name": "mask", "role": "weights", "dtype": "bool")");
  Expected<Manifest> m = parseManifest(badRole, kFile);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("inputs[1].role: unknown role"), std::string::npos) << m.error();
}

namespace {

/// A one-layer step function with an int8 or fp8 cache: two pools of
/// `dtype` and two scale pools of `scaleDType` shaped `scaleShape`.
std::string quantizedStepManifest(const std::string &kvDtype, const std::string &dtype,
                                  const std::string &scaleDType, const std::string &scaleShape) {
  std::string s = kManifest;
  auto pool = [](const std::string &name, const std::string &type, const std::string &shape) {
    return R"({"name": ")" + name + R"(", "dtype": ")" + type + R"(", "shape": )" + shape +
           R"(, "role": "kv_pool"})";
  };
  std::string inputs = R"("inputs": [{"name": "input_ids", "dtype": "int64", "shape": ["tokens"]}, )" +
                       pool("key_cache.0", dtype, kPool) + ", " +
                       pool("value_cache.0", dtype, kPool) + ", " +
                       pool("key_scale.0", scaleDType, scaleShape) + ", " +
                       pool("value_scale.0", scaleDType, scaleShape) + "],";
  size_t begin = s.find("\"inputs\"");
  size_t end = s.find("\"outputs\"");
  s.replace(begin, end - begin, inputs + "\n  ");
  s.insert(s.rfind('}'), R"(, "kv_cache": {"block_size": 16, "num_layers": 1, "num_kv_heads": 2,
                            "head_dim": 8, "dtype": ")" + kvDtype + R"("})" "\n");
  return s;
}

const char *const kScalePool = R"(["num_blocks", 16, 2])";

} // namespace

TEST(ManifestTest, QuantizedKVCache) {
  for (auto [kvDtype, dtype] : {std::pair<const char *, const char *>{"int8", "int8"},
                                {"fp8-e4m3", "float8e4m3fn"}}) {
    Expected<Manifest> m =
        parseManifest(quantizedStepManifest(kvDtype, dtype, "float32", kScalePool), kFile);
    ASSERT_TRUE(m) << m.error();
    EXPECT_STREQ(kvCacheDTypeName(m->kvCache->dtype), kvDtype);
    EXPECT_TRUE(m->kvCache->scaled());
    EXPECT_EQ(m->kvCache->poolsPerLayer(), 4);
    EXPECT_EQ(m->inputs[3].dtype, DType::F32);
  }
  // Without "dtype" (artifacts before --kv-dtype), the pools' own type.
  Expected<Manifest> old = parseManifest(stepManifest(kKV, kPool), kFile);
  ASSERT_TRUE(old) << old.error();
  EXPECT_EQ(old->kvCache->dtype, KVCacheDType::F32);
  EXPECT_FALSE(old->kvCache->scaled());

  struct Case {
    std::string text, expected;
  } cases[] = {
      {quantizedStepManifest("int4", "int8", "float32", kScalePool),
       "kv_cache.dtype: 'int4' is not one of"},
      {quantizedStepManifest("int8", "float32", "float32", kScalePool),
       "'key_cache.0' has dtype float32, but kv_cache.dtype 'int8' needs int8"},
      {quantizedStepManifest("int8", "int8", "float16", kScalePool),
       "'key_scale.0' has dtype float16, but kv_cache.dtype 'int8' needs float32"},
      {quantizedStepManifest("int8", "int8", "float32", R"(["num_blocks", 16, 2, 8])"),
       "'key_scale.0' is not [num_blocks, 16, 2] (the scales of a KV pool)"},
      // Two pools per layer are not enough for a scaled cache.
      {stepManifest(R"({"block_size": 16, "num_layers": 1, "num_kv_heads": 2, "head_dim": 8,
                        "dtype": "int8"})",
                    kPool),
       "1 layers need 4 kv_pool inputs, the manifest has 2"},
  };
  for (const Case &c : cases) {
    Expected<Manifest> m = parseManifest(c.text, kFile);
    ASSERT_FALSE(m) << c.expected;
    EXPECT_NE(m.error().find(c.expected), std::string::npos) << m.error();
  }
}

namespace {

/// kManifest with `"generation": <gen>` added.
std::string withGeneration(const std::string &gen) {
  std::string s = kManifest;
  s.insert(s.rfind('}'), ",\n  \"generation\": " + gen + "\n");
  return s;
}

} // namespace

TEST(ManifestTest, Generation) {
  Expected<Manifest> m = parseManifest(
      withGeneration(R"({"eos_token_ids": [2, 32000], "context_length": 4096,
                        "from": "genai_config.json"})"),
      kFile);
  ASSERT_TRUE(m) << m.error();
  ASSERT_TRUE(m->generation);
  EXPECT_EQ(m->generation->eosTokenIds, (std::vector<int64_t>{2, 32000}));
  EXPECT_EQ(m->generation->from, "genai_config.json");
  EXPECT_EQ(m->stopTokenIds(), (std::vector<int64_t>{2, 32000}));
  EXPECT_EQ(m->contextLength(), 4096);
  Expected<Manifest> plain = parseManifest(kManifest, kFile);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_FALSE(plain->generation);
  EXPECT_TRUE(plain->stopTokenIds().empty());
  EXPECT_EQ(plain->contextLength(), 0);
  struct Case {
    std::string gen, expected;
  } cases[] = {
      {"[1]", "generation: expected an object"},
      {R"({"eos_token_ids": 2})", "generation.eos_token_ids: expected an array"},
      {R"({"eos_token_ids": [-1]})", "generation.eos_token_ids[0]: must be non-negative"},
      {R"({"eos_token_ids": ["2"]})", "generation.eos_token_ids[0]"},
      {R"({"context_length": -5})", "generation.context_length"},
  };
  for (const Case &c : cases) {
    Expected<Manifest> bad = parseManifest(withGeneration(c.gen), kFile);
    ASSERT_FALSE(bad) << c.expected;
    EXPECT_NE(bad.error().find(kFile), std::string::npos) << bad.error();
    EXPECT_NE(bad.error().find(c.expected), std::string::npos) << bad.error();
  }
}

namespace {

/// kManifest with its weights buffer of 123456 bytes split between
/// weights.bin (`stored` bytes) and the references `refs` into one source.
std::string withReferences(const std::string &refs, int64_t stored) {
  std::string s = mutated(
      R"("weights": {"file": "weights.bin", "size": 123456, "alignment": 64, "count": 12},)",
      R"("weights": {"file": "weights.bin", "size": 123456, "alignment": 64, "count": 12,
        "sources": [{"path": "/models/m/model.onnx.data", "size": 200000, "mtime_ns": 17}],
        "references": )" + refs + "},");
  std::string from = "\"size\": 123456, \"sha256\"";
  return s.replace(s.find(from), from.size(),
                   "\"size\": " + std::to_string(stored) + ", \"sha256\"");
}

TEST(ManifestTest, WeightReferences) {
  // 64 + 4096 * 16 * 4 = 262208 > 123456: a [1024, 16] f32 matrix, and a
  // plain 1000-byte tensor.
  std::string ok = withReferences(
      R"([{"source": 0, "offset": 8, "bytes": 65536, "at": 64, "panels": [1024, 16, 4]},
          {"source": 0, "offset": 70000, "bytes": 1000, "at": 65600}])",
      123456 - 66536);
  Expected<Manifest> m = parseManifest(ok, kFile);
  ASSERT_TRUE(m) << m.error();
  ASSERT_EQ(m->weightSources.size(), 1u);
  EXPECT_EQ(m->weightSources[0].path, "/models/m/model.onnx.data");
  EXPECT_EQ(m->weightSources[0].mtimeNs, 17);
  ASSERT_EQ(m->weightReferences.size(), 2u);
  EXPECT_EQ(m->weightReferences[0].panelK, 1024);
  EXPECT_EQ(m->weightReferences[1].panelK, 0);
  EXPECT_EQ(m->referencedWeightBytes(), 66536u);

  struct Bad {
    std::string refs;
    int64_t stored;
    std::string why;
  } bad[] = {
      {R"([{"source": 1, "offset": 0, "bytes": 64, "at": 0}])", 123456 - 64,
       "weights.references[0].source: 1 names no entry of the 1 weights.sources"},
      {R"([{"source": 0, "offset": 199999, "bytes": 64, "at": 0}])", 123456 - 64,
       "weights.references[0]: [199999, +64) lies beyond the 200000 bytes"},
      {R"([{"source": 0, "offset": 0, "bytes": 64, "at": 32}])", 123456 - 64,
       "weights.references[0].at: 32 +64 is not an aligned range"},
      {R"([{"source": 0, "offset": 0, "bytes": 64, "at": 123392},
           {"source": 0, "offset": 0, "bytes": 64, "at": 0}])",
       123456 - 128, "weights.references[1].at: overlaps the reference before it"},
      {R"([{"source": 0, "offset": 0, "bytes": 64, "at": 0, "panels": [2, 8, 4]}])",
       123456 - 64, "weights.references[0].panels: [2, 8, 4] does not describe 64 bytes"},
      {R"([{"source": 0, "offset": 0, "bytes": 64, "at": 0}])", 123456,
       "files.weights.bin.size: 123456 disagrees with weights.size 123456 less the 64 "
       "referenced bytes"},
  };
  for (const Bad &c : bad) {
    Expected<Manifest> r = parseManifest(withReferences(c.refs, c.stored), kFile);
    ASSERT_FALSE(r) << "accepted: " << c.refs;
    EXPECT_NE(r.error().find(c.why), std::string::npos) << r.error();
  }
  // Sources without references, and a relative path.
  Expected<Manifest> lone = parseManifest(
      mutated(R"("count": 12},)",
              R"("count": 12, "sources": [{"path": "/a", "size": 1, "mtime_ns": 1}]},)"),
      kFile);
  ASSERT_FALSE(lone);
  EXPECT_NE(lone.error().find("weights.references: missing"), std::string::npos) << lone.error();
  std::string relative = withReferences(R"([{"source": 0, "offset": 0, "bytes": 64, "at": 0}])",
                                        123456 - 64);
  relative.replace(relative.find("/models"), 1, "");
  Expected<Manifest> rel = parseManifest(relative, kFile);
  ASSERT_FALSE(rel);
  EXPECT_NE(rel.error().find("weights.sources[0].path: 'models/m/model.onnx.data' is not an "
                             "absolute path"),
            std::string::npos)
      << rel.error();
}

} // namespace

namespace {

const char *const kHash = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// kManifest with `"text": <text>` added and `files` (extra "files"
/// entries) listed.
std::string withText(const std::string &text, const std::string &files) {
  std::string s = mutated(R"("weights.bin": {"size": 123456, "sha256": "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"}},)",
                          R"("weights.bin": {"size": 123456, "sha256": "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"})" +
                              files + "},");
  s.insert(s.rfind('}'), ",\n  \"text\": " + text + "\n");
  return s;
}

std::string fileEntry(const std::string &name, int64_t size) {
  return ",\n \"" + name + "\": {\"size\": " + std::to_string(size) + ", \"sha256\": \"" + kHash +
         "\"}";
}

const char *const kText = R"({"tokenizer": "tokenizer.json", "tokenizer_config": "tokenizer_config.json",
  "chat_template": "chat_template.jinja", "bos_token": "<s>", "bos_token_id": 1,
  "eos_token": "</s>", "eos_token_ids": [2, 32000], "add_bos_token": true,
  "generation_defaults": {"do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 40,
                          "repetition_penalty": 1.1, "max_new_tokens": 256, "max_length": 4096},
  "from": ["tokenizer.json", "tokenizer_config.json"]})";

std::string textFiles() {
  return fileEntry("tokenizer.json", 1000) + fileEntry("tokenizer_config.json", 200) +
         fileEntry("chat_template.jinja", 300);
}

} // namespace

// The text interface (xfmr-compile from a model folder with tokenizer.json,
// or --tokenizer): files listed and hashed, ids, defaults; its eos ids join
// generation's as the stop ids of `xfmr-run generate`.
TEST(ManifestTest, TextInterface) {
  std::string good = withText(kText, textFiles());
  good.insert(good.rfind('}'), ",\n  \"generation\": {\"eos_token_ids\": [2, 7]}\n");
  Expected<Manifest> m = parseManifest(good, kFile);
  ASSERT_TRUE(m) << m.error();
  ASSERT_TRUE(m->text);
  const TextInterface &t = *m->text;
  EXPECT_EQ(t.tokenizerFile, "tokenizer.json");
  EXPECT_EQ(t.tokenizerConfigFile, "tokenizer_config.json");
  EXPECT_EQ(t.chatTemplateFile, "chat_template.jinja");
  EXPECT_EQ(t.bosToken, "<s>");
  EXPECT_EQ(t.eosToken, "</s>");
  EXPECT_EQ(t.bosId, std::optional<int64_t>(1));
  EXPECT_EQ(t.eosIds, (std::vector<int64_t>{2, 32000}));
  EXPECT_EQ(t.addBosToken, std::optional<bool>(true));
  EXPECT_FALSE(t.addEosToken);
  ASSERT_EQ(t.files.size(), 3u);
  EXPECT_EQ(t.files.at("tokenizer_config.json").size, 200u);
  EXPECT_EQ(t.files.at("chat_template.jinja").sha256, kHash);
  EXPECT_EQ(t.defaults.doSample, std::optional<bool>(true));
  EXPECT_EQ(t.defaults.temperature, std::optional<double>(0.6));
  EXPECT_EQ(t.defaults.topP, std::optional<double>(0.9));
  EXPECT_EQ(t.defaults.topK, std::optional<int64_t>(40));
  EXPECT_EQ(t.defaults.repetitionPenalty, std::optional<double>(1.1));
  EXPECT_EQ(t.defaults.maxNewTokens, std::optional<int64_t>(256));
  EXPECT_EQ(t.defaults.maxLength, std::optional<int64_t>(4096));
  EXPECT_EQ(m->stopTokenIds(), (std::vector<int64_t>{2, 7, 32000}));

  // The least: a tokenizer alone.
  Expected<Manifest> bare = parseManifest(
      withText(R"({"tokenizer": "tokenizer.json"})", fileEntry("tokenizer.json", 5)), kFile);
  ASSERT_TRUE(bare) << bare.error();
  EXPECT_TRUE(bare->text->chatTemplateFile.empty());
  EXPECT_FALSE(bare->text->bosId);
  EXPECT_TRUE(bare->text->defaults.empty());
  EXPECT_TRUE(bare->stopTokenIds().empty());
  Expected<Manifest> plain = parseManifest(kManifest, kFile);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_FALSE(plain->text);
}

TEST(ManifestTest, TextInterfaceRejections) {
  auto replaced = [](std::string s, const std::string &from, const std::string &to) {
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  struct Case {
    std::string text, files, expected;
  } cases[] = {
      {"[1]", textFiles(), "text: expected an object"},
      {R"({"chat_template": "t.jinja"})", textFiles(), "text.tokenizer: missing"},
      {replaced(kText, "\"bos_token_id\": 1", "\"bos_token_id\": -1"), textFiles(),
       "text.bos_token_id: must not be negative"},
      {replaced(kText, "[2, 32000]", "[2, -3]"), textFiles(),
       "text.eos_token_ids[1]: must be non-negative"},
      {replaced(kText, "[2, 32000]", "[\"2\"]"), textFiles(), "text.eos_token_ids[0]"},
      {replaced(kText, "\"tokenizer\": \"tokenizer.json\"", "\"tokenizer\": \"../tokenizer.json\""),
       textFiles(), "text.tokenizer: '../tokenizer.json' must be a file name inside the artifact"},
      {replaced(kText, "\"chat_template\": \"chat_template.jinja\"", "\"chat_template\": \"model.so\""),
       textFiles(), "text.chat_template: 'model.so' is already another file of the artifact"},
      {replaced(kText, "\"chat_template\": \"chat_template.jinja\"",
                "\"chat_template\": \"tokenizer.json\""),
       textFiles(), "text.chat_template: 'tokenizer.json' is already another file"},
      {replaced(kText, "\"add_bos_token\": true", "\"add_bos_token\": 1"), textFiles(),
       "text.add_bos_token: expected a boolean"},
      {replaced(kText, "\"top_p\": 0.9", "\"top_p\": 1.5"), textFiles(),
       "text.generation_defaults: top_p: must be in (0, 1], got 1.5"},
      {replaced(kText, "\"temperature\": 0.6", "\"temperature\": -1"), textFiles(),
       "text.generation_defaults: temperature: must be finite and >= 0"},
      {replaced(kText, "\"top_k\": 40", "\"top_k\": 4.5"), textFiles(),
       "text.generation_defaults.top_k: expected an integer"},
      {replaced(kText, "\"do_sample\": true", "\"do_sample\": \"yes\""), textFiles(),
       "text.generation_defaults.do_sample: expected a boolean"},
      // Every file of "text" must be listed and hashed, and "files" lists
      // nothing else.
      {kText, fileEntry("tokenizer.json", 1000) + fileEntry("chat_template.jinja", 300),
       "files.tokenizer_config.json: missing"},
      {R"({"tokenizer": "tokenizer.json"})", textFiles(),
       "files: 'chat_template.jinja' is neither the library, the weights file nor a file"},
  };
  for (const Case &c : cases) {
    Expected<Manifest> bad = parseManifest(withText(c.text, c.files), kFile);
    ASSERT_FALSE(bad) << c.expected;
    EXPECT_NE(bad.error().find(kFile), std::string::npos) << bad.error();
    EXPECT_NE(bad.error().find(c.expected), std::string::npos) << bad.error();
  }
  // Files of "text" without a "text" section.
  Expected<Manifest> stray = parseManifest(
      mutated(R"("model.so": {"size": 4096,)",
              std::string(R"("tokenizer.json": {"size": 1, "sha256": ")") + kHash +
                  R"("}, "model.so": {"size": 4096,)"),
      kFile);
  ASSERT_FALSE(stray);
  EXPECT_NE(stray.error().find("files: 'tokenizer.json' is neither the library nor the weights file"), std::string::npos)
      << stray.error();
}
