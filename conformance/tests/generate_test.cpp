// Sample generation, constraints and the shrinking search (generate.h, constraints.h).
#include "opconform/conformance/generate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "opconform/core/input_constraints.h"
#include "opconform/core/registry.h"
#include "opconform/core/schema.h"
#include "support/error_of.h"
#include "support/host_memory.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;

// An op defined in a registry of its own, with the data a test gives it (Note [Per-op data
// belongs to the registry]): what generation by operator reads.
struct TestOp {
  Registry registry;
  RegistrationHandle definition;
  OperatorHandle op;
  TestOp(std::string_view schema, OpData data)
      : definition(registry.define(parse_schema(schema), {}, RegistrationSource::named("test"))),
        op(registry.get(parse_schema(schema).full_name())) {
    registry.set_op_data(op.name(), std::move(data));
  }
  TestOp(std::string_view schema, SampleBuilder builder) : TestOp(schema, with_builder(std::move(builder))) {}
  static OpData with_builder(SampleBuilder builder) {
    OpData data;
    data.sample_builder = std::move(builder);
    return data;
  }
};

GenerateSpec spec_with(int count, uint64_t seed = 1234) {
  GenerateSpec spec;
  spec.count = count;
  spec.seed = seed;
  return spec;
}

CheckResult result(std::string check, Outcome outcome = Outcome::passed) {
  CheckResult r;
  r.check = std::move(check);
  r.outcome = outcome;
  return r;
}
CheckResult crashed_result() { return result("c", Outcome::crashed); }

// An argument constraint on values only.
ArgConstraint values(std::optional<double> min, std::optional<double> max, bool positive = false, bool nan = true,
                     bool inf = true) {
  ArgConstraint c;
  c.values.min = min;
  c.values.max = max;
  c.values.positive = positive;
  c.values.allow_nan = nan;
  c.values.allow_inf = inf;
  return c;
}

// Sets (or, with nullopt, unsets) an environment variable for one scope. Tests that pass a
// seed unset OPCONFORM_SEED, which would override it (a replay of this binary sets it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// ---- the schema is respected ----

TEST(Generate, ArgumentsFollowTheSchemaTypesAndArity) {
  auto schema = parse_schema(
      "test::many(Tensor self, Tensor? maybe, int n, float f, bool b, Scalar s, int[] shape, float[2] pair, "
      "Tensor[] ts, ScalarType dtype, *, Device device, int k=3) -> Tensor");
  for (const auto& sample : generate_samples(schema, {}, spec_with(150))) {
    ASSERT_EQ(sample.args.size(), schema.arguments.size());
    const auto& a = sample.args;
    EXPECT_TRUE(a[0].is_tensor());
    EXPECT_TRUE(a[1].is_none() || a[1].is_tensor());
    EXPECT_TRUE(a[2].is_int());
    EXPECT_TRUE(a[3].is_double());
    EXPECT_TRUE(a[4].is_bool());
    EXPECT_TRUE(a[5].is_scalar());
    EXPECT_NE(a[6].get_if<std::vector<int64_t>>(), nullptr);
    ASSERT_NE(a[7].get_if<std::vector<double>>(), nullptr);
    EXPECT_EQ(a[7].get_if<std::vector<double>>()->size(), 2u);
    ASSERT_TRUE(a[8].is_tensor_list());
    EXPECT_GE(a[8].to_tensor_list().size(), 1u);
    EXPECT_NE(a[9].get_if<DType>(), nullptr);
    EXPECT_NE(a[10].get_if<Device>(), nullptr);
    EXPECT_TRUE(a[11].is_int());
    EXPECT_FALSE(sample.description.empty());
    // Default dtypes: float32 and float64; spec devices: cpu.
    const Tensor& self = a[0].to_tensor();
    EXPECT_TRUE(self.dtype() == DType::Float32 || self.dtype() == DType::Float64);
    EXPECT_TRUE(self.device().is_cpu());
    EXPECT_LE(self.dim(), 4);
  }
}

