// The loader and the boxed calls across the C ABI, with plugins written in this file
// (OPCONFORM_PLUGIN: the in-process path) and shared libraries built beside the tests.
#include <gtest/gtest.h>

// Version-1 plugins: what this file tests is version 1's meaning (plugin_abi_2_test.cpp tests 2's).
#define OPC_PLUGIN_TARGET_ABI OPC_PLUGIN_ABI_VERSION_1

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "opconform/adapters/loader.h"
#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/reference.h"

namespace opconform::adapters {
namespace {

// ---- a small plugin: testlib::scale(Tensor x, float alpha=2.0) -> Tensor over float64 ----

double* data_of(const OpcDLManagedTensorVersioned* t) {
  return reinterpret_cast<double*>(static_cast<char*>(t->dl_tensor.data) + t->dl_tensor.byte_offset);
}
int64_t numel_of(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

// Contiguous float64 inputs only (enough for these tests; the example plugins do strides).
OpcStatus scale_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                    int64_t num_returns, void*) {
  if (num_args != 2 || num_returns != 1 || args[0].tag != OPC_TAG_TENSOR || args[1].tag != OPC_TAG_DOUBLE) {
    ctx->set_error(ctx->host, "scale: expected (Tensor x, float alpha)");
    return OPC_INVALID_ARGUMENT;
  }
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  if (x.dtype.code != kDLFloat || x.dtype.bits != 64) {
    ctx->set_error(ctx->host, "scale: only float64 for argument 'x'");
    return OPC_NOT_IMPLEMENTED;
  }
  OpcDLManagedTensorVersioned* out = ctx->new_tensor(ctx->host, x.dtype, x.ndim, x.shape, nullptr);
  if (out == nullptr) return OPC_OUT_OF_MEMORY;
  if (!ctx->is_fake) {
    for (int64_t i = 0; i < numel_of(x); ++i) data_of(out)[i] = data_of(args[0].u.tensor)[i] * args[1].u.d;
  }
  returns[0].tag = OPC_TAG_TENSOR;
  returns[0].u.tensor = out;
  return OPC_OK;
}

// Backward: args = [x, alpha, result, grad]; returns one gradient per argument.
OpcStatus scale_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void*) {
  if (num_args != 4 || num_returns != 2) return OPC_ABI_MISMATCH;
  OpcValue xy[2] = {args[3], args[1]};
  OpcStatus s = scale_cpu(ctx, xy, 2, returns, 1, nullptr);
  returns[1].tag = OPC_TAG_NONE;
  return s;
}

OpcStatus neg_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  OpcValue minus_one[2] = {args[0], {}};
  minus_one[1].tag = OPC_TAG_DOUBLE;
  minus_one[1].u.d = -1;
  return scale_cpu(ctx, minus_one, 2, returns, 1, nullptr);
}

OpcStatus register_scale(const OpcRegistrar* r) {
  OpcStatus s = r->define(r->host, "testlib::scale(Tensor x, float alpha=2.0) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "testlib::scale", OPC_KERNEL_CPU, scale_cpu, nullptr);
  if (s == OPC_OK) s = r->impl(r->host, "testlib::scale", OPC_KERNEL_FAKE, scale_cpu, nullptr);
  if (s == OPC_OK) s = r->impl(r->host, "testlib::scale", OPC_KERNEL_BACKWARD, scale_backward, nullptr);
  // A reference op, implemented without a definition: the schema comes from the reference.
  if (s == OPC_OK && r->host_knows(r->host, "aten::neg")) s = r->impl(r->host, "aten::neg", OPC_KERNEL_CPU, neg_cpu, nullptr);
  const DLDataType f64{kDLFloat, 64, 1};
  if (s == OPC_OK) s = r->declare_dtypes(r->host, "testlib::scale", &f64, 1);
  return s;
}
OPCONFORM_PLUGIN(scale_plugin, "scale-test", "0.1", register_scale)

Registry& reference_registry() {
  static Registry registry;
  static auto registration = reference::register_reference_ops(registry);
  return registry;
}

Stack call(Registry& registry, std::string_view op, Stack args) {
  registry.get(op).call_boxed(args);
  return args;
}

TEST(Loader, InProcessPluginRegistersAndRuns) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  EXPECT_EQ(lib->name(), "scale-test");
  EXPECT_EQ(lib->version(), "0.1");
  EXPECT_EQ(lib->ops(), (std::vector<std::string>{"aten::neg", "testlib::scale"}));
  EXPECT_TRUE(lib->has_kernel("testlib::scale", OPC_KERNEL_FAKE));
  EXPECT_FALSE(lib->has_kernel("aten::neg", OPC_KERNEL_FAKE));
  EXPECT_EQ(lib->declared_dtypes("testlib::scale"), (std::vector<DType>{DType::Float64}));
  EXPECT_EQ(lib->declared_dtypes("aten::neg"), std::nullopt);

  Tensor x = from_vector<double>({1, 2, 3}, {3});
  auto out = call(registry, "testlib::scale", {x, 3.0});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_tensor().to_vector<double>(), (std::vector<double>{3, 6, 9}));
  // The reference's schema, our kernel.
  EXPECT_EQ(registry.get("aten::neg").schema().to_string(), reference_registry().get("aten::neg").schema().to_string());
  EXPECT_EQ(call(registry, "aten::neg", {x})[0].to_tensor().to_vector<double>(), (std::vector<double>{-1, -2, -3}));
}

