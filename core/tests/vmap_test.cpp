// vmap: rules, the per-sample fallback, in_dims/out_dims, nested levels, error messages.
#include "opconform/core/vmap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;

// Elementwise product with broadcasting, float32 CPU.
Tensor mul_cpu(const Tensor& a, const Tensor& b) {
  auto shape = broadcast_shapes(a.sizes(), b.sizes());
  Tensor ac = a.expand(shape).contiguous(), bc = b.expand(shape).contiguous();
  Tensor out = empty(shape, a.options());
  const float* pa = ac.const_data_ptr<float>();
  const float* pb = bc.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) po[i] = pa[i] * pb[i];
  return out;
}

// Sum over one dimension, float32 CPU.
Tensor sum_dim_cpu(const Tensor& a, int64_t dim) {
  if (dim < 0) dim += a.dim();
  std::vector<int64_t> perm, out_sizes;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d != dim) {
      perm.push_back(d);
      out_sizes.push_back(a.size(d));
    }
  }
  perm.push_back(dim);
  Tensor c = a.permute(perm).contiguous();
  Tensor out = empty(out_sizes, a.options());
  const int64_t n = a.size(dim);
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    float s = 0;
    for (int64_t k = 0; k < n; ++k) s += in[i * n + k];
    o[i] = s;
  }
  return out;
}

Tensor range(std::initializer_list<int64_t> sizes, float start = 1) {
  Tensor t = empty(sizes);
  float* p = t.mutable_data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = start + static_cast<float>(i);
  return t;
}

class VmapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_vmap_fallback_counts();
    lib.define("mul(Tensor a, Tensor b) -> Tensor");
    lib.define("sum_dim(Tensor a, int dim) -> Tensor");
    lib.define("numel(Tensor a) -> int");
    lib.define("scale_(Tensor(a!) a) -> Tensor(a!)");
    lib.define("noise(Tensor a) -> Tensor", {Tag::nondeterministic_seeded});
    // A backward op's shape: output_mask false gives an undefined output (as PyTorch).
    lib.define("masked_pair(Tensor a, bool[2] output_mask) -> (Tensor, Tensor)");
    lib.impl("mul", mul_cpu, DispatchKey::CPU);
    lib.impl("sum_dim", sum_dim_cpu, DispatchKey::CPU);
    lib.impl("numel", [](const Tensor& a) { return a.numel(); }, DispatchKey::CPU);
    lib.impl("scale_", [](const Tensor& a) { return a; }, DispatchKey::CPU);
    lib.impl("noise", [](const Tensor& a) { return a.clone(); }, DispatchKey::CPU);
    lib.impl("masked_pair", [](const Tensor& a, std::vector<bool> mask) {
      // mask {false, true}: the second output is undefined for the samples whose first element
      // is negative only, as a kernel inconsistent across the batch would be.
      bool second = mask[1] && (a.numel() == 0 || a.const_data_ptr<float>()[0] >= 0 || mask[0]);
      return std::tuple{mask[0] ? a.clone() : Tensor(), second ? a.clone() : Tensor()};
    }, DispatchKey::CPU);
  }

  // The register_vmap rule for t::mul: both batches to the front (an unbatched side expands),
  // then t::mul itself on the physical tensors. Assumes operands of equal logical rank.
  void register_mul_rule() {
    lib.impl("mul", make_vmap_kernel([this](const VmapInfo& info, const Stack& in, const auto& dims) {
               ++mul_rule_calls;
               Tensor a = move_batch_dim(in[0].to_tensor(), dims[0], 0, info.batch_size);
               Tensor b = move_batch_dim(in[1].to_tensor(), dims[1], 0, info.batch_size);
               return std::pair{Stack{IValue(mul(a, b))}, std::vector<std::optional<int64_t>>{0}};
             }),
             DispatchKey::Batched);
  }

  Tensor mul(const Tensor& a, const Tensor& b) {
    return registry.get("t::mul").typed<Tensor(const Tensor&, const Tensor&)>().call(a, b);
  }
  Tensor sum_dim(const Tensor& a, int64_t dim) {
    return registry.get("t::sum_dim").typed<Tensor(const Tensor&, int64_t)>().call(a, dim);
  }

  Registry registry;
  Library lib{"t", LibraryKind::DEF, std::nullopt, registry};
  RegistrationHandle fallback = install_vmap_fallback(registry);
  int mul_rule_calls = 0;
};

