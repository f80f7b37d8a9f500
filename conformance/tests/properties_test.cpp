// The reference-free properties on correct operators (pass) and on seeded bugs (each flagged by
// the check that must flag it, with a message that says where).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/generator.h"
#include "opconform/core/autocast.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/vmap.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
using ::opconform::conformance::FindingKind;
using opconform::testing::map;

Tensor values(std::vector<int64_t> sizes, DType dtype = DType::Float32, double start = 0.25) {
  Tensor t = opconform::empty(sizes, TensorOptions(DType::Float64));
  double* p = t.mutable_data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = start + 0.37 * static_cast<double>(i) - 0.01 * static_cast<double>(i * i % 7);
  return t.to(dtype);
}

double twice(double v) { return 2 * v; }

class PropertiesTest : public ::testing::Test {
 protected:
  CustomOpOptions opts(std::vector<Tag> tags = {}) {
    CustomOpOptions o;
    o.registry = &registry;
    o.tags = std::move(tags);
    return o;
  }
  CheckResult run(std::unique_ptr<Check> check, const CustomOpDef& op, Stack args) {
    Sample sample(std::move(args));
    return check->run({op.handle(), sample, tolerance, registry});
  }
  // A correct elementwise op: 2x in the input's dtype (map reads through strides).
  CustomOpDef good(const std::string& name = "t::twice") {
    return custom_op(name, [](const Tensor& x) { return map(x, twice); }, opts({Tag::pointwise}), {"x"});
  }

  Registry registry;
  ToleranceSpec tolerance;
};

// ---- stride_invariance ----

