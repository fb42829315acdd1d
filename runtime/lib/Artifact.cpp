//===- Artifact.cpp - a loaded compiled model -----------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/CUDA.h"
#include "xfmr/runtime/CPUFeatures.h"
#include "xfmr/runtime/Digest.h"
#include "xfmr/runtime/WeightLayout.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;

namespace {

/// What a zero-byte weights file or zero-element input is passed as: the
/// ABI wants a non-null, 64-byte aligned pointer that is never read.
alignas(64) const uint8_t kEmptyBuffer[64] = {};

/// The symbol that carries the ABI version of a model library.
const char *const kABIVersionSymbol = "xfmr_abi_version";

std::string joinPath(const std::string &dir, const std::string &name) {
  return dir + "/" + name;
}

/// `dir` without trailing slashes (but "/" stays "/").
std::string trimSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

std::string quoted(const std::string &s) { return "'" + s + "'"; }

int64_t pointerWord(const void *p) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(p));
}

/// The manifest names of the inputs: "input_ids, mask".
std::string listNames(const std::vector<TensorSpec> &specs) {
  std::string s;
  for (const TensorSpec &spec : specs)
    s += (s.empty() ? "" : ", ") + spec.name;
  return s.empty() ? "none" : s;
}

std::string formatBracketed(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Descriptors
//===----------------------------------------------------------------------===//

/// A rank-r strided memref descriptor as words:
/// {allocated, aligned, offset, sizes[r], strides[r]}.
std::vector<int64_t> contiguousDescriptor(const void *data,
                                          const std::vector<int64_t> &shape) {
  size_t rank = shape.size();
  std::vector<int64_t> words(3 + 2 * rank);
  words[0] = words[1] = pointerWord(data);
  words[2] = 0;
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    words[3 + d] = shape[d];
    words[3 + rank + d] = stride;
    stride *= shape[d]; // cannot overflow: the tensor's element count fits
  }
  return words;
}

/// An output descriptor as the model returned it.
struct ReturnedMemRef {
  uintptr_t allocated = 0;
  uintptr_t aligned = 0;
  int64_t offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

ReturnedMemRef readDescriptor(const int64_t *words, size_t rank) {
  ReturnedMemRef m;
  m.allocated = static_cast<uintptr_t>(words[0]);
  m.aligned = static_cast<uintptr_t>(words[1]);
  m.offset = words[2];
  m.sizes.assign(words + 3, words + 3 + rank);
  m.strides.assign(words + 3 + rank, words + 3 + 2 * rank);
  return m;
}

/// Copies the elements of `m` (at least one) into the row-major `dst`.
/// `origin` points at element offset 0 of the view, i.e. aligned + offset;
/// the caller has checked that every addressed element lies inside the
/// allocation.
void copyStrided(uint8_t *dst, const uint8_t *origin, const ReturnedMemRef &m,
                 size_t elementSize) {
  size_t rank = m.sizes.size();
  auto es = static_cast<int64_t>(elementSize);
  if (rank == 0) {
    std::memcpy(dst, origin, elementSize);
    return;
  }
  // Contiguous row-major (any stride is fine on a dim of size 1): one copy.
  bool contiguous = true;
  int64_t expected = 1, numel = 1;
  for (size_t d = rank; d-- > 0;) {
    if (m.sizes[d] != 1 && m.strides[d] != expected)
      contiguous = false;
    expected *= m.sizes[d];
    numel *= m.sizes[d];
  }
  if (contiguous) {
    std::memcpy(dst, origin, static_cast<size_t>(numel) * elementSize);
    return;
  }
  // Walk the outer dims with an index counter; copy the innermost dim as a
  // run when it is unit-stride, element by element otherwise.
  int64_t inner = m.sizes[rank - 1], innerStride = m.strides[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  int64_t base = 0; // element offset of the current row
  for (;;) {
    const uint8_t *row = origin + base * es;
    if (innerStride == 1) {
      std::memcpy(dst, row, static_cast<size_t>(inner) * elementSize);
      dst += inner * es;
    } else {
      for (int64_t i = 0; i < inner; ++i, dst += es)
        std::memcpy(dst, row + i * innerStride * es, elementSize);
    }
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++index[d] < m.sizes[d]) {
        base += m.strides[d];
        break;
      }
      base -= m.strides[d] * (m.sizes[d] - 1);
      index[d] = 0;
    }
    if (d == static_cast<size_t>(-1))
      return;
  }
}