// Note [Per-op data belongs to the registry]: an op defined from the reference's schema takes the
// reference's data (sample spec, tolerances) with it; a plugin's own op has what it declared.
TEST(Loader, OpsTakeTheirDataFromTheirDefinition) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  const auto neg = registry.get("aten::neg").data();
  const auto reference_neg = reference_registry().get("aten::neg").data();
  EXPECT_EQ(neg->doc, reference_neg->doc);
  EXPECT_EQ(neg->constraints.dtypes, reference_neg->constraints.dtypes);
  EXPECT_EQ(neg->rounding.has_value(), reference_neg->rounding.has_value());
  const auto scale = registry.get("testlib::scale").data();
  EXPECT_EQ(scale->constraints.dtypes, std::vector<DType>{DType::Float64});  // declare_dtypes
  EXPECT_TRUE(scale->doc.empty());
  // The reference registry is not changed by what the plugin declares.
  EXPECT_FALSE(reference_registry().find("testlib::scale").has_value());
}

TEST(Loader, ArgumentsTheSchemaDoesNotWriteAreReadOnly) {
  static bool saw_read_only = false;
  auto check_flags = [](const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t,
                        void*) -> OpcStatus {
    saw_read_only = (args[0].u.tensor->flags & OPC_DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    returns[0] = args[0];  // returning an argument hands back the caller's own tensor
    return OPC_OK;
  };
  static OpcKernelFn fn = check_flags;
  auto reg = [](const OpcRegistrar* r) -> OpcStatus {
    OpcStatus s = r->define(r->host, "t::ident(Tensor(a) x) -> Tensor(a)");
    return s == OPC_OK ? r->impl(r->host, "t::ident", OPC_KERNEL_CPU, fn, nullptr) : s;
  };
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "ident", "1", reg, 0};
  Registry registry;
  auto lib = load_plugin(&plugin, registry);
  Tensor x = from_vector<double>({1, 2}, {2});
  auto out = call(registry, "t::ident", {x});
  EXPECT_TRUE(saw_read_only);
  EXPECT_TRUE(out[0].to_tensor().is_same(x));
}

TEST(Loader, FakeKernelGivesFakeTensors) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  auto out = call(registry, "testlib::scale", {x, 3.0});
  const Tensor& y = out[0].to_tensor();
  EXPECT_TRUE(y.is_fake());
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(y.dtype(), DType::Float64);
}

// ABI v1 fake kernels see concrete sizes: a symbolic fake argument is specialized to its hints,
// with a guard per symbol (so a captured graph is never replayed at sizes its outputs were not
// computed for).
TEST(Loader, AFakeCallSpecializesSymbolicSizesWithGuards) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}), /*dynamic=*/true, "x");
  ASSERT_TRUE(x.has_symbolic_sizes());
  FakeTensorModeGuard guard(mode);
  auto out = call(registry, "testlib::scale", {x, 3.0});
  EXPECT_FALSE(out[0].to_tensor().has_symbolic_sizes());
  const auto guards = mode.shape_env().guards();
  ASSERT_EQ(guards.size(), 2u) << ::testing::PrintToString(guards);
  EXPECT_NE(guards[0].find("== 2"), std::string::npos) << guards[0];
  EXPECT_NE(guards[1].find("== 3"), std::string::npos) << guards[1];
}