TEST(Generate, ExpandedLayoutsAreNeverGivenToMutableInputs) {
  auto schema = parse_schema("test::add_(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  bool other_expanded = false;
  for (const auto& s : generate_samples(schema, {}, spec_with(300))) {
    auto has_zero_stride = [](const Tensor& t) {
      for (int64_t d = 0; d < t.dim(); ++d)
        if (t.stride(d) == 0 && t.size(d) > 1) return true;
      return false;
    };
    EXPECT_FALSE(has_zero_stride(s.args[0].to_tensor())) << s.description;
    other_expanded = other_expanded || has_zero_stride(s.args[1].to_tensor());
  }
  EXPECT_TRUE(other_expanded);
}

TEST(Generate, ArgumentsWithDefaultsSometimesTakeThem) {
  auto schema = parse_schema("test::f(Tensor x, int k=7, float? eps=None) -> Tensor");
  int k_default = 0, eps_none = 0, eps_value = 0;
  for (const auto& s : generate_samples(schema, {}, spec_with(200))) {
    k_default += s.args[1].to_int() == 7;
    (s.args[2].is_none() ? eps_none : eps_value)++;
  }
  EXPECT_GT(k_default, 0);
  EXPECT_GT(eps_none, 0);
  EXPECT_GT(eps_value, 0);
}

TEST(Generate, UngeneratableArgumentWithoutDefaultIsAnError) {
  auto schema = parse_schema("test::g(Tensor x, Generator gen) -> Tensor");
  auto message = testing::error_message([&] { (void)sample_gen(schema, {}, {}); });
  EXPECT_THAT(message, HasSubstr("gen"));
  EXPECT_THAT(message, HasSubstr("Generator"));
  // An optional Generator is always None.
  auto optional = parse_schema("test::g(Tensor x, Generator? gen=None) -> Tensor");
  for (const auto& s : generate_samples(optional, {}, spec_with(20))) EXPECT_TRUE(s.args[1].is_none());
}

// ---- constraints are respected ----

TEST(Generate, RelationsAndValueConstraintsHold) {
  auto schema = parse_schema(
      "test::rel(Tensor a, Tensor b, Tensor c, Tensor p, int dim, int[] dims, int[] shape) -> Tensor");
  InputConstraints c;
  c.relate(same_shape("a", "b"))
      .relate(broadcastable("a", "c"))
      .relate(dim_in_range("dim", "a"))
      .relate(list_length_equals_rank("dims", "c"))
      .relate(dim_in_range("dims", "c"))
      .relate(size_positive("shape"))
      .relate(size_positive("p"))
      .arg("p", [] {
        ArgConstraint p = values(std::nullopt, std::nullopt, /*positive=*/true, /*nan=*/false);
        p.dtypes = {DType::Float64};
        p.min_rank = 1;
        return p;
      }());
  int broadcast_differs = 0;
  for (const auto& s : generate_samples(schema, c, spec_with(200))) {
    EXPECT_THAT(constraint_violations(schema, c, s.args), ::testing::IsEmpty()) << s.description;
    const Tensor& a = s.args[0].to_tensor();
    const Tensor& cc = s.args[2].to_tensor();
    const Tensor& p = s.args[3].to_tensor();
    EXPECT_TRUE(std::ranges::equal(a.sizes(), s.args[1].to_tensor().sizes()));
    EXPECT_NO_THROW((void)broadcast_shapes(a.sizes(), cc.sizes())) << s.description;
    broadcast_differs += !std::ranges::equal(a.sizes(), cc.sizes());
    EXPECT_EQ(p.dtype(), DType::Float64);
    EXPECT_GE(p.dim(), 1);
    EXPECT_GT(p.numel(), 0);
    for (double v : p.to_vector<double>()) EXPECT_GT(v, 0) << s.description;
    const int64_t dim = s.args[4].to_int(), rank = std::max<int64_t>(a.dim(), 1);
    EXPECT_TRUE(dim >= -rank && dim < rank) << s.description;
    EXPECT_EQ(static_cast<int64_t>(s.args[5].to<std::vector<int64_t>>().size()), cc.dim());
    for (int64_t x : s.args[6].to<std::vector<int64_t>>()) EXPECT_GT(x, 0);
  }
  EXPECT_GT(broadcast_differs, 0);
}

TEST(Generate, DeclaredDtypesAndRangesWin) {
  auto schema = parse_schema("test::idx(Tensor x, Tensor index) -> Tensor");
  InputConstraints c;
  ArgConstraint index = values(0, 3);
  index.dtypes = {DType::Int64};
  c.arg("index", index);
  c.arg("x", values(-1, 1));
  for (const auto& s : generate_samples(schema, c, spec_with(150))) {
    const Tensor& index = s.args[1].to_tensor();
    EXPECT_EQ(index.dtype(), DType::Int64);
    for (double v : index.to_vector<double>()) EXPECT_TRUE(v >= 0 && v <= 3) << s.description;
    EXPECT_THAT(constraint_violations(schema, c, s.args), ::testing::IsEmpty()) << s.description;
  }
}

TEST(Constraints, ValidatorNamesTheViolation) {
  auto schema = parse_schema("test::v(Tensor a, Tensor b, int dim) -> Tensor");
  InputConstraints c;
  c.relate(same_shape("a", "b")).relate(dim_in_range("dim", "a")).arg("a", values(std::nullopt, std::nullopt, false, /*nan=*/false));
  Stack ok{IValue(zeros({2, 3})), IValue(ones({2, 3})), IValue(int64_t{-2})};
  EXPECT_THAT(constraint_violations(schema, c, ok), ::testing::IsEmpty());
  Stack bad{IValue(full({2, 3}, Scalar(std::nan("")))), IValue(ones({3, 2})), IValue(int64_t{2})};
  auto v = constraint_violations(schema, c, bad);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_THAT(v[0], HasSubstr("a: value nan"));
  EXPECT_THAT(v[1], HasSubstr("same shape"));
  EXPECT_THAT(v[2], HasSubstr("dim = 2 is not a dimension of a"));
}

TEST(Constraints, ValidationRejectsUnknownNamesAndWrongTypes) {
  auto schema = parse_schema("test::v(Tensor a, float f) -> Tensor");
  EXPECT_THAT(testing::error_message([&] { validate_constraints(schema, InputConstraints().relate(same_shape("a", "x"))); }),
              HasSubstr("'x'"));
  EXPECT_THAT(testing::error_message([&] { validate_constraints(schema, InputConstraints().relate(dim_in_range("f", "a"))); }),
              HasSubstr("dim_in_range(f, a) needs an int"));
}

// ---- coverage ----

TEST(Generate, CoversScalarsEmptiesNonContiguousAndSpecialValues) {
  auto schema = parse_schema("test::unary(Tensor x) -> Tensor");
  int scalars = 0, empties = 0, non_contiguous = 0, nans = 0, infs = 0, offsets = 0;
  for (const auto& s : generate_samples(schema, {}, spec_with(200))) {
    const Tensor& x = s.args[0].to_tensor();
    scalars += x.dim() == 0;
    empties += x.numel() == 0;
    non_contiguous += !x.is_contiguous();
    offsets += x.storage_offset() > 0;
    auto values = x.to_vector<double>();
    nans += std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); });
    infs += std::any_of(values.begin(), values.end(), [](double v) { return std::isinf(v); });
  }
  EXPECT_GT(scalars, 0);
  EXPECT_GT(empties, 0);
  EXPECT_GT(non_contiguous, 0);
  EXPECT_GT(offsets, 0);
  EXPECT_GT(nans, 0);
  EXPECT_GT(infs, 0);
}

