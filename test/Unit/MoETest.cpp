//===- MoETest.cpp - the mixture-of-experts micro-kernel ------------------===//
//
// Part of xfmr.
//
// runtime/ukernels/MoE.c against a plain double-precision loop over every
// expert (softmax or sigmoid group-limited router, top-k, renormalisation,
// gated MLPs, weighted sum), with sizes that leave partial panels and tiles; the AVX-512, AVX2
// and scalar paths give the same bits; a token's result is the same alone
// and among other tokens; the counters see only the selected experts.
//
//===----------------------------------------------------------------------===//

#include "runtime/ukernels/MatmulNarrow.h"
#include "runtime/ukernels/MoE.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

struct Layer {
  int64_t h, inter, experts, topK;
  bool normalize;
  std::vector<float> router, wg, wu, wd;        // row-major [H,E], [E][H,I], [E][H,I], [E][I,H]
  std::vector<float> pRouter, pg, pu, pd;       // packed
  // Sigmoid routing (DeepSeek-V3): selection bias [E] (or empty), groups.
  bool sigmoid = false;
  std::vector<float> bias;
  int64_t groups = 1, topGroups = 1;
  float scale = 1.0f;
  // gpt-oss: router bias [E], expert biases [E][I], [E][I], [E][H] (or
  // empty), clamped SwiGLU.
  std::vector<float> routerBias, bg, bu, bd;
  bool clamped = false;
  float alpha = 1.0f, limit = INFINITY, upOffset = 0.0f;

  int64_t flags() const {
    int64_t f = (normalize ? XFMR_UK_MOE_NORMALIZE : 0) | (sigmoid ? XFMR_UK_MOE_SIGMOID : 0) |
                (clamped ? XFMR_UK_MOE_CLAMPED_SWIGLU : 0) |
                (routerBias.empty() ? 0 : XFMR_UK_MOE_ROUTER_BIAS) |
                (bias.empty() ? 0 : XFMR_UK_MOE_SELECTION_BIAS) |
                (bg.empty() ? 0 : XFMR_UK_MOE_EXPERT_BIASES);
    if (groups > 1)
      f |= (groups << XFMR_UK_MOE_GROUPS_SHIFT) | (topGroups << XFMR_UK_MOE_TOP_GROUPS_SHIFT);
    return f;
  }
  /// The kernel's constants buffer (MoE.h).
  std::vector<float> constants() const {
    std::vector<float> c = {scale, alpha, limit, upOffset};
    for (const std::vector<float> *v : {&routerBias, &bias, &bg, &bu, &bd})
      c.insert(c.end(), v->begin(), v->end());
    EXPECT_EQ(static_cast<int64_t>(c.size()),
              xfmr_uk_moe_constants_floats(flags(), experts, h, inter));
    return c;
  }
};

Layer makeLayer(int64_t h, int64_t inter, int64_t experts, int64_t topK, bool normalize,
                unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  Layer l;
  l.h = h;
  l.inter = inter;
  l.experts = experts;
  l.topK = topK;
  l.normalize = normalize;
  auto fill = [&](std::vector<float> &v, size_t n) {
    v.resize(n);
    for (float &x : v)
      x = dist(rng);
  };
  fill(l.router, h * experts);
  fill(l.wg, experts * h * inter);
  fill(l.wu, experts * h * inter);
  fill(l.wd, experts * inter * h);
  auto pack = [](const std::vector<float> &src, int64_t count, int64_t k, int64_t n) {
    std::vector<float> out(xfmr_uk_moe_packed_floats(count, k, n));
    xfmr_uk_moe_pack(src.data(), count, k, n, out.data());
    return out;
  };
  l.pRouter = pack(l.router, 1, h, experts);
  l.pg = pack(l.wg, experts, h, inter);
  l.pu = pack(l.wu, experts, h, inter);
  l.pd = pack(l.wd, experts, inter, h);
  return l;
}

