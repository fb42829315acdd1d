//===- xfmr-compile.cpp - ONNX model to an ahead-of-time artifact ---------===//
//
// Part of xfmr.
//
//   xfmr-compile model.onnx --target=cpu -o model.xfa
//   xfmr-compile model.onnx --emit=onnx|xfmr|linalg|llvm [-o out.mlir]
//
// The artifact layout and ABI are described in docs/artifact.md.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"
#include "dialects/xfmr/IR/XfmrOps.h"
#include "Calibrate.h"
#include "TokenizerFiles.h"

#include "xfmr/Conversion/Calibration.h"
#include "xfmr/Conversion/Passes.h"
#include "xfmr/Importer/ONNXImporter.h"
#include "xfmr/Importer/ResourcePrinting.h"
#include "xfmr/Pipelines/DecodeBytes.h"
#include "xfmr/Pipelines/Pipelines.h"
#include "xfmr/Support/Progress.h"
#include "xfmr/Target/CPU/WeightsWriter.h"
#include "xfmr/Target/CPU/ObjectEmitter.h"
#include "xfmr/Target/CPU/Passes.h"
#include "xfmr/Target/GPU/GPUTarget.h"
#include "xfmr/Target/GPU/Passes.h"
#include "xfmr/runtime/Digest.h"
#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/PagedKV.h"
#include "xfmr/runtime/TensorIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/Timer.h"

#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cl = llvm::cl;
using namespace mlir;

namespace {
cl::OptionCategory category("xfmr-compile options");
cl::opt<std::string> inputFilename(
    cl::Positional,
    cl::desc("<model.onnx | model folder (onnxruntime-genai: genai_config.json names the "
             "decoder's file, else model.onnx)>"),
    cl::Required, cl::cat(category));
cl::opt<std::string> outputFilename(
    "o", cl::desc("Artifact directory to write (with --emit: the IR file, "
                  "default stdout)"),
    cl::value_desc("path"), cl::cat(category));
cl::opt<std::string> target("target",
                            cl::desc("Target: cpu (the host), or a GPU: sm_90a (Hopper), sm_80 (Ampere): "
                                     "NVPTX kernels in the artifact (docs/gpu-backend.md)"),
                            cl::init("cpu"), cl::cat(category));
cl::opt<bool> gpuEmulate(
    "gpu-emulate",
    cl::desc("With a GPU --target: write a CPU artifact that runs the GPU program's grid as loops "
             "over blocks and threads (the kernels' index arithmetic and guards, checked "
             "against onnxruntime without a GPU)"),
    cl::init(false), cl::cat(category));
cl::opt<std::string> cpu("cpu",
                         cl::desc("CPU to generate code for: native (default), "
                                  "x86-64, x86-64-v3 (AVX2), x86-64-v4 (AVX-512), "
                                  "skylake-avx512, znver4... The artifact records the "
                                  "features the code may use; the loader refuses a CPU "
                                  "without them. Use a named level for portable builds"),
                         cl::init("native"), cl::cat(category));
cl::opt<std::string>
    emit("emit",
         cl::desc("Stop at a stage and print its IR: onnx (imported, shapes "
                  "simplified), xfmr (after raising), linalg (lowered, on "
                  "tensors), llvm (LLVM dialect)"),
         cl::value_desc("stage"), cl::cat(category));
cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level (0-3, default 2)"),
                           cl::init(2), cl::Prefix, cl::cat(category));
cl::list<std::string> bindInputs(
    "bind-input",
    cl::desc("Freeze graph input NAME to the tensor in FILE (.npy or .pb): it "
             "becomes a constant and leaves the artifact's inputs"),
    cl::value_desc("NAME=FILE"), cl::cat(category));
cl::opt<int64_t> minWeightBytes(
    "min-weight-bytes",
    cl::desc("Constants of at least this many bytes go to weights.bin"),
    cl::init(256), cl::cat(category));
cl::opt<int64_t> blasMinRows(
    "blas-min-rows",
    cl::desc("f32 matrix products with at least this many rows call OpenBLAS "
             "sgemm at run time (faster prefill; results then depend on the "
             "batch, see docs/cpu-backend.md); 0 (default): never"),
    cl::init(0), cl::cat(category));
cl::opt<bool> parallel(
    "parallel",
    cl::desc("Split matrix products across the cores (OpenMP: the artifact links "
             "libomp; OMP_NUM_THREADS caps the threads at run time)"),
    cl::init(true), cl::cat(category));
cl::opt<bool> outlineLayers(
    "outline-layers",
    cl::desc("Compile structurally equal decoder layers once, as calls of one function "
             "(--outline-layers=false: every layer inline)"),
    cl::init(true), cl::cat(category));
cl::opt<std::string> weightsMode(
    "weights",
    cl::desc("embed (default): weights.bin holds every weight, the artifact stands alone; "
             "reference: weights in the model's external data stay there, and the loader "
             "reads (and packs) them from those files, which must then stay in place, "
             "unchanged (size and modification time are checked)"),
    cl::value_desc("embed|reference"), cl::init("embed"), cl::cat(category));
cl::opt<bool> raise("raise",
                    cl::desc("Recover attention, norms, RoPE, MLPs and embeddings as "
                             "xfmr ops (--raise=false keeps the plain ONNX lowering)"),
                    cl::init(true), cl::cat(category));
cl::opt<int64_t> expertParallel(
    "expert-parallel",
    cl::desc("Partition every mixture-of-experts layer's experts over N MPI ranks (rank r owns "
             "experts [r E / N, (r + 1) E / N)); the artifact then runs as `mpirun -np N "
             "xfmr-run ...` (docs/moe.md). N must divide the experts. Default 1"),
    cl::value_desc("N"), cl::init(1), cl::cat(category));
cl::opt<int64_t> tensorParallel(
    "tensor-parallel",
    cl::desc("Split every attention (by heads), MLP (by intermediate columns), embedding and "
             "LM head (by vocabulary) over N MPI ranks, Megatron-style, with an all-reduce or "
             "all-gather after each: rank r's weights go to its own weights file; the artifact "
             "then runs as `mpirun -np N xfmr-run|xfmr-bench|xfmr-serve ...` "
             "(docs/parallelism.md). N must divide the query heads and MLP width, and divide or "
             "be a multiple of the KV heads. Default 1"),
    cl::value_desc("N"), cl::init(1), cl::cat(category));
cl::opt<int64_t> pipelineParallel(
    "pipeline-parallel",
    cl::desc("Split the layers into M pipeline stages (stage s runs layers [s L / M, (s + 1) L "
             "/ M) and holds only their weights and KV pools; the residual stream goes from "
             "stage to stage over MPI): the artifact holds stage 0, stages 1.. in its stage<s> "
             "subdirectories, and runs as `mpirun -np M*N ...` with --tensor-parallel=N or "
             "--expert-parallel=N per stage (docs/parallelism.md). Needs --kv-cache=paged; M "
             "must divide the layers. "
             "Default 1"),
    cl::value_desc("M"), cl::init(1), cl::cat(category));
/// The experts per layer that --expert-parallel partitions (set after raising).
int64_t partitionedExperts = 0;
cl::list<std::string> raiseSkip(
    "raise-skip",
    cl::desc("Ops raising does not form (comma-separated): moe keeps the exported "
             "mixture-of-experts graph (to measure it against xfmr.moe), likewise gated_mlp"),
    cl::CommaSeparated, cl::cat(category));
cl::opt<bool> report("report",
                     cl::desc("Print what raising formed and every candidate left "
                              "unfused, with the reason, and the bytes a decode step reads: "
                              "weights, KV cache per token, their sum per token"),
                     cl::init(false), cl::cat(category));
cl::opt<std::string> kvCache(
    "kv-cache",
    cl::desc("none (default): the model as exported; paged: a step function over "
             "a paged KV cache for xfmr-run generate and serving"),
    cl::init("none"), cl::cat(category));
cl::opt<int64_t> blockSize("block-size", cl::desc("Tokens per KV-cache block (--kv-cache=paged)"),
                           cl::init(16), cl::cat(category));
cl::opt<std::string> kvDtype(
    "kv-dtype",
    cl::desc("With --kv-cache=paged, the KV pools' element type: auto (default: the model's "
             "K/V type), f32, bf16, int8 or fp8-e4m3; int8 and fp8-e4m3 keep an f32 scale per "
             "token and KV head (max |x| / 127 or / 448) beside the pools"),
    cl::init("auto"), cl::cat(category));
