// The stride rule (strides.h, Note [Dense strides]): contiguous, channels-last and any dim order,
// for int64 sizes and for SymInt sizes alike (concrete ones give the int64 strides, symbolic ones
// expressions that evaluate to them at the hints); layout_order recovers a dense layout's order;
// and empty_strided over SymInts makes a real tensor or a fake one with symbolic sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "opconform/core.h"
#include "opconform/core/strides.h"
#include "support/error_of.h"
#include "support/sym_strings.h"

namespace opconform {
namespace {

using ::testing::ElementsAre;
using V = std::vector<int64_t>;
using S = std::vector<SymInt>;

using testing::error_of;

S sym(const V& v) { return S(v.begin(), v.end()); }

using testing::strs;

// The values of symbolic strides with every symbol at its hint.
V at_hints(const S& v) {
  V out;
  for (const auto& s : v) out.push_back(*s.hint());
  return out;
}

// Every permutation of 0..n-1.
std::vector<V> permutations(int64_t n) {
  V p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  std::vector<V> out;
  do out.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return out;
}

// ---------------------------------------------------------------- int64

TEST(Strides, ContiguousCountsEmptyDimsAsOne) {
  EXPECT_EQ(contiguous_strides(V{2, 3, 4}), (V{12, 4, 1}));
  EXPECT_EQ(contiguous_strides(V{2, 0, 3}), (V{3, 3, 1}));  // torch.empty(2, 0, 3).stride()
  EXPECT_EQ(contiguous_strides(V{0}), (V{1}));
  EXPECT_EQ(contiguous_strides(V{5, 1, 1}), (V{1, 1, 1}));
  EXPECT_EQ(contiguous_strides(V{1, 4}), (V{4, 1}));
  EXPECT_TRUE(contiguous_strides(V{}).empty());
}

TEST(Strides, OverflowFollowsTheIntegerType) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // int64 strides saturate (empty_strided refuses them); SymInt arithmetic throws, also when only
  // the element count passes int64.
  EXPECT_EQ(contiguous_strides(V{4, int64_t{1} << 62, 4}), (V{kMax, 4, 1}));
  EXPECT_EQ(contiguous_strides(V{kMax, 2}), (V{2, 1}));
  EXPECT_EQ(error_of([] { contiguous_strides(sym(V{4, int64_t{1} << 62, 4})); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([] { contiguous_strides(sym(V{kMax, 2})); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(contiguous_strides(sym(V{kMax, 1})), sym(V{1, 1}));
}

TEST(Strides, ChannelsLastAsC10) {
  EXPECT_EQ(channels_last_strides(V{2, 3, 4, 5}), (V{60, 1, 15, 3}));
  EXPECT_EQ(channels_last_strides(V{2, 3, 4, 5, 6}), (V{360, 1, 90, 18, 3}));
  // c10's get_channels_last_strides multiplies sizes as they are: a 0 zeroes the strides outside it.
  EXPECT_EQ(channels_last_strides(V{2, 0, 4, 5}), (V{0, 1, 0, 0}));
  EXPECT_EQ(channels_last_strides(V{0, 3, 4, 5}), (V{60, 1, 15, 3}));
  EXPECT_EQ(channels_last_strides(V{2, 3, 1, 1}), (V{3, 1, 3, 3}));
  EXPECT_EQ(channels_last_order(4), (V{1, 3, 2, 0}));
  EXPECT_EQ(channels_last_order(5), (V{1, 4, 3, 2, 0}));
  EXPECT_EQ(error_of([] { channels_last_strides(V{2, 3, 4}); }).code(), ErrorCode::kInvalidArgument);
}

TEST(Strides, DenseStridesInAnyOrder) {
  EXPECT_EQ(dense_strides<int64_t>(V{2, 3, 4}, V{2, 1, 0}), contiguous_strides(V{2, 3, 4}));
  EXPECT_EQ(dense_strides<int64_t>(V{2, 3, 4}, V{0, 2, 1}), (V{1, 8, 2}));  // dim 0 innermost, then 2, then 1
  EXPECT_EQ(dense_strides<int64_t>(V{2, 0, 4}, V{1, 0, 2}), (V{1, 1, 2}));  // the 0 counts as 1
  EXPECT_EQ(dense_strides<int64_t>(V{2, 0, 4}, V{1, 0, 2}, ZeroSizes::as_zero), (V{0, 1, 0}));
  EXPECT_EQ(error_of([] { dense_strides<int64_t>(V{2, 3}, V{0, 0}); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([] { dense_strides<int64_t>(V{2, 3}, V{1}); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([] { dense_strides<int64_t>(V{2, 3}, V{0, 2}); }).code(), ErrorCode::kInvalidArgument);
}

TEST(Strides, LayoutOrderRecoversEveryDenseLayout) {
  // Every rank-3 shape of sizes 0..3 in every order: the order layout_order reads off the
  // strides gives them back, size-0 and size-1 dims (whose strides tie with the next) included.
  for (const V& order : permutations(3)) {
    for (int64_t a = 0; a <= 3; ++a)
      for (int64_t b = 0; b <= 3; ++b)
        for (int64_t c = 0; c <= 3; ++c) {
          const V sizes{a, b, c};
          const V strides = dense_strides<int64_t>(sizes, order);
          EXPECT_EQ(dense_strides<int64_t>(sizes, layout_order(sizes, strides)), strides)
              << shape_string(sizes) << " in order " << shape_string(order);
        }
  }
  EXPECT_EQ(layout_order(V{2, 3, 4}, V{12, 4, 1}), (V{2, 1, 0}));
  EXPECT_EQ(layout_order(V{2, 3, 4}, V{1, 8, 2}), (V{0, 2, 1}));
  EXPECT_EQ(layout_order(V{1, 3}, V{1, 1}), (V{0, 1}));  // the size-1 dim innermost among ties
  EXPECT_EQ(layout_order(V{3, 1}, V{1, 1}), (V{1, 0}));
}

// ---------------------------------------------------------------- SymInt

TEST(Strides, ConcreteSymIntsGiveTheInt64Strides) {
  const std::vector<V> shapes{{}, {0}, {3}, {2, 3, 4}, {2, 0, 3}, {1, 1, 5}, {4, 1, 0, 2}, {2, 3, 4, 5}, {2, 0, 1, 3, 2}};
  for (const V& sizes : shapes) {
    EXPECT_EQ(contiguous_strides(sym(sizes)), sym(contiguous_strides(sizes))) << shape_string(sizes);
    for (const V& order : permutations(static_cast<int64_t>(sizes.size()))) {
      for (ZeroSizes zeros : {ZeroSizes::as_one, ZeroSizes::as_zero}) {
        EXPECT_EQ(dense_strides<SymInt>(sym(sizes), order, zeros), sym(dense_strides<int64_t>(sizes, order, zeros)))
            << shape_string(sizes) << " in order " << shape_string(order);
      }
    }
    if (sizes.size() == 4 || sizes.size() == 5) {
      EXPECT_EQ(channels_last_strides(sym(sizes)), sym(channels_last_strides(sizes))) << shape_string(sizes);
    }
  }
}

TEST(Strides, SymbolicSizesGiveExpressionsOfTheirSymbols) {
  ShapeEnv env;
  const SymInt s0 = env.create_symbol(5, "x.size(0)"), s1 = env.create_symbol(7, "x.size(2)");
  EXPECT_THAT(strs(contiguous_strides(S{s0, 3, s1})), ElementsAre("s1*3", "s1", "1"));
  EXPECT_THAT(strs(contiguous_strides(S{s0, 0, s1})), ElementsAre("s1", "s1", "1"));  // the concrete 0 counts as 1
  EXPECT_THAT(strs(channels_last_strides(S{2, s0, 3, s1})), ElementsAre("s0*s1*3", "1", "s0*s1", "s0"));
  EXPECT_THAT(strs(dense_strides<SymInt>(S{s0, s1, 2}, V{0, 2, 1})), ElementsAre("1", "s0*2", "s0"));
  // At the hints they are the int64 strides of the hints.
  EXPECT_EQ(at_hints(contiguous_strides(S{s0, 3, s1})), contiguous_strides(V{5, 3, 7}));
  EXPECT_EQ(at_hints(channels_last_strides(S{s1, s0, 1, 2})), channels_last_strides(V{7, 5, 1, 2}));
  EXPECT_EQ(at_hints(dense_strides<SymInt>(S{s0, 0, s1 + 1}, V{2, 0, 1})), dense_strides<int64_t>(V{5, 0, 8}, V{2, 0, 1}));
  EXPECT_TRUE(env.guards().empty());  // the rule decides nothing about the symbols
}

// ---------------------------------------------------------------- empty_strided over SymInts

TEST(SymIntFactories, ConcreteSizesMakeARealTensorOutsideAMode) {
  Tensor t = empty_strided(sym(V{2, 3}), sym(V{1, 2}), DType::Int32);
  EXPECT_FALSE(t.is_fake());
  EXPECT_EQ(V(t.sizes().begin(), t.sizes().end()), (V{2, 3}));
  EXPECT_EQ(V(t.strides().begin(), t.strides().end()), (V{1, 2}));
  EXPECT_EQ(t.dtype(), DType::Int32);
  EXPECT_EQ(error_of([] { empty_strided(sym(V{2}), sym(V{1, 1})); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([] { empty_strided(sym(V{-1}), sym(V{1})); }).code(), ErrorCode::kInvalidArgument);
}

TEST(SymIntFactories, SymbolicSizesMakeASymbolicFakeUnderAMode) {
  FakeTensorMode mode;
  const SymInt s0 = mode.shape_env().create_symbol(5, "x.size(0)");
  const S sizes{s0, 3}, strides{1, s0};
  // Outside a mode a symbolic size is an error (no real tensor has one).
  EXPECT_EQ(error_of([&] { empty_strided(sizes, strides); }).code(), ErrorCode::kInvalidArgument);
  FakeTensorModeGuard guard(mode);
  Tensor t = empty_strided(sizes, strides, TensorOptions(DType::Float64, Device::cuda()));
  EXPECT_TRUE(t.is_fake());
  EXPECT_TRUE(t.has_symbolic_sizes());
  EXPECT_THAT(strs(t.sym_sizes()), ElementsAre("s0", "3"));
  EXPECT_THAT(strs(t.sym_strides()), ElementsAre("1", "s0"));
  EXPECT_EQ(V(t.strides().begin(), t.strides().end()), (V{1, 5}));  // the hints
  EXPECT_EQ(t.dtype(), DType::Float64);
  EXPECT_EQ(t.device(), Device::cuda(0));
  // Concrete sizes under the mode: a fake without symbolic sizes.
  Tensor c = empty_strided(sym(V{2, 3}), sym(V{3, 1}));
  EXPECT_TRUE(c.is_fake());
  EXPECT_FALSE(c.has_symbolic_sizes());
  EXPECT_EQ(error_of([&] { empty_strided(S{s0, -1}, S{1, 1}); }).code(), ErrorCode::kInvalidArgument);
  // empty over SymInts is empty_strided with the contiguous strides.
  EXPECT_THAT(strs(empty(S{s0, 4}).sym_strides()), ElementsAre("4", "1"));
}

}  // namespace
}  // namespace opconform
