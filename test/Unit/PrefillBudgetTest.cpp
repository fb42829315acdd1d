//===- PrefillBudgetTest.cpp - The batch pool's prompt tokens per step ----===//

#include "xfmr/runtime/PrefillBudget.h"

#include <gtest/gtest.h>

#include <limits>

using namespace xfmr::rt;

namespace {

/// A machine whose step takes `decode` seconds plus `perToken` per prompt
/// token.
struct Machine {
  double decode, perToken;
  double step(int64_t prefill) const { return decode + perToken * static_cast<double>(prefill); }
};

TEST(PrefillBudgetTest, FloorUntilMeasured) {
  PrefillBudget b(0.5, 16, 512);
  EXPECT_EQ(b.tokens(), 16);
  b.observe(0, 0.040); // a decode step alone says nothing of prompt tokens
  EXPECT_EQ(b.tokens(), 16);
  b.observe(4, 0.100); // too few prompt tokens to sample
  EXPECT_EQ(b.tokens(), 16);
}

TEST(PrefillBudgetTest, ConvergesToTheSlackOfADecodeStep) {
  // 40 ms decode steps, 1 ms per prompt token: 0.5 x 40 ms = 20 tokens.
  Machine m{0.040, 0.001};
  PrefillBudget b(0.5, 4, 512);
  b.observe(0, m.step(0));
  for (int i = 0; i < 50; ++i) {
    int64_t n = b.tokens();
    b.observe(n, m.step(n));
    if (i % 4 == 0)
      b.observe(0, m.step(0));
  }
  EXPECT_EQ(b.tokens(), 20);
  EXPECT_NEAR(b.decodeStepSeconds(), 0.040, 1e-9);
  EXPECT_NEAR(b.secondsPerPrefillToken(), 0.001, 1e-9);
}

TEST(PrefillBudgetTest, GrowsAtMostTwofoldAStepAndStopsAtTheCeiling) {
  Machine m{0.040, 0.00001}; // prompt tokens nearly free
  PrefillBudget b(0.5, 16, 100);
  b.observe(0, m.step(0));
  b.observe(16, m.step(16));
  EXPECT_EQ(b.tokens(), 32);
  b.observe(32, m.step(32));
  EXPECT_EQ(b.tokens(), 64);
  b.observe(64, m.step(64));
  EXPECT_EQ(b.tokens(), 100);
}

TEST(PrefillBudgetTest, WithoutADecodeStepTheShortestStepStandsIn) {
  // A flood from a cold start: every step has prompt work. The estimate
  // is conservative (the shortest step includes prompt work) but bounded.
  Machine m{0.040, 0.001};
  PrefillBudget b(0.5, 8, 512);
  for (int i = 0; i < 40; ++i) {
    int64_t n = b.tokens();
    b.observe(n, m.step(n));
  }
  EXPECT_GE(b.tokens(), 8);
  EXPECT_LE(b.tokens(), 40);
}

TEST(PrefillBudgetTest, IgnoresNonsenseTimes) {
  PrefillBudget b(0.5, 16, 512);
  b.observe(0, 0.0);
  b.observe(32, -1.0);
  b.observe(32, std::numeric_limits<double>::infinity());
  EXPECT_EQ(b.tokens(), 16);
  EXPECT_EQ(b.decodeStepSeconds(), 0);
}

} // namespace
