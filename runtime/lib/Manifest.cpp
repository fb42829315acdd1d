//===- Manifest.cpp - manifest.json of a compiled artifact ----------------===//
//
// Part of xfmr.
//
// nlohmann::json is used without exceptions: parse with allow_exceptions =
// false, and every access is guarded by a type check, so nothing here throws
// (the library is built with -fexceptions only for TensorIO's protobuf).
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/WeightLayout.h"
#include "xfmr/runtime/Digest.h"
#include "xfmr/runtime/JsonSyntax.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;
using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// DType names
//===----------------------------------------------------------------------===//

const char *xfmr::rt::manifestDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I8:
    return "int8";
  case DType::I16:
    return "int16";
  case DType::I32:
    return "int32";
  case DType::I64:
    return "int64";
  case DType::U8:
    return "uint8";
  case DType::U16:
    return "uint16";
  case DType::U32:
    return "uint32";
  case DType::U64:
    return "uint64";
  case DType::Bool:
    return "bool";
  case DType::F8E4M3FN:
    return "float8e4m3fn";
  }
  return "?";
}

std::optional<DType> xfmr::rt::dtypeFromManifestName(std::string_view name) {
  for (DType d : kAllDTypes)
    if (name == manifestDTypeName(d) || name == dtypeName(d))
      return d;
  return std::nullopt;
}

namespace {

/// The KV-cache dtypes: their manifest names and their pools' element type.
struct KVCacheDTypeInfo {
  KVCacheDType dtype;
  const char *name;
  DType pool;
};
constexpr KVCacheDTypeInfo kKVCacheDTypes[] = {
    {KVCacheDType::F32, "f32", DType::F32},
    {KVCacheDType::F64, "f64", DType::F64},
    {KVCacheDType::F16, "f16", DType::F16},
    {KVCacheDType::BF16, "bf16", DType::BF16},
    {KVCacheDType::Int8, "int8", DType::I8},
    {KVCacheDType::FP8E4M3, "fp8-e4m3", DType::F8E4M3FN},
};

const KVCacheDTypeInfo &kvCacheDTypeInfo(KVCacheDType dtype) {
  for (const KVCacheDTypeInfo &info : kKVCacheDTypes)
    if (info.dtype == dtype)
      return info;
  return kKVCacheDTypes[0];
}

} // namespace

const char *xfmr::rt::kvCacheDTypeName(KVCacheDType dtype) {
  return kvCacheDTypeInfo(dtype).name;
}

std::optional<KVCacheDType> xfmr::rt::kvCacheDTypeFromName(std::string_view name) {
  for (const KVCacheDTypeInfo &info : kKVCacheDTypes)
    if (name == info.name)
      return info.dtype;
  return std::nullopt;
}

DType xfmr::rt::kvPoolDType(KVCacheDType dtype) { return kvCacheDTypeInfo(dtype).pool; }

std::vector<int64_t> Manifest::stopTokenIds() const {
  std::vector<int64_t> ids;
  if (generation)
    ids = generation->eosTokenIds;
  if (text)
    for (int64_t id : text->eosIds)
      if (std::find(ids.begin(), ids.end(), id) == ids.end())
        ids.push_back(id);
  return ids;
}

std::string xfmr::rt::formatSpecShape(const TensorSpec &spec) {
  std::string s = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i)
      s += ", ";
    const Dim &d = spec.shape[i];
    s += d.isStatic() ? std::to_string(d.value) : d.symbol;
  }
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

/// Readers of informative fields: they keep a field of the expected type
/// and ignore one of another type, so that these fields never make a
/// manifest fail. True when the field was taken.
bool readInformative(const json &obj, const char *key, std::string &out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string())
    return false;
  out = it->get<std::string>();
  return true;
}

bool readInformative(const json &obj, const char *key, int64_t &out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer() ||
      (it->is_number_unsigned() && it->get<json::number_unsigned_t>() >
                                       uint64_t(std::numeric_limits<int64_t>::max())))
    return false;
  out = it->get<int64_t>();
  return true;
}

bool readInformative(const json &obj, const char *key, bool &out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean())
    return false;
  out = it->get<bool>();
  return true;
}

bool readInformative(const json &obj, const char *key, double &out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number())
    return false;
  out = it->get<double>();
  return true;
}

/// The strings of an array (its other entries are ignored).
bool readInformative(const json &obj, const char *key, std::vector<std::string> &out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array())
    return false;
  out.clear();
  for (const json &v : *it)
    if (v.is_string())
      out.push_back(v.get<std::string>());
  return true;
}

template <typename T>
bool readInformative(const json &obj, const char *key, std::optional<T> &out) {
  T value{};
  if (!readInformative(obj, key, value))
    return false;
  out = std::move(value);
  return true;
}

/// "options" (an object; checked by the parser).
CompileOptions readCompileOptions(const json &o) {
  CompileOptions c;
  readInformative(o, "opt_level", c.optLevel);
  readInformative(o, "weights", c.weights);
  readInformative(o, "min_weight_bytes", c.minWeightBytes);
  readInformative(o, "blas_min_rows", c.blasMinRows);
  readInformative(o, "parallel", c.parallel);
  readInformative(o, "quant", c.quant);
  readInformative(o, "quant_skip", c.quantSkip);
  readInformative(o, "calibration", c.calibration);
  readInformative(o, "smooth_alpha", c.smoothAlpha);
  return c;
}

