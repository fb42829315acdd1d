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

#include <cblas.h>

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
  std::vector<double> gram;   // sum x x^T, upper triangle of [K, K] (GPTQ)
  int64_t gramRows = 0;
};

/// Adds A^T A of one window's A ([rows, K]) to `acc.gram` (OpenBLAS ssyrk
/// per window, summed in f64 over the windows).
bool addSecondMoment(Accumulator &acc, const rt::Tensor &t, std::string &error) {
  int64_t rows = t.shape()[0], k = t.shape()[1];
  if (!acc.gram.empty() && acc.gram.size() != static_cast<size_t>(k * k)) {
    error = "calibration output '" + t.name() + "' changed width between windows";
    return false;
  }
  if (rows < 1)
    return true;
  std::vector<float> window(k * k);
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(k), static_cast<int>(rows),
              1.0f, t.data<float>(), static_cast<int>(k), 0.0f, window.data(),
              static_cast<int>(k));
  if (acc.gram.empty())
    acc.gram.assign(k * k, 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < k; ++j)
      acc.gram[i * k + j] += window[i * k + j];
  acc.gramRows += rows;
  return true;
}

/// E[x x^T] as f32 [K, K] (both triangles) from the sums.
std::vector<float> secondMoment(const Accumulator &acc, int64_t k) {
  std::vector<float> g(k * k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < k; ++j)
      g[i * k + j] = g[j * k + i] = static_cast<float>(acc.gram[i * k + j] / acc.gramRows);
  return g;
}

/// Rows of A kept per product for AWQ's scale search (spread evenly over
/// the windows): enough to measure output error, small enough to store.
constexpr int64_t kSampleRows = 256;

/// Keeps `perWindow` rows, evenly spaced, of one window's A ([rows, K]).
bool sample(Accumulator &acc, const rt::Tensor &t, int64_t perWindow, std::string &error) {
  if (t.dtype() != rt::DType::F32 || t.shape().size() != 2 || t.shape()[1] < 1) {
    error = "calibration output '" + t.name() + "' is not a [rows, K] float32 matrix";
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

/// Adds one window's output `stat` (a [K] f32 tensor) of `acc`.
bool accumulate(Accumulator &acc, const std::string &stat, const rt::Tensor &t, int64_t rows,
                std::string &error) {
  if (t.dtype() != rt::DType::F32 || t.shape().size() != 1 || t.numel() < 1) {
    error = "calibration output '" + t.name() + "' is not a [K] float32 vector";
    return false;
  }
  size_t k = static_cast<size_t>(t.numel());
  if (acc.maxAbs.empty()) {
    acc.maxAbs.assign(k, 0.0f);
    acc.sumAbs.assign(k, 0.0);
    acc.sumSquare.assign(k, 0.0);
  }
  if (acc.maxAbs.size() != k) {
    error = "calibration output '" + t.name() + "' changed length between windows";
    return false;
  }
  const float *v = t.data<float>();
  for (size_t i = 0; i < k; ++i) {
    if (stat == "max")
      acc.maxAbs[i] = std::max(acc.maxAbs[i], v[i]);
    else if (stat == "mean_abs")
      acc.sumAbs[i] += static_cast<double>(v[i]) * rows;
    else
      acc.sumSquare[i] += static_cast<double>(v[i]) * rows;
  }
  return true;
}

} // namespace

std::optional<CalibrationStats>
measureCalibration(const std::string &artifactDir, const std::string &tokensPath,
                   int64_t context, bool secondMoments,
                   const std::function<void(int64_t, int64_t)> &progress, std::string &error) {
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
  for (int64_t w = 0; w < windows; ++w) {
    int64_t begin = w * context, length = std::min(context, total - begin);
    rt::Expected<std::vector<rt::Tensor>> inputs =
        rt::causalLMInputs(artifact.manifest(), *ids, begin, length);
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
      bool ok = stat == "rows" ? sample(products[product], t, (kSampleRows + windows - 1) / windows,
                                        error)
                               : accumulate(products[product], stat, t, length, error);
      if (!ok)
        return std::nullopt;
      if (stat == "rows" && secondMoments && !addSecondMoment(products[product], t, error))
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
    if (acc.gramRows > 0) {
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
