//===- xfmr-kernel-bench.cpp - CPU kernels against memory bandwidth -------===//
//
// Part of xfmr.
//
//   xfmr-kernel-bench [--threads-note] [--min-time S] NAME=ARTIFACT:M:K:N ...
//   xfmr-kernel-bench --peak
//
// Measures, in one process and one run: the STREAM triad bandwidth
// (a[i] = b[i] + s * c[i] over arrays far larger than the caches), a naive
// C++ matrix-vector loop, and every given artifact (a MatMul x[M,K] @ W[K,N]
// compiled by xfmr-compile; scripts/bench-cpu-kernels.py builds them). Each
// time is the median of repeated runs lasting at least --min-time seconds.
// Prints one table: time, GB/s (weights + activations moved once), GFLOP/s
// and the fraction of the triad bandwidth. Single-threaded throughout: the
// compiled code is single-threaded today, so is the baseline.
//
//===----------------------------------------------------------------------===//

#include "Peak.h"
#include "xfmr/runtime/Artifact.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

double minTime = 0.5;

/// Median seconds of `fn` over repetitions lasting at least minTime.
template <typename Fn> double medianSeconds(Fn &&fn) {
  fn(); // warm up: page faults, caches
  std::vector<double> times;
  auto start = Clock::now();
  while (times.size() < 3 ||
         std::chrono::duration<double>(Clock::now() - start).count() < minTime) {
    auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (times.size() >= 1000)
      break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double streamTriad() {
  const size_t n = size_t(1) << 25; // 3 x 128 MiB
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const float s = 3.0f;
  double t = medianSeconds([&] {
    float *__restrict pa = a.data();
    const float *__restrict pb = b.data();
    const float *__restrict pc = c.data();
    for (size_t i = 0; i < n; ++i)
      pa[i] = pb[i] + s * pc[i];
  });
  volatile float sink = a[n / 2];
  (void)sink;
  return 3.0 * n * sizeof(float) / t / 1e9;
}

/// The plain loop a user would write: y = x W with W [K, N] row-major.
double naiveGemv(int64_t k, int64_t n) {
  std::vector<float> w(size_t(k) * n, 0.5f), x(k, 1.0f), y(n);
  double t = medianSeconds([&] {
    std::fill(y.begin(), y.end(), 0.0f);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        y[j] += x[i] * w[size_t(i) * n + j];
  });
  volatile float sink = y[n / 2];
  (void)sink;
  return t;
}

struct Case {
  std::string name, path;
  int64_t m = 0, k = 0, n = 0;
};

bool parseCase(const std::string &spec, Case &c) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos)
    return false;
  c.name = spec.substr(0, eq);
  std::string rest = spec.substr(eq + 1);
  size_t p3 = rest.rfind(':'), p2 = rest.rfind(':', p3 - 1),
         p1 = rest.rfind(':', p2 - 1);
  if (p1 == std::string::npos || p2 == std::string::npos || p3 == std::string::npos)
    return false;
  c.path = rest.substr(0, p1);
  c.m = std::atoll(rest.substr(p1 + 1, p2 - p1 - 1).c_str());
  c.k = std::atoll(rest.substr(p2 + 1, p3 - p2 - 1).c_str());
  c.n = std::atoll(rest.substr(p3 + 1).c_str());
  return c.m > 0 && c.k > 0 && c.n > 0;
}

void row(const char *name, double seconds, double bytes, double flops,
         double triad) {
  double gbs = bytes / seconds / 1e9;
  std::printf("%-28s %10.3f %9.2f %9.2f %8.0f%%\n", name, seconds * 1e3, gbs,
              flops / seconds / 1e9, 100.0 * gbs / triad);
}

} // namespace

int main(int argc, char **argv) {
  std::vector<Case> cases;
  bool peak = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: xfmr-kernel-bench [--min-time SECONDS] NAME=ARTIFACT:M:K:N ...\n"
          "       xfmr-kernel-bench [--min-time SECONDS] --peak\n\n"
          "Times each artifact (a MatMul x[M,K] @ W[K,N], float32 input,\n"
          "weights of any dtype) beside a STREAM triad and a naive C++ GEMV\n"
          "loop measured in the same run; prints ms, GB/s, GFLOP/s and %% of\n"
          "triad bandwidth. scripts/bench-cpu-kernels.py builds the artifacts.\n\n"
          "--peak: the register-only throughput of one core's multiply-add\n"
          "instructions (f32 FMA, vdpbf16ps, vpdpbusd where the CPU has them)\n"
          "and their multiply-adds per second against f32 FMA: the ceiling of\n"
          "each precision's products on this CPU.\n");
      return 0;
    }
    if (a == "--peak") {
      peak = true;
      continue;
    }
    if (a == "--min-time" && i + 1 < argc) {
      minTime = std::atof(argv[++i]);
      continue;
    }
    Case c;
    if (!parseCase(a, c)) {
      std::fprintf(stderr, "xfmr-kernel-bench: error: bad case '%s' (want NAME=ARTIFACT:M:K:N)\n",
                   a.c_str());
      return 2;
    }
    cases.push_back(c);
  }
  if (peak) {
    xfmr::bench::printPeaks(minTime);
    if (cases.empty())
      return 0;
  }
  double triad = streamTriad();
  std::printf("%-28s %10s %9s %9s %9s\n", "kernel", "ms", "GB/s", "GFLOP/s",
              "of triad");
  std::printf("%-28s %10s %9.2f %9s %8.0f%%\n", "stream triad (fp32)", "-", triad,
              "-", 100.0);
  for (const Case &c : cases) {
    auto art = xfmr::rt::Artifact::load(c.path);
    if (!art) {
      std::fprintf(stderr, "xfmr-kernel-bench: error: %s\n", art.error().c_str());
      return 1;
    }
    const auto &m = (*art)->manifest();
    if (m.inputs.size() != 1) {
      std::fprintf(stderr, "xfmr-kernel-bench: error: %s: expected one input\n",
                   c.path.c_str());
      return 1;
    }
    auto x = xfmr::rt::Tensor::create(xfmr::rt::DType::F32, {c.m, c.k});
    if (!x) {
      std::fprintf(stderr, "xfmr-kernel-bench: error: %s\n", x.error().c_str());
      return 1;
    }
    std::mt19937 gen(0);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (int64_t i = 0; i < c.m * c.k; ++i)
      x->data<float>()[i] = dist(gen);
    bool ok = true;
    double t = medianSeconds([&] {
      auto out = (*art)->run({&*x});
      if (!out) {
        std::fprintf(stderr, "xfmr-kernel-bench: error: %s\n", out.error().c_str());
        ok = false;
      }
    });
    if (!ok)
      return 1;
    double bytes = double((*art)->weightsBytes()) + 4.0 * (c.m * c.k + c.m * c.n);
    row(c.name.c_str(), t, bytes, 2.0 * c.m * c.k * c.n, triad);
    if (c.m == 1 && c.name.find("fp32") != std::string::npos) {
      double tn = naiveGemv(c.k, c.n);
      std::string label = "  naive loop " + std::to_string(c.k) + "x" + std::to_string(c.n);
      row(label.c_str(), tn, 4.0 * (c.k * c.n + c.k + c.n), 2.0 * c.k * c.n, triad);
    }
  }
  return 0;
}