/// The informative fields of a "cuda" target and the manifest's "kernels".
void readGPUInformative(const json &root, const json &target, Manifest &m) {
  readInformative(target, "ptx_features", m.targetPTXFeatures);
  readInformative(target, "kernels_ptx", m.kernelsPTXFile);
  readInformative(target, "kernels_cubin", m.kernelsCubinFile);
  readInformative(target, "host_calls", m.hostCalls);
  if (auto host = target.find("host"); host != target.end() && host->is_object()) {
    readInformative(*host, "triple", m.targetHost.triple);
    readInformative(*host, "cpu", m.targetHost.cpu);
    readInformative(*host, "features", m.targetHost.features);
    readInformative(*host, "requires", m.targetHost.requiredCPUFeatures);
  }
  auto kernels = root.find("kernels");
  if (kernels == root.end() || !kernels->is_array())
    return;
  for (const json &k : *kernels) {
    if (!k.is_object())
      continue;
    KernelInfo info;
    readInformative(k, "name", info.name);
    readInformative(k, "registers", info.registers);
    readInformative(k, "spill_bytes", info.spillBytes);
    readInformative(k, "stack_bytes", info.stackBytes);
    readInformative(k, "shared_bytes", info.sharedBytes);
    readInformative(k, "uses", info.uses);
    m.kernels.push_back(std::move(info));
  }
}

/// Validates the fields of one manifest; every failure names the file and
/// the field.
class ManifestParser {
public:
  explicit ManifestParser(const std::string &file) : file(file) {}

  Expected<Manifest> parse(const json &root);

private:
  Error fail(const std::string &field, const std::string &why) const {
    return Error(file + ": " + field + ": " + why);
  }
  static std::string join(const std::string &parent, const char *key) {
    return parent.empty() ? key : parent + "." + key;
  }
  static std::string quoted(const std::string &s) { return "'" + s + "'"; }