cl::opt<std::string> quant(
    "quant",
    cl::desc("none (default): weights as the model has them; int4-g32, int4-g64, int4-g128: "
             "every MatMul with a constant f32 weight to 4-bit blocks of 32/64/128 along K "
             "(round to nearest, asymmetric; int8 activations); int8: to 8 bits per output "
             "channel (round to nearest, symmetric; int8 activations); bf16: to bfloat16 (round to "
             "nearest even; read as bf16 inside the product); fp8-e4m3: to float8 e4m3fn per "
             "output channel (scale max |w| / 448; widened inside the product); int4-awq: "
             "int4-g128 with activation-aware scales and clipping (AWQ; needs --calibration); "
             "int4-gptq, int4-gptq-g32, int4-gptq-g64: 4-bit blocks of 128 (32, 64) with "
             "second-order error feedback (GPTQ; needs --calibration); "
             "w8a8: int8 after SmoothQuant's migration of activation outliers into the "
             "weights (needs --calibration)"),
    cl::init("none"), cl::cat(category));
cl::opt<std::string> calibration(
    "calibration",
    cl::desc("With --quant=int4-awq, int4-gptq* or w8a8: token ids (.npy or .pb, [T] or [1, T]) that the "
             "f32 model runs on to measure each product's input channels (a second, f32 "
             "compile of the model with the statistics as outputs), or a statistics file "
             "written by --save-calibration (.json)"),
    cl::value_desc("file"), cl::cat(category));
cl::opt<int64_t> calibrationContext(
    "calibration-context",
    cl::desc("With --calibration: tokens per calibration window (default: the model folder's "
             "context length, else 512)"),
    cl::init(0), cl::cat(category));
cl::opt<std::string> saveCalibration(
    "save-calibration",
    cl::desc("Write the measured statistics to this .json file (reusable with --calibration)"),
    cl::value_desc("file"), cl::cat(category));
cl::opt<double> smoothAlpha(
    "smooth-alpha",
    cl::desc("--quant=w8a8: SmoothQuant's migration strength alpha in [0, 1] (default 0.5): "
             "per input channel s = max|x|^alpha / max|w|^(1 - alpha)"),
    cl::init(0.5), cl::cat(category));
cl::opt<bool> gptqActOrder(
    "gptq-act-order",
    cl::desc("--quant=int4-gptq*: quantize the input channels of largest E[x^2] first (each "
             "block's grid fixed beforehand, so the weights keep their layout; default true, "
             "--gptq-act-order=false for calibration order)"),
    cl::init(true), cl::cat(category));
cl::opt<double> gptqShrink(
    "gptq-shrink",
    cl::desc("--quant=int4-gptq*: the activations' second moment's off-diagonal scaled by "
             "1 - shrink, toward its diagonal (default 0.4: a few thousand calibration tokens "
             "overfit plain GPTQ; docs/quantization.md)"),
    cl::init(0.4), cl::cat(category));
cl::opt<double> gptqDamp(
    "gptq-damp",
    cl::desc("--quant=int4-gptq*: dampening added to the activations' second moment's diagonal, "
             "times its mean (default 0.01)"),
    cl::init(0.01), cl::cat(category));
cl::opt<bool> quantReport(
    "quant-report",
    cl::desc("--quant=int4-gptq*: print each product's output error on the calibration rows "
             "(relative squared error), round to nearest against GPTQ"),
    cl::init(false), cl::cat(category));
cl::list<std::string> quantSkip(
    "quant-skip",
    cl::desc("With --quant: leave in f32 every MatMul whose ONNX node name or weight name "
             "contains one of these (comma-separated), e.g. lm_head"),
    cl::CommaSeparated, cl::cat(category));
cl::opt<std::string> tokenizerPath(
    "tokenizer",
    cl::desc("Tokenizer to put in the artifact: a folder with tokenizer.json (and "
             "tokenizer_config.json, chat template, generation_config.json) or a "
             "tokenizer.json; default: the model folder's (docs/artifact.md)"),
    cl::value_desc("dir|file"), cl::cat(category));
cl::opt<bool> quiet("quiet", cl::desc("Do not print progress"), cl::init(false),
                    cl::cat(category));

int fail(const llvm::Twine &message) {
  llvm::errs() << "xfmr-compile: error: " << message << "\n";
  return 1;
}

class Progress {
public:
  Progress() {
    if (!quiet)
      xfmr::progressSink() = [this](const xfmr::ProgressEvent &e) { item(e); };
  }
  ~Progress() { xfmr::progressSink() = nullptr; }

  /// One item of long work inside a stage: a line updated in place on a
  /// terminal, a plain line per tenth of the work otherwise.
  void item(const xfmr::ProgressEvent &e) {
    std::lock_guard<std::mutex> lock(mutex); // the weights writer's thread
    if (e.done <= 1)
      itemStart = std::chrono::steady_clock::now();
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - itemStart).count();
    int64_t tenth = e.total ? e.done * 10 / e.total : 10;
    bool terminal = llvm::errs().is_displayed();
    if (!terminal && tenth == lastTenth && e.done != e.total)
      return;
    lastTenth = tenth;
    std::string line = llvm::formatv("xfmr-compile: {0} {1}/{2} ({3:f2}/{4:f2} GB, {5:f1} s) {6}",
                                     e.task, e.done, e.total, e.bytes / 1e9,
                                     e.totalBytes / 1e9, s, e.item)
                           .str();
    if (terminal) {
      line.resize(std::max<size_t>(line.size(), lastWidth), ' ');
      lastWidth = line.size();
      llvm::errs() << "\r" << line << (e.done == e.total ? "\n" : "");
      if (e.done == e.total)
        lastWidth = 0;
    } else {
      llvm::errs() << line << "\n";
    }
  }

  void step(llvm::StringRef what) {
    finish();
    current = what.str();
    start = std::chrono::steady_clock::now();
  }
  void finish() {
    std::lock_guard<std::mutex> lock(mutex);
    if (current.empty() || quiet)
      return;
    if (lastWidth > 0) { // a progress line is being updated in place
      llvm::errs() << "\n";
      lastWidth = 0;
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    llvm::errs() << "xfmr-compile: " << current << " (" << llvm::format("%.0f", ms)
                 << " ms)\n";
    current.clear();
  }

private:
  std::string current;
  std::chrono::steady_clock::time_point start;
  int64_t lastTenth = -1;
  size_t lastWidth = 0;
  std::chrono::steady_clock::time_point itemStart;
  std::mutex mutex;
};

/// The runtime's DType of an element type (manifestDTypeName names it in
/// the manifest); nothing for a type the runtime cannot hold.
std::optional<xfmr::rt::DType> runtimeDType(Type t) {
  using xfmr::rt::DType;
  if (t.isF32())
    return DType::F32;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  if (t.isF64())
    return DType::F64;
  if (isa<Float8E4M3FNType>(t))
    return DType::F8E4M3FN;
  if (t.isInteger(1))
    return DType::Bool;
  auto i = dyn_cast<IntegerType>(t);
  if (!i)
    return std::nullopt;
  bool u = i.isUnsigned();
  switch (i.getWidth()) {
  case 8:
    return u ? DType::U8 : DType::I8;
  case 16:
    return u ? DType::U16 : DType::I16;
  case 32:
    return u ? DType::U32 : DType::I32;
  case 64:
    return u ? DType::U64 : DType::I64;
  default:
    return std::nullopt;
  }
}

/// {name, dtype, shape} of one function argument or result.
xfmr::rt::TensorSpec tensorSpec(Type type, DictionaryAttr attrs, unsigned index,
                                std::string &error) {
  xfmr::rt::TensorSpec spec;
  auto name = attrs ? attrs.getAs<StringAttr>("onnx.name") : StringAttr();
  spec.name = name ? name.getValue().str() : ("value" + std::to_string(index));
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) {
    error = "'" + spec.name + "' has no known rank";
    return spec;
  }
  if (std::optional<xfmr::rt::DType> dt = runtimeDType(tensor.getElementType()))
    spec.dtype = *dt;
  else
    error = "'" + spec.name + "' has an unsupported element type";
  auto params = attrs ? attrs.getAs<ArrayAttr>("onnx.dim_params") : ArrayAttr();
  for (int64_t d = 0; d < tensor.getRank(); ++d) {
    xfmr::rt::Dim dim;
    if (!tensor.isDynamicDim(d)) {
      dim.value = tensor.getDimSize(d);
      spec.shape.push_back(dim);
      continue;
    }
    if (params && d < static_cast<int64_t>(params.size()))
      if (auto s = dyn_cast<StringAttr>(params[d]))
        dim.symbol = s.getValue().str();
    if (dim.symbol.empty())
      dim.symbol = "?";
    spec.shape.push_back(std::move(dim));
  }
  return spec;
}