// A real kernel reached with fake tensors (no fake kernel, no fallback at Fake) is an error,
// not a kernel reading NULL data.
TEST(Loader, ARealKernelCalledWithFakeTensorsIsAnError) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(from_vector<double>({1, 2}, {2}));
  FakeTensorModeGuard guard(mode);
  try {
    call(registry, "aten::neg", {x});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
    EXPECT_NE(std::string(e.what()).find("no fake kernel"), std::string::npos) << e.what();
  }
}

// A plugin's backward is compiled code: on fake tensors (graph capture of the backward) it is
// kNotImplemented, which the compile checks read as "cannot be captured", not as a bug.
TEST(Loader, ABackwardKernelCannotRunOnFakeTensors) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(from_vector<double>({1, 2}, {2}));
  x.set_requires_grad(true);
  FakeTensorModeGuard guard(mode);
  Tensor y = call(registry, "testlib::scale", {x, 3.0})[0].to_tensor();
  try {
    autograd::grad({y}, {x}, {empty_like(y)});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
    EXPECT_NE(std::string(e.what()).find("cannot be captured"), std::string::npos) << e.what();
  }
}

TEST(Loader, BackwardFormulaGivesTheGradient) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  Tensor x = from_vector<double>({1, 2}, {2});
  x.set_requires_grad(true);
  Tensor y = call(registry, "testlib::scale", {x, 5.0})[0].to_tensor();
  y.backward(from_vector<double>({1, 10}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 50}));
}

// ---- a Tensor[] op whose backward returns a list: testlib::weighted(Tensor[] xs) = sum_i (i+1) xs[i] ----

OpcStatus weighted_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  const OpcValue* xs = args[0].u.list.items;
  const DLTensor& first = xs[0].u.tensor->dl_tensor;
  OpcDLManagedTensorVersioned* out = ctx->new_tensor(ctx->host, first.dtype, first.ndim, first.shape, nullptr);
  if (out == nullptr) return OPC_OUT_OF_MEMORY;
  for (int64_t e = 0; !ctx->is_fake && e < numel_of(first); ++e) {
    double acc = 0;
    for (int64_t i = 0; i < args[0].u.list.size; ++i) acc += static_cast<double>(i + 1) * data_of(xs[i].u.tensor)[e];
    data_of(out)[e] = acc;
  }
  returns[0].tag = OPC_TAG_TENSOR;
  returns[0].u.tensor = out;
  return OPC_OK;
}

// args = [xs, result, grad]: the gradient of xs[i] is (i+1) * grad, returned as a list.
OpcStatus weighted_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t,
                            void*) {
  const int64_t n = args[0].u.list.size;
  const DLTensor& g = args[2].u.tensor->dl_tensor;
  auto* items = static_cast<OpcValue*>(ctx->alloc(ctx->host, sizeof(OpcValue) * static_cast<size_t>(n)));
  if (items == nullptr) return OPC_OUT_OF_MEMORY;
  for (int64_t i = 0; i < n; ++i) {
    OpcDLManagedTensorVersioned* gi = ctx->new_tensor(ctx->host, g.dtype, g.ndim, g.shape, nullptr);
    if (gi == nullptr) return OPC_OUT_OF_MEMORY;
    for (int64_t e = 0; e < numel_of(g); ++e) data_of(gi)[e] = static_cast<double>(i + 1) * data_of(args[2].u.tensor)[e];
    items[i].tag = OPC_TAG_TENSOR;
    items[i].u.tensor = gi;
  }
  returns[0].tag = OPC_TAG_LIST;
  returns[0].u.list.items = items;
  returns[0].u.list.size = n;
  return OPC_OK;
}

OpcStatus register_weighted(const OpcRegistrar* r) {
  OpcStatus s = r->define(r->host, "testlib::weighted(Tensor[] xs) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "testlib::weighted", OPC_KERNEL_CPU, weighted_cpu, nullptr);
  if (s == OPC_OK) s = r->impl(r->host, "testlib::weighted", OPC_KERNEL_BACKWARD, weighted_backward, nullptr);
  return s;
}
OPCONFORM_PLUGIN(weighted_plugin, "weighted-test", "0.1", register_weighted)

TEST(Loader, ABackwardReturnsOneGradientPerElementOfATensorList) {
  Registry registry;
  auto lib = load_plugin(weighted_plugin(), registry, {.schemas = &reference_registry()});
  std::vector<Tensor> xs;
  for (int i = 0; i < 3; ++i) xs.push_back(from_vector<double>({1.0 + i, 2.0}, {2}).set_requires_grad(true));
  Tensor y = call(registry, "testlib::weighted", {IValue(xs)})[0].to_tensor();
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{14, 12}));
  auto grads = autograd::grad({y}, xs, {from_vector<double>({1, 10}, {2})});
  ASSERT_EQ(grads.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(grads[i].to_vector<double>(), (std::vector<double>{1.0 + i, 10.0 * (1 + i)})) << i;
}