TEST(Generate, SpecSwitchesCoverageOff) {
  auto schema = parse_schema("test::unary(Tensor x) -> Tensor");
  GenerateSpec spec = spec_with(200);
  spec.include_non_contiguous = spec.include_empty = spec.include_scalars = spec.include_special_values = false;
  spec.dtypes = {DType::Float16, DType::Int32};
  for (const auto& s : generate_samples(schema, {}, spec)) {
    const Tensor& x = s.args[0].to_tensor();
    EXPECT_TRUE(x.is_contiguous()) << s.description;
    EXPECT_GT(x.numel(), 0) << s.description;
    EXPECT_GE(x.dim(), 1) << s.description;
    EXPECT_TRUE(x.dtype() == DType::Float16 || x.dtype() == DType::Int32);
    for (double v : x.to_vector<double>()) EXPECT_TRUE(std::isfinite(v) && std::abs(v) <= 10) << s.description;
  }
}

TEST(Generate, NoNanWhereTheConstraintForbidsIt) {
  auto schema = parse_schema("test::unary(Tensor x) -> Tensor");
  InputConstraints c;
  c.arg("x", values(std::nullopt, std::nullopt, false, /*nan=*/false, /*inf=*/false));
  for (const auto& s : generate_samples(schema, c, spec_with(200)))
    for (double v : s.args[0].to_tensor().to_vector<double>()) EXPECT_TRUE(std::isfinite(v)) << s.description;
}

// ---- determinism ----

TEST(Generate, SameSeedSameSamples) {
  ScopedEnv no_override("OPCONFORM_SEED", std::nullopt);
  auto schema = parse_schema("test::bin(Tensor a, Tensor b, int dim, Scalar alpha=1) -> Tensor");
  InputConstraints c;
  c.relate(broadcastable("a", "b")).relate(dim_in_range("dim", "a"));
  auto first = generate_samples(schema, c, spec_with(60, 99));
  auto second = generate_samples(schema, c, spec_with(60, 99));
  auto other = generate_samples(schema, c, spec_with(60, 100));
  ASSERT_EQ(first.size(), second.size());
  bool differs = false;
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].description, second[i].description);
    for (size_t k : {0u, 1u}) {
      const Tensor& x = first[i].args[k].to_tensor();
      const Tensor& y = second[i].args[k].to_tensor();
      EXPECT_TRUE(std::ranges::equal(x.strides(), y.strides()));
      EXPECT_TRUE(equal(x, y));
    }
    differs = differs || first[i].description != other[i].description;
  }
  EXPECT_TRUE(differs);
}

// ---- find_failure ----

// A kernel with a stride bug: it walks memory from the first element as if the input were
// contiguous (reading only inside the storage, so that the bug is well defined).
Tensor buggy_negate(const Tensor& x) {
  Tensor out = empty(x.sizes(), TensorOptions(DType::Float64));
  const double* in = x.const_data_ptr<double>();
  const int64_t available = static_cast<int64_t>(x.storage()->nbytes() / sizeof(double)) - x.storage_offset();
  double* o = out.mutable_data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = i < available ? -in[i] : 0.0;
  return out;
}

// The property: the kernel on x equals the kernel on a contiguous copy of x.
CheckResult stride_property(const Sample& s) {
  const Tensor& x = s.args[0].to_tensor();
  CheckResult r = result("stride_probe");
  if (!equal(buggy_negate(x), buggy_negate(x.contiguous()))) {
    r.outcome = Outcome::failed;
    r.message = "test::negate: non-contiguous input gives a different result than its contiguous copy";
  }
  return r;
}

GenerateSpec float64_spec(uint64_t seed) {
  GenerateSpec spec = spec_with(100, seed);
  spec.dtypes = {DType::Float64};
  return spec;
}

TEST(FindFailure, StrideBugShrinksToTwoElementNonContiguousTensor) {
  ScopedEnv no_override("OPCONFORM_SEED", std::nullopt);
  auto schema = parse_schema("test::negate(Tensor x) -> Tensor");
  auto failure = find_failure(schema, InputConstraints{}, "test::negate", stride_property, float64_spec(42));
  ASSERT_TRUE(failure.has_value());
  const Tensor& x = failure->minimal.args[0].to_tensor();
  EXPECT_EQ(x.numel(), 2) << failure->minimal.description;
  EXPECT_FALSE(x.is_contiguous()) << failure->minimal.description;
  EXPECT_EQ(failure->result.outcome, Outcome::failed);
  EXPECT_EQ(failure->result.minimal_input, failure->minimal.description);
  EXPECT_EQ(failure->seed, 42u);
  EXPECT_THAT(failure->replay, HasSubstr("OPCONFORM_SEED=42 "));
  EXPECT_EQ(failure->result.repro, failure->replay);
  EXPECT_GT(failure->shrinks, 0);
}

