// Plugin ABI version 2 (opconform/plugin.h, "Version 2"), host side: symbolic sizes as handles in
// fake calls (arithmetic and guards through ctx->sym_*, raw arithmetic refused), returns that say
// what they alias, None for a Tensor return, seeds, backward operators (their derived schema,
// double backward through them), OPC_OP_RANDOM; and that a version-1 plugin keeps version 1's
// meaning. examples/abi2_plugin shows the same through `opconform check`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/generator.h"
#include "opconform/core/tensor.h"

namespace opconform::adapters {
namespace {

using ::testing::HasSubstr;

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::kInternal, "none");
}

// ---- kernels -----------------------------------------------------------------------------------

int64_t g_raw_arithmetic = 0;  // > 0: the fake kernel adds this to a handle with C arithmetic

// pad(Tensor x) -> Tensor: x with two more rows. The fake kernel computes rows + 2 symbolically,
// and branches on "rows > 3" through sym_compare (a guard).
OpcStatus pad_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  std::vector<int64_t> shape(x.shape, x.shape + x.ndim);
  if (g_raw_arithmetic > 0) {
    shape[0] += g_raw_arithmetic;
  } else if (ctx->sym_binary(ctx->host, OPC_SYM_ADD, shape[0], 2, &shape[0]) != OPC_OK) {
    return OPC_ERROR;
  }
  int32_t big = 0;
  if (ctx->sym_compare(ctx->host, OPC_SYM_GT, x.shape[0], 3, &big) != OPC_OK) return OPC_ERROR;
  returns[0].tag = OPC_TAG_TENSOR;
  returns[0].u.tensor = ctx->new_tensor(ctx->host, x.dtype, x.ndim, shape.data(), nullptr);
  return returns[0].u.tensor != nullptr ? OPC_OK : OPC_ERROR;
}

// first(Tensor(a) x) -> Tensor(a): row 0 of x, returned as a view of x (its own managed tensor).
struct RowView {
  OpcDLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
};
uint32_t g_claimed_alias = OPC_ALIAS_OF(0);
int64_t g_view_offset_elements = 0;  // > 0: the view points past x's memory

OpcStatus first_row(const OpcCallContext*, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  auto* v = new RowView;
  v->shape.assign(x.shape + 1, x.shape + x.ndim);
  v->strides.assign(x.strides + 1, x.strides + x.ndim);
  v->managed.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
  v->managed.manager_ctx = v;
  v->managed.deleter = [](OpcDLManagedTensorVersioned* m) { delete static_cast<RowView*>(m->manager_ctx); };
  v->managed.dl_tensor = x;
  v->managed.dl_tensor.ndim = x.ndim - 1;
  v->managed.dl_tensor.shape = v->shape.data();
  v->managed.dl_tensor.strides = v->strides.data();
  v->managed.dl_tensor.byte_offset = x.byte_offset + static_cast<uint64_t>(g_view_offset_elements) * 8;
  returns[0].tag = OPC_TAG_TENSOR;
  returns[0].alias = g_claimed_alias;
  returns[0].u.tensor = &v->managed;
  return OPC_OK;
}

// maybe(Tensor x, bool give) -> Tensor: x doubled, or nothing.
OpcStatus maybe(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  if (!args[1].u.b) return returns[0].tag = OPC_TAG_NONE, OPC_OK;
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  returns[0].tag = OPC_TAG_TENSOR;
  returns[0].u.tensor = ctx->new_tensor(ctx->host, x.dtype, x.ndim, x.shape, nullptr);
  return OPC_OK;
}

// parts(Tensor x) -> Tensor[]: [x doubled, nothing].
OpcStatus parts(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  auto* items = static_cast<OpcValue*>(ctx->alloc(ctx->host, 2 * sizeof(OpcValue)));
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  items[0] = OpcValue{};
  items[0].tag = OPC_TAG_TENSOR;
  items[0].u.tensor = ctx->new_tensor(ctx->host, x.dtype, x.ndim, x.shape, nullptr);
  items[1] = OpcValue{};
  returns[0].tag = OPC_TAG_LIST, returns[0].u.list.items = items, returns[0].u.list.size = 2;
  return OPC_OK;
}

