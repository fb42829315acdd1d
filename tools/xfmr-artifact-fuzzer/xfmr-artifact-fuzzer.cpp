//===- xfmr-artifact-fuzzer.cpp - libFuzzer target for artifact loading ---===//
//
// Part of xfmr. Two things per input:
//
//  1. parseManifest on the manifest bytes as they are. An accepted manifest
//     must satisfy what Manifest.h promises (file names without '/', a C
//     identifier as entry, a power-of-two alignment, ranks within kMaxRank,
//     unique non-empty names, kv_pool inputs that agree with kv_cache).
//
//  2. An artifact directory built from the input and given to
//     Artifact::load. The input is a small container:
//
//       byte 0      model.so (% 16):  0 fake_model  1 fake_step_model
//                   2 fake_model truncated to P % size bytes
//                   3 fake_model with the byte at P % size flipped
//                   4 the raw bytes of section 3   5 absent
//                   6 a symlink to fake_model       7 a directory
//                   8 a FIFO                        9-15 fake_model
//       byte 1      weights.bin: 0-3 section 2   4 absent
//                   5 a symlink to section 2       6 a directory  7 a FIFO
//       byte 2      manifest.json: 0-4 section 1  5 absent
//                   6 a directory                  7 a symlink to section 1
//       byte 3      the extent n of the input when the model is run (% 8)
//       bytes 4-7   P, a little-endian parameter (bit 0: negative inputs)
//       then        section 1 (manifest), "\n--8<--\n", section 2
//                   (weights), "\n--8<--\n", section 3 (raw library)
//
//     (bytes 1-3 are taken modulo 8 and byte 0 modulo 16, so ASCII digits
//     work). Before writing,
//     these words in the manifest are replaced, so that a seed describes a
//     correctly built artifact whatever this build's libraries hash to:
//     @FORMAT_VERSION@, @ABI_VERSION@, @LIBRARY_SIZE@ and @LIBRARY_SHA256@
//     (of the genuine library: a garbled one must not match), @WEIGHTS_SIZE@
//     and @WEIGHTS_SHA256@ (of section 2 as written).
//
//     When the load succeeds and the library is the hand-written
//     fake_model.c (or fake_step_model.c) and the manifest declares the
//     signature that library implements, the model is run on inputs built
//     from the manifest: the runtime must reject every bad result (outputs
//     reaching outside their allocation, aliasing the weights) without a
//     sanitizer report. A library is never run under a manifest that does
//     not describe it: the ABI gives the runtime no way to check that.
//
// dlopen is wrapped (-Wl,--wrap=dlopen): a library the loader opens from
// the fuzzer's directory (by path or through /proc/self/fd) must be
// byte-identical to one of the genuine test libraries, i.e. must have passed
// the loader's integrity checks; anything else aborts ("never dlopen a
// library that did not pass the checks").
// When the loader in this build does not check model.so against the
// manifest yet (found out once at start-up), such libraries are refused
// instead of opened, with a note.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/Digest.h"
#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/PagedKV.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <climits>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef XFMR_FAKE_MODEL_PATH
#error "XFMR_FAKE_MODEL_PATH must name the built fake model library"
#endif
#ifndef XFMR_FAKE_STEP_MODEL_PATH
#error "XFMR_FAKE_STEP_MODEL_PATH must name the built fake step model library"
#endif

using namespace xfmr::rt;

extern "C" void *__real_dlopen(const char *path, int flags);

namespace {

[[noreturn]] void violated(const std::string &what) {
  std::fprintf(stderr, "xfmr-artifact-fuzzer: invariant violated: %s\n",
               what.c_str());
  std::abort();
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f),
                     std::istreambuf_iterator<char>());
}

std::string sha256Of(std::string_view bytes) {
  return sha256Hex(bytes.data(), bytes.size());
}

/// A genuine test library: its bytes and digest.
struct Library {
  std::string bytes;
  std::string sha256;
};

