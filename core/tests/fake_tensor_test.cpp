// Fake tensors and FakeTensorMode: symbolic fakes, from_tensor (memoised, dynamic), factories
// under the mode, fake kernels through wrap_fake_kernel (dispatch, nested calls, data access,
// get_ctx().new_dynamic_size()), the fake fallback (Meta kernels, or a clear error), and guards
// recorded while tracing checked against new sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core.h"
#include "opconform/core/fake_tensor.h"
#include "support/error_of.h"
#include "support/sym_strings.h"

namespace opconform {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

using testing::error_of;

V vec(IntArrayRef r) { return V(r.begin(), r.end()); }

using testing::strs;

Tensor real(V sizes) { return ones(sizes, DType::Float32); }

// ---------------------------------------------------------------- fake tensors

TEST(FakeTensor, SymbolicSizesWithContiguousSymbolicStrides) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(5, "a");
  Tensor t = make_fake_tensor({s0, 3}, DType::Float32, Device::cpu());
  EXPECT_TRUE(t.is_fake());
  EXPECT_TRUE(t.has_symbolic_sizes());
  EXPECT_THAT(strs(t.sym_sizes()), ElementsAre("s0", "3"));
  EXPECT_THAT(strs(t.sym_strides()), ElementsAre("3", "1"));
  EXPECT_EQ(vec(t.sizes()), (V{5, 3}));  // hints
  EXPECT_EQ(vec(t.strides()), (V{3, 1}));

  Tensor u = make_fake_tensor({3, s0, 2}, DType::Int64, Device::cuda(0));
  EXPECT_THAT(strs(u.sym_strides()), ElementsAre("s0*2", "2", "1"));
  EXPECT_EQ(vec(u.strides()), (V{10, 2, 1}));
  EXPECT_EQ(u.device(), Device::cuda(0));
  EXPECT_TRUE(u.key_set().has(DispatchKey::CUDA));

  // Concrete sizes only: a fake without a symbolic shape.
  Tensor c = make_fake_tensor({2, 0}, DType::Float32, Device::cpu());
  EXPECT_FALSE(c.has_symbolic_sizes());
  EXPECT_EQ(vec(c.strides()), (V{1, 1}));
  EXPECT_THROW(make_fake_tensor({2}, DType::Float32, Device::cpu(), std::vector<SymInt>{1, 1}), Error);
}

TEST(FakeTensor, UnbackedSizesUsePlaceholders) {
  ShapeEnv env;
  auto size0 = [](SymInt s) { return make_fake_tensor({s}, DType::Float32, Device::cpu()).size(0); };
  EXPECT_EQ(size0(env.create_unbacked()), 2);       // clamp(2, 0, inf)
  EXPECT_EQ(size0(env.create_unbacked(5, 10)), 5);  // clamp(2, 5, 10)
  EXPECT_EQ(size0(env.create_unbacked(0, 1)), 1);   // clamp(2, 0, 1)
  SymInt u = env.create_unbacked();
  Tensor t = make_fake_tensor({u, 4}, DType::Float32, Device::cpu());
  EXPECT_EQ(t.sym_sizes()[0].hint(), std::nullopt);  // a placeholder is not a hint
  EXPECT_EQ(concrete_stand_in(u * 3 + 1), 7);
}

TEST(FakeTensor, RealTensorsHaveConcreteSymSizes) {
  Tensor x = real({2, 3});
  EXPECT_FALSE(x.has_symbolic_sizes());
  EXPECT_THAT(strs(x.sym_sizes()), ElementsAre("2", "3"));
  EXPECT_THAT(strs(x.transpose(0, 1).sym_strides()), ElementsAre("1", "3"));
}