/// Replaces graph input NAME by the tensor in FILE.
LogicalResult bindInput(func::FuncOp f, llvm::StringRef binding) {
  auto [name, file] = binding.split('=');
  if (name.empty() || file.empty())
    return fail("--bind-input expects NAME=FILE, got '" + binding + "'"), failure();
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto n = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
    if (!n || n.getValue() != name)
      continue;
    auto loaded = xfmr::rt::readTensor(file.str());
    if (!loaded)
      return fail(loaded.error()), failure();
    const xfmr::rt::Tensor &t = *loaded;
    auto argType = cast<RankedTensorType>(f.getArgument(i).getType());
    Type elem = argType.getElementType();
    std::optional<xfmr::rt::DType> inputDType = runtimeDType(elem);
    if (inputDType != t.dtype()) {
      std::string input;
      llvm::raw_string_ostream(input) << elem;
      if (inputDType)
        input = xfmr::rt::manifestDTypeName(*inputDType);
      return fail("--bind-input " + name + ": " + file + " holds " +
                  xfmr::rt::manifestDTypeName(t.dtype()) + ", the input is " + input),
             failure();
    }
    auto type = RankedTensorType::get(t.shape(), elem);
    if (failed(verifyCompatibleShape(type, argType)))
      return fail("--bind-input " + name + ": " + file + " has shape " +
                  xfmr::rt::formatShape(t.shape()) + ", incompatible with the input"),
             failure();
    DenseElementsAttr value;
    auto bytes = llvm::ArrayRef<char>(reinterpret_cast<const char *>(t.bytes()), t.byteSize());
    if (elem.isInteger(1)) {
      llvm::SmallVector<bool> bits;
      for (char c : bytes)
        bits.push_back(c != 0);
      value = DenseElementsAttr::get(type, llvm::ArrayRef<bool>(bits));
    } else {
      value = DenseElementsAttr::getFromRawBuffer(type, bytes);
    }
    OpBuilder b(f.getBody());
    auto c = xfmr::onnx::ConstantOp::create(b, f.getArgument(i).getLoc(), type,
                                            value, nullptr, nullptr, nullptr,
                                            nullptr, nullptr, nullptr);
    f.getArgument(i).replaceAllUsesWith(c);
    if (failed(f.eraseArgument(i)))
      return fail("cannot remove input '" + name + "'"), failure();
    return success();
  }
  return fail("--bind-input: the model has no input named '" + name + "'"), failure();
}

/// How many memrefs the lowered entry returns: one descriptor struct, or a
/// struct of them.
unsigned loweredResultCount(LLVM::LLVMFuncOp f) {
  Type ret = f.getFunctionType().getReturnType();
  if (isa<LLVM::LLVMVoidType>(ret))
    return 0;
  auto st = dyn_cast<LLVM::LLVMStructType>(ret);
  if (!st || st.getBody().empty() || isa<LLVM::LLVMPointerType>(st.getBody()[0]))
    return 1;
  return st.getBody().size();
}

/// The runtime sizes the result area from the manifest's outputs: the
/// lowered entry must return exactly those (KV pools bufferized out of
/// place would come back as extra results).
LogicalResult checkLoweredResults(ModuleOp module, unsigned expected) {
  for (auto f : module.getOps<LLVM::LLVMFuncOp>())
    if (f.getSymName() == "xfmr_main") {
      unsigned got = loweredResultCount(f);
      if (got == expected)
        return success();
      return fail("internal: the lowered entry returns " + llvm::Twine(got) + " values, the "
                  "manifest lists " + llvm::Twine(expected) +
                  " outputs (a KV pool was not updated in place)"),
             failure();
    }
  return fail("internal: no lowered entry function"), failure();
}

/// --expert-parallel=N: every xfmr.moe's experts must split evenly over N
/// ranks, all layers alike; records the expert count for the manifest.
LogicalResult checkExpertParallel(ModuleOp module) {
  int64_t n = expertParallel;
  if (n < 1 || n > 1024)
    return fail("--expert-parallel must be 1 to 1024, got " + llvm::Twine(n)), failure();
  if (!raise)
    return fail("--expert-parallel needs raising (--raise=false keeps no xfmr.moe)"), failure();
  bool bad = false;
  module.walk([&](xfmr::MoEOp op) {
    int64_t experts = op.getWGate().getType().getDimSize(0);
    if (bad)
      return;
    if (experts % n || (partitionedExperts && partitionedExperts != experts)) {
      op.emitError() << "--expert-parallel=" << n << ": this layer has " << experts
                     << " experts"
                     << (partitionedExperts && partitionedExperts != experts
                             ? ", others " + std::to_string(partitionedExperts)
                             : std::string(", not a multiple of the ranks"));
      bad = true;
    }
    partitionedExperts = experts;
  });
  if (bad)
    return failure();
  if (!partitionedExperts)
    return fail("--expert-parallel=" + llvm::Twine(n) +
                ": the model has no mixture-of-experts block raised to xfmr.moe (--report "
                "says why)"),
           failure();
  return success();
}

LogicalResult runPipeline(ModuleOp module,
                          llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module->getContext());
  // --mlir-timing, --mlir-pass-statistics, --mlir-print-ir-after-all, ...
  // (registered in main; hidden from --help, listed by --help-hidden).
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(pm);
  build(pm);
  return pm.run(module);
}

LogicalResult printModule(ModuleOp module) {
  std::string error;
  auto out = openOutputFile(outputFilename.empty() ? std::string("-")
                                                 : outputFilename.getValue(),
                            &error);
  if (!out)
    return fail(error), failure();
  xfmr::elideLargeResourceBlobs(module->getContext(), 64);
  module->print(out->os(), OpPrintingFlags().elideLargeResourceString(64));
  out->os() << "\n";
  out->keep();
  return success();
}

/// The size and SHA-256 of the file at `path` (manifest "files"), hashed
/// by the same code the loader checks with; a missing file (no weights were
/// written) is created empty.
llvm::Expected<xfmr::rt::FileIntegrity> describeFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return llvm::createStringError("cannot open '" + path + "': " + std::strerror(errno));
  llvm::scope_exit closeFd([&] { ::close(fd); });
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return llvm::createStringError("cannot stat '" + path + "': " + std::strerror(errno));
  xfmr::rt::Expected<std::string> digest = xfmr::rt::sha256OfFile(fd, path);
  if (!digest)
    return llvm::createStringError(digest.error());
  return xfmr::rt::FileIntegrity{static_cast<uint64_t>(st.st_size), *digest};
}

LogicalResult commitArtifact(llvm::StringRef tmp, llvm::StringRef out) {
  if (llvm::sys::fs::exists(out)) {
    llvm::SmallString<256> manifest(out);
    llvm::sys::path::append(manifest, "manifest.json");
    if (!llvm::sys::fs::is_directory(out) || !llvm::sys::fs::exists(manifest))
      return fail("'" + out + "' exists and is not an xfmr artifact"), failure();
    std::string old = (out + ".old-" + std::to_string(llvm::sys::Process::getProcessId())).str();
    if (llvm::sys::fs::rename(out, old))
      return fail("cannot replace '" + out + "'"), failure();
    if (auto ec = llvm::sys::fs::rename(tmp, out))
      return fail("cannot write '" + out + "': " + ec.message()), failure();
    (void)llvm::sys::fs::remove_directories(old);
    return success();
  }
  if (auto ec = llvm::sys::fs::rename(tmp, out))
    return fail("cannot write '" + out + "': " + ec.message()), failure();
  return success();
}

/// What a model folder's genai_config.json says about generating, for the
/// manifest's "generation" (nothing: it says nothing).
std::optional<xfmr::rt::GenerationConfig> generation;

