//===- ManifestWriter.cpp - manifest.json from a Manifest -----------------===//
//
// Part of xfmr.
//
// The other half of Manifest.cpp: xfmr-compile fills a Manifest and writes
// it with formatManifest, so that the artifact schema has one definition
// (Manifest.h) for the compiler and the runtime. Every field of Manifest is
// written, under the key parseManifest reads it from; parsing the text
// gives back an equal Manifest (ManifestWriterTest). Keys come out sorted
// (nlohmann::json's std::map), as xfmr-compile wrote them before.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Manifest.h"

#include <nlohmann/json.hpp>

using namespace xfmr::rt;
using json = nlohmann::json;

namespace {

json tensorSpecJson(const TensorSpec &spec) {
  json shape = json::array();
  for (const Dim &d : spec.shape) {
    if (d.isStatic())
      shape.push_back(d.value);
    else
      shape.push_back(d.symbol);
  }
  json o = {{"name", spec.name},
            {"dtype", manifestDTypeName(spec.dtype)},
            {"shape", std::move(shape)}};
  if (spec.kvPool)
    o["role"] = "kv_pool"; // read and updated in place by every call
  return o;
}

json tensorSpecsJson(const std::vector<TensorSpec> &specs) {
  json list = json::array();
  for (const TensorSpec &spec : specs)
    list.push_back(tensorSpecJson(spec));
  return list;
}

json fileJson(const FileIntegrity &f) {
  return {{"size", f.size}, {"sha256", f.sha256}};
}

/// "target": the CPU's, or a GPU's with its host code's CPU target.
json targetJson(const Manifest &m) {
  json t = {{"kind", m.targetKind}, {"requires", m.requiredCPUFeatures}};
  bool cuda = m.targetKind == "cuda";
  for (auto [key, value] :
       {std::pair<const char *, const std::string *>{"triple", &m.targetTriple},
        {"cpu", &m.targetCPU},
        {"features", &m.targetFeatures}})
    if (!cuda || !value->empty()) // a GPU target names its CPU in "host"
      t[key] = *value;
  if (!cuda)
    return t;
  t["chip"] = m.targetChip;
  t["compute_capability"] = m.targetComputeCapability;
  t["kernel_checks"] = m.kernelChecks;
  t["ptx_features"] = m.targetPTXFeatures;
  t["kernels_ptx"] = m.kernelsPTXFile;
  t["kernels_cubin"] = m.kernelsCubinFile;
  t["host_calls"] = m.hostCalls;
  t["host"] = {{"kind", "cpu"},
               {"triple", m.targetHost.triple},
               {"cpu", m.targetHost.cpu},
               {"features", m.targetHost.features},
               {"requires", m.targetHost.requiredCPUFeatures}};
  return t;
}

json kernelsJson(const std::vector<KernelInfo> &kernels) {
  json list = json::array();
  for (const KernelInfo &k : kernels)
    list.push_back({{"name", k.name},
                    {"registers", k.registers},
                    {"spill_bytes", k.spillBytes},
                    {"stack_bytes", k.stackBytes},
                    {"shared_bytes", k.sharedBytes},
                    {"uses", k.uses}});
  return list;
}

json optionsJson(const CompileOptions &c) {
  json o = {{"opt_level", c.optLevel},
            {"weights", c.weights},
            {"min_weight_bytes", c.minWeightBytes},
            {"blas_min_rows", c.blasMinRows},
            {"parallel", c.parallel},
            {"quant", c.quant},
            {"quant_skip", c.quantSkip}};
  if (c.calibration)
    o["calibration"] = *c.calibration;
  if (c.smoothAlpha)
    o["smooth_alpha"] = *c.smoothAlpha;
  return o;
}

/// "weights", with its sources and references when it has them.
json weightsJson(const Manifest &m) {
  json w = {{"file", m.weightsFile},
            {"size", m.weightsSize},
            {"alignment", m.weightsAlignment},
            {"count", m.weightsCount}};
  if (m.weightSources.empty() && m.weightReferences.empty())
    return w;
  json sources = json::array(), references = json::array();
  for (const WeightSource &s : m.weightSources)
    sources.push_back(
        {{"path", s.path}, {"size", s.size}, {"mtime_ns", s.mtimeNs}});
  for (const WeightReference &r : m.weightReferences) {
    json ref = {{"source", r.source},
                {"offset", r.offset},
                {"bytes", r.bytes},
                {"at", r.at}};
    if (r.panelK > 0)
      ref["panels"] = {r.panelK, r.panelN, r.elemBytes};
    references.push_back(std::move(ref));
  }
  w["sources"] = std::move(sources);
  w["references"] = std::move(references);
  return w;
}

/// "files": the library, the weights file and the files of "text".
json filesJson(const Manifest &m) {
  json files = json::object();
  files[m.library] = fileJson(m.libraryIntegrity);
  files[m.weightsFile] = fileJson(m.weightsIntegrity);
  for (size_t r = 1; r < m.tensorParallelWeights.size() && r < m.tensorParallelIntegrity.size();
       ++r)
    files[m.tensorParallelWeights[r]] = fileJson(m.tensorParallelIntegrity[r]);
  if (m.text)
    for (const auto &[name, f] : m.text->files)
      files[name] = fileJson(f);
  return files;
}

json kvCacheJson(const KVCacheSpec &kv) {
  json o = {{"block_size", kv.blockSize},
            {"num_layers", kv.numLayers},
            {"num_kv_heads", kv.numKVHeads},
            {"head_dim", kv.headDim},
            {"dtype", kvCacheDTypeName(kv.dtype)}};
  if (kv.valueHeadDim && kv.valueHeadDim != kv.headDim)
    o["value_head_dim"] = kv.valueHeadDim;
  return o;
}

json generationJson(const GenerationConfig &g) {
  json o = json::object();
  if (!g.eosTokenIds.empty())
    o["eos_token_ids"] = g.eosTokenIds;
  if (g.contextLength)
    o["context_length"] = *g.contextLength;
  if (!g.from.empty())
    o["from"] = g.from;
  return o;
}

json generationDefaultsJson(const GenerationDefaults &d) {
  json o = json::object();
  if (d.doSample)
    o["do_sample"] = *d.doSample;
  if (d.temperature)
    o["temperature"] = *d.temperature;
  if (d.topP)
    o["top_p"] = *d.topP;
  if (d.topK)
    o["top_k"] = *d.topK;
  if (d.repetitionPenalty)
    o["repetition_penalty"] = *d.repetitionPenalty;
  if (d.maxNewTokens)
    o["max_new_tokens"] = *d.maxNewTokens;
  if (d.maxLength)
    o["max_length"] = *d.maxLength;
  return o;
}

/// "text": only what is stated (its files are listed in "files").
json textJson(const TextInterface &t) {
  json o = {{"tokenizer", t.tokenizerFile}};
  if (!t.tokenizerConfigFile.empty())
    o["tokenizer_config"] = t.tokenizerConfigFile;
  if (!t.chatTemplateFile.empty())
    o["chat_template"] = t.chatTemplateFile;
  if (!t.bosToken.empty())
    o["bos_token"] = t.bosToken;
  if (t.bosId)
    o["bos_token_id"] = *t.bosId;
  if (!t.eosToken.empty())
    o["eos_token"] = t.eosToken;
  if (!t.eosIds.empty())
    o["eos_token_ids"] = t.eosIds;
  if (t.addBosToken)
    o["add_bos_token"] = *t.addBosToken;
  if (t.addEosToken)
    o["add_eos_token"] = *t.addEosToken;
  if (!t.defaults.empty())
    o["generation_defaults"] = generationDefaultsJson(t.defaults);
  if (!t.from.empty())
    o["from"] = t.from;
  return o;
}

} // namespace