TEST_F(PropertiesTest, StrideInvariancePassesForAKernelThatReadsThroughStrides) {
  auto op = good();
  CheckResult r = run(detail::make_stride_invariance(), op, {IValue(values({3, 4}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(r.check, "stride_invariance");
}

// Note [Layout queries]: an op whose result is its input's layout (the first stride here) is
// flagged as a stride bug until its data says it is a layout query; then the check skips it.
TEST_F(PropertiesTest, StrideInvarianceLeavesLayoutQueriesAlone) {
  auto op = custom_op("t::first_stride", [](const Tensor& x) { return opconform::full({1}, static_cast<double>(x.stride(0)), TensorOptions(DType::Float32)); },
                      opts(), {"x"});
  EXPECT_EQ(run(detail::make_stride_invariance(), op, {IValue(values({3, 4}))}).outcome, Outcome::failed);
  OpData data;
  data.layout_query = true;
  registry.set_op_data("t::first_stride", data);
  CheckResult r = run(detail::make_stride_invariance(), op, {IValue(values({3, 4}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("returns its input's layout"));
}

TEST_F(PropertiesTest, StrideInvarianceFlagsAKernelThatAssumesContiguousData) {
  auto op = custom_op("t::twice_flat", [](const Tensor& x) {
    Tensor out = opconform::empty_like(x);
    const float* in = x.const_data_ptr<float>();  // bug: ignores strides
    float* o = out.mutable_data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = 2 * in[i];
    return out;
  }, opts(), {"x"});
  CheckResult r = run(detail::make_stride_invariance(), op, {IValue(values({3, 4}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("'t::twice_flat'"));
  EXPECT_THAT(r.message, HasSubstr("argument 'x' as a transposed view"));
  EXPECT_THAT(r.message, HasSubstr("strides"));
  // The same kernel is right on contiguous data: the other properties pass.
  EXPECT_EQ(run(detail::make_determinism(), op, {IValue(values({3, 4}))}).outcome, Outcome::passed);
}

// ---- determinism ----

TEST_F(PropertiesTest, DeterminismPassesAndFlagsAKernelWithACounter) {
  auto op = good();
  EXPECT_EQ(run(detail::make_determinism(), op, {IValue(values({4}))}).outcome, Outcome::passed);
  auto calls = std::make_shared<int>(0);
  auto drifting = custom_op("t::drifting", [calls](const Tensor& x) {
    double bias = 1e-6 * (*calls)++;
    return map(x, [bias](double v) { return 2 * v + bias; });
  }, opts(), {"x"});
  CheckResult r = run(detail::make_determinism(), drifting, {IValue(values({4}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("two runs on equal inputs gave different results (bitwise)"));
  EXPECT_THAT(r.message, HasSubstr("output 0"));
}

TEST_F(PropertiesTest, DeterminismHonoursTheNondeterministicTags) {
  auto calls = std::make_shared<int>(0);
  auto kernel = [calls](const Tensor& x) {
    double bias = 1e-12 * (*calls)++;  // last-bits noise, as from atomics
    return map(x, [bias](double v) { return 2 * v + bias; });
  };
  auto bitwise = custom_op("t::atomic_sum", kernel, opts({Tag::nondeterministic_bitwise}), {"x"});
  EXPECT_EQ(run(detail::make_determinism(), bitwise, {IValue(values({4}, DType::Float64))}).outcome, Outcome::passed);
  // A random op runs both times from one generator state: drawing from the generator repeats its
  // draws; drawing from anything else (here, a call counter) does not, and the message says why.
  auto drawing = custom_op("t::random", [](const Tensor& x) {
    const double u = default_generator().uniform();
    return map(x, [u](double v) { return v + u; });
  }, opts({Tag::nondeterministic_seeded}), {"x"});
  EXPECT_EQ(run(detail::make_determinism(), drawing, {IValue(values({4}, DType::Float64))}).outcome, Outcome::passed);
  auto unseeded = custom_op("t::unseeded", [calls](const Tensor& x) {
    const double bias = 1e-3 * (*calls)++;
    return map(x, [bias](double v) { return v + bias; });
  }, opts({Tag::nondeterministic_seeded}), {"x"});
  const CheckResult r = run(detail::make_determinism(), unseeded, {IValue(values({4}, DType::Float64))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("both runs started from one generator state"));
}

// ---- dtype_consistency ----

TEST_F(PropertiesTest, DtypeConsistencyPassesAndFlagsHalfPrecisionInternals) {
  auto op = good();
  EXPECT_EQ(run(detail::make_dtype_consistency(), op, {IValue(values({5}))}).outcome, Outcome::passed);
  auto lossy = custom_op("t::twice_in_half", [](const Tensor& x) {
    // bug: float32 inputs computed in float16
    Tensor h = x.dtype() == DType::Float32 ? x.to(DType::Float16) : x;
    return map(h, twice).to(x.dtype());
  }, opts(), {"x"});
  CheckResult r = run(detail::make_dtype_consistency(), lossy, {IValue(values({5}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 in float32 differs from the float64 run"));
  ASSERT_TRUE(r.cause.has_value());
  EXPECT_EQ(r.cause->kind, FindingKind::rounding_bias);
  EXPECT_EQ(run(detail::make_dtype_consistency(), op, {IValue(values({5}, DType::Float64))}).outcome, Outcome::skipped);
}

TEST_F(PropertiesTest, DtypeConsistencySkipsOpsThatRejectFloat64) {
  auto op = custom_op("t::float32_only", [](const Tensor& x) {
    OPCONFORM_CHECK(x.dtype() == DType::Float32, ErrorCode::kInvalidArgument, "t::float32_only: x must be float32");
    return map(x, twice);
  }, opts(), {"x"});
  CheckResult r = run(detail::make_dtype_consistency(), op, {IValue(values({3}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("rejects float64"));
}

// ---- edge_shapes ----

TEST_F(PropertiesTest, EdgeShapesPassesForACorrectPointwiseOp) {
  auto op = good();
  CheckResult r = run(detail::make_edge_shapes(), op, {IValue(values({2, 3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(PropertiesTest, EdgeShapesFlagsAWrongResultOnEmptyInput) {
  // bug: an empty input gives a one-element result (no crash, just wrong).
  auto op = custom_op("t::twice_or_one", [](const Tensor& x) {
    return x.numel() == 0 ? opconform::zeros({1}, x.options()) : map(x, twice);
  }, opts({Tag::pointwise}), {"x"});
  CheckResult r = run(detail::make_edge_shapes(), op, {IValue(values({2, 3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("zero-size"));
  EXPECT_THAT(r.message, HasSubstr("has shape [1] but a pointwise op must return the inputs' broadcast shape [0, 3]"));
}

TEST_F(PropertiesTest, EdgeShapesFlagsANonOpconformExceptionAndAcceptsAClearError) {
  auto throws_std = custom_op("t::first", [](const Tensor& x) {
    return scalar_tensor(Scalar(x.to_vector<float>().at(0)));  // std::out_of_range when empty
  }, opts(), {"x"});
  CheckResult r = run(detail::make_edge_shapes(), throws_std, {IValue(values({2, 3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("not an opconform::Error"));

  auto clear = custom_op("t::first_checked", [](const Tensor& x) {
    OPCONFORM_CHECK(x.numel() > 0, ErrorCode::kInvalidArgument, "t::first_checked: 'x' must not be empty");
    return scalar_tensor(Scalar(x.to_vector<float>().at(0)));
  }, opts(), {"x"});
  EXPECT_EQ(run(detail::make_edge_shapes(), clear, {IValue(values({2, 3}))}).outcome, Outcome::passed);
}

TEST_F(PropertiesTest, EdgeShapesAcceptsAClearErrorWhenEdgeShapesDoNotBroadcast) {
  // Zero-size edges of [2, 3] and [3] are [0, 0]... and [0]: they do not broadcast, and a
  // pointwise op that says so with an opconform::Error is right.
  auto add = custom_op("t::add", [](const Tensor& a, const Tensor& b) {
    auto shape = broadcast_shapes(a.sizes(), b.sizes());  // throws opconform::Error when they do not
    return opconform::zeros(shape, a.options());
  }, opts({Tag::pointwise}), {"a", "b"});
  CheckResult r = run(detail::make_edge_shapes(), add, {IValue(values({2, 3})), IValue(values({3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

// Note [Ops that address storage]: as_strided reads the storage, so an offset view of the same
// values is another input to it: flagged until its data says so, then skipped. An argument named
// `stride` (convolution's, pooling's) says nothing of the kind: such an op is checked.
TEST_F(PropertiesTest, StrideInvarianceSkipsOnlyOpsDeclaredToAddressStorage) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("strided(Tensor(a) self, int[] size, int[] stride) -> Tensor(a)");
  lib.impl("strided", [](const Tensor& x, const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
    return x.as_strided(size, stride);
  }, DispatchKey::CompositeExplicitAutograd);
  lib.define("every_other(Tensor self, int[] stride) -> Tensor");
  lib.impl("every_other", [](const Tensor& x, const std::vector<int64_t>& stride) {
    return x.slice(0, 0, x.size(0), stride.at(0)).clone();
  }, DispatchKey::CompositeExplicitAutograd);
  auto run_on = [&](const std::string& op, Stack args) {
    return detail::make_stride_invariance()->run({registry.get(op), Sample(std::move(args)), tolerance, registry});
  };
  const Stack strided_args{IValue(values({4})), IValue(std::vector<int64_t>{2}), IValue(std::vector<int64_t>{2})};
  EXPECT_EQ(run_on("t::strided", strided_args).outcome, Outcome::failed);
  OpData data;
  data.addresses_storage = true;
  registry.set_op_data("t::strided", data);
  CheckResult r = run_on("t::strided", strided_args);
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("addresses its input's storage"));
  r = run_on("t::every_other", {IValue(values({6})), IValue(std::vector<int64_t>{2})});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

// ---- vmap_consistency ----

TEST_F(PropertiesTest, VmapConsistencyWithTheFallbackAndWithARule) {
  auto op = good();
  CheckResult r = run(detail::make_vmap_consistency(), op, {IValue(values({2, 3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_THAT(r.message, HasSubstr("fallback"));  // installed for the check's duration only
  EXPECT_FALSE(op.handle().kernel_for(DispatchKey::Batched).valid());

  auto ruled = good("t::twice_ruled");
  ruled.register_vmap([](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    return std::make_pair(Stack{IValue(map(inputs[0].to_tensor(), twice))}, std::vector<std::optional<int64_t>>{in_dims[0]});
  });
  CheckResult rr = run(detail::make_vmap_consistency(), ruled, {IValue(values({2, 3}))});
  EXPECT_EQ(rr.outcome, Outcome::passed) << rr.message;
  EXPECT_THAT(rr.message, HasSubstr("registered vmap rule"));
}

TEST_F(PropertiesTest, VmapConsistencyFlagsAWrongRule) {
  auto op = good("t::twice_bad_rule");
  op.register_vmap([](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    // bug: uses batch element 0 for every element
    Tensor x = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, 3);
    Tensor first = map(x.select(0, 0), twice);
    return std::make_pair(Stack{IValue(first)}, std::vector<std::optional<int64_t>>{std::nullopt});
  });
  CheckResult r = run(detail::make_vmap_consistency(), op, {IValue(values({2, 3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("using the registered vmap rule"));
  EXPECT_THAT(r.message, HasSubstr("batch element 1"));
}

TEST_F(PropertiesTest, VmapConsistencySkipsOpsWithoutTensorArguments) {
  auto op = custom_op("t::ones", [](int64_t n) { return opconform::ones({n}); }, opts(), {"n"});
  EXPECT_EQ(run(detail::make_vmap_consistency(), op, {IValue(int64_t{3})}).outcome, Outcome::skipped);
}

// ---- autocast_consistency ----

TEST_F(PropertiesTest, AutocastConsistencyPassesForRegisterAutocast) {
  auto op = good();
  EXPECT_EQ(run(detail::make_autocast_consistency(), op, {IValue(values({3}))}).outcome, Outcome::skipped);
  op.register_autocast(DeviceType::CPU, DType::BFloat16);  // not the guard's float16: observed
  CheckResult r = run(detail::make_autocast_consistency(), op, {IValue(values({3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_THAT(r.message, HasSubstr("bfloat16"));
}

TEST_F(PropertiesTest, AutocastConsistencyFlagsARuleThatCastsFloat64) {
  auto op = good();
  // bug: casts every floating tensor, float64 included, then runs the op below autocast.
  auto rule = registry.impl("t::twice", DispatchKey::AutocastCPU, KernelFunction::from_boxed(
      [](const OperatorHandle& handle, DispatchKeySet keys, Stack& stack) {
        for (auto& v : stack) {
          if (v.is_tensor() && is_floating(v.to_tensor().dtype())) v = IValue(v.to_tensor().to(DType::Float16));
        }
        handle.redispatch_boxed(keys.after(DispatchKey::AutocastCPU), stack);
      }), RegistrationSource::here());
  CheckResult r = run(detail::make_autocast_consistency(), op, {IValue(values({3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("float64 inputs changed"));
}

// ---- error_inputs ----

TEST_F(PropertiesTest, ErrorInputsPassesForAnOpThatValidatesItsArguments) {
  // Wrong types and missing arguments are refused by the dispatcher; the meta tensor by custom_op
  // (no fake kernel: Note [Meta calls of custom ops]).
  auto op = custom_op("t::checked", [](const Tensor& x) {
    OPCONFORM_CHECK(!x.is_meta_data(), ErrorCode::kInvalidArgument, "t::checked: 'x' must hold data");
    return map(x, twice);
  }, opts(), {"x"});
  CheckResult r = run(detail::make_error_inputs(), op, {IValue(values({3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(PropertiesTest, ErrorInputsAcceptsAnEmptyMetaResultForAnEmptyMetaInput) {
  // A view of an empty meta tensor is an empty meta tensor: a meta kernel's answer, not silence.
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("alias_of(Tensor(a) x) -> Tensor(a)");
  lib.impl("alias_of", [](const Tensor& x) { return x.view(x.sizes()); }, DispatchKey::CompositeExplicitAutograd);
  Sample sample({IValue(values({0, 2}))});
  CheckResult r = detail::make_error_inputs()->run({registry.get("t::alias_of"), sample, tolerance, registry});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(PropertiesTest, ErrorInputsDoesNotCallATensorForAnOptionalTensorWrong) {
  // `Tensor? y` given None: a tensor there is valid input, so the wrong kind is a string.
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("maybe_add(Tensor x, Tensor? y) -> Tensor");
  lib.impl("maybe_add", [](const Tensor& x, const std::optional<Tensor>& y) {
    OPCONFORM_CHECK(!x.is_meta_data() && (!y || !y->is_meta_data()), ErrorCode::kInvalidArgument,
                    "t::maybe_add: 'x' and 'y' must hold data");
    return y ? map(x, twice) : x.clone();
  }, DispatchKey::CPU);
  Sample sample({IValue(values({3})), IValue()});
  CheckResult r = detail::make_error_inputs()->run({registry.get("t::maybe_add"), sample, tolerance, registry});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(PropertiesTest, ErrorInputsAcceptsACoreErrorTheDispatcherNames) {
  // A kernel that reads a meta tensor's data fails deep inside core ("copy_: cannot copy from a
  // tensor on meta ..."); the dispatcher adds "while calling '<op>'", so the error names the op.
  auto op = good();
  CheckResult r = run(detail::make_error_inputs(), op, {IValue(values({3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(PropertiesTest, ErrorInputsFlagsAStdExceptionAndASilentResult) {
  // Kernels for every backend (a custom_op's meta call reaches its fake kernel instead: Note
  // [Meta calls of custom ops]), so the meta tensor reaches the kernel under test.
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("std_throw(Tensor x) -> Tensor");
  lib.impl("std_throw", [](const Tensor& x) {
    if (x.is_meta_data()) throw std::invalid_argument("no data");
    return map(x, twice);
  }, DispatchKey::CompositeExplicitAutograd);
  Sample sample({IValue(values({3}))});
  CheckResult r = detail::make_error_inputs()->run({registry.get("t::std_throw"), sample, tolerance, registry});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("meta tensor"));
  EXPECT_THAT(r.message, HasSubstr("not an opconform::Error"));

  lib.define("silent(Tensor x) -> Tensor");
  lib.impl("silent", [](const Tensor& x) { return opconform::zeros(x.sizes()); }, DispatchKey::CompositeExplicitAutograd);
  CheckResult s = detail::make_error_inputs()->run({registry.get("t::silent"), sample, tolerance, registry});
  ASSERT_EQ(s.outcome, Outcome::failed);
  EXPECT_THAT(s.message, HasSubstr("returned a result instead of an opconform::Error"));
}

TEST_F(PropertiesTest, ErrorInputsSendsACustomOpsMetaCallToItsFakeKernel) {
  // Before custom_op sent meta calls to the fake kernel, the meta case reached the function.
  auto calls = std::make_shared<int>(0);
  auto op = custom_op("t::twice_counted", [calls](const Tensor& x) {
    ++*calls;
    return map(x, twice);
  }, opts(), {"x"});
  op.register_fake([](const Tensor& x) { return empty_like(x); });
  CheckResult r = run(detail::make_error_inputs(), op, {IValue(values({3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(*calls, 0);  // the other cases are refused by the dispatcher before any kernel
}

}  // namespace
}  // namespace opconform::conformance