  /// The member `key` of `obj`, or null when it is absent and optional.
  Expected<const json *> member(const json &obj, const std::string &parent,
                                const char *key, bool required) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        return fail(join(parent, key), "missing");
      return static_cast<const json *>(nullptr);
    }
    return &*it;
  }

  Expected<std::string> getString(const json &obj, const std::string &parent,
                                  const char *key, bool required) const {
    Expected<const json *> m = member(obj, parent, key, required);
    if (!m)
      return m.takeError();
    if (!*m)
      return std::string();
    if (!(*m)->is_string())
      return fail(join(parent, key),
                  std::string("expected a string, got ") + (*m)->type_name());
    return (*m)->get_ref<const std::string &>();
  }

  Expected<const json *> getObject(const json &obj, const std::string &parent,
                                   const char *key, bool required) const {
    Expected<const json *> m = member(obj, parent, key, required);
    if (!m || !*m)
      return m;
    if (!(*m)->is_object())
      return fail(join(parent, key),
                  std::string("expected an object, got ") + (*m)->type_name());
    return m;
  }

  Expected<const json *> getArray(const json &obj, const std::string &parent,
                                  const char *key) const {
    Expected<const json *> m = member(obj, parent, key, /*required=*/true);
    if (!m)
      return m;
    if (!(*m)->is_array())
      return fail(join(parent, key),
                  std::string("expected an array, got ") + (*m)->type_name());
    return m;
  }

  /// A JSON integer that fits int64 (3.0 and 1e3 are not integers).
  Expected<int64_t> asInt(const json &v, const std::string &field) const {
    if (v.is_number_unsigned()) {
      auto u = v.get<json::number_unsigned_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(field, "integer " + std::to_string(u) + " is too large");
      return static_cast<int64_t>(u);
    }
    if (v.is_number_integer())
      return v.get<json::number_integer_t>();
    return fail(field,
                std::string("expected an integer, got ") +
                    (v.is_number() ? "a fractional number" : v.type_name()));
  }

  Expected<int64_t> getNonNegativeInt(const json &obj,
                                      const std::string &parent,
                                      const char *key) const {
    Expected<const json *> m = member(obj, parent, key, /*required=*/true);
    if (!m)
      return m.takeError();
    Expected<int64_t> v = asInt(**m, join(parent, key));
    if (v && *v < 0)
      return fail(join(parent, key),
                  "must not be negative, got " + std::to_string(*v));
    return v;
  }

  Expected<int64_t> getVersion(const json &root, const char *key,
                               int64_t supported) const {
    Expected<int64_t> v = getNonNegativeInt(root, "", key);
    if (v && *v != supported)
      return fail(key, "unsupported version " + std::to_string(*v) +
                           " (this runtime reads " + std::to_string(supported) +
                           ")");
    return v;
  }

  /// A file name inside the artifact directory: no path.
  Expected<std::string> getFileName(const json &obj, const std::string &parent,
                                    const char *key) const {
    Expected<std::string> s = getString(obj, parent, key, /*required=*/true);
    if (!s)
      return s;
    if (s->empty() || *s == "." || *s == ".." ||
        s->find_first_of(std::string("/\0", 2)) != std::string::npos)
      return fail(join(parent, key),
                  quoted(*s) +
                      " must be a file name inside the artifact directory");
    return s;
  }

  /// A required array of at most `maxCount` strings of 1 to `maxLength`
  /// bytes.
  Expected<std::vector<std::string>> getStrings(const json &obj, const std::string &parent,
                                                const char *key, size_t maxCount,
                                                size_t maxLength) const {
    Expected<const json *> a = getArray(obj, parent, key);
    if (!a)
      return a.takeError();
    std::string field = join(parent, key);
    if ((*a)->size() > maxCount)
      return fail(field, "more than " + std::to_string(maxCount) + " entries");
    std::vector<std::string> out;
    for (size_t i = 0; i < (*a)->size(); ++i) {
      const json &v = (**a)[i];
      std::string where = field + "[" + std::to_string(i) + "]";
      if (!v.is_string())
        return fail(where, std::string("expected a string, got ") + v.type_name());
      const std::string &str = v.get_ref<const std::string &>();
      if (str.empty() || str.size() > maxLength)
        return fail(where, "must have 1 to " + std::to_string(maxLength) + " bytes");
      out.push_back(str);
    }
    return out;
  }

  /// "generation" (optional): {"eos_token_ids": [at most 64 ids],
  /// "context_length": N, "from": "..."}, each optional.
  Status getGeneration(const json &root, Manifest &m) const {
    Expected<const json *> gen = getObject(root, "", "generation", false);
    if (!gen)
      return gen.takeError();
    if (!*gen)
      return {};
    GenerationConfig g;
    if ((*gen)->contains("eos_token_ids")) {
      Expected<std::vector<int64_t>> ids =
          getTokenIds(**gen, "generation", "eos_token_ids");
      if (!ids)
        return ids.takeError();
      g.eosTokenIds = ids.take();
    }
    if ((*gen)->contains("context_length")) {
      Expected<int64_t> n = getNonNegativeInt(**gen, "generation", "context_length");
      if (!n)
        return n.takeError();
      g.contextLength = *n;
    }
    readInformative(**gen, "from", g.from);
    m.generation = std::move(g);
    return {};
  }

  /// A required array of at most 64 non-negative token ids.
  Expected<std::vector<int64_t>> getTokenIds(const json &obj, const std::string &parent,
                                             const char *key) const {
    Expected<const json *> ids = getArray(obj, parent, key);
    if (!ids)
      return ids.takeError();
    std::string field = join(parent, key);
    if ((*ids)->size() > 64)
      return fail(field, "more than 64 entries");
    std::vector<int64_t> out;
    for (size_t i = 0; i < (*ids)->size(); ++i) {
      std::string where = field + "[" + std::to_string(i) + "]";
      Expected<int64_t> id = asInt((**ids)[i], where);
      if (!id)
        return id.takeError();
      if (*id < 0)
        return fail(where, "must be non-negative");
      out.push_back(*id);
    }
    return Expected<std::vector<int64_t>>(std::move(out));
  }

  /// "expert_parallel" (optional): {"ranks": 1..1024, "experts": E >= ranks,
  /// a multiple of ranks}.
  Status getExpertParallel(const json &root, Manifest &m) const {
    Expected<const json *> ep = getObject(root, "", "expert_parallel", false);
    if (!ep)
      return ep.takeError();
    if (!*ep)
      return {};
    Expected<int64_t> ranks = getNonNegativeInt(**ep, "expert_parallel", "ranks");
    if (!ranks)
      return ranks.takeError();
    Expected<int64_t> experts = getNonNegativeInt(**ep, "expert_parallel", "experts");
    if (!experts)
      return experts.takeError();
    if (*ranks < 1 || *ranks > 1024)
      return fail("expert_parallel.ranks", "must be 1 to 1024");
    if (*experts < *ranks || *experts % *ranks)
      return fail("expert_parallel.experts", "must be a positive multiple of the ranks");
    m.expertParallelRanks = *ranks;
    m.expertParallelExperts = *experts;
    return {};
  }

  /// "tensor_parallel" (optional, after "weights"): {"ranks": N, "weights":
  /// [N distinct file names, the first weights.file]}.
  Status getTensorParallel(const json &root, Manifest &m) const {
    Expected<const json *> tp = getObject(root, "", "tensor_parallel", false);
    if (!tp)
      return tp.takeError();
    if (!*tp)
      return {};
    Expected<int64_t> ranks = getNonNegativeInt(**tp, "tensor_parallel", "ranks");
    if (!ranks)
      return ranks.takeError();
    if (*ranks < 2 || *ranks > 1024)
      return fail("tensor_parallel.ranks", "must be 2 to 1024");
    if (m.expertParallelRanks > 1)
      return fail("tensor_parallel", "cannot be combined with expert_parallel");
    Expected<std::vector<std::string>> files =
        getStrings(**tp, "tensor_parallel", "weights", 1024, 255);
    if (!files)
      return files.takeError();
    if (static_cast<int64_t>(files->size()) != *ranks)
      return fail("tensor_parallel.weights", "must name one file per rank (" +
                                                 std::to_string(*ranks) + ")");
    for (size_t r = 0; r < files->size(); ++r) {
      const std::string &f = (*files)[r];
      std::string where = "tensor_parallel.weights[" + std::to_string(r) + "]";
      if (f == "." || f == ".." || f.find('/') != std::string::npos)
        return fail(where, quoted(f) + " must be a file name inside the artifact directory");
      if ((r == 0) != (f == m.weightsFile) || f == m.library || f == "manifest.json" ||
          std::count(files->begin(), files->end(), f) > 1)
        return fail(where, quoted(f) + (r == 0 ? " must be weights.file"
                                               : " must be a weights file of its own"));
    }
    m.tensorParallelRanks = *ranks;
    m.tensorParallelWeights = files.take();
    return {};
  }

  /// "pipeline_parallel" (optional): {"stages": M, "stage": s,
  /// "first_layer": a[, "stage_manifests": [M - 1 SHA-256s], stage 0 only]}.
  /// Stage 0 without stage_manifests is a stage being assembled.
  Status getPipelineParallel(const json &root, Manifest &m) const {
    Expected<const json *> pp = getObject(root, "", "pipeline_parallel", false);
    if (!pp)
      return pp.takeError();
    if (!*pp)
      return {};
    int64_t *fields[] = {&m.pipelineStages, &m.pipelineStage, &m.pipelineFirstLayer};
    const char *names[] = {"stages", "stage", "first_layer"};
    for (int i = 0; i < 3; ++i) {
      Expected<int64_t> v = getNonNegativeInt(**pp, "pipeline_parallel", names[i]);
      if (!v)
        return v.takeError();
      *fields[i] = *v;
    }
    if (m.pipelineStages < 2 || m.pipelineStages > 1024)
      return fail("pipeline_parallel.stages", "must be 2 to 1024");
    if (m.pipelineStage >= m.pipelineStages)
      return fail("pipeline_parallel.stage", "must be below pipeline_parallel.stages");
    if (m.pipelineFirstLayer > (int64_t(1) << 20))
      return fail("pipeline_parallel.first_layer", "is too large");
    if (m.pipelineStage > 0) {
      if ((*pp)->contains("stage_manifests"))
        return fail("pipeline_parallel.stage_manifests", "belongs to stage 0 only");
      return {};
    }
    // Absent while xfmr-compile assembles the stages; Artifact::load
    // refuses to run stage 0 without it.
    if (!(*pp)->contains("stage_manifests"))
      return {};
    Expected<std::vector<std::string>> digests =
        getStrings(**pp, "pipeline_parallel", "stage_manifests", 1023, 64);
    if (!digests)
      return digests.takeError();
    if (static_cast<int64_t>(digests->size()) != m.pipelineStages - 1)
      return fail("pipeline_parallel.stage_manifests",
                  "must hold one SHA-256 per stage after the first (" +
                      std::to_string(m.pipelineStages - 1) + ")");
    for (const std::string &d : *digests)
      if (d.size() != 64 || d.find_first_not_of("0123456789abcdef") != std::string::npos)
        return fail("pipeline_parallel.stage_manifests",
                    quoted(d) + " is not a SHA-256 in lowercase hex");
    m.pipelineStageManifests = digests.take();
    return {};
  }

  /// "text" (optional): the text interface; its files are checked against
  /// "files" later (getTextFiles).
  Status getText(const json &root, Manifest &m) const;
  Status getTextFiles(const json &files, Manifest &m) const;

  /// files.<name>: {"size": N, "sha256": "<64 hex digits>"}.
  Expected<FileIntegrity> getFileIntegrity(const json &files, const std::string &name) const {
    std::string field = "files." + name;
    Expected<const json *> entry = getObject(files, "files", name.c_str(), true);
    if (!entry)
      return entry.takeError();
    FileIntegrity f;
    Expected<int64_t> size = getNonNegativeInt(**entry, field, "size");
    if (!size)
      return size.takeError();
    f.size = static_cast<uint64_t>(*size);
    Expected<std::string> sha = getString(**entry, field, "sha256", true);
    if (!sha)
      return sha.takeError();
    if (!isSHA256Hex(*sha))
      return fail(field + ".sha256", "expected 64 lowercase hex digits, got " + quoted(*sha));
    f.sha256 = sha.take();
    return f;
  }

  /// weights.sources and weights.references (both optional, together).
  Status getWeightReferences(const json &weights, Manifest &m) const;
  Expected<WeightReference> getWeightReference(const json &v, const std::string &field,
                                               const Manifest &m) const;

  /// "kv_cache" (required when inputs have role "kv_pool"), checked
  /// against the kv_pool inputs.
  Status getKVCache(const json &root, Manifest &m) const;

  Expected<std::vector<TensorSpec>> getSpecs(const json &root,
                                             const char *key) const;
  Expected<TensorSpec> getSpec(const json &v, const std::string &field) const;

  const std::string &file;
};

