// Autocast: the guard's thread-local state and key, and make_autocast_kernel's casts.
#include "opconform/core/autocast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core.h"
#include "opconform/core/vmap.h"

namespace opconform {
namespace {

class AutocastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib.define("probe(Tensor a, Tensor b) -> Tensor");
    lib.define("probe_list(Tensor[] xs) -> Tensor");
    lib.define("plain(Tensor a) -> Tensor");
    // Composite: runs for CPU and for metadata-only CUDA tensors alike, reading dtypes only.
    lib.impl("probe", [this](const Tensor& a, const Tensor& b) {
      ++probe_calls;
      seen = {a.dtype(), b.dtype()};
      excluded_inside = local_dispatch_key_set().excluded;
      return a;
    }, DispatchKey::CompositeExplicitAutograd);
    lib.impl("probe_list", [this](const std::vector<Tensor>& xs) {
      seen.clear();
      for (const auto& x : xs) seen.push_back(x.dtype());
      return xs[0];
    }, DispatchKey::CPU);
    lib.impl("plain", [this](const Tensor& a) {
      seen = {a.dtype()};
      return a;
    }, DispatchKey::CPU);
    lib.impl("probe", make_autocast_kernel(DeviceType::CPU, DType::Float16), DispatchKey::AutocastCPU);
    lib.impl("probe_list", make_autocast_kernel(DeviceType::CPU, DType::Float16), DispatchKey::AutocastCPU);
  }

  Tensor probe(const Tensor& a, const Tensor& b) {
    return registry.get("t::probe").typed<Tensor(const Tensor&, const Tensor&)>().call(a, b);
  }

  Registry registry;
  Library lib{"t", LibraryKind::DEF, std::nullopt, registry};
  std::vector<DType> seen;
  DispatchKeySet excluded_inside;
  int probe_calls = 0;
};

TEST_F(AutocastTest, CastsFloatInputsInsideTheGuardOnly) {
  Tensor f32 = ones({2}), f64 = ones({2}, DType::Float64);
  probe(f32, f64);
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float64}));
  {
    AutocastGuard guard(DeviceType::CPU, DType::Float16);
    Tensor out = probe(f32, f64);
    // float64 is never lowered, as PyTorch.
    EXPECT_EQ(seen, (std::vector<DType>{DType::Float16, DType::Float64}));
    EXPECT_EQ(out.dtype(), DType::Float16);
    EXPECT_EQ(probe_calls, 2);  // the op ran once for this call
    // The kernel ran with both autocast keys excluded, so its own calls are not cast again.
    EXPECT_TRUE(excluded_inside.has(DispatchKey::AutocastCPU));
    EXPECT_TRUE(excluded_inside.has(DispatchKey::AutocastCUDA));
  }
  probe(f32, f64);
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float64}));
  EXPECT_FALSE(local_dispatch_key_set().excluded.has(DispatchKey::AutocastCPU));
}

TEST_F(AutocastTest, IntegerBfloatAndOtherDeviceInputs) {
  AutocastGuard guard(DeviceType::CPU, DType::Float16);
  probe(ones({2}, DType::BFloat16), ones({2}, DType::Int64));
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float16, DType::Int64}));
  // A CUDA tensor (metadata only) is not touched by CPU autocast.
  Tensor cuda = make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, Device::cuda(0));
  probe(ones({2}), cuda);
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float16, DType::Float32}));
}

TEST_F(AutocastTest, TensorListArgumentsAreCast) {
  AutocastGuard guard(DeviceType::CPU, DType::Float16);
  Stack stack{IValue(std::vector<Tensor>{ones({1}), ones({1}, DType::Float64), ones({1}, DType::BFloat16)})};
  registry.get("t::probe_list").call_boxed(stack);
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float16, DType::Float64, DType::Float16}));
}

TEST_F(AutocastTest, OpsWithoutAnAutocastKernelAreUnaffected) {
  AutocastGuard guard(DeviceType::CPU, DType::Float16);
  registry.get("t::plain").typed<Tensor(const Tensor&)>().call(ones({2}));
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32}));
}

TEST_F(AutocastTest, GuardsNestAndRestoreState) {
  EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), DType::BFloat16);
  EXPECT_EQ(autocast_dtype(DeviceType::CUDA), DType::Float16);
  {
    AutocastGuard outer(DeviceType::CPU, DType::Float16);
    EXPECT_TRUE(autocast_enabled(DeviceType::CPU));
    EXPECT_FALSE(autocast_enabled(DeviceType::CUDA));  // per device type
    EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::AutocastCPU));
    EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::AutocastCUDA));
    {
      AutocastGuard off(DeviceType::CPU, DType::BFloat16, /*enabled=*/false);
      EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
      EXPECT_EQ(autocast_dtype(DeviceType::CPU), DType::BFloat16);
      EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::AutocastCPU));
      probe(ones({1}), ones({1}));
      EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float32}));
    }
    EXPECT_TRUE(autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), DType::Float16);
    probe(ones({1}), ones({1}));
    EXPECT_EQ(seen, (std::vector<DType>{DType::Float16, DType::Float16}));
  }
  EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), DType::BFloat16);
  EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::AutocastCPU));
}