std::string xfmr::rt::formatManifest(const Manifest &m) {
  json root = {{"format", kManifestFormatName},
               {"format_version", m.formatVersion},
               {"abi_version", m.abiVersion},
               {"target", targetJson(m)},
               {"library", m.library},
               {"entry", m.entry},
               {"weights", weightsJson(m)},
               {"files", filesJson(m)},
               {"checks", m.checks},
               {"inputs", tensorSpecsJson(m.inputs)},
               {"outputs", tensorSpecsJson(m.outputs)}};
  if (!m.compiler.empty())
    root["compiler"] = m.compiler;
  if (!m.source.empty())
    root["source"] = m.source;
  if (m.options)
    root["options"] = optionsJson(*m.options);
  if (m.targetKind == "cuda")
    root["kernels"] = kernelsJson(m.kernels);
  if (m.kvCache)
    root["kv_cache"] = kvCacheJson(*m.kvCache);
  if (m.generation)
    root["generation"] = generationJson(*m.generation);
  if (m.expertParallelExperts > 0)
    root["expert_parallel"] = {{"ranks", m.expertParallelRanks},
                               {"experts", m.expertParallelExperts}};
  if (m.tensorParallelRanks > 1)
    root["tensor_parallel"] = {{"ranks", m.tensorParallelRanks},
                               {"weights", m.tensorParallelWeights}};
  if (m.pipelineStages > 1) {
    root["pipeline_parallel"] = {{"stages", m.pipelineStages},
                                 {"stage", m.pipelineStage},
                                 {"first_layer", m.pipelineFirstLayer}};
    if (m.pipelineStage == 0 && !m.pipelineStageManifests.empty())
      root["pipeline_parallel"]["stage_manifests"] = m.pipelineStageManifests;
  }
  if (m.text)
    root["text"] = textJson(*m.text);
  // Strings that are not UTF-8 (a file name) are written with U+FFFD
  // instead of throwing.
  return root.dump(2, ' ', /*ensure_ascii=*/false,
                   json::error_handler_t::replace) +
         "\n";
}
