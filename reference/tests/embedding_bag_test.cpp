// The embedding_bag family (_embedding_bag): hand-derived bag reductions and the auxiliary
// outputs of PyTorch's CPU kernel (offset2bag, bag_size, max_indices, per mode), the
// errors, an identity with embedding, and the gradients of weight and per_sample_weights.
#include <gtest/gtest.h>

#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

constexpr const char* kOp = "aten::_embedding_bag";

// Row r of the 4x3 table is [3r, -(3r + 1), (3r + 2) / 2]: rows 0..3 are
// [0 -1 1], [3 -4 2.5], [6 -7 4], [9 -10 5.5].
Tensor table(DType dtype = DType::Float64) {
  std::vector<double> v;
  for (int r = 0; r < 4; ++r) v.insert(v.end(), {3.0 * r, -(3.0 * r + 1), (3.0 * r + 2) / 2});
  return floats(v, {4, 3}, dtype);
}

struct Bag {
  Tensor indices = longs({0, 1, 3, 1, 2}, {5});
  Tensor offsets = longs({0, 2, 2}, {3});  // bags {0, 1}, {}, {3, 1, 2}
  bool scale_grad_by_freq = false;
  int64_t mode = 0;
  IValue per_sample_weights;
  bool include_last_offset = false;
  int64_t padding_idx = -1;
  Stack args(const Tensor& weight) const {
    return {weight, indices, offsets, IValue(scale_grad_by_freq), IValue(mode), IValue(false), per_sample_weights,
            IValue(include_last_offset), IValue(padding_idx)};
  }
};

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

TEST(EmbeddingBag, SumMeanMaxOfEachBag) {
  Bag bag;
  Stack r = call_all(kOp, bag.args(table()));
  // Sum: bag 0 = row 0 + row 1, bag 1 empty, bag 2 = rows 3 + 1 + 2.
  expect_values(r[0].to_tensor(), {3, -5, 3.5, 0, 0, 0, 18, -21, 12});
  EXPECT_EQ(ints(r[1].to_tensor()), (Ints{0, 0, 2, 2, 2}));  // float64: offset2bag is materialised
  EXPECT_EQ(ints(r[2].to_tensor()), (Ints{0, 0, 0}));         // sum zeroes bag_size
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{0, 0, 0}));
  bag.mode = 1;
  r = call_all(kOp, bag.args(table()));
  expect_values(r[0].to_tensor(), {1.5, -2.5, 1.75, 0, 0, 0, 6, -7, 4});
  EXPECT_EQ(ints(r[2].to_tensor()), (Ints{2, 0, 3}));
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{2, 0, 3}));  // a copy of bag_size
  bag.mode = 2;
  r = call_all(kOp, bag.args(table()));
  expect_values(r[0].to_tensor(), {3, -1, 2.5, 0, 0, 0, 9, -4, 5.5});
  EXPECT_EQ(sizes_of(r[3].to_tensor()), (Ints{3, 3}));
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{1, 0, 1, 0, 0, 0, 3, 1, 3}));  // the row of each maximum; 0 when empty
  for (const auto& v : r) EXPECT_TRUE(v.to_tensor().is_contiguous());
}