// register_ops that ignores failing registrations and returns OPC_OK: each failure is a load
// problem of its op (the harness reports it as a `load` result), not lost.
OpcStatus register_ignoring_failures(const OpcRegistrar* r) {
  r->define(r->host, "testlib::broken(Tensor x -> Tensor");                        // malformed
  r->impl(r->host, "testlib::never_defined", OPC_KERNEL_CPU, scale_cpu, nullptr);  // no schema
  return OPC_OK;
}
OPCONFORM_PLUGIN(ignoring_plugin, "ignoring-test", "0.1", register_ignoring_failures)

TEST(Loader, RegistrationsThatFailInsideASuccessfulRegisterOpsAreProblems) {
  Registry registry;
  auto lib = load_plugin(ignoring_plugin(), registry, {.schemas = &reference_registry()});
  ASSERT_EQ(lib->problems().size(), 2u);
  EXPECT_EQ(lib->problems()[0].op, "testlib::broken");
  EXPECT_EQ(lib->problems()[1].op, "testlib::never_defined");
  for (const auto& p : lib->problems())
    EXPECT_NE(p.message.find("a registration failed (register_ops went on)"), std::string::npos) << p.message;
}

TEST(Loader, KernelStatusBecomesAnErrorNamingOpAndPlugin) {
  Registry registry;
  auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
  try {
    call(registry, "testlib::scale", {from_vector<float>({1}, {1}), 2.0});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
    EXPECT_NE(std::string(e.what()).find("testlib::scale"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scale-test"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only float64 for argument 'x'"), std::string::npos) << e.what();
  }
}

TEST(Loader, MalformedResultsAreErrorsNotCrashes) {
  auto null_result = [](const OpcCallContext*, const OpcValue*, int64_t, OpcValue* returns, int64_t, void*) -> OpcStatus {
    returns[0].tag = OPC_TAG_TENSOR;
    returns[0].u.tensor = nullptr;
    return OPC_OK;
  };
  auto int_result = [](const OpcCallContext*, const OpcValue*, int64_t, OpcValue* returns, int64_t, void*) -> OpcStatus {
    returns[0].tag = OPC_TAG_INT;
    returns[0].u.i = 3;
    return OPC_OK;
  };
  auto bad_dtype = [](const OpcCallContext* ctx, const OpcValue*, int64_t, OpcValue* returns, int64_t, void*) -> OpcStatus {
    int64_t shape = 2;
    returns[0].tag = OPC_TAG_TENSOR;
    returns[0].u.tensor = ctx->new_tensor(ctx->host, DLDataType{kDLFloat, 13, 1}, 1, &shape, nullptr);
    return returns[0].u.tensor == nullptr ? OPC_ERROR : OPC_OK;
  };
  static OpcKernelFn kernels[3] = {null_result, int_result, bad_dtype};
  auto reg = [](const OpcRegistrar* r) -> OpcStatus {
    const char* names[3] = {"t::a", "t::b", "t::c"};
    for (int i = 0; i < 3; ++i) {
      std::string schema = std::string(names[i]) + "(Tensor x) -> Tensor";
      if (r->define(r->host, schema.c_str()) != OPC_OK) return OPC_ERROR;
      if (r->impl(r->host, names[i], OPC_KERNEL_CPU, kernels[i], nullptr) != OPC_OK) return OPC_ERROR;
    }
    return OPC_OK;
  };
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "malformed", "1", reg, 0};
  Registry registry;
  auto lib = load_plugin(&plugin, registry);
  Tensor x = from_vector<double>({1}, {1});
  for (const char* op : {"t::a", "t::b", "t::c"}) {
    try {
      call(registry, op, {x});
      ADD_FAILURE() << op << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
  }
}