TEST_F(VmapTest, RuleRunsInsteadOfTheFallback) {
  register_mul_rule();
  Tensor x = range({3, 4}), y = range({3, 4}, 10);
  auto f = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], in[1])}; }, {0, 0});
  Tensor out = f({x, y})[0];
  EXPECT_TRUE(equal(out, mul_cpu(x, y)));
  EXPECT_EQ(mul_rule_calls, 1);
  EXPECT_EQ(vmap_fallback_count("t::mul"), 0);
}

TEST_F(VmapTest, FallbackMatchesAPerSampleLoopAndCounts) {
  Tensor x = range({3, 4, 5});
  auto f = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum_dim(in[0], 1)}; }, {0});
  Tensor out = f({x})[0];
  ASSERT_EQ(out.sizes().size(), 2u);
  EXPECT_EQ(out.size(0), 3);
  EXPECT_EQ(out.size(1), 4);
  for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(equal(out.select(0, b), sum_dim_cpu(x.select(0, b), 1))) << b;
  EXPECT_EQ(vmap_fallback_count("t::sum_dim"), 1);
  EXPECT_EQ(vmap_fallback_count("t::mul"), 0);
  reset_vmap_fallback_counts();
  EXPECT_EQ(vmap_fallback_count("t::sum_dim"), 0);
}

TEST_F(VmapTest, InsideTheFunctionInputsAreLogicalBatchedTensors) {
  Tensor x = range({3, 4, 5});
  std::vector<int64_t> logical;
  int64_t level = 0;
  vmap([&](const std::vector<Tensor>& in) {
    logical.assign(in[0].sizes().begin(), in[0].sizes().end());
    EXPECT_TRUE(is_batched(in[0]));
    EXPECT_TRUE(in[0].key_set().has(DispatchKey::Batched));
    EXPECT_EQ(batched_info(in[0])->bdim, 1);
    level = current_vmap_level();
    EXPECT_EQ(batched_info(in[0])->level, level);
    // A wrapper has no data of its own: reading it is an error, not sample 0.
    EXPECT_THROW(in[0].to_vector<float>(), Error);
    return std::vector<Tensor>{in[0]};
  }, {1})({x});
  EXPECT_EQ(logical, (std::vector<int64_t>{3, 5}));
  EXPECT_GT(level, 0);
  EXPECT_EQ(current_vmap_level(), 0);
}

TEST_F(VmapTest, UnbatchedAndNegativeInDims) {
  register_mul_rule();
  Tensor x = range({4, 3});  // batch of 3 in the last dim
  Tensor w = range({4}, 7);  // the same for every sample
  auto f = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], in[1])}; },
                {-1, std::nullopt});
  Tensor out = f({x, w})[0];
  ASSERT_EQ(out.dim(), 2);
  EXPECT_EQ(out.size(0), 3);
  for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(equal(out.select(0, b), mul_cpu(x.select(1, b), w))) << b;
  EXPECT_EQ(mul_rule_calls, 1);

  // Through the fallback too: the unbatched argument reaches every sample unchanged.
  Tensor v = range({3, 4});
  auto g = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum_dim(in[0], -1)}; }, {-2});
  EXPECT_TRUE(equal(g({v})[0], sum_dim_cpu(v, 1)));
}

TEST_F(VmapTest, OutDimsPlaceTheBatchAndExpandUnbatchedOutputs) {
  Tensor x = range({3, 4, 5});
  Tensor c = range({2});
  auto f = vmap([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum_dim(in[0], 0), c};  // c does not depend on the batch
  }, {0}, {1, 0});
  auto outs = f({x});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].size(0), 5);
  EXPECT_EQ(outs[0].size(1), 3);
  for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(equal(outs[0].select(1, b), sum_dim_cpu(x.select(0, b), 0)));
  ASSERT_EQ(outs[1].dim(), 2);
  EXPECT_EQ(outs[1].size(0), 3);
  for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(equal(outs[1].select(0, b), c));

  // out_dims None is for outputs that do not depend on the batch.
  auto g = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0]}; }, {0}, {std::nullopt});
  EXPECT_THROW(g({x}), Error);
  auto h = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{c}; }, {0}, {std::nullopt});
  EXPECT_TRUE(h({x})[0].is_same(c));
}

