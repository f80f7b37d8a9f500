// The oneDNN adapter (libopconform_onednn_plugin.so) loaded with opconform's loader, the reference
// as the schema source: a few ops against the reference's values (relu, add with broadcast and
// alpha, mm with a transposed operand, softmax, a 2-d convolution, a convolution backward), the
// registration (probed dtypes, backward formulas, the reference's fake kernels), refusals as
// kNotImplemented, and two disagreements with the reference that are oneDNN's
// (docs/onednn-conformance.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/reference.h"

namespace opconform::adapters {
namespace {

Registry& reference_registry() {
  static Registry registry;
  static auto registration = reference::register_reference_ops(registry);
  return registry;
}

struct Onednn {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib;
  Onednn() { lib = load_plugin(OPCONFORM_ONEDNN_PLUGIN_PATH, registry, {.schemas = &reference_registry()}); }
};
Onednn& onednn() {
  static Onednn instance;
  return instance;
}

Stack call(Registry& registry, std::string_view op, Stack args) {
  return reference::detail::Ops(registry).call(op, std::move(args));
}
Tensor onednn_call(std::string_view op, Stack args) { return call(onednn().registry, op, std::move(args)).at(0).to_tensor(); }
Tensor reference_call(std::string_view op, Stack args) {
  return call(reference_registry(), op, std::move(args)).at(0).to_tensor();
}

IValue ints(std::vector<int64_t> v) { return IValue(std::move(v)); }

void expect_near(const Tensor& actual, const Tensor& expected, double tol) {
  ASSERT_EQ(std::vector<int64_t>(actual.sizes().begin(), actual.sizes().end()),
            std::vector<int64_t>(expected.sizes().begin(), expected.sizes().end()));
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], tol) << "at " << i;
}

TEST(OnednnAdapter, RegistersProbedDtypesBackwardsAndReferenceFakes) {
  const LoadedLibrary& lib = *onednn().lib;
  EXPECT_EQ(lib.name(), "onednn");
  EXPECT_NE(lib.version().find("oneDNN 2."), std::string::npos) << lib.version();
  const auto ops = lib.ops();
  EXPECT_GE(ops.size(), 35u);
  for (const char* op : {"aten::relu", "aten::add.Tensor", "aten::mm", "aten::_softmax", "aten::convolution",
                         "aten::max_pool2d_with_indices", "aten::native_layer_norm", "aten::cat", "aten::_to_copy"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
    EXPECT_TRUE(lib.has_kernel(op, OPC_KERNEL_CPU)) << op;
    // No fake kernel of its own: declare_op(OPC_OP_REFERENCE_FAKE) makes the reference's the op's.
    EXPECT_TRUE(lib.has_kernel(op, OPC_KERNEL_FAKE)) << op;
  }
  for (const char* op : {"aten::relu", "aten::_softmax", "aten::convolution", "aten::avg_pool2d", "aten::native_layer_norm"}) {
    EXPECT_TRUE(lib.has_kernel(op, OPC_KERNEL_BACKWARD)) << op;
  }
  EXPECT_FALSE(lib.has_kernel("aten::mm", OPC_KERNEL_BACKWARD));
}

TEST(OnednnAdapter, ReluAgreesWithTheReference) {
  const Tensor x = from_vector<float>({-2, -0.5f, 0, 0.5f, 3, -7}, {2, 3});
  const Tensor y = onednn_call("aten::relu", {x});
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 0, 0.5f, 3, 0}));
  EXPECT_EQ(y.to_vector<float>(), reference_call("aten::relu", {x}).to_vector<float>());
  // A transposed input keeps its layout (TensorIterator's rule), as the reference's.
  const Tensor t = onednn_call("aten::relu", {x.transpose(0, 1)});
  EXPECT_EQ(t.strides()[0], 1);
  EXPECT_EQ(t.to_vector<float>(), reference_call("aten::relu", {x.transpose(0, 1)}).to_vector<float>());
}

TEST(OnednnAdapter, AddBroadcastsWithAlpha) {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<float>({10, 20, 30}, {3});
  const Tensor y = onednn_call("aten::add.Tensor", {a, b, IValue(int64_t{2})});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{21, 42, 63, 24, 45, 66}));
  // self broadcast too ([3] + [2, 3]): src0 as a stride-0 view.
  const Tensor z = onednn_call("aten::sub.Tensor", {b, a});
  EXPECT_EQ(z.to_vector<float>(), reference_call("aten::sub.Tensor", {b, a}).to_vector<float>());
}

TEST(OnednnAdapter, MmOfATransposedOperand) {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [3, 2], strides [1, 3]
  const Tensor p = onednn_call("aten::mm", {a, b});
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{14, 32, 32, 77}));
  EXPECT_EQ(p.to_vector<float>(), reference_call("aten::mm", {a, b}).to_vector<float>());
}