bool isCIdentifier(const std::string &s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_') ||
        static_cast<unsigned char>(c) >= 0x80)
      return false;
  return true;
}

Expected<TensorSpec> ManifestParser::getSpec(const json &v,
                                             const std::string &field) const {
  if (!v.is_object())
    return fail(field, std::string("expected an object, got ") + v.type_name());
  TensorSpec spec;
  Expected<std::string> name = getString(v, field, "name", /*required=*/true);
  if (!name)
    return name.takeError();
  if (name->empty())
    return fail(field + ".name", "must not be empty");
  spec.name = name.take();

  if (auto role = v.find("role"); role != v.end()) {
    if (!role->is_string() || role->get<std::string>() != "kv_pool")
      return fail(field + ".role", "unknown role (expected \"kv_pool\")");
    spec.kvPool = true;
  }

  Expected<std::string> dtype = getString(v, field, "dtype", /*required=*/true);
  if (!dtype)
    return dtype.takeError();
  std::optional<DType> d = dtypeFromManifestName(*dtype);
  if (!d)
    return fail(field + ".dtype", "unknown dtype " + quoted(*dtype));
  spec.dtype = *d;

  Expected<const json *> shape = getArray(v, field, "shape");
  if (!shape)
    return shape.takeError();
  if ((*shape)->size() > kMaxRank)
    return fail(field + ".shape", "rank " + std::to_string((*shape)->size()) +
                                      " exceeds the limit of " +
                                      std::to_string(kMaxRank));
  for (size_t i = 0; i < (*shape)->size(); ++i) {
    const json &e = (**shape)[i];
    std::string dimField = field + ".shape[" + std::to_string(i) + "]";
    Dim dim;
    if (e.is_string()) {
      dim.symbol = e.get_ref<const std::string &>();
      if (dim.symbol.empty())
        return fail(dimField, "a symbolic dim must have a name (or be '?')");
    } else if (e.is_number()) {
      Expected<int64_t> n = asInt(e, dimField);
      if (!n)
        return n.takeError();
      if (*n < 0)
        return fail(dimField, "negative dim " + std::to_string(*n));
      dim.value = *n;
    } else {
      return fail(dimField, std::string("expected an integer or a string, "
                                        "got ") +
                                e.type_name());
    }
    spec.shape.push_back(std::move(dim));
  }
  return Expected<TensorSpec>(std::move(spec));
}

Status ManifestParser::getWeightReferences(const json &weights, Manifest &m) const {
  bool hasSources = weights.contains("sources"), hasReferences = weights.contains("references");
  if (hasSources != hasReferences)
    return fail(hasSources ? "weights.references" : "weights.sources",
                "missing (weights.sources and weights.references come together)");
  if (!hasSources)
    return {};
  Expected<const json *> sources = getArray(weights, "weights", "sources");
  if (!sources)
    return sources.takeError();
  if ((*sources)->empty() || (*sources)->size() > 4096)
    return fail("weights.sources", "must have 1 to 4096 entries");
  for (size_t i = 0; i < (*sources)->size(); ++i) {
    const json &v = (**sources)[i];
    std::string field = "weights.sources[" + std::to_string(i) + "]";
    if (!v.is_object())
      return fail(field, std::string("expected an object, got ") + v.type_name());
    WeightSource src;
    Expected<std::string> path = getString(v, field, "path", true);
    if (!path)
      return path.takeError();
    if (path->empty() || (*path)[0] != '/' || path->find('\0') != std::string::npos)
      return fail(field + ".path", quoted(*path) + " is not an absolute path");
    src.path = path.take();
    Expected<int64_t> size = getNonNegativeInt(v, field, "size");
    if (!size)
      return size.takeError();
    src.size = static_cast<uint64_t>(*size);
    Expected<int64_t> mtime = getNonNegativeInt(v, field, "mtime_ns");
    if (!mtime)
      return mtime.takeError();
    src.mtimeNs = *mtime;
    m.weightSources.push_back(std::move(src));
  }
  Expected<const json *> refs = getArray(weights, "weights", "references");
  if (!refs)
    return refs.takeError();
  if ((*refs)->size() > (size_t(1) << 20))
    return fail("weights.references", "more than 2^20 entries");
  uint64_t end = 0;
  for (size_t i = 0; i < (*refs)->size(); ++i) {
    std::string field = "weights.references[" + std::to_string(i) + "]";
    Expected<WeightReference> r = getWeightReference((**refs)[i], field, m);
    if (!r)
      return r.takeError();
    if (r->at < end)
      return fail(field + ".at", "overlaps the reference before it (references are in "
                                 "ascending order)");
    end = r->at + r->bytes;
    m.weightReferences.push_back(*r);
  }
  return {};
}