// Note [A shrink candidate runs once]: RapidCheck's candidates often make a sample the search ran
// already; the property runs once per distinct sample, and the search still ends at the same
// minimal sample.
TEST(FindFailure, ASampleMetAgainWhileShrinkingIsNotRunAgain) {
  ScopedEnv no_override("OPCONFORM_SEED", std::nullopt);
  auto schema = parse_schema("test::negate(Tensor x) -> Tensor");
  std::map<std::string, int> runs;
  auto counting = [&](const Sample& s) {
    ++runs[sample_key(s.args)];
    return stride_property(s);
  };
  auto failure = find_failure(schema, InputConstraints{}, "test::negate", counting, float64_spec(42));
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->minimal.args[0].to_tensor().numel(), 2) << failure->minimal.description;
  EXPECT_FALSE(failure->minimal.args[0].to_tensor().is_contiguous()) << failure->minimal.description;
  EXPECT_GT(runs.size(), 10u);
  for (const auto& [key, n] : runs) EXPECT_EQ(n, 1) << key;
}

// What sample_key tells apart: values, the bytes a view does not show, and sharing.
TEST(SampleKey, EqualForACloneAndDifferentForHolesValuesAndSharing) {
  const Tensor base = from_vector<double>({1, 2, 3, 4}, {4});
  const std::vector<int64_t> two{2};
  const Tensor view = base.as_strided(two, two, 0);  // 1 and 3; 2 and 4 are holes
  const Stack sample{IValue(view)};
  EXPECT_EQ(sample_key(sample), sample_key(clone_args(sample)));

  Stack hole_changed = clone_args(sample);
  static_cast<double*>(hole_changed[0].to_tensor().storage()->data())[1] = 77;
  EXPECT_EQ(describe(hole_changed), describe(sample));
  EXPECT_NE(sample_key(hole_changed), sample_key(sample)) << "a kernel that ignores strides reads the hole";

  Stack value_changed = clone_args(sample);
  static_cast<double*>(value_changed[0].to_tensor().storage()->data())[2] = 5;
  EXPECT_NE(sample_key(value_changed), sample_key(sample));

  const Tensor other = from_vector<double>({1, 2, 3, 4}, {4}).as_strided(two, two, 0);
  const Stack shared{IValue(view), IValue(view)}, separate{IValue(view), IValue(other)};
  EXPECT_EQ(describe(shared), describe(separate));
  EXPECT_NE(sample_key(shared), sample_key(separate)) << "one storage or two";
}

TEST(FindFailure, ShrinksForEverySeed) {
  ScopedEnv no_override("OPCONFORM_SEED", std::nullopt);
  auto schema = parse_schema("test::negate(Tensor x) -> Tensor");
  for (uint64_t seed : {1u, 7u, 2024u, 31337u}) {
    auto failure = find_failure(schema, InputConstraints{}, "test::negate", stride_property, float64_spec(seed));
    ASSERT_TRUE(failure.has_value()) << seed;
    const Tensor& x = failure->minimal.args[0].to_tensor();
    EXPECT_EQ(x.numel(), 2) << seed << ": " << failure->minimal.description;
    EXPECT_FALSE(x.is_contiguous()) << seed << ": " << failure->minimal.description;
  }
}

TEST(FindFailure, ReplayWithTheReportedSeedGivesTheSameMinimalSample) {
  auto schema = parse_schema("test::negate(Tensor x) -> Tensor");
  GenerateSpec random_seed = float64_spec(0);  // a random seed, reported in the failure
  auto failure = find_failure(schema, InputConstraints{}, "test::negate", stride_property, random_seed);
  ASSERT_TRUE(failure.has_value());
  ASSERT_NE(failure->seed, 0u);
  // What the replay line does: the same search under OPCONFORM_SEED.
  ScopedEnv env("OPCONFORM_SEED", std::to_string(failure->seed));
  auto replayed = find_failure(schema, InputConstraints{}, "test::negate", stride_property, random_seed);
  ASSERT_TRUE(replayed.has_value());
  EXPECT_EQ(replayed->seed, failure->seed);
  EXPECT_EQ(replayed->minimal.description, failure->minimal.description);
  EXPECT_EQ(replayed->shrinks, failure->shrinks);
  const Tensor& a = failure->minimal.args[0].to_tensor();
  const Tensor& b = replayed->minimal.args[0].to_tensor();
  EXPECT_TRUE(std::ranges::equal(a.strides(), b.strides()));
  EXPECT_EQ(a.storage_offset(), b.storage_offset());
  EXPECT_TRUE(equal(a, b));
}

TEST(FindFailure, PassingPropertyFindsNothing) {
  auto schema = parse_schema("test::bin(Tensor a, Tensor b) -> Tensor");
  int runs = 0;
  auto failure = find_failure(schema, InputConstraints().relate(broadcastable("a", "b")), "test::bin",
                              [&](const Sample& s) {
                                ++runs;
                                return result("ok");
                              },
                              spec_with(50));
  EXPECT_FALSE(failure.has_value());
  EXPECT_EQ(runs, 50);
}

