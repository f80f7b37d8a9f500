// Reductions: hand-derived values and identities for every op of reduction.cpp, then gradcheck
// and gradgradcheck of each formula on generated float64 samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "opconform/conformance/gradcheck.h"
#include "opconform/core/vmap.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using conformance::Outcome;

// ---- sum ----

TEST(Reduction, SumDimIntList) {
  registry();
  const Tensor x = floats({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor rows = call("aten::sum.dim_IntList", {x, IValue(std::vector<int64_t>{1})});
  EXPECT_EQ(sizes_of(rows), (std::vector<int64_t>{2}));
  EXPECT_EQ(rows.dtype(), DType::Float32);
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{6, 15}));
  Tensor cols = call("aten::sum.dim_IntList", {x, IValue(std::vector<int64_t>{-2}), IValue(true)});
  EXPECT_EQ(sizes_of(cols), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(cols.to_vector<double>(), (std::vector<double>{5, 7, 9}));
  // None and [] reduce every dim to a 0-d result.
  for (IValue dims : {IValue(), IValue(std::vector<int64_t>{})}) {
    Tensor all = call("aten::sum.dim_IntList", {x, dims});
    EXPECT_EQ(all.dim(), 0);
    EXPECT_EQ(all.item().to_double(), 21);
  }
  // A transposed view: the sum follows the strides.
  Tensor t = call("aten::sum.dim_IntList", {x.transpose(0, 1), IValue(std::vector<int64_t>{0})});
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_TRUE(t.is_contiguous());
  // Broadcast (stride 0) rows are each counted.
  Tensor b = call("aten::sum.dim_IntList", {floats({1, 2}, {1, 2}).expand({3, 2}), IValue(std::vector<int64_t>{0})});
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{3, 6}));
  // A 0-d tensor accepts dims 0 and -1.
  Tensor scalar = call("aten::sum.dim_IntList", {scalar_tensor(Scalar(2.5)), IValue(std::vector<int64_t>{-1})});
  EXPECT_EQ(scalar.item().to_double(), 2.5);
  // A zero-size dim sums to 0.
  Tensor e = call("aten::sum.dim_IntList", {zeros({0, 3}), IValue(std::vector<int64_t>{0})});
  EXPECT_EQ(e.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // A dim named twice is an error naming the op.
  try {
    call("aten::sum.dim_IntList", {x, IValue(std::vector<int64_t>{1, -1})});
    FAIL() << "a repeated dim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::sum.dim_IntList"), std::string::npos) << e.what();
  }
}

TEST(Reduction, SumPromotesIntegersAndTakesDtype) {
  registry();
  Tensor i8 = from_vector<int8_t>({100, 100, 100}, {3});
  Tensor s = call("aten::sum.dim_IntList", {i8, IValue(std::vector<int64_t>{0})});
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(s.item().to_int(), 300);  // no int8 wrap: accumulated and returned as int64
  Tensor bools = from_vector<bool>({true, false, true, true}, {4});
  Tensor count = call("aten::sum", {bools});
  EXPECT_EQ(count.dtype(), DType::Int64);
  EXPECT_EQ(count.item().to_int(), 3);
  // dtype= converts the input first: int8 sum with dtype int8 wraps as PyTorch (300 - 256).
  Tensor wrapped = call("aten::sum", {i8, IValue(DType::Int8)});
  EXPECT_EQ(wrapped.dtype(), DType::Int8);
  EXPECT_EQ(wrapped.item().to_int(), 44);
  // float16 accumulates wide: 2048 + 1 + 1 is 2050, although 2048 + 1 rounds back to 2048 in float16.
  Tensor halfs = floats({2048, 1, 1}, {3}, DType::Float16);
  EXPECT_EQ(call("aten::sum", {halfs}).item().to_double(), 2050);
}

TEST(Reduction, SumOverAllEqualsSumOfPartialSums) {
  registry();
  const Tensor x = floats({1.5, -2, 3, 4.25, 5, -6, 7, 8, 9, 10, -11, 12}, {2, 3, 2}, DType::Float64);
  Tensor all = call("aten::sum", {x});
  Tensor partial = call("aten::sum.dim_IntList", {x, IValue(std::vector<int64_t>{0, 2})});
  Tensor of_partial = call("aten::sum", {partial});
  EXPECT_DOUBLE_EQ(all.item().to_double(), of_partial.item().to_double());
  EXPECT_DOUBLE_EQ(all.item().to_double(), 40.75);
}