TEST_F(AutocastTest, CudaGuardDoesNotEnableCpuAutocast) {
  AutocastGuard guard(DeviceType::CUDA, DType::BFloat16);
  EXPECT_TRUE(autocast_enabled(DeviceType::CUDA));
  EXPECT_EQ(autocast_dtype(DeviceType::CUDA), DType::BFloat16);
  EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::AutocastCUDA));
  probe(ones({1}), ones({1}));  // CPU tensors, CPU autocast off: untouched
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float32}));
}

TEST_F(AutocastTest, CastsBatchedTensorsUnderVmap) {
  // Autocast is above Batched: it casts a vmap wrapper's physical value and wraps it again.
  RegistrationHandle fallback = install_vmap_fallback(registry);
  AutocastGuard guard(DeviceType::CPU, DType::Float16);
  Tensor x = ones({3, 2});
  auto f = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{probe(in[0], ones({2}, DType::Float64))}; },
                {0});
  Tensor out = f({x})[0];
  EXPECT_EQ(out.dtype(), DType::Float16);
  EXPECT_EQ(out.size(0), 3);
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float16, DType::Float64}));  // the last sample's call
  EXPECT_EQ(probe_calls, 3);
}

TEST_F(AutocastTest, OnlyCpuAndCudaAreSupported) {
  EXPECT_THROW(AutocastGuard(DeviceType::Meta, DType::Float16), Error);
  EXPECT_THROW(make_autocast_kernel(DeviceType::Meta, DType::Float16), Error);
  EXPECT_THROW(make_autocast_kernel(DeviceType::CPU, DType::Int32), Error);
  EXPECT_FALSE(autocast_enabled(DeviceType::Meta));
}

// PyTorch's four cast policies (CastPolicy), each on an op that reports what it was given.
class CastPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib.define("pair(Tensor a, Tensor b) -> Tensor");
    lib.define("reduce(Tensor self, *, ScalarType? dtype=None) -> Tensor");
    lib.impl("pair", [this](const Tensor& a, const Tensor& b) {
      seen = {a.dtype(), b.dtype()};
      return a;
    }, DispatchKey::CPU);
    lib.impl("reduce", [this](const Tensor& self, std::optional<DType> dtype) {
      seen = {self.dtype()};
      given = dtype;
      return self;
    }, DispatchKey::CPU);
  }
  void rule(const char* op, CastPolicy policy) { lib.impl(op, make_autocast_kernel(DeviceType::CPU, policy), DispatchKey::AutocastCPU); }
  void pair(const Tensor& a, const Tensor& b) {
    registry.get("t::pair").typed<Tensor(const Tensor&, const Tensor&)>().call(a, b);
  }
  void reduce(const Tensor& x, std::optional<DType> dtype = std::nullopt) {
    registry.get("t::reduce").typed<Tensor(const Tensor&, std::optional<DType>)>().call(x, dtype);
  }

  Registry registry;
  Library lib{"t", LibraryKind::DEF, std::nullopt, registry};
  std::vector<DType> seen;
  std::optional<DType> given;
};

TEST_F(CastPolicyTest, LowerPrecisionFpCastsToTheGuardsDtype) {
  rule("pair", CastPolicy::LowerPrecisionFp);
  AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
  pair(ones({2}), ones({2}, DType::Float64));
  EXPECT_EQ(seen, (std::vector<DType>{DType::BFloat16, DType::Float64}));
}

TEST_F(CastPolicyTest, Fp32CastsToFloat32) {
  rule("pair", CastPolicy::Fp32);
  AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
  pair(ones({2}, DType::Float16), ones({2}, DType::Int64));
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Int64}));
}

TEST_F(CastPolicyTest, PromoteCastsToTheWidestEligibleType) {
  rule("pair", CastPolicy::Promote);
  AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
  pair(ones({2}, DType::BFloat16), ones({2}));
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float32}));
  pair(ones({2}, DType::BFloat16), ones({2}, DType::BFloat16));
  EXPECT_EQ(seen, (std::vector<DType>{DType::BFloat16, DType::BFloat16}));
  pair(ones({2}, DType::Float16), ones({2}, DType::BFloat16));  // both lower: promote_types gives float32
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float32}));
  pair(ones({2}, DType::Float16), ones({2}, DType::Float64));  // float64 is not eligible
  EXPECT_EQ(seen, (std::vector<DType>{DType::Float32, DType::Float64}));
}

TEST_F(CastPolicyTest, Fp32SetOptDtypeFillsAMissingDtypeForEligibleInputsOnly) {
  rule("reduce", CastPolicy::Fp32SetOptDtype);
  AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
  reduce(ones({2}, DType::Float16));
  EXPECT_EQ(seen, std::vector<DType>{DType::Float16});  // nothing is cast
  EXPECT_EQ(given, DType::Float32);
  reduce(ones({2}, DType::Float16), DType::Float64);  // a dtype given stays
  EXPECT_EQ(given, DType::Float64);
  reduce(ones({2}, DType::Int64));  // not eligible: untouched
  EXPECT_EQ(given, std::nullopt);
  reduce(ones({2}, DType::Float64));
  EXPECT_EQ(given, std::nullopt);
}

}  // namespace
}  // namespace opconform