TEST(FakeTensor, DataAccessOutsideAFakeKernelSaysFake) {
  Tensor t = make_fake_tensor({2, 3}, DType::Float32, Device::cpu());
  Error e = error_of([&] { t.const_data_ptr(); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("cannot access the data of a fake tensor (size [2, 3], float32, on cpu)"));
  EXPECT_THAT(error_of([&] { t.to_vector<float>(); }).what(), HasSubstr("fake"));
}

// ---------------------------------------------------------------- FakeTensorMode

TEST(FakeTensorModeTest, FromTensorIsMemoisedAndKeepsMetadata) {
  FakeTensorMode mode;
  Tensor x = real({4, 6}).transpose(0, 1).narrow(0, 1, 3);
  Tensor f = mode.from_tensor(x);
  EXPECT_TRUE(f.is_fake());
  EXPECT_FALSE(x.is_fake());
  EXPECT_EQ(vec(f.sizes()), vec(x.sizes()));
  EXPECT_EQ(vec(f.strides()), vec(x.strides()));
  EXPECT_EQ(f.storage_offset(), x.storage_offset());
  EXPECT_EQ(f.dtype(), x.dtype());
  EXPECT_EQ(f.device(), x.device());
  EXPECT_FALSE(f.has_symbolic_sizes());
  EXPECT_TRUE(mode.from_tensor(x).is_same(f));
  EXPECT_TRUE(mode.from_tensor(f).is_same(f));  // already fake
  // Another view of the same storage: another fake, sharing the fake storage.
  Tensor g = mode.from_tensor(x.select(0, 0));
  EXPECT_FALSE(g.is_same(f));
  EXPECT_TRUE(g.is_alias_of(f));
  EXPECT_FALSE(mode.from_tensor(real({4, 6})).is_alias_of(f));
  EXPECT_THROW(mode.from_tensor(Tensor()), Error);
}

TEST(FakeTensorModeTest, DynamicFromTensorMakesOneSymbolPerDimension) {
  FakeTensorMode mode;
  Tensor x = real({4, 1, 3});
  Tensor f = mode.from_tensor(x, /*dynamic=*/true, "x");
  EXPECT_TRUE(f.has_symbolic_sizes());
  EXPECT_THAT(strs(f.sym_sizes()), ElementsAre("s0", "1", "s1"));
  EXPECT_THAT(strs(f.sym_strides()), ElementsAre("s1", "s1", "1"));
  EXPECT_EQ(vec(f.sizes()), (V{4, 1, 3}));
  EXPECT_FALSE(mode.from_tensor(x).is_same(f));  // the static fake is memoised separately
  EXPECT_TRUE(mode.from_tensor(x, true).is_same(f));

  auto symbols = mode.shape_env().symbols();
  ASSERT_EQ(symbols.size(), 2u);
  EXPECT_EQ(symbols[0].source, "x.size(0)");
  EXPECT_EQ(symbols[1].source, "x.size(2)");

  // A transposed layout keeps symbolic strides; a sliced one keeps its concrete stride.
  Tensor t = mode.from_tensor(real({5, 7}).transpose(0, 1), true);
  EXPECT_THAT(strs(t.sym_strides()), ElementsAre("1", "s2"));
  Tensor s = mode.from_tensor(real({5, 8}).slice(1, 0, std::nullopt, 2), true);
  EXPECT_THAT(strs(s.sym_strides()), ElementsAre("8", "2"));
}

TEST(FakeTensorModeTest, GuardActivatesAndRestores) {
  FakeTensorMode outer, inner;
  EXPECT_EQ(FakeTensorMode::current(), nullptr);
  {
    FakeTensorModeGuard g1(outer);
    EXPECT_EQ(FakeTensorMode::current(), &outer);
    EXPECT_EQ(ShapeEnv::current(), &outer.shape_env());
    EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::Fake));
    {
      FakeTensorModeGuard g2(inner);
      EXPECT_EQ(FakeTensorMode::current(), &inner);
    }
    EXPECT_EQ(FakeTensorMode::current(), &outer);
  }
  EXPECT_EQ(FakeTensorMode::current(), nullptr);
  EXPECT_EQ(ShapeEnv::current(), nullptr);
  EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::Fake));
}

TEST(FakeTensorModeTest, FactoriesMakeFakesUnderTheMode) {
  FakeTensorMode mode;
  Tensor before = empty({2});
  {
    FakeTensorModeGuard guard(mode);
    for (const Tensor& t : {empty({2, 3}), zeros({4}), ones({1, 2}), full(V{3}, 7.0), empty_strided(V{2, 2}, V{1, 2})}) {
      EXPECT_TRUE(t.is_fake()) << t;
    }
    Tensor e = empty({2, 3}, TensorOptions(DType::Int32, Device::cuda()));
    EXPECT_EQ(e.dtype(), DType::Int32);
    EXPECT_EQ(e.device(), Device::cuda(0));  // no CUDA needed: nothing is allocated
    EXPECT_EQ(vec(empty_strided(V{2, 2}, V{1, 2}).strides()), (V{1, 2}));
    EXPECT_TRUE(mode.from_tensor(before).clone().is_fake());
    EXPECT_THROW(empty({-1}), Error);  // still validated
  }
  EXPECT_FALSE(before.is_fake());
  EXPECT_FALSE(empty({2}).is_fake());
}