/// {"source": i, "offset": o, "bytes": n, "at": a[, "panels": [k, n, e]]}.
Expected<WeightReference> ManifestParser::getWeightReference(const json &v,
                                                             const std::string &field,
                                                             const Manifest &m) const {
  if (!v.is_object())
    return fail(field, std::string("expected an object, got ") + v.type_name());
  WeightReference r;
  for (auto [key, out] : {std::pair<const char *, uint64_t *>{"source", &r.source},
                          {"offset", &r.offset},
                          {"bytes", &r.bytes},
                          {"at", &r.at}}) {
    Expected<int64_t> n = getNonNegativeInt(v, field, key);
    if (!n)
      return n.takeError();
    *out = static_cast<uint64_t>(*n);
  }
  if (r.source >= m.weightSources.size())
    return fail(field + ".source", std::to_string(r.source) + " names no entry of the " +
                                       std::to_string(m.weightSources.size()) +
                                       " weights.sources");
  const WeightSource &src = m.weightSources[r.source];
  if (r.offset > src.size || r.bytes > src.size - r.offset)
    return fail(field, "[" + std::to_string(r.offset) + ", +" + std::to_string(r.bytes) +
                           ") lies beyond the " + std::to_string(src.size) + " bytes of " +
                           quoted(src.path));
  if (r.at % m.weightsAlignment != 0 || r.at > m.weightsSize || r.bytes > m.weightsSize - r.at)
    return fail(field + ".at", std::to_string(r.at) + " +" + std::to_string(r.bytes) +
                                   " is not an aligned range of the " +
                                   std::to_string(m.weightsSize) + "-byte weights buffer");
  if (!v.contains("panels"))
    return r;
  Expected<const json *> panels = getArray(v, field, "panels");
  if (!panels)
    return panels.takeError();
  if ((*panels)->size() != 3)
    return fail(field + ".panels", "expected [k, n, element bytes]");
  int64_t dims[3];
  for (size_t i = 0; i < 3; ++i) {
    Expected<int64_t> d = asInt((**panels)[i], field + ".panels[" + std::to_string(i) + "]");
    if (!d)
      return d.takeError();
    dims[i] = *d;
  }
  auto [k, n, e] = dims;
  bool shapeOk = k > 0 && n > 0 && n % kPanelWidth == 0 && (e == 1 || e == 2 || e == 4) &&
                 static_cast<uint64_t>(n) <= r.bytes / static_cast<uint64_t>(e) &&
                 static_cast<uint64_t>(k) == r.bytes / static_cast<uint64_t>(n * e) &&
                 r.bytes % static_cast<uint64_t>(n * e) == 0;
  if (!shapeOk)
    return fail(field + ".panels", "[" + std::to_string(k) + ", " + std::to_string(n) + ", " +
                                       std::to_string(e) + "] does not describe " +
                                       std::to_string(r.bytes) + " bytes in panels of " +
                                       std::to_string(kPanelWidth) + " columns");
  r.panelK = k;
  r.panelN = n;
  r.elemBytes = e;
  return r;
}

