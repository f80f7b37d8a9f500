// Note [Shape plans over SymInt] (op_support.h): ops whose CPU and fake kernels make their outputs
// from one shape plan over SymInt. For each op, on the same input: the CPU output, and the fake
// output of a dynamic fake of the input (a symbol per size >= 2). The fake's sym_sizes() at the
// hints are the CPU output's sizes, and its sym_strides() are the dense strides (core's rule,
// strides.h) of those symbolic sizes in the CPU output's layout order, which at the hints are the
// CPU output's strides.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core/fake_tensor.h"
#include "opconform/core/strides.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;
using SymInts = std::vector<SymInt>;

std::vector<std::string> strs(const SymInts& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.to_string());
  return out;
}

Ints at_hints(const SymInts& v) {
  Ints out;
  for (const auto& s : v) out.push_back(concrete_stand_in(s));
  return out;
}

// Each tensor argument (also in a list) as a dynamic fake, named t0, t1, ...
Stack dynamic_fakes(FakeTensorMode& mode, const Stack& args) {
  Stack out;
  int next = 0;
  auto fake = [&](const Tensor& t) { return mode.from_tensor(t, /*dynamic=*/true, "t" + std::to_string(next++)); };
  for (const IValue& v : args) {
    if (v.is_tensor()) {
      out.emplace_back(fake(v.to_tensor()));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> list;
      for (const Tensor& t : v.to_tensor_list()) list.push_back(fake(t));
      out.emplace_back(std::move(list));
    } else {
      out.push_back(v);
    }
  }
  return out;
}

// The op on real and on dynamic fake inputs: every tensor output compared as the file's comment says.
void expect_one_plan(const std::string& op, const Stack& args) {
  SCOPED_TRACE(op);
  const Stack real = call_all(op, args);
  FakeTensorMode mode;
  Stack fake_args = dynamic_fakes(mode, args);
  Stack fake;
  {
    FakeTensorModeGuard guard(mode);
    fake = call_all(op, std::move(fake_args));
  }
  ASSERT_EQ(real.size(), fake.size());
  bool symbolic = false;
  for (size_t i = 0; i < real.size(); ++i) {
    if (!real[i].is_tensor()) continue;
    const Tensor& r = real[i].to_tensor();
    const Tensor& f = fake[i].to_tensor();
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_TRUE(f.is_fake());
    EXPECT_EQ(f.dtype(), r.dtype());
    symbolic = symbolic || f.has_symbolic_sizes();
    const SymInts sizes = f.sym_sizes(), strides = f.sym_strides();
    EXPECT_EQ(at_hints(sizes), sizes_of(r));
    EXPECT_EQ(at_hints(strides), strides_of(r));
    EXPECT_EQ(sizes_of(f), sizes_of(r));
    EXPECT_EQ(strides_of(f), strides_of(r));
    EXPECT_EQ(strs(strides), strs(dense_strides<SymInt>(sizes, layout_order(r.sizes(), r.strides()))))
        << "sizes " << shape_string(r.sizes()) << ", strides " << shape_string(r.strides());
  }
  EXPECT_TRUE(symbolic) << "no output has symbolic sizes";
}

// A channels-last copy of iota(sizes) (4-d).
Tensor channels_last(const Ints& sizes) {
  return iota({sizes[0], sizes[2], sizes[3], sizes[1]}).permute({0, 3, 1, 2});
}

const IValue kNone;

TEST(ShapePlan, Distance) {
  expect_one_plan("aten::_cdist_forward", {iota({2, 3, 4}), iota({2, 5, 4}), IValue(2.0), kNone});
  expect_one_plan("aten::_cdist_forward", {iota({1, 3, 4}), iota({2, 2, 4}).transpose(1, 2).contiguous().transpose(1, 2),
                                           IValue(1.0), kNone});
  expect_one_plan("aten::_pdist_forward", {iota({4, 3}), IValue(1.0)});
}

