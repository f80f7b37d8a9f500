// Hand-derived examples for the creation family: factories, fill, arange, empty, random ops.
#include <gtest/gtest.h>

#include <cmath>

#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/generator.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

TEST(CreationFull, DtypeFollowsTheValue) {
  Tensor i = call("aten::full", {IValue(Ints{2, 3}), IValue(int64_t{7})});
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(values(i), std::vector<double>(6, 7));
  EXPECT_EQ(call("aten::full", {IValue(Ints{1}), IValue(2.5)}).dtype(), DType::Float32);
  EXPECT_EQ(call("aten::full", {IValue(Ints{1}), IValue(true)}).dtype(), DType::Bool);
  EXPECT_EQ(call("aten::full", {IValue(Ints{1}), IValue(complex128(1, 2))}).dtype(), DType::Complex64);
  Tensor h = call("aten::full", {IValue(Ints{2}), IValue(0.1), IValue(DType::Float16)});
  EXPECT_EQ(h.dtype(), DType::Float16);
  EXPECT_EQ(values(h)[0], static_cast<double>(static_cast<float>(Half(0.1f))));
}

TEST(CreationFull, ValuesThatDoNotFitAreRefused) {
  auto full_u8 = [](IValue v) { return call("aten::full", {IValue(Ints{1}), v, IValue(DType::UInt8)}); };
  EXPECT_THROW(full_u8(IValue(int64_t{256})), Error);
  EXPECT_EQ(values(full_u8(IValue(int64_t{-1}))), (std::vector<double>{255}));  // wraps, as PyTorch
  EXPECT_THROW(full_u8(IValue(int64_t{-256})), Error);
  // Every value fills bool (nonzero is True), as in PyTorch: full([1], 6, dtype=bool) is True.
  for (const IValue& v : {IValue(int64_t{6}), IValue(int64_t{-5}), IValue(2.0), IValue(int64_t{0})})
    EXPECT_EQ(values(call("aten::full", {IValue(Ints{1}), v, IValue(DType::Bool)})),
              (std::vector<double>{v.to_scalar().to_double() != 0 ? 1.0 : 0.0}));
  EXPECT_EQ(values(call("aten::scalar_tensor", {IValue(int64_t{-5}), IValue(DType::Bool)})), (std::vector<double>{1}));
  EXPECT_EQ(values(call("aten::constant_pad_nd", {bools({false}, {1}), IValue(Ints{1, 0}), IValue(2.0)})),
            (std::vector<double>{1, 0}));
  EXPECT_THROW(call("aten::full", {IValue(Ints{1}), IValue(complex128(1, 1)), IValue(DType::Float32)}), Error);
  EXPECT_THROW(call("aten::full", {IValue(Ints{1}), IValue(1e6), IValue(DType::Float16)}), Error);
  EXPECT_NO_THROW(call("aten::full", {IValue(Ints{1}), IValue(INFINITY), IValue(DType::Float16)}));
  EXPECT_THROW(call("aten::full", {IValue(Ints{1}), IValue(NAN), IValue(DType::Int32)}), Error);
  EXPECT_THROW(call("aten::full", {IValue(Ints{-1}), IValue(int64_t{0})}), Error);
}

TEST(CreationFull, FakeModeMakesFakes) {
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor f = call("aten::full", {IValue(Ints{2, 3}), IValue(1.5)});
  EXPECT_TRUE(f.is_fake());
  EXPECT_EQ(sizes_of(f), (Ints{2, 3}));
  EXPECT_EQ(f.dtype(), DType::Float32);
}

TEST(CreationFullLike, LayoutOfSelfNotDifferentiable) {
  Tensor self = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  self.set_requires_grad(true);
  Tensor f = call("aten::full_like", {self, IValue(int64_t{3})});
  EXPECT_EQ(f.dtype(), DType::Float64);
  EXPECT_EQ(strides_of(f), strides_of(self));
  EXPECT_EQ(values(f), std::vector<double>(6, 3));
  EXPECT_FALSE(f.requires_grad());
  Tensor g = call("aten::full_like", {self, IValue(int64_t{3}), IValue(DType::Int8), IValue(), IValue(), IValue(),
                                      IValue(MemoryFormat::Contiguous)});
  EXPECT_EQ(g.dtype(), DType::Int8);
  EXPECT_EQ(strides_of(g), (Ints{2, 1}));
}

