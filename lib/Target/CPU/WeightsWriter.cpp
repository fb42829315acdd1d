//===- WeightsWriter.cpp - weights.bin written beside code generation -----===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/WeightsWriter.h"

#include "Contraction.h"
#include "xfmr/Support/Progress.h"
#include "xfmr/runtime/Digest.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace xfmr::cpu {
namespace {

/// The manifest entry of a referenced weight; its file joins `sources`
/// the first time.
rt::WeightReference reference(const WeightWrite &w, std::vector<rt::WeightSource> &sources) {
  auto same = [&](const rt::WeightSource &s) { return s.path == w.source->path; };
  auto it = std::find_if(sources.begin(), sources.end(), same);
  if (it == sources.end()) {
    sources.push_back({w.source->path, w.source->size, w.source->mtimeNs});
    it = std::prev(sources.end());
  }
  rt::WeightReference r;
  r.source = static_cast<uint64_t>(it - sources.begin());
  r.offset = w.sourceOffset;
  r.bytes = w.data.size();
  r.at = static_cast<uint64_t>(w.offset);
  if (w.k > 0) {
    r.panelK = w.k;
    r.panelN = w.n;
    r.elemBytes = w.elemBytes;
  }
  return r;
}

struct Writer {
  std::thread thread;
  std::atomic<bool> cancelled{false};
  bool started = false;
  std::optional<WrittenWeights> result;
  std::string error;

  ~Writer() {
    // Leaving early (a failed compile): stop between weights.
    cancelled = true;
    if (thread.joinable())
      thread.join();
  }

  void run(std::vector<WeightWrite> plan, const std::string &path) {
    std::string tmp = path + ".tmp";
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec) {
      error = "cannot write '" + tmp + "': " + ec.message();
      return;
    }
    rt::Sha256 hash;
    int64_t position = 0, stored = 0, written = 0, total = 0;
    for (const WeightWrite &w : plan)
      total += static_cast<int64_t>(w.data.size());
    auto emit = [&](llvm::ArrayRef<char> bytes) {
      os.write(bytes.data(), bytes.size());
      hash.update(bytes.data(), bytes.size());
      position += static_cast<int64_t>(bytes.size());
      stored += static_cast<int64_t>(bytes.size());
    };
    static const char zeros[64] = {};
    WrittenWeights out;
    for (size_t i = 0; i < plan.size() && !cancelled; ++i) {
      WeightWrite &w = plan[i];
      while (position < w.offset)
        emit(llvm::ArrayRef<char>(zeros, std::min<int64_t>(64, w.offset - position)));
      if (w.source) {
        out.references.push_back(reference(w, out.sources));
        position += static_cast<int64_t>(w.data.size());
      } else if (w.k > 0) {
        forEachPanelChunk(w.data, w.k, w.n, w.elemBytes, emit);
      } else {
        emit(w.data);
      }
      written += static_cast<int64_t>(w.data.size());
      if (w.release)
        w.release->setBlob(mlir::AsmResourceBlob());
      reportProgress({"writing weights", w.name, static_cast<int64_t>(i) + 1,
                      static_cast<int64_t>(plan.size()), written, total});
    }
    os.close();
    if (cancelled) {
      (void)llvm::sys::fs::remove(tmp);
      error = "cancelled";
      return;
    }
    if (os.has_error()) {
      error = "cannot write '" + tmp + "': " + os.error().message();
      os.clear_error();
      return;
    }
    if (std::error_code rename = llvm::sys::fs::rename(tmp, path)) {
      error = "cannot write '" + path + "': " + rename.message();
      return;
    }
    out.size = stored;
    out.sha256 = hash.finish();
    result = std::move(out);
  }
};

Writer &writer() {
  static Writer w;
  return w;
}

void join() {
  if (writer().thread.joinable())
    writer().thread.join();
}

} // namespace

void startWeightsWrite(std::vector<WeightWrite> plan, std::string path, bool background) {
  join();
  Writer &w = writer();
  w.started = true;
  w.cancelled = false;
  w.result.reset();
  w.error.clear();
  if (background)
    w.thread = std::thread([plan = std::move(plan), path = std::move(path)]() mutable {
      writer().run(std::move(plan), path);
    });
  else
    w.run(std::move(plan), path);
}

void cancelWeightsWrite() {
  writer().cancelled = true;
  join();
  writer().started = false;
}

llvm::Expected<std::optional<WrittenWeights>> waitForWeights() {
  join();
  Writer &w = writer();
  if (!w.started)
    return std::optional<WrittenWeights>();
  w.started = false;
  if (!w.error.empty())
    return llvm::createStringError(w.error);
  return w.result;
}

} // namespace xfmr::cpu