Status ManifestParser::getText(const json &root, Manifest &m) const {
  Expected<const json *> text = getObject(root, "", "text", false);
  if (!text)
    return text.takeError();
  if (!*text)
    return {};
  const json &t = **text;
  TextInterface ti;
  Expected<std::string> tokenizer = getFileName(t, "text", "tokenizer");
  if (!tokenizer)
    return tokenizer.takeError();
  ti.tokenizerFile = tokenizer.take();
  for (auto [key, out] : {std::pair<const char *, std::string *>{"tokenizer_config",
                                                                 &ti.tokenizerConfigFile},
                          {"chat_template", &ti.chatTemplateFile}}) {
    if (!t.contains(key))
      continue;
    Expected<std::string> name = getFileName(t, "text", key);
    if (!name)
      return name.takeError();
    *out = name.take();
  }
  // Each file once, and none of the artifact's own.
  std::set<std::string> names;
  for (auto [key, name] : {std::pair<const char *, const std::string *>{"tokenizer",
                                                                        &ti.tokenizerFile},
                           {"tokenizer_config", &ti.tokenizerConfigFile},
                           {"chat_template", &ti.chatTemplateFile}}) {
    if (name->empty())
      continue;
    if (*name == m.library || *name == m.weightsFile || *name == "manifest.json" ||
        !names.insert(*name).second)
      return fail(std::string("text.") + key,
                  quoted(*name) + " is already another file of the artifact");
  }
  for (auto [key, out] : {std::pair<const char *, std::string *>{"bos_token", &ti.bosToken},
                          {"eos_token", &ti.eosToken}}) {
    Expected<std::string> token = getString(t, "text", key, false);
    if (!token)
      return token.takeError();
    *out = token.take();
  }
  if (t.contains("bos_token_id")) {
    Expected<int64_t> id = getNonNegativeInt(t, "text", "bos_token_id");
    if (!id)
      return id.takeError();
    ti.bosId = *id;
  }
  if (t.contains("eos_token_ids")) {
    Expected<std::vector<int64_t>> ids = getTokenIds(t, "text", "eos_token_ids");
    if (!ids)
      return ids.takeError();
    ti.eosIds = ids.take();
  }
  for (auto [key, out] : {std::pair<const char *, std::optional<bool> *>{"add_bos_token",
                                                                         &ti.addBosToken},
                          {"add_eos_token", &ti.addEosToken}}) {
    auto v = t.find(key);
    if (v == t.end())
      continue;
    if (!v->is_boolean())
      return fail(std::string("text.") + key,
                  std::string("expected a boolean, got ") + v->type_name());
    *out = v->get<bool>();
  }
  Expected<const json *> defaults = getObject(t, "text", "generation_defaults", false);
  if (!defaults)
    return defaults.takeError();
  if (*defaults) {
    const json &d = **defaults;
    const std::string parent = "text.generation_defaults";
    GenerationDefaults &g = ti.defaults;
    if (auto v = d.find("do_sample"); v != d.end()) {
      if (!v->is_boolean())
        return fail(parent + ".do_sample",
                    std::string("expected a boolean, got ") + v->type_name());
      g.doSample = v->get<bool>();
    }
    for (auto [key, out] : {std::pair<const char *, std::optional<double> *>{"temperature",
                                                                             &g.temperature},
                            {"top_p", &g.topP},
                            {"repetition_penalty", &g.repetitionPenalty}}) {
      auto v = d.find(key);
      if (v == d.end())
        continue;
      if (!v->is_number())
        return fail(parent + "." + key,
                    std::string("expected a number, got ") + v->type_name());
      *out = v->get<double>();
    }
    for (auto [key, out] : {std::pair<const char *, std::optional<int64_t> *>{"top_k", &g.topK},
                            {"max_new_tokens", &g.maxNewTokens},
                            {"max_length", &g.maxLength}}) {
      if (!d.contains(key))
        continue;
      Expected<int64_t> n = getNonNegativeInt(d, parent, key);
      if (!n)
        return n.takeError();
      *out = *n;
    }
    if (Status s = validateGenerationDefaults(g); !s)
      return fail(parent, s.error());
  }
  readInformative(t, "from", ti.from);
  m.text = std::move(ti);
  return {};
}

Status ManifestParser::getTextFiles(const json &files, Manifest &m) const {
  if (!m.text)
    return {};
  for (const std::string *name :
       {&m.text->tokenizerFile, &m.text->tokenizerConfigFile, &m.text->chatTemplateFile}) {
    if (name->empty())
      continue;
    Expected<FileIntegrity> f = getFileIntegrity(files, *name);
    if (!f)
      return f.takeError();
    m.text->files[*name] = f.take();
  }
  return {};
}

Expected<std::vector<TensorSpec>>
ManifestParser::getSpecs(const json &root, const char *key) const {
  Expected<const json *> arr = getArray(root, "", key);
  if (!arr)
    return arr.takeError();
  std::vector<TensorSpec> specs;
  std::set<std::string> seen;
  for (size_t i = 0; i < (*arr)->size(); ++i) {
    std::string field = std::string(key) + "[" + std::to_string(i) + "]";
    Expected<TensorSpec> spec = getSpec((**arr)[i], field);
    if (!spec)
      return spec.takeError();
    if (!seen.insert(spec->name).second)
      return fail(field + ".name", "duplicate name " + quoted(spec->name));
    specs.push_back(spec.take());
  }
  return Expected<std::vector<TensorSpec>>(std::move(specs));
}

