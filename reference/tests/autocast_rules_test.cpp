// The reference's autocast rules (autocast_rules.cpp) behave as PyTorch's autocast does on the
// same ops: CPU's lower_precision_fp, fp32 and promote lists; the CUDA lists are registered.
#include <gtest/gtest.h>

#include <set>

#include "opconform/conformance/tolerance.h"
#include "opconform/core/autocast.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using testing::registry;

Tensor call(std::string_view op, Stack args) {
  registry().get(op).call_boxed(args);
  return args[0].to_tensor();
}

Tensor range(std::vector<int64_t> sizes, DType dtype = DType::Float32) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(0.25 * static_cast<double>(i % 7) - 0.5);
  return from_vector<double>(v, sizes).to(dtype);
}

TEST(AutocastRules, MatrixProductsRunInTheAutocastDtypeOnCpu) {
  const Tensor a = range({3, 4}), b = range({4, 2});
  AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
  const Tensor out = call("aten::mm", {IValue(a), IValue(b)});
  EXPECT_EQ(out.dtype(), DType::BFloat16);
  Tensor by_hand;
  {
    AutocastGuard off(DeviceType::CPU, DType::BFloat16, false);
    by_hand = call("aten::mm", {IValue(a.to(DType::BFloat16)), IValue(b.to(DType::BFloat16))});
  }
  EXPECT_TRUE(conformance::bitwise_equal(out, by_hand));
  // float64 is never lowered.
  EXPECT_EQ(call("aten::mm", {IValue(a.to(DType::Float64)), IValue(b.to(DType::Float64))}).dtype(), DType::Float64);
}

TEST(AutocastRules, Fp32OpsRunInFloat32AndCatPromotesOnCpu) {
  AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
  EXPECT_EQ(call("aten::prod", {IValue(range({4}, DType::BFloat16)), IValue()}).dtype(), DType::Float32);
  EXPECT_EQ(call("aten::reflection_pad1d", {IValue(range({1, 2, 4}, DType::Float16)), IValue(std::vector<int64_t>{1, 1})}).dtype(),
            DType::Float32);
  auto cat = [](std::vector<Tensor> ts) { return call("aten::cat", {IValue(std::move(ts)), IValue(int64_t{0})}); };
  EXPECT_EQ(cat({range({2}, DType::BFloat16), range({2})}).dtype(), DType::Float32);
  EXPECT_EQ(cat({range({2}, DType::BFloat16), range({2}, DType::BFloat16)}).dtype(), DType::BFloat16);
  // An op PyTorch's lists do not name is not autocast.
  EXPECT_EQ(call("aten::relu", {IValue(range({3}))}).dtype(), DType::Float32);
}

TEST(AutocastRules, EveryListedOpHasItsRuleAndNoOtherOpHasOne) {
  const std::set<std::string> cpu = {"aten::mm", "aten::bmm", "aten::addmm", "aten::prod", "aten::prod.dim_int",
                                     "aten::reflection_pad1d", "aten::reflection_pad2d", "aten::replication_pad2d",
                                     "aten::replication_pad3d", "aten::cat"};
  int cuda = 0;
  for (const auto& op : registry().operators()) {
    EXPECT_EQ(op.has_kernel_at(DispatchKey::AutocastCPU), cpu.count(op.name()) == 1) << op.name();
    cuda += op.has_kernel_at(DispatchKey::AutocastCUDA);
  }
  EXPECT_EQ(cuda, 29);  // the AutocastCUDA entries of autocast_rules.cpp
  for (const char* op : {"aten::exp", "aten::sum", "aten::convolution", "aten::atan2", "aten::native_layer_norm"})
    EXPECT_TRUE(registry().get(op).has_kernel_at(DispatchKey::AutocastCUDA)) << op;
}

}  // namespace
}  // namespace opconform::reference