TEST(Reduction, SumIntListOut) {
  registry();
  const Tensor x = floats({1, 2, 3, 4}, {2, 2});
  Tensor out = full({2}, Scalar(99.0));
  const IValue dim0(std::vector<int64_t>{0});
  Stack result = call_all("aten::sum.IntList_out", {x, dim0, IValue(false), IValue(), out});
  EXPECT_TRUE(result.at(0).to_tensor().is_same(out));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{4, 6}));
  // Without dtype the result takes out's dtype.
  Tensor out64 = zeros({2}, TensorOptions(DType::Float64));
  call_all("aten::sum.IntList_out", {x, IValue(std::vector<int64_t>{1}), IValue(false), IValue(), out64});
  EXPECT_EQ(out64.to_vector<double>(), (std::vector<double>{3, 7}));
  // A wrongly shaped out is refused, naming the argument.
  EXPECT_NE(error_of("aten::sum.IntList_out", {x, dim0, IValue(false), IValue(), zeros({3})}).find("'out'"),
            std::string::npos);
  // out= refuses autograd, as PyTorch's out= overloads.
  EXPECT_NE(error_of("aten::sum.IntList_out", {leaf(x), dim0, IValue(false), IValue(), out}).find("requires grad"),
            std::string::npos);
}

// ---- mean ----

TEST(Reduction, Mean) {
  registry();
  const Tensor x = floats({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(call("aten::mean", {x}).item().to_double(), 2.5);
  Tensor cols = call("aten::mean.dim", {x.transpose(0, 1), IValue(std::vector<int64_t>{0}), IValue(true)});
  EXPECT_EQ(sizes_of(cols), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(cols.to_vector<double>(), (std::vector<double>{1.5, 3.5}));
  Tensor as64 = call("aten::mean.dim", {x, IValue(), IValue(false), IValue(DType::Float64)});
  EXPECT_EQ(as64.dtype(), DType::Float64);
  EXPECT_TRUE(std::isnan(call("aten::mean", {zeros({0})}).item().to_double()));
  // Integers need a floating dtype.
  EXPECT_THROW(call("aten::mean", {from_vector<int64_t>({1, 2}, {2})}), Error);
  EXPECT_EQ(call("aten::mean", {from_vector<int64_t>({1, 2}, {2}), IValue(DType::Float64)}).item().to_double(), 1.5);
}

// ---- prod ----

TEST(Reduction, Prod) {
  registry();
  EXPECT_EQ(call("aten::prod", {floats({1, 2, 3, 4}, {4})}).item().to_double(), 24);
  Tensor ints = call("aten::prod", {from_vector<int16_t>({300, 300}, {2})});
  EXPECT_EQ(ints.dtype(), DType::Int64);
  EXPECT_EQ(ints.item().to_int(), 90000);
  EXPECT_EQ(call("aten::prod", {zeros({0})}).item().to_double(), 1);
  Tensor rows = call("aten::prod.dim_int", {floats({1, 2, 3, 4}, {2, 2}).transpose(0, 1), IValue(int64_t{1})});
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{3, 8}));
}

// ---- amax / amin ----

TEST(Reduction, AmaxAmin) {
  registry();
  const Tensor x = floats({1, 5, 7, 3}, {2, 2});
  EXPECT_EQ(call("aten::amax", {x}).item().to_double(), 7);
  EXPECT_EQ(call("aten::amax", {x, IValue(std::vector<int64_t>{0})}).to_vector<double>(), (std::vector<double>{7, 5}));
  EXPECT_EQ(call("aten::amin", {x, IValue(std::vector<int64_t>{1}), IValue(true)}).to_vector<double>(),
            (std::vector<double>{1, 3}));
  EXPECT_TRUE(std::isnan(call("aten::amax", {floats({1, kNaN, 3}, {3})}).item().to_double()));
  EXPECT_TRUE(std::isnan(call("aten::amin", {floats({1, kNaN, 3}, {3})}).item().to_double()));
  Tensor b = call("aten::amax", {from_vector<bool>({false, true}, {2})});
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_TRUE(b.item().to<bool>());
  try {
    call("aten::amax", {zeros({2, 0}), IValue(std::vector<int64_t>{1})});
    FAIL() << "amax over an empty dim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::amax"), std::string::npos) << e.what();
  }
  // Reducing the other dim of an empty tensor is fine.
  EXPECT_EQ(sizes_of(call("aten::amax", {zeros({2, 0}), IValue(std::vector<int64_t>{0})})), (std::vector<int64_t>{0}));
}

// ---- argmax / argmin, max.dim / min.dim ----

