//===- xfmr-run.cpp - run a compiled artifact -----------------------------===//
//
// Part of xfmr.
//
//   xfmr-run model.xfa --input input_ids=ids.npy [--output-dir out]
//
// Loads an artifact written by xfmr-compile (docs/artifact.md), reads each
// input from a .npy or ONNX TensorProto .pb file, runs the model and writes
// every output as .npy. Plain C++ over the runtime library: no LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/CUDA.h"
#include "xfmr/runtime/ExpertParallel.h"
#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/Tensor.h"
#include "xfmr/runtime/TensorIO.h"
#include "xfmr/runtime/Text.h"

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>

using namespace xfmr::rt;

double peakResidentMiB();

namespace {

const char *const kUsageLine =
    "usage: xfmr-run ARTIFACT --input NAME=FILE [--input NAME=FILE ...]\n"
    "                [--output-dir DIR] [--repeat N] [--quiet]\n"
    "       xfmr-run generate ARTIFACT --prompt-ids 1,2,3 --max-new-tokens N\n"
    "       xfmr-run generate ARTIFACT --prompt TEXT | --chat MESSAGE\n"
    "                (generation; 'xfmr-run generate --help')\n"
    "       xfmr-run perplexity ARTIFACT --tokens FILE.npy [--context N] [--json]\n"
    "                (causal LM perplexity; 'xfmr-run perplexity --help')\n";

const char *const kHelp =
    "\n"
    "Runs a model compiled by xfmr-compile. ARTIFACT is the directory it\n"
    "wrote (manifest.json, model.so, weights.bin; see docs/artifact.md).\n"
    "\n"
    "options:\n"
    "  --input NAME=FILE  the model input NAME, read from FILE: a NumPy .npy\n"
    "                     file or an ONNX TensorProto .pb file. Give every\n"
    "                     input of the manifest exactly once; dtype and shape\n"
    "                     are checked against it.\n"
    "  --output-dir DIR   write each output to DIR/NAME.npy (characters of\n"
    "                     NAME outside [A-Za-z0-9._-] become '_'); DIR is\n"
    "                     created if missing. Without it nothing is written.\n"
    "  --repeat N         run the model N times (default 1) and report each\n"
    "                     run's time; the outputs of the last run are kept.\n"
    "  --quiet            print nothing but errors.\n"
    "  --help             print this help.\n"
    "\n"
    "Timings, the peak RSS and each output's dtype, shape and file go to\n"
    "stderr. Errors print one line and exit with status 1; a bad command line\n"
    "exits with status 2.\n";

struct Options {
  std::string artifact;
  /// NAME=FILE pairs in command line order.
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir;
  int64_t repeat = 1;
  bool quiet = false;
};

/// A bad command line: one line pointing at --help, status 2.
int usageError(const std::string &message) {
  std::fprintf(stderr,
               "xfmr-run: error: %s (run 'xfmr-run --help' for usage)\n",
               message.c_str());
  return 2;
}

/// A failure while doing the work: one line, status 1.
int fail(const std::string &message) {
  std::fprintf(stderr, "xfmr-run: error: %s\n", message.c_str());
  return 1;
}

/// Parses the command line into `opts`; returns -1 to go on, or the exit
/// status (0 after --help).
int parseCommandLine(int argc, char **argv, Options &opts) {
  bool sawArtifact = false, optionsEnded = false;
  std::set<std::string> inputNames;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (optionsEnded || arg.empty() || arg[0] != '-' || arg == "-") {
      if (sawArtifact)
        return usageError("more than one artifact given ('" + opts.artifact +
                          "' and '" + arg + "')");
      opts.artifact = arg;
      sawArtifact = true;
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      std::printf("%s%s", kUsageLine, kHelp);
      return 0;
    }
    if (arg == "--quiet" || arg == "-q") {
      opts.quiet = true;
      continue;
    }
    // Options with a value: "--opt VALUE" or "--opt=VALUE".
    std::string name = arg, value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    if (name == "--quiet" || name == "--help")
      return usageError("option '" + name + "' takes no value");
    if (name != "--input" && name != "--output-dir" && name != "--repeat")
      return usageError("unknown option '" + name + "'");
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError("option '" + name + "' needs a value");
      value = argv[++i];
    }
    if (name == "--input") {
      size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
        return usageError("--input expects NAME=FILE, got '" + value + "'");
      std::string inputName = value.substr(0, eq);
      if (!inputNames.insert(inputName).second)
        return usageError("input '" + inputName + "' given twice");
      opts.inputs.emplace_back(inputName, value.substr(eq + 1));
    } else if (name == "--output-dir") {
      if (value.empty())
        return usageError("--output-dir needs a directory");
      opts.outputDir = value;
    } else {
      int64_t n = 0;
      if (!parseInt(value, 1, 1000000000, n))
        return usageError("--repeat expects a count from 1 to 1000000000, "
                          "got '" +
                          value + "'");
      opts.repeat = n;
    }
  }
  if (!sawArtifact)
    return usageError("no artifact given");
  return -1;
}

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

/// The file name an output is written under: NAME with every character
/// outside [A-Za-z0-9._-] replaced by '_'.
std::string fileNameOf(const std::string &outputName) {
  std::string s = outputName;
  for (char &c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok)
      c = '_';
  }
  return s;
}

