//===- Manifest.h - manifest.json of a compiled artifact --------*- C++ -*-===//
//
// Part of xfmr.
//
// The manifest says what the runtime needs to know about an artifact
// (docs/artifact.md): the ABI version, the library and its entry point, the
// weights file, and the name, dtype and shape of every input and output. It
// comes from disk: parsing validates every field and reports the first
// problem as one message naming the file and the field, e.g.
// "model.xfa/manifest.json: inputs[1].dtype: unknown dtype 'float128'".
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_MANIFEST_H
#define XFMR_RUNTIME_MANIFEST_H

#include "xfmr/runtime/Error.h"
#include "xfmr/runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

/// The manifest format_version this runtime reads.
/// Version 2 added "files" (sizes and SHA-256), target.requires and
/// "checks".
inline constexpr int64_t kManifestFormatVersion = 2;
/// The calling convention (abi_version) this runtime speaks. Version 2 added
/// the status buffer after the inputs (docs/artifact.md).
inline constexpr int64_t kArtifactABIVersion = 2;
/// The value of the manifest's "format" field.
inline constexpr const char *kManifestFormatName = "xfmr-artifact";
/// Largest manifest.json readManifest accepts.
inline constexpr uint64_t kMaxManifestBytes = 16 << 20;

/// One extent of a TensorSpec: static when value >= 0; otherwise dynamic,
/// named by symbol (an ONNX dim_param shared across inputs) or "?" for an
/// anonymous dynamic extent.
struct Dim {
  int64_t value = -1;
  std::string symbol;

  bool isStatic() const { return value >= 0; }
  /// A dynamic extent that binds no name ("?").
  bool isAnonymous() const { return !isStatic() && symbol == "?"; }
};

/// An input or output of the model as the manifest declares it.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Dim> shape;
  /// "role": "kv_pool": a KV-cache pool of a step function, which every
  /// call reads and updates in place (see KVCacheSpec).
  bool kvPool = false;

  size_t rank() const { return shape.size(); }
};

/// "kv_cache.dtype": what the KV pools hold (xfmr-compile --kv-dtype).
enum class KVCacheDType : uint8_t { F32, F64, F16, BF16, Int8, FP8E4M3 };

/// The manifest's name of `dtype`: "f32", "f64", "f16", "bf16", "int8" or
/// "fp8-e4m3".
const char *kvCacheDTypeName(KVCacheDType dtype);
/// The KVCacheDType named `name` (kvCacheDTypeName), nothing for another name.
std::optional<KVCacheDType> kvCacheDTypeFromName(std::string_view name);
/// The element type of the key and value pools of a cache of `dtype`
/// (float8e4m3fn for fp8-e4m3).
DType kvPoolDType(KVCacheDType dtype);

/// "kv_cache" of a step function compiled with --kv-cache=paged: per layer,
/// in layer order, a key and a value pool [num_blocks, block_size,
/// num_kv_heads, head_dim] of kvPoolDType(dtype); for int8 and fp8-e4m3
/// caches (see scaled()) followed by the key and the value scales
/// [num_blocks, block_size, num_kv_heads] (float32).
struct KVCacheSpec {
  int64_t blockSize = 0;
  int64_t numLayers = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  /// Manifests without it hold float pools of their own type.
  KVCacheDType dtype = KVCacheDType::F32;
  /// "value_head_dim": the value pools' head size where it differs from the
  /// keys' (multi-head latent attention: the value pool holds the
  /// compressed latent, the key pool the RoPE key); 0 in manifests without
  /// it, where it is head_dim.
  int64_t valueHeadDim = 0;

  int64_t valueDim() const { return valueHeadDim ? valueHeadDim : headDim; }
  bool scaled() const {
    return dtype == KVCacheDType::Int8 || dtype == KVCacheDType::FP8E4M3;
  }
  /// kv_pool inputs per layer.
  int64_t poolsPerLayer() const { return scaled() ? 4 : 2; }
};

/// What the manifest says one file of the artifact holds: the loader
/// compares both before it uses the file.
struct FileIntegrity {
  uint64_t size = 0;
  /// 64 lowercase hex digits.
  std::string sha256;
};

/// weights.sources[i] (xfmr-compile --weights=reference): a file of the
/// model that the loader reads weights from, by absolute path, with the
/// size and modification time it had when the artifact was compiled; the
/// loader refuses a file that differs in either.
struct WeightSource {
  std::string path;
  uint64_t size = 0;
  int64_t mtimeNs = 0;
};