/// model.eos_token_id (an id or a list of ids) and model.context_length of
/// genai_config.json into `generation`.
LogicalResult readGenerationConfig(const llvm::json::Object &model, llvm::StringRef config) {
  xfmr::rt::GenerationConfig g;
  if (const llvm::json::Value *v = model.get("eos_token_id")) {
    std::vector<const llvm::json::Value *> ids;
    if (const llvm::json::Array *list = v->getAsArray())
      for (const llvm::json::Value &id : *list)
        ids.push_back(&id);
    else
      ids.push_back(v);
    for (const llvm::json::Value *id : ids) {
      std::optional<int64_t> n = id->getAsInteger();
      if (!n || *n < 0 || ids.size() > 64)
        return fail(config.str() + ": model.eos_token_id must be a non-negative id or a list "
                                   "of at most 64"),
               failure();
      g.eosTokenIds.push_back(*n);
    }
  }
  if (const llvm::json::Value *v = model.get("context_length")) {
    std::optional<int64_t> n = v->getAsInteger();
    if (!n || *n < 0)
      return fail(config.str() + ": model.context_length must be a non-negative integer"),
             failure();
    g.contextLength = *n;
  }
  if (!g.eosTokenIds.empty() || g.contextLength) {
    g.from = "genai_config.json";
    generation = std::move(g);
  }
  return success();
}

/// The text interface the artifact gets (tokenizer files and the manifest's
/// "text"), when the model folder or --tokenizer gives one.
std::optional<xfmr::compile::TokenizerFiles> tokenizerFiles;

/// Reads it from --tokenizer or the model folder `folder` ("" for a model
/// file), with genai_config.json's eos ids; before compiling, so that a
/// malformed file fails at once.
LogicalResult readTextInterface(const std::string &folder) {
  std::vector<int64_t> genaiEos = generation ? generation->eosTokenIds : std::vector<int64_t>();
  std::string note;
  auto text = xfmr::compile::readTokenizerFiles(
      tokenizerPath, folder, genaiEos, note,
      [](const llvm::Twine &w) { llvm::errs() << "xfmr-compile: warning: " << w << "\n"; });
  if (!text)
    return fail(llvm::toString(text.takeError())), failure();
  if (!note.empty() && !quiet)
    llvm::errs() << "xfmr-compile: note: " << note << "\n";
  tokenizerFiles = std::move(*text);
  return success();
}

/// A model folder as onnxruntime-genai's builder writes it: the decoder file
/// named by genai_config.json's model.decoder.filename (else model.onnx).
/// Replaces `inputFilename` by that file and keeps the config's eos ids and
/// context length for the manifest; errors name the folder's config.
LogicalResult resolveModelFolder() {
  if (!llvm::sys::fs::is_directory(inputFilename))
    return success();
  std::string dir = inputFilename;
  llvm::SmallString<256> config(dir);
  llvm::sys::path::append(config, "genai_config.json");
  std::string file = "model.onnx";
  if (llvm::sys::fs::exists(config)) {
    auto buffer = llvm::MemoryBuffer::getFile(config);
    if (!buffer)
      return fail(config.str() + ": " + buffer.getError().message()), failure();
    llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
    if (!json)
      return fail(config.str() + ": " + llvm::toString(json.takeError())), failure();
    const llvm::json::Object *root = json->getAsObject();
    const llvm::json::Object *model = root ? root->getObject("model") : nullptr;
    if (model && failed(readGenerationConfig(*model, config)))
      return failure();
    const llvm::json::Object *decoder = model ? model->getObject("decoder") : nullptr;
    if (decoder)
      if (std::optional<llvm::StringRef> name = decoder->getString("filename")) {
        if (name->empty() || name->contains('/') || *name == "..")
          return fail(config.str() + ": model.decoder.filename '" + name->str() +
                      "' is not a file name in the folder"),
                 failure();
        file = name->str();
      }
  }
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  if (!llvm::sys::fs::exists(path))
    return fail(dir + ": no " + file + " in the model folder"), failure();
  inputFilename = path.str().str();
  return success();
}

/// The CPU pipeline (docs/cpu-backend.md) to the LLVM dialect.
LogicalResult lowerForCPU(ModuleOp module, const xfmr::cpu::HostTarget &host, Progress &progress,
                          const std::string &tmp, bool calibrationArtifact) {
  progress.step("lowered to LLVM");
  xfmr::CPUPipelineOptions cpuOptions;
  cpuOptions.minWeightBytes = minWeightBytes;
  cpuOptions.blasMinRows = blasMinRows;
  cpuOptions.threads = parallel;
  // AVX-512 targets get the 16-lane product kernels (same results).
  cpuOptions.vectorLanes = llvm::is_contained(host.required, "avx512f") ? 16 : 8;
  // The calibration artifact returns values from inside every layer, all
  // of static shape: outlined layer functions return them (a returned
  // [rows, K] view met an unrealized cast in LLVM translation).
  cpuOptions.outlineLayers = outlineLayers;
  cpuOptions.referenceWeights = weightsMode == "reference" && !calibrationArtifact;
  // The calibration artifact shares the model's weight blobs: keep them.
  cpuOptions.keepBlobs = calibrationArtifact;
  cpuOptions.simplifyDeallocations = !calibrationArtifact;
  // weights.bin is written (and hashed as it is written) on a thread while
  // LLVM generates code where a core is spare for it: writing is CPU-bound
  // too (the kernel's page-cache copy), and on 2 cores the overlap measured
  // slower for an 8B model (90 s against 73 s).
  cpuOptions.backgroundWeights = std::thread::hardware_concurrency() >= 4;
  if (!tmp.empty())
    cpuOptions.weightsFile = tmp + "/weights.bin";
  if (failed(runPipeline(module, [&](OpPassManager &pm) {
        xfmr::buildCPUToLLVMPipeline(pm, cpuOptions);
      })))
    return failure();
  return success();
}

/// The GPU pipeline (docs/gpu-backend.md): kernels to PTX (and a cubin where
/// the toolkit has ptxas) in `tmp`, then the host code to the LLVM dialect.
FailureOr<std::vector<xfmr::gpu::KernelReport>>
lowerForGPU(ModuleOp module, const xfmr::gpu::GPUTarget &gpuTarget, Progress &progress,
            const std::string &tmp, bool emitOnly) {
  std::optional<std::string> toolkit = xfmr::gpu::findCUDAToolkit();
  // The emulated grid is CPU code: no libdevice, no ptxas.
  if (!toolkit && !gpuEmulate)
    return fail("--target=" + gpuTarget.chip + ": no CUDA toolkit found (bin/ptxas and "
                "nvvm/libdevice; looked in $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, the ptxas on "
                "$PATH and /usr/local/cuda)"),
           failure();
  progress.step((gpuEmulate ? "grid emulated on the CPU for " : "kernels for ") +
                gpuTarget.chip.str());
  xfmr::GPUPipelineOptions options;
  options.emulate = gpuEmulate;
  options.minWeightBytes = minWeightBytes;
  options.chip = gpuTarget.chip.str();
  options.features = gpuTarget.ptxFeatures.str();
  options.toolkit = toolkit.value_or("");
  if (!tmp.empty())
    options.weightsFile = tmp + "/weights.bin";
  if (failed(runPipeline(module, [&](OpPassManager &pm) {
        xfmr::buildGPUKernelsPipeline(pm, options);
      })))
    return failure();
  std::vector<xfmr::gpu::KernelReport> kernels;
  if (gpuEmulate)
    return kernels;
  if (!emitOnly) {
    progress.step("assembled the kernels (ptxas -arch=" + gpuTarget.chip.str() + ")");
    std::string error;
    FailureOr<std::vector<xfmr::gpu::KernelReport>> k =
        xfmr::gpu::assembleKernels(module, gpuTarget, toolkit, tmp, error);
    if (failed(k))
      return fail(error), failure();
    kernels = std::move(*k);
  }
  // Micro-kernels the host code still calls (the CPU's, on unified memory):
  // named in the manifest and --report, never hidden.
  llvm::SetVector<StringRef> hostCalls;
  module.walk([&](func::CallOp call) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCalleeAttr());
    if (callee && callee.isDeclaration() && call.getCallee() != "xfmr_gpu_free")
      hostCalls.insert(call.getCallee());
  });
  Builder builder(module.getContext());
  module->setAttr("xfmr.host_calls", builder.getStrArrayAttr(hostCalls.getArrayRef()));
  progress.step("lowered the host code to LLVM");
  if (failed(runPipeline(module, xfmr::buildGPUHostPipeline)))
    return failure();
  return kernels;
}

