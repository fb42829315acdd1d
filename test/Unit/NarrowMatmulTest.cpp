//===- NarrowMatmulTest.cpp - f32 x bf16 / fp8 micro-kernels --------------===//
//
// Part of xfmr.
//
// runtime/ukernels/MatmulNarrow.c against a plain loop: each output is the
// FMA chain sum_k a[k] * w[k][n] from 0 in k order, with w widened from its
// bits by the definition of the format (bf16: the top half of an f32; e4m3fn:
// sign, exponent bias 7, subnormals at 2^-9), so the kernels must agree bit
// for bit: every tile shape (4-row groups, one row over four panels, 1-3 rows
// over two panels or one), partial last panels, column ranges that start
// inside the matrix, every fp8 bit pattern but NaN, and results that do not
// depend on the rows around them.
//
//===----------------------------------------------------------------------===//

#include "runtime/ukernels/MatmulNarrow.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// An fp8 e4m3fn value from its definition.
float e4m3(uint8_t b) {
  int e = (b >> 3) & 0xF, m = b & 7;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                   : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return b & 0x80 ? -v : v;
}

struct Case {
  int64_t rows, k, n;
};

/// Runs the kernel on [rows, K] x [K, N] of `elemBytes` weights (random
/// bits; fp8 NaNs replaced) over column tiles of 64 and compares with the
/// plain loop.
void check(const Case &c, int64_t elemBytes, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(c.rows * c.k);
  for (float &x : a)
    x = u(g);
  std::vector<uint8_t> w(c.k * c.n * elemBytes);
  std::vector<float> wide(c.k * c.n);
  for (int64_t i = 0; i < c.k * c.n; ++i) {
    if (elemBytes == 2) {
      // Random bf16 of moderate exponent (no inf/NaN).
      auto h = static_cast<uint16_t>((g() & 0x807F) | ((0x3C + g() % 8) << 7));
      std::memcpy(&w[2 * i], &h, 2);
      wide[i] = fromBits(static_cast<uint32_t>(h) << 16);
    } else {
      auto b = static_cast<uint8_t>(g());
      if ((b & 0x7F) == 0x7F) // NaN: not produced by the quantizer
        b &= 0xFE;
      w[i] = b;
      wide[i] = e4m3(b);
    }
  }
  std::vector<uint8_t> packed(xfmr_uk_packed_narrow_bytes(c.n, c.k, elemBytes));
  xfmr_uk_pack_narrow(w.data(), c.k, c.n, elemBytes, packed.data());
  std::vector<float> got(c.rows * c.n, NAN);
  for (int64_t n0 = 0; n0 < c.n; n0 += 64) {
    int64_t n1 = std::min<int64_t>(n0 + 64, c.n);
    if (elemBytes == 2)
      xfmr_uk_matmul_f32bf16(a.data(), c.rows, c.k, packed.data(), n0, n1, got.data(), c.n);
    else
      xfmr_uk_matmul_f32fp8(a.data(), c.rows, c.k, packed.data(), n0, n1, got.data(), c.n);
  }
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t n = 0; n < c.n; ++n) {
      float acc = 0.0f;
      for (int64_t i = 0; i < c.k; ++i)
        acc = std::fma(a[m * c.k + i], wide[i * c.n + n], acc);
      ASSERT_EQ(acc, got[m * c.n + n])
          << "rows " << c.rows << " K " << c.k << " N " << c.n << " at [" << m << ", " << n
          << "], " << (elemBytes == 2 ? "bf16" : "fp8");
    }
}

const Case kCases[] = {{1, 32, 16},  {1, 48, 64},  {1, 40, 100}, {2, 33, 80}, {3, 16, 48},
                       {4, 64, 17},  {5, 24, 70},  {7, 8, 129},  {9, 100, 64}, {16, 32, 200},
                       // Twelve-row groups (AVX-512 where the CPU has it) and what is left.
                       {12, 40, 48}, {13, 64, 70}, {27, 33, 129}};

TEST(NarrowMatmul, BF16MatchesFMAChain) {
  uint32_t seed = 1;
  for (const Case &c : kCases)
    check(c, 2, seed++);
}

TEST(NarrowMatmul, FP8MatchesFMAChain) {
  uint32_t seed = 100;
  for (const Case &c : kCases)
    check(c, 1, seed++);
}

/// Every e4m3fn bit pattern but NaN, one per column, against a one-hot row.
TEST(NarrowMatmul, FP8EveryValue) {
  const int64_t k = 1, n = 254;
  std::vector<uint8_t> w;
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F)
      w.push_back(static_cast<uint8_t>(b));
  ASSERT_EQ(static_cast<int64_t>(w.size()), n);
  std::vector<uint8_t> packed(xfmr_uk_packed_narrow_bytes(n, k, 1));
  xfmr_uk_pack_narrow(w.data(), k, n, 1, packed.data());
  // One row, and twelve (the AVX-512 tile where the CPU has it).
  for (int64_t rows : {1, 12}) {
    std::vector<float> ones(rows, 1.0f);
    std::vector<float> got(rows * n);
    for (int64_t n0 = 0; n0 < n; n0 += 64)
      xfmr_uk_matmul_f32fp8(ones.data(), rows, k, packed.data(), n0,
                            std::min<int64_t>(n0 + 64, n), got.data(), n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(e4m3(w[i]), got[r * n + i]) << "byte 0x" << std::hex << static_cast<int>(w[i]);
  }
}

/// A row's results alone equal the same row's among others.
TEST(NarrowMatmul, RowsIndependentOfBatch) {
  const int64_t k = 40, n = 96, rows = 27;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(rows * k);
  for (float &x : a)
    x = u(g);
  std::vector<uint8_t> w(k * n);
  for (uint8_t &b : w)
    b = static_cast<uint8_t>(g() & 0x7E);
  std::vector<uint8_t> packed(xfmr_uk_packed_narrow_bytes(n, k, 1));
  xfmr_uk_pack_narrow(w.data(), k, n, 1, packed.data());
  std::vector<float> all(rows * n), one(n);
  xfmr_uk_matmul_f32fp8(a.data(), rows, k, packed.data(), 0, n, all.data(), n);
  for (int64_t m = 0; m < rows; ++m) {
    xfmr_uk_matmul_f32fp8(a.data() + m * k, 1, k, packed.data(), 0, n, one.data(), n);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(one[j], all[m * n + j]) << "row " << m << " column " << j;
  }
}

} // namespace