TEST(EmbeddingBag, PaddingEntriesAreSkippedAndNotCounted) {
  Bag bag;
  bag.padding_idx = 1;  // bags {0}, {}, {3, 2}
  Stack r = call_all(kOp, bag.args(table(DType::Float32)));
  expect_values(r[0].to_tensor(), {0, -1, 1, 0, 0, 0, 15, -17, 9.5});
  EXPECT_EQ(ints(r[1].to_tensor()), (Ints{0, 0, 2, 2, 2}));  // float32 off the fast path: materialised
  bag.mode = 1;
  r = call_all(kOp, bag.args(table()));
  expect_values(r[0].to_tensor(), {0, -1, 1, 0, 0, 0, 7.5, -8.5, 4.75});
  EXPECT_EQ(ints(r[2].to_tensor()), (Ints{1, 0, 2}));
  bag.mode = 2;
  r = call_all(kOp, bag.args(table()));
  expect_values(r[0].to_tensor(), {0, -1, 1, 0, 0, 0, 9, -7, 5.5});
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{0, 0, 0, 0, 0, 0, 3, 2, 3}));
  // A bag of padding only is empty: zeros, and a mean of 0 / max(0, 1).
  Bag pads;
  pads.indices = longs({3, 3, 0}, {3});
  pads.offsets = longs({0, 2}, {2});
  pads.padding_idx = 3;
  pads.mode = 1;
  r = call_all(kOp, pads.args(table()));
  expect_values(r[0].to_tensor(), {0, 0, 0, 0, -1, 1});
  EXPECT_EQ(ints(r[2].to_tensor()), (Ints{0, 1}));
}

TEST(EmbeddingBag, EveryDtypeTakesTheGeneralPath) {
  // Sum over float32, float16 or bfloat16 gives what float64 gives, offset2bag included (PyTorch's
  // fast path returns an empty one there: Note [Embedding bag outputs]).
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    Stack r = call_all(kOp, Bag().args(table(d)));
    EXPECT_EQ(r[0].to_tensor().dtype(), d);
    expect_values(r[0].to_tensor(), {3, -5, 3.5, 0, 0, 0, 18, -21, 12});
    EXPECT_EQ(ints(r[1].to_tensor()), (Ints{0, 0, 2, 2, 2}));
    EXPECT_EQ(ints(r[2].to_tensor()), (Ints{0, 0, 0}));
  }
  // Any negative padding_idx means none.
  Bag none;
  none.padding_idx = -2;
  none.mode = 1;
  expect_values(call(kOp, none.args(table(DType::Float32))), {1.5, -2.5, 1.75, 0, 0, 0, 6, -7, 4});
}

TEST(EmbeddingBag, PerSampleWeightsScaleEachRow) {
  Bag bag;
  bag.indices = longs({0, 1, 3}, {3});
  bag.offsets = longs({0, 1}, {2});
  bag.per_sample_weights = IValue(doubles({2, 3, 4}, {3}));
  // bag 0 = 2 row 0; bag 1 = 3 row 1 + 4 row 3.
  expect_values(call(kOp, bag.args(table())), {0, -2, 2, 45, -52, 29.5});
  bag.padding_idx = 1;
  expect_values(call(kOp, bag.args(table())), {0, -2, 2, 36, -40, 22});
}

TEST(EmbeddingBag, IncludeLastOffsetEndsTheLastBag) {
  Bag bag;
  bag.offsets = longs({0, 2, 2, 5}, {4});
  bag.include_last_offset = true;
  Stack r = call_all(kOp, bag.args(table()));
  expect_values(r[0].to_tensor(), {3, -5, 3.5, 0, 0, 0, 18, -21, 12});
  // A last offset short of n: off the fast path the later indices join the last bag ...
  Bag trailing;
  trailing.offsets = longs({0, 2, 3}, {3});  // two bags: {0, 1}, {3} and then 2, 1
  trailing.include_last_offset = true;
  r = call_all(kOp, trailing.args(table()));
  expect_values(r[0].to_tensor(), {3, -5, 3.5, 18, -21, 12});
  EXPECT_EQ(ints(r[1].to_tensor()), (Ints{0, 0, 1, 1, 1}));
  // ... in every dtype (PyTorch's fast path leaves them out of float32 sums and means, though
  // bag_size counts them), and mean divides by all three.
  expect_values(call(kOp, trailing.args(table(DType::Float32))), {3, -5, 3.5, 18, -21, 12});
  trailing.mode = 1;
  r = call_all(kOp, trailing.args(table(DType::Float32)));
  expect_values(r[0].to_tensor(), {1.5, -2.5, 1.75, 6, -7, 4});
  EXPECT_EQ(ints(r[2].to_tensor()), (Ints{2, 3}));
  // Read, they are range-checked too.
  Bag beyond;
  beyond.indices = longs({0, 1, 9}, {3});
  beyond.offsets = longs({0, 2}, {2});
  beyond.include_last_offset = true;
  EXPECT_NE(error_of(kOp, beyond.args(table(DType::Float32))).find("out of range"), std::string::npos);
}

