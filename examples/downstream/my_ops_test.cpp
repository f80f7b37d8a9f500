// my_ops in a GoogleTest: values by hand, then EXPECT_OPCHECK, which runs opcheck's default
// checks (test_schema, test_autograd_registration, test_faketensor, test_aot_dispatch_dynamic) on
// every sample and prints each failure with its minimal input.
#include <gtest/gtest.h>

#include <vector>

#include "my_ops.h"
#include "opconform/conformance/gtest.h"

namespace {

using opconform::DType;
using opconform::IValue;
using opconform::Tensor;
using opconform::conformance::Sample;

Tensor matrix(std::vector<double> values, int64_t rows, int64_t cols, DType dtype) {
  return opconform::from_vector<double>(values, {rows, cols}).to(dtype);
}

// Each test defines the ops in a registry of its own, with the fallbacks PyTorch has built in
// (autograd, fake tensors, vmap, dispatch modes) that the checks rely on.
class MyOps : public ::testing::Test {
 protected:
  opconform::Registry registry;
  opconform::RegistrationHandle fallbacks = opconform::install_builtin_fallbacks(registry);
  my_ops::Ops ops = my_ops::define_ops(registry);

  Tensor x = matrix({1, -2, 3, 0.5, 0, -1}, 2, 3, DType::Float32);
  Tensor y = matrix({2, 2, -1, 4, 7, 0.5}, 2, 3, DType::Float32);
};

TEST_F(MyOps, ScaleMultipliesEveryElement) {
  EXPECT_EQ(ops.scale(x, 2.0).to_vector<float>(), (std::vector<float>{2, -4, 6, 1, 0, -2}));
  // A transposed view is read through its strides.
  EXPECT_EQ(ops.scale(x.transpose(0, 1), -1.0).to_vector<float>(), (std::vector<float>{-1, -0.5, 2, 0, -3, 1}));
}

TEST_F(MyOps, MulMultipliesElementwise) {
  EXPECT_EQ(ops.mul(x, y).to_vector<float>(), (std::vector<float>{2, -4, -3, 2, 0, -0.5}));
}

TEST_F(MyOps, MulNamesTheArgumentItRejects) {
  try {
    ops.mul(x, matrix({1, 2}, 1, 2, DType::Float32));
    FAIL() << "mismatched sizes were accepted";
  } catch (const opconform::Error& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'y'"), std::string::npos) << e.what();
  }
}

// Samples that cover what a kernel gets wrong most often: layouts, empty and 0-d tensors, dtypes,
// and inputs that require grad (so the autograd formula is checked and captured too).
TEST_F(MyOps, ScalePassesOpcheck) {
  Tensor w = matrix({0.5, 1.5, -2, 3, 1, -1}, 2, 3, DType::Float64);
  w.set_requires_grad(true);
  std::vector<Sample> samples = {
      Sample({IValue(x), IValue(2.5)}),
      Sample({IValue(x.transpose(0, 1)), IValue(-1.0)}),
      Sample({IValue(w), IValue(0.5)}),
      Sample({IValue(opconform::empty({0, 3})), IValue(3.0)}),
      Sample({IValue(opconform::scalar_tensor(2.0)), IValue(3.0)}),
  };
  EXPECT_OPCHECK(ops.scale, samples);
}

TEST_F(MyOps, MulPassesOpcheck) {
  Tensor a = matrix({0.5, 1.5, -2, 3, 1, -1}, 2, 3, DType::Float64), b = matrix({2, 1, 0.25, -1, 4, 3}, 2, 3, DType::Float64);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  std::vector<Sample> samples = {
      Sample({IValue(x), IValue(y)}),
      Sample({IValue(x.transpose(0, 1)), IValue(y.transpose(0, 1))}),
      Sample({IValue(a), IValue(b)}),
      Sample({IValue(opconform::empty({0, 3})), IValue(opconform::empty({0, 3}))}),
  };
  EXPECT_OPCHECK(ops.mul, samples);
}

}  // namespace