TEST(CreationFill, NewTensorLikeSelfWithZeroGradient) {
  Tensor self = from_vector<double>({1, 2, 3}, {3});
  self.set_requires_grad(true);
  Tensor f = call("aten::fill.Scalar", {self, IValue(-2.0)});
  EXPECT_EQ(values(f), (std::vector<double>{-2, -2, -2}));
  EXPECT_FALSE(f.is_alias_of(self));
  EXPECT_EQ(values(self), (std::vector<double>{1, 2, 3}));
  auto grads = autograd::grad({f}, {self}, {from_vector<double>({1, 1, 1}, {3})});
  EXPECT_EQ(values(grads[0]), (std::vector<double>{0, 0, 0}));
}

TEST(CreationArange, LengthAndDtype) {
  auto arange3 = [](IValue s, IValue e, IValue st) { return call("aten::arange.start_step", {s, e, st}); };
  Tensor a = arange3(IValue(int64_t{0}), IValue(int64_t{10}), IValue(int64_t{3}));
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(values(a), (std::vector<double>{0, 3, 6, 9}));
  Tensor f = arange3(IValue(int64_t{1}), IValue(2.5), IValue(0.5));
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(values(f), (std::vector<double>{1, 1.5, 2}));
  EXPECT_EQ(values(arange3(IValue(int64_t{10}), IValue(int64_t{0}), IValue(int64_t{-3}))),
            (std::vector<double>{10, 7, 4, 1}));
  EXPECT_EQ(arange3(IValue(int64_t{2}), IValue(int64_t{2}), IValue(int64_t{1})).numel(), 0);
  EXPECT_THROW(arange3(IValue(int64_t{0}), IValue(int64_t{5}), IValue(int64_t{-1})), Error);
  EXPECT_THROW(arange3(IValue(int64_t{0}), IValue(int64_t{5}), IValue(int64_t{0})), Error);
  // 0.1 steps: ceil((1 - 0) / 0.1) = 10 values, each start + step * i rounded once.
  Tensor d = call("aten::arange.start_step", {IValue(0.0), IValue(1.0), IValue(0.1), IValue(DType::Float64)});
  ASSERT_EQ(d.numel(), 10);
  EXPECT_EQ(values(d)[7], 0.1 * 7);
  // The length in double for every result dtype but int64 (torch 1.13 and 2.11 alike):
  // torch.arange(0.5, 3.7, dtype=torch.int32) is [0, 1, 2, 3], with torch.int64 [0, 1, 2].
  auto typed = [](double s, double e, DType t) {
    return call("aten::arange.start_step", {IValue(s), IValue(e), IValue(int64_t{1}), IValue(t)});
  };
  EXPECT_EQ(values(typed(0.5, 3.7, DType::Int32)), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(values(typed(0.5, 3.7, DType::Int64)), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(typed(-0.005, 0.995, DType::Int8).numel(), 1);
  EXPECT_EQ(typed(-0.005, 0.995, DType::Int64).numel(), 0);
}

TEST(CreationEmpty, LayoutsAndDeterministicContents) {
  Tensor s = call("aten::empty_strided", {IValue(Ints{2, 3}), IValue(Ints{1, 2})});
  EXPECT_EQ(strides_of(s), (Ints{1, 2}));
  EXPECT_TRUE(std::isnan(values(s)[0]));  // Note [Uninitialised memory]
  Tensor i = call("aten::empty_strided", {IValue(Ints{2}), IValue(Ints{0}), IValue(DType::Int16)});
  EXPECT_EQ(values(i), (std::vector<double>{32767, 32767}));
  Tensor c = call("aten::empty.memory_format", {IValue(Ints{2, 3, 4, 5}), IValue(), IValue(), IValue(), IValue(),
                                                IValue(MemoryFormat::ChannelsLast)});
  EXPECT_EQ(sizes_of(c), (Ints{2, 3, 4, 5}));
  EXPECT_EQ(strides_of(c), (Ints{60, 1, 15, 3}));
  EXPECT_EQ(strides_of(call("aten::empty.memory_format", {IValue(Ints{2, 3})})), (Ints{3, 1}));
  EXPECT_THROW(call("aten::empty.memory_format",
                    {IValue(Ints{2, 3}), IValue(), IValue(), IValue(), IValue(), IValue(MemoryFormat::ChannelsLast)}),
               Error);
}

TEST(CreationScalarTensor, Float32ByDefault) {
  Tensor t = call("aten::scalar_tensor", {IValue(int64_t{3})});
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.item().to_double(), 3);
  EXPECT_EQ(call("aten::scalar_tensor", {IValue(true), IValue(DType::Int32)}).item().to_int(), 1);
}

TEST(CreationRandom, SeededRunsRepeat) {
  for (const char* op : {"aten::rand", "aten::randn"}) {
    manual_seed(7);
    Tensor a = call(op, {IValue(Ints{50})});
    manual_seed(7);
    Tensor b = call(op, {IValue(Ints{50})});
    EXPECT_EQ(a.dtype(), DType::Float32);
    EXPECT_EQ(values(a), values(b)) << op;
    EXPECT_NE(values(a), values(call(op, {IValue(Ints{50})}))) << op;
  }
}

TEST(CreationRandom, RandIsInUnitInterval) {
  manual_seed(1);
  for (DType d : {DType::Float16, DType::BFloat16, DType::Float32}) {
    Tensor r = call("aten::rand", {IValue(Ints{2000}), IValue(d)});
    double sum = 0;
    for (double v : values(r)) {
      ASSERT_GE(v, 0.0);
      ASSERT_LT(v, 1.0);
      sum += v;
    }
    EXPECT_NEAR(sum / 2000, 0.5, 0.05);
  }
  EXPECT_THROW(call("aten::rand", {IValue(Ints{2}), IValue(DType::Int32)}), Error);
}

TEST(CreationRandom, RandnMoments) {
  manual_seed(2);
  std::vector<double> v = values(call("aten::randn", {IValue(Ints{20000}), IValue(DType::Float64)}));
  double mean = 0, square = 0;
  for (double x : v) {
    mean += x / static_cast<double>(v.size());
    square += x * x / static_cast<double>(v.size());
  }
  EXPECT_NEAR(mean, 0, 0.03);
  EXPECT_NEAR(square, 1, 0.05);
}

TEST(CreationRandom, RandpermIsAPermutation) {
  manual_seed(3);
  // dtype left out: the schema's default "dtype=4" is PyTorch's number for int64.
  Tensor p = call("aten::randperm", {IValue(int64_t{20})});
  EXPECT_EQ(p.dtype(), DType::Int64);
  std::vector<int64_t> sorted = p.to_vector<int64_t>();
  std::vector<int64_t> original = sorted;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(original, sorted);  // shuffled (1 chance in 20! to fail)
  EXPECT_THROW(call("aten::randperm", {IValue(int64_t{300}), IValue(DType::UInt8)}), Error);
  EXPECT_EQ(call("aten::randperm", {IValue(int64_t{0}), IValue()}).numel(), 0);
  EXPECT_EQ(call("aten::randperm", {IValue(int64_t{3}), IValue(DType::Float64)}).dtype(), DType::Float64);
}



// Fake inputs with symbolic sizes give symbolic outputs (test_aot_dispatch_dynamic).
TEST(CreationSymbolic, FakeOutputsHaveSymbolicSizes) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(doubles({0, 1, 2, 3, 4, 5}, {2, 3}), /*dynamic=*/true, "x");
  FakeTensorModeGuard guard(mode);
  const IValue none;
  EXPECT_EQ(sizes_at_5_7(call("aten::fill.Scalar", {x, IValue(1.5)})), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(sizes_at_5_7(call("aten::full_like", {x, IValue(1.5), none, none, none, none, none})),
            (std::vector<int64_t>{5, 7}));
}

}  // namespace
}  // namespace opconform::reference