struct State {
  Library fakeModel, fakeStepModel;
  /// The per-process artifact directory (rebuilt for every input) and the
  /// directory above it, as realpath gives it.
  std::string root, dir;
  /// Whether the loader checks model.so before dlopen; when it does not,
  /// the dlopen wrapper refuses libraries that are not genuine.
  bool loaderVerifiesLibrary = true;
  /// Set while probing the loader: the wrapper records and refuses.
  bool probing = false, probeReachedDlopen = false;
  /// How far inputs got, printed at exit with XFMR_FUZZ_STATS=1.
  uint64_t inputs = 0, parsed = 0, loaded = 0, modelRuns = 0, stepRuns = 0;
};

State &state() {
  static State s;
  return s;
}

bool isGenuine(const std::string &bytes) {
  return bytes == state().fakeModel.bytes ||
         bytes == state().fakeStepModel.bytes;
}

bool startsWith(const std::string &s, const std::string &prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

/// Every dlopen of Artifact.cpp comes here (-Wl,--wrap=dlopen).
extern "C" void *__wrap_dlopen(const char *path, int flags) {
  State &s = state();
  char resolved[PATH_MAX];
  if (!path || s.dir.empty() || !::realpath(path, resolved) ||
      !startsWith(resolved, s.root + "/"))
    return __real_dlopen(path, flags);
  if (s.probing) {
    s.probeReachedDlopen = true;
    return nullptr;
  }
  std::string bytes = readFile(path);
  if (!isGenuine(bytes)) {
    if (s.loaderVerifiesLibrary)
      violated(std::string("the loader dlopen'ed ") + path + " (" +
               std::to_string(bytes.size()) +
               " bytes), which is not a genuine library: it passed no "
               "integrity check");
    return nullptr; // refused: this loader does not check yet
  }
  void *handle = __real_dlopen(path, flags);
  // What runs must be what was checked: the first page mapped is the
  // file's (dlopen reuses an object it thinks is loaded already).
  if (handle) {
    Dl_info info;
    void *entry = ::dlsym(handle, "xfmr_entry");
    if (entry && ::dladdr(entry, &info) && info.dli_fbase &&
        std::memcmp(info.dli_fbase, bytes.data(),
                    std::min<size_t>(bytes.size(), 4096)) != 0)
      violated(
          std::string("dlopen(") + path + ") returned a library mapped from " +
          (info.dli_fname ? info.dli_fname : "?") + ", not the file's bytes");
  }
  return handle;
}

namespace {

//===----------------------------------------------------------------------===//
// The artifact directory
//===----------------------------------------------------------------------===//

void removeTree(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    for (const char *name : {"manifest.json", "model.so", "weights.bin",
                             "manifest.real", "model.real", "weights.real"})
      removeTree(path + "/" + name);
    ::rmdir(path.c_str());
    return;
  }
  ::unlink(path.c_str());
}

/// Writes `bytes` to a new file (a new inode: a library mapped before is
/// never overwritten in place).
void writeFile(const std::string &path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    violated("cannot create " + path);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0)
      violated("cannot write " + path);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

/// Writes entry `name` of the artifact as `kind` says: a regular file, a
/// symlink to a regular file, absent, a directory or a FIFO.
enum class Entry { File, Absent, Symlink, Directory, Fifo };

void writeEntry(const std::string &name, Entry kind, std::string_view bytes,
                const std::string &realName) {
  std::string path = state().dir + "/" + name;
  switch (kind) {
  case Entry::File:
    writeFile(path, bytes);
    break;
  case Entry::Absent:
    break;
  case Entry::Symlink:
    writeFile(state().dir + "/" + realName, bytes);
    if (::symlink(realName.c_str(), path.c_str()) != 0)
      violated("cannot create the symlink " + path);
    break;
  case Entry::Directory:
    ::mkdir(path.c_str(), 0755);
    break;
  case Entry::Fifo:
    ::mkfifo(path.c_str(), 0644);
    break;
  }
}

void replaceAll(std::string &s, const std::string &from,
                const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

/// `manifest` with the placeholders filled in for `library` and `weights`.
std::string fillPlaceholders(std::string_view manifest, const Library &library,
                             std::string_view weights) {
  std::string m(manifest);
  replaceAll(m, "@FORMAT_VERSION@", std::to_string(kManifestFormatVersion));
  replaceAll(m, "@ABI_VERSION@", std::to_string(kArtifactABIVersion));
  replaceAll(m, "@LIBRARY_SIZE@", std::to_string(library.bytes.size()));
  replaceAll(m, "@LIBRARY_SHA256@", library.sha256);
  replaceAll(m, "@WEIGHTS_SIZE@", std::to_string(weights.size()));
  replaceAll(m, "@WEIGHTS_SHA256@", sha256Of(weights));
  return m;
}

constexpr std::string_view kSeparator = "\n--8<--\n";

/// The input split into its header and three sections.
struct Container {
  uint8_t libraryKind = 0, weightsKind = 0, manifestKind = 0, runExtent = 0;
  uint32_t param = 0;
  std::string_view manifest, weights, library;

  static Container parse(const uint8_t *data, size_t size) {
    Container c;
    uint8_t header[8] = {};
    std::memcpy(header, data, std::min<size_t>(size, 8));
    c.libraryKind = header[0] % 16;
    c.weightsKind = header[1] % 8;
    c.manifestKind = header[2] % 8;
    c.runExtent = header[3] % 8;
    c.param = header[4] | header[5] << 8 | header[6] << 16 |
              uint32_t(header[7]) << 24;
    std::string_view rest;
    if (size > 8)
      rest =
          std::string_view(reinterpret_cast<const char *>(data) + 8, size - 8);
    std::string_view *sections[] = {&c.manifest, &c.weights, &c.library};
    for (size_t i = 0; i < 3; ++i) {
      size_t end = i < 2 ? rest.find(kSeparator) : std::string_view::npos;
      *sections[i] = rest.substr(0, end);
      rest = end == std::string_view::npos
                 ? std::string_view()
                 : rest.substr(end + kSeparator.size());
    }
    return c;
  }
};

//===----------------------------------------------------------------------===//
// What an accepted manifest promises
//===----------------------------------------------------------------------===//

bool isFileName(const std::string &s) {
  return !s.empty() && s != "." && s != ".." &&
         s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}

bool isCIdentifier(const std::string &s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
  });
}