TEST(FindFailure, OnlyFailedAndCrashedCount) {
  auto schema = parse_schema("test::unary(Tensor x) -> Tensor");
  for (Outcome o : {Outcome::mistrusted, Outcome::skipped, Outcome::timed_out, Outcome::unsupported}) {
    auto failure = find_failure(schema, InputConstraints{}, "test::unary", [o](const Sample&) { return result("c", o); },
                                spec_with(20));
    EXPECT_FALSE(failure.has_value());
  }
  // The property writes its input; the minimal sample is made anew, untouched.
  auto crashed = find_failure(schema, InputConstraints{}, "test::unary",
                              [](const Sample& s) {
                                s.args[0].to_tensor().fill_(5);
                                return crashed_result();
                              },
                              spec_with(20));
  ASSERT_TRUE(crashed.has_value());
  // Failing everywhere shrinks to the simplest input: a 0-d zero.
  EXPECT_EQ(crashed->minimal.args[0].to_tensor().dim(), 0) << crashed->minimal.description;
  EXPECT_EQ(crashed->minimal.args[0].to_tensor().item().to_double(), 0.0);
}

TEST(FindFailure, ThrowingPropertyFailsWithTheException) {
  auto schema = parse_schema("test::unary(Tensor x) -> Tensor");
  auto failure = find_failure(schema, InputConstraints{}, "test::unary",
                              [](const Sample& s) -> CheckResult {
                                if (s.args[0].to_tensor().numel() > 3) throw std::runtime_error("too big");
                                return result("c");
                              },
                              spec_with(100));
  ASSERT_TRUE(failure.has_value());
  EXPECT_THAT(failure->result.message, HasSubstr("too big"));
  EXPECT_EQ(failure->minimal.args[0].to_tensor().numel(), 4) << failure->minimal.description;
}

TEST(FindFailure, UsesTheOpsConstraints) {
  OpData data;
  data.constraints.arg("x", values(std::nullopt, std::nullopt, /*positive=*/true));
  TestOp pos("gentest2::pos(Tensor x) -> Tensor", std::move(data));
  auto failure = find_failure(pos.op,
                              [](const Sample& s) {
                                CheckResult r = result("positive");
                                for (double v : s.args[0].to_tensor().to_vector<double>())
                                  if (!(v > 0) && !std::isnan(v)) r.outcome = Outcome::failed;  // NaN: allow_nan's business
                                return r;
                              },
                              spec_with(200));
  EXPECT_FALSE(failure.has_value()) << failure->minimal.description;
}

// ---- sample builders ----

// A view-like op: `size` must multiply to self's numel (one entry may be -1), which no
// InputConstraints can say. The builder regroups self's sizes: adjacent ones merged where a coin
// says so, sometimes a trailing 1, sometimes one entry -1.
const char* kViewSchema = "gentest_b::view(Tensor self, int[] size) -> Tensor";
Stack view_builder(SampleDraw& draw) {
  const auto shape = draw.shape(0, 3);
  Tensor self = draw.tensor(shape, draw.dtype());
  std::vector<int64_t> size;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d > 0 && draw.coin(40)) size.back() *= shape[d];
    else size.push_back(shape[d]);
  }
  if (draw.coin(20)) size.push_back(1);
  if (self.numel() > 0 && !size.empty() && draw.coin(20))
    size[draw.integer(0, static_cast<int64_t>(size.size()) - 1)] = -1;
  return Stack{IValue(self), IValue(size)};
}

// Whether `size` is a valid view size for `numel` elements.
bool valid_view_size(const std::vector<int64_t>& size, int64_t numel) {
  int64_t known = 1, inferred = 0;
  for (int64_t s : size) {
    if (s == -1) ++inferred;
    else if (s < 0) return false;
    else known *= s;
  }
  if (inferred == 0) return known == numel;
  return inferred == 1 && known > 0 && numel % known == 0;
}

CheckResult contiguity_property(const Sample& s) {
  CheckResult r = result("contiguous_only");
  if (!s.args[0].to_tensor().is_contiguous()) {
    r.outcome = Outcome::failed;
    r.message = "gentest_b::view: a non-contiguous self";
  }
  return r;
}

TEST(SampleBuilder, EverySampleIsValidAndCoverageIsKept) {
  TestOp declared(kViewSchema, view_builder);
  int non_contiguous = 0, empties = 0, scalars = 0, regrouped = 0, inferred = 0;
  for (const auto& s : generate_samples(declared.op, spec_with(200))) {
    ASSERT_EQ(s.args.size(), 2u);
    const Tensor& self = s.args[0].to_tensor();
    const auto size = s.args[1].to<std::vector<int64_t>>();
    EXPECT_TRUE(valid_view_size(size, self.numel())) << s.description;
    EXPECT_TRUE(self.dtype() == DType::Float32 || self.dtype() == DType::Float64);
    EXPECT_LE(self.dim(), 3);
    EXPECT_THAT(s.description, HasSubstr("self: "));
    EXPECT_THAT(s.description, HasSubstr("size: "));
    non_contiguous += !self.is_contiguous();
    empties += self.numel() == 0;
    scalars += self.dim() == 0;
    regrouped += !std::ranges::equal(size, self.sizes());
    inferred += std::ranges::count(size, -1);
  }
  EXPECT_GT(non_contiguous, 0);
  EXPECT_GT(empties, 0);
  EXPECT_GT(scalars, 0);
  EXPECT_GT(regrouped, 0);
  EXPECT_GT(inferred, 0);
}

