//===- Metrics.cpp - Prometheus text exposition for xfmr-serve ------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Metrics.h"

#include <cmath>
#include <cstdio>

namespace xfmr::serve {

namespace {

std::string escapeLabel(const std::string &v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string renderLabels(const Labels &labels) {
  std::string out;
  for (const auto &[k, v] : labels)
    out += (out.empty() ? "" : ",") + k + "=\"" + escapeLabel(v) + "\"";
  return out;
}

std::string number(double v) {
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v))
    return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// `name{labels}` or `name{labels,extra}`.
std::string seriesName(const std::string &name, const std::string &labels,
                       const std::string &extra = "") {
  std::string all = labels;
  if (!extra.empty())
    all += (all.empty() ? "" : ",") + extra;
  return all.empty() ? name : name + "{" + all + "}";
}

} // namespace

std::vector<double> latencyBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
}

void Metrics::declare(const std::string &name, Kind kind,
                      const std::string &help, std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mutex);
  if (families.count(name))
    return;
  Family &f = families[name];
  f.kind = kind;
  f.help = help;
  f.buckets = std::move(buckets);
  order.push_back(name);
}

Metrics::Series &Metrics::seriesFor(const std::string &name,
                                    const Labels &labels) {
  Family &f = families[name];
  Series &s = f.series[renderLabels(labels)];
  if (f.kind == Kind::Histogram && s.bucketCounts.size() != f.buckets.size())
    s.bucketCounts.assign(f.buckets.size(), 0);
  return s;
}

void Metrics::add(const std::string &name, const Labels &labels, double delta) {
  std::lock_guard<std::mutex> lock(mutex);
  seriesFor(name, labels).value += delta;
}

void Metrics::set(const std::string &name, const Labels &labels, double value) {
  std::lock_guard<std::mutex> lock(mutex);
  seriesFor(name, labels).value = value;
}

void Metrics::observe(const std::string &name, const Labels &labels,
                      double value) {
  std::lock_guard<std::mutex> lock(mutex);
  Family &f = families[name];
  Series &s = seriesFor(name, labels);
  for (size_t i = 0; i < f.buckets.size(); ++i)
    if (value <= f.buckets[i])
      ++s.bucketCounts[i];
  s.sum += value;
  ++s.count;
}

double Metrics::value(const std::string &name, const Labels &labels) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto f = families.find(name);
  if (f == families.end())
    return 0;
  auto s = f->second.series.find(renderLabels(labels));
  return s == f->second.series.end() ? 0 : s->second.value;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mutex);
  std::string out;
  for (const std::string &name : order) {
    const Family &f = families.at(name);
    const char *type = f.kind == Kind::Counter ? "counter"
                       : f.kind == Kind::Gauge ? "gauge"
                                               : "histogram";
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + type +
           "\n";
    for (const auto &[labels, s] : f.series) {
      if (f.kind != Kind::Histogram) {
        out += seriesName(name, labels) + " " + number(s.value) + "\n";
        continue;
      }
      for (size_t i = 0; i < f.buckets.size(); ++i)
        out += seriesName(name + "_bucket", labels,
                          "le=\"" + number(f.buckets[i]) + "\"") +
               " " + std::to_string(s.bucketCounts[i]) + "\n";
      out += seriesName(name + "_bucket", labels, "le=\"+Inf\"") + " " +
             std::to_string(s.count) + "\n";
      out += seriesName(name + "_sum", labels) + " " + number(s.sum) + "\n";
      out += seriesName(name + "_count", labels) + " " +
             std::to_string(s.count) + "\n";
    }
  }
  return out;
}

} // namespace xfmr::serve
