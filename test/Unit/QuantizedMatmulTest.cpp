//===- QuantizedMatmulTest.cpp - int4/int8 x int8 micro-kernels -----------===//
//
// Part of xfmr.
//
// runtime/ukernels/QuantizedMatmul.c and QuantizedMatmul8.c against a plain
// integer loop over the weights as MatMulNBits stores them: the activation
// quantization reference rounds as onnxruntime's MLAS does, exact block
// sums, zero points, partial column groups (and for 8 bits blocks that are
// not whole 32-value chunks, a block longer than K, and the extreme products
// vpmaddubsw could saturate on), and results that do not depend on the batch
// or on the column tiling, on every path the CPU has (scalar, AVX2 and
// AVX512-VNNI: the same bits).
//
//===----------------------------------------------------------------------===//

#include "runtime/ukernels/QuantizedMatmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

/// The reference of the activation quantization the generated code does
/// (quantizeRows in lib/Conversion/ONNXToLinalg/Linear.cpp), as onnxruntime's
/// MLAS does it (QuantizeARow_CompInt8): per block of `blk`, scale = max|a| /
/// 127, q = round(a * (127 / max|a|)), ties to even; sum = the block's q.
/// q is [rows, Kp], Kp = K rounded up to whole blocks; a partial last
/// block's missing values are 0.
void quantizeRows(const float *a, int64_t rows, int64_t k, int64_t blk, int8_t *aq, float *scale,
                  int32_t *sum) {
  int64_t blocks = (k + blk - 1) / blk, kp = blocks * blk;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const float *x = a + r * k + b * blk;
      int64_t count = std::min(blk, k - b * blk);
      float amax = 0.0f;
      for (int64_t i = 0; i < count; ++i)
        amax = std::max(amax, std::fabs(x[i]));
      float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
      int32_t total = 0;
      for (int64_t i = 0; i < blk; ++i) {
        auto v = i < count ? static_cast<int32_t>(std::nearbyint(x[i] * inv)) : 0;
        aq[r * kp + b * blk + i] = static_cast<int8_t>(v);
        total += v;
      }
      scale[r * blocks + b] = amax / 127.0f;
      sum[r * blocks + b] = total;
    }
}

struct Problem {
  int64_t k, n, blk, rows;
  bool zeros;
};

struct Packed {
  std::vector<uint8_t> w;
  std::vector<float> sw, zw;
};

class QuantizedMatmul {
public:
  /// Random nibbles, scales and activations; `extreme`: nibbles 15 only and
  /// activations at +max (AVX2's int16 sums at their largest).
  /// K need not be a whole number of blocks: the weights are then stored
  /// as MatMulNBits stores them, the last block padded (with random nibbles
  /// here, which must not matter).
  explicit QuantizedMatmul(const Problem &p, bool extreme = false)
      : p(p), blocks((p.k + p.blk - 1) / p.blk), kp(blocks * p.blk) {
    std::mt19937 rng(static_cast<uint32_t>(p.k * 131 + p.n * 7 + p.rows));
    std::uniform_int_distribution<int> byte(0, 255), nib(0, 15);
    std::uniform_real_distribution<float> val(-2.0f, 2.0f), scale(0.001f, 0.1f);
    a.resize(p.rows * p.k);
    for (float &x : a)
      x = extreme ? 2.0f : val(rng);
    src.resize(p.n * kp / 2);
    for (uint8_t &b : src)
      b = static_cast<uint8_t>(extreme ? 0xFF : byte(rng));
    scales.resize(p.n * blocks);
    for (float &s : scales)
      s = scale(rng);
    if (p.zeros) {
      zp.resize(p.n * blocks);
      // Float zero points (xfmr-quantize-weights' offsets): an integer
      // nibble plus a fraction.
      for (float &z : zp)
        z = static_cast<float>(nib(rng)) + val(rng) / 4.0f;
    }
    int64_t padded = (p.n + XFMR_UK_Q4_COLUMNS - 1) / XFMR_UK_Q4_COLUMNS * XFMR_UK_Q4_COLUMNS;
    packed.w.resize(xfmr_uk_packed_q4_bytes(p.n, kp));
    packed.sw.resize(padded * blocks);
    if (p.zeros)
      packed.zw.resize(padded * blocks);
    xfmr_uk_pack_q4(src.data(), scales.data(), p.zeros ? zp.data() : nullptr, p.n, kp, p.blk,
                    packed.w.data(), packed.sw.data(), p.zeros ? packed.zw.data() : nullptr);
    aq.resize(p.rows * kp);
    sa.resize(p.rows * blocks);
    suma.resize(p.rows * blocks);
    quantizeRows(a.data(), p.rows, p.k, p.blk, aq.data(), sa.data(), suma.data());
  }

