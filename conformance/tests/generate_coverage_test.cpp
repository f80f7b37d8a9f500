// What generation reaches with GenerateSpec's defaults (generate.h; docs/checks.md, "What is
// generated"): over many draws, every value kind's whole range, every declared dtype, the large
// tier, every value of enum-like arguments, and inputs that require grad. These are properties of
// the generator itself, so that a sample space that shrinks silently (all-False bools, two dtypes,
// 625 elements at most) fails here rather than as PASS on a buggy kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "opconform/conformance/generate.h"
#include "opconform/core/schema.h"

namespace opconform::conformance {
namespace {

GenerateSpec defaults(int count, uint64_t seed = 99) {
  GenerateSpec spec;  // the defaults under test, only count and seed set
  spec.count = count;
  spec.seed = seed;
  return spec;
}

std::vector<double> values_of(const Tensor& t) { return t.numel() == 0 ? std::vector<double>{} : t.to_vector<double>(); }

TEST(GenerateCoverage, BoolTensorsHoldTrueAndFalseInUsefulProportions) {
  auto schema = parse_schema("test::logical_not(Tensor self) -> Tensor");
  InputConstraints c;
  c.accept_dtypes({DType::Bool});
  int64_t trues = 0, total = 0;
  for (const auto& s : generate_samples(schema, c, defaults(300))) {
    const Tensor& x = s.args[0].to_tensor();
    ASSERT_EQ(x.dtype(), DType::Bool);
    if (x.numel() > 4096) continue;  // the large tier would dominate the count
    for (double v : values_of(x)) trues += v != 0, ++total;
  }
  ASSERT_GT(total, 1000);
  EXPECT_GT(trues, total / 4) << trues << " True of " << total;
  EXPECT_LT(trues, total * 3 / 4) << trues << " True of " << total;
}

TEST(GenerateCoverage, IntegersReachEveryValueOfTheRangeAndTheExtremes) {
  auto schema = parse_schema("test::abs(Tensor self) -> Tensor");
  InputConstraints c;
  c.accept_dtypes({DType::Int32, DType::Int8, DType::UInt8, DType::Int64});
  std::map<DType, std::set<double>> seen;
  for (const auto& s : generate_samples(schema, c, defaults(600))) {
    const Tensor& x = s.args[0].to_tensor();
    for (double v : values_of(x)) seen[x.dtype()].insert(v);
  }
  for (int v = -10; v <= 10; ++v) EXPECT_TRUE(seen[DType::Int32].count(v)) << v;
  EXPECT_TRUE(seen[DType::Int32].count(2147483647.0));
  EXPECT_TRUE(seen[DType::Int32].count(-2147483648.0));
  EXPECT_TRUE(seen[DType::Int8].count(127) && seen[DType::Int8].count(-128));
  EXPECT_TRUE(seen[DType::UInt8].count(255) && seen[DType::UInt8].count(0));
  EXPECT_TRUE(seen[DType::Int64].count(2147483648.0));  // past int32: an int32 accumulator overflows
}

TEST(GenerateCoverage, FloatsReachOrdinaryTinyHugeSignedZeroAndSpecialValues) {
  auto schema = parse_schema("test::sin(Tensor self) -> Tensor");
  bool nan = false, pos_inf = false, neg_inf = false, neg_zero = false, denormal = false, huge = false, ordinary = false;
  for (const auto& s : generate_samples(schema, {}, defaults(400))) {
    const Tensor& x = s.args[0].to_tensor();
    for (double v : values_of(x)) {
      nan |= std::isnan(v);
      pos_inf |= v == INFINITY;
      neg_inf |= v == -INFINITY;
      neg_zero |= v == 0 && std::signbit(v);
      denormal |= v != 0 && std::fpclassify(static_cast<float>(v)) == FP_SUBNORMAL;
      huge |= std::isfinite(v) && std::abs(v) >= 1e30;
      ordinary |= std::abs(v) > 0.5 && std::abs(v) <= 10;
    }
  }
  EXPECT_TRUE(nan && pos_inf && neg_inf && neg_zero && denormal && huge && ordinary);
}

TEST(GenerateCoverage, EveryDeclaredDtypeIsGenerated) {
  auto schema = parse_schema("test::neg(Tensor self) -> Tensor");
  const std::vector<DType> declared = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                       DType::Int32,   DType::Int64,   DType::Complex64};
  InputConstraints c;
  c.accept_dtypes(declared);
  std::set<DType> seen;
  for (const auto& s : generate_samples(schema, c, defaults(200))) seen.insert(s.args[0].to_tensor().dtype());
  EXPECT_EQ(seen, std::set<DType>(declared.begin(), declared.end()));
  // Nothing declared: float32 and float64, as before.
  std::set<DType> fallback;
  for (const auto& s : generate_samples(schema, {}, defaults(60))) fallback.insert(s.args[0].to_tensor().dtype());
  EXPECT_EQ(fallback, (std::set<DType>{DType::Float32, DType::Float64}));
}

TEST(GenerateCoverage, TheLargeTierReachesTileWidthsAndStaysBounded) {
  auto schema = parse_schema("test::add(Tensor self, Tensor other) -> Tensor");
  InputConstraints c;
  c.relate(broadcastable("other", "self"));
  const GenerateSpec spec = defaults(1500);
  int large = 0;
  std::set<int64_t> large_sizes;
  for (const auto& s : generate_samples(schema, c, spec)) {
    const Tensor& x = s.args[0].to_tensor();
    EXPECT_LE(x.numel(), spec.large_max_numel) << s.description;
    if (x.numel() >= 1000) ++large;
    for (int64_t d : x.sizes())
      if (d > spec.max_dim_size) large_sizes.insert(d);
  }
  EXPECT_GT(large, 1500 * spec.large_percent / 100 / 3) << "large-tier samples";
  EXPECT_LT(large, 1500 * spec.large_percent / 100 * 3) << "the tier must stay sparse";
  for (int64_t edge : {31, 32, 33, 1023, 1024, 1025}) EXPECT_TRUE(large_sizes.count(edge)) << edge;
  // Off when asked.
  GenerateSpec off = spec;
  off.large_percent = 0;
  for (const auto& s : generate_samples(schema, c, off))
    for (int64_t d : s.args[0].to_tensor().sizes()) EXPECT_LE(d, off.max_dim_size);
}

// A kernel wrong only past 2,000 elements: found, and shrunk to the smallest failing tile size
// of the tier with every other size 1.
TEST(GenerateCoverage, ALargeOnlyBugShrinksToTheSmallestFailingSize) {
  auto schema = parse_schema("test::big_bug(Tensor self) -> Tensor");
  GenerateSpec spec = defaults(300, 4242);
  auto failure = find_failure(schema, InputConstraints{}, "test::big_bug", [](const Sample& s) {
    const bool bug = s.args[0].to_tensor().numel() > 2000;
    return CheckResult{"big", bug ? Outcome::failed : Outcome::passed, bug ? "wrong past 2000" : "", "", {}};
  }, spec);
  ASSERT_TRUE(failure.has_value());
  const Tensor minimal = failure->minimal.args[0].to_tensor();
  EXPECT_EQ(minimal.numel(), 2047) << failure->minimal.description;
  EXPECT_EQ(minimal.dim(), 1) << failure->minimal.description;
}

TEST(GenerateCoverage, EnumArgumentsTakeEveryValueThatApplies) {
  auto schema = parse_schema(
      "test::to(Tensor self, ScalarType dtype, Device device, MemoryFormat memory_format, Layout layout) -> Tensor");
  InputConstraints c;
  c.accept_dtypes({DType::Float32, DType::Int64, DType::Bool});
  std::set<DType> dtypes;
  std::set<DeviceType> devices;
  std::set<MemoryFormat> formats;
  for (const auto& s : generate_samples(schema, c, defaults(300))) {
    dtypes.insert(s.args[1].to<DType>());
    devices.insert(s.args[2].to<Device>().type);
    const auto f = s.args[3].to<MemoryFormat>();
    formats.insert(f);
    if (f == MemoryFormat::ChannelsLast) {
      EXPECT_EQ(s.args[0].to_tensor().dim(), 4) << s.description;
    }
  }
  EXPECT_EQ(dtypes, (std::set<DType>{DType::Float32, DType::Int64, DType::Bool}));
  EXPECT_EQ(devices, std::set<DeviceType>{DeviceType::CPU});  // the spec's devices (cpu) and cpu
  EXPECT_TRUE(formats.count(MemoryFormat::Contiguous) && formats.count(MemoryFormat::Preserve) &&
              formats.count(MemoryFormat::ChannelsLast));
}

TEST(GenerateCoverage, DifferentiableInputsRequireGradByDefault) {
  auto schema = parse_schema("test::mul(Tensor self, Tensor other, Tensor(a!) out) -> Tensor(a!)");
  for (const auto& s : generate_samples(schema, {}, defaults(50))) {
    EXPECT_TRUE(s.args[0].to_tensor().requires_grad()) << s.description;
    EXPECT_TRUE(s.args[1].to_tensor().requires_grad()) << s.description;
    EXPECT_FALSE(s.args[2].to_tensor().requires_grad()) << "a written argument: " << s.description;
  }
  GenerateSpec plain = defaults(10);
  plain.requires_grad = false;
  for (const auto& s : generate_samples(schema, {}, plain)) EXPECT_FALSE(s.args[0].to_tensor().requires_grad());
}

// Sample builders see the same: the op's declared dtypes, the large tier through draw.shape(),
// every device through draw.device_value().
TEST(GenerateCoverage, SampleBuildersGetTheDeclaredDtypesAndTheLargeTier) {
  Registry registry;
  auto def = registry.define(parse_schema("test_coverage::built(Tensor self, Device? device) -> Tensor"), {},
                             RegistrationSource::named("test"));
  OpData data;
  data.constraints.accept_dtypes({DType::Float16, DType::Int32});
  data.sample_builder = [](SampleDraw& draw) {
    Tensor self = draw.tensor(draw.shape(0, 3), draw.dtype());
    return Stack{IValue(self), IValue(draw.device_value())};
  };
  registry.set_op_data("test_coverage::built", std::move(data));
  std::set<DType> dtypes;
  std::set<DeviceType> devices;
  int large = 0;
  const GenerateSpec spec = defaults(300);
  for (const auto& s : generate_samples(registry.get("test_coverage::built"), spec)) {
    const Tensor& self = s.args[0].to_tensor();
    dtypes.insert(self.dtype());
    large += std::any_of(self.sizes().begin(), self.sizes().end(), [&](int64_t d) { return d > spec.max_dim_size; });
    devices.insert(s.args[1].to<Device>().type);
  }
  EXPECT_EQ(dtypes, (std::set<DType>{DType::Float16, DType::Int32}));
  EXPECT_GT(large, 300 * spec.large_percent / 100 / 3) << "samples with a size only the large tier gives";
  EXPECT_EQ(devices, std::set<DeviceType>{DeviceType::CPU});
}

}  // namespace
}  // namespace opconform::conformance