/// weights.references[i]: `bytes` bytes of source `source` at `offset`
/// fill [at, at + bytes) of the weights buffer, packed as panels of the
/// row-major [panelK, panelN] matrix of `elemBytes`-byte elements when
/// panelK > 0 (WeightLayout.h), else as they are.
struct WeightReference {
  uint64_t source = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t at = 0;
  int64_t panelK = 0, panelN = 0, elemBytes = 0;
};

/// "text.generation_defaults": what the model folder's generation_config.json
/// says about sampling, each field only when stated. Consumers apply them
/// unless told otherwise (`xfmr-run generate`'s flags); with do_sample
/// false or absent, decoding is greedy, as in transformers.
struct GenerationDefaults {
  std::optional<bool> doSample;
  /// Finite and >= 0.
  std::optional<double> temperature;
  /// In (0, 1].
  std::optional<double> topP;
  /// >= 0 (0: no top-k filter).
  std::optional<int64_t> topK;
  /// Finite and > 0.
  std::optional<double> repetitionPenalty;
  /// >= 1: tokens to generate; max_length counts the prompt too.
  std::optional<int64_t> maxNewTokens;
  std::optional<int64_t> maxLength;

  bool empty() const {
    return !doSample && !temperature && !topP && !topK && !repetitionPenalty &&
           !maxNewTokens && !maxLength;
  }
};

/// Checks the ranges above; the failure names the first bad field
/// ("top_p: must be in (0, 1], got 1.5"). xfmr-compile checks
/// generation_config.json with it, so that it never writes what the loader
/// refuses.
Status validateGenerationDefaults(const GenerationDefaults &defaults);

/// The artifact file names of the text interface (xfmr-compile writes them,
/// the manifest's "text" names them).
inline constexpr const char *kTokenizerFileName = "tokenizer.json";
inline constexpr const char *kTokenizerConfigFileName = "tokenizer_config.json";
inline constexpr const char *kChatTemplateFileName = "chat_template.jinja";

/// "text" (optional): the model's text interface, copied from its folder by
/// xfmr-compile (docs/artifact.md): the tokenizer (a Hugging Face
/// tokenizer.json), tokenizer_config.json and the chat template as files of
/// the artifact, each listed in "files" with its size and SHA-256, and the
/// special tokens and generation defaults the model folder states.
/// TextInterface.h loads it (Tokenizer, ChatTemplate).
struct TextInterface {
  /// File names inside the artifact directory; the config and the template
  /// are "" when absent.
  std::string tokenizerFile;
  std::string tokenizerConfigFile;
  std::string chatTemplateFile;
  /// Size and SHA-256 of each file above, by name (from "files").
  std::map<std::string, FileIntegrity> files;
  /// tokenizer_config.json's special tokens ("" when not stated) and the
  /// id of the bos token in the tokenizer.
  std::string bosToken, eosToken;
  std::optional<int64_t> bosId;
  /// Every id that ends a sequence (generation_config.json's eos_token_id,
  /// genai_config.json's, the eos token's); at most 64, non-negative.
  std::vector<int64_t> eosIds;
  /// tokenizer_config.json's add_bos_token / add_eos_token when stated:
  /// transformers then replaces tokenizer.json's post-processor by
  /// [bos] text [eos].
  std::optional<bool> addBosToken, addEosToken;
  GenerationDefaults defaults;
  /// Informative: the model folder's files it was taken from ("from").
  std::vector<std::string> from;
};

/// "generation" (optional): what the model's own configuration says about
/// generating (onnxruntime-genai's genai_config.json).
struct GenerationConfig {
  /// The token ids that end a sequence: at most 64, non-negative.
  std::vector<int64_t> eosTokenIds;
  /// The context length the model was built for, when stated.
  std::optional<int64_t> contextLength;
  /// Informative: the file it was taken from ("" when absent).
  std::string from;
};

/// "options" (informative): the xfmr-compile options the artifact was
/// built with (docs/artifact.md). The loader keeps what it finds and
/// ignores a field of another type.
struct CompileOptions {
  /// -O, --weights (embed, reference), --min-weight-bytes, --blas-min-rows,
  /// --parallel.
  int64_t optLevel = 2;
  std::string weights = "embed";
  int64_t minWeightBytes = 256;
  int64_t blasMinRows = 0;
  bool parallel = true;
  /// --quant ("none", "int8", "int4-g32", ...) and --quant-skip.
  std::string quant = "none";
  std::vector<std::string> quantSkip;
  /// The file name of --calibration, for the calibrated modes, and
  /// --smooth-alpha, for w8a8.
  std::optional<std::string> calibration;
  std::optional<double> smoothAlpha;
};

