// Sorting and selection: hand-derived values for sort (stability, NaN, strides), topk (ties,
// smallest, 0-d) and nonzero (row-major order, 0-d, empty, the fake kernel's dynamic size), then
// gradcheck and gradgradcheck of the formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "opconform/core/fake_tensor.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;

TEST(Sorting, SortAscendingDescendingStable) {
  registry();
  Stack s = call_all("aten::sort", {floats({3, 1, 2}, {3})});
  EXPECT_EQ(s[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(s[1].to_tensor().dtype(), DType::Int64);
  EXPECT_EQ(s[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
  // Ties keep their input order, ascending and descending alike.
  const Tensor ties = floats({2, 1, 2, 1}, {4});
  EXPECT_EQ(call_all("aten::sort", {ties})[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(call_all("aten::sort", {ties, IValue(int64_t{0}), IValue(true)})[1].to_tensor().to_vector<int64_t>(),
            (std::vector<int64_t>{0, 2, 1, 3}));
  // NaN sorts as the largest value.
  Stack n = call_all("aten::sort", {floats({kNaN, 1, -1}, {3})});
  EXPECT_EQ(n[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_TRUE(std::isnan(n[0].to_tensor().to_vector<double>()[2]));
  EXPECT_EQ(call_all("aten::sort", {floats({kNaN, 1, -1}, {3}), IValue(int64_t{0}), IValue(true)})[1].to_tensor().to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2}));
  // bool sorts false first.
  EXPECT_EQ(call_all("aten::sort", {from_vector<bool>({true, false}, {2})})[0].to_tensor().to_vector<bool>(),
            (std::vector<bool>{false, true}));
}

TEST(Sorting, SortAlongADimKeepsDenseStrides) {
  registry();
  // [[3, 1], [2, 4]] transposed is [[3, 2], [1, 4]]; sorted along dim 1: [[2, 3], [1, 4]].
  const Tensor t = floats({3, 1, 2, 4}, {2, 2}).transpose(0, 1);
  Stack s = call_all("aten::sort", {t, IValue(int64_t{1})});
  const Tensor& values = s[0].to_tensor();
  EXPECT_EQ(values.to_vector<double>(), (std::vector<double>{2, 3, 1, 4}));
  EXPECT_EQ(s[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  // A dense input's strides carry over (PyTorch's sort.stable); a broadcast one gets dense ones.
  EXPECT_EQ(std::vector<int64_t>(values.strides().begin(), values.strides().end()), (std::vector<int64_t>{1, 2}));
  Stack e = call_all("aten::sort", {floats({2, 1}, {1, 2}).expand({3, 2})});
  EXPECT_TRUE(e[0].to_tensor().is_contiguous());
  EXPECT_EQ(e[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 2, 1, 2, 1, 2}));
  // 0-d: the value, index 0.
  Stack z = call_all("aten::sort", {scalar_tensor(Scalar(5.0))});
  EXPECT_EQ(z[0].to_tensor().item().to_double(), 5);
  EXPECT_EQ(z[1].to_tensor().item().to_int(), 0);
}

TEST(Sorting, Topk) {
  registry();
  const Tensor x = floats({1, 3, 2, 3}, {4});
  Stack largest = call_all("aten::topk", {x, IValue(int64_t{2})});
  EXPECT_EQ(largest[0].to_tensor().to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_EQ(largest[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));  // lower index first
  Stack smallest = call_all("aten::topk", {x, IValue(int64_t{3}), IValue(int64_t{0}), IValue(false)});
  EXPECT_EQ(smallest[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(smallest[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1}));
  // Along dim 0 of [[5, 1], [7, 0], [6, 2]]: the top 2 of each column.
  Stack cols = call_all("aten::topk", {floats({5, 1, 7, 0, 6, 2}, {3, 2}), IValue(int64_t{2}), IValue(int64_t{0})});
  EXPECT_EQ(sizes_of(cols[0].to_tensor()), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(cols[0].to_tensor().to_vector<double>(), (std::vector<double>{7, 2, 6, 1}));
  EXPECT_EQ(cols[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2, 0}));
  // NaN is the largest.
  EXPECT_EQ(call_all("aten::topk", {floats({1, kNaN}, {2}), IValue(int64_t{1})})[1].to_tensor().item().to_int(), 1);
  // k = 0 gives empty outputs; a 0-d input gives itself.
  EXPECT_EQ(sizes_of(call_all("aten::topk", {x, IValue(int64_t{0})})[0].to_tensor()), (std::vector<int64_t>{0}));
  EXPECT_EQ(call_all("aten::topk", {scalar_tensor(Scalar(4.0)), IValue(int64_t{0})})[0].to_tensor().item().to_double(), 4);
  try {
    call_all("aten::topk", {x, IValue(int64_t{5})});
    FAIL() << "k larger than the dim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
  }
}

TEST(Sorting, Nonzero) {
  registry();
  // [[0, 1], [2, 0]]: (0, 1) and (1, 0), in row-major order — also through a transposed view.
  Tensor nz = call_all("aten::nonzero", {floats({0, 1, 2, 0}, {2, 2})})[0].to_tensor();
  EXPECT_EQ(nz.dtype(), DType::Int64);
  EXPECT_EQ(sizes_of(nz), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(nz.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  Tensor nt = call_all("aten::nonzero", {floats({0, 2, 1, 0}, {2, 2}).transpose(0, 1)})[0].to_tensor();
  EXPECT_EQ(nt.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(sizes_of(call_all("aten::nonzero", {floats({kNaN, 0}, {2})})[0].to_tensor()), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sizes_of(call_all("aten::nonzero", {scalar_tensor(Scalar(3.0))})[0].to_tensor()), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(sizes_of(call_all("aten::nonzero", {zeros({0, 3})})[0].to_tensor()), (std::vector<int64_t>{0, 2}));
  // The fake kernel's row count is a new unbacked size.
  FakeTensorMode mode;
  Tensor fake_input = mode.from_tensor(floats({0, 1, 2, 0}, {2, 2}));
  Tensor fake;
  {
    FakeTensorModeGuard guard(mode);
    fake = call_all("aten::nonzero", {fake_input})[0].to_tensor();
  }
  ASSERT_TRUE(fake.has_symbolic_sizes());
  EXPECT_FALSE(fake.sym_sizes()[0].maybe_as_int().has_value());
  EXPECT_EQ(fake.sym_sizes()[1].maybe_as_int(), 2);
}

TEST(SortingGradients, Sort) { expect_generated_gradients_pass("aten::sort", /*skip_ties=*/true); }
TEST(SortingGradients, Topk) { expect_generated_gradients_pass("aten::topk", /*skip_ties=*/true); }

TEST(SortingGradients, TopkByHand) {
  registry();
  // The top 2 of [1, 4, 3] are 4 (index 1) and 3 (index 2): gradient [0, g0, g1].
  Tensor x = floats({1, 4, 3}, {3}, DType::Float64);
  x.set_requires_grad(true);
  Tensor values = call_all("aten::topk", {x, IValue(int64_t{2})})[0].to_tensor();
  values.backward(floats({10, 20}, {2}, DType::Float64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 10, 20}));
}



// Fake inputs with symbolic sizes give symbolic outputs (test_aot_dispatch_dynamic).
TEST(SortingSymbolic, FakeOutputsHaveSymbolicSizes) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(doubles({0, 1, 2, 3, 4, 5}, {2, 3}), /*dynamic=*/true, "x");
  FakeTensorModeGuard guard(mode);
  Stack sorted = call_all("aten::sort", {x, IValue(int64_t{1}), IValue(false)});
  EXPECT_EQ(sizes_at_5_7(sorted[0].to_tensor()), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(sizes_at_5_7(sorted[1].to_tensor()), (std::vector<int64_t>{5, 7}));
  Stack top = call_all("aten::topk", {x, IValue(int64_t{2}), IValue(int64_t{1}), IValue(true), IValue(true)});
  EXPECT_EQ(sizes_at_5_7(top[0].to_tensor()), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(sizes_at_5_7(top[1].to_tensor()), (std::vector<int64_t>{5, 2}));
}

}  // namespace
}  // namespace opconform::reference