  /// C for rows [r0, r0 + rows), columns [n0, n1), on the best path the CPU
  /// has or on `level` (0 scalar, 1 AVX2, 2 AVX512-VNNI).
  void run(int64_t r0, int64_t rows, int64_t n0, int64_t n1, std::vector<float> &c,
           int level = 2) const {
    const float *zw = p.zeros ? packed.zw.data() : nullptr;
    if (level == 2) // the entry point generated code calls
      xfmr_uk_matmul_q4q8(aq.data() + r0 * kp, sa.data() + r0 * blocks,
                          suma.data() + r0 * blocks, rows, kp, p.blk, packed.w.data(),
                          packed.sw.data(), zw, n0, n1, c.data() + r0 * p.n, p.n);
    else
      xfmr_uk_matmul_q4q8_at(level, aq.data() + r0 * kp, sa.data() + r0 * blocks,
                             suma.data() + r0 * blocks, rows, kp, p.blk, packed.w.data(),
                             packed.sw.data(), zw, n0, n1, c.data() + r0 * p.n, p.n);
  }

  /// sum_b sa * sw * sum_i q_a * (q_w - zp) over A's K values, in double
  /// from the stored layout.
  double reference(int64_t m, int64_t n) const {
    double acc = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      double dot = 0;
      double z = p.zeros ? zp[n * blocks + b] : 8;
      for (int64_t i = 0; i < std::min(p.blk, p.k - b * p.blk); ++i) {
        int64_t kk = b * p.blk + i;
        int64_t q = (src[n * (kp / 2) + kk / 2] >> (4 * (kk % 2))) & 0xF;
        dot += static_cast<double>(aq[m * kp + kk]) * (static_cast<double>(q) - z);
      }
      acc += static_cast<double>(sa[m * blocks + b]) * scales[n * blocks + b] * dot;
    }
    return acc;
  }

  Problem p;
  int64_t blocks, kp;
  std::vector<float> a, scales, zp;
  std::vector<uint8_t> src;
  Packed packed;
  std::vector<int8_t> aq;
  std::vector<float> sa;
  std::vector<int32_t> suma;
};

TEST(QuantizedMatmul, QuantizesLikeMLAS) {
  // One block of 32 with max |a| = 127: the multiplier is exactly 1, so
  // the values round half to even.
  std::vector<float> a(32, 0.0f);
  a[0] = 127.0f;
  a[1] = 0.5f;
  a[2] = 1.5f;
  a[3] = -2.5f;
  a[4] = -0.49f;
  std::vector<int8_t> q(32);
  float scale;
  int32_t sum;
  quantizeRows(a.data(), 1, 32, 32, q.data(), &scale, &sum);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(sum, 127 + 0 + 2 - 2);
  // An all-zero block: scale 0, every value 0.
  std::vector<float> zeros(32, 0.0f);
  quantizeRows(zeros.data(), 1, 32, 32, q.data(), &scale, &sum);
  EXPECT_EQ(scale, 0.0f);
  EXPECT_EQ(sum, 0);
  for (int8_t v : q)
    EXPECT_EQ(v, 0);
}

/// The 4-bit paths (as far as this CPU has them: scalar, AVX2 and
/// AVX512-VNNI, whose row tiles of up to 6 rows x 32 columns meet partial
/// tiles in both directions here).
constexpr int kLevels[] = {0, 1, 2};

