//===- ArtifactTest.cpp - loading and running compiled artifacts ----------===//
//
// Part of xfmr.
//
// Loading errors need no model library. Running uses Inputs/fake_model.c,
// built as a module (XFMR_FAKE_MODEL_PATH): a hand-written library that
// speaks the ABI of docs/artifact.md like a compiled model.so, computing
// y = 2 * x + weights[0] and returning it in the layout weights[1] selects.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/CUDA.h"

#include "TestArtifacts.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

using namespace xfmr::rt;
namespace fs = std::filesystem;

namespace {

/// A manifest for the fake model: inputs and outputs as JSON arrays.
std::string fakeManifest(uint64_t weightsSize, const std::string &inputs,
                         const std::string &outputs,
                         const std::string &entry = "xfmr_entry",
                         const std::string &kind = "cpu") {
  return R"({"format": "xfmr-artifact", "format_version": 2,
    "abi_version": 2, "compiler": "hand-written", "source": "fake_model.c",
    "checks": ["fake check: x must not be negative"],
    "target": {"kind": ")" +
         kind + R"(", "triple": "x86_64-pc-linux-gnu", "requires": []},
    "library": "model.so", "entry": ")" +
         entry + R"(",
    "weights": {"file": "weights.bin", "size": )" +
         std::to_string(weightsSize) + R"(, "alignment": 64, "count": 1},
    "inputs": )" +
         inputs + R"(, "outputs": )" + outputs + "}";
}

const char *const kInputN =
    R"([{"name": "x", "dtype": "float32", "shape": ["n"]}])";
const char *const kOutputN =
    R"([{"name": "y", "dtype": "float32", "shape": ["n"]}])";

