//===- Artifact.h - a loaded compiled model ---------------------*- C++ -*-===//
//
// Part of xfmr.
//
// An Artifact is a compiled model directory (docs/artifact.md) made ready to
// run: its manifest parsed, weights.bin memory-mapped read-only (no copy),
// and model.so dlopen'ed with its entry point resolved. run() checks the
// inputs against the manifest, calls the entry point through the memref
// descriptor ABI and copies every output into a fresh contiguous Tensor.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_ARTIFACT_H
#define XFMR_RUNTIME_ARTIFACT_H

#include "xfmr/runtime/Error.h"
#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/Tensor.h"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::rt {

/// This process's rank and the process count as an MPI launcher's
/// environment gives them (OpenMPI, PMI, PMIx), before MPI starts; 0 and 0
/// when not started by one. A tensor-parallel artifact loads the weights of
/// its rank (docs/parallelism.md).
int parallelLauncherRank();
int parallelLauncherSize();

/// The entry point of a model library (abi_version 1).
using ModelEntryFn = void (*)(void **args);

class Artifact {
public:
  /// Loads the artifact directory `dir`. Fails, naming the file, on a
  /// missing or non-directory `dir`, a bad manifest (see parseManifest), a
  /// target kind other than "cpu", a weights file whose size is not the
  /// manifest's, a library dlopen rejects (with dlerror's message), a
  /// missing entry or xfmr_abi_version symbol, or an xfmr_abi_version that
  /// differs from the manifest's abi_version. Before it maps or dlopens
  /// anything it checks that the host has every CPU feature target.requires
  /// names, that neither file is a symbolic link and that each file's size
  /// and SHA-256 are the manifest's.
  static Expected<std::unique_ptr<Artifact>> load(const std::string &dir);

  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  const Manifest &manifest() const { return info; }
  /// The directory it was loaded from, as given to load() less trailing
  /// slashes; it prefixes the errors of run().
  const std::string &directory() const { return dir; }
  /// Bytes of weights.bin mapped (the manifest's weights.size).
  uint64_t weightsBytes() const { return info.weightsSize; }

  /// Runs the model on `inputs`, one per manifest input in manifest order,
  /// and returns the outputs in manifest order, each named after its spec.
  /// Before calling the model it checks the input count, each dtype and
  /// rank, static dims and that every symbolic dim binds to one value
  /// across all inputs; after, that every output's sizes are non-negative,
  /// agree with the manifest's static dims and address memory inside the
  /// output's allocation. A run-time check of the model that fails (a token
  /// id outside the vocabulary, a slot outside the KV pool...) fails the
  /// call with the check's message. Every output allocation is freed, on
  /// failure too.
  /// Thread-safe: the artifact holds no mutable state, and the model code
  /// is assumed reentrant (the ABI gives it no state of its own).
  Expected<std::vector<Tensor>>
  run(const std::vector<const Tensor *> &inputs) const;
  /// The same for a braced list, run({&ids, &mask}), which would otherwise
  /// be ambiguous with the map overload (a two-pointer list also matches
  /// map's iterator-range constructor).
  Expected<std::vector<Tensor>>
  run(std::initializer_list<const Tensor *> inputs) const {
    return run(std::vector<const Tensor *>(inputs));
  }
  /// As above with inputs by name: every manifest input exactly once, no
  /// unknown names.
  Expected<std::vector<Tensor>>
  run(const std::map<std::string, Tensor> &named) const;

  /// The mixture-of-experts counters of the model library
  /// (runtime/ukernels/MoE.h, over every call in the process): calls,
  /// tokens, token-expert assignments, expert weight bytes read, and the
  /// bytes the same calls would have read over all experts. Nothing when
  /// the model has no xfmr.moe.
  struct MoEStats {
    uint64_t calls = 0, tokens = 0, assignments = 0, expertBytesRead = 0, expertBytesDense = 0;
  };
  std::optional<MoEStats> moeStats() const;
  /// Load statistics: per MoE layer (in the order the layers first ran),
  /// the tokens routed to each expert since the last reset. Empty when the
  /// model has no xfmr.moe.
  std::vector<std::vector<uint64_t>> moeExpertTokens() const;
  /// Zeroes the MoE counters and load statistics.
  void resetMoEStats() const;
  /// A symbol of the model library (a micro-kernel's entry the runtime
  /// configures), or null.
  void *librarySymbol(const char *name) const;

private:
  Artifact() = default;
  /// The message for a failed call's status word.
  std::string checkFailure(int64_t status) const;

  std::string dir;
  Manifest info;
  /// The mapping of weights.bin; null when it is empty.
  void *weightsMapping = nullptr;
  /// GPU artifacts: the weights in device memory (the mapping is released).
  void *deviceWeights = nullptr;
  /// GPU artifacts: the kernels' module (model.so loaded it).
  void *kernelModule = nullptr;
  void *library = nullptr;
  ModelEntryFn entry = nullptr;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_ARTIFACT_H
