// Hand-derived values and identities for the indexing family. Expected values are worked out by
// hand from the definitions (most from PyTorch's documentation examples), not from the kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/vmap.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using IndexList = std::vector<std::optional<Tensor>>;

// t has these sizes and exactly these values.
void expect_tensor(const Tensor& t, std::vector<int64_t> sizes, std::vector<double> want) {
  ASSERT_EQ(sizes_of(t), sizes);
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "element " << i;
}

// ---- gather / scatter ----

TEST(Indexing, GatherPicksAlongDim) {
  // out[i][j] = self[i][index[i][j]] (dim 1).
  Tensor self = doubles({1, 2, 3, 4}, {2, 2});
  expect_tensor(call("aten::gather", {self, int64_t{1}, longs({0, 0, 1, 0}, {2, 2}), false}), {2, 2}, {1, 1, 4, 3});
  // dim 0 on a transposed self: self.t() = [[1, 3], [2, 4]]; out[i][j] = self.t()[index[i][j]][j].
  expect_tensor(call("aten::gather", {self.transpose(0, 1), int64_t{0}, longs({1, 0}, {1, 2}), false}), {1, 2}, {2, 3});
  // index may be smaller than self in the other dims; 0-d self with a 1-d index.
  expect_tensor(call("aten::gather", {iota({3, 4}), int64_t{0}, longs({2, 1}, {1, 2}), false}), {1, 2}, {8, 5});
  expect_tensor(call("aten::gather", {doubles({7}, {}), int64_t{0}, longs({0, 0, 0}, {3}), false}), {3}, {7, 7, 7});
}

TEST(Indexing, GatherRejectsBadIndicesNamingOpArgumentAndValue) {
  Tensor self = doubles({1, 2, 3}, {3});
  std::string e = error_of("aten::gather", {self, int64_t{0}, longs({3}, {1}), false});
  EXPECT_NE(e.find("aten::gather"), std::string::npos) << e;
  EXPECT_NE(e.find("'index'"), std::string::npos) << e;
  EXPECT_NE(e.find("index 3"), std::string::npos) << e;
  // No negative indices in gather (unlike advanced indexing).
  EXPECT_NE(error_of("aten::gather", {self, int64_t{0}, longs({-1}, {1}), false}).find("index -1"), std::string::npos);
  // int32 indices are taken, as PyTorch 2.x takes them (gather and every scatter); float ones not.
  expect_tensor(call("aten::gather", {self, int64_t{0}, from_vector<int32_t>({2, 0}, {2}), false}), {2}, {3, 1});
  EXPECT_NE(error_of("aten::gather", {self, int64_t{0}, doubles({0}, {1}), false}).find("int64 or int32"),
            std::string::npos);
  EXPECT_NE(error_of("aten::gather", {iota({2, 2}), int64_t{0}, longs({0, 0, 0}, {1, 3}), false}).find("no larger"),
            std::string::npos);
}

