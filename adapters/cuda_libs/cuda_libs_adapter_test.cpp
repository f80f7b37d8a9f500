// The cuBLAS/cuDNN adapter (libopconform_cuda_libs_plugin.so and its _tf32 variant) loaded with
// opconform's loader, the reference as the schema source. Without a GPU: both variants load and
// register every op (CUDA kernels, backward formulas, the reference's fake kernels); the GPU tests
// skip, saying why. With one: mm of a transposed operand, addmm with beta = 0 over a NaN self,
// a grouped strided conv2d and its backward, softmax, relu (NaN included) against the reference on
// host copies, and TF32: the _tf32 variant rounds a float32 product that the default keeps exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/cuda.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/reference.h"

namespace opconform::adapters {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!opconform::cuda::is_available()) GTEST_SKIP() << "no GPU for the cuBLAS/cuDNN kernels: " << opconform::cuda::unavailable_reason()

Registry& reference_registry() {
  static Registry registry;
  static auto registration = reference::register_reference_ops(registry);
  return registry;
}

struct Loaded {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib;
  explicit Loaded(const char* path) { lib = load_plugin(path, registry, {.schemas = &reference_registry()}); }
};
Loaded& plain() {
  static Loaded instance(OPCONFORM_CUDA_LIBS_PLUGIN_PATH);
  return instance;
}
Loaded& tf32() {
  static Loaded instance(OPCONFORM_CUDA_LIBS_TF32_PLUGIN_PATH);
  return instance;
}

Stack call(Registry& registry, std::string_view op, Stack args) {
  return reference::detail::Ops(registry).call(op, std::move(args));
}
// Arguments on the host; the plugin gets device copies of their tensors, the result comes back.
Tensor on_gpu(Loaded& lib, std::string_view op, Stack args) {
  for (IValue& v : args)
    if (v.is_tensor() && v.to_tensor().defined()) v = IValue(v.to_tensor().to(Device::cuda()));
  const Tensor out = call(lib.registry, op, std::move(args)).at(0).to_tensor();
  EXPECT_TRUE(out.device().is_cuda()) << op;
  return out.to(Device::cpu());
}
Tensor reference(std::string_view op, Stack args) { return call(reference_registry(), op, std::move(args)).at(0).to_tensor(); }

IValue ints(std::vector<int64_t> v) { return IValue(std::move(v)); }

void expect_near(const Tensor& actual, const Tensor& expected, double tol) {
  ASSERT_EQ(std::vector<int64_t>(actual.sizes().begin(), actual.sizes().end()),
            std::vector<int64_t>(expected.sizes().begin(), expected.sizes().end()));
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(e[i])) EXPECT_TRUE(std::isnan(a[i])) << "at " << i;
    else EXPECT_NEAR(a[i], e[i], tol) << "at " << i;
  }
}

// Deterministic values in [-2, 2).
Tensor values(std::vector<int64_t> shape, int seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 37 + seed * 11) % 64) / 16.0f - 2.0f;
  return from_vector<float>(v, shape);
}

const char* const kOps[] = {"aten::mm", "aten::bmm", "aten::addmm", "aten::convolution", "aten::_softmax", "aten::_log_softmax",
                            "aten::relu", "aten::sigmoid", "aten::tanh", "aten::elu", "aten::avg_pool2d",
                            "aten::max_pool2d_with_indices", "aten::_native_batch_norm_legit_no_training"};