void checkSpecs(const std::vector<TensorSpec> &specs, const char *what) {
  std::set<std::string> names;
  for (const TensorSpec &spec : specs) {
    if (spec.name.empty() || !names.insert(spec.name).second)
      violated(std::string("accepted an empty or duplicate ") + what +
               " name '" + spec.name + "'");
    if (spec.rank() > kMaxRank)
      violated(std::string("accepted ") + what + " '" + spec.name +
               "' of rank " + std::to_string(spec.rank()));
    for (const Dim &d : spec.shape)
      if (!d.isStatic() && d.symbol.empty())
        violated(std::string("accepted a dynamic dim without a name in ") +
                 what + " '" + spec.name + "'");
    (void)formatSpecShape(spec);
  }
}

void checkManifest(const Manifest &m) {
  if (m.formatVersion != kManifestFormatVersion ||
      m.abiVersion != kArtifactABIVersion)
    violated("accepted format_version " + std::to_string(m.formatVersion) +
             ", abi_version " + std::to_string(m.abiVersion));
  if (!isFileName(m.library) || !isFileName(m.weightsFile) ||
      m.library == m.weightsFile)
    violated("accepted library '" + m.library + "' and weights file '" +
             m.weightsFile + "'");
  if (!isCIdentifier(m.entry))
    violated("accepted entry '" + m.entry + "'");
  if (m.targetKind.empty())
    violated("accepted an empty target.kind");
  if (m.weightsAlignment == 0 ||
      (m.weightsAlignment & (m.weightsAlignment - 1)) != 0)
    violated("accepted weights.alignment " +
             std::to_string(m.weightsAlignment));
  checkSpecs(m.inputs, "input");
  checkSpecs(m.outputs, "output");
  size_t pools = 0;
  for (const TensorSpec &in : m.inputs)
    pools += in.kvPool;
  if (!m.kvCache) {
    if (pools)
      violated("accepted kv_pool inputs without kv_cache");
    return;
  }
  const KVCacheSpec &kv = *m.kvCache;
  if (kv.blockSize <= 0 || kv.numLayers <= 0 || kv.numKVHeads <= 0 ||
      kv.headDim <= 0 ||
      pools != static_cast<size_t>(kv.poolsPerLayer() * kv.numLayers))
    violated("accepted an inconsistent kv_cache");
  size_t index = 0;
  for (const TensorSpec &in : m.inputs) {
    if (!in.kvPool)
      continue;
    size_t rank = static_cast<int64_t>(index++ % kv.poolsPerLayer()) >= 2 ? 3 : 4;
    if (in.rank() != rank || in.shape[0].isStatic() ||
        in.shape[1].value != kv.blockSize || in.shape[2].value != kv.numKVHeads)
      violated("accepted kv_pool input '" + in.name +
               "' that disagrees with kv_cache");
  }
}

