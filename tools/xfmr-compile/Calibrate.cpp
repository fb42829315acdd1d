//===- Calibrate.cpp - run the calibration artifact over tokens -----------===//
//
// Part of xfmr.
//
// `xfmr-compile --quant=int4-awq|w8a8 --calibration TOKENS.npy` compiles the
// f32 model once more with every quantizable product's input statistics as
// extra outputs (xfmr-calibration-outputs), runs that artifact here on the
// tokens, and quantizes with what it measured (xfmr-quantize-weights
// method=awq|smoothquant|gptq; GPTQ's second moments E[x x^T] only when
// asked: K x K per input).
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/CausalLM.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>

namespace xfmr::compile {

namespace {

/// Running sums of one product's statistics.
struct Accumulator {
  int64_t rows = 0;
  std::vector<float> maxAbs;
  std::vector<double> sumAbs, sumSquare;
  std::vector<float> samples; // [sampleRows, K]
  int64_t sampleRows = 0;
  std::vector<double> gram;   // sum x x^T over `rows`, [K, K] (GPTQ)
};

/// Adds one window's A^T A (the artifact's [K, K] "gram" output) to
/// `acc.gram`, in f64.
bool addSecondMoment(Accumulator &acc, const rt::Tensor &t, std::string &error) {
  if (t.dtype() != rt::DType::F32 || t.shape().size() != 2 || t.shape()[0] != t.shape()[1] ||
      t.shape()[0] < 1) {
    error = "calibration output '" + t.name() + "' is not a [K, K] float32 matrix";
    return false;
  }
  int64_t k = t.shape()[0];
  if (acc.gram.empty())
    acc.gram.assign(k * k, 0.0);
  if (acc.gram.size() != static_cast<size_t>(k * k)) {
    error = "calibration output '" + t.name() + "' changed width between windows";
    return false;
  }
  const float *g = t.data<float>();
  for (int64_t i = 0; i < k * k; ++i)
    acc.gram[i] += g[i];
  return true;
}

/// E[x x^T] as f32 [K, K] from the sums (made exactly symmetric).
std::vector<float> secondMoment(const Accumulator &acc, int64_t k) {
  std::vector<float> g(k * k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < k; ++j)
      g[i * k + j] = g[j * k + i] =
          static_cast<float>((acc.gram[i * k + j] + acc.gram[j * k + i]) / (2.0 * acc.rows));
  return g;
}

/// Rows of A kept per product for AWQ's scale search (spread evenly over
/// the windows): enough to measure output error, small enough to store.
constexpr int64_t kSampleRows = 256;

/// Keeps `perWindow` rows, evenly spaced, of one window's sampled rows of
/// A ([S, K], themselves spread evenly over the window).
bool sample(Accumulator &acc, const rt::Tensor &t, int64_t perWindow, std::string &error) {
  if (t.dtype() != rt::DType::F32 || t.shape().size() != 2 || t.shape()[1] < 1) {
    error = "calibration output '" + t.name() + "' is not a [S, K] float32 matrix";
    return false;
  }
  int64_t rows = t.shape()[0], k = t.shape()[1];
  int64_t take = std::min({rows, perWindow, kSampleRows - acc.sampleRows});
  for (int64_t j = 0; j < take; ++j) {
    int64_t r = (2 * j + 1) * rows / (2 * take);
    acc.samples.insert(acc.samples.end(), t.data<float>() + r * k, t.data<float>() + (r + 1) * k);
    ++acc.sampleRows;
  }
  return true;
}

/// Adds one window's "channels" output ([3K] f32: max |a|, mean |a|, mean
/// a^2 per channel, one after the other) to `acc`.
bool accumulate(Accumulator &acc, const rt::Tensor &t, int64_t rows, std::string &error) {
  if (t.dtype() != rt::DType::F32 || t.shape().size() != 1 || t.numel() < 3 ||
      t.numel() % 3 != 0) {
    error = "calibration output '" + t.name() + "' is not a [3 K] float32 vector";
    return false;
  }
  size_t k = static_cast<size_t>(t.numel() / 3);
  if (acc.maxAbs.empty()) {
    acc.maxAbs.assign(k, 0.0f);
    acc.sumAbs.assign(k, 0.0);
    acc.sumSquare.assign(k, 0.0);
  }
  if (acc.maxAbs.size() != k) {
    error = "calibration output '" + t.name() + "' changed length between windows";
    return false;
  }
  const float *max = t.data<float>(), *meanAbs = max + k, *meanSquare = meanAbs + k;
  for (size_t i = 0; i < k; ++i) {
    acc.maxAbs[i] = std::max(acc.maxAbs[i], max[i]);
    acc.sumAbs[i] += static_cast<double>(meanAbs[i]) * rows;
    acc.sumSquare[i] += static_cast<double>(meanSquare[i]) * rows;
  }
  return true;
}

/// One window's inputs: a causal LM's (input_ids, ...) and the calibration
/// artifact's row indices, [S] spread evenly over the window's rows: row
/// (2j + 1) length / (2 S).
rt::Expected<std::vector<rt::Tensor>> windowInputs(const rt::Manifest &m, const rt::Manifest &plain,
                                                   const std::vector<int64_t> &ids, int64_t begin,
                                                   int64_t length) {
  rt::Expected<std::vector<rt::Tensor>> model = rt::causalLMInputs(plain, ids, begin, length);
  if (!model)
    return model;
  std::vector<rt::Tensor> inputs;
  size_t next = 0;
  for (const rt::TensorSpec &spec : m.inputs) {
    if (spec.name != calibrationRowsInputName()) {
      inputs.push_back(std::move((*model)[next++]));
      continue;
    }
    if (spec.rank() != 1 || !spec.shape[0].isStatic() || spec.dtype != rt::DType::I64)
      return rt::Error("the calibration artifact's input '" + spec.name + "' is not [S] i64");
    int64_t count = spec.shape[0].value;
    rt::Expected<rt::Tensor> picks = rt::Tensor::create(rt::DType::I64, {count}, spec.name);
    if (!picks)
      return picks.takeError();
    for (int64_t j = 0; j < count; ++j)
      picks->data<int64_t>()[j] = (2 * j + 1) * length / (2 * count);
    inputs.push_back(picks.take());
  }
  return inputs;
}

} // namespace

std::optional<CalibrationStats>
measureCalibration(const std::string &artifactDir, const std::string &tokensPath,
                   int64_t context, const std::function<void(int64_t, int64_t)> &progress, std::string &error) {
  rt::Expected<std::unique_ptr<rt::Artifact>> loaded = rt::Artifact::load(artifactDir);
  if (!loaded) {
    error = "the calibration artifact: " + loaded.error();
    return std::nullopt;
  }
  const rt::Artifact &artifact = **loaded;
  rt::Expected<std::vector<int64_t>> ids = rt::readTokenIds(tokensPath);
  if (!ids) {
    error = ids.error();
    return std::nullopt;
  }
  int64_t total = static_cast<int64_t>(ids->size());
  if (total < 1) {
    error = tokensPath + ": no tokens";
    return std::nullopt;
  }
  int64_t windows = (total + context - 1) / context;
  std::map<int64_t, Accumulator> products;
  int64_t perWindow = (kSampleRows + windows - 1) / windows;
  rt::Manifest plain = artifact.manifest(); // without the row indices
  llvm::erase_if(plain.inputs, [](const rt::TensorSpec &spec) {
    return spec.name == calibrationRowsInputName();
  });
  for (int64_t w = 0; w < windows; ++w) {
    int64_t begin = w * context, length = std::min(context, total - begin);
    rt::Expected<std::vector<rt::Tensor>> inputs =
        windowInputs(artifact.manifest(), plain, *ids, begin, length);
    if (!inputs) {
      error = "--calibration: " + inputs.error();
      return std::nullopt;
    }
    std::vector<const rt::Tensor *> args;
    for (const rt::Tensor &t : *inputs)
      args.push_back(&t);
    rt::Expected<std::vector<rt::Tensor>> out = artifact.run(args);
    if (!out) {
      error = tokensPath + ": tokens " + std::to_string(begin) + ".." +
              std::to_string(begin + length) + ": " + out.error();
      return std::nullopt;
    }
    for (const rt::Tensor &t : *out) {
      int64_t product;
      std::string stat;
      if (!parseCalibrationOutputName(t.name(), product, stat))
        continue;
      Accumulator &acc = products[product];
      bool ok = stat == "rows"   ? sample(acc, t, std::min(length, perWindow), error)
                : stat == "gram" ? addSecondMoment(acc, t, error)
                                 : accumulate(acc, t, length, error);
      if (!ok)
        return std::nullopt;
    }
    for (auto &[index, acc] : products)
      acc.rows += length; // a [1, length, K] input: one row per token
    progress(w + 1, windows);
  }
  CalibrationStats stats;
  stats.source = tokensPath;
  stats.tokens = total;
  for (auto &[index, acc] : products) {
    ChannelStats s;
    s.product = index;
    s.rows = acc.rows;
    s.maxAbs = acc.maxAbs;
    s.samples = std::move(acc.samples);
    s.sampleRows = acc.sampleRows;
    if (!acc.gram.empty()) {
      if (acc.gram.size() != acc.maxAbs.size() * acc.maxAbs.size()) {
        error = "calibration outputs of product " + std::to_string(index) +
                " disagree on its width";
        return std::nullopt;
      }
      s.gram = secondMoment(acc, static_cast<int64_t>(acc.maxAbs.size()));
    }
    for (size_t i = 0; i < acc.maxAbs.size(); ++i) {
      s.meanAbs.push_back(static_cast<float>(acc.sumAbs[i] / acc.rows));
      s.meanSquare.push_back(static_cast<float>(acc.sumSquare[i] / acc.rows));
    }
    stats.products.push_back(std::move(s));
  }
  return stats;
}

} // namespace xfmr::compile
