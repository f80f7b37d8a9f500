// Gradients as a backward returns them (Note [Gradients as returned]) and Tensor[] gradients
// (Note [Tensor[] gradients]): seeded backward bugs that the engine's conversion would hide or
// that it refuses, each flagged by gradcheck with the cause; correct twins pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "opconform/conformance/gradcheck.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using autograd::AutogradContext;
using ::testing::HasSubstr;
using opconform::testing::map;
using opconform::testing::zip;

Tensor values(std::vector<int64_t> sizes, DType dtype = DType::Float64) {
  Tensor t = empty(sizes, TensorOptions(DType::Float64));
  double* p = t.mutable_data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 0.3 + 0.41 * static_cast<double>(i % 13) - 0.07 * static_cast<double>(i % 4);
  return t.to(dtype);
}

Tensor leaf(std::vector<int64_t> sizes) { return values(std::move(sizes)).set_requires_grad(true); }

void save_x(AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.save_for_backward({inputs[0].to_tensor()}); }

class ReturnedGradientsTest : public ::testing::Test {
 protected:
  CustomOpOptions opts() {
    CustomOpOptions o;
    o.registry = &registry;
    return o;
  }
  // sin(x), with a backward that turns the right gradient cos(x) * g into whatever `shape` says.
  CustomOpDef sin_op(const std::string& name, std::function<Tensor(Tensor right, const Tensor& x)> shape) {
    auto op = custom_op(name, [](const Tensor& x) { return map(x, [](double v) { return std::sin(v); }); }, opts(), {"x"});
    op.register_autograd(
        [shape](AutogradContext& ctx, const std::vector<Tensor>& g) {
          const Tensor x = ctx.saved_tensors()[0];
          return std::vector<Tensor>{shape(zip(g[0], x, [](double gv, double xv) { return gv * std::cos(xv); }), x)};
        },
        save_x);
    return op;
  }
  Registry registry;
};

TEST_F(ReturnedGradientsTest, TheRightGradientPasses) {
  auto op = sin_op("t::sin_right", [](Tensor right, const Tensor&) { return right; });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({5}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(ReturnedGradientsTest, AGradientOfAnotherDtypeIsAFindingThoughTheEngineConvertsIt) {
  // SEEDED BUG: the formula computes in float32; within gradcheck's tolerance once converted.
  auto op = sin_op("t::sin_float32_grad", [](Tensor right, const Tensor&) { return right.to(DType::Float32); });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({5}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("the backward of 't::sin_float32_grad' returned a float32 gradient for argument 'x', which is float64"));
}

TEST_F(ReturnedGradientsTest, AComplexGradientForARealInputIsAFinding) {
  // Beyond the list in the issue: the conversion drops an imaginary part of zero here, silently.
  auto op = sin_op("t::sin_complex_grad", [](Tensor right, const Tensor&) { return right.to(DType::Complex128); });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({4}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("returned a complex128 gradient for argument 'x', which is float64"));
}

TEST_F(ReturnedGradientsTest, AGradientOfTheWrongShapeNamesTheShapes) {
  auto op = sin_op("t::sin_summed_grad", [](Tensor right, const Tensor&) {
    return full({1}, Scalar(right.to_vector<double>().front()), TensorOptions(DType::Float64));
  });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("returned a gradient for argument 'x' of shape [1], but the argument has shape [3]"));
}

TEST_F(ReturnedGradientsTest, AGradientOnTheWrongDeviceNamesTheDevices) {
  auto op = sin_op("t::sin_meta_grad", [](Tensor right, const Tensor&) { return empty(right.sizes(), TensorOptions(DType::Float64, Device::meta())); });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("returned a gradient for argument 'x' on meta, but the argument is on cpu"));
}

