// The ATen adapter (libopconform_aten_plugin.so) loaded with opconform's loader, the reference as
// the schema source: a few ops checked against values ATen computes (and the reference agrees
// with), views that alias the argument's memory, in-place ops handing back the argument, ATen's
// errors as opconform errors, meta kernels as fake kernels and ATen's autograd as the backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
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

// The plugin loaded once into its own registry (libtorch is loaded for the whole binary anyway).
struct Aten {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib;
  Aten() { lib = load_plugin(OPCONFORM_ATEN_PLUGIN_PATH, registry, {.schemas = &reference_registry()}); }
};
Aten& aten() {
  static Aten instance;
  return instance;
}

// `op` with the leading arguments given, the rest from the schema's defaults.
Stack call(Registry& registry, std::string_view op, Stack args) {
  return reference::detail::Ops(registry).call(op, std::move(args));
}
Tensor aten_call(std::string_view op, Stack args) { return call(aten().registry, op, std::move(args)).at(0).to_tensor(); }
Tensor reference_call(std::string_view op, Stack args) {
  return call(reference_registry(), op, std::move(args)).at(0).to_tensor();
}

std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }
std::vector<int64_t> strides_of(const Tensor& t) { return {t.strides().begin(), t.strides().end()}; }

TEST(AtenAdapter, LoadsTheReferenceOpsAtenHas) {
  const LoadedLibrary& lib = *aten().lib;
  EXPECT_EQ(lib.name(), "aten");
  EXPECT_NE(lib.version().find("1.13"), std::string::npos) << lib.version();
  const auto ops = lib.ops();
  EXPECT_GE(ops.size(), 150u);
  for (const char* op : {"aten::add.Tensor", "aten::mm", "aten::view", "aten::add_.Tensor", "aten::sort"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
  EXPECT_TRUE(lib.has_kernel("aten::add.Tensor", OPC_KERNEL_CPU));
  EXPECT_TRUE(lib.has_kernel("aten::add.Tensor", OPC_KERNEL_FAKE));
  EXPECT_TRUE(lib.has_kernel("aten::add.Tensor", OPC_KERNEL_BACKWARD));
  // nonzero has no meta kernel in ATen 1.13: no fake kernel is offered.
  EXPECT_TRUE(lib.has_kernel("aten::nonzero", OPC_KERNEL_CPU));
  EXPECT_FALSE(lib.has_kernel("aten::nonzero", OPC_KERNEL_FAKE));
  // var.correction's 1.13 schema takes `int? correction`: defined with ATen's schema, reported, left out.
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "aten::var.correction"), ops.end());
  const auto& problems = lib.problems();
  const bool reported = std::any_of(problems.begin(), problems.end(), [](const LoadProblem& p) {
    return p.op == "aten::var.correction" && p.message.find("int? correction") != std::string::npos;
  });
  EXPECT_TRUE(reported);
}

TEST(AtenAdapter, AddWithAlphaBroadcasts) {
  const Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<double>({10, 20, 30}, {3});
  const Tensor y = aten_call("aten::add.Tensor", {a, b, IValue(int64_t{2})});
  EXPECT_EQ(sizes_of(y), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{21, 42, 63, 24, 45, 66}));
  EXPECT_EQ(y.to_vector<double>(), reference_call("aten::add.Tensor", {a, b, IValue(int64_t{2})}).to_vector<double>());
  // Type promotion is ATen's: int32 + float32 -> float32.
  const Tensor i = from_vector<int32_t>({1, 2, 3}, {3});
  const Tensor f = from_vector<float>({0.5f, 0.5f, 0.5f}, {3});
  EXPECT_EQ(aten_call("aten::add.Tensor", {i, f}).dtype(), DType::Float32);
  // bool crosses as bool (DLPack 1.x code 6), not as uint8.
  const Tensor t = from_vector<bool>({true, false}, {2});
  const Tensor o = aten_call("aten::logical_not", {t});
  EXPECT_EQ(o.dtype(), DType::Bool);
  EXPECT_EQ(o.to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(AtenAdapter, MmOfTransposedAndOffsetViews) {
  const Tensor base = from_vector<double>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  // A view with a storage offset and a transposed view: ATen reads the host's memory as laid out.
  const Tensor a = base.narrow(0, 2, 4).view({2, 2});  // [[2, 3], [4, 5]]
  const Tensor b = from_vector<double>({1, 2, 3, 4}, {2, 2}).transpose(0, 1);  // [[1, 3], [2, 4]]
  const Tensor p = aten_call("aten::mm", {a, b});
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{8, 18, 14, 32}));
  EXPECT_EQ(p.to_vector<double>(), reference_call("aten::mm", {a, b}).to_vector<double>());
}