std::string floatBytes(std::vector<float> values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

Tensor floats(std::vector<float> values, std::string name = "x") {
  Expected<Tensor> t =
      Tensor::create(DType::F32, {static_cast<int64_t>(values.size())}, name);
  EXPECT_TRUE(t) << t.error();
  if (!values.empty())
    std::memcpy(t->data<float>(), values.data(), values.size() * sizeof(float));
  return t.take();
}

std::vector<float> valuesOf(const Tensor &t) {
  const float *p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

/// A fresh directory per test, removed afterwards, where artifacts are
/// assembled file by file.
class ArtifactTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "xfmr-artifact-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    root = pattern;
    dir = root + "/model.xfa";
    fs::create_directory(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  void write(const std::string &name, const std::string &bytes) {
    std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  /// Writes an artifact of the fake model (when it is built) with
  /// `weights`; returns false when there is no fake model.
  bool writeFake(const std::string &weights,
                 const std::string &inputs = kInputN,
                 const std::string &outputs = kOutputN,
                 const std::string &entry = "xfmr_entry") {
#ifdef XFMR_FAKE_MODEL_PATH
    // Copy then rename: a new inode, so a library still mapped from an
    // earlier load in the same test is never rewritten under the loader.
    fs::copy_file(XFMR_FAKE_MODEL_PATH, dir + "/model.so.tmp",
                  fs::copy_options::overwrite_existing);
    fs::rename(dir + "/model.so.tmp", dir + "/model.so");
    write("weights.bin", weights);
    write("manifest.json",
          test::sealManifest(fakeManifest(weights.size(), inputs, outputs, entry), dir));
    return true;
#else
    return false;
#endif
  }

  std::unique_ptr<Artifact> loadFake(const std::string &weights,
                                     const std::string &inputs = kInputN,
                                     const std::string &outputs = kOutputN) {
    if (!writeFake(weights, inputs, outputs))
      return nullptr;
    Expected<std::unique_ptr<Artifact>> a = Artifact::load(dir);
    EXPECT_TRUE(a) << a.error();
    return a ? a.take() : nullptr;
  }

  std::string root, dir;
};

#define REQUIRE_FAKE_MODEL(artifact)                                           \
  do {                                                                         \
    if (!(artifact)) {                                                         \
      if (!HasFailure())                                                       \
        GTEST_SKIP() << "the fake model library is not built";                 \
      return;                                                                  \
    }                                                                          \
  } while (false)

/// Passes when `result` failed with a message containing every one of
/// `parts`.
template <typename T>
::testing::AssertionResult failsWith(const Expected<T> &result,
                                     std::initializer_list<std::string> parts) {
  if (result)
    return ::testing::AssertionFailure() << "succeeded";
  for (const std::string &part : parts)
    if (result.error().find(part) == std::string::npos)
      return ::testing::AssertionFailure()
             << "message does not say '" << part << "': " << result.error();
  return ::testing::AssertionSuccess() << result.error();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST_F(ArtifactTest, MissingOrNotADirectory) {
  EXPECT_TRUE(failsWith(Artifact::load(root + "/nope.xfa"),
                        {root + "/nope.xfa", "cannot open artifact directory",
                         "No such file or directory"}));
  write("file", "x");
  EXPECT_TRUE(
      failsWith(Artifact::load(dir + "/file"), {dir + "/file", "not a"}));
}

TEST_F(ArtifactTest, MissingManifest) {
  EXPECT_TRUE(failsWith(Artifact::load(dir + "/"),
                        {dir + "/manifest.json: cannot open"}));
}

TEST_F(ArtifactTest, BadManifestNamesTheField) {
  write("model.so", "x");
  write("weights.bin", "");
  write("manifest.json", test::sealManifest(fakeManifest(0, "[]", "{}"), dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/manifest.json: outputs: expected an array"}));
}

TEST_F(ArtifactTest, UnsupportedTargetKind) {
  write("model.so", "x");
  write("weights.bin", "");
  write("manifest.json",
        test::sealManifest(fakeManifest(0, kInputN, kOutputN, "xfmr_entry", "rocm"), dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/manifest.json: target.kind: 'rocm'"}));
}

// A GPU artifact names its chip; without a CUDA driver (these tests run
// without one) loading fails with one line, before model.so is opened.
TEST_F(ArtifactTest, GPUArtifactNeedsChip) {
  write("model.so", "x");
  write("weights.bin", "");
  write("manifest.json",
        test::sealManifest(fakeManifest(0, kInputN, kOutputN, "xfmr_entry", "cuda"), dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir), {"target.chip", "missing"}));
}

TEST_F(ArtifactTest, GPUArtifactWithoutDriver) {
  if (cuda::openDevice())
    GTEST_SKIP() << "a CUDA device is here";
  write("model.so", "x");
  write("weights.bin", "");
  std::string m = fakeManifest(0, kInputN, kOutputN, "xfmr_entry", "cuda");
  size_t at = m.find(R"("kind": "cuda")");
  ASSERT_NE(at, std::string::npos);
  m.insert(at + std::string(R"("kind": "cuda")").size(),
           R"(, "chip": "sm_90a", "compute_capability": 90, "kernel_checks": [])");
  write("manifest.json", test::sealManifest(m, dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + ": a GPU artifact (sm_90a); no GPU to run it here: "}));
}

TEST_F(ArtifactTest, MissingWeights) {
  write("model.so", "x");
  write("weights.bin", "12345678");
  write("manifest.json", test::sealManifest(fakeManifest(8, kInputN, kOutputN), dir));
  fs::remove(dir + "/weights.bin");
  EXPECT_TRUE(
      failsWith(Artifact::load(dir), {dir + "/weights.bin: cannot open"}));
}

TEST_F(ArtifactTest, WeightsSizeMismatch) {
  write("model.so", "x");
  write("weights.bin", "12345678");
  write("manifest.json", test::sealManifest(fakeManifest(8, kInputN, kOutputN), dir));
  write("weights.bin", "1234");
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/weights.bin: size is 4 bytes", "says 8", "truncated"}));
}

TEST_F(ArtifactTest, WeightsDigestMismatch) {
  write("model.so", "x");
  write("weights.bin", "12345678");
  write("manifest.json", test::sealManifest(fakeManifest(8, kInputN, kOutputN), dir));
  write("weights.bin", "12345679");
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/weights.bin: SHA-256 is", "modified after compilation"}));
}

TEST_F(ArtifactTest, ManifestWithoutFiles) {
  write("manifest.json", fakeManifest(0, kInputN, kOutputN));
  EXPECT_TRUE(failsWith(Artifact::load(dir), {dir + "/manifest.json: files: missing"}));
}

TEST_F(ArtifactTest, SymlinkedWeightsAreRefused) {
  write("model.so", "x");
  write("real.bin", "12345678");
  fs::create_symlink("real.bin", dir + "/weights.bin");
  write("manifest.json", test::sealManifest(fakeManifest(8, kInputN, kOutputN), dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir), {dir + "/weights.bin: is a symbolic link"}));
}

TEST_F(ArtifactTest, MissingLibrary) {
  write("model.so", "x");
  write("weights.bin", "1234");
  write("manifest.json", test::sealManifest(fakeManifest(4, kInputN, kOutputN), dir));
  fs::remove(dir + "/model.so");
  EXPECT_TRUE(failsWith(Artifact::load(dir), {dir + "/model.so: cannot open"}));
}

TEST_F(ArtifactTest, LibraryDigestMismatch) {
  write("model.so", "not an ELF file");
  write("weights.bin", "");
  write("manifest.json", test::sealManifest(fakeManifest(0, kInputN, kOutputN), dir));
  write("model.so", "not an ELF filf");
  EXPECT_TRUE(failsWith(Artifact::load(dir), {dir + "/model.so: SHA-256 is"}));
}

TEST_F(ArtifactTest, LibraryThatIsNotASharedObject) {
  write("weights.bin", "");
  write("model.so", "not an ELF file");
  write("manifest.json", test::sealManifest(fakeManifest(0, kInputN, kOutputN), dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/model.so: cannot load the model library"}));
}

TEST_F(ArtifactTest, CPUFeatureTheRuntimeCannotCheck) {
  std::string manifest = fakeManifest(0, kInputN, kOutputN);
  size_t at = manifest.find("\"requires\": []");
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at, 14, "\"requires\": [\"avx2\", \"quantum-ops\"]");
  write("weights.bin", "");
  write("model.so", "x");
  write("manifest.json", test::sealManifest(manifest, dir));
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/model.so: needs CPU feature(s) this CPU lacks",
                         "quantum-ops (unknown to this runtime)", "--cpu=x86-64-v3"}));
}

TEST_F(ArtifactTest, MissingEntryPoint) {
  if (!writeFake("", kInputN, kOutputN, "no_such_entry"))
    GTEST_SKIP() << "the fake model library is not built";
  EXPECT_TRUE(failsWith(Artifact::load(dir),
                        {dir + "/model.so: does not export the entry point "
                               "'no_such_entry'"}));
}

//===----------------------------------------------------------------------===//
// Running the fake model
//===----------------------------------------------------------------------===//

TEST_F(ArtifactTest, RunContiguous) {
  std::unique_ptr<Artifact> a = loadFake(floatBytes({1.5f}));
  REQUIRE_FAKE_MODEL(a);
  EXPECT_EQ(a->manifest().entry, "xfmr_entry");
  EXPECT_EQ(a->weightsBytes(), 4u);
  Tensor x = floats({1, 2, 3});
  Expected<std::vector<Tensor>> out = a->run({&x});
  ASSERT_TRUE(out) << out.error();
  ASSERT_EQ(out->size(), 1u);
  const Tensor &y = (*out)[0];
  EXPECT_EQ(y.name(), "y");
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.shape(), std::vector<int64_t>{3});
  EXPECT_EQ(valuesOf(y), (std::vector<float>{3.5f, 5.5f, 7.5f}));
}

TEST_F(ArtifactTest, EmptyWeightsAndEmptyInput) {
  std::unique_ptr<Artifact> a = loadFake("");
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({-1, 4});
  Expected<std::vector<Tensor>> out = a->run({&x});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<float>{-2, 8}));

  Tensor empty = floats({});
  out = a->run({&empty});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ((*out)[0].shape(), std::vector<int64_t>{0});
}