TEST(GradientAuditTest, APromotedGradientPassedOnIsNotAFinding) {
  // add(float32, float64): the float64 gradient of the result goes to both; PyTorch's formula
  // relies on the engine's conversion for the float32 input, and so may ours.
  Registry registry;
  CustomOpOptions o;
  o.registry = &registry;
  auto add = custom_op("t::add_promoting", [](const Tensor& a, const Tensor& b) { return zip(a.to(DType::Float64), b, std::plus<>()); },
                       o, {"a", "b"});
  bool wrong = false;
  add.register_autograd([&wrong](AutogradContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0], wrong ? g[0].to(DType::Float32) : g[0]};  // the bug: b's gradient in float32
  });
  Tensor a = values({3}, DType::Float32).set_requires_grad(true), b = values({3}).set_requires_grad(true);
  const Tensor ones = full({3}, Scalar(1.0), TensorOptions(DType::Float64));
  {
    autograd::GradientAudit audit;
    auto grads = autograd::grad({add(a, b)}, {a, b}, {ones});
    EXPECT_EQ(grads.at(0).dtype(), DType::Float32);  // converted, as in PyTorch
    EXPECT_TRUE(audit.conversions().empty());
  }
  wrong = true;
  autograd::GradientAudit audit;
  autograd::grad({add(a, b)}, {a, b}, {ones});
  ASSERT_EQ(audit.conversions().size(), 1u);
  EXPECT_EQ(audit.conversions()[0].argument, "b");
  EXPECT_EQ(audit.conversions()[0].returned, DType::Float32);
  EXPECT_EQ(audit.conversions()[0].expected, DType::Float64);
}

// ---- Tensor[] gradients ----

// sum_i w_i * xs[i] with w_i = i + 1; the backward returns one gradient per element, flattened
// in the list's place. `bug` changes element 1's.
CustomOpDef weighted_sum(Registry& registry, const std::string& name, int bug) {
  CustomOpOptions o;
  o.registry = &registry;
  auto op = custom_op(name, std::function<Tensor(const std::vector<Tensor>&, double)>([](const std::vector<Tensor>& xs, double scale) {
                        Tensor acc = map(xs.at(0), [](double) { return 0.0; });
                        for (size_t i = 0; i < xs.size(); ++i) {
                          const double w = static_cast<double>(i + 1) * scale;
                          acc = zip(acc, xs[i], [w](double s, double v) { return s + w * v; });
                        }
                        return acc;
                      }),
                      o, {"xs", "scale"});
  op.register_autograd(
      [bug](AutogradContext& ctx, const std::vector<Tensor>& g) {
        const size_t n = ctx.saved_tensors().size();
        const double scale = ctx.get("scale").to_double();
        std::vector<Tensor> grads;
        for (size_t i = 0; i < n; ++i) {
          const double w = static_cast<double>(i + 1) * scale * (bug == 1 && i == 1 ? 0.5 : 1.0);
          grads.push_back(map(g[0], [w](double gv) { return w * gv; }));
        }
        if (bug == 2) return std::vector<Tensor>{grads[0], Tensor()};  // one gradient for the whole list
        grads.push_back(Tensor());  // scale: a float, no gradient
        return grads;
      },
      [](AutogradContext& ctx, const Stack& inputs, const Stack&) {
        ctx.save_for_backward(inputs[0].to_tensor_list());
        ctx.set("scale", inputs[1]);
      });
  return op;
}

TEST(TensorListGradients, APerElementBackwardPassesGradcheck) {
  Registry registry;
  auto op = weighted_sum(registry, "t::weighted_sum", 0);
  CheckResult r = gradcheck(op.handle(), {IValue(std::vector<Tensor>{leaf({4}), leaf({4}), leaf({4})}), IValue(0.5)});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST(TensorListGradients, AWrongElementGradientIsNamedByItsIndex) {
  Registry registry;
  auto op = weighted_sum(registry, "t::weighted_sum_bug", 1);
  CheckResult r = gradcheck(op.handle(), {IValue(std::vector<Tensor>{leaf({2}), leaf({2}), leaf({2})}), IValue(0.5)});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("with respect to input 'xs'[1] (argument 0) is wrong"));
}

TEST(TensorListGradients, OneGradientForAWholeListIsRefusedWithTheRule) {
  Registry registry;
  auto op = weighted_sum(registry, "t::weighted_sum_one", 2);
  CheckResult r = gradcheck(op.handle(), {IValue(std::vector<Tensor>{leaf({2}), leaf({2}), leaf({2})}), IValue(0.5)});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("returned one gradient for the list argument 'xs'; return one per element"));
}

}  // namespace
}  // namespace opconform::conformance