//===----------------------------------------------------------------------===//
// Running what loaded
//===----------------------------------------------------------------------===//

/// How fake_model.c returns its result, from its weights (see that file),
/// or -1 when the model's own (int) conversion of weights[1] would be
/// undefined.
int fakeModelMode(const Artifact &a, std::string_view weights) {
  size_t count = a.manifest().weightsSize / sizeof(float);
  if (count < 2)
    return 0;
  float w1;
  std::memcpy(&w1, weights.data() + sizeof(float), sizeof w1);
  if (!std::isfinite(w1) || std::fabs(w1) >= 2147483520.0f)
    return -1;
  int mode = static_cast<int>(w1);
  return mode >= 0 && mode <= 8 ? mode : 0; // others return like 0
}

/// Runs fake_model.c if the manifest declares what it implements: one
/// float32 [n] input, and the outputs its mode returns. The input is
/// negative when `negative` (mode 8's run-time check fails on that).
void runFakeModel(const Artifact &a, std::string_view weights, int64_t extent,
                  bool negative) {
  const Manifest &m = a.manifest();
  int mode = fakeModelMode(a, weights);
  if (mode < 0 || m.inputs.size() != 1 || m.inputs[0].dtype != DType::F32 ||
      m.inputs[0].rank() != 1 || m.inputs[0].kvPool)
    return;
  size_t outputs = mode == 2 ? 2 : 1, outputRank = mode == 7 ? 2 : 1;
  if (m.outputs.size() != outputs)
    return;
  for (const TensorSpec &out : m.outputs)
    if (out.rank() != outputRank)
      return;
  const Dim &d = m.inputs[0].shape[0];
  int64_t n = d.isStatic() ? d.value : extent;
  if (n > 4096)
    return;
  Expected<Tensor> x = Tensor::create(DType::F32, {n}, m.inputs[0].name);
  if (!x)
    violated("cannot create an input of " + std::to_string(n) + ": " +
             x.error());
  for (int64_t i = 0; i < n; ++i)
    x->data<float>()[i] = (negative ? -0.5f : 0.5f) * static_cast<float>(i + 1);
  Expected<std::vector<Tensor>> y = a.run({&*x});
  ++state().modelRuns;
  // Mode 4's view of no elements reads nothing, and is fine.
  if (y && ((mode == 4 && n > 0) || mode == 5))
    violated("run accepted a result outside its allocation (mode " +
             std::to_string(mode) + ")");
  if (y && mode == 8 && negative && n > 0)
    violated("run succeeded although the model's run-time check failed");
  // The checks before the call: wrong count, dtype, name.
  if (a.run(std::vector<const Tensor *>{}))
    violated("run accepted no inputs");
  Expected<Tensor> wrong = Tensor::create(DType::I64, {n});
  if (wrong && a.run({&*wrong}))
    violated("run accepted an int64 input for a float32 one");
  std::map<std::string, Tensor> named;
  named.emplace(m.inputs[0].name + "_", std::move(*x));
  if (a.run(named))
    violated("run accepted an unknown input name");
}

