// device_consistency: a library's CUDA kernel against its own CPU kernel on the same sample.
// Without a GPU only the CPU-sample rule runs; the rest skips with the reason.
#include <gtest/gtest.h>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/cuda.h"
#include "opconform/core/library.h"
#include "support/float_ops.h"
#include "support/host_memory.h"

namespace opconform::conformance {
namespace {

using opconform::testing::map;

class DeviceConsistencyTest : public ::testing::Test {
 protected:
  DeviceConsistencyTest() : lib("t", LibraryKind::DEF, std::nullopt, registry) {
    for (const char* op : {"twice(Tensor x) -> Tensor", "drift(Tensor x) -> Tensor", "gpu_only(Tensor x) -> Tensor"})
      lib.define(op);
    lib.define("noise(Tensor x) -> Tensor", {Tag::nondeterministic_seeded});

    auto twice = [](const Tensor& x) { return map(x, [](double v) { return 2 * v; }); };
    lib.impl("twice", twice, DispatchKey::CPU);
    lib.impl("twice", twice, DispatchKey::CUDA);
    lib.impl("drift", twice, DispatchKey::CPU);
    lib.impl("drift", [](const Tensor& x) { return map(x, [](double v) { return 2 * v + 0.5; }); }, DispatchKey::CUDA);
    lib.impl("gpu_only", twice, DispatchKey::CUDA);
    // Seeded bugs a CUDA kernel can hide from a contiguous float32 sample.
    for (const char* op : {"strided_bug(Tensor x) -> Tensor", "half_bug(Tensor x) -> Tensor"}) {
      lib.define(op);
      lib.impl(std::string(op).substr(0, std::string(op).find('(')), twice, DispatchKey::CPU);
    }
    lib.impl("strided_bug", [](const Tensor& x) {  // right only for contiguous input
      return map(x, [&](double v) { return x.is_contiguous() ? 2 * v : 2 * v + 0.5; });
    }, DispatchKey::CUDA);
    lib.impl("half_bug", [](const Tensor& x) {  // right but in float16
      return map(x, [&](double v) { return x.dtype() == DType::Float16 ? 2 * v + 0.5 : 2 * v; });
    }, DispatchKey::CUDA);
  }
  CheckResult run(const std::string& op, const Tensor& x) {
    Sample sample({IValue(x)});
    return detail::make_device_consistency()->run({registry.get(op), sample, tolerance, registry});
  }
  static Tensor values(Device device) {
    return from_vector<float>({0.5f, -1.25f, 3.0f, 7.5f, -0.125f, 2.0f}, {2, 3}).to(device);
  }

  Registry registry;
  Library lib;
  ToleranceSpec tolerance;
};

TEST_F(DeviceConsistencyTest, ACpuSampleIsForTheOtherDevicesCases) {
  const CheckResult r = run("t::twice", values(Device::cpu()));
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_NE(r.message.find("--device cuda"), std::string::npos) << r.message;
}

// Note [A copy on another device keeps the layout]: the CPU kernel gets a copy of the device
// sample with its strides and storage offset, so an op that reads the layout agrees with itself
// (ATen's sym_stride.int failed on an H100, "2 vs 1", against a contiguous copy). Runs without a
// GPU: host memory behind a device type of the test's own.
TEST_F(DeviceConsistencyTest, TheCpuCopyKeepsTheSamplesStridesAndOffset) {
  static opconform::testing::HostMemory memory;
  const Device dev(register_device_type("device_consistency_test_device"), 0);
  set_allocator(dev.type, &memory);
  lib.define("layout(Tensor x) -> Tensor");
  auto layout = [](const Tensor& x) {  // the layout as values: what a stride-reading op returns
    return from_vector<double>({static_cast<double>(x.stride(0)), static_cast<double>(x.storage_offset())}, {2});
  };
  lib.impl("layout", layout, DispatchKey::CPU);
  lib.impl("layout", [layout](const Tensor& x) { return layout(x).to(x.device()); }, DispatchKey::PrivateUse1);
  const Tensor base = values(dev);  // [2, 3]
  const std::vector<int64_t> size{2}, stride{3};
  const Tensor strided = base.as_strided(size, stride, 1);  // a column: stride 3, offset 1
  const CheckResult r = run("t::layout", strided);
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  // The copy is the sample's, on the CPU: same layout, same values, shared storage kept shared.
  const Stack copy = clone_args({IValue(strided), IValue(base)}, Device::cpu());
  const Tensor c = copy[0].to_tensor();
  EXPECT_TRUE(c.device().is_cpu());
  EXPECT_EQ(c.stride(0), 3);
  EXPECT_EQ(c.storage_offset(), 1);
  EXPECT_EQ(c.to_vector<float>(), strided.to_vector<float>());
  EXPECT_EQ(c.storage().get(), copy[1].to_tensor().storage().get());
}

// Each device draws from its own generator (aten::native_dropout differed on an H200).
TEST_F(DeviceConsistencyTest, AnOpThatDrawsRandomNumbersIsNotCompared) {
  const CheckResult r = run("t::noise", values(Device::cpu()));
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_NE(r.message.find("nondeterministic_seeded"), std::string::npos) << r.message;
}

TEST_F(DeviceConsistencyTest, CudaKernelsAgreeOrDifferFromTheCpuKernel) {
  if (!cuda::is_available()) GTEST_SKIP() << cuda::unavailable_reason();
  const Tensor x = values(Device::cuda(0));
  const CheckResult same = run("t::twice", x);
  EXPECT_EQ(same.outcome, Outcome::passed) << same.message;
  const CheckResult drift = run("t::drift", x);
  EXPECT_EQ(drift.outcome, Outcome::failed) << drift.message;
  EXPECT_NE(drift.message.find("(cuda:0 vs cpu)"), std::string::npos) << drift.message;
  const CheckResult alone = run("t::gpu_only", x);
  EXPECT_EQ(alone.outcome, Outcome::unsupported) << alone.message;
  EXPECT_NE(alone.message.find("none for the CPU"), std::string::npos) << alone.message;
}

// The two seeded bugs of issue 19: each passes on a contiguous float32 sample and fails on the
// sample that shows it.
TEST_F(DeviceConsistencyTest, BugsOnlyNonContiguousOrOnlyFloat16InputShowAreFound) {
  if (!cuda::is_available()) GTEST_SKIP() << cuda::unavailable_reason();
  const Tensor x = values(Device::cuda(0));
  EXPECT_EQ(run("t::strided_bug", x).outcome, Outcome::passed);
  const CheckResult strided = run("t::strided_bug", x.transpose(0, 1));
  EXPECT_EQ(strided.outcome, Outcome::failed) << strided.message;
  EXPECT_EQ(run("t::half_bug", x).outcome, Outcome::passed);
  const CheckResult half = run("t::half_bug", x.to(DType::Float16));
  EXPECT_EQ(half.outcome, Outcome::failed) << half.message;
  EXPECT_NE(half.message.find("(cuda:0 vs cpu)"), std::string::npos) << half.message;
}

}  // namespace
}  // namespace opconform::conformance