TEST(SampleBuilder, SameSeedSameSamples) {
  ScopedEnv no_override("OPCONFORM_SEED", std::nullopt);
  TestOp declared(kViewSchema, view_builder);
  auto first = generate_samples(declared.op, spec_with(60, 99));
  auto second = generate_samples(declared.op, spec_with(60, 99));
  auto other = generate_samples(declared.op, spec_with(60, 100));
  ASSERT_EQ(first.size(), 60u);
  ASSERT_EQ(second.size(), 60u);
  bool differs = false;
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].description, second[i].description);
    const Tensor& x = first[i].args[0].to_tensor();
    const Tensor& y = second[i].args[0].to_tensor();
    EXPECT_TRUE(std::ranges::equal(x.strides(), y.strides()));
    EXPECT_EQ(x.storage_offset(), y.storage_offset());
    EXPECT_TRUE(equal(x, y));
    EXPECT_EQ(first[i].args[1].to<std::vector<int64_t>>(), second[i].args[1].to<std::vector<int64_t>>());
    differs = differs || first[i].description != other[i].description;
  }
  EXPECT_TRUE(differs);
}

TEST(SampleBuilder, FailureShrinksToTwoElementNonContiguousInput) {
  ScopedEnv no_override("OPCONFORM_SEED", std::nullopt);
  TestOp declared(kViewSchema, view_builder);
  for (uint64_t seed : {42u, 1u, 7u, 2024u}) {
    auto failure = find_failure(declared.op, contiguity_property, float64_spec(seed));
    ASSERT_TRUE(failure.has_value()) << seed;
    const Tensor& self = failure->minimal.args[0].to_tensor();
    const auto size = failure->minimal.args[1].to<std::vector<int64_t>>();
    EXPECT_EQ(self.numel(), 2) << seed << ": " << failure->minimal.description;
    EXPECT_FALSE(self.is_contiguous()) << seed << ": " << failure->minimal.description;
    // The size's draws shrink too: no merge, no trailing 1, no -1.
    EXPECT_TRUE(std::ranges::equal(size, self.sizes())) << seed << ": " << failure->minimal.description;
    EXPECT_EQ(failure->result.outcome, Outcome::failed);
    EXPECT_EQ(failure->result.minimal_input, failure->minimal.description);
    EXPECT_THAT(failure->replay, HasSubstr("OPCONFORM_SEED=" + std::to_string(seed) + " "));
    EXPECT_GT(failure->shrinks, 0);
  }
}

TEST(SampleBuilder, ReplayGivesTheSameMinimalSample) {
  TestOp declared(kViewSchema, view_builder);
  // The property writes its input: the minimal sample is rebuilt from the draws, untouched.
  auto writing_property = [](const Sample& s) {
    CheckResult r = contiguity_property(s);
    s.args[0].to_tensor().fill_(5);
    return r;
  };
  GenerateSpec random_seed = float64_spec(0);
  auto failure = find_failure(declared.op, writing_property, random_seed);
  ASSERT_TRUE(failure.has_value());
  ASSERT_NE(failure->seed, 0u);
  ScopedEnv env("OPCONFORM_SEED", std::to_string(failure->seed));
  auto replayed = find_failure(declared.op, writing_property, random_seed);
  ASSERT_TRUE(replayed.has_value());
  EXPECT_EQ(replayed->seed, failure->seed);
  EXPECT_EQ(replayed->minimal.description, failure->minimal.description);
  EXPECT_EQ(replayed->shrinks, failure->shrinks);
  const Tensor& a = failure->minimal.args[0].to_tensor();
  const Tensor& b = replayed->minimal.args[0].to_tensor();
  EXPECT_TRUE(std::ranges::equal(a.strides(), b.strides()));
  EXPECT_EQ(a.storage_offset(), b.storage_offset());
  EXPECT_TRUE(equal(a, b));
  for (double v : a.to_vector<double>()) EXPECT_NE(v, 5.0) << failure->minimal.description;
  EXPECT_EQ(failure->minimal.args[1].to<std::vector<int64_t>>(), replayed->minimal.args[1].to<std::vector<int64_t>>());
  EXPECT_EQ(contiguity_property(failure->minimal).outcome, Outcome::failed);
}

TEST(SampleBuilder, FailingEverywhereShrinksEveryDrawToItsSimplestValue) {
  TestOp declared("gentest_s::simple(Tensor x, int a, int b, int c, float r, bool coin) -> Tensor", [](SampleDraw& draw) {
    auto shape = draw.shape(0, 3);
    DType dt = draw.dtype();
    Tensor x = draw.tensor(shape, dt);
    int64_t a = draw.integer(-3, 5), b = draw.integer(2, 5), c = draw.integer(-9, -4);
    double r = draw.real(0.5, 2.0);
    bool coin = draw.coin(90);
    return Stack{IValue(x), IValue(a), IValue(b), IValue(c), IValue(r), IValue(coin)};
  });
  auto failure = find_failure(declared.op, [](const Sample&) { return crashed_result(); }, spec_with(20));
  ASSERT_TRUE(failure.has_value());
  const auto& args = failure->minimal.args;
  const Tensor& x = args[0].to_tensor();
  EXPECT_EQ(x.dim(), 0) << failure->minimal.description;
  EXPECT_EQ(x.dtype(), DType::Float32);  // the first of the default dtypes
  EXPECT_EQ(x.item().to_double(), 0.0);
  EXPECT_EQ(args[1].to_int(), 0);
  EXPECT_EQ(args[2].to_int(), 2);
  EXPECT_EQ(args[3].to_int(), -4);
  EXPECT_EQ(args[4].to_double(), 0.5);
  EXPECT_FALSE(args[5].to_bool());
}