std::string formatDims(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Creates `dir` if it does not exist (one level).
Status makeDirectory(const std::string &dir) {
  if (::mkdir(dir.c_str(), 0777) == 0)
    return {};
  int err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return {};
    return Error(dir + ": cannot create the output directory: a file of "
                       "that name exists");
  }
  return Error(dir +
               ": cannot create the output directory: " + std::strerror(err));
}

/// Prints a progress line to stderr unless --quiet.
__attribute__((format(printf, 2, 3))) void note(const Options &opts,
                                                const char *format, ...) {
  if (opts.quiet)
    return;
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}

int run(const Options &given) {
  Options opts = given;
  auto loadStart = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<Artifact>> loaded = Artifact::load(opts.artifact);
  if (!loaded)
    return fail(loaded.error());
  const Artifact &artifact = **loaded;
  const Manifest &manifest = artifact.manifest();
  // Under mpirun (--expert-parallel artifacts): every rank runs, rank 0
  // reports and writes the outputs.
  ExpertParallelScope scope;
  Expected<ExpertParallelRank> rank = joinExpertParallel(artifact);
  if (!rank)
    return fail(rank.error());
  if (!rank->isRoot()) {
    opts.quiet = true;
    opts.outputDir.clear();
  }
  note(opts, "loaded %s in %.2f ms (weights %llu bytes mapped)\n",
       opts.artifact.c_str(), millisecondsSince(loadStart),
       static_cast<unsigned long long>(artifact.weightsBytes()));

  // Where each output goes, checked before the (maybe long) runs.
  std::vector<std::string> outputPaths(manifest.outputs.size());
  if (!opts.outputDir.empty()) {
    std::string dir = opts.outputDir;
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    std::map<std::string, std::string> taken; // file name -> output name
    for (size_t k = 0; k < manifest.outputs.size(); ++k) {
      const std::string &name = manifest.outputs[k].name;
      std::string file = fileNameOf(name);
      if (file == "." || file == "..")
        return fail(opts.artifact + ": output '" + name +
                    "' cannot be used as a file name");
      auto [it, inserted] = taken.emplace(file, name);
      if (!inserted)
        return fail(opts.artifact + ": outputs '" + it->second + "' and '" +
                    name + "' would both be written to " + file + ".npy");
      outputPaths[k] = (dir == "/" ? "" : dir) + "/" + file + ".npy";
    }
    if (Status s = makeDirectory(dir); !s)
      return fail(s.error());
  }

  std::map<std::string, Tensor> inputs;
  for (const auto &[name, file] : opts.inputs) {
    Expected<Tensor> t = readTensor(file);
    if (!t)
      return fail(t.error());
    t->setName(name);
    inputs.emplace(name, t.take());
  }

  std::vector<Tensor> outputs;
  for (int64_t r = 0; r < opts.repeat; ++r) {
    auto runStart = std::chrono::steady_clock::now();
    Expected<std::vector<Tensor>> result = artifact.run(inputs);
    double ms = millisecondsSince(runStart);
    if (!result)
      return fail(result.error());
    outputs = result.take();
    if (artifact.manifest().targetKind == "cuda")
      note(opts, "run: %.2f ms (kernels %.3f ms)\n", ms, cuda::takeKernelMilliseconds());
    else
      note(opts, "run: %.2f ms\n", ms);
  }

  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor &t = outputs[k];
    std::string where;
    if (!outputPaths[k].empty()) {
      if (Status s = writeNpy(outputPaths[k], t); !s)
        return fail(s.error());
      where = " -> " + outputPaths[k];
    }
    note(opts, "output %s: %s %s%s\n", t.name().c_str(),
         manifestDTypeName(t.dtype()), formatDims(t.shape()).c_str(),
         where.c_str());
  }

  if (double mib = peakResidentMiB(); mib >= 0)
    note(opts, "peak RSS: %.1f MiB\n", mib);
  return 0;
}

} // namespace

/// This process's peak resident set size in MiB (-1 if unknown): VmHWM of
/// /proc/self/status, which belongs to the process image; getrusage's
/// ru_maxrss would include the parent's RSS at fork time (a large Python
/// test driver, say).
double peakResidentMiB() {
  if (FILE *f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1)
        break;
    std::fclose(f);
    if (kib >= 0)
      return static_cast<double>(kib) / 1024;
  }
  struct rusage usage;
  if (::getrusage(RUSAGE_SELF, &usage) == 0) // ru_maxrss is in KiB on Linux
    return static_cast<double>(usage.ru_maxrss) / 1024;
  return -1;
}

int generateMain(int argc, char **argv);   // Generate.cpp
int perplexityMain(int argc, char **argv); // Perplexity.cpp

int main(int argc, char **argv) {
  // A model's failed run-time check prints its message to stdout and
  // aborts: unbuffered, so the message is not lost with the process.
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc > 1 && std::string(argv[1]) == "generate")
    return generateMain(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "perplexity")
    return perplexityMain(argc, argv);
  Options opts;
  if (int status = parseCommandLine(argc, argv, opts); status >= 0)
    return status;
  return run(opts);
}