/// The strings of the module's array attribute `name` (none when absent).
std::vector<std::string> stringsOf(ModuleOp module, StringRef name) {
  std::vector<std::string> out;
  if (auto list = module->getAttrOfType<ArrayAttr>(name))
    for (auto s : list.getAsValueRange<StringAttr>())
      out.push_back(s.str());
  return out;
}

/// The manifest's target: the host CPU's, or for a GPU artifact the device
/// with the host code that launches its kernels.
void describeTarget(xfmr::rt::Manifest &m, const xfmr::cpu::HostTarget &host,
                    const xfmr::gpu::GPUTarget *t, ModuleOp module,
                    const std::vector<xfmr::gpu::KernelReport> &kernels) {
  // The host code's CPU features, checked like a CPU artifact's.
  m.requiredCPUFeatures = host.required;
  if (!t) {
    m.targetKind = "cpu";
    m.targetTriple = host.triple;
    m.targetCPU = host.cpu;
    m.targetFeatures = host.features;
    return;
  }
  m.targetKind = "cuda";
  m.targetChip = t->chip.str();
  m.targetComputeCapability = t->computeCapability;
  m.targetPTXFeatures = t->ptxFeatures.str();
  // For inspection: model.so embeds the cubin (or, without ptxas, the PTX).
  m.kernelsPTXFile = "kernels.ptx";
  m.kernelsCubinFile = ("kernels." + t->chip + ".cubin").str();
  // Checks inside kernels report through the device word xfmr_kernel_check
  // (xfmr-gpu-map-loops): their messages, by number.
  m.kernelChecks = stringsOf(module, "xfmr.kernel_checks");
  // Run on the host CPU, on unified memory.
  m.hostCalls = stringsOf(module, "xfmr.host_calls");
  m.targetHost = {host.triple, host.cpu, host.features, host.required};
  for (const xfmr::gpu::KernelReport &k : kernels) {
    xfmr::rt::KernelInfo info{k.name, k.registers, k.spillStores + k.spillLoads,
                              k.stackBytes, k.sharedBytes, {}};
    for (llvm::StringRef name : xfmr::gpu::usedInstructions(k))
      info.uses.push_back(name.str());
    m.kernels.push_back(std::move(info));
  }
}

/// --report for a GPU target: one line per kernel from ptxas -v and the PTX.
void printKernelReport(const xfmr::gpu::GPUTarget &t,
                       const std::vector<xfmr::gpu::KernelReport> &kernels,
                       llvm::raw_ostream &os) {
  int64_t spilling = 0, tensorCore = 0;
  for (const xfmr::gpu::KernelReport &k : kernels) {
    spilling += (k.spillStores + k.spillLoads) > 0;
    tensorCore += k.mmaSync || k.wgmma;
  }
  os << "kernels (" << t.chip << "): " << kernels.size() << ", " << spilling
     << " spilling, " << tensorCore << " on tensor cores\n";
  for (const xfmr::gpu::KernelReport &k : kernels) {
    os << llvm::formatv("  {0,-48} regs {1,3}  spill {2,4} B  stack {3,4} B  smem {4,6} B", k.name,
                        k.registers, k.spillStores + k.spillLoads, k.stackBytes, k.sharedBytes);
    std::vector<llvm::StringRef> uses = xfmr::gpu::usedInstructions(k);
    os << "  " << (uses.empty() ? std::string("scalar") : llvm::join(uses, ", ")) << "\n";
  }
}

/// The signature the runtime sees, before lowering changes the types: the
/// manifest's inputs, outputs and kv_cache. `expectedResults`: how many
/// results the lowered function returns (a kv_pool result is written into
/// its input instead).
LogicalResult describeSignature(ModuleOp module, xfmr::rt::Manifest &m,
                                unsigned &expectedResults) {
  auto f = *module.getOps<func::FuncOp>().begin();
  std::string error;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    m.inputs.push_back(tensorSpec(f.getArgument(i).getType(), f.getArgAttrDict(i), i, error));
    // Read and updated in place by every call.
    m.inputs.back().kvPool = static_cast<bool>(f.getArgAttr(i, "xfmr.kv_pool"));
  }
  unsigned poolResults = 0;
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    if (f.getResultAttr(i, "xfmr.kv_pool")) {
      ++poolResults; // written into its input; not an output
      continue;
    }
    m.outputs.push_back(tensorSpec(f.getResultTypes()[i], f.getResultAttrDict(i), i, error));
  }
  expectedResults = f.getNumResults() - poolResults;
  // xfmr-paged-kv's description of the pools.
  if (auto kv = module->getAttrOfType<DictionaryAttr>("xfmr.kv_cache")) {
    auto get = [&](StringRef key) {
      auto a = kv.getAs<IntegerAttr>(key);
      return a ? a.getInt() : 0;
    };
    xfmr::rt::KVCacheSpec spec;
    spec.blockSize = get("block_size");
    spec.numLayers = get("num_layers");
    spec.numKVHeads = get("num_kv_heads");
    spec.headDim = get("head_dim");
    spec.valueHeadDim = get("value_head_dim");
    auto dtype = kv.getAs<StringAttr>("dtype");
    std::optional<xfmr::rt::KVCacheDType> d =
        dtype ? xfmr::rt::kvCacheDTypeFromName(dtype.getValue()) : std::nullopt;
    if (d)
      spec.dtype = *d;
    else
      error = "the KV cache has no dtype the runtime knows";
    m.kvCache = spec;
  }
  // xfmr-split-pipeline-stage's description of the stage.
  if (auto stage = module->getAttrOfType<DictionaryAttr>("xfmr.pipeline_stage")) {
    auto get = [&](StringRef key) {
      auto a = stage.getAs<IntegerAttr>(key);
      return a ? a.getInt() : 0;
    };
    m.pipelineStages = get("stages");
    m.pipelineStage = get("stage");
    m.pipelineFirstLayer = get("first_layer");
  }
  if (!error.empty())
    return fail(inputFilename + ": " + error), failure();
  return success();
}

/// The manifest's library, entry, weights and files: model.so and
/// weights.bin (hashed as written, with its references) in `tmp`, and the
/// text interface's files, which are written now when `withText`.
LogicalResult describeFiles(xfmr::rt::Manifest &m, ModuleOp module, const std::string &tmp,
                            const std::optional<xfmr::cpu::WrittenWeights> &written,
                            bool withText) {
  m.library = "model.so";
  m.entry = "xfmr_entry";
  m.weightsFile = "weights.bin";
  m.weightsAlignment = 64;
  if (auto weights = module->getAttrOfType<DictionaryAttr>("xfmr.weights")) {
    m.weightsCount = weights.getAs<IntegerAttr>("count").getInt();
    m.weightsSize = weights.getAs<IntegerAttr>("size").getInt();
  }
  llvm::Expected<xfmr::rt::FileIntegrity> library = describeFile(tmp + "/" + m.library);
  if (!library)
    return fail(llvm::toString(library.takeError())), failure();
  m.libraryIntegrity = *library;
  if (written) {
    m.weightsIntegrity = {static_cast<uint64_t>(written->size), written->sha256};
    if (!written->references.empty()) {
      m.weightSources = written->sources;
      m.weightReferences = written->references;
    }
  } else {
    llvm::Expected<xfmr::rt::FileIntegrity> weights = describeFile(tmp + "/" + m.weightsFile);
    if (!weights)
      return fail(llvm::toString(weights.takeError())), failure();
    m.weightsIntegrity = *weights;
  }
  if (!withText || !tokenizerFiles)
    return success();
  m.text = tokenizerFiles->text;
  if (llvm::Error e = xfmr::compile::writeTokenizerFiles(*tokenizerFiles, tmp, m.text->files))
    return fail(llvm::toString(std::move(e))), failure();
  return success();
}

/// What the manifest records of how the artifact was built: versions,
/// compiler, source, options, the run-time checks' messages, generation
/// and expert_parallel.
void describeBuild(xfmr::rt::Manifest &m, ModuleOp module, llvm::StringRef quantMode,
                   bool calibrationArtifact) {
  m.formatVersion = xfmr::rt::kManifestFormatVersion;
  m.abiVersion = xfmr::rt::kArtifactABIVersion;
  m.compiler = "xfmr 0.1 (LLVM " LLVM_VERSION_STRING ")";
  m.source = llvm::sys::path::filename(inputFilename).str();
  xfmr::rt::CompileOptions &options = m.options.emplace();
  options.optLevel = optLevel;
  options.weights = weightsMode;
  options.minWeightBytes = minWeightBytes;
  options.blasMinRows = blasMinRows;
  options.parallel = parallel;
  options.quant = quantMode.str();
  options.quantSkip.assign(quantSkip.begin(), quantSkip.end());
  if (!calibrationArtifact && !calibration.empty()) {
    // Where the calibrated modes' statistics came from (docs/quantization.md).
    options.calibration = llvm::sys::path::filename(calibration).str();
    if (quantMode == "w8a8")
      options.smoothAlpha = smoothAlpha.getValue();
  }
  m.checks = stringsOf(module, "xfmr.checks");
  m.generation = generation;
  if (expertParallel > 1) {
    m.expertParallelRanks = expertParallel;
    m.expertParallelExperts = partitionedExperts;
  }
}

