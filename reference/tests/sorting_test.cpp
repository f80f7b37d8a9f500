// Sorting and selection: hand-derived values for sort (stability, NaN, strides), topk (ties,
// smallest, 0-d) and nonzero (row-major order, 0-d, empty, the fake kernel's dynamic size), then
// gradcheck and gradgradcheck of the formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "opconform/conformance/generate.h"
#include "opconform/conformance/gradcheck.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using conformance::Outcome;

Registry& registry() {
  static auto reg = register_reference_ops(Registry::global());
  return Registry::global();
}

Stack call(std::string_view op, Stack args) { return detail::Ops(registry()).call(op, std::move(args)); }

std::vector<int64_t> sizes(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

Tensor floats(std::vector<double> v, std::vector<int64_t> shape, DType dtype = DType::Float32) {
  return from_vector<double>(v, shape).to(dtype);
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Sorting, SortAscendingDescendingStable) {
  registry();
  Stack s = call("aten::sort", {floats({3, 1, 2}, {3})});
  EXPECT_EQ(s[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(s[1].to_tensor().dtype(), DType::Int64);
  EXPECT_EQ(s[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
  // Ties keep their input order, ascending and descending alike.
  const Tensor ties = floats({2, 1, 2, 1}, {4});
  EXPECT_EQ(call("aten::sort", {ties})[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(call("aten::sort", {ties, IValue(int64_t{0}), IValue(true)})[1].to_tensor().to_vector<int64_t>(),
            (std::vector<int64_t>{0, 2, 1, 3}));
  // NaN sorts as the largest value.
  Stack n = call("aten::sort", {floats({kNaN, 1, -1}, {3})});
  EXPECT_EQ(n[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_TRUE(std::isnan(n[0].to_tensor().to_vector<double>()[2]));
  EXPECT_EQ(call("aten::sort", {floats({kNaN, 1, -1}, {3}), IValue(int64_t{0}), IValue(true)})[1].to_tensor().to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2}));
  // bool sorts false first.
  EXPECT_EQ(call("aten::sort", {from_vector<bool>({true, false}, {2})})[0].to_tensor().to_vector<bool>(),
            (std::vector<bool>{false, true}));
}

TEST(Sorting, SortAlongADimKeepsDenseStrides) {
  registry();
  // [[3, 1], [2, 4]] transposed is [[3, 2], [1, 4]]; sorted along dim 1: [[2, 3], [1, 4]].
  const Tensor t = floats({3, 1, 2, 4}, {2, 2}).transpose(0, 1);
  Stack s = call("aten::sort", {t, IValue(int64_t{1})});
  const Tensor& values = s[0].to_tensor();
  EXPECT_EQ(values.to_vector<double>(), (std::vector<double>{2, 3, 1, 4}));
  EXPECT_EQ(s[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  // A dense input's strides carry over (PyTorch's sort.stable); a broadcast one gets dense ones.
  EXPECT_EQ(std::vector<int64_t>(values.strides().begin(), values.strides().end()), (std::vector<int64_t>{1, 2}));
  Stack e = call("aten::sort", {floats({2, 1}, {1, 2}).expand({3, 2})});
  EXPECT_TRUE(e[0].to_tensor().is_contiguous());
  EXPECT_EQ(e[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 2, 1, 2, 1, 2}));
  // 0-d: the value, index 0.
  Stack z = call("aten::sort", {scalar_tensor(Scalar(5.0))});
  EXPECT_EQ(z[0].to_tensor().item().to_double(), 5);
  EXPECT_EQ(z[1].to_tensor().item().to_int(), 0);
}

TEST(Sorting, Topk) {
  registry();
  const Tensor x = floats({1, 3, 2, 3}, {4});
  Stack largest = call("aten::topk", {x, IValue(int64_t{2})});
  EXPECT_EQ(largest[0].to_tensor().to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_EQ(largest[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));  // lower index first
  Stack smallest = call("aten::topk", {x, IValue(int64_t{3}), IValue(int64_t{0}), IValue(false)});
  EXPECT_EQ(smallest[0].to_tensor().to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(smallest[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1}));
  // Along dim 0 of [[5, 1], [7, 0], [6, 2]]: the top 2 of each column.
  Stack cols = call("aten::topk", {floats({5, 1, 7, 0, 6, 2}, {3, 2}), IValue(int64_t{2}), IValue(int64_t{0})});
  EXPECT_EQ(sizes(cols[0].to_tensor()), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(cols[0].to_tensor().to_vector<double>(), (std::vector<double>{7, 2, 6, 1}));
  EXPECT_EQ(cols[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2, 0}));
  // NaN is the largest.
  EXPECT_EQ(call("aten::topk", {floats({1, kNaN}, {2}), IValue(int64_t{1})})[1].to_tensor().item().to_int(), 1);
  // k = 0 gives empty outputs; a 0-d input gives itself.
  EXPECT_EQ(sizes(call("aten::topk", {x, IValue(int64_t{0})})[0].to_tensor()), (std::vector<int64_t>{0}));
  EXPECT_EQ(call("aten::topk", {scalar_tensor(Scalar(4.0)), IValue(int64_t{0})})[0].to_tensor().item().to_double(), 4);
  try {
    call("aten::topk", {x, IValue(int64_t{5})});
    FAIL() << "k larger than the dim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
  }
}

TEST(Sorting, Nonzero) {
  registry();
  // [[0, 1], [2, 0]]: (0, 1) and (1, 0), in row-major order — also through a transposed view.
  Tensor nz = call("aten::nonzero", {floats({0, 1, 2, 0}, {2, 2})})[0].to_tensor();
  EXPECT_EQ(nz.dtype(), DType::Int64);
  EXPECT_EQ(sizes(nz), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(nz.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  Tensor nt = call("aten::nonzero", {floats({0, 2, 1, 0}, {2, 2}).transpose(0, 1)})[0].to_tensor();
  EXPECT_EQ(nt.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(sizes(call("aten::nonzero", {floats({kNaN, 0}, {2})})[0].to_tensor()), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sizes(call("aten::nonzero", {scalar_tensor(Scalar(3.0))})[0].to_tensor()), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(sizes(call("aten::nonzero", {zeros({0, 3})})[0].to_tensor()), (std::vector<int64_t>{0, 2}));
  // The fake kernel's row count is a new unbacked size.
  FakeTensorMode mode;
  Tensor fake_input = mode.from_tensor(floats({0, 1, 2, 0}, {2, 2}));
  Tensor fake;
  {
    FakeTensorModeGuard guard(mode);
    fake = call("aten::nonzero", {fake_input})[0].to_tensor();
  }
  ASSERT_TRUE(fake.has_symbolic_sizes());
  EXPECT_FALSE(fake.sym_sizes()[0].maybe_as_int().has_value());
  EXPECT_EQ(fake.sym_sizes()[1].maybe_as_int(), 2);
}

// gradcheck and gradgradcheck on generated float64 samples without repeated values (sorting is
// not differentiable at ties).
void expect_gradients(const std::string& op, int count = 25) {
  OperatorHandle handle = registry().get(op);
  conformance::GenerateSpec spec;
  spec.count = count;
  spec.seed = 20240611;
  spec.dtypes = {DType::Float64};
  spec.include_special_values = false;
  int checked = 0, passed = 0;
  for (auto& sample : conformance::generate_samples(handle.schema(), op, spec)) {
    Tensor self = sample.args[0].to_tensor();
    auto values = self.to_vector<double>();
    std::sort(values.begin(), values.end());
    if (std::adjacent_find(values.begin(), values.end()) != values.end()) continue;
    self.set_requires_grad(true);
    ++checked;
    auto first = conformance::gradcheck(handle, sample.args);
    EXPECT_NE(first.outcome, Outcome::failed) << op << ": " << first.message;
    passed += first.outcome == Outcome::passed ? 1 : 0;
    auto second = conformance::gradgradcheck(handle, sample.args);
    EXPECT_NE(second.outcome, Outcome::failed) << op << ": " << second.message;
  }
  EXPECT_GT(checked, 0) << op << ": no sample was checked";
  EXPECT_GT(passed, 0) << op << ": gradcheck passed on no sample";
}

TEST(SortingGradients, Sort) { expect_gradients("aten::sort"); }
TEST(SortingGradients, Topk) { expect_gradients("aten::topk"); }

TEST(SortingGradients, TopkByHand) {
  registry();
  // The top 2 of [1, 4, 3] are 4 (index 1) and 3 (index 2): gradient [0, g0, g1].
  Tensor x = floats({1, 4, 3}, {3}, DType::Float64);
  x.set_requires_grad(true);
  Tensor values = call("aten::topk", {x, IValue(int64_t{2})})[0].to_tensor();
  values.backward(floats({10, 20}, {2}, DType::Float64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 10, 20}));
}

}  // namespace
}  // namespace opconform::reference