/// Checks that the view `m` of at least one element lies inside its
/// allocation; returns aligned + offset, the address of element (0, ..., 0).
Expected<const uint8_t *> checkViewBounds(const ReturnedMemRef &m,
                                          size_t elementSize) {
  if (m.allocated == 0 || m.aligned == 0)
    return Error("null data pointer for a non-empty result");
  // Lowest and highest element offsets the view addresses.
  int64_t lo = m.offset, hi = m.offset;
  for (size_t d = 0; d < m.sizes.size(); ++d) {
    int64_t span;
    if (__builtin_mul_overflow(m.strides[d], m.sizes[d] - 1, &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return Error("strides address more than 2^63 elements");
  }
  auto es = static_cast<int64_t>(elementSize);
  int64_t loBytes, endBytes;
  if (__builtin_mul_overflow(lo, es, &loBytes) ||
      __builtin_mul_overflow(hi, es, &endBytes) ||
      __builtin_add_overflow(endBytes, es, &endBytes))
    return Error("strides address more than 2^63 bytes");
  // [aligned + loBytes, aligned + endBytes) must lie inside the allocation,
  // whose true size malloc knows (outputs are malloc'ed, per the ABI).
  size_t usable = ::malloc_usable_size(reinterpret_cast<void *>(m.allocated));
  __int128 allocBegin = m.allocated, allocEnd = allocBegin + usable;
  __int128 first = static_cast<__int128>(m.aligned) + loBytes;
  __int128 end = static_cast<__int128>(m.aligned) + endBytes;
  if (first < allocBegin || end > allocEnd)
    return Error("its strided view (element offsets " + std::to_string(lo) +
                 " to " + std::to_string(hi) +
                 ") reaches outside its allocation of " +
                 std::to_string(usable) + " bytes");
  return reinterpret_cast<const uint8_t *>(m.aligned) + m.offset * es;
}

/// The memory an output must not come back in: it is not the caller's to
/// free.
struct ForeignRange {
  uintptr_t begin, end;
  std::string what;
};

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

Artifact::~Artifact() {
  if (library)
    ::dlclose(library);
  if (weightsMapping)
    ::munmap(weightsMapping, static_cast<size_t>(info.weightsSize));
  cuda::freeDevice(deviceWeights);
}

namespace {

/// An open file descriptor, closed when it goes out of scope.
struct OwnedFd {
  int fd = -1;
  explicit OwnedFd(int fd) : fd(fd) {}
  OwnedFd(const OwnedFd &) = delete;
  ~OwnedFd() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Opens the artifact file `path` for reading: a regular file, not a
/// symbolic link (an artifact is one directory; a link could point anywhere),
/// whose size is the manifest's.
Expected<std::unique_ptr<OwnedFd>> openArtifactFile(const std::string &path,
                                                    const FileIntegrity &expected,
                                                    const std::string &manifestPath) {
  auto file = std::make_unique<OwnedFd>(
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (file->fd < 0 && errno == ELOOP)
    return Error(path + ": is a symbolic link (artifact files must be regular files)");
  if (file->fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(file->fd, &st) != 0)
    return Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Error(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) != expected.size)
    return Error(path + ": size is " + std::to_string(st.st_size) + " bytes, but " +
                 manifestPath + " says " + std::to_string(expected.size) +
                 " (truncated or replaced?)");
  return file;
}

Error digestMismatch(const std::string &path, const std::string &actual,
                     const std::string &manifestPath) {
  return Error(path + ": SHA-256 is " + actual + ", not the one " + manifestPath +
               " records (the file was modified after compilation)");
}

/// The CPU features the artifact needs that this host lacks, as one error.
std::optional<Error> checkCPUFeatures(const Manifest &m, const std::string &libraryPath) {
  std::vector<std::string> missing = missingCPUFeatures(m.requiredCPUFeatures);
  if (missing.empty())
    return std::nullopt;
  std::string list;
  for (const std::string &f : missing)
    list += (list.empty() ? "" : ", ") + f;
  return Error(libraryPath + ": needs CPU feature(s) this CPU lacks: " + list +
               " (compiled for cpu " + quoted(m.targetCPU) +
               "; rebuild with xfmr-compile --cpu=native here, or --cpu=x86-64-v3 for a "
               "portable build)");
}

/// weights.bin, mapped read-only for the artifact's life and never copied;
/// null when empty. The digest is taken of the mapping itself, so what runs
/// is what was checked.
Expected<void *> mapWeights(const Manifest &m, int fd, const std::string &weightsPath,
                            const std::string &expectedDigest, const std::string &manifestPath) {
  if (m.weightsSize == 0) {
    std::string digest = sha256Hex(kEmptyBuffer, 0);
    if (digest != expectedDigest)
      return digestMismatch(weightsPath, digest, manifestPath);
    return static_cast<void *>(nullptr);
  }
  void *p = ::mmap(nullptr, static_cast<size_t>(m.weightsSize), PROT_READ, MAP_PRIVATE,
                   fd, 0);
  if (p == MAP_FAILED)
    return Error(weightsPath + ": cannot map " + std::to_string(m.weightsSize) +
                 " bytes: " + std::strerror(errno));
  auto unmap = [&] { ::munmap(p, static_cast<size_t>(m.weightsSize)); };
  if (reinterpret_cast<uintptr_t>(p) % m.weightsAlignment != 0) {
    unmap();
    return Error(weightsPath + ": cannot map at the " + std::to_string(m.weightsAlignment) +
                 "-byte alignment weights.alignment asks for");
  }
  std::string digest = sha256Hex(p, static_cast<size_t>(m.weightsSize));
  if (digest != expectedDigest) {
    unmap();
    return digestMismatch(weightsPath, digest, manifestPath);
  }
  return p;
}

/// A file the manifest references, open and mapped read-only, closed and
/// unmapped on scope exit.
struct MappedSource {
  int fd = -1;
  void *data = nullptr;
  size_t size = 0;
  MappedSource() = default;
  MappedSource(const MappedSource &) = delete;
  ~MappedSource() {
    if (data)
      ::munmap(data, size);
    if (fd >= 0)
      ::close(fd);
  }
};

/// Opens and maps weights.sources[i] after checking it is the file the
/// artifact was compiled from (same size and modification time).
Status mapSource(const WeightSource &src, const std::string &manifestPath, MappedSource &out) {
  out.fd = ::open(src.path.c_str(), O_RDONLY | O_CLOEXEC); // `out` closes it
  if (out.fd < 0)
    return Error(src.path + ": cannot open a weights source of " + manifestPath + ": " +
                 std::strerror(errno) + " (the artifact was compiled with --weights=reference "
                 "and reads the model's files; recompile if they moved)");
  struct stat st;
  if (::fstat(out.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return Error(src.path + ": a weights source of " + manifestPath +
                 " is not a regular file");
  int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (static_cast<uint64_t>(st.st_size) != src.size || mtime != src.mtimeNs)
    return Error(src.path + ": changed since the artifact was compiled (" +
                 std::to_string(st.st_size) + " bytes, modified at " + std::to_string(mtime) +
                 " ns; " + manifestPath + " says " + std::to_string(src.size) + " bytes at " +
                 std::to_string(src.mtimeNs) + " ns); recompile the artifact");
  if (src.size == 0)
    return {};
  void *p = ::mmap(nullptr, src.size, PROT_READ, MAP_PRIVATE, out.fd, 0);
  if (p == MAP_FAILED)
    return Error(src.path + ": cannot map " + std::to_string(src.size) + " bytes: " +
                 std::strerror(errno));
  ::madvise(p, src.size, MADV_SEQUENTIAL);
  out.data = p;
  out.size = src.size;
  return {};
}

/// Maps the whole pages of an unpacked reference straight from its file
/// over the buffer (no copy; the pages stay in the page cache, shared) when
/// file offset and buffer offset agree modulo the page size, as
/// xfmr-compile places them; copies the rest. False when nothing was mapped.
bool mapPages(const WeightReference &r, const MappedSource &src, char *buf) {
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (r.at % page != r.offset % page || r.bytes < 2 * page)
    return false;
  uint64_t first = (r.at + page - 1) / page * page, last = (r.at + r.bytes) / page * page;
  void *at = ::mmap(buf + first, last - first, PROT_READ, MAP_PRIVATE | MAP_FIXED, src.fd,
                    static_cast<off_t>(r.offset + (first - r.at)));
  if (at == MAP_FAILED)
    return false;
  const char *from = static_cast<const char *>(src.data) + r.offset;
  std::memcpy(buf + r.at, from, first - r.at);
  std::memcpy(buf + last, from + (last - r.at), r.at + r.bytes - last);
  return true;
}

/// Fills the references of the buffer `buf` from their sources, packing
/// panels where the manifest asks.
Status fillReferences(const Manifest &m, char *buf, const std::string &manifestPath) {
  std::vector<MappedSource> sources(m.weightSources.size());
  for (size_t i = 0; i < sources.size(); ++i)
    if (Status s = mapSource(m.weightSources[i], manifestPath, sources[i]); !s)
      return s;
  for (const WeightReference &r : m.weightReferences) {
    const char *from = static_cast<const char *>(sources[r.source].data) + r.offset;
    char *to = buf + r.at;
    if (r.panelK > 0)
      packPanels(from, r.panelK, r.panelN, r.elemBytes, 0, r.panelN / kPanelWidth, to);
    else if (!mapPages(r, sources[r.source], buf))
      std::memcpy(to, from, r.bytes);
    // This process does not read the source's copy again (one reference
    // per tensor): its pages leave the process's memory.
    auto skew = reinterpret_cast<uintptr_t>(from) % static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    ::madvise(const_cast<char *>(from) - skew, r.bytes + skew, MADV_DONTNEED);
  }
  return {};
}

/// The weights buffer of an artifact compiled with --weights=reference:
/// anonymous memory (transparent huge pages where the kernel gives them)
/// holding weights.bin's bytes between the references, checked against its
/// digest, and each reference read from the model's files.
Expected<void *> assembleWeights(const Manifest &m, int fd, const std::string &weightsPath,
                                 const std::string &expectedDigest,
                                 const std::string &manifestPath) {
  size_t size = static_cast<size_t>(m.weightsSize);
  void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Error(weightsPath + ": cannot allocate the " + std::to_string(size) +
                 "-byte weights buffer: " + std::strerror(errno));
  ::madvise(p, size, MADV_HUGEPAGE);
  char *buf = static_cast<char *>(p);
  auto fail = [&](Error e) -> Expected<void *> {
    ::munmap(p, size);
    return e;
  };
  // The stored bytes: the gaps between references, in order.
  Sha256 hash;
  uint64_t at = 0;
  auto readGap = [&](uint64_t end) -> Status {
    for (uint64_t done = at; done < end;) {
      ssize_t got = ::read(fd, buf + done, static_cast<size_t>(end - done));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        return Error(weightsPath + ": read failed: " +
                     (got < 0 ? std::strerror(errno) : "unexpected end of file"));
      hash.update(buf + done, static_cast<size_t>(got));
      done += static_cast<uint64_t>(got);
    }
    return {};
  };
  for (const WeightReference &r : m.weightReferences) {
    if (Status s = readGap(r.at); !s)
      return fail(s.takeError());
    at = r.at + r.bytes;
  }
  if (Status s = readGap(m.weightsSize); !s)
    return fail(s.takeError());
  std::string digest = hash.finish();
  if (digest != expectedDigest)
    return fail(digestMismatch(weightsPath, digest, manifestPath));
  if (Status s = fillReferences(m, buf, manifestPath); !s)
    return fail(s.takeError());
  ::mprotect(p, size, PROT_READ);
  return p;
}

} // namespace

namespace {
/// The SHA-256 of the file at `path`.
Expected<std::string> sha256OfPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  Expected<std::string> digest = sha256OfFile(fd, path);
  ::close(fd);
  return digest;
}
} // namespace

int xfmr::rt::parallelLauncherSize() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

int xfmr::rt::parallelLauncherRank() {
  for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

Expected<std::unique_ptr<Artifact>> Artifact::load(const std::string &path) {
  std::string dir = trimSlashes(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return Error(dir +
                 ": cannot open artifact directory: " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return Error(dir + ": not an artifact directory (not a directory)");

  std::string manifestPath = joinPath(dir, "manifest.json");
  Expected<Manifest> manifest = readManifest(manifestPath);
  if (!manifest)
    return manifest.takeError();
  if (manifest->pipelineStages > 1 && manifest->pipelineStage == 0 &&
      manifest->pipelineStageManifests.size() + 1 != static_cast<size_t>(manifest->pipelineStages))
    return Error(manifestPath + ": pipeline_parallel.stage_manifests: missing (a stage of an "
                                "unfinished build?)");
  // A pipeline-parallel artifact: this MPI rank's stage (stage<s>/, its
  // manifest the one stage 0's lists). A run with the wrong process count
  // loads stage 0 everywhere and is refused when it joins.
  if (int stage = parallelLauncherRank() / static_cast<int>(manifest->stageRanks());
      manifest->pipelineStages > 1 && stage > 0 && stage < manifest->pipelineStages &&
      parallelLauncherSize() == manifest->parallelRanks()) {
    std::string stageDir = joinPath(dir, "stage" + std::to_string(stage));
    std::string stagePath = joinPath(stageDir, "manifest.json");
    const std::string &want = manifest->pipelineStageManifests[stage - 1];
    Expected<std::string> digest = sha256OfPath(stagePath);
    if (!digest)
      return digest.takeError();
    if (*digest != want)
      return Error(stagePath + ": its SHA-256 is " + *digest + ", but " + manifestPath +
                   " says " + want + " (pipeline_parallel.stage_manifests)");
    Expected<Manifest> staged = readManifest(stagePath);
    if (!staged)
      return staged.takeError();
    if (staged->pipelineStage != stage || staged->pipelineStages != manifest->pipelineStages ||
        staged->stageRanks() != manifest->stageRanks())
      return Error(stagePath + ": not stage " + std::to_string(stage) + " of " +
                   std::to_string(manifest->pipelineStages) + " of " + dir);
    dir = stageDir;
    manifestPath = stagePath;
    manifest = std::move(staged);
  }
  if (manifest->targetKind != "cpu" && manifest->targetKind != "cuda")
    return Error(manifestPath +
                 ": target.kind: " + quoted(manifest->targetKind) +
                 " is not supported (this runtime runs 'cpu' and 'cuda' artifacts)");
  bool gpu = manifest->targetKind == "cuda";
  if (gpu) {
    // Before model.so is loaded: its constructor loads the kernels.
    Expected<cuda::DeviceInfo> device = cuda::openDevice();
    if (!device)
      return Error(dir + ": a GPU artifact (" + manifest->targetChip +
                   "); no GPU to run it here: " + device.error());
    if (device->computeCapability != manifest->targetComputeCapability)
      return Error(dir + ": compiled for " + manifest->targetChip + " (compute capability " +
                   std::to_string(manifest->targetComputeCapability) + "), the device is " +
                   device->name + " (compute capability " +
                   std::to_string(device->computeCapability) + ")");
  }

  std::unique_ptr<Artifact> a(new Artifact());
  a->dir = dir;
  a->info = manifest.take();
  const Manifest &m = a->info;
  std::string libraryPath = joinPath(dir, m.library);
  if (std::optional<Error> cpu = checkCPUFeatures(m, libraryPath))
    return std::move(*cpu);

  // A tensor-parallel artifact: this MPI rank's weights. A run with the
  // wrong process count loads rank 0's and is refused on every rank when
  // it joins (joinExpertParallel), after MPI started on all of them.
  std::string weightsName = m.weightsFile;
  const FileIntegrity *weightsIntegrity = &m.weightsIntegrity;
  if (int rank = parallelLauncherRank() % static_cast<int>(m.tensorParallelRanks);
      m.tensorParallelRanks > 1 && rank > 0) {
    weightsName = m.tensorParallelWeights[rank];
    weightsIntegrity = &m.tensorParallelIntegrity[rank];
  }
  std::string weightsPath = joinPath(dir, weightsName);
  Expected<std::unique_ptr<OwnedFd>> weightsFile =
      openArtifactFile(weightsPath, *weightsIntegrity, manifestPath);
  if (!weightsFile)
    return weightsFile.takeError();
  int weightsFd = (*weightsFile)->fd;
  Expected<void *> weights = m.weightReferences.empty()
                                 ? mapWeights(m, weightsFd, weightsPath,
                                              weightsIntegrity->sha256, manifestPath)
                                 : assembleWeights(m, weightsFd, weightsPath,
                                                   weightsIntegrity->sha256, manifestPath);
  if (!weights)
    return weights.takeError();
  a->weightsMapping = *weights;
  if (gpu) {
    Expected<void *> onDevice = cuda::uploadToDevice(*weights, m.weightsSize);
    if (!onDevice)
      return Error(weightsPath + ": " + onDevice.error());
    a->deviceWeights = *onDevice;
  }

  // model.so: hashed through an open descriptor, then loaded by path; the
  // path must still name the file that was hashed (a file swapped in between
  // is refused). Not /proc/self/fd/N: the dynamic loader identifies objects
  // by name first, and a reused descriptor number would name another
  // artifact's library. Every symbol is bound now so that a missing one
  // fails here and not in the middle of a run.
  Expected<std::unique_ptr<OwnedFd>> library =
      openArtifactFile(libraryPath, m.libraryIntegrity, manifestPath);
  if (!library)
    return library.takeError();
  Expected<std::string> libraryDigest = sha256OfFile((*library)->fd, libraryPath);
  if (!libraryDigest)
    return libraryDigest.takeError();
  if (*libraryDigest != m.libraryIntegrity.sha256)
    return digestMismatch(libraryPath, *libraryDigest, manifestPath);
  // The dynamic loader matches objects by name: a library of the same path
  // still loaded (another live Artifact of this directory) would be handed
  // back instead of the file just hashed (found by xfmr-artifact-fuzzer).
  if (void *old = ::dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    ::dlclose(old);
    return Error(libraryPath + ": a library of this path is already loaded in this process; "
                 "release the other artifact first");
  }
  ::dlerror();
  a->library = ::dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a->library) {
    const char *why = ::dlerror();
    return Error(libraryPath + ": cannot load the model library: " +
                 (why ? why : "unknown dlopen error"));
  }
  if (gpu) {
    a->kernelModule = cuda::lastLoadedModule();
    if (Status loaded = cuda::synchronize(); !loaded || !a->kernelModule)
      return Error(libraryPath + ": cannot load the kernels: " +
                   (loaded ? std::string("no module") : loaded.error()));
  }
  struct stat hashed, loaded;
  if (::fstat((*library)->fd, &hashed) != 0 || ::lstat(libraryPath.c_str(), &loaded) != 0 ||
      hashed.st_dev != loaded.st_dev || hashed.st_ino != loaded.st_ino)
    return Error(libraryPath + ": was replaced while it was being loaded");
  ::dlerror();
  void *abiSymbol = ::dlsym(a->library, kABIVersionSymbol);
  if (!abiSymbol)
    return Error(libraryPath + ": does not export " +
                 std::string(kABIVersionSymbol) +
                 " (not an xfmr model library?)");
  int32_t abi = *static_cast<const int32_t *>(abiSymbol);
  if (abi != m.abiVersion)
    return Error(libraryPath + ": " + kABIVersionSymbol + " is " +
                 std::to_string(abi) + ", but " + manifestPath +
                 " says abi_version is " + std::to_string(m.abiVersion));
  void *entrySymbol = ::dlsym(a->library, m.entry.c_str());
  if (!entrySymbol) {
    const char *why = ::dlerror();
    return Error(libraryPath + ": does not export the entry point " +
                 quoted(m.entry) + (why ? std::string(" (") + why + ")" : ""));
  }
  a->entry = reinterpret_cast<ModelEntryFn>(entrySymbol);
  return Expected<std::unique_ptr<Artifact>>(std::move(a));
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

Expected<std::vector<Tensor>>
Artifact::run(const std::map<std::string, Tensor> &named) const {
  for (const auto &given : named) {
    const std::string &name = given.first;
    bool known =
        std::any_of(info.inputs.begin(), info.inputs.end(),
                    [&](const TensorSpec &spec) { return spec.name == name; });
    if (!known)
      return Error(dir + ": unknown input " + quoted(name) +
                   "; the model's inputs are: " + listNames(info.inputs));
  }
  std::vector<const Tensor *> ordered;
  for (const TensorSpec &spec : info.inputs) {
    auto it = named.find(spec.name);
    if (it == named.end())
      return Error(dir + ": missing input " + quoted(spec.name) + " (" +
                   manifestDTypeName(spec.dtype) + " " + formatSpecShape(spec) +
                   ")");
    ordered.push_back(&it->second);
  }
  return run(ordered);
}

void *Artifact::librarySymbol(const char *name) const {
  return library ? ::dlsym(library, name) : nullptr;
}

std::optional<Artifact::MoEStats> Artifact::moeStats() const {
  using StatsFn = void (*)(uint64_t *);
  auto fn = reinterpret_cast<StatsFn>(librarySymbol("xfmr_uk_moe_stats"));
  if (!fn)
    return std::nullopt;
  uint64_t v[5];
  fn(v);
  return MoEStats{v[0], v[1], v[2], v[3], v[4]};
}

std::vector<std::vector<uint64_t>> Artifact::moeExpertTokens() const {
  using LayersFn = int64_t (*)();
  using TokensFn = int64_t (*)(int64_t, uint64_t *, int64_t);
  auto layers = reinterpret_cast<LayersFn>(librarySymbol("xfmr_uk_moe_load_layers"));
  auto tokens = reinterpret_cast<TokensFn>(librarySymbol("xfmr_uk_moe_expert_tokens"));
  std::vector<std::vector<uint64_t>> load;
  if (!layers || !tokens)
    return load;
  for (int64_t layer = 0, n = layers(); layer < n; ++layer) {
    std::vector<uint64_t> counts(static_cast<size_t>(std::max<int64_t>(tokens(layer, nullptr, 0), 0)));
    tokens(layer, counts.data(), static_cast<int64_t>(counts.size()));
    load.push_back(std::move(counts));
  }
  return load;
}

void Artifact::resetMoEStats() const {
  if (auto reset = reinterpret_cast<void (*)()>(librarySymbol("xfmr_uk_moe_reset_stats")))
    reset();
}

std::string Artifact::checkFailure(int64_t status) const {
  if (status > 0 && static_cast<uint64_t>(status) <= info.checks.size())
    return "run-time check failed: " + info.checks[static_cast<size_t>(status - 1)];
  return "run-time check failed: status " + std::to_string(status) +
         " names no check of the manifest's " + std::to_string(info.checks.size());
}

Expected<std::vector<Tensor>>
Artifact::run(const std::vector<const Tensor *> &inputs) const {
  auto fail = [&](const std::string &why) { return Error(dir + ": " + why); };

  // Check the inputs against the manifest.
  if (inputs.size() != info.inputs.size())
    return fail("expected " + std::to_string(info.inputs.size()) +
                " input(s) (" + listNames(info.inputs) + "), got " +
                std::to_string(inputs.size()));
  struct Binding {
    int64_t value;
    const std::string *from;
  };
  std::map<std::string, Binding> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorSpec &spec = info.inputs[i];
    std::string what = "input " + quoted(spec.name);
    const Tensor *t = inputs[i];
    if (!t)
      return fail(what + ": no tensor given (null)");
    if (t->dtype() != spec.dtype)
      return fail(what + ": expected dtype " + manifestDTypeName(spec.dtype) +
                  ", got " + manifestDTypeName(t->dtype()));
    if (t->rank() != spec.rank())
      return fail(what + ": expected rank " + std::to_string(spec.rank()) +
                  " " + formatSpecShape(spec) + ", got shape " +
                  formatBracketed(t->shape()));
    for (size_t d = 0; d < spec.rank(); ++d) {
      const Dim &dim = spec.shape[d];
      int64_t actual = t->shape()[d];
      std::string where = what + " dim " + std::to_string(d);
      if (dim.isStatic()) {
        if (actual != dim.value)
          return fail(where + ": expected " + std::to_string(dim.value) +
                      ", got " + std::to_string(actual) + " (shape " +
                      formatSpecShape(spec) + ")");
        continue;
      }
      if (dim.isAnonymous())
        continue;
      auto [it, inserted] =
          bindings.try_emplace(dim.symbol, Binding{actual, &spec.name});
      if (!inserted && it->second.value != actual)
        return fail(where + ": " + quoted(dim.symbol) + " is " +
                    std::to_string(it->second.value) + " from input " +
                    quoted(*it->second.from) + " but " +
                    std::to_string(actual) + " here");
    }
  }

  // Descriptors: args[0] the result area, args[1] the weights, then the
  // inputs.
  size_t resultWords = 0;
  for (const TensorSpec &spec : info.outputs)
    resultWords += 3 + 2 * spec.rank();
  std::vector<int64_t> results(std::max<size_t>(resultWords, 1), 0);
  const bool gpu = info.targetKind == "cuda";
  const void *weightsBase = gpu              ? static_cast<const void *>(deviceWeights)
                            : weightsMapping ? static_cast<const void *>(weightsMapping)
                                             : kEmptyBuffer;
  // GPU artifacts: kernels read the inputs, so they go to unified memory.
  std::vector<void *> unifiedInputs;
  struct FreeUnified {
    std::vector<void *> &pointers;
    ~FreeUnified() {
      for (void *p : pointers)
        cuda::freeDevice(p);
    }
  } freeUnified{unifiedInputs};
  int64_t weightsDesc[5] = {pointerWord(weightsBase), pointerWord(weightsBase),
                            0, static_cast<int64_t>(info.weightsSize), 1};
  std::vector<std::vector<int64_t>> inputDescs;
  inputDescs.reserve(inputs.size());
  std::vector<void *> args;
  args.reserve(2 + inputs.size());
  args.push_back(results.data());
  args.push_back(weightsDesc);
  for (const Tensor *t : inputs) {
    const void *data =
        t->numel() > 0 ? static_cast<const void *>(t->bytes()) : kEmptyBuffer;
    if (gpu) {
      Expected<void *> u = cuda::allocateUnified(t->byteSize());
      if (!u)
        return fail(u.error());
      if (t->byteSize() > 0)
        std::memcpy(*u, t->bytes(), t->byteSize());
      unifiedInputs.push_back(*u);
      data = *u;
    }
    inputDescs.push_back(contiguousDescriptor(data, t->shape()));
    args.push_back(inputDescs.back().data());
  }
  // The status buffer (ABI 2): the model sets status[0] to N + 1 when its
  // run-time check N fails.
  alignas(64) int64_t status[2] = {0, 0};
  int64_t statusDesc[5] = {pointerWord(status), pointerWord(status), 0, 2, 1};
  args.push_back(statusDesc);

  entry(args.data());
  std::optional<Error> deviceError;
  if (gpu) {
    if (Status synced = cuda::synchronize(); !synced) {
      deviceError = fail("on the GPU: " + synced.error());
    } else if (Expected<int64_t> check = cuda::takeKernelCheck(kernelModule); !check) {
      deviceError = fail("on the GPU: " + check.error());
    } else if (*check != 0) {
      size_t n = static_cast<size_t>(*check);
      deviceError = fail("run-time check failed (in a kernel): " +
                         (*check > 0 && n <= info.kernelChecks.size()
                              ? info.kernelChecks[n - 1]
                              : "number " + std::to_string(*check) + " of " +
                                    std::to_string(info.kernelChecks.size())));
    }
    // A step function updates its KV pools in place: the pools went to the
    // device as copies, so the updates come back (a whole pool per call
    // until the engine keeps its pools in device memory).
    if (!deviceError)
      for (size_t i = 0; i < inputs.size(); ++i)
        if (info.inputs[i].kvPool && inputs[i]->byteSize() > 0)
          std::memcpy(const_cast<void *>(static_cast<const void *>(inputs[i]->bytes())),
                      unifiedInputs[i], inputs[i]->byteSize());
  }

  // Read the outputs back. Every distinct allocation is freed exactly once
  // whatever happens; memory that is not a fresh allocation (the weights,
  // an input) is reported and left alone.
  std::vector<ForeignRange> foreign;
  foreign.push_back({reinterpret_cast<uintptr_t>(weightsBase),
                     reinterpret_cast<uintptr_t>(weightsBase) +
                         std::max<uint64_t>(info.weightsSize, 1),
                     "the weights"});
  foreign.push_back(
      {reinterpret_cast<uintptr_t>(kEmptyBuffer),
       reinterpret_cast<uintptr_t>(kEmptyBuffer) + sizeof(kEmptyBuffer),
       "the runtime's stand-in buffer for empty tensors"});
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->numel() > 0)
      foreign.push_back({reinterpret_cast<uintptr_t>(inputs[i]->bytes()),
                         reinterpret_cast<uintptr_t>(inputs[i]->bytes()) +
                             inputs[i]->byteSize(),
                         "input " + quoted(info.inputs[i].name)});

  std::vector<ReturnedMemRef> returned;
  std::vector<void *> toFree;
  std::optional<Error> firstError;
  size_t pos = 0;
  for (size_t k = 0; k < info.outputs.size(); ++k) {
    const TensorSpec &spec = info.outputs[k];
    returned.push_back(readDescriptor(results.data() + pos, spec.rank()));
    pos += 3 + 2 * spec.rank();
    uintptr_t p = returned.back().allocated;
    if (!p)
      continue;
    auto alias = std::find_if(
        foreign.begin(), foreign.end(),
        [&](const ForeignRange &r) { return p >= r.begin && p < r.end; });
    if (alias != foreign.end()) {
      returned.back().allocated = 0; // never read or free it
      if (!firstError)
        firstError = fail("output " + quoted(spec.name) +
                          ": the model returned memory inside " + alias->what +
                          " instead of a fresh allocation (ABI violation)");
      continue;
    }
    if (std::find(toFree.begin(), toFree.end(), reinterpret_cast<void *>(p)) ==
        toFree.end())
      toFree.push_back(reinterpret_cast<void *>(p));
  }
  struct FreeAll {
    std::vector<void *> &pointers;
    bool gpu;
    ~FreeAll() {
      for (void *p : pointers)
        gpu ? cuda::freeDevice(p) : std::free(p);
    }
  } freeAll{toFree, gpu};
  if (deviceError)
    return std::move(*deviceError);
  if (status[0] != 0)
    return fail(checkFailure(status[0]));
  if (firstError)
    return std::move(*firstError);

  std::vector<Tensor> outputs;
  outputs.reserve(info.outputs.size());
  for (size_t k = 0; k < info.outputs.size(); ++k) {
    const TensorSpec &spec = info.outputs[k];
    const ReturnedMemRef &m = returned[k];
    std::string what = "output " + quoted(spec.name);
    for (size_t d = 0; d < spec.rank(); ++d) {
      if (m.sizes[d] < 0)
        return fail(what + " dim " + std::to_string(d) +
                    ": the model returned a negative size " +
                    std::to_string(m.sizes[d]));
      if (spec.shape[d].isStatic() && m.sizes[d] != spec.shape[d].value)
        return fail(what + " dim " + std::to_string(d) +
                    ": the manifest says " +
                    std::to_string(spec.shape[d].value) +
                    ", the model returned " + std::to_string(m.sizes[d]) +
                    " (shape " + formatBracketed(m.sizes) + ")");
    }
    Expected<Tensor> t = Tensor::create(spec.dtype, m.sizes, spec.name);
    if (!t)
      return fail(what + ": " + t.error());
    if (t->numel() > 0) {
      Expected<const uint8_t *> origin = checkViewBounds(m, t->elementSize());
      if (!origin)
        return fail(what + " " + formatBracketed(m.sizes) + ": " +
                    origin.error());
      copyStrided(t->bytes(), *origin, m, t->elementSize());
    }
    outputs.push_back(t.take());
  }
  return Expected<std::vector<Tensor>>(std::move(outputs));
}