/// The host code of a GPU artifact: the CPU target its code was generated
/// for ("target.host"; its requires are also "target.requires").
struct HostCodeTarget {
  std::string triple;
  std::string cpu;
  std::string features;
  std::vector<std::string> requiredCPUFeatures;
};

/// One kernel of a GPU artifact as ptxas reported it ("kernels",
/// informative).
struct KernelInfo {
  std::string name;
  int64_t registers = 0;
  /// Spill stores and loads together.
  int64_t spillBytes = 0;
  int64_t stackBytes = 0;
  int64_t sharedBytes = 0;
  /// The notable instructions it uses: "mma.sync", "wgmma", "cp.async",
  /// "tma".
  std::vector<std::string> uses;
};

/// The parsed manifest.json, and what formatManifest writes. Unknown fields
/// are ignored; the informative ones ("options", "kernels", a GPU target's
/// ptx_features, kernel files, host_calls and host, the "from" of
/// "generation" and "text") are kept but not checked.
struct Manifest {
  int64_t formatVersion = 0;
  int64_t abiVersion = 0;
  /// Informative: who built the artifact and from what ("" when absent).
  std::string compiler;
  std::string source;
  /// target.kind ("cpu"); triple, cpu and features are "" when absent.
  std::string targetKind;
  std::string targetTriple;
  std::string targetCPU;
  std::string targetFeatures;
  /// kind "cuda" (GPU artifacts): target.chip (sm_90a) and
  /// target.compute_capability (90); the loader needs that device.
  std::string targetChip;
  int64_t targetComputeCapability = 0;
  /// target.kernel_checks: the messages of the run-time checks inside
  /// kernels, by number (the device word xfmr_kernel_check holds N + 1).
  std::vector<std::string> kernelChecks;
  /// kind "cuda", informative: target.ptx_features, the kernel files
  /// xfmr-compile kept for inspection (kernels_ptx, kernels_cubin; model.so
  /// embeds them), the micro-kernels the host code still calls on the CPU
  /// (host_calls), the host code's CPU target (host) and "kernels".
  std::string targetPTXFeatures;
  std::string kernelsPTXFile;
  std::string kernelsCubinFile;
  std::vector<std::string> hostCalls;
  HostCodeTarget targetHost;
  std::vector<KernelInfo> kernels;
  /// target.requires: the CPU features model.so may use, in LLVM's names
  /// (CPUFeatures.h); the loader refuses a host without one of them.
  std::vector<std::string> requiredCPUFeatures;
  /// File names inside the artifact directory (never a path).
  std::string library;
  /// The exported entry function, a C identifier.
  std::string entry;
  std::string weightsFile;
  /// Byte size of the weights buffer the entry point reads: the weights
  /// file's size plus the referenced bytes (weightSources).
  uint64_t weightsSize = 0;
  /// A power of two: the alignment every weight offset has.
  uint64_t weightsAlignment = 0;
  /// Number of tensors in the weights buffer.
  uint64_t weightsCount = 0;
  /// Weights read from the model's files at load time, in ascending `at`
  /// and not overlapping; the weights file holds the bytes between them
  /// (every byte of the buffer when there are none).
  std::vector<WeightSource> weightSources;
  std::vector<WeightReference> weightReferences;
  /// Bytes of the buffer the references fill.
  uint64_t referencedWeightBytes() const {
    uint64_t sum = 0;
    for (const WeightReference &r : weightReferences)
      sum += r.bytes;
    return sum;
  }
  /// "files": size and SHA-256 of the library and of the weights file.
  FileIntegrity libraryIntegrity;
  FileIntegrity weightsIntegrity;
  /// "checks": the message of each run-time check of the model, by number;
  /// a call whose status is N + 1 failed check N (docs/artifact.md).
  std::vector<std::string> checks;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  /// Present for step functions; checked against the kv_pool inputs.
  std::optional<KVCacheSpec> kvCache;
  /// "options" (informative; absent in hand-written manifests).
  std::optional<CompileOptions> options;
  /// "generation" (optional).
  std::optional<GenerationConfig> generation;
  /// "expert_parallel" (optional): {"ranks": N (1..1024), "experts": E}:
  /// the MPI processes the artifact runs as (xfmr-compile
  /// --expert-parallel=N; rank r owns experts [r E / N, (r + 1) E / N)).
  /// Absent: one rank, expertParallelExperts 0.
  int64_t expertParallelRanks = 1;
  int64_t expertParallelExperts = 0;
  /// "tensor_parallel" (optional): {"ranks": N (2..1024), "weights": [N
  /// file names]}: the MPI processes the artifact runs as (xfmr-compile
  /// --tensor-parallel=N); rank r reads weights file r (entry 0 is
  /// weightsFile), all of one layout (weights.size, .count), each listed in
  /// "files". Absent: one rank, no extra files.
  int64_t tensorParallelRanks = 1;
  std::vector<std::string> tensorParallelWeights;
  /// Size and SHA-256 of each of tensorParallelWeights (from "files").
  std::vector<FileIntegrity> tensorParallelIntegrity;
  /// "pipeline_parallel" (optional): {"stages": M (2..1024), "stage": s,
  /// "first_layer": a[, "stage_manifests": [M - 1 SHA-256s]]}: this
  /// directory holds stage s of M (xfmr-compile --pipeline-parallel=M), the
  /// layers from a on (kv_cache.num_layers of them). Stage 0's directory is
  /// the artifact; stage s > 0 is its subdirectory stage<s>, whose
  /// manifest.json has the SHA-256 stage 0 lists at s - 1. Absent: one stage.
  int64_t pipelineStages = 1;
  int64_t pipelineStage = 0;
  int64_t pipelineFirstLayer = 0;
  std::vector<std::string> pipelineStageManifests;
  /// The ranks of one pipeline stage: its tensor-parallel or
  /// expert-parallel ranks (1 without either).
  int64_t stageRanks() const { return std::max(expertParallelRanks, tensorParallelRanks); }
  /// The ranks the artifact runs as (1 without parallelism): every stage's.
  /// Rank r is stage r / stageRanks(), rank r % stageRanks() within it.
  int64_t parallelRanks() const { return stageRanks() * pipelineStages; }
  /// "text" (optional): tokenizer, chat template, special tokens and
  /// generation defaults.
  std::optional<TextInterface> text;