Expected<Manifest> ManifestParser::parse(const json &root) {
  if (!root.is_object())
    return Error(file + ": expected a JSON object, got " + root.type_name());
  Manifest m;

  Expected<std::string> format = getString(root, "", "format", true);
  if (!format)
    return format.takeError();
  if (*format != kManifestFormatName)
    return fail("format", "expected '" + std::string(kManifestFormatName) +
                              "', got " + quoted(*format));
  Expected<int64_t> formatVersion =
      getVersion(root, "format_version", kManifestFormatVersion);
  if (!formatVersion)
    return formatVersion.takeError();
  m.formatVersion = *formatVersion;
  Expected<int64_t> abiVersion =
      getVersion(root, "abi_version", kArtifactABIVersion);
  if (!abiVersion)
    return abiVersion.takeError();
  m.abiVersion = *abiVersion;

  Expected<std::string> compiler = getString(root, "", "compiler", false);
  if (!compiler)
    return compiler.takeError();
  m.compiler = compiler.take();
  Expected<std::string> source = getString(root, "", "source", false);
  if (!source)
    return source.takeError();
  m.source = source.take();

  Expected<const json *> target = getObject(root, "", "target", true);
  if (!target)
    return target.takeError();
  struct {
    const char *key;
    bool required;
    std::string *dst;
  } targetFields[] = {{"kind", true, &m.targetKind},
                      {"triple", false, &m.targetTriple},
                      {"cpu", false, &m.targetCPU},
                      {"features", false, &m.targetFeatures}};
  for (auto &f : targetFields) {
    Expected<std::string> s = getString(**target, "target", f.key, f.required);
    if (!s)
      return s.takeError();
    *f.dst = s.take();
  }
  if (m.targetKind.empty())
    return fail("target.kind", "must not be empty");
  if (m.targetKind == "cuda") {
    Expected<std::string> chip = getString(**target, "target", "chip", true);
    if (!chip)
      return chip.takeError();
    m.targetChip = chip.take();
    Expected<int64_t> cc = getNonNegativeInt(**target, "target", "compute_capability");
    if (!cc)
      return cc.takeError();
    m.targetComputeCapability = *cc;
    Expected<std::vector<std::string>> kernelChecks =
        getStrings(**target, "target", "kernel_checks", 1 << 20, 1 << 16);
    if (!kernelChecks)
      return kernelChecks.takeError();
    m.kernelChecks = kernelChecks.take();
  }
  Expected<std::vector<std::string>> requires_ =
      getStrings(**target, "target", "requires", 256, 64);
  if (!requires_)
    return requires_.takeError();
  m.requiredCPUFeatures = requires_.take();

  Expected<const json *> options = getObject(root, "", "options", false);
  if (!options)
    return options.takeError();
  if (*options)
    m.options = readCompileOptions(**options);
  if (m.targetKind == "cuda")
    readGPUInformative(root, **target, m);
  if (Status s = getExpertParallel(root, m); !s)
    return s.takeError();
  if (Status s = getGeneration(root, m); !s)
    return s.takeError();

  Expected<std::string> library = getFileName(root, "", "library");
  if (!library)
    return library.takeError();
  m.library = library.take();
  Expected<std::string> entry = getString(root, "", "entry", true);
  if (!entry)
    return entry.takeError();
  if (!isCIdentifier(*entry))
    return fail("entry", quoted(*entry) + " is not a C identifier");
  m.entry = entry.take();

  Expected<const json *> weights = getObject(root, "", "weights", true);
  if (!weights)
    return weights.takeError();
  Expected<std::string> weightsFile = getFileName(**weights, "weights", "file");
  if (!weightsFile)
    return weightsFile.takeError();
  m.weightsFile = weightsFile.take();
  if (m.weightsFile == m.library)
    return fail("weights.file", "names the library " + quoted(m.library));
  Expected<int64_t> size = getNonNegativeInt(**weights, "weights", "size");
  if (!size)
    return size.takeError();
  m.weightsSize = static_cast<uint64_t>(*size);
  Expected<int64_t> alignment =
      getNonNegativeInt(**weights, "weights", "alignment");
  if (!alignment)
    return alignment.takeError();
  if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0)
    return fail("weights.alignment",
                "must be a power of two, got " + std::to_string(*alignment));
  m.weightsAlignment = static_cast<uint64_t>(*alignment);
  Expected<int64_t> count = getNonNegativeInt(**weights, "weights", "count");
  if (!count)
    return count.takeError();
  m.weightsCount = static_cast<uint64_t>(*count);
  if (Status s = getTensorParallel(root, m); !s)
    return s.takeError();
  if (Status s = getPipelineParallel(root, m); !s)
    return s.takeError();

  if (Status s = getText(root, m); !s)
    return s.takeError();
  Expected<const json *> files = getObject(root, "", "files", true);
  if (!files)
    return files.takeError();
  for (auto it = (*files)->begin(); it != (*files)->end(); ++it)
    if (it.key() != m.library && it.key() != m.weightsFile &&
        std::find(m.tensorParallelWeights.begin(), m.tensorParallelWeights.end(),
                  it.key()) == m.tensorParallelWeights.end() &&
        !(m.text && (it.key() == m.text->tokenizerFile ||
                     it.key() == m.text->tokenizerConfigFile ||
                     it.key() == m.text->chatTemplateFile)))
      return fail("files", quoted(it.key()) +
                               (m.text ? " is neither the library, the weights file nor a "
                                         "file of \"text\""
                                       : " is neither the library nor the weights file"));
  Expected<FileIntegrity> libraryIntegrity = getFileIntegrity(**files, m.library);
  if (!libraryIntegrity)
    return libraryIntegrity.takeError();
  m.libraryIntegrity = libraryIntegrity.take();
  Expected<FileIntegrity> weightsIntegrity = getFileIntegrity(**files, m.weightsFile);
  if (!weightsIntegrity)
    return weightsIntegrity.takeError();
  m.weightsIntegrity = weightsIntegrity.take();
  for (size_t r = 0; r < m.tensorParallelWeights.size(); ++r) {
    const std::string &name = m.tensorParallelWeights[r];
    Expected<FileIntegrity> integrity = getFileIntegrity(**files, name);
    if (!integrity)
      return integrity.takeError();
    if (integrity->size != m.weightsIntegrity.size)
      return fail("files." + name + ".size", "differs from " + m.weightsFile +
                                                 "'s: every rank's weights have one layout");
    m.tensorParallelIntegrity.push_back(integrity.take());
  }
  if (Status s = getTextFiles(**files, m); !s)
    return s.takeError();
  if (Status s = getWeightReferences(**weights, m); !s)
    return s.takeError();
  uint64_t stored = m.weightsSize - m.referencedWeightBytes();
  if (m.weightsIntegrity.size != stored)
    return fail("files." + m.weightsFile + ".size",
                std::to_string(m.weightsIntegrity.size) + " disagrees with weights.size " +
                    std::to_string(m.weightsSize) +
                    (m.weightReferences.empty()
                         ? std::string()
                         : " less the " + std::to_string(m.referencedWeightBytes()) +
                               " referenced bytes"));

  Expected<std::vector<std::string>> checks = getStrings(root, "", "checks", 1 << 20, 1 << 16);
  if (!checks)
    return checks.takeError();
  m.checks = checks.take();

  Expected<std::vector<TensorSpec>> inputs = getSpecs(root, "inputs");
  if (!inputs)
    return inputs.takeError();
  m.inputs = inputs.take();
  Expected<std::vector<TensorSpec>> outputs = getSpecs(root, "outputs");
  if (!outputs)
    return outputs.takeError();
  m.outputs = outputs.take();

  if (Status s = getKVCache(root, m); !s)
    return s.takeError();
  return Expected<Manifest>(std::move(m));
}