/// Writes `m` as `tmp`/manifest.json.
LogicalResult writeManifest(const xfmr::rt::Manifest &m, const std::string &tmp) {
  std::error_code ec;
  llvm::raw_fd_ostream os(tmp + "/manifest.json", ec);
  if (ec)
    return fail("cannot write the manifest: " + ec.message()), failure();
  os << xfmr::rt::formatManifest(m);
  os.close();
  if (os.has_error())
    return fail("cannot write the manifest: " + os.error().message()), failure();
  return success();
}

/// Lowers the raised `module` and writes the artifact directory `out`, or
/// prints the stage `emitStage` (linalg, llvm). `quantMode` is the
/// manifest's options.quant.
int lowerAndWrite(ModuleOp module, const xfmr::cpu::HostTarget &host,
                  const xfmr::gpu::GPUTarget *gpuTarget, Progress &progress,
                  llvm::StringRef emitStage,
                  const std::string &out, llvm::StringRef quantMode,
                  bool calibrationArtifact = false) {
  // The signature the runtime sees, before lowering changes the types.
  xfmr::rt::Manifest manifest;
  unsigned expectedResults = 0;
  if (failed(describeSignature(module, manifest, expectedResults)))
    return 1;

  progress.step("lowered to linalg");
  if (failed(runPipeline(module, [&](OpPassManager &pm) {
        xfmr::buildONNXToLinalgPipeline(
            pm, gpuTarget ? xfmr::gpu::kFusedAttentionMaxHeadDim : 0,
            /*microKernels=*/!gpuTarget);
      })))
    return 1;
  if (emitStage == "linalg") {
    progress.finish();
    return failed(printModule(module));
  }

  std::string tmp;
  if (emitStage.empty()) {
    tmp = out + ".tmp-" + std::to_string(llvm::sys::Process::getProcessId());
    (void)llvm::sys::fs::remove_directories(tmp);
    if (auto ec = llvm::sys::fs::create_directories(tmp))
      return fail("cannot create '" + tmp + "': " + ec.message());
  }
  llvm::scope_exit cleanup([&] {
    xfmr::cpu::cancelWeightsWrite(); // a no-op once waited for
    if (!tmp.empty())
      (void)llvm::sys::fs::remove_directories(tmp);
  });
  std::vector<xfmr::gpu::KernelReport> kernels;
  if (gpuTarget) {
    FailureOr<std::vector<xfmr::gpu::KernelReport>> k =
        lowerForGPU(module, *gpuTarget, progress, tmp, emitStage == "llvm");
    if (failed(k))
      return 1;
    kernels = std::move(*k);
    if (gpuEmulate)
      gpuTarget = nullptr; // a CPU artifact
  } else if (failed(lowerForCPU(module, host, progress, tmp, calibrationArtifact))) {
    return 1;
  }
  if (failed(checkLoweredResults(module, expectedResults)))
    return 1;
  if (emitStage == "llvm") {
    progress.finish();
    return failed(printModule(module));
  }

  progress.step("generated code");
  std::string error;
  if (failed(xfmr::cpu::emitSharedObject(module, host, "xfmr_main",
                                         tmp + "/model.so", optLevel, error)))
    return fail(error);
  llvm::Expected<std::optional<xfmr::cpu::WrittenWeights>> written =
      xfmr::cpu::waitForWeights();
  if (!written)
    return fail(llvm::toString(written.takeError()));
  if (failed(describeFiles(manifest, module, tmp, *written, !calibrationArtifact)))
    return 1;
  describeTarget(manifest, host, gpuTarget, module, kernels);
  describeBuild(manifest, module, quantMode, calibrationArtifact);
  if (gpuTarget && report) {
    printKernelReport(*gpuTarget, kernels, llvm::outs());
    if (!manifest.hostCalls.empty())
      llvm::outs() << "on the host CPU (no GPU kernel yet, unified memory): "
                   << llvm::join(manifest.hostCalls, " ") << "\n";
  }
  if (failed(writeManifest(manifest, tmp)))
    return 1;
  progress.step("wrote " + out);
  if (failed(commitArtifact(tmp, out)))
    return 1;
  tmp.clear();
  progress.finish();
  return 0;
}


/// Builds one pipeline stage's artifact in `root` from the tensor-parallel
/// ranks' artifacts in `rankDir(r)` (rank 0's is `root`): rank 0's, with
/// the other ranks' weights files beside its own (weights.rank<r>.bin),
/// after checking that every rank's code (model.so) and weights layout are
/// rank 0's.
LogicalResult assembleTensorParallel(const std::string &root,
                                     llvm::function_ref<std::string(int64_t)> rankDir,
                                     xfmr::rt::Manifest &m) {
  auto library = llvm::MemoryBuffer::getFile(root + "/" + m.library);
  if (!library)
    return fail("cannot read " + root + "/" + m.library), failure();
  m.tensorParallelRanks = tensorParallel;
  m.tensorParallelWeights = {m.weightsFile};
  m.tensorParallelIntegrity = {m.weightsIntegrity};
  for (int64_t r = 1; r < tensorParallel; ++r) {
    xfmr::rt::Expected<xfmr::rt::Manifest> mr =
        xfmr::rt::readManifest(rankDir(r) + "/manifest.json");
    if (!mr)
      return fail(mr.error()), failure();
    auto code = llvm::MemoryBuffer::getFile(rankDir(r) + "/" + mr->library);
    if (!code || (*code)->getBuffer() != (*library)->getBuffer() ||
        mr->weightsSize != m.weightsSize || mr->weightsCount != m.weightsCount)
      return fail("internal error: --tensor-parallel rank " + llvm::Twine(r) +
                  "'s code or weights layout differs from rank 0's"),
             failure();
    std::string name = "weights.rank" + std::to_string(r) + ".bin";
    if (auto ec = llvm::sys::fs::rename(rankDir(r) + "/" + mr->weightsFile, root + "/" + name))
      return fail("cannot move rank " + llvm::Twine(r) + "'s weights: " + ec.message()),
             failure();
    m.tensorParallelWeights.push_back(name);
    m.tensorParallelIntegrity.push_back(mr->weightsIntegrity);
  }
  return success();
}