TEST(FakeTensorModeTest, EmptyLikeAndSymIntFactoriesKeepSymbolicSizes) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(real({5, 7}).transpose(0, 1), /*dynamic=*/true, "x");
  FakeTensorModeGuard guard(mode);
  Tensor like = empty_like(x);
  EXPECT_TRUE(like.has_symbolic_sizes());
  EXPECT_EQ(strs(like.sym_sizes()), strs(x.sym_sizes()));
  EXPECT_EQ(strs(like.sym_strides()), strs(contiguous_strides(x.sym_sizes())));  // contiguous, not x's layout
  EXPECT_EQ(like.dtype(), DType::Float32);
  Tensor as_int = empty_like(x, TensorOptions(DType::Int64, Device::cuda()));
  EXPECT_EQ(as_int.dtype(), DType::Int64);
  EXPECT_EQ(as_int.device(), Device::cuda(0));
  EXPECT_EQ(strs(as_int.sym_sizes()), strs(x.sym_sizes()));

  std::vector<SymInt> sizes{x.sym_sizes()[1] * 2, SymInt(3)};
  Tensor e = empty(sizes, x.options());
  EXPECT_EQ(strs(e.sym_sizes()), strs(sizes));
  EXPECT_EQ(vec(e.sizes()), (V{10, 3}));  // the hints
  // All-concrete sizes are plain empty(): a fake under the mode, a real tensor outside it.
  EXPECT_FALSE(empty(std::vector<SymInt>{SymInt(2)}).has_symbolic_sizes());
  EXPECT_THROW(empty(std::vector<SymInt>{SymInt(-1)}), Error);
}

TEST(FakeTensorModeTest, ViewsKeepSymbolicSizesWhereTheyFollowFromTheBase) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(real({5, 7}), /*dynamic=*/true, "x");  // [s0, s1], strides [s1, 1]
  const auto s = strs(x.sym_sizes());
  EXPECT_THAT(strs(x.transpose(0, 1).sym_sizes()), ElementsAre(s[1], s[0]));
  EXPECT_THAT(strs(x.transpose(0, 1).sym_strides()), ElementsAre("1", s[1]));
  EXPECT_THAT(strs(x.permute({1, 0}).sym_sizes()), ElementsAre(s[1], s[0]));
  EXPECT_THAT(strs(x.select(0, 2).sym_sizes()), ElementsAre(s[1]));
  EXPECT_THAT(strs(x.unsqueeze(1).sym_sizes()), ElementsAre(s[0], "1", s[1]));
  EXPECT_THAT(strs(x.unsqueeze(1).squeeze(1).sym_sizes()), ElementsAre(s[0], s[1]));
  EXPECT_THAT(strs(x.unsqueeze(0).squeeze().sym_sizes()), ElementsAre(s[0], s[1]));
  EXPECT_THAT(strs(x.slice(1, 2).sym_sizes()), ElementsAre(s[0], s[1] + " - 2"));  // to the end: still symbolic
  EXPECT_THAT(strs(x.slice(1, 0, 3).sym_sizes()), ElementsAre(s[0], "3"));          // a concrete end is baked
  EXPECT_THAT(strs(x.slice(1, -2).sym_sizes()), ElementsAre(s[0], "2"));            // so is a negative start
  EXPECT_THAT(strs(x.view({-1}).sym_sizes()), ElementsAre(s[0] + "*" + s[1]));
  EXPECT_TRUE(x.reshape({7, -1}).has_symbolic_sizes());
  // Sizes given as integers are the caller's values, even where they equal the base's hints
  // (before, a view kept its base's symbolic sizes whatever they were: wrong ones).
  EXPECT_FALSE(x.view({5, 7}).has_symbolic_sizes());
  EXPECT_FALSE(x.as_strided(V{5, 7}, V{7, 1}).has_symbolic_sizes());
  EXPECT_FALSE(x.transpose(0, 1).reshape({-1}).has_symbolic_sizes());  // not contiguous: a copy
}