Status ManifestParser::getKVCache(const json &root, Manifest &m) const {
  auto kv = root.find("kv_cache");
  size_t pools = 0;
  for (const TensorSpec &spec : m.inputs)
    pools += spec.kvPool;
  if (kv == root.end()) {
    if (pools)
      return fail("kv_cache", "missing, but inputs have role \"kv_pool\"");
    return {};
  }
  if (!kv->is_object())
    return fail("kv_cache", std::string("expected an object, got ") + kv->type_name());
  KVCacheSpec spec;
  for (auto [key, out] : {std::pair<const char *, int64_t *>{"block_size", &spec.blockSize},
                          {"num_layers", &spec.numLayers},
                          {"num_kv_heads", &spec.numKVHeads},
                          {"head_dim", &spec.headDim}}) {
    Expected<int64_t> v = getNonNegativeInt(*kv, "kv_cache", key);
    if (!v)
      return v.takeError();
    if (*v == 0)
      return fail(std::string("kv_cache.") + key, "must be positive");
    *out = *v;
  }
  if (kv->contains("value_head_dim")) {
    Expected<int64_t> v = getNonNegativeInt(*kv, "kv_cache", "value_head_dim");
    if (!v)
      return v.takeError();
    if (*v == 0)
      return fail("kv_cache.value_head_dim", "must be positive");
    spec.valueHeadDim = *v;
  }
  if (kv->contains("dtype")) {
    Expected<std::string> dtype = getString(*kv, "kv_cache", "dtype", /*required=*/true);
    if (!dtype)
      return dtype.takeError();
    std::optional<KVCacheDType> d = kvCacheDTypeFromName(*dtype);
    if (!d)
      return fail("kv_cache.dtype",
                  quoted(*dtype) + " is not one of f32, f64, f16, bf16, int8, fp8-e4m3");
    spec.dtype = *d;
  } else {
    // Manifests before kv_cache.dtype: float pools of the model's type.
    for (const TensorSpec &in : m.inputs)
      if (in.kvPool) {
        spec.dtype = in.dtype == DType::F16    ? KVCacheDType::F16
                     : in.dtype == DType::BF16 ? KVCacheDType::BF16
                     : in.dtype == DType::F64  ? KVCacheDType::F64
                                               : KVCacheDType::F32;
        break;
      }
  }
  // Bounded before it is multiplied (the artifact fuzzer found 2 * 2^62).
  if (spec.numLayers > (int64_t(1) << 20))
    return fail("kv_cache.num_layers", std::to_string(spec.numLayers) + " is too large");
  const int64_t perLayer = spec.poolsPerLayer();
  if (pools != static_cast<size_t>(perLayer * spec.numLayers))
    return fail("kv_cache", std::to_string(spec.numLayers) + " layers need " +
                                std::to_string(perLayer * spec.numLayers) +
                                " kv_pool inputs, the manifest has " + std::to_string(pools));
  auto staticDim = [](const TensorSpec &in, size_t d, int64_t value) {
    return in.shape[d].isStatic() && in.shape[d].value == value;
  };
  size_t index = 0;
  for (const TensorSpec &in : m.inputs) {
    if (!in.kvPool)
      continue;
    // Per layer: key, value, then (scaled caches) their scales.
    int64_t role = static_cast<int64_t>(index++ % perLayer);
    bool isScale = role >= 2;
    size_t rank = isScale ? 3 : 4;
    int64_t headDim = role == 1 ? spec.valueDim() : spec.headDim;
    bool ok = in.rank() == rank && !in.shape[0].isStatic() &&
              staticDim(in, 1, spec.blockSize) && staticDim(in, 2, spec.numKVHeads) &&
              (isScale || staticDim(in, 3, headDim));
    if (!ok)
      return fail("inputs",
                  quoted(in.name) + " is not [num_blocks, " + std::to_string(spec.blockSize) +
                      ", " + std::to_string(spec.numKVHeads) +
                      (isScale ? "] (the scales of a KV pool)"
                               : ", " + std::to_string(headDim) +
                                     (role == 1 && spec.valueHeadDim ? "] (value_head_dim)"
                                                                      : "] (head_dim)")));
    DType expected = isScale ? DType::F32 : kvPoolDType(spec.dtype);
    if (in.dtype != expected)
      return fail("inputs", quoted(in.name) + " has dtype " + manifestDTypeName(in.dtype) +
                                ", but kv_cache.dtype " +
                                quoted(kvCacheDTypeName(spec.dtype)) + " needs " +
                                manifestDTypeName(expected));
  }
  m.kvCache = spec;
  return {};
}

} // namespace

Status xfmr::rt::validateGenerationDefaults(const GenerationDefaults &g) {
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (g.temperature && !(std::isfinite(*g.temperature) && *g.temperature >= 0))
    return Error("temperature: must be finite and >= 0, got " + num(*g.temperature));
  if (g.topP && !(*g.topP > 0 && *g.topP <= 1))
    return Error("top_p: must be in (0, 1], got " + num(*g.topP));
  if (g.topK && *g.topK < 0)
    return Error("top_k: must be >= 0, got " + std::to_string(*g.topK));
  if (g.repetitionPenalty &&
      !(std::isfinite(*g.repetitionPenalty) && *g.repetitionPenalty > 0))
    return Error("repetition_penalty: must be finite and > 0, got " +
                 num(*g.repetitionPenalty));
  if (g.maxNewTokens && *g.maxNewTokens < 1)
    return Error("max_new_tokens: must be >= 1, got " + std::to_string(*g.maxNewTokens));
  if (g.maxLength && *g.maxLength < 1)
    return Error("max_length: must be >= 1, got " + std::to_string(*g.maxLength));
  return {};
}

Expected<Manifest> xfmr::rt::parseManifest(std::string_view text,
                                           const std::string &pathForErrors) {
  const char *begin = text.data(), *end = text.data() + text.size();
  json root = json::parse(begin, end, /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    std::string why = jsonSyntaxError(text);
    return Error(pathForErrors + ": not valid JSON" + (why.empty() ? "" : ": " + why));
  }
  return ManifestParser(pathForErrors).parse(root);
}

Expected<Manifest> xfmr::rt::readManifest(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP)
    return Error(path + ": is a symbolic link (artifact files must be regular files)");
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Error(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxManifestBytes)
    return Error(path + ": " + std::to_string(st.st_size) +
                 " bytes is too large for a manifest (limit " +
                 std::to_string(kMaxManifestBytes) + ")");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t got = ::read(fd, text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return Error(path + ": read failed: " + std::strerror(errno));
    if (got == 0)
      break; // shrank while reading: parse what is there
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return parseManifest(text, path);
}