TEST(EmbeddingBag, IndexDtypesPromote) {
  Bag bag;
  bag.mode = 2;
  bag.indices = longs({0, 1, 3}, {3}).to(DType::Int32);
  bag.offsets = longs({0, 1}, {2}).to(DType::Int32);
  Stack r = call_all(kOp, bag.args(table(DType::Float32)));
  for (int k = 1; k < 4; ++k) EXPECT_EQ(r[k].to_tensor().dtype(), DType::Int32);
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{0, 0, 0, 3, 1, 3}));
  bag.offsets = longs({0, 1}, {2});  // int32 indices with int64 offsets: int64 results
  r = call_all(kOp, bag.args(table(DType::Float32)));
  for (int k = 1; k < 4; ++k) EXPECT_EQ(r[k].to_tensor().dtype(), DType::Int64);
}

TEST(EmbeddingBag, EmptyBagsIndicesAndWidths) {
  Bag none;  // no indices: every bag empty
  none.indices = longs({}, {0});
  none.offsets = longs({0, 0}, {2});
  none.mode = 2;
  Stack r = call_all(kOp, none.args(table()));
  expect_values(r[0].to_tensor(), {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{0, 0, 0, 0, 0, 0}));
  Bag no_bags;  // indices but no bag: offset2bag is -1 (PyTorch's cumsum of no starts)
  no_bags.indices = longs({0, 1}, {2});
  no_bags.offsets = longs({}, {0});
  no_bags.mode = 1;
  r = call_all(kOp, no_bags.args(table()));
  EXPECT_EQ(sizes_of(r[0].to_tensor()), (Ints{0, 3}));
  EXPECT_EQ(ints(r[1].to_tensor()), (Ints{-1, -1}));
  Bag narrow;  // width 0
  narrow.mode = 2;
  r = call_all(kOp, narrow.args(doubles({}, {4, 0})));
  EXPECT_EQ(sizes_of(r[0].to_tensor()), (Ints{3, 0}));
  EXPECT_EQ(sizes_of(r[3].to_tensor()), (Ints{3, 0}));
}

TEST(EmbeddingBag, MaxKeepsTheFirstOfTiesAndANaNItStartsWith) {
  Bag bag;
  bag.mode = 2;
  bag.indices = longs({0, 1, 2, 1, 0}, {5});
  bag.offsets = longs({0, 3}, {2});
  Stack r = call_all(kOp, bag.args(doubles({kNaN, 1, 2, kNaN, 0, 5}, {3, 2})));
  expect_values(r[0].to_tensor(), {kNaN, 5, 2, kNaN});
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{0, 2, 1, 1}));
  bag.indices = longs({2, 1, 0}, {3});
  bag.offsets = longs({0}, {1});
  r = call_all(kOp, bag.args(doubles({1, 1, 1, 2, 1, 2}, {3, 2})));
  EXPECT_EQ(ints(r[3].to_tensor()), (Ints{2, 2}));  // a later equal value does not replace it
}

TEST(EmbeddingBag, OneIndexPerBagIsEmbedding) {
  const Tensor indices = longs({3, 0, 2, 2, 1}, {5});
  Bag bag;
  bag.indices = indices;
  bag.offsets = longs({0, 1, 2, 3, 4}, {5});
  for (int64_t mode : {0, 1, 2}) {
    bag.mode = mode;
    EXPECT_EQ(values(call(kOp, bag.args(table()))), values(call("aten::embedding", {table(), indices}))) << mode;
  }
}

