// Matrix products: hand-derived values for mm, bmm and addmm (strided operands, integer
// wrap-around, broadcasting, beta = 0 with NaN), then gradcheck and gradgradcheck of the formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "opconform/core/vmap.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;

TEST(LinearAlgebra, Mm) {
  registry();
  const Tensor a = floats({1, 2, 3, 4}, {2, 2}), b = floats({5, 6, 7, 8}, {2, 2});
  // [[1*5 + 2*7, 1*6 + 2*8], [3*5 + 4*7, 3*6 + 4*8]]
  Tensor p = call("aten::mm", {a, b});
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{19, 22, 43, 50}));
  EXPECT_TRUE(p.is_contiguous());
  // a^T @ b with a^T a transposed view: [[1*5 + 3*7, 1*6 + 3*8], [2*5 + 4*7, 2*6 + 4*8]]
  EXPECT_EQ(call("aten::mm", {a.transpose(0, 1), b}).to_vector<double>(), (std::vector<double>{26, 30, 38, 44}));
  // [2, 3] @ [3, 1] with a broadcast (stride 0) column of ones: row sums.
  Tensor ones_column = floats({1}, {1, 1}).expand({3, 1});
  EXPECT_EQ(call("aten::mm", {floats({1, 2, 3, 4, 5, 6}, {2, 3}), ones_column}).to_vector<double>(),
            (std::vector<double>{6, 15}));
  // An empty inner dim gives zeros.
  Tensor z = call("aten::mm", {zeros({2, 0}), zeros({0, 3})});
  EXPECT_EQ(sizes_of(z), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0));
  // int8 products wrap as PyTorch's: 100 * 2 = 200 -> -56.
  Tensor i = call("aten::mm", {from_vector<int8_t>({100}, {1, 1}), from_vector<int8_t>({2}, {1, 1})});
  EXPECT_EQ(i.dtype(), DType::Int8);
  EXPECT_EQ(i.item().to_int(), -56);
  // complex: (1 + i)(1 - i) = 2
  Tensor c = call("aten::mm", {from_vector<complex128>({complex128(1, 1)}, {1, 1}),
                               from_vector<complex128>({complex128(1, -1)}, {1, 1})});
  EXPECT_EQ(c.item().to<complex128>(), complex128(2, 0));
  EXPECT_THROW(call("aten::mm", {a, floats({1, 2, 3}, {3, 1})}), Error);              // inner sizes
  EXPECT_THROW(call("aten::mm", {a, b.to(DType::Float64)}), Error);                   // dtypes
  EXPECT_THROW(call("aten::mm", {floats({1, 2}, {2}), b}), Error);                    // rank
  EXPECT_THROW(call("aten::mm", {a.to(DType::Bool), b.to(DType::Bool)}), Error);      // bool
}

TEST(LinearAlgebra, BmmIsMmPerBatch) {
  registry();
  const Tensor a = floats({1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2}), b = floats({5, 6, 7, 8, 1, 2, 3, 4}, {2, 2, 2});
  Tensor p = call("aten::bmm", {a, b});
  // batch 0 as in Mm; batch 1 swaps the rows of [[1, 2], [3, 4]].
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{19, 22, 43, 50, 3, 4, 1, 2}));
  // Batches of transposed views agree with mm on each batch.
  Tensor at = a.transpose(1, 2);
  Tensor pt = call("aten::bmm", {at, b});
  for (int64_t s = 0; s < 2; ++s) {
    EXPECT_EQ(pt.select(0, s).to_vector<double>(), call("aten::mm", {at.select(0, s), b.select(0, s)}).to_vector<double>());
  }
  EXPECT_THROW(call("aten::bmm", {a, zeros({3, 2, 2})}), Error);  // batch sizes
}

// alpha == 0 drops the product, inf and NaN in it included (PyTorch's gemm; found by the ATen
// adapter: the reference gave NaN).
TEST(LinearAlgebra, AddmmWithAlphaZeroIgnoresTheProduct) {
  const Tensor a = doubles({kInf, 1, kNaN, 2}, {2, 2}), b = doubles({1, 0, 0, 1}, {2, 2});
  EXPECT_EQ(call("aten::addmm", {doubles({1, 2}, {2}), a, b, IValue(3.0), IValue(0.0)}).to_vector<double>(),
            (std::vector<double>{3, 6, 3, 6}));
}