/// Every output of one call over all rows and columns on path `level` is
/// the integer reference within 1e-5 (relative above 1).
void expectIntegerReference(const QuantizedMatmul &q, const Problem &p, int level) {
  std::vector<float> c(p.rows * p.n, NAN);
  q.run(0, p.rows, 0, p.n, c, level);
  for (int64_t m = 0; m < p.rows; ++m)
    for (int64_t n = 0; n < p.n; ++n) {
      double want = q.reference(m, n);
      EXPECT_NEAR(c[m * p.n + n], want, 1e-5 * std::max(1.0, std::fabs(want)))
          << "level " << level << " k " << p.k << " n " << p.n << " blk " << p.blk << " at ("
          << m << ", " << n << ")";
    }
}

TEST(QuantizedMatmul, MatchesIntegerReference) {
  for (Problem p : {Problem{64, 48, 32, 1, false}, Problem{96, 70, 32, 3, true},
                    Problem{256, 37, 64, 2, true}, Problem{384, 9, 128, 5, false},
                    Problem{1024, 130, 32, 1, true}, Problem{576, 83, 32, 11, true},
                    Problem{192, 64, 64, 4, false}, Problem{128, 20, 32, 9, false},
                    Problem{576, 50, 32, 14, true}, Problem{1536, 33, 128, 7, true},
                    // A partial last block (SmolLM2's K = 576 in blocks of 128; 96 in 64).
                    Problem{576, 40, 128, 7, true}, Problem{576, 19, 128, 1, false},
                    Problem{96, 20, 64, 3, false}})
    for (int level : kLevels)
      expectIntegerReference(QuantizedMatmul(p), p, level);
}

/// All rows at once, each row alone, and in column tiles of 16: the same
/// bits (`K` is QuantizedMatmul or QuantizedMatmul8), on the best path or on
/// `level`; `step` > 0 also checks tiles of `step` columns and rows taken
/// in uneven runs (1, 2, 3, ...).
template <typename K>
void expectIndependentOfBatchAndTiling(const K &q, int level = 2, int64_t step = 0) {
  int64_t rows = q.p.rows, n = q.p.n;
  std::vector<float> batched(rows * n), alone(rows * n), tiled(rows * n);
  q.run(0, rows, 0, n, batched, level);
  for (int64_t m = 0; m < rows; ++m)
    q.run(m, 1, 0, n, alone, level);
  for (int64_t n0 = 0; n0 < n; n0 += 16)
    q.run(0, rows, n0, std::min<int64_t>(n0 + 16, n), tiled, level);
  EXPECT_EQ(0, std::memcmp(batched.data(), alone.data(), batched.size() * sizeof(float)))
      << "level " << level;
  EXPECT_EQ(0, std::memcmp(batched.data(), tiled.data(), batched.size() * sizeof(float)))
      << "level " << level;
  if (step <= 0)
    return;
  std::vector<float> uneven(rows * n);
  for (int64_t m = 0, run = 1; m < rows; m += run, ++run)
    for (int64_t n0 = 0; n0 < n; n0 += step)
      q.run(m, std::min(run, rows - m), n0, std::min(n0 + step, n), uneven, level);
  EXPECT_EQ(0, std::memcmp(batched.data(), uneven.data(), batched.size() * sizeof(float)))
      << "level " << level << " step " << step;
}

