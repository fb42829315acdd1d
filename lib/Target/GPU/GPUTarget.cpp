//===- GPUTarget.cpp - NVPTX targets, ptxas and kernel reports ------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/GPUTarget.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace xfmr::gpu {

llvm::ArrayRef<GPUTarget> knownGPUTargets() {
  // Shared memory: the opt-in maximum per block (CUDA programming guide,
  // compute capabilities table); bandwidth: A100-SXM 80GB and H200.
  static const GPUTarget targets[] = {
      {"sm_80", "+ptx70", 80, 163 * 1024, /*mmaSync=*/true, /*wgmma=*/false, /*tma=*/false,
       2.039e12},
      {"sm_90a", "+ptx80", 90, 227 * 1024, /*mmaSync=*/true, /*wgmma=*/true, /*tma=*/true,
       4.8e12},
  };
  return targets;
}

const GPUTarget *lookupGPUTarget(llvm::StringRef chip) {
  for (const GPUTarget &t : knownGPUTargets())
    if (t.chip == chip)
      return &t;
  return nullptr;
}

std::string knownGPUTargetNames() {
  std::string names;
  for (const GPUTarget &t : knownGPUTargets())
    names += (names.empty() ? "" : ", ") + t.chip.str();
  return names;
}

static bool hasPtxas(llvm::StringRef dir) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, "bin", "ptxas");
  return llvm::sys::fs::can_execute(p);
}

std::optional<std::string> findCUDAToolkit() {
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *v = std::getenv(var); v && *v && hasPtxas(v))
      return std::string(v);
  if (llvm::ErrorOr<std::string> ptxas = llvm::sys::findProgramByName("ptxas")) {
    llvm::SmallString<256> dir(*ptxas);
    llvm::sys::path::remove_filename(dir); // bin/
    llvm::sys::path::remove_filename(dir);
    if (hasPtxas(dir))
      return dir.str().str();
  }
  if (hasPtxas("/usr/local/cuda"))
    return std::string("/usr/local/cuda");
  return std::nullopt;
}

std::vector<llvm::StringRef> usedInstructions(const KernelReport &k) {
  std::vector<llvm::StringRef> uses;
  for (auto [used, name] : {std::pair{k.mmaSync, "mma.sync"}, {k.wgmma, "wgmma"},
                            {k.cpAsync, "cp.async"}, {k.tma, "tma"}})
    if (used)
      uses.push_back(name);
  return uses;
}

std::vector<KernelReport> scanPTX(llvm::StringRef ptx) {
  std::vector<KernelReport> kernels;
  size_t at = 0;
  while ((at = ptx.find(".entry ", at)) != llvm::StringRef::npos) {
    size_t nameBegin = at + 7;
    size_t nameEnd = ptx.find_first_of("( \n", nameBegin);
    size_t next = ptx.find(".entry ", nameEnd);
    llvm::StringRef body = ptx.slice(nameEnd, next);
    KernelReport k;
    k.name = ptx.slice(nameBegin, nameEnd).str();
    k.mmaSync = body.contains("mma.sync");
    k.wgmma = body.contains("wgmma.mma_async");
    k.tma = body.contains("cp.async.bulk.tensor");
    k.cpAsync = k.tma || body.contains("cp.async.");
    kernels.push_back(std::move(k));
    at = nameEnd;
  }
  return kernels;
}

/// The integer right before `word` in `line` ("12 bytes spill stores").
static int64_t numberBefore(llvm::StringRef line, llvm::StringRef word) {
  size_t pos = line.find(word);
  if (pos == llvm::StringRef::npos)
    return 0;
  llvm::StringRef head = line.take_front(pos).rtrim();
  size_t start = head.find_last_not_of("0123456789");
  int64_t v = 0;
  (void)head.drop_front(start == llvm::StringRef::npos ? 0 : start + 1).getAsInteger(10, v);
  return v;
}

void parsePtxasReport(llvm::StringRef log, std::vector<KernelReport> &kernels) {
  KernelReport *current = nullptr;
  auto select = [&](llvm::StringRef name) {
    auto it = llvm::find_if(kernels, [&](const KernelReport &k) { return k.name == name; });
    if (it == kernels.end()) {
      kernels.push_back({});
      kernels.back().name = name.str();
      current = &kernels.back();
    } else {
      current = &*it;
    }
  };
  llvm::SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    for (llvm::StringRef prefix : {"Compiling entry function '", "Function properties for "}) {
      size_t pos = line.find(prefix);
      if (pos == llvm::StringRef::npos)
        continue;
      llvm::StringRef name = line.drop_front(pos + prefix.size());
      name = name.take_until([](char c) { return c == '\'' || c == ' ' || c == ':'; });
      select(name.trim());
    }
    if (!current)
      continue;
    if (line.contains("stack frame")) {
      current->stackBytes = numberBefore(line, "bytes stack frame");
      current->spillStores = numberBefore(line, "bytes spill stores");
      current->spillLoads = numberBefore(line, "bytes spill loads");
    }
    if (line.contains("Used ") && line.contains("registers")) {
      current->registers = numberBefore(line, "registers");
      current->sharedBytes = numberBefore(line, "bytes smem");
    }
  }
}

bool assemblePTX(llvm::StringRef toolkit, const GPUTarget &target, llvm::StringRef ptx,
                 llvm::StringRef cubinPath, std::string &log, std::string &error) {
  llvm::SmallString<256> ptxas(toolkit);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  llvm::SmallString<128> in, err;
  if (auto ec = llvm::sys::fs::createTemporaryFile("xfmr-kernels", "ptx", in)) {
    error = "cannot create a temporary file: " + ec.message();
    return false;
  }
  (void)llvm::sys::fs::createTemporaryFile("xfmr-ptxas", "log", err);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in, ec);
    os << ptx;
  }
  std::string arch = ("-arch=" + target.chip).str();
  llvm::SmallVector<llvm::StringRef> args = {ptxas, arch, "-v", "-O3", in, "-o", cubinPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, err.str(), err.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, /*timeout=*/600, 0,
                                     &execError);
  if (auto buffer = llvm::MemoryBuffer::getFile(err))
    log = (*buffer)->getBuffer().str();
  (void)llvm::sys::fs::remove(in);
  (void)llvm::sys::fs::remove(err);
  if (rc != 0) {
    error = (ptxas + " -arch=" + target.chip + " failed" +
             (execError.empty() ? "" : ": " + execError) + "\n" + log)
                .str();
    return false;
  }
  return true;
}

} // namespace xfmr::gpu