/// --tensor-parallel=N and --pipeline-parallel=M: `build(s, r, dir)`
/// writes stage s's tensor-parallel rank r's artifact to `dir` for every
/// stage and rank. Each stage's ranks are assembled into one directory
/// (assembleTensorParallel); stage 0's is the artifact, and stage s > 0 its
/// subdirectory stage<s>, whose manifest's SHA-256 stage 0's lists.
int buildParallel(llvm::function_ref<int(int64_t, int64_t, const std::string &)> build) {
  std::string staging =
      outputFilename + ".parallel-" + std::to_string(llvm::sys::Process::getProcessId());
  (void)llvm::sys::fs::remove_directories(staging);
  if (auto ec = llvm::sys::fs::create_directories(staging))
    return fail("cannot create '" + staging + "': " + ec.message());
  llvm::scope_exit cleanup([&] { (void)llvm::sys::fs::remove_directories(staging); });
  auto rankDir = [&](int64_t s, int64_t r) {
    return staging + "/stage" + std::to_string(s) + "-rank" + std::to_string(r);
  };
  std::vector<std::string> stageDigests;
  std::vector<std::string> reportLines; // per stage, last first
  for (int64_t s = pipelineParallel - 1; s >= 0; --s) {
    for (int64_t r = 0; r < tensorParallel; ++r) {
      if (!quiet)
        llvm::errs() << "xfmr-compile: " << (pipelineParallel > 1 ? "stage " + std::to_string(s) +
                                                                        " of " +
                                                                        std::to_string(pipelineParallel) +
                                                                        ", "
                                                                  : std::string())
                     << "tensor-parallel rank " << r << " of " << tensorParallel << "\n";
      if (int rc = build(s, r, rankDir(s, r)))
        return rc;
    }
    std::string root = rankDir(s, 0);
    xfmr::rt::Expected<xfmr::rt::Manifest> m = xfmr::rt::readManifest(root + "/manifest.json");
    if (!m)
      return fail(m.error());
    if (tensorParallel > 1 &&
        failed(assembleTensorParallel(root, [&](int64_t r) { return rankDir(s, r); }, *m)))
      return 1;
    if (report && m->kvCache)
      reportLines.push_back(llvm::formatv(
          "{0,5} {1,6}..{2,-4} {3,18} {4,20}", s, m->pipelineFirstLayer,
          m->pipelineFirstLayer + m->kvCache->numLayers - 1, m->weightsSize,
          xfmr::rt::KVPools::bytesPerBlock(*m) / static_cast<uint64_t>(m->kvCache->blockSize)));
    if (s == 0) {
      m->pipelineStageManifests.assign(stageDigests.rbegin(), stageDigests.rend());
      for (int64_t t = 1; t < pipelineParallel; ++t) {
        std::string dir = root + "/stage" + std::to_string(t);
        if (auto ec = llvm::sys::fs::rename(rankDir(t, 0), dir))
          return fail("cannot move stage " + llvm::Twine(t) + ": " + ec.message());
      }
    }
    if (failed(writeManifest(*m, root)))
      return 1;
    if (s > 0) {
      auto written = llvm::MemoryBuffer::getFile(root + "/manifest.json");
      if (!written)
        return fail("cannot read " + root + "/manifest.json");
      stageDigests.push_back(
          xfmr::rt::sha256Hex((*written)->getBufferStart(), (*written)->getBufferSize()));
    }
  }
  if (failed(commitArtifact(rankDir(0, 0), outputFilename)))
    return 1;
  if (report) {
    llvm::outs() << "parallel: " << pipelineParallel << " stage(s) x " << tensorParallel
                 << " tensor-parallel rank(s) = " << pipelineParallel * tensorParallel
                 << " ranks (mpirun -np " << pipelineParallel * tensorParallel << ")\n"
                 << "stage layers      weight bytes/rank  KV bytes/token/rank\n";
    for (auto it = reportLines.rbegin(); it != reportLines.rend(); ++it)
      llvm::outs() << *it << "\n";
  }
  return 0;
}

/// The statistics file for --calibration: the file itself when it is one
/// (.json); else measured by compiling `module` (imported, not yet raised)
/// with xfmr-calibration-outputs into a scratch artifact in `scratch` and
/// running it on the tokens, with each input's A^T A if `secondMoments`
/// (GPTQ).
FailureOr<std::string> calibrationFile(ModuleOp module, const xfmr::cpu::HostTarget &host,
                                       Progress &progress, const std::string &scratch,
                                       bool secondMoments) {
  std::string error;
  if (llvm::StringRef(calibration).ends_with(".json")) {
    std::optional<xfmr::CalibrationStats> stats = xfmr::readCalibrationStats(calibration, error);
    if (!stats)
      return fail(error), failure();
    if (!saveCalibration.empty() && !xfmr::writeCalibrationStats(*stats, saveCalibration, error))
      return fail(error), failure();
    return calibration.getValue();
  }
  OwningOpRef<ModuleOp> clone(module.clone());
  progress.step("calibration: f32 model with its products' input statistics as outputs");
  xfmr::RaiseOptions options;
  options.calibrationOutputs = true;
  options.calibrationSecondMoments = secondMoments;
  if (failed(runPipeline(*clone, [&](OpPassManager &pm) {
        xfmr::buildRaisePipeline(pm, options);
      })))
    return failure();
  std::string art = scratch + "/calibration.xfa";
  if (lowerAndWrite(*clone, host, nullptr, progress, "", art, "none", /*calibrationArtifact=*/true) != 0)
    return failure();
  int64_t context = calibrationContext;
  if (context == 0) {
    int64_t stated = generation ? generation->contextLength.value_or(0) : 0;
    context = stated > 1 ? stated : 512;
  }
  progress.step("calibration: ran the f32 model on " + calibration);
  std::optional<xfmr::CalibrationStats> stats = xfmr::compile::measureCalibration(
      art, calibration, context,
      [](int64_t done, int64_t total) {
        xfmr::reportProgress({"calibration window", "", done, total, 0, 0});
      },
      error);
  if (!stats)
    return fail(error), failure();
  std::string path = saveCalibration.empty() ? scratch + "/calibration.json"
                                             : saveCalibration.getValue();
  if (!xfmr::writeCalibrationStats(*stats, path, error))
    return fail(error), failure();
  return path;
}