TEST(FakeTensor, EmptyLikeOfARealTensorIsAReal) {
  Tensor x = real({2, 3});
  Tensor y = empty_like(x);
  EXPECT_FALSE(y.is_fake());
  EXPECT_EQ(vec(y.sizes()), (V{2, 3}));
  EXPECT_FALSE(y.is_same(x));
}

// ---------------------------------------------------------------- fake kernels

// out[i] = x[i] * 2 on CPU, counting calls.
struct Counts {
  int cpu = 0;
  int fake = 0;
  int meta = 0;
};

Tensor double_cpu(const Tensor& x) {
  Tensor c = x.contiguous();
  Tensor out = empty_like(x);
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] * 2;
  return out;
}

class FakeKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib.define("twice(Tensor x) -> Tensor");
    lib.impl("twice", [this](const Tensor& x) { ++counts.cpu; return double_cpu(x); }, DispatchKey::CPU);
    lib.impl("twice", wrap_fake_kernel([this](const Tensor& x) {
               ++counts.fake;
               EXPECT_TRUE(x.is_fake());
               EXPECT_EQ(get_ctx().op_name(), "t::twice");
               return make_fake_tensor(x.sym_sizes(), x.dtype(), x.device(), x.sym_strides());
             }),
             DispatchKey::Fake);
  }
  Tensor twice(const Tensor& x) { return registry.get("t::twice").typed<Tensor(const Tensor&)>().call(x); }

  Registry registry;
  Library lib{"t", LibraryKind::DEF, std::nullopt, registry};
  Counts counts;
};

