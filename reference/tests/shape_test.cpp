// Hand-derived examples and identities for the shape family (views, cat, flip, repeat, pad,
// copies). Gradients are checked with gradcheck and gradgradcheck or by hand.
#include <gtest/gtest.h>

#include <map>

#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/vmap.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

// The gradient of sum(out * weights) with respect to x, out = op(x, rest...).
Tensor weighted_grad(std::string_view op, const Tensor& x, Stack rest, const Tensor& weights) {
  Stack args{IValue(x)};
  args.insert(args.end(), rest.begin(), rest.end());
  return grad_of(call(op, args), x, weights);
}

// ---- views ----

TEST(ShapeView, NewSizesOverTheSameElements) {
  Tensor x = doubles({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor v = call("aten::view", {x, IValue(Ints{3, -1})});
  EXPECT_EQ(sizes_of(v), (Ints{3, 2}));
  EXPECT_EQ(values(v), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(v.is_alias_of(x));
  // A transposed input can be split but not merged.
  Tensor t = x.transpose(0, 1);  // [3, 2], strides [1, 3]
  Tensor split = call("aten::view", {t, IValue(Ints{3, 2, 1})});
  EXPECT_EQ(split.stride(0), 1);
  EXPECT_EQ(split.stride(1), 3);
  EXPECT_THROW(call("aten::view", {t, IValue(Ints{6})}), Error);
  EXPECT_THROW(call("aten::view", {x, IValue(Ints{4, -1})}), Error);
}

TEST(ShapeView, GradientIsReshapedBack) {
  expect_gradients_pass("aten::view", {leaf(doubles({1, 2, 3, 4, 5, 6}, {2, 3})), IValue(Ints{6})});
  // Through a merge of a non-contiguous gradient (the backward clones before viewing).
  Tensor x = leaf(doubles({1, 2, 3, 4, 5, 6}, {6}));
  Tensor g = weighted_grad("aten::view", x, {IValue(Ints{2, 3})}, doubles({1, 2, 3, 4, 5, 6}, {3, 2}).transpose(0, 1));
  EXPECT_EQ(values(g), (std::vector<double>{1, 3, 5, 2, 4, 6}));
}

TEST(ShapeExpand, RepeatsSizeOneDimsWithStrideZero) {
  Tensor x = doubles({1, 2, 3}, {3, 1});
  Tensor e = call("aten::expand", {x, IValue(Ints{2, -1, 4})});
  EXPECT_EQ(sizes_of(e), (Ints{2, 3, 4}));
  EXPECT_EQ(strides_of(e), (Ints{0, 1, 0}));
  EXPECT_EQ(e.get({1, 2, 3}).to_double(), 3);
  EXPECT_THROW(call("aten::expand", {x, IValue(Ints{2, 1})}), Error);  // size 3 is not 1
  // Backward sums over the repeated dims: each element was used 2 * 4 times.
  Tensor l = leaf(doubles({1, 2, 3}, {3, 1}));
  EXPECT_EQ(values(weighted_grad("aten::expand", l, {IValue(Ints{2, 3, 4})}, ones({2, 3, 4}, DType::Float64))),
            (std::vector<double>{8, 8, 8}));
  expect_gradients_pass("aten::expand", {leaf(doubles({1, 2}, {1, 2})), IValue(Ints{3, 2}), IValue(false)});
}

TEST(ShapeUnsqueeze, InsertsSizeOneDim) {
  Tensor x = doubles({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor u = call("aten::unsqueeze", {x, IValue(int64_t{-1})});
  EXPECT_EQ(sizes_of(u), (Ints{2, 3, 1}));
  EXPECT_EQ(strides_of(call("aten::unsqueeze", {x, IValue(int64_t{1})})), (Ints{3, 3, 1}));  // as PyTorch
  EXPECT_EQ(sizes_of(call("aten::unsqueeze", {scalar_tensor(2.0), IValue(int64_t{0})})), (Ints{1}));
  EXPECT_THROW(call("aten::unsqueeze", {x, IValue(int64_t{3})}), Error);
  expect_gradients_pass("aten::unsqueeze", {leaf(doubles({1, 2, 3}, {3})), IValue(int64_t{0})});
}

TEST(ShapePermute, ReordersDims) {
  Tensor x = arange(24, TensorOptions(DType::Float64)).view({2, 3, 4});
  Tensor p = call("aten::permute", {x, IValue(Ints{2, 0, -2})});
  EXPECT_EQ(sizes_of(p), (Ints{4, 2, 3}));
  EXPECT_EQ(p.get({3, 1, 2}).to_double(), x.get({1, 2, 3}).to_double());
  EXPECT_THROW(call("aten::permute", {x, IValue(Ints{0, 0, 1})}), Error);
  expect_gradients_pass("aten::permute", {leaf(doubles({1, 2, 3, 4, 5, 6}, {1, 2, 3})), IValue(Ints{2, 0, 1})});
}

TEST(ShapeSlice, StepsAndClampsLikePython) {
  Tensor x = arange(10, TensorOptions(DType::Float64));
  EXPECT_EQ(values(call("aten::slice.Tensor",
                        {x, IValue(int64_t{0}), IValue(int64_t{2}), IValue(int64_t{8}), IValue(int64_t{3})})),
            (std::vector<double>{2, 5}));
  EXPECT_EQ(values(call("aten::slice.Tensor", {x, IValue(int64_t{0}), IValue(int64_t{-3}), IValue(int64_t{100})})),
            (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(call("aten::slice.Tensor", {x, IValue(int64_t{0}), IValue(int64_t{5}), IValue(int64_t{2})}).numel(), 0);
  // The gradient lands at the sliced places.
  Tensor l = leaf(doubles({0, 1, 2, 3, 4, 5, 6}, {7}));
  Tensor g = weighted_grad("aten::slice.Tensor", l,
                           {IValue(int64_t{0}), IValue(int64_t{1}), IValue(int64_t{6}), IValue(int64_t{2})},
                           doubles({10, 20, 30}, {3}));
  EXPECT_EQ(values(g), (std::vector<double>{0, 10, 0, 20, 0, 30, 0}));
  expect_gradients_pass("aten::slice.Tensor", {leaf(doubles({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})), IValue(int64_t{1}),
                                          IValue(int64_t{-3}), IValue(), IValue(int64_t{2})});
}

TEST(ShapeSelect, TakesOneIndex) {
  Tensor x = doubles({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(call("aten::select.int", {x, IValue(int64_t{1}), IValue(int64_t{-1})})),
            (std::vector<double>{3, 6}));
  EXPECT_THROW(call("aten::select.int", {x, IValue(int64_t{0}), IValue(int64_t{2})}), Error);
  Tensor l = leaf(doubles({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(
      values(weighted_grad("aten::select.int", l, {IValue(int64_t{1}), IValue(int64_t{1})}, doubles({7, 8}, {2}))),
      (std::vector<double>{0, 7, 0, 0, 8, 0}));
}

TEST(ShapeSqueeze, RemovesOnlySizeOneDims) {
  Tensor x = doubles({1, 2, 3}, {1, 3, 1});
  EXPECT_EQ(sizes_of(call("aten::squeeze.dim", {x, IValue(int64_t{0})})), (Ints{3, 1}));
  EXPECT_EQ(sizes_of(call("aten::squeeze.dim", {x, IValue(int64_t{1})})), (Ints{1, 3, 1}));
  EXPECT_EQ(sizes_of(call("aten::squeeze.dims", {x, IValue(Ints{0, -1})})), (Ints{3}));
  EXPECT_THROW(call("aten::squeeze.dims", {x, IValue(Ints{0, -3})}), Error);  // dim 0 twice
  expect_gradients_pass("aten::squeeze.dims", {leaf(doubles({1, 2, 3}, {1, 3, 1})), IValue(Ints{2, 0})});
}

TEST(ShapeDiagonal, OffsetsAndDims) {
  Tensor m = arange(9, TensorOptions(DType::Float64)).view({3, 3});
  EXPECT_EQ(values(call("aten::diagonal", {m})), (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(values(call("aten::diagonal", {m, IValue(int64_t{1})})), (std::vector<double>{1, 5}));
  EXPECT_EQ(values(call("aten::diagonal", {m, IValue(int64_t{-1}), IValue(int64_t{1}), IValue(int64_t{0})})),
            (std::vector<double>{1, 5}));
  Tensor l = leaf(doubles({0, 1, 2, 3, 4, 5}, {2, 3}));
  EXPECT_EQ(values(weighted_grad("aten::diagonal", l, {IValue(int64_t{1})}, doubles({7, 8}, {2}))),
            (std::vector<double>{0, 7, 0, 0, 0, 8}));
  expect_gradients_pass("aten::diagonal", {leaf(doubles({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})), IValue(int64_t{0}), IValue(int64_t{0}),
                                      IValue(int64_t{2})});
}

TEST(ShapeAsStrided, ReadsTheStorage) {
  Tensor x = arange(6, TensorOptions(DType::Float64));
  Tensor v = call("aten::as_strided", {x, IValue(Ints{2, 2}), IValue(Ints{1, 2}), IValue(int64_t{1})});
  EXPECT_EQ(values(v), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_TRUE(v.is_alias_of(x));
  EXPECT_THROW(call("aten::as_strided", {x, IValue(Ints{4}), IValue(Ints{2})}), Error);  // reaches element 6
  // Overlapping output (stride 0): each storage element gets every use's gradient.
  Tensor l = leaf(doubles({1, 2, 3}, {3}));
  EXPECT_EQ(values(weighted_grad("aten::as_strided", l, {IValue(Ints{2, 2}), IValue(Ints{0, 1}), IValue(int64_t{1})},
                                 doubles({1, 2, 3, 4}, {2, 2}))),
            (std::vector<double>{0, 4, 6}));
  expect_gradients_pass("aten::as_strided", {leaf(doubles({1, 2, 3, 4, 5}, {5})), IValue(Ints{2, 2}), IValue(Ints{1, 2}), IValue()});
}

TEST(ShapeAlias, SameMemoryNewObject) {
  Tensor x = doubles({1, 2}, {2});
  Tensor a = call("aten::alias", {x});
  EXPECT_TRUE(a.is_alias_of(x));
  EXPECT_FALSE(a.is_same(x));
  EXPECT_EQ(values(a), values(x));
}

TEST(ShapeSplit, PiecesAlongDim) {
  Tensor x = arange(10, TensorOptions(DType::Float64)).view({2, 5});
  auto pieces =
      call_all("aten::split_with_sizes", {x, IValue(Ints{2, 0, 3}), IValue(int64_t{1})})[0].to_tensor_list();
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(values(pieces[0]), (std::vector<double>{0, 1, 5, 6}));
  EXPECT_EQ(pieces[1].numel(), 0);
  EXPECT_EQ(values(pieces[2]), (std::vector<double>{2, 3, 4, 7, 8, 9}));
  EXPECT_TRUE(pieces[2].is_alias_of(x));
  EXPECT_THROW(call_all("aten::split_with_sizes", {x, IValue(Ints{2, 2}), IValue(int64_t{1})}), Error);
}

// ---- new tensors ----

TEST(ShapeCat, PromotesAndSkipsLegacyEmpty) {
  Tensor a = from_vector<int32_t>({1, 2}, {2});
  Tensor b = from_vector<float>({3.5f}, {1});
  Tensor c = call("aten::cat", {IValue(std::vector<Tensor>{a, b})});
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_EQ(values(c), (std::vector<double>{1, 2, 3.5}));
  // A 1-d empty tensor is skipped whatever the others' shape; dim 1 of a transposed input.
  Tensor m = doubles({1, 2, 3, 4}, {2, 2}).transpose(0, 1);  // [[1, 3], [2, 4]]
  Tensor n = doubles({9, 8}, {2, 1});
  Tensor joined =
      call("aten::cat", {IValue(std::vector<Tensor>{m, empty({0}, DType::Float64), n}), IValue(int64_t{1})});
  EXPECT_EQ(values(joined), (std::vector<double>{1, 3, 9, 2, 4, 8}));
  EXPECT_THROW(call("aten::cat", {IValue(std::vector<Tensor>{m, doubles({1, 2, 3}, {3, 1})}), IValue(int64_t{1})}),
               Error);
  EXPECT_THROW(call("aten::cat", {IValue(std::vector<Tensor>{scalar_tensor(1.0)})}), Error);
}

TEST(ShapeCat, GradientIsEachInputsSlice) {
  Tensor a = leaf(doubles({1, 2}, {2, 1})), b = leaf(doubles({3, 4, 5, 6}, {2, 2}));
  Tensor out = call("aten::cat", {IValue(std::vector<Tensor>{a, b}), IValue(int64_t{1})});
  EXPECT_EQ(values(out), (std::vector<double>{1, 3, 4, 2, 5, 6}));
  auto grads = autograd::grad({out}, {a, b}, {doubles({10, 20, 30, 40, 50, 60}, {2, 3})});
  EXPECT_EQ(values(grads[0]), (std::vector<double>{10, 40}));
  EXPECT_EQ(values(grads[1]), (std::vector<double>{20, 30, 50, 60}));
}

TEST(ShapeSplit, GradientIsCatOfPieces) {
  expect_gradients_pass("aten::split_with_sizes",
                   {leaf(doubles({1, 2, 3, 4, 5, 6}, {3, 2})), IValue(Ints{1, 2}), IValue(int64_t{0})});
}

TEST(ShapeFlip, ReversesChosenDims) {
  Tensor x = doubles({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(call("aten::flip", {x, IValue(Ints{1})})), (std::vector<double>{3, 2, 1, 6, 5, 4}));
  // Both dims of a transposed input: [[1, 4], [2, 5], [3, 6]] reversed both ways.
  Tensor f = call("aten::flip", {x.transpose(0, 1), IValue(Ints{0, -1})});
  EXPECT_EQ(values(f), (std::vector<double>{6, 3, 5, 2, 4, 1}));
  EXPECT_FALSE(f.is_alias_of(x));
  EXPECT_THROW(call("aten::flip", {x, IValue(Ints{1, -1})}), Error);
  expect_gradients_pass("aten::flip", {leaf(doubles({1, 2, 3, 4, 5, 6}, {2, 3})), IValue(Ints{0, 1})});
}

TEST(ShapeRepeat, TilesAndAddsLeadingDims) {
  Tensor x = doubles({1, 2}, {2});
  Tensor r = call("aten::repeat", {x, IValue(Ints{2, 2})});
  EXPECT_EQ(sizes_of(r), (Ints{2, 4}));
  EXPECT_EQ(values(r), (std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2}));
  // An expanded (stride 0) input is read correctly.
  Tensor e = doubles({7}, {1}).expand({2});
  EXPECT_EQ(values(call("aten::repeat", {e, IValue(Ints{3})})), (std::vector<double>(6, 7)));
  EXPECT_THROW(call("aten::repeat", {doubles({1, 2}, {1, 2}), IValue(Ints{2})}), Error);
  // Each input element appears 4 times.
  EXPECT_EQ(
      values(weighted_grad("aten::repeat", leaf(doubles({1, 2}, {2})), {IValue(Ints{2, 2})}, ones({2, 4}, DType::Float64))),
      (std::vector<double>{4, 4}));
  expect_gradients_pass("aten::repeat", {leaf(doubles({1, 2, 3, 4}, {2, 2})), IValue(Ints{1, 3, 2})});
}

TEST(ShapePad, PadsAndCrops) {
  Tensor x = doubles({1, 2}, {2});
  EXPECT_EQ(values(call("aten::constant_pad_nd", {x, IValue(Ints{1, 2}), IValue(9.0)})),
            (std::vector<double>{9, 1, 2, 9, 9}));
  EXPECT_EQ(values(call("aten::constant_pad_nd", {x, IValue(Ints{-1, 0})})), (std::vector<double>{2}));
  // Two dims: last dim pads (0, 1), first dim (1, 0).
  Tensor m = doubles({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(values(call("aten::constant_pad_nd", {m, IValue(Ints{0, 1, 1, 0})})),
            (std::vector<double>{0, 0, 0, 1, 2, 0, 3, 4, 0}));
  EXPECT_THROW(call("aten::constant_pad_nd", {x, IValue(Ints{-2, -1})}), Error);
  EXPECT_THROW(
      call("aten::constant_pad_nd", {from_vector<uint8_t>({1}, {1}), IValue(Ints{1, 1}), IValue(int64_t{300})}), Error);
  expect_gradients_pass("aten::constant_pad_nd",
                   {leaf(doubles({1, 2, 3, 4, 5, 6}, {2, 3})), IValue(Ints{1, -1, -1, 2}), IValue(int64_t{0})});
}

TEST(ShapeClone, PreservesDenseStrides) {
  Tensor t = doubles({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  Tensor c = call("aten::clone", {t});
  EXPECT_EQ(strides_of(c), strides_of(t));
  EXPECT_FALSE(c.is_alias_of(t));
  EXPECT_EQ(values(c), values(t));
  EXPECT_EQ(strides_of(call("aten::clone", {t, IValue(MemoryFormat::Contiguous)})), (Ints{2, 1}));
  // Not dense (every second element): contiguous.
  Tensor s = arange(8, TensorOptions(DType::Float64)).slice(0, 0, 8, 2);
  EXPECT_EQ(strides_of(call("aten::clone", {s})), (Ints{1}));
  // Channels-last.
  EXPECT_EQ(strides_of(call("aten::clone", {zeros({2, 3, 4, 5}), IValue(MemoryFormat::ChannelsLast)})),
            (Ints{60, 1, 15, 3}));
}

TEST(ShapeToCopy, ConvertsIntoANewTensor) {
  Tensor x = doubles({2.7, -2.7, 0.5, 1}, {2, 2}).transpose(0, 1);
  Tensor i = call("aten::_to_copy", {x, IValue(DType::Int32)});
  EXPECT_EQ(i.dtype(), DType::Int32);
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{2, 0, -2, 1}));
  EXPECT_EQ(strides_of(i), strides_of(x));  // preserve format
  Tensor same = call("aten::_to_copy", {x});
  EXPECT_FALSE(same.is_alias_of(x));
  // A narrowing cast passes the gradient through unchanged (in the input's dtype).
  Tensor l = leaf(doubles({0.1, 0.2}, {2}));
  Tensor g =
      weighted_grad("aten::_to_copy", l, {IValue(DType::Float16)}, from_vector<float>({3, 4}, {2}).to(DType::Float16));
  EXPECT_EQ(g.dtype(), DType::Float64);
  EXPECT_EQ(values(g), (std::vector<double>{3, 4}));
}

TEST(ShapeCopy, SelfsLayoutSrcsValues) {
  Tensor self = from_vector<int32_t>({0, 0, 0, 0, 0, 0, 0}, {7}).as_strided(Ints{2, 2}, Ints{1, 2}, 1);
  Tensor src = doubles({1.5, 2.5}, {2});  // broadcast over rows
  Tensor out = call("aten::copy", {self, src});
  EXPECT_EQ(out.dtype(), DType::Int32);
  EXPECT_EQ(strides_of(out), (Ints{1, 2}));
  EXPECT_EQ(out.storage_offset(), 1);
  EXPECT_EQ(out.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 1, 2}));
  EXPECT_FALSE(out.is_alias_of(self));
  EXPECT_EQ(self.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 0}));  // not written
  // Gradients: none to self (overwritten), the broadcast sum to src.
  Tensor s = leaf(doubles({1, 2, 3, 4}, {2, 2})), r = leaf(doubles({5, 6}, {2}));
  Tensor o = call("aten::copy", {s, r});
  auto grads = autograd::grad({o}, {s, r}, {doubles({1, 2, 3, 4}, {2, 2})});
  EXPECT_EQ(values(grads[0]), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(grads[1]), (std::vector<double>{4, 6}));
}

TEST(ShapeCopy, EmptyFakeInputsCopyNothing) {
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  // An empty view of a fake tensor with bytes: the copies into new (zero-byte) tensors read nothing.
  Tensor part = call("aten::full", {IValue(Ints{4}), IValue(1.0)}).slice(0, 1, 1);
  EXPECT_EQ(sizes_of(call("aten::clone", {part})), (Ints{0}));
  EXPECT_EQ(call("aten::_to_copy", {part, IValue(DType::Float64)}).dtype(), DType::Float64);
  EXPECT_EQ(sizes_of(call("aten::cat", {IValue(std::vector<Tensor>{part, part})})), (Ints{0}));
  EXPECT_EQ(sizes_of(call("aten::copy", {part, part})), (Ints{0}));
  // Shapes are still checked: src must broadcast to self's shape (as PyTorch's copy_).
  EXPECT_THROW(call("aten::copy", {part, call("aten::full", {IValue(Ints{2, 0}), IValue(1.0)})}), Error);
}

TEST(ShapeVmap, ViewRulesShiftDims) {
  // vmap over dim 1 of a [2, 3] tensor: each sample is a column of 2; unsqueeze(0) gives [1, 2].
  Tensor x = doubles({1, 2, 3, 4, 5, 6}, {2, 3});
  auto f = vmap(
      [](const std::vector<Tensor>& xs) {
        return std::vector<Tensor>{call("aten::unsqueeze", {xs[0], IValue(int64_t{0})})};
      },
      {int64_t{1}});
  Tensor out = f({x})[0];
  EXPECT_EQ(sizes_of(out), (Ints{3, 1, 2}));
  EXPECT_EQ(values(out), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}


// ---- symbolic sizes (test_aot_dispatch_dynamic) ----


// A fake input with symbolic sizes gives outputs whose sizes are expressions of its symbols (a
// captured graph replays at other sizes), views still aliasing the input.
TEST(ShapeSymbolic, FakeOutputsHaveSymbolicSizes) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(doubles({0, 1, 2, 3, 4, 5}, {2, 3}), /*dynamic=*/true, "x");  // [s0, s1]
  Tensor concrete = mode.from_tensor(doubles({1, 2}, {2}));
  const std::map<std::string, int64_t> at{{"s0", 5}, {"s1", 7}};
  FakeTensorModeGuard guard(mode);
  const IValue none;
  Tensor v = call("aten::view", {x, IValue(Ints{-1})});
  EXPECT_EQ(sizes_at(v, at), (Ints{35}));
  EXPECT_TRUE(v.is_alias_of(x));
  EXPECT_EQ(sizes_at(call("aten::view", {x, IValue(Ints{2, 1, -1})}), at), (Ints{2, 1, 17}));  // 35 // 2
  EXPECT_EQ(sizes_at(call("aten::alias", {x}), at), (Ints{5, 7}));
  EXPECT_EQ(sizes_at(call("aten::permute", {x, IValue(Ints{1, 0})}), at), (Ints{7, 5}));
  EXPECT_EQ(sizes_at(call("aten::unsqueeze", {x, IValue(int64_t{1})}), at), (Ints{5, 1, 7}));
  EXPECT_EQ(sizes_at(call("aten::expand", {x, IValue(Ints{4, -1, -1}), IValue(false)}), at), (Ints{4, 5, 7}));
  EXPECT_EQ(sizes_at(call("aten::slice.Tensor", {x, IValue(int64_t{1}), IValue(int64_t{1}), none, IValue(int64_t{2})}), at),
            (Ints{5, 3}));  // (7 - 1 + 1) // 2
  EXPECT_EQ(sizes_at(call("aten::slice.Tensor", {x, IValue(int64_t{0}), IValue(int64_t{-1}), none, IValue(int64_t{1})}), at),
            (Ints{1, 7}));
  EXPECT_EQ(sizes_at(call("aten::select.int", {x, IValue(int64_t{0}), IValue(int64_t{-1})}), at), (Ints{7}));
  EXPECT_EQ(sizes_at(call("aten::diagonal", {x, IValue(int64_t{1}), IValue(int64_t{0}), IValue(int64_t{1})}), at),
            (Ints{5}));  // min(5, 7 - 1)
  EXPECT_EQ(sizes_at(call("aten::cat", {IValue(std::vector<Tensor>{x, x}), IValue(int64_t{1})}), at), (Ints{5, 14}));
  EXPECT_EQ(sizes_at(call("aten::constant_pad_nd", {x, IValue(Ints{1, 2}), IValue(int64_t{0})}), at), (Ints{5, 10}));
  EXPECT_EQ(sizes_at(call("aten::repeat", {x, IValue(Ints{2, 1, 3})}), at), (Ints{2, 5, 21}));
  EXPECT_EQ(sizes_at(call("aten::flip", {x, IValue(Ints{0})}), at), (Ints{5, 7}));
  EXPECT_EQ(sizes_at(call("aten::clone", {x, none}), at), (Ints{5, 7}));
  EXPECT_EQ(sizes_at(call("aten::copy", {x, x, IValue(false)}), at), (Ints{5, 7}));
  const Stack pieces = ops().call("aten::split_with_sizes", {x, IValue(Ints{1, 2}), IValue(int64_t{1})});
  EXPECT_EQ(sizes_at(pieces[0].to_tensor_list()[1], at), (Ints{5, 2}));
  // A concrete fake keeps concrete sizes.
  EXPECT_FALSE(call("aten::view", {concrete, IValue(Ints{-1})}).has_symbolic_sizes());
}

TEST(Shape, SymNumelAndSymSizeGiveTheSizes) {
  const Tensor x = iota({2, 3, 4}).permute({2, 0, 1});
  const Stack n = call_all("aten::sym_numel", {x});
  EXPECT_EQ(n.at(0).to<int64_t>(), 24);
  EXPECT_EQ(call_all("aten::sym_size.int", {x, IValue(int64_t{0})}).at(0).to<int64_t>(), 4);
  EXPECT_EQ(call_all("aten::sym_size.int", {x, IValue(int64_t{-1})}).at(0).to<int64_t>(), 3);
  EXPECT_NE(error_of("aten::sym_size.int", {doubles({1}, {}), IValue(int64_t{0})}).find("no dimensions"), std::string::npos);
  EXPECT_NE(error_of("aten::sym_size.int", {x, IValue(int64_t{3})}).find("aten::sym_size.int"), std::string::npos);
}

TEST(Shape, SymStrideAndSymStorageOffsetGiveTheLayout) {
  const Tensor x = iota({2, 3, 4}).permute({2, 0, 1});  // strides [1, 12, 4]
  EXPECT_EQ(call_all("aten::sym_stride.int", {x, IValue(int64_t{0})}).at(0).to<int64_t>(), 1);
  EXPECT_EQ(call_all("aten::sym_stride.int", {x, IValue(int64_t{-2})}).at(0).to<int64_t>(), 12);
  EXPECT_EQ(call_all("aten::sym_storage_offset", {x}).at(0).to<int64_t>(), 0);
  EXPECT_EQ(call_all("aten::sym_storage_offset", {iota({10}).slice(0, 3, 9, 2)}).at(0).to<int64_t>(), 3);
  EXPECT_NE(error_of("aten::sym_stride.int", {doubles({1}, {}), IValue(int64_t{0})}).find("no dimensions"), std::string::npos);
  // Their results are the layout (Note [Layout queries]); the other queries' are not.
  EXPECT_TRUE(testing::registry().get("aten::sym_stride.int").data()->layout_query);
  EXPECT_TRUE(testing::registry().get("aten::sym_storage_offset").data()->layout_query);
  EXPECT_FALSE(testing::registry().get("aten::sym_size.int").data()->layout_query);
}

// _local_scalar_dense is Tensor.item(): the one element as a Scalar of its kind; more elements
// are an error naming the argument.
TEST(LocalScalarDense, TheValueOfAOneElementTensor) {
  auto item = [](const Tensor& t) { return call_all("aten::_local_scalar_dense", {t}).at(0).to_scalar(); };
  const Scalar i = item(from_vector<int32_t>({-7}, {1, 1}));
  EXPECT_TRUE(i.is_integral());
  EXPECT_EQ(i.to_int(), -7);
  const Scalar f = item(doubles({2.5}, {}));
  EXPECT_TRUE(f.is_floating());
  EXPECT_EQ(f.to_double(), 2.5);
  EXPECT_TRUE(item(longs({1}, {1}).to(DType::Bool)).is_bool());
  EXPECT_NE(error_of("aten::_local_scalar_dense", {doubles({1, 2}, {2})}).find("argument 'self'"), std::string::npos);
}

}  // namespace
}  // namespace opconform::reference
