//===- WeightsWriter.h - weights.bin written beside code generation -*- C++ -*-===//
//
// Part of xfmr. xfmr-externalize-weights decides where every weight goes
// and hands the writing to this writer: on a thread of its own when asked
// (xfmr-compile), so that gigabytes of weights are written and hashed while
// LLVM generates code. The writer releases each weight's blob once written.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TARGET_CPU_WEIGHTSWRITER_H
#define XFMR_TARGET_CPU_WEIGHTSWRITER_H

#include "xfmr/Support/MappedSources.h"
#include "xfmr/runtime/Manifest.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::cpu {

/// One weight: its bytes at `offset` of the file, as panels Bp [n / 16, k,
/// 16] of the row-major [k, n] when `k` is set.
struct WeightWrite {
  llvm::ArrayRef<char> data; // the blob's bytes, or `owned`
  std::vector<char> owned;
  int64_t offset = 0;
  int64_t k = 0, n = 0, elemBytes = 0;
  std::string name;
  /// Freed once this weight is written (the last one that reads it).
  mlir::DialectResourceBlobManager::BlobEntry *release = nullptr;
  /// Not written but referenced: `data` lies at `sourceOffset` of this file.
  std::optional<MappedSource> source;
  uint64_t sourceOffset = 0;
};

/// What the writer wrote: weights.bin's size and SHA-256, and the
/// weights it left in the model's files (manifest weights.sources and
/// weights.references).
struct WrittenWeights {
  int64_t size = 0;
  std::string sha256;
  std::vector<rt::WeightSource> sources;
  std::vector<rt::WeightReference> references;
};

/// Writes `plan` (ascending offsets) to `path` through `path`.tmp, hashing
/// what it writes, and lists the referenced weights instead of writing
/// them (the file then holds the bytes between them); on a thread when
/// `background`. A write still running
/// from before is waited for first.
void startWeightsWrite(std::vector<WeightWrite> plan, std::string path, bool background);

/// Waits for the last write started: its size and SHA-256, nothing when
/// none was started, or the error that stopped it.
llvm::Expected<std::optional<WrittenWeights>> waitForWeights();

/// Stops a running write between two weights and waits for it (a compile
/// that failed after the weights were planned).
void cancelWeightsWrite();

} // namespace xfmr::cpu

#endif // XFMR_TARGET_CPU_WEIGHTSWRITER_H