/// The step signature of fake_step_model.c (test/Unit/PagedKVTest.cpp).
bool declaresStepSignature(const Manifest &m) {
  static const struct {
    const char *name;
    DType dtype;
    size_t rank;
  } expected[] = {
      {"input_ids", DType::I64, 1},      {"positions", DType::I64, 1},
      {"slot_mapping", DType::I64, 1},   {"block_tables", DType::I32, 2},
      {"context_lens", DType::I32, 1},   {"query_start_loc", DType::I32, 1},
      {"logits_indices", DType::I64, 1}, {"key_cache.0", DType::F32, 4},
      {"value_cache.0", DType::F32, 4}};
  if (!m.kvCache || m.kvCache->numLayers != 1 ||
      m.inputs.size() != std::size(expected) || m.outputs.size() != 1 ||
      m.outputs[0].rank() != 2)
    return false;
  for (size_t i = 0; i < std::size(expected); ++i)
    if (m.inputs[i].name != expected[i].name ||
        m.inputs[i].dtype != expected[i].dtype ||
        m.inputs[i].rank() != expected[i].rank)
      return false;
  return true;
}

void runFakeStepModel(const Artifact &a, uint32_t param) {
  if (!declaresStepSignature(a.manifest()))
    return;
  Expected<KVPools> pools =
      KVPools::allocate(a, 1 + param % 4, uint64_t(1) << 20);
  if (!pools)
    return;
  std::vector<int32_t> table;
  for (int32_t b = 0; b < pools->numBlocks(); ++b)
    table.push_back(b);
  std::vector<int64_t> tokens(1 + (param >> 8) % 6, 1);
  (void)runStep(a, *pools, {{tokens, 0, table}});
  ++state().stepRuns;
}

//===----------------------------------------------------------------------===//
// Start-up
//===----------------------------------------------------------------------===//

Library readLibrary(const char *path) {
  Library lib;
  lib.bytes = readFile(path);
  if (lib.bytes.empty())
    violated(std::string("cannot read ") + path);
  lib.sha256 = sha256Of(lib.bytes);
  return lib;
}

/// A manifest for fake_model.c that is right in every way.
const char *const kProbeManifest = R"({"format": "xfmr-artifact",
  "format_version": @FORMAT_VERSION@, "abi_version": @ABI_VERSION@,
  "target": {"kind": "cpu", "requires": []}, "checks": [],
  "library": "model.so", "entry": "xfmr_entry",
  "weights": {"file": "weights.bin", "size": @WEIGHTS_SIZE@, "alignment": 64, "count": 2},
  "files": {"model.so": {"size": @LIBRARY_SIZE@, "sha256": "@LIBRARY_SHA256@"},
            "weights.bin": {"size": @WEIGHTS_SIZE@, "sha256": "@WEIGHTS_SHA256@"}},
  "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
  "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}]})";

/// Whether this loader checks model.so before dlopen: it is given a
/// truncated fake_model under a manifest that is right in every other way.
bool probeLoaderVerifiesLibrary() {
  State &s = state();
  removeTree(s.dir);
  ::mkdir(s.dir.c_str(), 0755);
  const Library &lib = s.fakeModel;
  std::string weights(8, '\0');
  std::string manifest = fillPlaceholders(kProbeManifest, lib, weights);
  writeFile(s.dir + "/manifest.json", manifest);
  writeFile(s.dir + "/weights.bin", weights);
  writeFile(s.dir + "/model.so",
            std::string_view(lib.bytes).substr(0, lib.bytes.size() / 2));
  s.probing = true;
  s.probeReachedDlopen = false;
  (void)Artifact::load(s.dir);
  s.probing = false;
  return !s.probeReachedDlopen;
}

} // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