TEST_F(FakeKernelTest, FakeKernelRunsUnderTheModeAndCpuKernelOutside) {
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  Tensor y = twice(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(counts.cpu, 1);
  EXPECT_EQ(counts.fake, 0);

  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor fy = twice(x);  // a real argument: the mode converts it
  EXPECT_TRUE(fy.is_fake());
  EXPECT_EQ(vec(fy.sizes()), (V{3}));
  EXPECT_EQ(counts.cpu, 1);
  EXPECT_EQ(counts.fake, 1);
}

TEST_F(FakeKernelTest, SymbolicSizesFlowThroughAFakeKernel) {
  FakeTensorMode mode;
  Tensor fx = mode.from_tensor(real({6, 2}), true);
  Tensor fy = twice(fx);  // a fake argument reaches the Fake key by itself: no guard needed
  EXPECT_EQ(counts.fake, 1);
  EXPECT_THAT(strs(fy.sym_sizes()), ElementsAre("s0", "s1"));
  EXPECT_THAT(strs(fy.sym_strides()), ElementsAre("s1", "1"));
}

TEST_F(FakeKernelTest, FakeKernelReadingDataGetsAHelpfulError) {
  lib.define("peek(Tensor x) -> Tensor");
  lib.impl("peek", wrap_fake_kernel([](const Tensor& x) {
             float first = x.to_vector<float>()[0];  // not allowed: fake tensors have no data
             return full(V{static_cast<int64_t>(first)}, 0.0);
           }),
           DispatchKey::Fake);
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Error e = error_of([&] { registry.get("t::peek").typed<Tensor(const Tensor&)>().call(real({2})); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message(),
            "fake kernel of 't::peek' accessed tensor data: fake tensors have no data; for outputs whose size "
            "depends on data use get_ctx().new_dynamic_size()");
}

TEST_F(FakeKernelTest, NestedCallsInsideAFakeKernelRunFakeKernels) {
  // Note [Nested dispatch in fake kernels]: t::quad's fake kernel calls t::twice on its fake
  // input; that must reach twice's fake kernel, not its CPU kernel.
  lib.define("quad(Tensor x) -> Tensor");
  lib.impl("quad", wrap_fake_kernel([this](const Tensor& x) { return twice(twice(x)); }), DispatchKey::Fake);
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor y = registry.get("t::quad").typed<Tensor(const Tensor&)>().call(real({5}));
  EXPECT_TRUE(y.is_fake());
  EXPECT_EQ(counts.fake, 2);
  EXPECT_EQ(counts.cpu, 0);
}

TEST_F(FakeKernelTest, DataDependentOutputSizeUsesNewDynamicSize) {
  // nonzero-like: the indices of the nonzero elements of a 1-d tensor.
  lib.define("nz(Tensor x) -> Tensor");
  lib.impl("nz", [](const Tensor& x) {
             std::vector<int64_t> idx;
             auto v = x.to_vector<float>();
             for (size_t i = 0; i < v.size(); ++i) if (v[i] != 0) idx.push_back(static_cast<int64_t>(i));
             int64_t n = static_cast<int64_t>(idx.size());
             return from_vector<int64_t>(idx, {n});
           }, DispatchKey::CPU);
  lib.impl("nz", wrap_fake_kernel([](const Tensor& x) {
             SymInt n = get_ctx().new_dynamic_size(0, x.numel());
             return make_fake_tensor({n}, DType::Int64, x.device());
           }),
           DispatchKey::Fake);
  auto nz = registry.get("t::nz").typed<Tensor(const Tensor&)>();

  EXPECT_EQ(nz.call(from_vector<float>({0, 3, 0, 5}, {4})).to_vector<int64_t>(), (V{1, 3}));

  Tensor input = from_vector<float>({0, 3, 0, 5}, {4});  // before the mode: from_vector writes data
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor y = nz.call(input);
  ASSERT_TRUE(y.is_fake());
  ASSERT_TRUE(y.has_symbolic_sizes());
  SymInt n = y.sym_sizes()[0];
  EXPECT_EQ(n.to_string(), "u0");
  EXPECT_EQ(n.hint(), std::nullopt);
  EXPECT_EQ(y.size(0), 2);  // the placeholder
  EXPECT_TRUE(n <= 4);      // decided by the range [0, 4]
  Error e = error_of([&] { (void)(n < 3); });
  EXPECT_EQ(e.message(),
            "data-dependent expression u0 < 3 cannot be decided (unbacked symbol from get_ctx().new_dynamic_size())");
  EXPECT_THAT(mode.shape_env().symbols().back().source, HasSubstr("fake kernel of 't::nz'"));
}

TEST(FakeKernelContextTest, GetCtxOutsideAFakeKernelIsAnError) {
  Error e = error_of([] { get_ctx(); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message(), "get_ctx() can only be called inside a fake kernel (one registered with register_fake)");
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);  // a mode alone is not a fake kernel
  EXPECT_THROW(get_ctx(), Error);
}

TEST_F(FakeKernelTest, NewDynamicSizeRejectsBadRanges) {
  lib.define("bad(Tensor x) -> Tensor");
  lib.impl("bad", wrap_fake_kernel([](const Tensor& x) {
             return make_fake_tensor({get_ctx().new_dynamic_size(5, 2)}, DType::Int64, x.device());
           }),
           DispatchKey::Fake);
  FakeTensorMode mode;
  EXPECT_THAT(error_of([&] {
                registry.get("t::bad").typed<Tensor(const Tensor&)>().call(mode.from_tensor(real({3})));
              }).what(),
              HasSubstr("new_dynamic_size: invalid range [5, 2]"));
}

TEST_F(FakeKernelTest, GuardsFromAFakeKernelAreCheckedAgainstNewSizes) {
  // A fake kernel that branches on a size: the branch taken becomes a guard.
  lib.define("halve_if_big(Tensor x) -> Tensor");
  lib.impl("halve_if_big", wrap_fake_kernel([](const Tensor& x) {
             SymInt n = x.sym_sizes()[0];
             SymInt out = n > 4 ? floordiv(n, 2) : n;
             return make_fake_tensor({out}, x.dtype(), x.device());
           }),
           DispatchKey::Fake);
  FakeTensorMode mode;
  Tensor traced_input = mode.from_tensor(real({10}), true, "x");
  Tensor out = registry.get("t::halve_if_big").typed<Tensor(const Tensor&)>().call(traced_input);
  EXPECT_EQ(out.sym_sizes()[0].to_string(), "s0//2");
  EXPECT_THAT(mode.shape_env().guards(), ElementsAre("s0 > 4"));

  auto check_with = [&](V sizes) {
    std::map<std::string, int64_t> bindings;
    auto traced = traced_input.sym_sizes();
    ShapeEnv::bind(bindings, traced, sizes);
    return mode.shape_env().check(bindings);
  };
  EXPECT_TRUE(check_with({7}).ok());
  GuardCheckResult r = check_with({3});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.to_string(), "guard s0 > 4 failed: false for s0 = 3 (x.size(0))");
}

// ---------------------------------------------------------------- the fake fallback

class FakeFallbackTest : public FakeKernelTest {
 protected:
  void SetUp() override {
    FakeKernelTest::SetUp();
    fallback = install_fake_fallback(registry);
  }
  RegistrationHandle fallback;
};

TEST_F(FakeFallbackTest, OperatorWithOnlyAMetaKernelWorksUnderFakeMode) {
  lib.define("outer(Tensor a, Tensor b) -> Tensor");
  lib.impl("outer", [this](const Tensor& a, const Tensor& b) {
             ++counts.cpu;
             return zeros({a.size(0), b.size(0)}, a.options());
           }, DispatchKey::CPU);
  lib.impl("outer", [this](const Tensor& a, const Tensor& b) {
             ++counts.meta;
             EXPECT_EQ(a.device(), Device::meta());
             EXPECT_FALSE(a.is_fake());  // the Meta kernel sees plain meta tensors...
             Tensor out = empty({a.size(0), b.size(0)}, TensorOptions(a.dtype(), Device::meta()));
             EXPECT_FALSE(out.is_fake());  // ...and its factories are not faked
             return out;
           }, DispatchKey::Meta);
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor y = registry.get("t::outer").typed<Tensor(const Tensor&, const Tensor&)>().call(real({3}), real({4}));
  EXPECT_TRUE(y.is_fake());
  EXPECT_EQ(y.device(), Device::cpu());  // the inputs' device, not meta
  EXPECT_EQ(vec(y.sizes()), (V{3, 4}));
  EXPECT_EQ(counts.meta, 1);
  EXPECT_EQ(counts.cpu, 0);
}

TEST_F(FakeFallbackTest, InputsReturnedByTheMetaKernelMapBackToTheFakeInputs) {
  lib.define("scale_(Tensor(a!) x) -> Tensor(a!)");
  lib.impl("scale_", [](const Tensor& x) { return x; }, DispatchKey::Meta);
  lib.define("first_row(Tensor(a) x) -> Tensor(a)");
  lib.impl("first_row", [](const Tensor& x) { return x.select(0, 0); }, DispatchKey::Meta);
  FakeTensorMode mode;
  Tensor fx = mode.from_tensor(real({2, 3}));
  EXPECT_TRUE(registry.get("t::scale_").typed<Tensor(const Tensor&)>().call(fx).is_same(fx));
  Tensor row = registry.get("t::first_row").typed<Tensor(const Tensor&)>().call(fx);
  EXPECT_TRUE(row.is_fake());
  EXPECT_TRUE(row.is_alias_of(fx));
  EXPECT_EQ(vec(row.sizes()), (V{3}));
}

TEST_F(FakeFallbackTest, OperatorWithNeitherFakeNorMetaKernelIsAClearError) {
  lib.define("plain(Tensor x) -> Tensor");
  lib.impl("plain", [](const Tensor& x) { return double_cpu(x); }, DispatchKey::CPU);
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Error e = error_of([&] { registry.get("t::plain").typed<Tensor(const Tensor&)>().call(real({2})); });
  EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
  EXPECT_EQ(e.message(), "operator 't::plain' has no fake kernel; register one with register_fake");
  // An operator with its own fake kernel is not affected by the fallback.
  EXPECT_TRUE(twice(real({2})).is_fake());
}

TEST_F(FakeFallbackTest, FallbackIsUndoneWithItsHandle) {
  lib.define("plain(Tensor x) -> Tensor");
  lib.impl("plain", [](const Tensor& x) { return double_cpu(x); }, DispatchKey::CPU);
  fallback.reset();
  // Without the fallback the Fake key is skipped: the CPU kernel meets a fake tensor and its data
  // access fails with the fake tensor's own error.
  FakeTensorMode mode;
  Tensor fx = mode.from_tensor(real({2}));
  EXPECT_THAT(error_of([&] { registry.get("t::plain").typed<Tensor(const Tensor&)>().call(fx); }).what(),
              HasSubstr("cannot access the data of a fake tensor"));
}

}  // namespace
}  // namespace opconform