std::vector<float> run(const Layer &l, const std::vector<float> &x, int level) {
  int64_t rows = static_cast<int64_t>(x.size()) / l.h;
  std::vector<float> out(rows * l.h);
  std::vector<float> constants = l.constants();
  xfmr_uk_moe_f32_at(level, x.data(), rows, l.h, l.inter, l.experts, l.topK, l.flags(),
                     l.pRouter.data(), l.pg.data(), l.pu.data(), l.pd.data(), constants.data(),
                     out.data());
  return out;
}

/// The layer in double precision, every expert computed, the selected kept.
std::vector<double> reference(const Layer &l, const std::vector<float> &x) {
  int64_t rows = static_cast<int64_t>(x.size()) / l.h;
  std::vector<double> out(rows * l.h, 0.0);
  for (int64_t t = 0; t < rows; ++t) {
    const float *xt = &x[t * l.h];
    std::vector<double> p(l.experts);
    for (int64_t e = 0; e < l.experts; ++e) {
      double s = 0;
      for (int64_t c = 0; c < l.h; ++c)
        s += double(xt[c]) * l.router[c * l.experts + e];
      p[e] = s + (l.routerBias.empty() ? 0.0 : l.routerBias[e]);
    }
    if (l.sigmoid) {
      for (double &v : p)
        v = 1 / (1 + std::exp(-v));
    } else {
      double mx = *std::max_element(p.begin(), p.end()), sum = 0;
      for (double &v : p)
        sum += (v = std::exp(v - mx));
      for (double &v : p)
        v /= sum;
    }
    // Choice scores: biased, the experts of all but the best groups out.
    std::vector<double> choice(p);
    for (int64_t e = 0; e < l.experts && !l.bias.empty(); ++e)
      choice[e] += l.bias[e];
    if (l.groups > 1) {
      int64_t size = l.experts / l.groups;
      std::vector<double> groupScore(l.groups);
      for (int64_t g = 0; g < l.groups; ++g) {
        std::vector<double> c(choice.begin() + g * size, choice.begin() + (g + 1) * size);
        std::sort(c.rbegin(), c.rend());
        groupScore[g] = c[0] + (size > 1 ? c[1] : 0.0);
      }
      std::vector<int64_t> order(l.groups);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return groupScore[a] > groupScore[b]; });
      for (int64_t j = l.topGroups; j < l.groups; ++j)
        for (int64_t i = 0; i < size; ++i)
          choice[order[j] * size + i] = -INFINITY;
    }
    std::vector<int64_t> idx(l.experts);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
    double total = 0;
    for (int64_t j = 0; j < l.topK; ++j)
      total += p[idx[j]];
    for (int64_t j = 0; j < l.topK; ++j) {
      int64_t e = idx[j];
      double w = (l.normalize ? p[e] / total : p[e]) * l.scale;
      std::vector<double> a(l.inter);
      for (int64_t i = 0; i < l.inter; ++i) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < l.h; ++c) {
          g += double(xt[c]) * l.wg[(e * l.h + c) * l.inter + i];
          u += double(xt[c]) * l.wu[(e * l.h + c) * l.inter + i];
        }
        if (!l.bg.empty()) {
          g += l.bg[e * l.inter + i];
          u += l.bu[e * l.inter + i];
        }
        if (l.clamped) {
          g = std::min<double>(g, l.limit);
          u = std::clamp<double>(u, -l.limit, l.limit);
          a[i] = g / (1 + std::exp(-l.alpha * g)) * (u + l.upOffset);
        } else {
          a[i] = g / (1 + std::exp(-g)) * u;
        }
      }
      for (int64_t c = 0; c < l.h; ++c) {
        double y = 0;
        for (int64_t i = 0; i < l.inter; ++i)
          y += a[i] * l.wd[(e * l.inter + i) * l.h + c];
        if (!l.bd.empty())
          y += l.bd[e * l.h + c];
        out[t * l.h + c] += w * y;
      }
    }
  }
  return out;
}