/// Most byte mutations of a manifest make it invalid JSON, which stops at
/// the parser. Half of the mutations therefore keep the manifest's syntax:
/// they change the header (which files are broken, and how), the weights
/// (fake_model's result mode), or replace one number of the manifest with
/// an edge value. The rest are libFuzzer's own, over the whole input.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::minstd_rand rng(seed);
  unsigned choice = rng() % 6;
  if (choice < 3 || size < 8)
    return LLVMFuzzerMutate(data, size, maxSize);
  Container c = Container::parse(data, size);
  std::string header(reinterpret_cast<const char *>(data), 8);
  std::string manifest(c.manifest), weights(c.weights);
  if (choice == 3) {
    LLVMFuzzerMutate(reinterpret_cast<uint8_t *>(header.data()), 8, 8);
  } else if (choice == 4) {
    size_t used = weights.size();
    weights.resize(std::max<size_t>(2 * used, 16));
    weights.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t *>(weights.data()),
                                    used, weights.size()));
  } else {
    std::vector<std::pair<size_t, size_t>>
        numbers; // [begin, end) of digit runs
    for (size_t i = 0; i < manifest.size();) {
      size_t j = i;
      while (j < manifest.size() && manifest[j] >= '0' && manifest[j] <= '9')
        ++j;
      if (j > i)
        numbers.push_back({i, j});
      i = j + 1;
    }
    if (numbers.empty())
      return LLVMFuzzerMutate(data, size, maxSize);
    static const char *const kValues[] = {"0",
                                          "1",
                                          "2",
                                          "3",
                                          "4",
                                          "7",
                                          "16",
                                          "63",
                                          "64",
                                          "65",
                                          "4096",
                                          "2147483648",
                                          "4294967296",
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "18446744073709551616",
                                          "1e300",
                                          "0.5",
                                          "@LIBRARY_SIZE@",
                                          "@WEIGHTS_SIZE@"};
    auto [begin, end] = numbers[rng() % numbers.size()];
    manifest.replace(begin, end - begin, kValues[rng() % std::size(kValues)]);
  }
  std::string out = header + manifest + std::string(kSeparator) + weights +
                    std::string(kSeparator) + std::string(c.library);
  if (out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  State &s = state();
  s.fakeModel = readLibrary(XFMR_FAKE_MODEL_PATH);
  s.fakeStepModel = readLibrary(XFMR_FAKE_STEP_MODEL_PATH);
  char pattern[] = "/tmp/xfmr-artifact-fuzzer-XXXXXX";
  char resolved[PATH_MAX];
  if (!::mkdtemp(pattern) || !::realpath(pattern, resolved))
    violated("cannot create a temporary directory");
  s.root = resolved;
  s.dir = s.root + "/model.xfa";
  s.loaderVerifiesLibrary = probeLoaderVerifiesLibrary();
  if (!s.loaderVerifiesLibrary)
    std::fprintf(
        stderr,
        "xfmr-artifact-fuzzer: note: this loader dlopens model.so without "
        "checking it against the manifest; libraries that are not genuine "
        "are refused by the fuzzer instead of opened\n");
  // Removes the directory at exit, whatever input was last.
  std::atexit([] {
    State &s = state();
    removeTree(s.dir);
    ::rmdir(s.root.c_str());
    if (std::getenv("XFMR_FUZZ_STATS"))
      std::fprintf(stderr,
                   "xfmr-artifact-fuzzer: %llu inputs, %llu manifests "
                   "accepted, %llu artifacts "
                   "loaded, %llu fake_model runs, %llu step runs\n",
                   (unsigned long long)s.inputs, (unsigned long long)s.parsed,
                   (unsigned long long)s.loaded,
                   (unsigned long long)s.modelRuns,
                   (unsigned long long)s.stepRuns);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Container c = Container::parse(data, size);
  State &s = state();
  ++s.inputs;

  // 1. The parser on the bytes as they are.
  if (Expected<Manifest> m = parseManifest(c.manifest, "manifest.json"))
    checkManifest(*m);

  // 2. The loader on a directory.
  const Library &genuine = c.libraryKind == 1 ? s.fakeStepModel : s.fakeModel;
  std::string manifest = fillPlaceholders(c.manifest, genuine, c.weights);
  Expected<Manifest> parsed = parseManifest(manifest, "manifest.json");
  if (parsed) {
    checkManifest(*parsed);
    ++s.parsed;
  }

  removeTree(s.dir);
  if (::mkdir(s.dir.c_str(), 0755) != 0)
    violated("cannot create " + s.dir);
  std::string library;
  switch (c.libraryKind) {
  case 0:
  case 1:
  case 6:
  default:
    library = genuine.bytes;
    break;
  case 5:
  case 7:
  case 8:
    break;
  case 2:
    library = genuine.bytes.substr(0, c.param % genuine.bytes.size());
    break;
  case 3:
    library = genuine.bytes;
    library[c.param % library.size()] ^= static_cast<char>((c.param >> 24) | 1);
    break;
  case 4:
    library = std::string(c.library);
    break;
  }
  static constexpr Entry kLibraryEntry[] = {
      Entry::File, Entry::File,   Entry::File,    Entry::File,
      Entry::File, Entry::Absent, Entry::Symlink, Entry::Directory,
      Entry::Fifo, Entry::File,   Entry::File,    Entry::File,
      Entry::File, Entry::File,   Entry::File,    Entry::File};
  static constexpr Entry kWeightsEntry[] = {
      Entry::File,   Entry::File,    Entry::File,      Entry::File,
      Entry::Absent, Entry::Symlink, Entry::Directory, Entry::Fifo};
  static constexpr Entry kManifestEntry[] = {
      Entry::File, Entry::File,   Entry::File,      Entry::File,
      Entry::File, Entry::Absent, Entry::Directory, Entry::Symlink};
  // The library and weights go where the manifest says, when it says.
  std::string libraryName = parsed ? parsed->library : "model.so";
  std::string weightsName = parsed ? parsed->weightsFile : "weights.bin";
  if (!isFileName(libraryName) || libraryName.size() > 64)
    libraryName = "model.so";
  if (!isFileName(weightsName) || weightsName.size() > 64 ||
      weightsName == libraryName)
    weightsName = "weights.bin";
  // removeTree knows these names only.
  if (libraryName != "model.so" && libraryName != "weights.bin")
    libraryName = "model.so";
  if (weightsName != "model.so" && weightsName != "weights.bin")
    weightsName = "weights.bin";
  if (weightsName == libraryName)
    weightsName = libraryName == "model.so" ? "weights.bin" : "model.so";
  writeEntry(libraryName, kLibraryEntry[c.libraryKind], library, "model.real");
  writeEntry(weightsName, kWeightsEntry[c.weightsKind], c.weights,
             "weights.real");
  writeEntry("manifest.json", kManifestEntry[c.manifestKind], manifest,
             "manifest.real");

  Expected<std::unique_ptr<Artifact>> loaded = Artifact::load(s.dir);
  if (!loaded) {
    if (loaded.error().empty())
      violated("load failed without a message");
    return 0;
  }
  const Artifact &a = **loaded;
  ++s.loaded;
  checkManifest(a.manifest());
  Entry libraryEntry = kLibraryEntry[c.libraryKind];
  bool genuineFile = isGenuine(library) && (libraryEntry == Entry::File ||
                                            libraryEntry == Entry::Symlink);
  if (!genuineFile)
    violated("load succeeded with a library that is not genuine");
  if (library == s.fakeModel.bytes)
    runFakeModel(a, c.weights, c.runExtent, c.param & 1);
  else if (library == s.fakeStepModel.bytes)
    runFakeStepModel(a, c.param);
  return 0;
}