TEST(QuantizedMatmul, PathsGiveTheSameBits) {
  // Scalar, AVX2 and AVX512-VNNI (as far as this CPU has them): the same
  // integer block sums and the same float epilogue, so the same bits; 1-25
  // rows (decode tiles, the 6-row prefill tiles and partial ones), zero
  // points or none, blocks of one and four 32-value chunks, a last partial
  // panel and columns taken from inside panels.
  for (Problem p : {Problem{576, 83, 32, 11, true}, Problem{384, 64, 128, 9, false},
                    Problem{96, 70, 32, 1, true}, Problem{256, 37, 64, 2, false},
                    Problem{576, 48, 32, 25, false}, Problem{1536, 40, 128, 13, true},
                    Problem{64, 16, 32, 4, true}, Problem{576, 40, 128, 13, true}}) {
    QuantizedMatmul q(p);
    std::vector<float> scalar(p.rows * p.n), avx2(p.rows * p.n), best(p.rows * p.n);
    q.run(0, p.rows, 0, p.n, scalar, 0);
    q.run(0, p.rows, 0, p.n, avx2, 1);
    q.run(0, p.rows, 0, p.n, best, 2);
    EXPECT_EQ(0, std::memcmp(scalar.data(), avx2.data(), avx2.size() * sizeof(float)))
        << "k " << p.k << " n " << p.n << " rows " << p.rows;
    EXPECT_EQ(0, std::memcmp(scalar.data(), best.data(), avx2.size() * sizeof(float)))
        << "k " << p.k << " n " << p.n << " rows " << p.rows;
    // A call for columns [n0, n1) inside panels leaves the others alone.
    std::vector<float> some(p.rows * p.n, -1.0f);
    int64_t n0 = std::min<int64_t>(5, p.n - 1), n1 = std::max<int64_t>(n0 + 1, p.n - 3);
    q.run(0, p.rows, n0, n1, some, 2);
    for (int64_t m = 0; m < p.rows; ++m)
      for (int64_t n = 0; n < p.n; ++n)
        EXPECT_EQ(some[m * p.n + n], n >= n0 && n < n1 ? best[m * p.n + n] : -1.0f)
            << "(" << m << ", " << n << ")";
  }
}

TEST(QuantizedMatmul, ExtremeProductsDoNotSaturate) {
  // 15 x 127 in every product: AVX2's int16 sums of a 32-value chunk reach
  // 8 x 3810 = 30480; every path still the exact integers.
  for (Problem p : {Problem{256, 20, 32, 3, false}, Problem{512, 16, 128, 7, true}})
    for (int level : kLevels)
      expectIntegerReference(QuantizedMatmul(p, /*extreme=*/true), p, level);
}

TEST(QuantizedMatmul, IndependentOfBatchAndTiling) {
  // Every path: whole and partial row tiles (6 rows on AVX512-VNNI, 4 on
  // AVX2, 1-4 rows decode), column tiles of 16, 12, 20 and 40 (calls that
  // start and end inside a 16-column panel, tiles of one and two panels)
  // and a last partial panel.
  for (Problem p : {Problem{256, 70, 64, 5, true}, Problem{576, 83, 32, 11, true},
                    Problem{384, 64, 128, 9, false}, Problem{576, 100, 32, 20, false}})
    for (int level : kLevels) {
      QuantizedMatmul q(p);
      expectIndependentOfBatchAndTiling(q, level, 12);
      expectIndependentOfBatchAndTiling(q, level, 20);
      expectIndependentOfBatchAndTiling(q, level, 40);
    }
}

/// An 8-bit problem: `blk` values per block (k a multiple), MatMulNBits
/// rows of `ld` >= k bytes (ld > k: one block_size > K, the rest padding).
struct Problem8 {
  int64_t k, n, blk, rows, ld;
  bool zeros;
};

class QuantizedMatmul8 {
public:
  /// Random bytes, scales and activations; `extreme`: stored bytes 0 and
  /// 255 only and activations at +-max, the largest products there are.
  QuantizedMatmul8(const Problem8 &p, bool extreme = false) : p(p), blocks(p.k / p.blk) {
    std::mt19937 rng(static_cast<uint32_t>(p.k * 131 + p.n * 7 + p.rows));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> val(-2.0f, 2.0f), scale(0.001f, 0.1f);
    a.resize(p.rows * p.k);
    for (float &x : a)
      x = extreme ? (byte(rng) < 128 ? -2.0f : 2.0f) : val(rng);
    src.resize(p.n * p.ld);
    for (uint8_t &b : src)
      b = static_cast<uint8_t>(extreme ? (byte(rng) < 128 ? 0 : 255) : byte(rng));
    scales.resize(p.n * blocks);
    for (float &s : scales)
      s = scale(rng);
    if (p.zeros) {
      zp.resize(p.n * blocks);
      for (uint8_t &z : zp)
        z = static_cast<uint8_t>(byte(rng));
    }
    int64_t padded = (p.n + XFMR_UK_Q8_COLUMNS - 1) / XFMR_UK_Q8_COLUMNS * XFMR_UK_Q8_COLUMNS;
    w.resize(xfmr_uk_packed_q8_bytes(p.n, p.k, p.blk));
    sw.resize(padded * blocks);
    if (p.zeros)
      zw.resize(padded * blocks);
    xfmr_uk_pack_q8(src.data(), p.ld, scales.data(), p.zeros ? zp.data() : nullptr, p.n, p.k, p.blk,
                    w.data(), sw.data(), p.zeros ? zw.data() : nullptr);
    aq.resize(p.rows * p.k);
    sa.resize(p.rows * blocks);
    suma.resize(p.rows * blocks);
    quantizeRows(a.data(), p.rows, p.k, p.blk, aq.data(), sa.data(), suma.data());
  }