TEST(Indexing, ScatterWritesAndTheLastDuplicateWins) {
  // PyTorch's example: zeros(3, 5).scatter(0, [[0, 1, 2, 0]], arange(1, 11).view(2, 5)).
  Tensor src = doubles({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  Tensor out = call("aten::scatter.src", {zeros({3, 5}, DType::Float64), int64_t{0}, longs({0, 1, 2, 0}, {1, 4}), src});
  expect_tensor(out, {3, 5}, {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
  expect_tensor(call("aten::scatter.src",
                     {zeros({3, 5}, DType::Float64), int64_t{0}, from_vector<int32_t>({0, 1, 2, 0}, {1, 4}), src}),
                {3, 5}, {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
  // Duplicates: the last write in row-major order of index wins.
  expect_tensor(call("aten::scatter.src", {zeros({3}, DType::Float64), int64_t{0}, longs({0, 0, 1}, {3}),
                                           doubles({1, 2, 3}, {3})}),
                {3}, {2, 3, 0});
  // The result is contiguous whatever self's layout.
  Tensor t = call("aten::scatter.src", {iota({3, 2}).transpose(0, 1), int64_t{1}, longs({0}, {1, 1}), doubles({9}, {1, 1})});
  expect_tensor(t, {2, 3}, {9, 2, 4, 1, 3, 5});
  EXPECT_EQ(strides_of(t), (std::vector<int64_t>{3, 1}));
  expect_tensor(call("aten::scatter.value", {zeros({2, 4}, DType::Float64), int64_t{1}, longs({1, 2}, {2, 1}), Scalar(1.25)}),
                {2, 4}, {0, 1.25, 0, 0, 0, 0, 1.25, 0});
  // The value is converted to self's dtype as PyTorch's value.to<scalar_t>() (bool(0.5) is true).
  expect_tensor(call("aten::scatter.value", {zeros({2}, DType::Bool), int64_t{0}, longs({1}, {1}), Scalar(0.5)}), {2},
                {0, 1});
}

TEST(Indexing, ScatterAddAccumulatesInTheWideType) {
  expect_tensor(call("aten::scatter_add", {zeros({3}, DType::Float64), int64_t{0}, longs({0, 1, 0, 2, 0}, {5}),
                                           ones({5}, DType::Float64)}),
                {3}, {3, 1, 1});
  // float16: 2048 + 1 + 1 + 1 = 2051, rounded once to 2052 (adding in float16 would stay at 2048).
  Tensor self = full({1}, 2048, DType::Float16);
  Tensor out = call("aten::scatter_add", {self, int64_t{0}, longs({0, 0, 0}, {3}), ones({3}, DType::Float16)});
  expect_tensor(out, {1}, {2052});
}

TEST(Indexing, ScatterReduceFollowsPyTorchsExamples) {
  // src = [1..6], index = [0, 1, 0, 1, 2, 1], input = [1, 2, 3, 4] (torch.Tensor.scatter_reduce_ docs).
  Tensor src = doubles({1, 2, 3, 4, 5, 6}, {6}), index = longs({0, 1, 0, 1, 2, 1}, {6});
  Tensor input = doubles({1, 2, 3, 4}, {4});
  auto reduce = [&](const char* how, bool include_self) {
    return call("aten::scatter_reduce.two", {input, int64_t{0}, index, src, std::string(how), include_self});
  };
  expect_tensor(reduce("sum", true), {4}, {5, 14, 8, 4});
  expect_tensor(reduce("amax", false), {4}, {3, 6, 5, 4});
  expect_tensor(reduce("amin", true), {4}, {1, 2, 3, 4});
  expect_tensor(reduce("prod", true), {4}, {3, 96, 15, 4});
  expect_tensor(reduce("mean", true), {4}, {5.0 / 3, 3.5, 4, 4});
  expect_tensor(reduce("mean", false), {4}, {2, 4, 5, 4});
  // Integer mean divides with floor: (-1 - 2) / 2 = -1.5 -> -2.
  Tensor ints = call("aten::scatter_reduce.two", {zeros({2}, DType::Int64), int64_t{0}, longs({0, 0}, {2}),
                                                  longs({-1, -2}, {2}), std::string("mean"), false});
  expect_tensor(ints, {2}, {-2, 0});
  // amax propagates NaN.
  Tensor nan = call("aten::scatter_reduce.two", {zeros({1}, DType::Float64), int64_t{0}, longs({0, 0}, {2}),
                                                 doubles({NAN, 1}, {2}), std::string("amax"), true});
  EXPECT_TRUE(std::isnan(nan.to_vector<double>()[0]));
  EXPECT_NE(error_of("aten::scatter_reduce.two", {input, int64_t{0}, index, src, std::string("max"), true}).find("'reduce'"),
            std::string::npos);
  EXPECT_NE(error_of("aten::scatter_reduce.two", {zeros({1}, DType::Bool), int64_t{0}, longs({0}, {1}),
                                                   zeros({1}, DType::Bool), std::string("mean"), true})
                .find("bool"),
            std::string::npos);
}

TEST(Indexing, ScatterReduceIntegerMeanSumsInTheDtype) {
  // PyTorch sums an integer mean in self's dtype (wrapping), then divides with floor by the count.
  auto mean = [](const Tensor& self, const Tensor& index, const Tensor& src, bool include_self) {
    return call("aten::scatter_reduce.two", {self, int64_t{0}, index, src, std::string("mean"), include_self});
  };
  // int8: 64 + 64 wraps to -128, / 2 = -64 (not 64).
  Tensor out = mean(floats({1, 1, 1}, {3}, DType::Int8), longs({0, 0}, {2}), floats({64, 64}, {2}, DType::Int8), false);
  EXPECT_EQ(out.dtype(), DType::Int8);
  expect_tensor(out, {3}, {-64, 1, 1});
  // include_self: 100 + 100 + 100 = 300 wraps to 44, / 3 = 14; -100 * 3 = -300 wraps to -44,
  // / 3 floors to -15.
  out = mean(floats({100, -100}, {2}, DType::Int8), longs({0, 0, 1, 1}, {4}), floats({100, 100, -100, -100}, {4}, DType::Int8),
             true);
  expect_tensor(out, {2}, {14, -15});
  // uint8: 200 + 100 = 300 wraps to 44, / 2 = 22.
  out = mean(floats({0}, {1}, DType::UInt8), longs({0, 0}, {2}), floats({200, 100}, {2}, DType::UInt8), false);
  expect_tensor(out, {1}, {22});
  // int16: 4 * -8193 = -32772 wraps to 32764, / 4 = 8191.
  out = mean(floats({0}, {1}, DType::Int16), longs({0, 0, 0, 0}, {4}), floats({-8193, -8193, -8193, -8193}, {4}, DType::Int16),
             false);
  expect_tensor(out, {1}, {8191});
  // A sum that fits is unchanged: (-1 - 2) / 2 floors to -2 in int32 too.
  out = mean(floats({0}, {1}, DType::Int32), longs({0, 0}, {2}), floats({-1, -2}, {2}, DType::Int32), false);
  expect_tensor(out, {1}, {-2});
}

// ---- index_select and advanced indexing ----

TEST(Indexing, IndexSelectTakesWholeSlices) {
  Tensor x = iota({3, 4});
  expect_tensor(call("aten::index_select", {x, int64_t{0}, longs({2, 0}, {2})}), {2, 4}, {8, 9, 10, 11, 0, 1, 2, 3});
  expect_tensor(call("aten::index_select", {x.transpose(0, 1), int64_t{1}, from_vector<int32_t>({1}, {1})}), {4, 1},
                {4, 5, 6, 7});
  expect_tensor(call("aten::index_select", {doubles({5}, {}), int64_t{0}, longs({0}, {})}), {}, {5});
  EXPECT_NE(error_of("aten::index_select", {x, int64_t{1}, longs({-1}, {1})}).find("index -1"), std::string::npos);
}

TEST(Indexing, AdvancedIndexingFollowsNumPysRules) {
  Tensor x = iota({3, 4});
  // Index tensors broadcast together and are iterated as one: x[[0, 2], [1, 3]] = [x[0,1], x[2,3]].
  expect_tensor(call("aten::index.Tensor", {x, IndexList{longs({0, 2}, {2}), longs({1, 3}, {2})}}), {2}, {1, 11});
  // [[0], [2]] with [1, 3] broadcast to [2, 2]; negative values count from the end.
  expect_tensor(call("aten::index.Tensor", {x, IndexList{longs({0, -1}, {2, 1}), longs({1, -1}, {2})}}), {2, 2},
                {1, 3, 9, 11});
  // A None keeps the dim whole: x[:, [3, 0]].
  expect_tensor(call("aten::index.Tensor", {x, IndexList{std::nullopt, longs({3, 0}, {2})}}), {3, 2}, {3, 0, 7, 4, 11, 8});
  // A bool mask selects its true elements in row-major order.
  Tensor mask = bools({false, true, false, false, true, false, false, false, false, false, false, true}, {3, 4});
  expect_tensor(call("aten::index.Tensor", {x, IndexList{mask}}), {3}, {1, 4, 11});
  // Non-adjacent indexed dims go first: y[[0, 1], :, [1, 2]] has shape [2, 3].
  Tensor y = iota({2, 3, 4});
  expect_tensor(call("aten::index.Tensor", {y, IndexList{longs({0, 1}, {2}), std::nullopt, longs({1, 2}, {2})}}), {2, 3},
                {1, 5, 9, 14, 18, 22});
  // Adjacent ones stay in place: y[:, [2, 0], [3, 3]] has shape [2, 2].
  expect_tensor(call("aten::index.Tensor", {y, IndexList{std::nullopt, longs({2, 0}, {2}), longs({3, 3}, {2})}}), {2, 2},
                {11, 3, 23, 15});
}

TEST(Indexing, AdvancedIndexingLaysOutTheResultAsTensorIterator) {
  // self [5, 4, 3] with strides [1, 5, 20] (a permuted contiguous [3, 4, 5]); self[[0, 1]] iterates
  // the non-indexed dims in self's memory order: result [2, 4, 3] with strides [12, 1, 4].
  Tensor self = iota({3, 4, 5}).permute({2, 1, 0});
  Tensor out = call("aten::index.Tensor", {self, IndexList{longs({0, 1}, {2})}});
  EXPECT_EQ(strides_of(out), (std::vector<int64_t>{12, 1, 4}));
  // Values: out[i][j][k] = self[i][j][k] = 20k + 5j + i.
  EXPECT_EQ(out.get({1, 2, 1}).to_double(), 20 + 10 + 1);
}

TEST(Indexing, AdvancedIndexingChecksItsIndices) {
  Tensor x = iota({3, 4});
  std::string e = error_of("aten::index.Tensor", {x, IndexList{longs({3}, {1})}});
  EXPECT_NE(e.find("aten::index.Tensor"), std::string::npos) << e;
  EXPECT_NE(e.find("index 3"), std::string::npos) << e;
  EXPECT_NE(error_of("aten::index.Tensor", {x, IndexList{longs({-4}, {1})}}).find("index -4"), std::string::npos);
  EXPECT_NE(error_of("aten::index.Tensor", {x, IndexList{longs({0, 1}, {2}), longs({0, 1, 2}, {3})}}).find("broadcast"),
            std::string::npos);
  EXPECT_NE(error_of("aten::index.Tensor", {x, IndexList{std::nullopt, std::nullopt, longs({0}, {1})}}).find("too many"),
            std::string::npos);
  EXPECT_NE(error_of("aten::index.Tensor", {x, IndexList{bools({true, false}, {2})}}).find("mask"), std::string::npos);
  EXPECT_NE(error_of("aten::index.Tensor", {x, IndexList{doubles({0}, {1})}}).find("indices"), std::string::npos);
}

TEST(Indexing, AdvancedIndexingWithAMaskHasADataDependentSizeWhenFake) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(iota({3, 4}));
  Tensor mask = mode.from_tensor(bools(std::vector<bool>(12, true), {3, 4}));
  Tensor out;
  {
    FakeTensorModeGuard guard(mode);
    out = call("aten::index.Tensor", {x, IndexList{mask}});
  }
  ASSERT_EQ(out.dim(), 1);
  EXPECT_TRUE(out.sym_sizes()[0].is_symbolic());
  EXPECT_FALSE(out.sym_sizes()[0].hint().has_value());  // unbacked: only the data knows it
}

TEST(Indexing, IndexPutWritesOrAccumulates) {
  Tensor idx = longs({0, 0, 2}, {3}), values = doubles({1, 2, 3}, {3});
  // Without accumulate the last duplicate wins; with it, duplicates add up.
  expect_tensor(call("aten::index_put", {zeros({3}, DType::Float64), IndexList{idx}, values, false}), {3}, {2, 0, 3});
  expect_tensor(call("aten::index_put", {ones({3}, DType::Float64), IndexList{idx}, values, true}), {3}, {4, 1, 4});
  // values broadcast to self[indices]; a mask picks the elements.
  Tensor x = zeros({2, 2}, DType::Float64);
  expect_tensor(call("aten::index_put", {x, IndexList{bools({true, false, false, true}, {2, 2})}, doubles({5}, {1}), false}),
                {2, 2}, {5, 0, 0, 5});
  // The result keeps a dense self's strides (clone), and does not touch self.
  Tensor t = iota({2, 3}).transpose(0, 1);
  Tensor out = call("aten::index_put", {t, IndexList{std::nullopt, longs({1}, {1})}, doubles({-1}, {1}), false});
  EXPECT_EQ(strides_of(out), strides_of(t));
  expect_tensor(out, {3, 2}, {0, -1, 1, -1, 2, -1});
  expect_tensor(t, {3, 2}, {0, 3, 1, 4, 2, 5});
  EXPECT_NE(error_of("aten::index_put", {zeros({3}, DType::Float64), IndexList{idx}, doubles({1, 2}, {2}), false})
                .find("shape mismatch"),
            std::string::npos);
  EXPECT_NE(error_of("aten::index_put", {zeros({3}, DType::Float64), IndexList{idx}, ones({3}, DType::Float32), false})
                .find("dtype"),
            std::string::npos);
}

// ---- select_scatter, slice_scatter, masked_scatter ----

TEST(Indexing, SelectAndSliceScatterKeepSelfsLayout) {
  expect_tensor(call("aten::select_scatter", {zeros({2, 3}, DType::Float64), doubles({1, 2, 3}, {3}), int64_t{0}, int64_t{-1}}),
                {2, 3}, {0, 0, 0, 1, 2, 3});
  // slice(1, None, 2) of 5 elements is positions 1 and 3.
  expect_tensor(call("aten::slice_scatter", {zeros({5}, DType::Float64), doubles({1, 2}, {2}), int64_t{0}, int64_t{1},
                                             IValue(), int64_t{2}}),
                {5}, {0, 1, 0, 2, 0});
  // A strided view with an offset: the result has the same strides and storage offset.
  Tensor base = iota({4, 6});
  Tensor self = base.slice(1, 1, 5, 2);  // [4, 2], strides [6, 2], offset 1
  Tensor out = call("aten::select_scatter", {self, doubles({-1, -2, -3, -4}, {4}), int64_t{1}, int64_t{0}});
  EXPECT_EQ(strides_of(out), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(out.storage_offset(), 1);
  expect_tensor(out, {4, 2}, {-1, 3, -2, 9, -3, 15, -4, 21});
  EXPECT_NE(error_of("aten::slice_scatter", {zeros({5}, DType::Float64), doubles({1}, {1}), int64_t{0}, IValue(), IValue(),
                                             int64_t{1}})
                .find("'src'"),
            std::string::npos);
}

TEST(Indexing, MaskedScatterFillsMaskedElementsInOrder) {
  // mask [True, False] broadcasts over the rows: elements (0, 0) and (1, 0) take source[0], source[1].
  Tensor out = call("aten::masked_scatter", {zeros({2, 2}, DType::Float64), bools({true, false}, {2}),
                                             doubles({1, 2, 3, 4}, {4})});
  expect_tensor(out, {2, 2}, {1, 0, 2, 0});
  // self broadcasts too.
  expect_tensor(call("aten::masked_scatter", {doubles({7, 8}, {2}), bools({false, true, true, false}, {2, 2}),
                                              doubles({1, 2}, {2, 1})}),
                {2, 2}, {7, 1, 2, 8});
  EXPECT_NE(error_of("aten::masked_scatter", {zeros({2}, DType::Float64), bools({true, true}, {2}), doubles({1}, {1})})
                .find("'source'"),
            std::string::npos);
}

// ---- embedding ----

TEST(Indexing, EmbeddingLooksUpRows) {
  Tensor weight = doubles({1, 2, 3, 4, 5, 6}, {3, 2});
  expect_tensor(call("aten::embedding", {weight, longs({2, 0}, {1, 2}), int64_t{-1}, false, false}), {1, 2, 2}, {5, 6, 1, 2});
  expect_tensor(call("aten::embedding", {weight, from_vector<int32_t>({1}, {}), int64_t{-1}, false, false}), {2}, {3, 4});
  EXPECT_NE(error_of("aten::embedding", {weight, longs({3}, {1}), int64_t{-1}, false, false}).find("index 3"),
            std::string::npos);
}

TEST(Indexing, EmbeddingDenseBackwardSumsRowsPerIndex) {
  Tensor grad = doubles({1, 1, 2, 2, 3, 3}, {3, 2});
  Tensor indices = longs({0, 2, 0}, {3});
  auto backward = [&](int64_t padding, bool scale) {
    return call("aten::embedding_dense_backward", {grad, indices, int64_t{3}, padding, scale});
  };
  expect_tensor(backward(-1, false), {3, 2}, {4, 4, 0, 0, 2, 2});
  expect_tensor(backward(-1, true), {3, 2}, {2, 2, 0, 0, 2, 2});  // row 0 used twice: halved
  expect_tensor(backward(2, false), {3, 2}, {4, 4, 0, 0, 0, 0});  // padding row gets nothing
}

// ---- vmap rules ----

TEST(Indexing, VmapRulesBatchIndicesWithoutTheFallback) {
  registry();
  reset_vmap_fallback_counts();
  // gather with a batched index: out[b] = gather(self, 0, index[b]).
  Tensor self = doubles({10, 20, 30}, {3});
  auto gathered = vmap(
      [](const std::vector<Tensor>& xs) {
        return std::vector<Tensor>{call("aten::gather", {xs[0], int64_t{0}, xs[1], false})};
      },
      {std::nullopt, int64_t{0}})({self, longs({2, 0, 1, 1}, {2, 2})});
  expect_tensor(gathered[0], {2, 2}, {30, 10, 20, 20});
  // index_select with a batched index (through gather): out[b] = self[:, index[b]].
  auto selected = vmap(
      [](const std::vector<Tensor>& xs) {
        return std::vector<Tensor>{call("aten::index_select", {xs[0], int64_t{1}, xs[1]})};
      },
      {std::nullopt, int64_t{0}})({iota({2, 3}), longs({2, 0}, {2, 1})});
  expect_tensor(selected[0], {2, 2, 1}, {2, 5, 0, 3});
  // scatter with self batched along dim 1 and a 0-d logical src.
  auto scattered = vmap(
      [](const std::vector<Tensor>& xs) {
        return std::vector<Tensor>{call("aten::scatter.src", {xs[0], int64_t{0}, longs({1}, {1}), xs[1]})};
      },
      {int64_t{1}, int64_t{0}})({zeros({2, 2}, DType::Float64), doubles({7, 8}, {2})});
  expect_tensor(scattered[0], {2, 2}, {0, 7, 0, 8});
  EXPECT_EQ(vmap_fallback_count("aten::gather") + vmap_fallback_count("aten::index_select") +
                vmap_fallback_count("aten::scatter.src"),
            0);
}

// ---- gradients (hand-derived) ----

TEST(Indexing, GatherAndIndexGradientsAddUpRepeatedReads) {
  Tensor x = doubles({1, 2, 3}, {3});
  x.set_requires_grad(true);
  Tensor y = call("aten::gather", {x, int64_t{0}, longs({0, 0, 2}, {3}), false});
  expect_tensor(grad_of(y, x, doubles({1, 10, 100}, {3})), {3}, {11, 0, 100});
  Tensor z = call("aten::index.Tensor", {x, IndexList{longs({2, -1, 1}, {3})}});
  expect_tensor(grad_of(z, x, doubles({1, 10, 100}, {3})), {3}, {0, 100, 11});
  Tensor w = call("aten::index_select", {x, int64_t{0}, longs({1, 1}, {2})});
  expect_tensor(grad_of(w, x, doubles({1, 2}, {2})), {3}, {0, 3, 0});
}

TEST(Indexing, ScatterGradientsFollowTheSurvivingWrites) {
  Tensor self = doubles({1, 2, 3}, {3}), src = doubles({4, 5, 6}, {3});
  self.set_requires_grad(true);
  src.set_requires_grad(true);
  // index [0, 0, 1]: src[1] overwrites src[0] at 0; self[0], self[1] are overwritten, self[2] survives.
  Tensor out = call("aten::scatter.src", {self, int64_t{0}, longs({0, 0, 1}, {3}), src});
  auto g = autograd::grad({out}, {self, src}, {doubles({1, 10, 100}, {3})});
  expect_tensor(g[0], {3}, {0, 0, 100});
  expect_tensor(g[1], {3}, {0, 1, 10});
}

TEST(Indexing, ScatterReduceAmaxSharesTheGradientAmongTies) {
  Tensor self = doubles({2, 0}, {2}), src = doubles({2, 1, 3}, {3});
  self.set_requires_grad(true);
  src.set_requires_grad(true);
  // position 0: max(2; 2, 1) = 2, tied by self[0] and src[0]; position 1: max(0; 3) = 3 from src[2].
  Tensor out = call("aten::scatter_reduce.two", {self, int64_t{0}, longs({0, 0, 1}, {3}), src, std::string("amax"), true});
  expect_tensor(out, {2}, {2, 3});
  auto g = autograd::grad({out}, {self, src}, {doubles({1, 1}, {2})});
  expect_tensor(g[0], {2}, {0.5, 0});
  expect_tensor(g[1], {3}, {0.5, 0, 1});
}

TEST(Indexing, ScatterReduceProdGradientIsTheProductOfTheOthers) {
  // position 0: self 2 and src 0, 5 -> product 0; d/dself = 0 * 5 = 0, d/dsrc[0] = 2 * 5 = 10, d/dsrc[1] = 0.
  Tensor self = doubles({2}, {1}), src = doubles({0, 5}, {2});
  self.set_requires_grad(true);
  src.set_requires_grad(true);
  Tensor out = call("aten::scatter_reduce.two", {self, int64_t{0}, longs({0, 0}, {2}), src, std::string("prod"), true});
  auto g = autograd::grad({out}, {self, src}, {doubles({1}, {1})});
  expect_tensor(g[0], {1}, {0});
  expect_tensor(g[1], {2}, {10, 0});
}

TEST(Indexing, EmbeddingGradientSkipsThePaddingRow) {
  Tensor weight = doubles({1, 2, 3, 4, 5, 6}, {3, 2});
  weight.set_requires_grad(true);
  Tensor out = call("aten::embedding", {weight, longs({0, 1, 0}, {3}), int64_t{1}, false, false});
  expect_tensor(grad_of(out, weight, ones({3, 2}, DType::Float64)), {3, 2}, {2, 2, 0, 0, 0, 0});
}

}  // namespace
}  // namespace opconform::reference