TEST_F(VmapTest, NestedVmapStripsOneLevelAtATime) {
  register_mul_rule();
  Tensor x = range({2, 3, 4});
  std::vector<int64_t> levels;
  auto inner = vmap([&](const std::vector<Tensor>& in) {
    levels.push_back(current_vmap_level());
    return std::vector<Tensor>{sum_dim(mul(in[0], in[0]), 0)};
  }, {0});
  auto outer = vmap([&](const std::vector<Tensor>& in) {
    levels.push_back(current_vmap_level());
    EXPECT_EQ(in[0].dim(), 2);  // [3, 4] at the outer level
    return inner(in);
  }, {0});
  Tensor out = outer({x})[0];
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_LT(levels[0], levels[1]);
  ASSERT_EQ(out.dim(), 2);
  EXPECT_EQ(out.size(0), 2);
  EXPECT_EQ(out.size(1), 3);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      Tensor sample = x.select(0, i).select(0, j);
      EXPECT_FLOAT_EQ(out.get({i, j}).to<float>(), sum_dim_cpu(mul_cpu(sample, sample), 0).item().to<float>());
    }
  }
  // mul's rule ran once per level; sum_dim fell back once at the inner level and once per inner
  // sample at the outer level.
  EXPECT_EQ(mul_rule_calls, 2);
  EXPECT_EQ(vmap_fallback_count("t::sum_dim"), 1 + 3);
}

TEST_F(VmapTest, NestedVmapOverDifferentDimsWithACapturedOuterTensor) {
  register_mul_rule();
  Tensor x = range({2, 4});      // outer batch 2
  Tensor y = range({4, 3}, 20);  // inner batch 3 in dim 1
  auto outer = vmap([&](const std::vector<Tensor>& xs) {
    // xs[0] (outer level) is captured by the inner function, unbatched at the inner level.
    // The second output is the captured tensor itself: unbatched at the inner level, so it is
    // expanded there (at out_dim 1, behind the outer batch dim of its physical value).
    auto inner = vmap([&](const std::vector<Tensor>& ys) { return std::vector<Tensor>{mul(xs[0], ys[0]), xs[0]}; },
                      {1}, {0, 1});
    return inner({y});
  }, {0});
  auto outs = outer({x});
  Tensor out = outs[0];  // [2, 3, 4]
  ASSERT_EQ(out.dim(), 3);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_TRUE(equal(out.select(0, i).select(0, j), mul_cpu(x.select(0, i), y.select(1, j)))) << i << "," << j;
    }
  }
  Tensor copies = outs[1];  // [2, 4, 3]: copies[i, :, j] = x[i]
  ASSERT_EQ(copies.dim(), 3);
  EXPECT_EQ(copies.size(1), 4);
  EXPECT_EQ(copies.size(2), 3);
  for (int64_t j = 0; j < 3; ++j) EXPECT_TRUE(equal(copies.select(2, j), x)) << j;
}

TEST_F(VmapTest, NestedFallbackWithBatchDimsInTheMiddle) {
  Tensor x = range({3, 2, 4});  // outer batch (2) in dim 1, inner batch (3) in dim 0 of what is left
  auto inner = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum_dim(in[0], 0)}; }, {0});
  auto outer = vmap([&](const std::vector<Tensor>& in) { return inner(in); }, {1});
  Tensor out = outer({x})[0];  // [2, 3]
  ASSERT_EQ(out.dim(), 2);
  EXPECT_EQ(out.size(0), 2);
  EXPECT_EQ(out.size(1), 3);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(out.get({i, j}).to<float>(), sum_dim_cpu(x.select(0, j).select(0, i), 0).item().to<float>());
    }
  }
}

TEST_F(VmapTest, BatchSizeMismatchNamesTheArguments) {
  auto f = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0]}; }, {0, 1});
  try {
    f({range({3, 2}), range({2, 4})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("input 0 has size 3 at dim 0, input 1 has size 4 at dim 1"));
  }
  EXPECT_EQ(current_vmap_level(), 0);
  EXPECT_THROW(vmap(f, {2})({range({3, 2})}), Error);                    // in_dim out of range
  EXPECT_THROW(vmap(f, {0, 0})({range({3, 2})}), Error);                 // in_dims count
  EXPECT_THROW(vmap(f, {std::nullopt})({range({3, 2})}), Error);         // nothing batched
}