  /// C for rows [r0, r0 + rows), columns [n0, n1), on the best path the CPU
  /// has or on `level` (0 scalar, 1 AVX2, 2 AVX512-VNNI).
  void run(int64_t r0, int64_t rows, int64_t n0, int64_t n1, std::vector<float> &c,
           int level = 2) const {
    xfmr_uk_matmul_q8q8_at(level, aq.data() + r0 * p.k, sa.data() + r0 * blocks, suma.data() + r0 * blocks,
                        rows, p.k, p.blk, w.data(), sw.data(), p.zeros ? zw.data() : nullptr, n0,
                        n1, c.data() + r0 * p.n, p.n);
  }

  /// sum_b sa * sw * sum_i q_a * (q_w - zp), in double from the stored layout.
  double reference(int64_t m, int64_t n) const {
    double acc = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t dot = 0, z = p.zeros ? zp[n * blocks + b] : 128;
      for (int64_t i = 0; i < p.blk; ++i) {
        int64_t kk = b * p.blk + i;
        dot += static_cast<int64_t>(aq[m * p.k + kk]) * (src[n * p.ld + kk] - z);
      }
      acc += static_cast<double>(sa[m * blocks + b]) * scales[n * blocks + b] * dot;
    }
    return acc;
  }

  /// Every element of run(0, rows, 0, n) within f32 rounding of reference().
  void expectMatches() const {
    std::vector<float> c(p.rows * p.n, NAN);
    run(0, p.rows, 0, p.n, c);
    for (int64_t m = 0; m < p.rows; ++m)
      for (int64_t n = 0; n < p.n; ++n) {
        double want = reference(m, n);
        EXPECT_NEAR(c[m * p.n + n], want, 1e-5 * std::max(1.0, std::fabs(want)))
            << "k " << p.k << " n " << p.n << " blk " << p.blk << " at (" << m << ", " << n << ")";
      }
  }

  Problem8 p;
  int64_t blocks;
  std::vector<float> a, scales;
  std::vector<uint8_t> src, zp;
  std::vector<uint8_t> w;
  std::vector<float> sw;
  std::vector<uint8_t> zw;
  std::vector<int8_t> aq;
  std::vector<float> sa;
  std::vector<int32_t> suma;
};

TEST(QuantizedMatmul8, MatchesIntegerReference) {
  for (Problem8 p : {Problem8{64, 48, 64, 1, 64, false}, Problem8{96, 70, 32, 3, 96, true},
                     Problem8{100, 9, 100, 2, 128, false}, Problem8{896, 37, 896, 2, 1024, false},
                     Problem8{48, 13, 16, 3, 48, true}, Problem8{1024, 130, 1024, 1, 1024, false},
                     Problem8{2816, 6, 256, 2, 2816, true},
                     // Four rows and more: the AVX512-VNNI tiles where the CPU has them.
                     Problem8{96, 70, 32, 9, 96, true}, Problem8{100, 9, 100, 4, 128, false},
                     Problem8{2816, 6, 256, 8, 2816, false}})
    QuantizedMatmul8(p).expectMatches();
}