std::vector<float> tokens(int64_t rows, int64_t h, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(rows * h);
  for (float &v : x)
    v = dist(rng);
  return x;
}

/// Every element of `got` within 2e-5 x max|want| of the reference.
void expectNearReference(const std::vector<float> &got, const std::vector<double> &want,
                         const std::string &what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (double v : want)
    scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5 * scale) << "element " << i << " " << what;
}

TEST(MoE, MatchesReference) {
  for (bool normalize : {true, false}) {
    Layer l = makeLayer(/*h=*/40, /*inter=*/56, /*experts=*/8, /*topK=*/2, normalize, 7);
    std::vector<float> x = tokens(13, l.h, 3);
    std::vector<float> got = run(l, x, 2);
    std::vector<double> want = reference(l, x);
    expectNearReference(got, want, "normalize " + std::to_string(normalize));
  }
}

/// DeepSeek-V3's routing: sigmoid scores, a selection bias large enough to
/// change which experts win, 4 groups of 2 of which the best 2 are kept,
/// renormalised or not, times a routed scale.
Layer sigmoidLayer(bool normalize, unsigned seed) {
  Layer l = makeLayer(/*h=*/40, /*inter=*/56, /*experts=*/8, /*topK=*/2, normalize, seed);
  l.sigmoid = true;
  l.groups = 4;
  l.topGroups = 2;
  l.scale = 2.5f;
  std::mt19937 rng(seed + 1);
  std::normal_distribution<float> dist(0.0f, 0.3f);
  for (int64_t e = 0; e < l.experts; ++e)
    l.bias.push_back(dist(rng));
  return l;
}