TEST_F(VmapTest, FallbackRefusesMutationNonTensorOutputsAndRandomness) {
  Tensor x = range({3, 2});
  auto call = [&](const char* name, Randomness r = Randomness::Error) {
    return vmap([&, name](const std::vector<Tensor>& in) {
      Stack s{IValue(in[0])};
      registry.get(name).call_boxed(s);
      return std::vector<Tensor>{s[0].is_tensor() ? s[0].to_tensor() : in[0]};
    }, {0}, {0}, r)({x});
  };
  EXPECT_THAT([&] { call("t::scale_"); }, ::testing::ThrowsMessage<Error>(HasSubstr("write their inputs")));
  EXPECT_THAT([&] { call("t::numel"); }, ::testing::ThrowsMessage<Error>(HasSubstr("only handles tensor outputs")));
  EXPECT_THAT([&] { call("t::noise"); }, ::testing::ThrowsMessage<Error>(HasSubstr("randomness=error")));
  EXPECT_TRUE(equal(call("t::noise", Randomness::Different)[0], x));
}

TEST_F(VmapTest, FallbackKeepsUndefinedOutputsUndefined) {
  auto masked = [&](std::vector<bool> mask) {
    return vmap([&, mask](const std::vector<Tensor>& in) {
      Stack s{IValue(in[0]), IValue(mask)};
      registry.get("t::masked_pair").call_boxed(s);
      return std::vector<Tensor>{s[0].to_tensor(), s[1].to_tensor()};
    }, {0})({range({3, 2})});
  };
  auto out = masked({true, true});
  EXPECT_TRUE(out[0].defined());
  EXPECT_TRUE(out[1].defined());
  EXPECT_TRUE(equal(out[1], range({3, 2})));
  out = masked({false, false});
  EXPECT_FALSE(out[0].defined());
  EXPECT_FALSE(out[1].defined());
  // Undefined for some samples only: no stack is honest, so it is an error naming the op.
  Tensor mixed = range({3, 2});
  mixed.mutable_data_ptr<float>()[2] = -1;  // sample 1 starts negative
  EXPECT_THAT([&] {
    vmap([&](const std::vector<Tensor>& in) {
      Stack s{IValue(in[0]), IValue(std::vector<bool>{false, true})};
      registry.get("t::masked_pair").call_boxed(s);
      return std::vector<Tensor>{s[1].to_tensor()};
    }, {0})({mixed});
  }, ::testing::ThrowsMessage<Error>(HasSubstr("undefined output 1 for 1 of 3 samples")));
}

TEST_F(VmapTest, RuleSeesRandomnessAndBatchSize) {
  VmapInfo seen{0, Randomness::Error};
  lib.impl("noise", make_vmap_kernel([&](const VmapInfo& info, const Stack& in, const auto& dims) {
             seen = info;
             return std::pair{Stack{in[0]}, std::vector<std::optional<int64_t>>{dims[0]}};
           }),
           DispatchKey::Batched);
  Tensor x = range({5, 2});
  auto f = vmap([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{registry.get("t::noise").typed<Tensor(const Tensor&)>().call(in[0])};
  }, {0}, {0}, Randomness::Same);
  EXPECT_TRUE(equal(f({x})[0], x));
  EXPECT_EQ(seen.batch_size, 5);
  EXPECT_EQ(seen.randomness, Randomness::Same);
  EXPECT_EQ(vmap_fallback_count("t::noise"), 0);
}

TEST_F(VmapTest, ViewsMadeWithTensorMethodsAreReported) {
  auto f = vmap([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum_dim(in[0].unsqueeze(0), 0)}; },
                {0});
  EXPECT_THAT([&] { f({range({3, 2})}); }, ::testing::ThrowsMessage<Error>(HasSubstr("made with a Tensor method")));
}

TEST_F(VmapTest, MoveBatchDimExpandsOrMoves) {
  Tensor x = range({2, 3});
  Tensor moved = move_batch_dim(x, 1, 0, 3);
  EXPECT_EQ(moved.size(0), 3);
  EXPECT_TRUE(equal(moved, x.transpose(0, 1)));
  Tensor expanded = move_batch_dim(x, std::nullopt, -1, 4);
  ASSERT_EQ(expanded.dim(), 3);
  EXPECT_EQ(expanded.size(2), 4);
  EXPECT_TRUE(equal(expanded.select(2, 3), x));
  EXPECT_THROW(move_batch_dim(x, 0, 0, 3), Error);  // dim 0 has size 2, not the batch size
}

}  // namespace
}  // namespace opconform