// A sample lives on one device: a tensor the builder computed on the host (a mean, offsets)
// moves to the plan's device, with its layout (ATen's CUDA kernels refused such samples: "offsets is on cpu").
TEST(SampleBuilder, TensorsTheBuilderMadeOnTheHostMoveToTheSamplesDevice) {
  static opconform::testing::HostMemory memory;
  const Device dev(register_device_type("generate_test_device"), 0);
  set_allocator(dev.type, &memory);
  TestOp declared("gentest_m::f(Tensor x, Tensor mean, Tensor[] parts) -> Tensor", [](SampleDraw& draw) {
    Tensor x = draw.tensor(draw.shape(1, 2), draw.dtype());
    const std::vector<int64_t> size{1}, stride{2};
    Tensor mean = full({4}, 0.5).as_strided(size, stride, 1);  // made here, on the host, a view
    return Stack{IValue(x), IValue(mean), IValue(std::vector<Tensor>{full({2}, 1.0)})};
  });
  GenerateSpec spec = spec_with(5);
  spec.devices = {dev};
  for (const auto& s : generate_samples(declared.op, spec)) {
    EXPECT_EQ(s.args[0].to_tensor().device(), dev) << s.description;
    EXPECT_EQ(s.args[1].to_tensor().device(), dev) << s.description;
    EXPECT_EQ(s.args[1].to_tensor().item().to_double(), 0.5);
    EXPECT_EQ(s.args[1].to_tensor().stride(0), 2) << "the layout is kept (Note [A copy on another device keeps the layout])";
    EXPECT_EQ(s.args[1].to_tensor().storage_offset(), 1);
    EXPECT_EQ(s.args[2].to_tensor_list().at(0).device(), dev) << s.description;
  }
}

TEST(SampleBuilder, DrawsFollowTheSpec) {
  GenerateSpec spec = spec_with(150);
  spec.include_non_contiguous = spec.include_empty = spec.include_scalars = spec.include_special_values = false;
  spec.max_rank = 2;
  spec.max_dim_size = 3;
  spec.large_percent = 0;  // the caps of the ordinary tier (generate_coverage_test covers the large one)
  spec.dtypes = {DType::Float64};
  TestOp declared("gentest_d::f(Tensor x, Tensor y, Tensor z) -> Tensor", [](SampleDraw& draw) {
    auto shape = draw.shape(0, 4);
    Tensor x = draw.tensor(shape, draw.dtype());
    auto big = draw.shape(3, 5, 2);  // min_rank and min_size win over the spec's caps
    Tensor y = draw.tensor(big, draw.dtype({DType::Int32, DType::Float64}));
    Tensor z = draw.tensor({2}, draw.dtype({DType::Int32}));  // not in the spec: allowed itself
    return Stack{IValue(x), IValue(y), IValue(z)};
  });
  for (const auto& s : generate_samples(declared.op, spec)) {
    const Tensor& x = s.args[0].to_tensor();
    const Tensor& y = s.args[1].to_tensor();
    EXPECT_TRUE(x.dim() >= 1 && x.dim() <= 2) << s.description;
    for (int64_t d : x.sizes()) EXPECT_TRUE(d >= 1 && d <= 3) << s.description;
    EXPECT_TRUE(x.is_contiguous()) << s.description;
    EXPECT_EQ(x.dtype(), DType::Float64);
    for (double v : x.to_vector<double>()) EXPECT_TRUE(std::isfinite(v) && std::abs(v) <= 10) << s.description;
    EXPECT_EQ(y.dim(), 3) << s.description;
    for (int64_t d : y.sizes()) EXPECT_TRUE(d >= 2 && d <= 3) << s.description;
    EXPECT_EQ(y.dtype(), DType::Float64);
    EXPECT_EQ(s.args[2].to_tensor().dtype(), DType::Int32);
  }
}

TEST(SampleBuilder, IndexTensorsHoldValidIndicesUpToTheLast) {
  // gather(self, dim, index): index values must be indices of self's dim.
  TestOp declared("gentest_g::gather(Tensor self, int dim, Tensor index) -> Tensor", [](SampleDraw& draw) {
    auto shape = draw.shape(1, 3, 1, /*allow_empty=*/false);
    Tensor self = draw.tensor(shape, draw.dtype());
    const int64_t dim = draw.integer(0, static_cast<int64_t>(shape.size()) - 1);
    auto index_sizes = shape;
    index_sizes[dim] = draw.integer(0, 4);
    Tensor index = draw.index_tensor(index_sizes, 0, shape[dim] - 1);
    return Stack{IValue(self), IValue(dim), IValue(index)};
  });
  int last_index_used = 0, non_contiguous = 0;
  for (const auto& s : generate_samples(declared.op, spec_with(200))) {
    const Tensor& self = s.args[0].to_tensor();
    const int64_t dim = s.args[1].to_int();
    const Tensor& index = s.args[2].to_tensor();
    EXPECT_EQ(index.dtype(), DType::Int64);
    const auto values = index.to_vector<double>();
    for (double v : values) EXPECT_TRUE(v >= 0 && v < self.size(dim)) << s.description;
    last_index_used += self.size(dim) > 1 && std::ranges::count(values, static_cast<double>(self.size(dim) - 1)) > 0;
    non_contiguous += !index.is_contiguous();
  }
  EXPECT_GT(last_index_used, 20);
  EXPECT_GT(non_contiguous, 0);
}