TEST(QuantizedMatmul8, ExtremeProductsDoNotSaturate) {
  QuantizedMatmul8(Problem8{256, 8, 256, 2, 256, false}, /*extreme=*/true).expectMatches();
  QuantizedMatmul8(Problem8{256, 8, 64, 2, 256, true}, /*extreme=*/true).expectMatches();
  QuantizedMatmul8(Problem8{4096, 8, 4096, 5, 4096, false}, /*extreme=*/true).expectMatches();
}

TEST(QuantizedMatmul8, IndependentOfBatchAndTiling) {
  // Batched (whole four-row tiles, VNNI where the CPU has it, and a
  // remainder) and alone (one row each): bit-identical.
  for (Problem8 p : {Problem8{200, 70, 200, 5, 256, false}, Problem8{256, 37, 64, 11, 256, true},
                     Problem8{2816, 6, 256, 8, 2816, true}})
    expectIndependentOfBatchAndTiling(QuantizedMatmul8(p));
}

TEST(QuantizeRows, MatchesReference) {
  // Blocks of 16 and 32, one block spanning K with a masked tail (100,
  // 1030), zeros, ties at .5 and a row of one repeated value.
  struct Case {
    int64_t rows, k, blk;
  };
  for (Case c : {Case{3, 64, 16}, Case{5, 96, 32}, Case{2, 100, 100}, Case{4, 1030, 1030},
                 Case{3, 576, 128}, Case{2, 100, 32}}) { // the last two: a partial last block
    std::mt19937 rng(static_cast<uint32_t>(c.k * 31 + c.blk));
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<float> a(c.rows * c.k);
    for (float &x : a)
      x = val(rng);
    for (int64_t i = 0; i < c.k; ++i) // row 0: exact multiples of amax / 127 / 2
      a[i] = (i % 5 == 0) ? 0.0f : static_cast<float>(static_cast<int>(i % 255) - 127) * 0.5f;
    int64_t blocks = (c.k + c.blk - 1) / c.blk;
    std::vector<int8_t> want(c.rows * blocks * c.blk), got(want.size(), 99);
    std::vector<float> wantScale(c.rows * blocks), gotScale(c.rows * blocks);
    std::vector<int32_t> wantSum(c.rows * blocks), gotSum(c.rows * blocks);
    quantizeRows(a.data(), c.rows, c.k, c.blk, want.data(), wantScale.data(), wantSum.data());
    xfmr_uk_quantize_rows(a.data(), c.rows, c.k, c.blk, got.data(), gotScale.data(),
                          gotSum.data());
    EXPECT_EQ(want, got) << "k " << c.k << " blk " << c.blk;
    EXPECT_EQ(0, std::memcmp(wantScale.data(), gotScale.data(), gotScale.size() * sizeof(float)));
    EXPECT_EQ(wantSum, gotSum);
  }
}

TEST(QuantizedMatmul8, PathsGiveTheSameBits) {
  // Scalar, AVX2 and AVX512-VNNI (as far as this CPU has them): the same
  // integers and the same float epilogue, so the same bits; with zero
  // points, a block size not a multiple of 4 and rows past a 12-row tile.
  for (Problem8 p : {Problem8{200, 70, 200, 13, 256, false}, Problem8{96, 37, 32, 5, 96, true},
                     Problem8{102, 33, 102, 3, 128, false}, Problem8{2816, 20, 2816, 25, 2816, false}}) {
    QuantizedMatmul8 q(p, /*extreme=*/p.zeros);
    std::vector<float> scalar(p.rows * p.n), avx2(p.rows * p.n), best(p.rows * p.n);
    q.run(0, p.rows, 0, p.n, scalar, 0);
    q.run(0, p.rows, 0, p.n, avx2, 1);
    q.run(0, p.rows, 0, p.n, best, 2);
    EXPECT_EQ(0, std::memcmp(scalar.data(), avx2.data(), scalar.size() * sizeof(float)))
        << "k " << p.k << " n " << p.n;
    EXPECT_EQ(0, std::memcmp(scalar.data(), best.data(), scalar.size() * sizeof(float)))
        << "k " << p.k << " n " << p.n;
    q.expectMatches();
  }
}

} // namespace