TEST(LinearAlgebra, Addmm) {
  registry();
  const Tensor a = floats({1, 2, 3, 4}, {2, 2}), b = floats({5, 6, 7, 8}, {2, 2});
  // self [2] broadcasts as a row: [[19 + 1, 22 + 2], [43 + 1, 50 + 2]]
  EXPECT_EQ(call("aten::addmm", {floats({1, 2}, {2}), a, b}).to_vector<double>(), (std::vector<double>{20, 24, 44, 52}));
  // beta 3, alpha 2: 3 * 1 + 2 * product
  EXPECT_EQ(call("aten::addmm", {floats({1}, {1, 1}), a, b, IValue(int64_t{3}), IValue(int64_t{2})}).to_vector<double>(),
            (std::vector<double>{41, 47, 89, 103}));
  // beta 0 ignores self, NaN included.
  Tensor nan_self = floats({std::numeric_limits<double>::quiet_NaN()}, {});
  EXPECT_EQ(call("aten::addmm", {nan_self, a, b, IValue(int64_t{0})}).to_vector<double>(),
            (std::vector<double>{19, 22, 43, 50}));
  // Integers refuse a floating alpha, naming it.
  const Tensor ia = a.to(DType::Int32), ib = b.to(DType::Int32);
  EXPECT_EQ(call("aten::addmm", {ia.select(0, 0), ia, ib}).to_vector<int64_t>(), (std::vector<int64_t>{20, 24, 44, 52}));
  try {
    call("aten::addmm", {ia, ia, ib, IValue(int64_t{1}), IValue(0.5)});
    FAIL() << "a floating alpha was accepted for integer matrices";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'alpha'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(call("aten::addmm", {floats({1, 2, 3}, {3}), a, b}), Error);  // self does not broadcast
}

TEST(LinearAlgebra, MmVmapRuleIsBmm) {
  registry();
  const Tensor a = floats({1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2}), b = floats({5, 6, 7, 8}, {2, 2});
  const int64_t fallback_before = vmap_fallback_count("aten::mm");
  // a batched, b shared by every sample.
  auto f = vmap([](const std::vector<Tensor>& xs) { return std::vector<Tensor>{call("aten::mm", {xs[0], xs[1]})}; },
                {int64_t{0}, std::nullopt});
  Tensor got = f({a, b})[0];
  EXPECT_EQ(got.to_vector<double>(), (std::vector<double>{19, 22, 43, 50, 7, 8, 5, 6}));
  EXPECT_EQ(vmap_fallback_count("aten::mm"), fallback_before);
}

TEST(LinearAlgebraGradients, Mm) { expect_generated_gradients_pass("aten::mm"); }
TEST(LinearAlgebraGradients, Bmm) { expect_generated_gradients_pass("aten::bmm"); }
TEST(LinearAlgebraGradients, Addmm) { expect_generated_gradients_pass("aten::addmm"); }

TEST(LinearAlgebraGradients, AddmmByHand) {
  registry();
  // f = sum(beta * self + alpha * a @ b) with self broadcast as a row: df/dself = beta * (rows = 2),
  // df/da = alpha * ones @ b^T, df/db = alpha * a^T @ ones.
  Tensor self = floats({0, 0}, {2}, DType::Float64), a = floats({1, 2, 3, 4}, {2, 2}, DType::Float64),
         b = floats({5, 6, 7, 8}, {2, 2}, DType::Float64);
  for (Tensor* t : {&self, &a, &b}) t->set_requires_grad(true);
  Tensor out = call("aten::addmm", {self, a, b, IValue(int64_t{3}), IValue(int64_t{2})});
  call("aten::sum", {out}).backward();
  EXPECT_EQ(self.grad().to_vector<double>(), (std::vector<double>{6, 6}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{22, 30, 22, 30}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{8, 8, 12, 12}));
}

}  // namespace
}  // namespace opconform::reference