TEST(CudaLibsAdapter, BothVariantsLoadAndRegisterEveryOpWithOrWithoutAGpu) {
  for (Loaded* l : {&plain(), &tf32()}) {
    const LoadedLibrary& lib = *l->lib;
    EXPECT_TRUE(lib.problems().empty()) << lib.problems().front().message;
    EXPECT_NE(lib.version().find("cuBLAS"), std::string::npos) << lib.version();
    EXPECT_NE(lib.version().find("cuDNN"), std::string::npos) << lib.version();
    const auto ops = lib.ops();
    for (const char* op : kOps) {
      EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
      EXPECT_TRUE(lib.has_kernel(op, OPC_KERNEL_CUDA)) << op;
      EXPECT_FALSE(lib.has_kernel(op, OPC_KERNEL_CPU)) << op;
      EXPECT_TRUE(lib.declared(op).reference_fake) << op;  // no fake kernel of its own
      const auto dtypes = lib.declared_dtypes(op);
      ASSERT_TRUE(dtypes.has_value()) << op;
      EXPECT_EQ(dtypes->size(), 4u) << op;
    }
    for (const char* op : {"aten::convolution", "aten::_softmax", "aten::relu", "aten::elu", "aten::avg_pool2d",
                           "aten::max_pool2d_with_indices"})
      EXPECT_TRUE(lib.has_kernel(op, OPC_KERNEL_BACKWARD)) << op;
    EXPECT_FALSE(lib.has_kernel("aten::mm", OPC_KERNEL_BACKWARD));
  }
  EXPECT_EQ(plain().lib->name(), "cuda-libs");
  EXPECT_EQ(tf32().lib->name(), "cuda-libs-tf32");
  EXPECT_NE(tf32().lib->version().find("TF32"), std::string::npos) << tf32().lib->version();
}

TEST(CudaLibsAdapter, MmOfATransposedOperand) {
  SKIP_WITHOUT_CUDA();
  const Tensor a = values({5, 3}, 1);
  const Tensor b = values({4, 3}, 2).transpose(0, 1);  // [3, 4], strides [1, 3]: CUBLAS_OP_T
  expect_near(on_gpu(plain(), "aten::mm", {a, b}), reference("aten::mm", {a, b}), 1e-5);
  // Both transposed, and a column slice (row stride 6, unit column stride: no copy either).
  const Tensor at = values({3, 5}, 3).transpose(0, 1), bs = values({3, 8}, 4).slice(1, 0, 4);
  expect_near(on_gpu(plain(), "aten::mm", {at, bs}), reference("aten::mm", {at, bs}), 1e-5);
  // A layout cuBLAS cannot read (both strides > 1): copied first.
  const Tensor odd = values({6, 8}, 5).slice(0, 0, 6, 2).slice(1, 0, 8, 2);  // [3, 4], strides [16, 2]
  expect_near(on_gpu(plain(), "aten::mm", {a, odd}), reference("aten::mm", {a, odd}), 1e-5);
  const Tensor x = values({2, 5, 3}, 6), y = values({2, 4, 3}, 7).transpose(1, 2);
  expect_near(on_gpu(plain(), "aten::bmm", {x, y}), reference("aten::bmm", {x, y}), 1e-5);
}

TEST(CudaLibsAdapter, AddmmWithBetaZeroIgnoresNaNInSelf) {
  SKIP_WITHOUT_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor self = from_vector<float>({nan, 1, nan, 2}, {4});  // broadcast over [3, 4]
  const Tensor a = values({3, 2}, 1), b = values({2, 4}, 2);
  const Stack zero_beta{self, a, b, IValue(0.0), IValue(2.0)};
  const Tensor got = on_gpu(plain(), "aten::addmm", zero_beta);
  for (double v : got.to_vector<double>()) EXPECT_FALSE(std::isnan(v));
  expect_near(got, reference("aten::addmm", zero_beta), 1e-5);
  const Tensor finite = values({3, 4}, 3);
  const Stack args{finite, a, b, IValue(0.5), IValue(-1.5)};
  expect_near(on_gpu(plain(), "aten::addmm", args), reference("aten::addmm", args), 1e-5);
}

Stack conv_args(const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups) {
  return {x, w, b, ints({2, 1}), ints({1, 2}), ints({1, 2}), IValue(false), ints({0, 0}), IValue(groups)};
}