TEST_F(ArtifactTest, StridedOutputs) {
  struct {
    float mode;
    std::vector<float> expected;
  } cases[] = {{1, {3, 5, 7, 9}},  // reversed: offset 3, stride -1
               {3, {3, 5, 7, 9}},  // aligned past allocated, offset 3
               {6, {3, 3, 3, 3}}}; // stride 0
  for (const auto &c : cases) {
    SCOPED_TRACE("mode " + std::to_string(c.mode));
    std::unique_ptr<Artifact> a = loadFake(floatBytes({1, c.mode}));
    REQUIRE_FAKE_MODEL(a);
    Tensor x = floats({1, 2, 3, 4});
    Expected<std::vector<Tensor>> out = a->run({&x});
    ASSERT_TRUE(out) << out.error();
    EXPECT_EQ((*out)[0].shape(), std::vector<int64_t>{4});
    EXPECT_EQ(valuesOf((*out)[0]), c.expected);
  }
}

TEST_F(ArtifactTest, TransposedRank2Output) {
  std::unique_ptr<Artifact> a =
      loadFake(floatBytes({0, 7}), kInputN,
               R"([{"name": "y", "dtype": "float32", "shape": [2, "n"]}])");
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({1, 2, 3});
  Expected<std::vector<Tensor>> out = a->run({&x});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<float>{2, 4, 6, 102, 104, 106}));
}

TEST_F(ArtifactTest, OutputsSharingAnAllocationAreFreedOnce) {
  std::unique_ptr<Artifact> a =
      loadFake(floatBytes({0, 2}), kInputN,
               R"([{"name": "y", "dtype": "float32", "shape": ["n"]},
          {"name": "z", "dtype": "float32", "shape": ["?"]}])");
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({1, 2});
  Expected<std::vector<Tensor>> out = a->run({&x});
  ASSERT_TRUE(out) << out.error();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[1].name(), "z");
  EXPECT_EQ(valuesOf((*out)[0]), valuesOf((*out)[1]));
}

TEST_F(ArtifactTest, OutputOutsideItsAllocation) {
  std::unique_ptr<Artifact> a = loadFake(floatBytes({0, 4}));
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({1, 2});
  EXPECT_TRUE(failsWith(a->run({&x}), {dir + ": output 'y' [2]",
                                       "reaches outside its allocation"}));
}