TEST(AtenAdapter, ViewsAliasTheArgumentsMemory) {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = aten_call("aten::permute", {x, IValue(std::vector<int64_t>{1, 0})});
  EXPECT_EQ(sizes_of(t), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(strides_of(t), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(t.const_data_ptr(), x.const_data_ptr());
  const Tensor s = aten_call("aten::select.int", {x, IValue(int64_t{1}), IValue(int64_t{2})});
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{3, 6}));
  EXPECT_EQ(s.const_data_ptr(), static_cast<const double*>(x.const_data_ptr()) + 2);
  // as_strided's storage_offset counts from the storage's start, as the host's does.
  const Tensor tail = x.view({6}).narrow(0, 1, 5);
  const Tensor g = aten_call("aten::as_strided", {tail, IValue(std::vector<int64_t>{2}), IValue(std::vector<int64_t>{2}),
                                                  IValue(int64_t{3})});
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{4, 6}));
  EXPECT_EQ(g.to_vector<double>(),
            reference_call("aten::as_strided", {tail, IValue(std::vector<int64_t>{2}), IValue(std::vector<int64_t>{2}),
                                                IValue(int64_t{3})})
                .to_vector<double>());
}

TEST(AtenAdapter, InPlaceOpsWriteAndReturnTheArgument) {
  const Tensor x = from_vector<double>({1, 2, 3}, {3});
  const Tensor y = aten_call("aten::add_.Tensor", {x, from_vector<double>({1, 1, 1}, {3}), IValue(int64_t{10})});
  EXPECT_TRUE(y.is_same(x));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{11, 12, 13}));
}

TEST(AtenAdapter, MultipleAndListReturns) {
  const Tensor x = from_vector<double>({3, 1, 2, 0}, {4});
  const Stack sorted = call(aten().registry, "aten::sort", {x});
  ASSERT_EQ(sorted.size(), 2u);
  EXPECT_EQ(sorted[0].to_tensor().to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(sorted[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 2, 0}));
  const Stack parts = call(aten().registry, "aten::split_with_sizes", {x, IValue(std::vector<int64_t>{1, 3})});
  const auto pieces = parts.at(0).to_tensor_list();
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].to_vector<double>(), (std::vector<double>{1, 2, 0}));
}

TEST(AtenAdapter, AtenErrorsBecomeErrorsNamingTheOp) {
  const Tensor a = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor b = from_vector<double>({1, 2, 3}, {3, 1});
  try {
    aten_call("aten::mm", {a, b});
    FAIL() << "mm of [2, 2] and [3, 1] did not fail";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("aten::mm"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot be multiplied"), std::string::npos) << message;  // ATen's own words
    EXPECT_NE(message.find("OPC_INVALID_ARGUMENT"), std::string::npos) << message;
    // Only the first line of ATen's message: no C++ backtrace.
    EXPECT_EQ(message.find("Exception raised from"), std::string::npos) << message;
  }
}

TEST(AtenAdapter, MetaKernelsAreFakeKernels) {
  FakeTensorMode mode;
  const Tensor a = mode.from_tensor(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  const Tensor b = mode.from_tensor(from_vector<double>({1, 2, 3}, {3, 1}));
  const Tensor p = aten_call("aten::mm", {a, b});
  EXPECT_TRUE(p.is_fake());
  EXPECT_EQ(sizes_of(p), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(p.dtype(), DType::Float64);
  const Tensor t = aten_call("aten::permute", {a, IValue(std::vector<int64_t>{1, 0})});
  EXPECT_EQ(strides_of(t), (std::vector<int64_t>{1, 3}));
}

TEST(AtenAdapter, AtenAutogradIsTheBackward) {
  const Tensor x = from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad(true);
  const Tensor w = from_vector<double>({4, 5, 6}, {3});
  const Tensor y = aten_call("aten::mul.Tensor", {x, w});
  y.backward(from_vector<double>({1, 10, 100}, {3}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 50, 600}));
}

}  // namespace
}  // namespace opconform::adapters