uint64_t g_last_seed = 0;
OpcStatus draw(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  g_last_seed = ctx->seed;
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  returns[0].tag = OPC_TAG_TENSOR;
  returns[0].u.tensor = ctx->new_tensor(ctx->host, x.dtype, x.ndim, x.shape, nullptr);
  return OPC_OK;
}

// cube(Tensor x) -> Tensor, with its backward as an operator and that operator's backward:
// d/dx = 3 x^2 g, and the second order d/dx = 6 x g gg, d/dg = 3 x^2 gg.
double* data_of(const OpcValue& v) {
  const DLTensor& t = v.u.tensor->dl_tensor;
  return reinterpret_cast<double*>(static_cast<char*>(t.data) + t.byte_offset);
}
int64_t numel(const OpcValue& v) {
  int64_t n = 1;
  for (int i = 0; i < v.u.tensor->dl_tensor.ndim; ++i) n *= v.u.tensor->dl_tensor.shape[i];
  return n;
}
OpcValue like(const OpcCallContext* ctx, const OpcValue& v) {
  const DLTensor& t = v.u.tensor->dl_tensor;
  OpcValue out{};
  out.tag = OPC_TAG_TENSOR;
  out.u.tensor = ctx->new_tensor(ctx->host, t.dtype, t.ndim, t.shape, nullptr);
  return out;
}
OpcStatus cube(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  returns[0] = like(ctx, args[0]);
  if (!ctx->is_fake)
    for (int64_t i = 0; i < numel(args[0]); ++i) data_of(returns[0])[i] = std::pow(data_of(args[0])[i], 3);
  return OPC_OK;
}
// cube_backward(Tensor x, Tensor result0, Tensor? grad0) -> (Tensor?)
OpcStatus cube_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  returns[0] = like(ctx, args[0]);
  if (!ctx->is_fake)
    for (int64_t i = 0; i < numel(args[0]); ++i)
      data_of(returns[0])[i] = 3 * std::pow(data_of(args[0])[i], 2) * data_of(args[2])[i];
  return OPC_OK;
}
// cube_backward2(Tensor x, Tensor result0, Tensor? grad0, Tensor? result0_, Tensor? grad0_) -> 3 x Tensor?
OpcStatus cube_backward2(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  returns[0] = like(ctx, args[0]);
  returns[1].tag = OPC_TAG_NONE;
  returns[2] = like(ctx, args[0]);
  for (int64_t i = 0; i < numel(args[0]); ++i) {
    const double x = data_of(args[0])[i], g = data_of(args[2])[i], gg = data_of(args[4])[i];
    data_of(returns[0])[i] = 6 * x * g * gg;
    data_of(returns[2])[i] = 3 * x * x * gg;
  }
  return OPC_OK;
}

// mul_(Tensor(a!) self, Tensor other) -> Tensor(a!), with a formula on [self, other, result0, grad]:
// the gradient of other is grad * self, self as it was before the call.
OpcStatus mul_(const OpcCallContext*, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  for (int64_t i = 0; i < numel(args[0]); ++i) data_of(args[0])[i] *= data_of(args[1])[i];
  returns[0] = args[0];
  return OPC_OK;
}
OpcStatus mul_formula(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  returns[0].tag = OPC_TAG_NONE;
  returns[1] = like(ctx, args[1]);
  for (int64_t i = 0; i < numel(args[1]); ++i) data_of(returns[1])[i] = data_of(args[3])[i] * data_of(args[0])[i];
  return OPC_OK;
}

// chatty(Tensor x) -> Tensor: fails with an 8 MiB message.
OpcStatus chatty(const OpcCallContext* ctx, const OpcValue*, int64_t, OpcValue*, int64_t, void*) {
  static const std::string huge(8 << 20, 'x');
  ctx->set_error(ctx->host, huge.c_str());
  return OPC_ERROR;
}