TEST(Reduction, ArgmaxArgminFirstOccurrence) {
  registry();
  const Tensor x = floats({1, 5, 5, 7, 3, 7}, {2, 3});
  Tensor am = call("aten::argmax", {x, IValue(int64_t{1})});
  EXPECT_EQ(am.dtype(), DType::Int64);
  EXPECT_EQ(am.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(call("aten::argmax", {x}).item().to_int(), 3);  // flattened
  EXPECT_EQ(call("aten::argmin", {x, IValue(int64_t{0})}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(sizes_of(call("aten::argmin", {x, IValue(), IValue(true)})), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(call("aten::argmax", {floats({1, kNaN, 9, kNaN}, {4})}).item().to_int(), 1);
  EXPECT_EQ(call("aten::argmin", {floats({1, -3, kNaN}, {3})}).item().to_int(), 2);
  EXPECT_THROW(call("aten::argmax", {zeros({0})}), Error);
}

TEST(Reduction, MaxMinDim) {
  registry();
  const Tensor x = floats({1, 5, 5, 7, 3, 7}, {2, 3});
  Stack mx = call_all("aten::max.dim", {x, IValue(int64_t{1})});
  EXPECT_EQ(mx[0].to_tensor().to_vector<double>(), (std::vector<double>{5, 7}));
  EXPECT_EQ(mx[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  Stack mn = call_all("aten::min.dim", {x.transpose(0, 1), IValue(int64_t{1}), IValue(true)});
  EXPECT_EQ(sizes_of(mn[0].to_tensor()), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(mn[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(mn[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
}

// ---- var ----

TEST(Reduction, Var) {
  registry();
  const Tensor x = floats({1, 2, 3, 4}, {4}, DType::Float64);
  // mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5
  EXPECT_DOUBLE_EQ(call("aten::var.correction", {x}).item().to_double(), 5.0 / 3);
  EXPECT_DOUBLE_EQ(call("aten::var.correction", {x, IValue(), IValue(int64_t{0})}).item().to_double(), 1.25);
  EXPECT_DOUBLE_EQ(call("aten::var.dim", {x, IValue(std::vector<int64_t>{0}), IValue(false)}).item().to_double(), 1.25);
  // Rows of a transposed matrix: [[1, 3], [2, 4]] -> var per row (unbiased) 2, 2.
  Tensor rows = call("aten::var.dim", {x.view({2, 2}).transpose(0, 1), IValue(std::vector<int64_t>{1})});
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{2, 2}));
  // complex: mean 0, |1+i|^2 = |-1-i|^2 = 2, unbiased: 4 / 1; the result is real.
  Tensor z = from_vector<complex128>({complex128(1, 1), complex128(-1, -1)}, {2}).to(DType::Complex64);
  Tensor vz = call("aten::var.correction", {z});
  EXPECT_EQ(vz.dtype(), DType::Float32);
  EXPECT_EQ(vz.item().to_double(), 4);
  EXPECT_THROW(call("aten::var.correction", {from_vector<int64_t>({1, 2}, {2})}), Error);
}

// ---- any ----

TEST(Reduction, Any) {
  registry();
  EXPECT_TRUE(call("aten::any", {floats({0, 0, 1}, {3})}).item().to<bool>());
  EXPECT_FALSE(call("aten::any", {floats({0, 0}, {2})}).item().to<bool>());
  EXPECT_FALSE(call("aten::any", {zeros({0})}).item().to<bool>());
  EXPECT_TRUE(call("aten::any", {floats({0, kNaN}, {2})}).item().to<bool>());
  EXPECT_EQ(call("aten::any", {from_vector<uint8_t>({0, 3}, {2})}).dtype(), DType::UInt8);
  const Tensor x = floats({0, 1, 0, 0}, {2, 2});
  Tensor d = call("aten::any.dim", {x, IValue(int64_t{0})});
  EXPECT_EQ(d.dtype(), DType::Bool);
  EXPECT_EQ(d.to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(call("aten::any.dims", {x, IValue(std::vector<int64_t>{1})}).to_vector<bool>(), (std::vector<bool>{true, false}));
  // [] reduces nothing: the elements as bool.
  Tensor none = call("aten::any.dims", {x, IValue(std::vector<int64_t>{})});
  EXPECT_EQ(sizes_of(none), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(none.to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(call("aten::any.dims", {x}).dim(), 0);
}

// ---- cumsum ----

TEST(Reduction, Cumsum) {
  registry();
  EXPECT_EQ(call("aten::cumsum", {floats({1, 2, 3}, {3}), IValue(int64_t{0})}).to_vector<double>(),
            (std::vector<double>{1, 3, 6}));
  const Tensor m = floats({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(call("aten::cumsum", {m, IValue(int64_t{0})}).to_vector<double>(), (std::vector<double>{1, 2, 4, 6}));
  // Transposed: [[1, 3], [2, 4]] along dim 1 -> [[1, 4], [2, 6]], returned contiguous.
  Tensor t = call("aten::cumsum", {m.transpose(0, 1), IValue(int64_t{-1})});
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 4, 2, 6}));
  EXPECT_TRUE(t.is_contiguous());
  Tensor i = call("aten::cumsum", {from_vector<int8_t>({100, 100}, {2}), IValue(int64_t{0})});
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(call("aten::cumsum", {scalar_tensor(Scalar(3.0)), IValue(int64_t{0})}).item().to_double(), 3);
}

// ---- vmap rules ----

TEST(Reduction, DimListVmapRuleShiftsDims) {
  registry();
  // Two samples of [2, 3]; the batch is dim 1 of the physical tensor.
  const Tensor batch = floats({1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}, {2, 2, 3}).transpose(0, 1);
  for (const char* op : {"aten::sum.dim_IntList", "aten::mean.dim"}) {
    const int64_t fallback_before = vmap_fallback_count(op);
    for (IValue dims : {IValue(std::vector<int64_t>{-1}), IValue(std::vector<int64_t>{0}), IValue()}) {
      auto f = vmap([&](const std::vector<Tensor>& xs) { return std::vector<Tensor>{call(op, {xs[0], dims, IValue(true)})}; },
                    {int64_t{1}});
      Tensor got = f({batch})[0];
      for (int64_t b = 0; b < 2; ++b) {
        Tensor want = call(op, {batch.select(1, b), dims, IValue(true)});
        EXPECT_EQ(sizes_of(got.select(0, b)), sizes_of(want)) << op;
        EXPECT_EQ(got.select(0, b).to_vector<double>(), want.to_vector<double>()) << op;
      }
    }
    EXPECT_EQ(vmap_fallback_count(op), fallback_before) << op << " went through the fallback, not its rule";
  }
  // A logical 0-d input: dim 0 names the tensor itself.
  auto f = vmap([&](const std::vector<Tensor>& xs) {
    return std::vector<Tensor>{call("aten::sum.dim_IntList", {xs[0], IValue(std::vector<int64_t>{0})})};
  }, {int64_t{0}});
  EXPECT_EQ(f({floats({1, 2, 3}, {3})})[0].to_vector<double>(), (std::vector<double>{1, 2, 3}));
}

// ---- formulas ----

TEST(ReductionGradients, Sum) {
  expect_generated_gradients_pass("aten::sum.dim_IntList");
  expect_generated_gradients_pass("aten::sum");
}
TEST(ReductionGradients, Mean) {
  expect_generated_gradients_pass("aten::mean");
  expect_generated_gradients_pass("aten::mean.dim");
}
TEST(ReductionGradients, Prod) {
  expect_generated_gradients_pass("aten::prod");
  expect_generated_gradients_pass("aten::prod.dim_int");
}
TEST(ReductionGradients, ProdWithZeros) {
  registry();
  // d/dx of x0 * x1 * x2 at (2, 0, 3): (0, 6, 0) — the product of the others, zero included.
  Tensor x = floats({2, 0, 3}, {3}, DType::Float64);
  x.set_requires_grad(true);
  call("aten::prod", {x}).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 6, 0}));
  Tensor two_zeros = floats({0, 0, 3}, {1, 3}, DType::Float64);
  two_zeros.set_requires_grad(true);
  auto second = conformance::gradgradcheck(registry().get("aten::prod.dim_int"), {two_zeros, IValue(int64_t{1}), IValue(false), IValue()});
  EXPECT_EQ(second.outcome, Outcome::passed) << second.message;
}
TEST(ReductionGradients, AmaxAminMaxMin) {
  for (const char* op : {"aten::amax", "aten::amin", "aten::max.dim", "aten::min.dim"}) expect_generated_gradients_pass(op, /*skip_ties=*/true);
}
TEST(ReductionGradients, AmaxSharesTiesEvenly) {
  registry();
  Tensor x = floats({1, 4, 4}, {3}, DType::Float64);
  x.set_requires_grad(true);
  call("aten::amax", {x}).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5}));
}
TEST(ReductionGradients, Var) {
  expect_generated_gradients_pass("aten::var.correction");
  expect_generated_gradients_pass("aten::var.dim");
}
TEST(ReductionGradients, Cumsum) { expect_generated_gradients_pass("aten::cumsum"); }

}  // namespace
}  // namespace opconform::reference
