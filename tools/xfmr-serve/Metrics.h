//===- Metrics.h - Prometheus text exposition for xfmr-serve -----*- C++
//-*-===//
//
// Part of xfmr.
//
// Counters, gauges and histograms with labels, rendered in Prometheus' text
// format (version 0.0.4). Thread-safe: the engine thread updates, the
// /metrics handler renders, under one mutex (updates are a few per step).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SERVE_METRICS_H
#define XFMR_SERVE_METRICS_H

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace xfmr::serve {

/// Label pairs in order, e.g. {{"model_name", "m"}, {"pool", "batch"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
public:
  enum class Kind { Counter, Gauge, Histogram };

  /// Declares a family (once, before use); `buckets` for histograms.
  void declare(const std::string &name, Kind kind, const std::string &help,
               std::vector<double> buckets = {});
  void add(const std::string &name, const Labels &labels, double delta);
  void set(const std::string &name, const Labels &labels, double value);
  void observe(const std::string &name, const Labels &labels, double value);
  /// The current value of a counter or gauge series (0 if none).
  double value(const std::string &name, const Labels &labels) const;

  /// The text exposition of every family.
  std::string render() const;

private:
  struct Series {
    double value = 0; ///< counter or gauge
    std::vector<uint64_t> bucketCounts;
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    Kind kind = Kind::Gauge;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, Series> series; ///< by rendered label set
  };
  Series &seriesFor(const std::string &name, const Labels &labels);

  mutable std::mutex mutex;
  std::vector<std::string> order; ///< families in declaration order
  std::map<std::string, Family> families;
};

/// vLLM's latency buckets (seconds).
std::vector<double> latencyBuckets();

} // namespace xfmr::serve

#endif // XFMR_SERVE_METRICS_H