// Found by fuzz/plugin_value: a Tensor[] return of negative size was read as an empty list.
TEST(Loader, AListOfNegativeSizeIsAnError) {
  auto negative_list = [](const OpcCallContext*, const OpcValue*, int64_t, OpcValue* returns, int64_t,
                          void*) -> OpcStatus {
    returns[0].tag = OPC_TAG_LIST;
    returns[0].u.list.items = nullptr;
    returns[0].u.list.size = -1;
    return OPC_OK;
  };
  static OpcKernelFn fn = negative_list;
  auto reg = [](const OpcRegistrar* r) -> OpcStatus {
    OpcStatus s = r->define(r->host, "t::parts(Tensor x) -> Tensor[]");
    return s == OPC_OK ? r->impl(r->host, "t::parts", OPC_KERNEL_CPU, fn, nullptr) : s;
  };
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "negative-list", "1", reg, 0};
  Registry registry;
  auto lib = load_plugin(&plugin, registry);
  try {
    call(registry, "t::parts", {from_vector<double>({1}, {1})});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kSchemaMismatch);
    EXPECT_NE(std::string(e.what()).find("a list of size -1"), std::string::npos) << e.what();
  }
}

// A view a plugin returns as its own managed tensor (as the ATen adapter does) points into the
// argument's memory: it must come back as a view of the argument, alive as long as it is used.
TEST(Loader, AReturnedViewSharesTheArgumentsStorage) {
  struct Own {
    OpcDLManagedTensorVersioned managed{};
    int64_t shape[1] = {2};
    int64_t strides[1] = {2};
  };
  static int deleted = 0;
  auto every_other = [](const OpcCallContext*, const OpcValue* args, int64_t, OpcValue* returns, int64_t,
                        void*) -> OpcStatus {
    auto* own = new Own;
    own->managed.version = {1, 0};
    own->managed.manager_ctx = own;
    own->managed.deleter = [](OpcDLManagedTensorVersioned* self) {
      ++deleted;
      delete static_cast<Own*>(self->manager_ctx);
    };
    own->managed.dl_tensor = args[0].u.tensor->dl_tensor;
    own->managed.dl_tensor.ndim = 1;
    own->managed.dl_tensor.shape = own->shape;
    own->managed.dl_tensor.strides = own->strides;
    own->managed.dl_tensor.byte_offset += sizeof(double);  // from element 1
    returns[0].tag = OPC_TAG_TENSOR;
    returns[0].u.tensor = &own->managed;
    return OPC_OK;
  };
  static OpcKernelFn fn = every_other;
  auto reg = [](const OpcRegistrar* r) -> OpcStatus {
    OpcStatus s = r->define(r->host, "t::odd(Tensor(a) x) -> Tensor(a)");
    return s == OPC_OK ? r->impl(r->host, "t::odd", OPC_KERNEL_CPU, fn, nullptr) : s;
  };
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "views", "1", reg, 0};
  Registry registry;
  auto lib = load_plugin(&plugin, registry);
  Tensor view;
  {
    Tensor x = from_vector<double>({0, 1, 2, 3}, {4});
    view = call(registry, "t::odd", {x})[0].to_tensor();
    EXPECT_EQ(view.storage(), x.storage()) << "a view of the argument, not a copy or a second block";
    EXPECT_EQ(view.storage_offset(), 1);
    x.fill_(Scalar(7.0));
  }
  EXPECT_EQ(deleted, 1) << "the plugin's own descriptor is released once";
  EXPECT_EQ(view.to_vector<double>(), (std::vector<double>{7, 7})) << "alive after the argument died, and aliasing it";
}

// ---- registration failures: each a PluginError naming the library ----

std::string load_error(const OpcPlugin* plugin, const Registry* schemas = nullptr) {
  Registry registry;
  try {
    load_plugin(plugin, registry, {.schemas = schemas}, "in-test");
  } catch (const PluginError& e) {
    return e.what();
  }
  return "";
}

OpcStatus ok(const OpcRegistrar*) { return OPC_OK; }

TEST(Loader, WrongAbiVersionIsRefused) {
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION + 1, sizeof(OpcPlugin), "future", "9", ok, 0};
  std::string e = load_error(&plugin);
  EXPECT_NE(e.find("plugin ABI version 3, this opconform loads versions 1 to 2"), std::string::npos) << e;
  static const OpcPlugin ancient = {0, sizeof(OpcPlugin), "ancient", "0", ok, 0};
  e = load_error(&ancient);
  EXPECT_NE(e.find("plugin ABI version 0"), std::string::npos) << e;
  EXPECT_NE(e.find("in-test"), std::string::npos) << e;
}