TEST(EmbeddingBag, ChecksNameTheOpAndTheArgument) {
  auto error = [](const Bag& bag, const Tensor& weight) { return error_of(kOp, bag.args(weight)); };
  auto expect_error = [&](const Bag& bag, const Tensor& weight, const std::string& what) {
    const std::string e = error(bag, weight);
    EXPECT_NE(e.find("aten::_embedding_bag"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  Bag oob;
  oob.indices = longs({0, 4}, {2});
  oob.offsets = longs({0}, {1});
  expect_error(oob, table(), "out of range");
  oob.indices = longs({0, -1}, {2});
  expect_error(oob, table(DType::Float32), "out of range");
  oob.mode = 2;
  expect_error(oob, table(), "out of range");
  Bag offsets;
  offsets.offsets = longs({1, 2}, {2});
  expect_error(offsets, table(), "start at 0");
  offsets.offsets = longs({0, 6}, {2});
  expect_error(offsets, table(), "must not exceed");
  offsets.offsets = longs({0, 3, 1}, {3});
  expect_error(offsets, table(), "non-decreasing");
  Bag weights;
  weights.per_sample_weights = IValue(doubles({1, 1, 1, 1, 1}, {5}));
  weights.mode = 1;
  expect_error(weights, table(), "only supported with mode=0");
  weights.mode = 0;
  expect_error(weights, table(DType::Float32), "weight's dtype");
  weights.per_sample_weights = IValue(doubles({1, 1, 1}, {3}));
  expect_error(weights, table(), "one weight per index");
  expect_error(Bag(), longs({0, 1, 2, 3}, {4, 1}), "weight");
  expect_error(Bag(), doubles({1, 2, 3, 4}, {4}), "must be 2-D");
  Bag index;
  index.indices = doubles({0, 1}, {2});
  expect_error(index, table(), "must be int64 or int32");
  index.indices = longs({0, 1, 2, 3}, {2, 2});
  expect_error(index, table(), "'indices' must be 1-D");
  Bag last;
  last.offsets = longs({}, {0});
  last.include_last_offset = true;
  expect_error(last, table(), "at least one entry");
  Bag mode;
  mode.mode = 3;
  expect_error(mode, table(), "'mode'");
  // int16 indices with int64 offsets promote to int64 and pass, as in PyTorch.
  Bag small;
  small.indices = longs({0, 1, 3, 1, 2}, {5}).to(DType::Int16);
  EXPECT_EQ(error(small, table()), "");
}

TEST(EmbeddingBag, WeightGradientsPerMode) {
  const Tensor g = iota({3, 3}).to(DType::Float64);  // the gradient of bag b, column d: 3b + d (+1 below)
  const Tensor weights = ops().add(g, Scalar(1.0));  // [[1 2 3] [4 5 6] [7 8 9]]
  auto weight_grad = [&](const Bag& bag) {
    Tensor w = leaf(table());
    return grad_of(call(kOp, bag.args(w)), w, weights);
  };
  Bag bag;  // bags {0, 1}, {}, {3, 1, 2}
  expect_values(weight_grad(bag), {1, 2, 3, 8, 10, 12, 7, 8, 9, 7, 8, 9});
  bag.mode = 1;  // divided by the bag sizes 2 and 3
  expect_values(weight_grad(bag), {0.5, 1, 1.5, 0.5 + 7.0 / 3, 1 + 8.0 / 3, 1.5 + 3, 7.0 / 3, 8.0 / 3, 3, 7.0 / 3, 8.0 / 3, 3});
  bag.padding_idx = 1;  // bags {0}, {}, {3, 2}: row 1 gets nothing
  expect_values(weight_grad(bag), {1, 2, 3, 0, 0, 0, 3.5, 4, 4.5, 3.5, 4, 4.5});
  bag.padding_idx = -1;
  bag.mode = 2;  // to the row of each maximum: [1 0 1] for bag 0, [3 1 3] for bag 2
  expect_values(weight_grad(bag), {0, 2, 0, 1, 8, 3, 0, 0, 0, 7, 0, 9});
  bag.scale_grad_by_freq = true;  // max ignores it
  expect_values(weight_grad(bag), {0, 2, 0, 1, 8, 3, 0, 0, 0, 7, 0, 9});
}

TEST(EmbeddingBag, ScaleGradByFreqDividesByEachRowsFrequency) {
  Bag bag;
  bag.indices = longs({2, 0, 0, 1, 3, 3, 3}, {7});
  bag.offsets = longs({0, 3}, {2});
  bag.scale_grad_by_freq = true;
  Tensor w = leaf(table());
  // Row 0 twice in bag 0 (/2), row 3 three times in bag 1 (/3): each row gets its bag's gradient
  // once. (PyTorch 2.11's CPU kernel gives rows 1 and 3 [2 2.5 3] and [12 15 18] here: it
  // divides by the frequency of another row.)
  expect_values(grad_of(call(kOp, bag.args(w)), w, doubles({1, 2, 3, 4, 5, 6}, {2, 3})),
                {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
}

TEST(EmbeddingBag, PerSampleWeightsGradients) {
  Bag bag;
  bag.indices = longs({0, 1, 3, 1}, {4});
  bag.offsets = longs({0, 2}, {2});
  const Tensor g = doubles({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = leaf(table()), psw = leaf(doubles({2, 3, 4, 5}, {4}));
  bag.per_sample_weights = IValue(psw);
  auto gs = grads_of(call(kOp, bag.args(w)), {w, psw}, g);
  expect_values(gs[0], {2, 4, 6, 3 * 1 + 5 * 4, 3 * 2 + 5 * 5, 3 * 3 + 5 * 6, 0, 0, 0, 16, 20, 24});
  expect_values(gs[1], {1, 2.5, 19, 7});  // each index: its bag's gradient . its row
  bag.padding_idx = 1;
  gs = grads_of(call(kOp, bag.args(w)), {w, psw}, g);
  expect_values(gs[0], {2, 4, 6, 0, 0, 0, 0, 0, 0, 16, 20, 24});
  expect_values(gs[1], {1, 0, 19, 0});
}

TEST(EmbeddingBag, IndicesPastTheLastOffsetGetTheLastBagsGradient) {
  Bag trailing;  // two bags; indices 3 and 4 follow the last offset and join bag 1 (rows 3, 1, 2)
  trailing.offsets = longs({0, 2, 3}, {3});
  trailing.include_last_offset = true;
  const Tensor g = doubles({1, 2, 3, 4, 5, 6}, {2, 3});
  for (DType d : {DType::Float64, DType::Float32}) {
    Tensor w = leaf(table(d));
    expect_values(grad_of(call(kOp, trailing.args(w)), w, g.to(d)), {1, 2, 3, 5, 7, 9, 4, 5, 6, 4, 5, 6});
  }
  trailing.mode = 1;
  Tensor w = leaf(table());
  expect_values(grad_of(call(kOp, trailing.args(w)), w, g),
                {0.5, 1, 1.5, 0.5 + 4.0 / 3, 1 + 5.0 / 3, 1.5 + 2, 4.0 / 3, 5.0 / 3, 2, 4.0 / 3, 5.0 / 3, 2});
}

TEST(EmbeddingBag, GeneratedGradientsPass) {
  Bag bag;
  bag.per_sample_weights = IValue(leaf(doubles({0.5, -1, 2, 1.5, 3}, {5})));
  expect_gradients_pass(kOp, bag.args(leaf(table())));
  expect_generated_gradients_pass(kOp, false, 12);
}

}  // namespace
}  // namespace opconform::reference