TEST(MoE, SigmoidGroupLimitedRoutingMatchesReference) {
  for (bool normalize : {true, false}) {
    Layer l = sigmoidLayer(normalize, 31);
    std::vector<float> x = tokens(23, l.h, 6);
    std::vector<float> got = run(l, x, 2);
    std::vector<double> want = reference(l, x);
    expectNearReference(got, want, "normalize " + std::to_string(normalize));
    // The bias and the groups matter: without them the result differs.
    Layer plain = l;
    plain.bias.clear();
    plain.groups = plain.topGroups = 1;
    std::vector<float> other = run(plain, x, 2);
    EXPECT_NE(0, std::memcmp(other.data(), got.data(), got.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(run(l, x, 0).data(), got.data(), got.size() * sizeof(float)));
  }
}

/// gpt-oss's experts: a router bias, softmax renormalised over the top k
/// (the softmax of the top k logits), gate/up/down biases and the clamped
/// SwiGLU (alpha 1.702, limit small enough to clamp, up + 1).
TEST(MoE, BiasedClampedSwiGLUMatchesReference) {
  Layer l = makeLayer(/*h=*/40, /*inter=*/56, /*experts=*/8, /*topK=*/2, true, 41);
  std::mt19937 rng(43);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  auto random = [&](std::vector<float> &v, size_t n) {
    for (size_t i = 0; i < n; ++i)
      v.push_back(dist(rng));
  };
  random(l.routerBias, l.experts);
  random(l.bg, l.experts * l.inter);
  random(l.bu, l.experts * l.inter);
  random(l.bd, l.experts * l.h);
  l.clamped = true;
  l.alpha = 1.702f;
  l.limit = 1.5f;
  l.upOffset = 1.0f;
  std::vector<float> x = tokens(19, l.h, 8);
  std::vector<float> got = run(l, x, 2);
  std::vector<double> want = reference(l, x);
  expectNearReference(got, want, "");
  EXPECT_EQ(0, std::memcmp(run(l, x, 1).data(), got.data(), got.size() * sizeof(float)));
}

TEST(MoE, PathsGiveTheSameBits) {
  Layer l = makeLayer(/*h=*/33, /*inter=*/47, /*experts=*/6, /*topK=*/3, true, 11);
  std::vector<float> x = tokens(17, l.h, 5);
  std::vector<float> wide = run(l, x, 2), avx2 = run(l, x, 1), scalar = run(l, x, 0);
  EXPECT_EQ(0, std::memcmp(wide.data(), avx2.data(), wide.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(wide.data(), scalar.data(), wide.size() * sizeof(float)));
}

TEST(MoE, TokenAloneEqualsTokenInABatch) {
  Layer l = makeLayer(/*h=*/48, /*inter=*/64, /*experts=*/8, /*topK=*/2, true, 13);
  std::vector<float> x = tokens(29, l.h, 9);
  std::vector<float> all = run(l, x, 2);
  for (int64_t t : {0, 7, 28}) {
    std::vector<float> one(x.begin() + t * l.h, x.begin() + (t + 1) * l.h);
    std::vector<float> alone = run(l, one, 2);
    EXPECT_EQ(0, std::memcmp(alone.data(), &all[t * l.h], l.h * sizeof(float))) << "token " << t;
  }
}

TEST(MoE, PartitionedRanksSumToTheSameBits) {
  Layer l = makeLayer(/*h=*/40, /*inter=*/48, /*experts=*/8, /*topK=*/2, true, 19);
  std::vector<float> x = tokens(21, l.h, 4);
  std::vector<float> whole = run(l, x, 2);
  for (int64_t ranks : {2, 4, 8}) {
    std::vector<float> sum(whole.size(), 0.0f);
    for (int64_t r = 0; r < ranks; ++r) {
      xfmr_uk_moe_set_partition(r, ranks, nullptr, nullptr);
      std::vector<float> part = run(l, x, 2);
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += part[i];
    }
    xfmr_uk_moe_set_partition(0, 1, nullptr, nullptr);
    EXPECT_EQ(0, std::memcmp(sum.data(), whole.data(), sum.size() * sizeof(float)))
        << ranks << " ranks";
  }
}

TEST(MoE, SharedExpertMatchesReference) {
  const int64_t h = 24, inter = 40, rows = 9;
  std::mt19937 rng(23);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  };
  std::vector<float> g = random(h * inter), u = random(h * inter), d = random(inter * h);
  std::vector<float> scale = random(h), x = tokens(rows, h, 2), routed = random(rows * h);
  auto pack = [](const std::vector<float> &src, int64_t k, int64_t n) {
    std::vector<float> out(xfmr_uk_moe_packed_floats(1, k, n));
    xfmr_uk_moe_pack(src.data(), 1, k, n, out.data());
    return out;
  };
  std::vector<float> pg = pack(g, h, inter), pu = pack(u, h, inter), pd = pack(d, inter, h),
                     ps = pack(scale, h, 1);
  std::vector<float> out = routed;
  xfmr_uk_moe_shared_f32(x.data(), rows, h, inter, /*silu*/ 0, pg.data(), pu.data(), pd.data(),
                         ps.data(), out.data());
  for (int64_t t = 0; t < rows; ++t) {
    double s = 0;
    for (int64_t c = 0; c < h; ++c)
      s += double(x[t * h + c]) * scale[c];
    s = 1 / (1 + std::exp(-s));
    std::vector<double> a(inter);
    for (int64_t i = 0; i < inter; ++i) {
      double gv = 0, uv = 0;
      for (int64_t c = 0; c < h; ++c) {
        gv += double(x[t * h + c]) * g[c * inter + i];
        uv += double(x[t * h + c]) * u[c * inter + i];
      }
      a[i] = gv / (1 + std::exp(-gv)) * uv;
    }
    for (int64_t c = 0; c < h; ++c) {
      double y = 0;
      for (int64_t i = 0; i < inter; ++i)
        y += a[i] * d[i * h + c];
      ASSERT_NEAR(out[t * h + c], routed[t * h + c] + s * y, 1e-4) << t << "," << c;
    }
  }
}

TEST(MoE, CountsOnlySelectedExperts) {
  Layer l = makeLayer(/*h=*/32, /*inter=*/64, /*experts=*/8, /*topK=*/2, true, 17);
  std::vector<float> x = tokens(1, l.h, 1);
  xfmr_uk_moe_reset_stats();
  run(l, x, 2);
  uint64_t s[5];
  xfmr_uk_moe_stats(s);
  EXPECT_EQ(s[0], 1u);
  EXPECT_EQ(s[1], 1u);
  EXPECT_EQ(s[2], 2u);
  EXPECT_EQ(s[3], 2u * 3 * 32 * 64 * sizeof(float)); // two of eight experts
  EXPECT_EQ(s[4], 8u * 3 * 32 * 64 * sizeof(float));
}

/// `l` with its expert weights quantized as --quant does: bf16 (rounded to
/// nearest even) or int8 (per output column of each expert matrix,
/// symmetric, scale max|w| / 127); `l`'s f32 weights replaced by the
/// dequantized values (what the reference multiplies by) and the narrow
/// packing and scales returned.
struct NarrowExperts {
  int64_t format;
  std::vector<uint8_t> wg, wu, wd;
  std::vector<float> sg, su, sd;
};

NarrowExperts quantizeExperts(Layer &l, int64_t format) {
  NarrowExperts q{format, {}, {}, {}, {}, {}, {}};
  auto one = [&](std::vector<float> &w, int64_t k, int64_t n, std::vector<uint8_t> &packed,
                 std::vector<float> &scales) {
    int64_t bytes = format == XFMR_UK_MOE_BF16 ? 2 : 1;
    int64_t matrix = xfmr_uk_packed_narrow_bytes(n, k, bytes);
    packed.resize(l.experts * matrix);
    for (int64_t e = 0; e < l.experts; ++e) {
      float *m = &w[e * k * n];
      std::vector<uint8_t> raw(k * n * bytes);
      for (int64_t j = 0; j < n; ++j) {
        float mx = 0;
        for (int64_t i = 0; i < k; ++i)
          mx = std::max(mx, std::fabs(m[i * n + j]));
        float scale = mx / 127.0f;
        if (format == XFMR_UK_MOE_I8)
          scales.push_back(scale);
        for (int64_t i = 0; i < k; ++i) {
          float &v = m[i * n + j];
          if (format == XFMR_UK_MOE_BF16) {
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
            std::memcpy(&v, &bits, 4);
            uint16_t top = static_cast<uint16_t>(bits >> 16);
            std::memcpy(&raw[(i * n + j) * 2], &top, 2);
          } else {
            float r = std::nearbyint(v / scale);
            int8_t c = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
            raw[i * n + j] = static_cast<uint8_t>(c);
            v = c * scale;
          }
        }
      }
      xfmr_uk_pack_narrow(raw.data(), k, n, bytes, &packed[e * matrix]);
    }
  };
  one(l.wg, l.h, l.inter, q.wg, q.sg);
  one(l.wu, l.h, l.inter, q.wu, q.su);
  one(l.wd, l.inter, l.h, q.wd, q.sd);
  return q;
}

std::vector<float> runNarrow(const Layer &l, const NarrowExperts &q, const std::vector<float> &x) {
  int64_t rows = static_cast<int64_t>(x.size()) / l.h;
  std::vector<float> out(rows * l.h);
  auto scales = [](const std::vector<float> &s) { return s.empty() ? nullptr : s.data(); };
  std::vector<float> constants = l.constants();
  xfmr_uk_moe_narrow(x.data(), rows, l.h, l.inter, l.experts, l.topK, l.flags(), q.format,
                     l.pRouter.data(), q.wg.data(), q.wu.data(), q.wd.data(), scales(q.sg),
                     scales(q.su), scales(q.sd), constants.data(), out.data());
  return out;
}

TEST(MoE, QuantizedExpertsMatchReference) {
  for (int64_t format : {int64_t(XFMR_UK_MOE_BF16), int64_t(XFMR_UK_MOE_I8)}) {
    Layer l = makeLayer(/*h=*/32, /*inter=*/40, /*experts=*/6, /*topK=*/2, true, 21);
    NarrowExperts q = quantizeExperts(l, format);
    std::vector<float> x = tokens(15, l.h, 22);
    std::vector<float> got = runNarrow(l, q, x);
    std::vector<double> want = reference(l, x); // dequantized weights
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << format << " " << i;
    // A token alone gives the bits it gets among the others.
    for (int64_t t : {0, 7, 14}) {
      std::vector<float> one(x.begin() + t * l.h, x.begin() + (t + 1) * l.h);
      std::vector<float> alone = runNarrow(l, q, one);
      ASSERT_EQ(0, std::memcmp(alone.data(), &got[t * l.h], l.h * sizeof(float))) << t;
    }
  }
}

TEST(MoE, QuantizedExpertsReadFewerBytes) {
  Layer l = makeLayer(/*h=*/32, /*inter=*/64, /*experts=*/8, /*topK=*/2, true, 17);
  NarrowExperts q = quantizeExperts(l, XFMR_UK_MOE_I8);
  std::vector<float> x = tokens(1, l.h, 1);
  xfmr_uk_moe_reset_stats();
  runNarrow(l, q, x);
  uint64_t s[5];
  xfmr_uk_moe_stats(s);
  EXPECT_EQ(s[3], 2u * 3 * 32 * 64); // two of eight experts, one byte a weight
  EXPECT_EQ(s[4], 8u * 3 * 32 * 64);
}

TEST(MoE, CountsTokensPerExpertPerLayer) {
  // Two layers; per expert of each, the tokens a double-precision router
  // sends it (top 2 of 8 by probability; near-ties are unlikely with these
  // random weights and would show as a mismatch of one).
  Layer a = makeLayer(/*h=*/16, /*inter=*/8, /*experts=*/8, /*topK=*/2, true, 3);
  Layer b = makeLayer(/*h=*/16, /*inter=*/8, /*experts=*/4, /*topK=*/1, false, 4);
  std::vector<float> x = tokens(40, 16, 5);
  xfmr_uk_moe_reset_stats();
  run(a, x, 2);
  run(b, x, 1);
  run(a, std::vector<float>(x.begin(), x.begin() + 10 * 16), 0);
  auto expected = [&](const Layer &l, int64_t rows) {
    std::vector<uint64_t> counts(l.experts, 0);
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<double> p(l.experts, 0.0);
      for (int64_t e = 0; e < l.experts; ++e)
        for (int64_t c = 0; c < l.h; ++c)
          p[e] += double(x[t * l.h + c]) * l.router[c * l.experts + e];
      std::vector<int64_t> idx(l.experts);
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t i, int64_t j) { return p[i] > p[j]; });
      for (int64_t j = 0; j < l.topK; ++j)
        ++counts[idx[j]];
    }
    return counts;
  };
  std::vector<uint64_t> wantA = expected(a, 40), moreA = expected(a, 10), wantB = expected(b, 40);
  for (size_t e = 0; e < wantA.size(); ++e)
    wantA[e] += moreA[e];
  // Layers of earlier tests stay registered (zeroed): find these two by
  // their expert counts and totals.
  std::vector<std::vector<uint64_t>> seen;
  for (int64_t layer = 0; layer < xfmr_uk_moe_load_layers(); ++layer) {
    std::vector<uint64_t> counts(16, 0);
    int64_t experts = xfmr_uk_moe_expert_tokens(layer, counts.data(), 16);
    counts.resize(experts);
    if (std::accumulate(counts.begin(), counts.end(), uint64_t(0)) != 0)
      seen.push_back(counts);
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], wantA); // a ran first
  EXPECT_EQ(seen[1], wantB);
  EXPECT_EQ(xfmr_uk_moe_expert_tokens(xfmr_uk_moe_load_layers(), nullptr, 0), 0);
}

} // namespace