OpcStatus register_v2(const OpcRegistrar* r) {
  if (r->version != 2) return OPC_ABI_MISMATCH;
  OpcStatus s = r->define(r->host, "v2::pad(Tensor x) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "v2::pad", OPC_KERNEL_FAKE, pad_fake, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v2::first(Tensor(a) x) -> Tensor(a)");
  if (s == OPC_OK) s = r->impl(r->host, "v2::first", OPC_KERNEL_CPU, first_row, nullptr);
  if (s == OPC_OK) s = r->impl(r->host, "v2::first", OPC_KERNEL_FAKE, first_row, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v2::maybe(Tensor x, bool give) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "v2::maybe", OPC_KERNEL_CPU, maybe, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v2::parts(Tensor x) -> Tensor[]");
  if (s == OPC_OK) s = r->impl(r->host, "v2::parts", OPC_KERNEL_CPU, parts, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v2::draw(Tensor x) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "v2::draw", OPC_KERNEL_CPU, draw, nullptr);
  OpcOpSpec spec{};
  spec.version = 2, spec.size = sizeof spec, spec.op_name = "v2::draw", spec.flags = OPC_OP_RANDOM;
  if (s == OPC_OK) s = r->declare_op(r->host, &spec);
  if (s == OPC_OK) s = r->define(r->host, "v2::mul_(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  if (s == OPC_OK) s = r->impl(r->host, "v2::mul_", OPC_KERNEL_CPU, mul_, nullptr);
  if (s == OPC_OK) s = r->impl(r->host, "v2::mul_", OPC_KERNEL_BACKWARD, mul_formula, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v2::chatty(Tensor x) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "v2::chatty", OPC_KERNEL_CPU, chatty, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v2::cube(Tensor x) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "v2::cube", OPC_KERNEL_CPU, cube, nullptr);
  if (s == OPC_OK) s = r->declare_backward_op(r->host, "v2::cube", "v2::cube_backward");
  if (s == OPC_OK) s = r->impl(r->host, "v2::cube_backward", OPC_KERNEL_CPU, cube_backward, nullptr);
  if (s == OPC_OK) s = r->declare_backward_op(r->host, "v2::cube_backward", "v2::cube_backward2");
  if (s == OPC_OK) s = r->impl(r->host, "v2::cube_backward2", OPC_KERNEL_CPU, cube_backward2, nullptr);
  return s;
}
OPCONFORM_PLUGIN(v2_plugin, "v2-test", "1", register_v2)

// The same kernels in a version-1 plugin: no handles, no alias read, None refused.
OpcStatus register_v1(const OpcRegistrar* r) {
  if (r->version != OPC_PLUGIN_ABI_VERSION_1) return OPC_ABI_MISMATCH;
  OpcStatus s = r->define(r->host, "v1::first(Tensor(a) x) -> Tensor(a)");
  if (s == OPC_OK) s = r->impl(r->host, "v1::first", OPC_KERNEL_CPU, first_row, nullptr);
  if (s == OPC_OK) s = r->define(r->host, "v1::maybe(Tensor x, bool give) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "v1::maybe", OPC_KERNEL_CPU, maybe, nullptr);
  // declare_backward_op is version 2's: refused, as a load problem of the op.
  if (s == OPC_OK && r->declare_backward_op(r->host, "v1::maybe", "v1::maybe_backward") == OPC_OK) return OPC_ERROR;
  return s;
}
const OpcPlugin* v1_plugin() {
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "v1-test", "1", register_v1, 0, nullptr, 0};
  return &plugin;
}

struct Loaded {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib;
  explicit Loaded(const OpcPlugin* plugin) {
    install_fake_fallback(registry);
    lib = load_plugin(plugin, registry, {});
  }
  Stack call(const std::string& op, Stack stack) {
    registry.get(op).call_boxed(stack);
    return stack;
  }
};

Tensor rows(std::vector<int64_t> sizes) {
  Tensor t = empty(sizes, TensorOptions{DType::Float64});
  return t;
}

// ---- tests -------------------------------------------------------------------------------------

TEST(PluginAbi2, AFakeKernelComputesWithSymbolicSizes) {
  Loaded p(v2_plugin());
  FakeTensorMode mode;
  const SymInt s0 = mode.shape_env().create_symbol(5, "x.size(0)");
  FakeTensorModeGuard guard(mode);
  Tensor x = make_fake_tensor({s0, 3}, DType::Float64, Device::cpu());
  g_raw_arithmetic = 0;
  Tensor y = p.call("v2::pad", {IValue(x)})[0].to_tensor();
  ASSERT_TRUE(y.has_symbolic_sizes());
  EXPECT_EQ(y.sym_sizes()[0].to_string(), "s0 + 2");
  EXPECT_EQ(y.sym_strides()[0].to_string(), "3");
  EXPECT_EQ(y.sizes()[0], 7);  // the hint
  // The branch on "rows > 3" is a guard, as in PyTorch: the graph holds only where it does.
  EXPECT_THAT(mode.shape_env().guards(), ::testing::Contains(HasSubstr("s0")));
  // C arithmetic on a handle gives no handle: refused, never read as a size.
  g_raw_arithmetic = 1;
  const Error e = error_of([&] { p.call("v2::pad", {IValue(x)}); });
  EXPECT_THAT(e.what(), HasSubstr("neither a size nor a symbolic handle"));
  EXPECT_THAT(e.what(), HasSubstr("v2::pad"));
  g_raw_arithmetic = 0;
}

TEST(PluginAbi2, AReturnSaysWhatItAliasesInRealAndFakeCalls) {
  Loaded p(v2_plugin());
  g_claimed_alias = OPC_ALIAS_OF(0), g_view_offset_elements = 0;
  Tensor x = rows({3, 4});
  Tensor v = p.call("v2::first", {IValue(x)})[0].to_tensor();
  EXPECT_EQ(v.storage(), x.storage());
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor fx = make_fake_tensor({SymInt(3), SymInt(4)}, DType::Float64, Device::cpu());
  Tensor fv = p.call("v2::first", {IValue(fx)})[0].to_tensor();
  EXPECT_EQ(fv.storage(), fx.storage());  // a view of the fake argument, as the real call's is
  EXPECT_EQ(fv.sizes()[0], 4);
}

TEST(PluginAbi2, AViewClaimTheMemoryDeniesIsRefused) {
  Loaded p(v2_plugin());
  Tensor x = rows({3, 4});
  g_claimed_alias = OPC_ALIAS_OF(0), g_view_offset_elements = 100;  // beyond x's 12 elements
  EXPECT_THAT(error_of([&] { p.call("v2::first", {IValue(x)}); }).what(),
              HasSubstr("says it is a view of argument 0, but its memory does not lie inside"));
  g_claimed_alias = OPC_ALIAS_OF(1), g_view_offset_elements = 0;  // argument 1 does not exist
  EXPECT_THAT(error_of([&] { p.call("v2::first", {IValue(x)}); }).what(), HasSubstr("aliases argument 1"));
  g_claimed_alias = OPC_ALIAS_OF(0);
}

TEST(PluginAbi2, NoneForATensorReturnIsAnUndefinedTensorInVersion2Only) {
  Loaded v2(v2_plugin());
  IValue out = v2.call("v2::maybe", {IValue(rows({2})), IValue(false)})[0];
  ASSERT_TRUE(out.is_tensor());
  EXPECT_FALSE(out.to_tensor().defined());
  // So is a None item of a Tensor[] (a gradient list with no gradient for one element).
  const std::vector<Tensor> list = v2.call("v2::parts", {IValue(rows({2}))})[0].to_tensor_list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(list[0].defined());
  EXPECT_FALSE(list[1].defined());
  Loaded v1(v1_plugin());
  EXPECT_THAT(error_of([&] { v1.call("v1::maybe", {IValue(rows({2})), IValue(false)}); }).what(),
              HasSubstr("should be Tensor, the kernel gave tag 0"));
}

TEST(PluginAbi2, ARandomOpGetsASeedFromTheGenerator) {
  Loaded p(v2_plugin());
  EXPECT_TRUE(p.registry.get("v2::draw").has_tag(Tag::nondeterministic_seeded));  // OPC_OP_RANDOM
  manual_seed(7);
  p.call("v2::draw", {IValue(rows({2}))});
  const uint64_t first = g_last_seed;
  p.call("v2::draw", {IValue(rows({2}))});
  EXPECT_NE(g_last_seed, first);  // each call its own seed
  manual_seed(7);
  p.call("v2::draw", {IValue(rows({2}))});
  EXPECT_EQ(g_last_seed, first);  // the same generator state, the same seed
}

TEST(PluginAbi2, TheBackwardOperatorHasTheDerivedSchemaAndIsNotCheckedAsAnOp) {
  Loaded p(v2_plugin());
  EXPECT_EQ(p.registry.get("v2::cube_backward").schema().to_string(),
            "v2::cube_backward(Tensor x, Tensor result0, Tensor? grad0) -> Tensor?");
  EXPECT_EQ(p.registry.get("v2::cube_backward2").schema().to_string(),
            "v2::cube_backward2(Tensor x, Tensor result0, Tensor? grad0, Tensor? result0_, Tensor? grad0_) -> "
            "(Tensor?, Tensor?, Tensor?)");
  const auto ops = p.lib->ops();
  EXPECT_THAT(ops, ::testing::Contains("v2::cube"));
  EXPECT_THAT(ops, ::testing::Not(::testing::Contains("v2::cube_backward")));
}

TEST(PluginAbi2, ABackwardOperatorIsDifferentiatedAgain) {
  Loaded p(v2_plugin());
  Tensor x = full({2}, 2.0, TensorOptions{DType::Float64}).set_requires_grad(true);
  Tensor y = p.call("v2::cube", {IValue(x)})[0].to_tensor();
  Tensor g = full({2}, 1.0, TensorOptions{DType::Float64}).set_requires_grad(true);
  std::vector<Tensor> dx = autograd::grad({y}, {x}, {g}, /*retain_graph=*/true, /*create_graph=*/true);
  EXPECT_DOUBLE_EQ(dx[0].to_vector<double>()[0], 12.0);  // 3 x^2 g
  ASSERT_TRUE(dx[0].requires_grad());                     // recorded through the backward operator
  Tensor gg = full({2}, 1.0, TensorOptions{DType::Float64});
  std::vector<Tensor> second = autograd::grad({dx[0]}, {x, g}, {gg}, true, false, true);
  EXPECT_DOUBLE_EQ(second[0].to_vector<double>()[0], 12.0);  // 6 x g gg
  EXPECT_DOUBLE_EQ(second[1].to_vector<double>()[0], 12.0);  // 3 x^2 gg
}

// Note [A backward sees the arguments before the call]
TEST(PluginAbi2, AnInPlaceOpsBackwardSeesTheWrittenArgumentAsItWas) {
  Loaded p(v2_plugin());
  Tensor self = full({2}, 3.0, TensorOptions{DType::Float64});
  Tensor other = full({2}, 5.0, TensorOptions{DType::Float64}).set_requires_grad(true);
  Tensor y = p.call("v2::mul_", {IValue(self), IValue(other)})[0].to_tensor();
  EXPECT_DOUBLE_EQ(self.to_vector<double>()[0], 15.0);  // written
  std::vector<Tensor> g = autograd::grad({y}, {other}, {full({2}, 1.0, TensorOptions{DType::Float64})});
  EXPECT_DOUBLE_EQ(g[0].to_vector<double>()[0], 3.0);  // grad * self before the call, not 15
}

// Note [A library's message has a size] (any version).
TEST(PluginAbi2, ALibrarysMessageIsCut) {
  Loaded p(v2_plugin());
  const std::string what = error_of([&] { p.call("v2::chatty", {IValue(rows({2}))}); }).what();
  EXPECT_LT(what.size(), 20000u);
  EXPECT_THAT(what, HasSubstr("... (cut at 16384 bytes)"));
  EXPECT_THAT(what, HasSubstr("v2::chatty"));
}

TEST(PluginAbi2, AVersion1PluginKeepsVersion1sMeaning) {
  Loaded p(v1_plugin());
  ASSERT_EQ(p.lib->problems().size(), 1u);
  EXPECT_THAT(p.lib->problems()[0].message, HasSubstr("declare_backward_op is plugin ABI version 2"));
  // Its alias field is not read: the view is recognised by its memory, as before.
  g_claimed_alias = OPC_ALIAS_OF(5), g_view_offset_elements = 0;
  Tensor x = rows({3, 4});
  Tensor v = p.call("v1::first", {IValue(x)})[0].to_tensor();
  EXPECT_EQ(v.storage(), x.storage());
  g_claimed_alias = OPC_ALIAS_OF(0);
}

}  // namespace
}  // namespace opconform::adapters