TEST_F(ArtifactTest, FailedCheckFailsTheCallAndFreesItsOutputs) {
  // Mode 8 allocates its output, then records check 0 (ASan's leak check
  // sees whether the output is freed).
  std::unique_ptr<Artifact> a = loadFake(floatBytes({0, 8}));
  REQUIRE_FAKE_MODEL(a);
  Tensor good = floats({1, 2});
  Expected<std::vector<Tensor>> out = a->run({&good});
  ASSERT_TRUE(out) << out.error();
  Tensor bad = floats({1, -2});
  EXPECT_TRUE(failsWith(a->run({&bad}),
                        {dir + ": run-time check failed: fake check: x must not be negative"}));
}

TEST_F(ArtifactTest, OutputInsideTheWeights) {
  std::unique_ptr<Artifact> a = loadFake(floatBytes({0, 5}));
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({1, 2});
  EXPECT_TRUE(failsWith(a->run({&x}), {"output 'y'", "inside the weights"}));
}

TEST_F(ArtifactTest, OutputContradictingAStaticDim) {
  std::unique_ptr<Artifact> a = loadFake(
      "", kInputN, R"([{"name": "y", "dtype": "float32", "shape": [3]}])");
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({1, 2, 3, 4});
  EXPECT_TRUE(failsWith(
      a->run({&x}),
      {"output 'y' dim 0: the manifest says 3, the model returned 4"}));
}

TEST_F(ArtifactTest, InputChecks) {
  std::unique_ptr<Artifact> a =
      loadFake("",
               R"([{"name": "x", "dtype": "float32", "shape": ["n"]},
          {"name": "m", "dtype": "float32", "shape": ["n"]},
          {"name": "s", "dtype": "float32", "shape": [2]}])");
  REQUIRE_FAKE_MODEL(a);
  Tensor x = floats({1, 2, 3}), m3 = floats({1, 2, 3}, "m"),
         m4 = floats({1, 2, 3, 4}, "m"), s2 = floats({1, 2}, "s"),
         s3 = floats({1, 2, 3}, "s");
  Expected<Tensor> ints = Tensor::create(DType::I64, {3});
  Expected<Tensor> matrix = Tensor::create(DType::F32, {3, 1});
  ASSERT_TRUE(ints && matrix);

  EXPECT_TRUE(a->run({&x, &m3, &s2})) << a->run({&x, &m3, &s2}).error();
  EXPECT_TRUE(failsWith(a->run({&x, &m3}),
                        {dir + ": expected 3 input(s) (x, m, s), got 2"}));
  EXPECT_TRUE(failsWith(a->run({&*ints, &m3, &s2}),
                        {"input 'x': expected dtype float32, got int64"}));
  EXPECT_TRUE(failsWith(a->run({&*matrix, &m3, &s2}),
                        {"input 'x': expected rank 1 [n], got shape [3, 1]"}));
  EXPECT_TRUE(failsWith(a->run({&x, &m4, &s2}),
                        {"input 'm' dim 0: 'n' is 3 from input 'x' but 4 "
                         "here"}));
  EXPECT_TRUE(failsWith(a->run({&x, &m3, &s3}),
                        {"input 's' dim 0: expected 2, got 3"}));
  EXPECT_TRUE(failsWith(a->run({&x, nullptr, &s2}), {"input 'm'", "null"}));
}

TEST_F(ArtifactTest, RunByName) {
  std::unique_ptr<Artifact> a = loadFake(floatBytes({1}));
  REQUIRE_FAKE_MODEL(a);
  std::map<std::string, Tensor> named;
  EXPECT_TRUE(failsWith(a->run(named), {dir + ": missing input 'x'"}));
  named.emplace("x", floats({1, 2}));
  named.emplace("bogus", floats({1}));
  EXPECT_TRUE(
      failsWith(a->run(named), {"unknown input 'bogus'", "inputs are: x"}));
  named.erase("bogus");
  Expected<std::vector<Tensor>> out = a->run(named);
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<float>{3, 5}));
}

TEST_F(ArtifactTest, ConcurrentRuns) {
  std::unique_ptr<Artifact> a = loadFake(floatBytes({0.5f}));
  REQUIRE_FAKE_MODEL(a);
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::vector<float> in(static_cast<size_t>(1 + (t + i) % 17),
                              static_cast<float>(t * 1000 + i));
        Tensor x = floats(in);
        Expected<std::vector<Tensor>> out = a->run({&x});
        if (!out || valuesOf((*out)[0]) !=
                        std::vector<float>(in.size(), 2 * in[0] + 0.5f))
          ++failures[static_cast<size_t>(t)];
      }
    });
  for (std::thread &th : threads)
    th.join();
  EXPECT_EQ(failures, std::vector<int>(8, 0));
}

} // namespace