TEST(SampleBuilder, EachRegistryHasItsOwnDataForOneOpName) {
  auto marker = [](int64_t k) {
    return [k](SampleDraw& draw) { return Stack{IValue(draw.tensor(draw.shape(0, 2), draw.dtype())), IValue(k)}; };
  };
  const char* schema_text = "gentest_o::f(Tensor x, int k) -> Tensor";
  TestOp one(schema_text, marker(1));
  TestOp two(schema_text, marker(2));
  auto k_of = [&](const OperatorHandle& op) {
    std::set<int64_t> ks;
    for (const auto& s : generate_samples(op, spec_with(10))) ks.insert(s.args[1].to_int());
    return ks;
  };
  EXPECT_EQ(k_of(one.op), std::set<int64_t>{1});
  EXPECT_EQ(k_of(two.op), std::set<int64_t>{2});
  EXPECT_EQ(sample_gen(two.op, spec_with(1))(rc::Random(5), 50).value().args[1].to_int(), 2);
  // find_failure by op uses its builder; with explicit constraints it does not.
  auto k_is_2 = [](const Sample& s) { return result("k", s.args[1].to_int() == 2 ? Outcome::failed : Outcome::passed); };
  EXPECT_TRUE(find_failure(two.op, k_is_2, spec_with(20)).has_value());
  EXPECT_FALSE(find_failure(one.op, k_is_2, spec_with(20)).has_value());
  InputConstraints k_not_2;
  k_not_2.arg("k", values(3, 9));
  EXPECT_FALSE(find_failure(two.op.schema(), k_not_2, two.op.name(), k_is_2, spec_with(20)).has_value());
  // Replacing the data replaces the builder; an op without one is generated from its schema
  // (here: k in [0, max_dim_size]).
  two.registry.set_op_data(two.op.name(), TestOp::with_builder(marker(3)));
  EXPECT_EQ(k_of(two.op), std::set<int64_t>{3});
  TestOp plain("gentest_o::h(Tensor x, int k) -> Tensor", OpData{});
  for (const auto& s : generate_samples(plain.op, spec_with(20)))
    EXPECT_TRUE(s.args[1].to_int() >= 0 && s.args[1].to_int() <= 5);
}

TEST(SampleBuilder, BuilderErrorsNameTheOp) {
  const char* kBadSchema = "gentest_t::bad(Tensor x, int k) -> Tensor";
  auto always_passes = [](const Sample&) { return result("ok"); };
  {
    // Throws only for some draws: mid-run, inside RapidCheck.
    TestOp declared(kBadSchema, [](SampleDraw& draw) -> Stack {
      const int64_t k = draw.integer(0, 9);
      if (k > 6) throw Error(ErrorCode::kInvalidArgument, "no valid input for k > 6");
      return Stack{IValue(draw.tensor({2}, DType::Float32)), IValue(k)};
    });
    for (auto run : std::vector<std::function<void()>>{
             [&] { (void)generate_samples(declared.op, spec_with(100)); },
             [&] { (void)find_failure(declared.op, always_passes, spec_with(100)); }}) {
      Error e = testing::error_of(run);
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr("gentest_t::bad"));
      EXPECT_THAT(e.what(), HasSubstr("no valid input for k > 6"));
    }
  }
  {
    TestOp declared(kBadSchema, [](SampleDraw& draw) { return Stack{IValue(draw.tensor({2}, DType::Float32))}; });
    auto message = testing::error_message([&] { (void)find_failure(declared.op, always_passes, spec_with(10)); });
    EXPECT_THAT(message, HasSubstr("gentest_t::bad"));
    EXPECT_THAT(message, HasSubstr("returned 1 arguments where the schema has 2"));
  }
  {
    TestOp declared(kBadSchema, [](SampleDraw& draw) {
      return Stack{IValue(draw.index_tensor({3}, 2, 1)), IValue(draw.integer(3, 1))};
    });
    auto message = testing::error_message([&] { (void)generate_samples(declared.op, spec_with(10)); });
    EXPECT_THAT(message, HasSubstr("gentest_t::bad"));
    EXPECT_THAT(message, HasSubstr("index_tensor"));
  }
  {
    // A builder that is not a pure function of its draws is caught when a sample is replayed.
    auto calls = std::make_shared<int>(0);
    TestOp declared(kBadSchema, [calls](SampleDraw& draw) {
      Stack args{IValue(draw.tensor({2}, DType::Float32)), IValue(int64_t{0})};
      if (++*calls % 2 == 0) (void)draw.coin();
      return args;
    });
    auto message = testing::error_message([&] { (void)generate_samples(declared.op, spec_with(10)); });
    EXPECT_THAT(message, HasSubstr("gentest_t::bad"));
    EXPECT_THAT(message, HasSubstr("pure function of its draws"));
  }
}

}  // namespace
}  // namespace opconform::conformance
