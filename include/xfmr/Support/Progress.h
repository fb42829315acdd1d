//===- Progress.h - progress of long work inside passes ---------*- C++ -*-===//
//
// Part of xfmr. A pass doing long work (writing gigabytes of weights)
// reports each item to a sink the driver installs (xfmr-compile prints one
// line updated in place on a terminal, a line per tenth otherwise); without
// a sink, reporting does nothing.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SUPPORT_PROGRESS_H
#define XFMR_SUPPORT_PROGRESS_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>

namespace xfmr {

struct ProgressEvent {
  llvm::StringRef task; // "writing weights"
  llvm::StringRef item; // the weight just written
  int64_t done = 0, total = 0;
  int64_t bytes = 0, totalBytes = 0;
};

using ProgressSink = std::function<void(const ProgressEvent &)>;

inline ProgressSink &progressSink() {
  static ProgressSink sink;
  return sink;
}

inline void reportProgress(const ProgressEvent &event) {
  if (progressSink())
    progressSink()(event);
}

} // namespace xfmr

#endif // XFMR_SUPPORT_PROGRESS_H