int compile() {
  std::string modelFolder =
      llvm::sys::fs::is_directory(inputFilename) ? inputFilename.getValue() : "";
  if (failed(resolveModelFolder()) || failed(readTextInterface(modelFolder)))
    return 1;
  const xfmr::gpu::GPUTarget *gpuTarget = nullptr;
  if (gpuEmulate && target == "cpu")
    return fail("--gpu-emulate needs a GPU --target (" + xfmr::gpu::knownGPUTargetNames() + ")");
  if (target != "cpu") {
    gpuTarget = xfmr::gpu::lookupGPUTarget(target);
    if (!gpuTarget)
      return fail("--target must be cpu or a GPU (" + xfmr::gpu::knownGPUTargetNames() +
                  "), not '" + target + "'");
    // int8 weights are xfmr.linear on !quant.uniform weights, which the GPU
    // products read 1 byte per weight; the other modes need kernels the
    // GPU path does not have yet.
    if ((quant != "none" && quant != "int8") || expertParallel != 1 || weightsMode != "embed" ||
        blasMinRows > 0)
      return fail("--target=" + target + ": --quant (other than int8), --expert-parallel, "
                  "--weights=reference and --blas-min-rows are CPU-only so far "
                  "(docs/gpu-backend.md)");
  }
  if (!emit.empty() && !llvm::is_contained({"onnx", "xfmr", "linalg", "llvm"}, emit))
    return fail("--emit must be one of onnx, xfmr, linalg, llvm");
  if (emit.empty() && outputFilename.empty())
    return fail("no output: give -o model.xfa (or --emit=STAGE)");
  std::string targetError;
  llvm::FailureOr<xfmr::cpu::HostTarget> host =
      xfmr::cpu::resolveHostTarget(cpu, targetError);
  if (failed(host))
    return fail("--cpu: " + targetError);
  if (kvCache != "none" && kvCache != "paged")
    return fail("--kv-cache must be none or paged");
  if (weightsMode != "embed" && weightsMode != "reference")
    return fail("--weights must be embed or reference, not '" + weightsMode + "'");
  if (kvCache == "paged" && !raise)
    return fail("--kv-cache=paged needs --raise (attention must be recovered first)");
  if (kvDtype != "auto" && kvDtype != "f32" && kvDtype != "bf16" && kvDtype != "int8" &&
      kvDtype != "fp8-e4m3")
    return fail("--kv-dtype must be auto, f32, bf16, int8 or fp8-e4m3, not '" + kvDtype + "'");
  if (kvDtype != "auto" && kvCache != "paged")
    return fail("--kv-dtype needs --kv-cache=paged");
  if (blockSize < 1 || blockSize > 4096)
    return fail("--block-size must be in 1..4096");
  int64_t quantBits = 0, quantGroup = 0;
  bool quantFloat8 = false;
  std::string quantMethod = "rtn";
  if (quant == "int4-g32" || quant == "int4-g64" || quant == "int4-g128") {
    quantBits = 4;
    quantGroup = std::stoll(quant.substr(std::string("int4-g").size()));
  } else if (quant == "int4-awq") {
    quantBits = 4;
    quantGroup = 128;
    quantMethod = "awq";
  } else if (quant == "int4-gptq" || quant == "int4-gptq-g32" || quant == "int4-gptq-g64") {
    quantBits = 4;
    quantGroup = quant == "int4-gptq" ? 128 : std::stoll(quant.substr(quant.size() - 2));
    quantMethod = "gptq";
  } else if (quant == "int8" || quant == "w8a8") {
    quantBits = 8;
    if (quant == "w8a8")
      quantMethod = "smoothquant";
  } else if (quant == "bf16") {
    quantBits = 16;
  } else if (quant == "fp8-e4m3") {
    quantBits = 8;
    quantFloat8 = true;
  } else if (quant != "none") {
    return fail("--quant must be none, bf16, fp8-e4m3, int8, int4-g32, int4-g64, int4-g128, "
                "int4-awq, int4-gptq, int4-gptq-g32, int4-gptq-g64 or w8a8");
  }
  if (quantMethod != "rtn" && calibration.empty())
    return fail("--quant=" + quant + " needs --calibration (token ids the model runs on, or "
                "a statistics file from --save-calibration)");
  if (!calibration.empty() && quantMethod == "rtn")
    return fail("--calibration is for --quant=int4-awq, int4-gptq* or w8a8");
  if (!saveCalibration.empty() && quantMethod == "rtn")
    return fail("--save-calibration needs --quant=int4-awq, int4-gptq* or w8a8");
  if ((gptqActOrder.getNumOccurrences() || gptqDamp.getNumOccurrences() ||
       gptqShrink.getNumOccurrences() || quantReport) &&
      quantMethod != "gptq")
    return fail("--gptq-act-order, --gptq-damp, --gptq-shrink and --quant-report are for "
                "--quant=int4-gptq*");
  if (!(gptqDamp > 0.0 && gptqDamp <= 1.0))
    return fail("--gptq-damp must be in (0, 1]");
  if (!(gptqShrink >= 0.0 && gptqShrink <= 1.0))
    return fail("--gptq-shrink must be in [0, 1]");
  if (calibrationContext < 0 || calibrationContext > 1000000)
    return fail("--calibration-context must be in 1..1000000");
  if (!(smoothAlpha >= 0.0 && smoothAlpha <= 1.0))
    return fail("--smooth-alpha must be in [0, 1]");
  if (!quantSkip.empty() && !quantBits)
    return fail("--quant-skip needs --quant");
  for (const std::string &s : quantSkip)
    if (s.empty())
      return fail("--quant-skip: an empty name would match every product");
  if (quantBits && !raise)
    return fail("--quant needs --raise (it runs with the raising passes)");

  if (tensorParallel != 1) {
    if (tensorParallel < 1 || tensorParallel > 1024)
      return fail("--tensor-parallel must be 1 to 1024, got " + llvm::Twine(tensorParallel));
    if (!raise || gpuTarget || expertParallel != 1 || quantBits || weightsMode != "embed")
      return fail("--tensor-parallel needs --raise, and is not yet combined with a GPU "
                  "--target, --expert-parallel, --quant or --weights=reference "
                  "(docs/parallelism.md)");
  }
  if (pipelineParallel != 1) {
    if (pipelineParallel < 1 || pipelineParallel > 1024 ||
        pipelineParallel * tensorParallel > 1024)
      return fail("--pipeline-parallel must be 1 to 1024 (times --tensor-parallel), got " +
                  llvm::Twine(pipelineParallel));
    if (!raise || kvCache != "paged")
      return fail("--pipeline-parallel needs --raise and --kv-cache=paged (the stages split "
                  "the paged step function)");
    if (gpuTarget || quantBits || weightsMode != "embed")
      return fail("--pipeline-parallel is not yet combined with a GPU --target, --quant or "
                  "--weights=reference (docs/parallelism.md)");
  }

  // One compile per rank (each in its own context): the ranks' code is the
  // same, their weights are not.
  auto build = [&](int64_t stage, int64_t tpRank, const std::string &out) -> int {
  std::string scratchDir; // --calibration's artifact and statistics
  llvm::scope_exit removeScratch([&] {
    if (!scratchDir.empty())
      (void)llvm::sys::fs::remove_directories(scratchDir);
  });

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  xfmr::registerONNXImportDialects(registry);
  registry.insert<xfmr::XfmrDialect>();
  // GPU targets: kernels to NVPTX, the host's gpu.binary and launches.
  registerAllGPUToLLVMIRTranslations(registry);
  MLIRContext context(registry);
  // An error names its node and location; the IR of the op it is attached
  // to (often the whole model function) is not appended.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  Progress progress;

  progress.step("imported " + inputFilename);
  xfmr::ONNXImportOptions options;
  options.simplifyShapes = true;
  options.functionName = "xfmr_main";
  OwningOpRef<ModuleOp> module = xfmr::importONNXModel(inputFilename, &context, options);
  if (!module)
    return 1;
  auto f = *module->getOps<func::FuncOp>().begin();
  for (const std::string &b : bindInputs)
    if (failed(bindInput(f, b)))
      return 1;
  if (!bindInputs.empty() && failed(xfmr::onnx::simplifyShapes(*module)))
    return 1;
  if (emit == "onnx") {
    progress.finish();
    return failed(printModule(*module));
  }
  std::string calibrationStats;
  if (raise && !calibration.empty()) {
    llvm::SmallString<128> scratch;
    if (auto ec = llvm::sys::fs::createUniqueDirectory("xfmr-calibration", scratch))
      return fail("cannot create a scratch directory: " + ec.message());
    scratchDir = scratch.str().str();
    FailureOr<std::string> stats = calibrationFile(*module, *host, progress, scratchDir,
                                                   /*secondMoments=*/quantMethod == "gptq");
    if (failed(stats))
      return 1;
    calibrationStats = *stats;
  }
  if (raise) {
    progress.step(kvCache == "paged" ? "raised to xfmr ops, paged KV step function"
                                     : "raised to xfmr ops");
    xfmr::RaiseOptions raiseOptions;
    raiseOptions.report = report;
    raiseOptions.skip.assign(raiseSkip.begin(), raiseSkip.end());
    raiseOptions.pagedKV = kvCache == "paged";
    raiseOptions.blockSize = blockSize;
    raiseOptions.kvDtype = kvDtype;
    raiseOptions.quantBits = quantBits;
    raiseOptions.quantGroup = quantGroup;
    raiseOptions.quantFloat8 = quantFloat8;
    raiseOptions.quantSkip.assign(quantSkip.begin(), quantSkip.end());
    raiseOptions.quantMethod = quantMethod;
    raiseOptions.calibrationFile = calibrationStats;
    raiseOptions.smoothAlpha = smoothAlpha;
    raiseOptions.gptqActOrder = gptqActOrder;
    raiseOptions.gptqDamp = gptqDamp;
    raiseOptions.gptqShrink = gptqShrink;
    raiseOptions.quantReport = quantReport;
    raiseOptions.tensorParallelRanks = tensorParallel;
    raiseOptions.tensorParallelRank = tpRank;
    raiseOptions.pipelineStages = pipelineParallel;
    raiseOptions.pipelineStage = stage;
    if (failed(runPipeline(*module, [&](OpPassManager &pm) {
          xfmr::buildRaisePipeline(pm, raiseOptions);
        })))
      return 1;
    f = *module->getOps<func::FuncOp>().begin();
    if (expertParallel != 1 && failed(checkExpertParallel(*module)))
      return 1;
    if (report) {
      xfmr::printDecodeBytes(xfmr::measureDecodeBytes(*module, minWeightBytes), llvm::outs());
    }
  }
  if (emit == "xfmr") {
    progress.finish();
    return failed(printModule(*module));
  }
  return lowerAndWrite(*module, *host, gpuTarget, progress, emit, out, quant);
  };
  if (tensorParallel * pipelineParallel == 1 || !emit.empty())
    return build(0, 0, outputFilename);
  return buildParallel(build);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllPasses();
  xfmr::onnx::registerONNXTransformsPasses();
  xfmr::registerXfmrConversionPasses();
  xfmr::cpu::registerXfmrCPUPasses();
  xfmr::gpu::registerXfmrGPUPasses();
  xfmr::registerPipelines();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "xfmr ahead-of-time compiler\n\n"
      "  xfmr-compile model.onnx --target=cpu -o model.xfa\n"
      "  xfmr-compile phi3-int4-cpu/ --kv-cache=paged -o phi3.xfa   (a model folder)\n"
      "  xfmr-compile model.onnx --tokenizer hf-folder/ --kv-cache=paged -o m.xfa\n"
      "  xfmr-compile model.onnx --emit=linalg\n\n"
      "Writes an artifact directory (manifest.json, model.so, weights.bin, and\n"
      "tokenizer.json, tokenizer_config.json, chat_template.jinja when the model\n"
      "folder or --tokenizer has them)\n"
      "that xfmr-run executes; see docs/artifact.md. MLIR's printing and\n"
      "pass-manager flags are accepted too (--help-hidden lists them).\n");
  return compile();
}