TEST(ShapePlan, Resampling) {
  expect_one_plan("aten::reflection_pad2d", {channels_last({2, 3, 4, 5}), IValue(Ints{1, 2, 3, 0})});
  expect_one_plan("aten::replication_pad3d", {iota({3, 2, 4, 5}), IValue(Ints{1, 2, 0, 1, 2, 2})});
  expect_one_plan("aten::reflection_pad1d", {iota({3, 5}), IValue(Ints{-1, 2})});
  expect_one_plan("aten::upsample_nearest2d.vec", {channels_last({2, 3, 4, 5}), kNone, IValue(std::vector<double>{2, 3})});
  expect_one_plan("aten::upsample_bilinear2d.vec", {iota({2, 3, 4, 5}), IValue(Ints{3, 7}), IValue(true), kNone});
  expect_one_plan("aten::_adaptive_avg_pool2d", {channels_last({2, 3, 5, 6}), IValue(Ints{2, 3})});
  expect_one_plan("aten::_adaptive_avg_pool3d", {iota({3, 4, 5, 6}), IValue(Ints{2, 1, 3})});
  expect_one_plan("aten::_adaptive_avg_pool2d_backward", {iota({2, 3, 2, 3}), iota({2, 3, 5, 6})});
}

TEST(ShapePlan, Fft) {
  expect_one_plan("aten::_fft_r2c", {iota({3, 4, 5}).transpose(0, 2), IValue(Ints{0, 2}), IValue(int64_t{2}), IValue(true)});
  expect_one_plan("aten::_fft_r2c", {iota({3, 4, 5}), IValue(Ints{1}), IValue(int64_t{0}), IValue(false)});
  expect_one_plan("aten::_fft_c2r", {iota({3, 4, 3}).to(DType::Complex128), IValue(Ints{1, 2}), IValue(int64_t{1}),
                                     IValue(int64_t{5})});
}

TEST(ShapePlan, SortingAndCreation) {
  expect_one_plan("aten::sort", {iota({4, 6}).slice(1, 0, 6, 2), IValue(int64_t{1}), IValue(false)});  // not dense
  expect_one_plan("aten::sort", {iota({4, 6}).transpose(0, 1), IValue(int64_t{0}), IValue(true)});
  expect_one_plan("aten::topk", {iota({4, 6}), IValue(int64_t{2}), IValue(int64_t{1}), IValue(true), IValue(true)});
  expect_one_plan("aten::fill.Scalar", {iota({3, 4}).transpose(0, 1), IValue(Scalar(2.0))});
}

TEST(ShapePlan, NewTensorsOfShapeOps) {
  expect_one_plan("aten::cat", {IValue(std::vector<Tensor>{iota({2, 3}), iota({4, 3})}), IValue(int64_t{0})});
  expect_one_plan("aten::cat", {IValue(std::vector<Tensor>{channels_last({2, 3, 4, 5}), channels_last({2, 2, 4, 5})}),
                                IValue(int64_t{1})});
  expect_one_plan("aten::repeat", {iota({2, 3}), IValue(Ints{2, 1, 2})});
  expect_one_plan("aten::constant_pad_nd", {iota({3, 4}), IValue(Ints{1, 2, -1, 1}), IValue(Scalar(0.0))});
  expect_one_plan("aten::constant_pad_nd", {iota({3, 4}), IValue(Ints{-1, 0}), IValue(Scalar(0.0))});  // crops only
  expect_one_plan("aten::constant_pad_nd", {channels_last({2, 3, 4, 5}), IValue(Ints{1, 1}), IValue(Scalar(0.0))});
  expect_one_plan("aten::flip", {iota({3, 4}).transpose(0, 1), IValue(Ints{0})});
  expect_one_plan("aten::clone", {iota({3, 4}).slice(1, 0, 4, 2), kNone});  // not dense: contiguous
  expect_one_plan("aten::clone", {iota({2, 3, 4, 5}), IValue(MemoryFormat::ChannelsLast)});
  expect_one_plan("aten::_to_copy", {channels_last({2, 3, 4, 5}), IValue(DType::Float32), kNone, kNone, kNone,
                                     IValue(false), kNone});
}

}  // namespace
}  // namespace opconform::reference
