//===- CollectivesTest.cpp - the tensor-parallel collectives' ukernels ----===//
//
// Part of xfmr. xfmr_uk_all_reduce_f32 / xfmr_uk_all_gather_f32 copy in one
// process and hand the transport exactly the buffers and sizes the
// generated code passes; here a fake transport stands for rank 0 of 2 whose
// peer holds a known tensor (runtime/lib/ExpertParallel.cpp's is MPI's).
//
//===----------------------------------------------------------------------===//

#include "runtime/ukernels/Collectives.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

/// The other rank's values: in[i] * 10.
void fakeReduce(const float *in, float *out, int64_t count, void *) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = in[i] + in[i] * 10;
}

/// Rank 0's columns, then the other rank's (its values * 10).
void fakeGather(const float *in, float *out, int64_t rows, int64_t cols, void *) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      out[r * 2 * cols + c] = in[r * cols + c];
      out[r * 2 * cols + cols + c] = in[r * cols + c] * 10;
    }
}

TEST(CollectivesTest, OneProcessCopies) {
  xfmr_uk_set_collectives(1, nullptr, nullptr, nullptr);
  std::vector<float> in{1, 2, 3, 4, 5, 6}, out(6, -1);
  xfmr_uk_all_reduce_f32(in.data(), out.data(), 6);
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), -1);
  xfmr_uk_all_gather_f32(in.data(), out.data(), 2, 3);
  EXPECT_EQ(out, in);
}

TEST(CollectivesTest, TwoRanksUseTheTransport) {
  uint64_t before[4];
  xfmr_uk_collective_stats(before);
  xfmr_uk_set_collectives(2, fakeReduce, fakeGather, nullptr);
  std::vector<float> in{1, 2, 3, 4, 5, 6}, sum(6);
  xfmr_uk_all_reduce_f32(in.data(), sum.data(), 6);
  EXPECT_EQ(sum, (std::vector<float>{11, 22, 33, 44, 55, 66}));
  std::vector<float> gathered(12);
  xfmr_uk_all_gather_f32(in.data(), gathered.data(), 2, 3);
  EXPECT_EQ(gathered, (std::vector<float>{1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60}));
  uint64_t after[4];
  xfmr_uk_collective_stats(after);
  EXPECT_EQ(after[0] - before[0], 1u);
  EXPECT_EQ(after[1] - before[1], 6u);
  EXPECT_EQ(after[2] - before[2], 1u);
  EXPECT_EQ(after[3] - before[3], 6u);
  xfmr_uk_set_collectives(1, nullptr, nullptr, nullptr);
}

} // namespace