TEST(Loader, RegistrationMistakesNameTheLibraryAndTheOp) {
  struct Case {
    OpcStatus (*reg)(const OpcRegistrar*);
    const char* expected;
  };
  const Case cases[] = {
      {[](const OpcRegistrar* r) { return r->define(r->host, "t::f(Tensor x -> Tensor"); }, "t::f(Tensor x"},
      {[](const OpcRegistrar* r) { return r->define(r->host, "f(Tensor x) -> Tensor"); }, "qualified name"},
      {[](const OpcRegistrar* r) {
         r->define(r->host, "t::f(Tensor x) -> Tensor");
         return r->define(r->host, "t::f(Tensor x) -> Tensor");
       },
       "'t::f' is defined twice"},
      {[](const OpcRegistrar* r) { return r->impl(r->host, "t::nothing", OPC_KERNEL_CPU, scale_cpu, nullptr); },
       "'t::nothing' is not defined"},
      {[](const OpcRegistrar* r) {
         r->define(r->host, "t::f(Tensor x) -> Tensor");
         r->impl(r->host, "t::f", OPC_KERNEL_CPU, scale_cpu, nullptr);
         return r->impl(r->host, "t::f", OPC_KERNEL_CPU, scale_cpu, nullptr);
       },
       "'t::f' has two cpu kernels"},
      {[](const OpcRegistrar* r) {
         r->define(r->host, "t::f(Tensor x) -> Tensor");
         return r->impl(r->host, "t::f", 77, scale_cpu, nullptr);
       },
       "unknown kernel kind 77"},
      {[](const OpcRegistrar*) -> OpcStatus { return OPC_ERROR; }, "register_ops failed with status 1"},
  };
  for (const Case& c : cases) {
    const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "mistakes", "1", c.reg, 0};
    const std::string e = load_error(&plugin);
    EXPECT_NE(e.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in: " << e;
    EXPECT_NE(e.find("mistakes"), std::string::npos) << e;
  }
}

TEST(Loader, ASchemaThatDiffersFromTheReferenceIsAProblemNotAFailure) {
  auto reg = [](const OpcRegistrar* r) -> OpcStatus {
    OpcStatus s = r->define(r->host, "aten::neg(Tensor self, int extra) -> Tensor");
    return s == OPC_OK ? r->impl(r->host, "aten::neg", OPC_KERNEL_CPU, neg_cpu, nullptr) : s;
  };
  static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "differs", "1", reg, 0};
  Registry registry;
  auto lib = load_plugin(&plugin, registry, {.schemas = &reference_registry()});
  ASSERT_EQ(lib->problems().size(), 1u);
  EXPECT_EQ(lib->problems()[0].op, "aten::neg");
  EXPECT_NE(lib->problems()[0].message.find("int extra"), std::string::npos) << lib->problems()[0].message;
  EXPECT_TRUE(lib->ops().empty());
  EXPECT_FALSE(registry.find("aten::neg") && registry.find("aten::neg")->has_schema());
}

TEST(Loader, UnloadingUndoesTheRegistrations) {
  Registry registry;
  {
    auto lib = load_plugin(scale_plugin(), registry, {.schemas = &reference_registry()});
    EXPECT_TRUE(registry.find("testlib::scale"));
  }
  // The registry keeps an empty entry (as PyTorch's dispatcher does): no schema, no kernels.
  auto entry = registry.find("testlib::scale");
  EXPECT_TRUE(!entry || !entry->has_schema());
}

// ---- shared libraries: files that are not plugins ----

// A file with `bytes`, removed when it goes out of scope.
struct TempFile {
  TempFile(const std::string& name, const std::string& bytes)
      : path(std::filesystem::temp_directory_path() / ("opconform_loader_test_" + std::to_string(getpid()) + "_" + name)) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  std::filesystem::path path;
};

std::string file_error(const std::filesystem::path& path) {
  Registry registry;
  try {
    load_plugin(path, registry);
  } catch (const PluginError& e) {
    EXPECT_EQ(e.library(), path.string());
    return e.what();
  }
  return "";
}

TEST(Loader, FilesThatAreNotPluginsGiveClearErrors) {
  EXPECT_NE(file_error("/nonexistent/libnothing.so").find("no such file"), std::string::npos);
  EXPECT_NE(file_error(std::filesystem::temp_directory_path()).find("is a directory"), std::string::npos);
  EXPECT_NE(file_error(TempFile("empty.so", "").path).find("too short"), std::string::npos);
  EXPECT_NE(file_error(TempFile("text.so", std::string(100, 'x')).path).find("no ELF magic"), std::string::npos);
  EXPECT_NE(file_error(OPCONFORM_NOT_A_PLUGIN).find("exports no 'opconform_plugin'"), std::string::npos);
}

}  // namespace
}  // namespace opconform::adapters