TEST(OnednnAdapter, SoftmaxAgreesWithTheReference) {
  const Tensor x = from_vector<float>({1, 2, 3, -1, 0, 1, 5, 5, 5}, {3, 3});
  for (int64_t dim : {0, 1}) {
    const Stack args{x, IValue(dim), IValue(false)};
    expect_near(onednn_call("aten::_softmax", args), reference_call("aten::_softmax", args), 1e-6);
    // oneDNN's log_softmax is a few ulp off (-1.09861004 for log(1/3) = -1.09861231).
    expect_near(onednn_call("aten::_log_softmax", args), reference_call("aten::_log_softmax", args), 1e-5);
  }
}

Stack conv_args(const Tensor& x, const Tensor& w, const Tensor& b) {
  return {x, w, b, ints({1, 1}), ints({1, 1}), ints({1, 1}), IValue(false), ints({0, 0}), IValue(int64_t{1})};
}

TEST(OnednnAdapter, ConvolutionAgreesWithTheReference) {
  std::vector<float> xs(2 * 3 * 4 * 4), ws(4 * 3 * 3 * 3);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = static_cast<float>((i * 5) % 7) * 0.25f - 0.75f;
  const Tensor x = from_vector<float>(xs, {2, 3, 4, 4}), w = from_vector<float>(ws, {4, 3, 3, 3});
  const Tensor b = from_vector<float>({0.5f, -1, 2, 0}, {4});
  const Tensor y = onednn_call("aten::convolution", conv_args(x, w, b));
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), (std::vector<int64_t>{2, 4, 4, 4}));
  expect_near(y, reference_call("aten::convolution", conv_args(x, w, b)), 1e-4);
}

TEST(OnednnAdapter, ConvolutionBackwardIsTheFormula) {
  const Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  x.set_requires_grad(true);
  const Tensor w = from_vector<float>({1, 0, 0, 1}, {1, 1, 2, 2});
  const Tensor y = onednn_call("aten::convolution", {x, w, Tensor(), ints({1, 1}), ints({0, 0}), ints({1, 1}), IValue(false),
                                                     ints({0, 0}), IValue(int64_t{1})});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5}));
  y.backward(from_vector<float>({2}, {1, 1, 1, 1}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 0, 0, 2}));
}

TEST(OnednnAdapter, UnsupportedArgumentsAreNotImplemented) {
  const Tensor x = from_vector<double>({1, 2}, {2});  // float64: no oneDNN type
  try {
    onednn_call("aten::relu", {x});
    FAIL() << "relu of float64 did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented) << e.what();
    EXPECT_NE(std::string(e.what()).find("'self'"), std::string::npos) << e.what();
  }
  const Tensor f = from_vector<float>({1, 2}, {2});
  try {
    onednn_call("aten::elu", {f, IValue(1.0), IValue(2.0), IValue(1.0)});
    FAIL() << "elu with scale 2 did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented) << e.what();
    EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos) << e.what();
  }
}

// Two disagreements of docs/onednn-conformance.md, asserted so that a oneDNN upgrade that changes
// them is noticed: relu of NaN is 0 (the reference propagates NaN), and a float -> int32 copy rounds
// to nearest even (the reference truncates toward zero) and turns 3e9 into INT32_MIN.
TEST(OnednnAdapter, KnownDisagreementsAreReal) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = from_vector<float>({nan, -1, 2}, {3});
  const auto mine = onednn_call("aten::relu", {x}).to_vector<float>();
  const auto ref = reference_call("aten::relu", {x}).to_vector<float>();
  EXPECT_TRUE(std::isnan(ref[0]));
  EXPECT_EQ(mine[0], 0.0f);
  EXPECT_EQ(mine[2], ref[2]);

  const Tensor v = from_vector<float>({2.7f, -2.7f, 2.5f, 3e9f}, {4});
  const Stack args{v, IValue(DType::Int32)};
  const auto rounded = onednn_call("aten::_to_copy", args).to_vector<int32_t>();
  const auto truncated = reference_call("aten::_to_copy", args).to_vector<int32_t>();
  EXPECT_EQ(rounded[0], 3);
  EXPECT_EQ(truncated[0], 2);
  EXPECT_EQ(rounded[1], -3);
  EXPECT_EQ(truncated[1], -2);
  EXPECT_EQ(rounded[2], 2);  // to nearest even
  // 3e9 does not saturate to INT32_MAX as reorder.md says: the JIT reorder's conversion gives the
  // "integer indefinite" INT32_MIN.
  EXPECT_EQ(rounded[3], std::numeric_limits<int32_t>::min());
}

}  // namespace
}  // namespace opconform::adapters