TEST(CudaLibsAdapter, Conv2dAndItsBackwardAgreeWithTheReference) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = values({2, 4, 7, 6}, 1), w = values({6, 2, 3, 3}, 2), b = values({6}, 3);
  expect_near(on_gpu(plain(), "aten::convolution", conv_args(x, w, b, 2)),
              reference("aten::convolution", conv_args(x, w, b, 2)), 1e-4);
  // Backward through the plugin's formula (cuDNN's backward data, filter and bias).
  Tensor gx = x.to(Device::cuda()), gw = w.to(Device::cuda()), gb = b.to(Device::cuda());
  for (const Tensor* t : {&gx, &gw, &gb}) t->set_requires_grad(true);
  const Tensor y = call(plain().registry, "aten::convolution", conv_args(gx, gw, gb, 2)).at(0).to_tensor();
  const Tensor g = values({y.size(0), y.size(1), y.size(2), y.size(3)}, 4);
  y.backward(g.to(Device::cuda()));
  Tensor rx = x.clone(), rw = w.clone(), rb = b.clone();
  for (const Tensor* t : {&rx, &rw, &rb}) t->set_requires_grad(true);
  reference("aten::convolution", conv_args(rx, rw, rb, 2)).backward(g);
  expect_near(gx.grad().to(Device::cpu()), rx.grad(), 1e-4);
  expect_near(gw.grad().to(Device::cpu()), rw.grad(), 1e-4);
  expect_near(gb.grad().to(Device::cpu()), rb.grad(), 1e-4);
}

TEST(CudaLibsAdapter, SoftmaxAgreesWithTheReference) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = values({3, 5, 2}, 1);
  for (int64_t dim : {0, 1, -1}) {
    const Stack args{x, IValue(dim), IValue(false)};
    expect_near(on_gpu(plain(), "aten::_softmax", args), reference("aten::_softmax", args), 1e-6);
    expect_near(on_gpu(plain(), "aten::_log_softmax", args), reference("aten::_log_softmax", args), 1e-5);
  }
}

TEST(CudaLibsAdapter, ReluAgreesWithTheReferenceNaNIncluded) {
  SKIP_WITHOUT_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = from_vector<float>({-2, -0.5f, 0, 0.5f, 3, nan}, {2, 3});
  expect_near(on_gpu(plain(), "aten::relu", {x}), reference("aten::relu", {x}), 0);
  // A transposed input keeps its layout (the reference's rule).
  const Tensor t = on_gpu(plain(), "aten::relu", {x.transpose(0, 1)});
  EXPECT_EQ(t.strides()[0], 1);
  expect_near(t, reference("aten::relu", {x.transpose(0, 1)}), 0);
}

// 1 + 2^-13 needs 13 mantissa bits; TF32 keeps 10, so the _tf32 variant's product of 64 such
// values with ones is 64, the exact one 64 + 2^-7 (a float32 number).
TEST(CudaLibsAdapter, Tf32RoundsAProductTheDefaultKeepsExact) {
  SKIP_WITHOUT_CUDA();
  const int64_t n = 64;
  const Tensor a = from_vector<float>(std::vector<float>(n * n, 1.0f + std::ldexp(1.0f, -13)), {n, n});
  const Tensor b = from_vector<float>(std::vector<float>(n * n, 1.0f), {n, n});
  const float exact = 64.0f + std::ldexp(1.0f, -7);
  const auto want = reference("aten::mm", {a, b}).to_vector<float>();
  const auto ieee = on_gpu(plain(), "aten::mm", {a, b}).to_vector<float>();
  const auto rounded = on_gpu(tf32(), "aten::mm", {a, b}).to_vector<float>();
  EXPECT_EQ(want[0], exact);
  EXPECT_EQ(ieee, want);
  EXPECT_NE(rounded, want);
  EXPECT_EQ(rounded[0], 64.0f);
}

}  // namespace
}  // namespace opconform::adapters