  /// The ids that end a sequence for `xfmr-run generate` (unless told other
  /// stop ids): generation's eos ids, then those of "text", each once.
  std::vector<int64_t> stopTokenIds() const;
  /// generation.context_length, 0 when not stated.
  int64_t contextLength() const {
    return generation && generation->contextLength ? *generation->contextLength
                                                   : 0;
  }
};

/// Parses and validates manifest text; `pathForErrors` prefixes every
/// message. Checks: valid JSON, "format" == kManifestFormatName, supported
/// format_version and abi_version, every required field present with its
/// type, file names without '/', a C identifier as entry, a power-of-two
/// weights alignment, known dtypes, shapes of at most kMaxRank dims that
/// are non-negative integers or non-empty strings, unique, non-empty input
/// names and unique, non-empty output names, a "files" entry (size and
/// SHA-256) for exactly the library and the weights file, whose size equals
/// weights.size less the referenced bytes, references inside the buffer, in
/// order, not overlapping, of sources that exist, target.requires as feature names and "checks" as strings;
/// a "text" section whose files are distinct file names, each listed in
/// "files", whose ids are non-negative and whose generation defaults are in
/// range ("files" may list those files besides the library and the weights).
Expected<Manifest> parseManifest(std::string_view json,
                                 const std::string &pathForErrors);
/// Reads and parses the manifest file at `path` (a regular file of at most
/// kMaxManifestBytes).
Expected<Manifest> readManifest(const std::string &path);

/// The manifest.json text of `m` (ManifestWriter.cpp): every field above,
/// keys sorted, indented by 2, with a trailing newline; optional sections
/// only when present (the GPU fields and "kernels" for kind "cuda").
/// xfmr-compile writes artifacts with it; parseManifest reads the result
/// back to an equal Manifest.
std::string formatManifest(const Manifest &m);

/// The dtype name manifests use: "float32", "bfloat16", "int64", "bool", ...
/// (dtypeName gives the short "f32" form).
const char *manifestDTypeName(DType dtype);
/// The DType of a manifest dtype name. Accepts the manifest names and, as
/// aliases, the short dtypeName names ("f32", "i64", ...).
std::optional<DType> dtypeFromManifestName(std::string_view name);

/// The declared shape: "[batch, 8, ?]", "[]" for a scalar.
std::string formatSpecShape(const TensorSpec &spec);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_MANIFEST_H
