// The ATen adapter (libopconform_aten_plugin.so) loaded with opconform's loader, the reference as
// the schema source: a few ops checked against values ATen computes (and the reference agrees
// with), views that alias the argument's memory, in-place ops handing back the argument, ATen's
// errors as opconform errors, meta kernels as fake kernels and ATen's autograd as the backward
// operators (first and second derivatives). Then the plugin through the C ABI alone (RawAten, a
// version-2 host in miniature): what it writes for views (OpcValue.alias), undefined returns,
// seeded random ops, symbolic sizes and the backward operators' calls.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/autograd.h"
#include "opconform/core/dlpack.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/generator.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/reference.h"

namespace opconform::adapters {
namespace {

Registry& reference_registry() {
  static Registry registry;
  static auto registration = reference::register_reference_ops(registry);
  return registry;
}

// The plugin loaded once into its own registry (libtorch is loaded for the whole binary anyway).
struct Aten {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib;
  Aten() { lib = load_plugin(OPCONFORM_ATEN_PLUGIN_PATH, registry, {.schemas = &reference_registry()}); }
};
Aten& aten() {
  static Aten instance;
  return instance;
}

// `op` with the leading arguments given, the rest from the schema's defaults.
Stack call(Registry& registry, std::string_view op, Stack args) {
  return reference::detail::Ops(registry).call(op, std::move(args));
}
Tensor aten_call(std::string_view op, Stack args) { return call(aten().registry, op, std::move(args)).at(0).to_tensor(); }
Tensor reference_call(std::string_view op, Stack args) {
  return call(reference_registry(), op, std::move(args)).at(0).to_tensor();
}

std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }
std::vector<int64_t> strides_of(const Tensor& t) { return {t.strides().begin(), t.strides().end()}; }

TEST(AtenAdapter, LoadsTheReferenceOpsAtenHas) {
  const LoadedLibrary& lib = *aten().lib;
  EXPECT_EQ(lib.name(), "aten");
  EXPECT_NE(lib.version().find("1.13"), std::string::npos) << lib.version();
  const auto ops = lib.ops();
  EXPECT_GE(ops.size(), 150u);
  for (const char* op : {"aten::add.Tensor", "aten::mm", "aten::view", "aten::add_.Tensor", "aten::sort"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
  EXPECT_TRUE(lib.has_kernel("aten::add.Tensor", OPC_KERNEL_CPU));
  EXPECT_TRUE(lib.has_kernel("aten::add.Tensor", OPC_KERNEL_FAKE));
  // The backward is an operator (ABI 2), with its own backward: no OPC_KERNEL_BACKWARD formula.
  EXPECT_FALSE(lib.has_kernel("aten::add.Tensor", OPC_KERNEL_BACKWARD));
  EXPECT_TRUE(lib.has_kernel("aten_backward::add.Tensor", OPC_KERNEL_CPU));
  EXPECT_TRUE(lib.has_kernel("aten_backward::add.Tensor", OPC_KERNEL_FAKE));
  EXPECT_TRUE(lib.has_kernel("aten_backward2::add.Tensor", OPC_KERNEL_CPU));
  // nonzero has no meta kernel in ATen 1.13: no fake kernel is offered.
  EXPECT_TRUE(lib.has_kernel("aten::nonzero", OPC_KERNEL_CPU));
  EXPECT_FALSE(lib.has_kernel("aten::nonzero", OPC_KERNEL_FAKE));
  // var.correction's 1.13 schema takes `int? correction`: defined with ATen's schema, reported, left out.
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "aten::var.correction"), ops.end());
  const auto& problems = lib.problems();
  const bool reported = std::any_of(problems.begin(), problems.end(), [](const LoadProblem& p) {
    return p.op == "aten::var.correction" && p.message.find("int? correction") != std::string::npos;
  });
  EXPECT_TRUE(reported);
}

TEST(AtenAdapter, AddWithAlphaBroadcasts) {
  const Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<double>({10, 20, 30}, {3});
  const Tensor y = aten_call("aten::add.Tensor", {a, b, IValue(int64_t{2})});
  EXPECT_EQ(sizes_of(y), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{21, 42, 63, 24, 45, 66}));
  EXPECT_EQ(y.to_vector<double>(), reference_call("aten::add.Tensor", {a, b, IValue(int64_t{2})}).to_vector<double>());
  // Type promotion is ATen's: int32 + float32 -> float32.
  const Tensor i = from_vector<int32_t>({1, 2, 3}, {3});
  const Tensor f = from_vector<float>({0.5f, 0.5f, 0.5f}, {3});
  EXPECT_EQ(aten_call("aten::add.Tensor", {i, f}).dtype(), DType::Float32);
  // bool crosses as bool (DLPack 1.x code 6), not as uint8.
  const Tensor t = from_vector<bool>({true, false}, {2});
  const Tensor o = aten_call("aten::logical_not", {t});
  EXPECT_EQ(o.dtype(), DType::Bool);
  EXPECT_EQ(o.to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(AtenAdapter, MmOfTransposedAndOffsetViews) {
  const Tensor base = from_vector<double>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  // A view with a storage offset and a transposed view: ATen reads the host's memory as laid out.
  const Tensor a = base.narrow(0, 2, 4).view({2, 2});  // [[2, 3], [4, 5]]
  const Tensor b = from_vector<double>({1, 2, 3, 4}, {2, 2}).transpose(0, 1);  // [[1, 3], [2, 4]]
  const Tensor p = aten_call("aten::mm", {a, b});
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{8, 18, 14, 32}));
  EXPECT_EQ(p.to_vector<double>(), reference_call("aten::mm", {a, b}).to_vector<double>());
}

TEST(AtenAdapter, ViewsAliasTheArgumentsMemory) {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = aten_call("aten::permute", {x, IValue(std::vector<int64_t>{1, 0})});
  EXPECT_EQ(sizes_of(t), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(strides_of(t), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(t.const_data_ptr(), x.const_data_ptr());
  const Tensor s = aten_call("aten::select.int", {x, IValue(int64_t{1}), IValue(int64_t{2})});
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{3, 6}));
  EXPECT_EQ(s.const_data_ptr(), static_cast<const double*>(x.const_data_ptr()) + 2);
  // as_strided's storage_offset counts from the storage's start, as the host's does.
  const Tensor tail = x.view({6}).narrow(0, 1, 5);
  const Tensor g = aten_call("aten::as_strided", {tail, IValue(std::vector<int64_t>{2}), IValue(std::vector<int64_t>{2}),
                                                  IValue(int64_t{3})});
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{4, 6}));
  EXPECT_EQ(g.to_vector<double>(),
            reference_call("aten::as_strided", {tail, IValue(std::vector<int64_t>{2}), IValue(std::vector<int64_t>{2}),
                                                IValue(int64_t{3})})
                .to_vector<double>());
}

TEST(AtenAdapter, InPlaceOpsWriteAndReturnTheArgument) {
  const Tensor x = from_vector<double>({1, 2, 3}, {3});
  const Tensor y = aten_call("aten::add_.Tensor", {x, from_vector<double>({1, 1, 1}, {3}), IValue(int64_t{10})});
  EXPECT_TRUE(y.is_same(x));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{11, 12, 13}));
}

TEST(AtenAdapter, MultipleAndListReturns) {
  const Tensor x = from_vector<double>({3, 1, 2, 0}, {4});
  const Stack sorted = call(aten().registry, "aten::sort", {x});
  ASSERT_EQ(sorted.size(), 2u);
  EXPECT_EQ(sorted[0].to_tensor().to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(sorted[1].to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 2, 0}));
  const Stack parts = call(aten().registry, "aten::split_with_sizes", {x, IValue(std::vector<int64_t>{1, 3})});
  const auto pieces = parts.at(0).to_tensor_list();
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].to_vector<double>(), (std::vector<double>{1, 2, 0}));
}

TEST(AtenAdapter, AtenErrorsBecomeErrorsNamingTheOp) {
  const Tensor a = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor b = from_vector<double>({1, 2, 3}, {3, 1});
  try {
    aten_call("aten::mm", {a, b});
    FAIL() << "mm of [2, 2] and [3, 1] did not fail";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("aten::mm"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot be multiplied"), std::string::npos) << message;  // ATen's own words
    EXPECT_NE(message.find("OPC_INVALID_ARGUMENT"), std::string::npos) << message;
    // Only the first line of ATen's message: no C++ backtrace.
    EXPECT_EQ(message.find("Exception raised from"), std::string::npos) << message;
  }
}

TEST(AtenAdapter, MetaKernelsAreFakeKernels) {
  FakeTensorMode mode;
  const Tensor a = mode.from_tensor(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  const Tensor b = mode.from_tensor(from_vector<double>({1, 2, 3}, {3, 1}));
  const Tensor p = aten_call("aten::mm", {a, b});
  EXPECT_TRUE(p.is_fake());
  EXPECT_EQ(sizes_of(p), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(p.dtype(), DType::Float64);
  const Tensor t = aten_call("aten::permute", {a, IValue(std::vector<int64_t>{1, 0})});
  EXPECT_EQ(strides_of(t), (std::vector<int64_t>{1, 3}));
}

TEST(AtenAdapter, AtenAutogradIsTheBackward) {
  const Tensor x = from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad(true);
  const Tensor w = from_vector<double>({4, 5, 6}, {3});
  const Tensor y = aten_call("aten::mul.Tensor", {x, w});
  y.backward(from_vector<double>({1, 10, 100}, {3}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 50, 600}));
}

void expect_near(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

// ---- Version 2 through the host (the loader's backward operators, aliases, seeds, absent returns)

TEST(AtenAdapter, BackwardOperatorsGiveFirstAndSecondDerivatives) {
  const std::vector<double> xs = {0.5, 1.0, 2.0}, gs = {1, 2, 3}, ggs = {1, 10, 100};
  const Tensor x = from_vector<double>(xs, {3});
  x.set_requires_grad(true);
  const Tensor y = aten_call("aten::sin", {x});
  const Tensor g = from_vector<double>(gs, {3});
  // aten_backward::sin: cos(x) * g, with a graph so that aten_backward2::sin differentiates it.
  const std::vector<Tensor> gx = autograd::grad({y}, {x}, {g}, /*retain_graph=*/true, /*create_graph=*/true);
  std::vector<double> first, second;
  for (size_t i = 0; i < xs.size(); ++i) {
    first.push_back(std::cos(xs[i]) * gs[i]);
    second.push_back(-std::sin(xs[i]) * gs[i] * ggs[i]);
  }
  expect_near(gx.at(0), first);
  const std::vector<Tensor> gxx = autograd::grad({gx.at(0)}, {x}, {from_vector<double>(ggs, {3})});
  expect_near(gxx.at(0), second);
}

TEST(AtenAdapter, ViewsAreViewsInFakeAndRealCalls) {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const IValue dims(std::vector<int64_t>{1, 0});
  EXPECT_TRUE(aten_call("aten::permute", {x, dims}).is_alias_of(x));
  FakeTensorMode mode;
  const Tensor a = mode.from_tensor(x);
  const Tensor t = aten_call("aten::permute", {a, dims});
  EXPECT_TRUE(t.is_fake());
  EXPECT_TRUE(t.is_alias_of(a));  // said by OpcValue.alias: a fake call has no memory to say it
  EXPECT_FALSE(aten_call("aten::sin", {a}).is_alias_of(a));
}

TEST(AtenAdapter, UndefinedReturnsAreAbsent) {
  const Tensor grad = from_vector<double>(std::vector<double>(4, 1.0), {1, 1, 2, 2});
  const Tensor input = from_vector<double>(std::vector<double>(9, 1.0), {1, 1, 3, 3});
  const Tensor weight = from_vector<double>(std::vector<double>(4, 1.0), {1, 1, 2, 2});
  const auto ints = [](std::vector<int64_t> v) { return IValue(std::move(v)); };
  const Stack out = call(aten().registry, "aten::convolution_backward",
                         {grad, input, weight, IValue(), ints({1, 1}), ints({0, 0}), ints({1, 1}), IValue(false),
                          ints({0, 0}), IValue(int64_t{1}), IValue(std::vector<bool>{true, false, false})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].to_tensor().defined());
  for (size_t i : {1u, 2u}) EXPECT_FALSE(out[i].is_tensor() && out[i].to_tensor().defined()) << "return " << i;
}

TEST(AtenAdapter, RandomOpsRepeatForOneGeneratorState) {
  auto draw = [](uint64_t seed) {
    manual_seed(seed);
    return aten_call("aten::rand", {IValue(std::vector<int64_t>{16})}).to_vector<float>();
  };
  EXPECT_EQ(draw(5), draw(5));
  EXPECT_NE(draw(5), draw(6));
}

// ---- The plugin through the C ABI alone

// A version-2 host in miniature: a registrar that records kernels and backward operators.
class RawAten {
 public:
  struct Kernel {
    OpcKernelFn fn = nullptr;
    void* user_data = nullptr;
  };
  RawAten() {
    void* dl = dlopen(OPCONFORM_ATEN_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);  // never closed: libtorch stays
    if (dl == nullptr) throw std::runtime_error(dlerror());
    auto entry = reinterpret_cast<OpcPluginEntryFn>(dlsym(dl, OPC_PLUGIN_ENTRY_POINT));
    OpcRegistrar r{};
    r.version = OPC_PLUGIN_ABI_VERSION;
    r.size = sizeof(OpcRegistrar);
    r.host = this;
    r.define = [](void*, const char*) -> OpcStatus { return OPC_OK; };
    r.impl = [](void* host, const char* op, OpcKernelKind kind, OpcKernelFn fn, void* user_data) -> OpcStatus {
      static_cast<RawAten*>(host)->kernels_[{op, kind}] = {fn, user_data};
      return OPC_OK;
    };
    r.declare_dtypes = [](void*, const char*, const DLDataType*, int64_t) -> OpcStatus { return OPC_OK; };
    r.host_knows = [](void*, const char* op) -> int32_t {
      const auto known = reference_registry().find(op);
      return known && known->has_schema() ? 1 : 0;
    };
    r.set_error = [](void*, const char*) {};
    r.declare_op = [](void*, const OpcOpSpec*) -> OpcStatus { return OPC_OK; };
    r.declare_backward_op = [](void* host, const char* op, const char* backward) -> OpcStatus {
      static_cast<RawAten*>(host)->backward_of_[op] = backward;
      return OPC_OK;
    };
    status_ = entry()->register_ops(&r);
  }
  OpcStatus status() const { return status_; }
  Kernel kernel(const std::string& op, OpcKernelKind kind) const {
    auto it = kernels_.find({op, kind});
    return it == kernels_.end() ? Kernel{} : it->second;
  }
  std::string backward_of(const std::string& op) const {
    auto it = backward_of_.find(op);
    return it == backward_of_.end() ? std::string() : it->second;
  }

 private:
  OpcStatus status_ = OPC_ERROR;
  std::map<std::pair<std::string, OpcKernelKind>, Kernel> kernels_;
  std::map<std::string, std::string> backward_of_;
};
RawAten& raw() {
  static RawAten instance;
  return instance;
}

// One call: its context (seed, symbolic sizes with their hints), the arguments it owns and the
// returns it releases.
class RawCall {
 public:
  explicit RawCall(bool fake, uint64_t seed = 0, uint64_t offset = 0) {
    ctx_.version = OPC_PLUGIN_ABI_VERSION;
    ctx_.size = sizeof(OpcCallContext);
    ctx_.host = this;
    ctx_.op_name = "raw";
    ctx_.is_fake = fake ? 1 : 0;
    ctx_.alloc = [](void* host, size_t bytes) -> void* {
      auto& memory = static_cast<RawCall*>(host)->memory_;
      memory.push_back(std::make_unique<std::max_align_t[]>(bytes / sizeof(std::max_align_t) + 1));
      return memory.back().get();
    };
    ctx_.set_error = [](void* host, const char* message) { static_cast<RawCall*>(host)->error = message; };
    ctx_.seed = seed;
    ctx_.offset = offset;
    ctx_.sym_guard_int = [](void* host, int64_t a, int64_t* out) -> OpcStatus {
      auto* self = static_cast<RawCall*>(host);
      auto it = self->hints.find(a);
      if (it == self->hints.end()) return OPC_INVALID_ARGUMENT;
      self->guarded.push_back(a);
      *out = it->second;
      return OPC_OK;
    };
  }
  ~RawCall() {
    for (OpcValue& v : returns) release(v);
    for (OpcDLManagedTensorVersioned* m : owned_)
      if (m->deleter != nullptr) m->deleter(m);
  }
  RawCall(const RawCall&) = delete;
  RawCall& operator=(const RawCall&) = delete;

  OpcValue tensor(const Tensor& t) {
    owned_.push_back(to_dlpack_versioned(t));
    return value(owned_.back());
  }
  // A data-less descriptor (a fake call's argument), compact; sizes may be handles.
  OpcValue meta(std::vector<int64_t> shape, DLDataType dtype = {kDLFloat, 64, 1}) {
    shapes_.push_back(std::move(shape));
    auto& m = metas_.emplace_back();
    m.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int32_t>(shapes_.back().size());
    m.dl_tensor.dtype = dtype;
    m.dl_tensor.shape = shapes_.back().data();
    return value(&m);
  }
  static OpcValue value(OpcDLManagedTensorVersioned* m) {
    OpcValue v{};
    v.tag = OPC_TAG_TENSOR;
    v.u.tensor = m;
    return v;
  }
  static OpcValue integer(int64_t i) {
    OpcValue v{};
    v.tag = OPC_TAG_INT;
    v.u.i = i;
    return v;
  }
  OpcValue list(std::vector<OpcValue> items) {
    lists_.push_back(std::move(items));
    OpcValue v{};
    v.tag = OPC_TAG_LIST;
    v.u.list.items = lists_.back().data();
    v.u.list.size = static_cast<int64_t>(lists_.back().size());
    return v;
  }
  OpcValue ints(const std::vector<int64_t>& values) {
    std::vector<OpcValue> items;
    for (int64_t i : values) items.push_back(integer(i));
    return list(std::move(items));
  }

  OpcStatus run(const RawAten::Kernel& k, std::vector<OpcValue> args, size_t num_returns) {
    if (k.fn == nullptr) return OPC_NOT_IMPLEMENTED;
    args_ = std::move(args);
    returns.assign(num_returns, OpcValue{});
    return k.fn(&ctx_, args_.data(), static_cast<int64_t>(args_.size()), returns.data(),
                static_cast<int64_t>(returns.size()), k.user_data);
  }
  // A real return as a tensor (taking it over from the returns).
  Tensor take(OpcValue& v) {
    EXPECT_EQ(v.tag, OPC_TAG_TENSOR);
    if (is_argument(v.u.tensor)) return {};
    Tensor t = from_dlpack(v.u.tensor);
    v = OpcValue{};
    return t;
  }
  static std::vector<int64_t> shape(const OpcValue& v) {
    const DLTensor& t = v.u.tensor->dl_tensor;
    return {t.shape, t.shape + t.ndim};
  }

  std::vector<OpcValue> returns;
  std::string error;
  std::map<int64_t, int64_t> hints;  // handle -> its value
  std::vector<int64_t> guarded;

 private:
  bool is_argument(const OpcDLManagedTensorVersioned* m) const {
    return std::find(owned_.begin(), owned_.end(), m) != owned_.end() ||
           std::any_of(metas_.begin(), metas_.end(), [&](const auto& meta) { return &meta == m; });
  }
  void release(OpcValue& v) {
    if (v.tag == OPC_TAG_TENSOR && v.u.tensor != nullptr && !is_argument(v.u.tensor) && v.u.tensor->deleter)
      v.u.tensor->deleter(v.u.tensor);
    if (v.tag == OPC_TAG_LIST)
      for (int64_t i = 0; i < v.u.list.size; ++i) release(v.u.list.items[i]);
    v = OpcValue{};
  }

  OpcCallContext ctx_{};
  std::vector<std::unique_ptr<std::max_align_t[]>> memory_;
  std::vector<OpcDLManagedTensorVersioned*> owned_;
  std::deque<OpcDLManagedTensorVersioned> metas_;
  std::deque<std::vector<int64_t>> shapes_;
  std::deque<std::vector<OpcValue>> lists_;
  std::vector<OpcValue> args_;
};

TEST(AtenAdapterAbi, RegistersBackwardOperatorsOfTwoOrders) {
  ASSERT_EQ(raw().status(), OPC_OK);
  EXPECT_EQ(raw().backward_of("aten::sin"), "aten_backward::sin");
  EXPECT_EQ(raw().backward_of("aten_backward::sin"), "aten_backward2::sin");
  EXPECT_EQ(raw().backward_of("aten_backward2::sin"), "");  // no third order
  EXPECT_EQ(raw().backward_of("aten::add.Tensor"), "aten_backward::add.Tensor");
  EXPECT_NE(raw().kernel("aten_backward::sin", OPC_KERNEL_FAKE).fn, nullptr);
  EXPECT_EQ(raw().kernel("aten::sin", OPC_KERNEL_BACKWARD).fn, nullptr);
}

TEST(AtenAdapterAbi, ViewsNameTheirArgument) {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  {  // real: permute is a view of argument 0; sin is not
    RawCall c(false);
    ASSERT_EQ(c.run(raw().kernel("aten::permute", OPC_KERNEL_CPU), {c.tensor(x), c.ints({1, 0})}, 1), OPC_OK) << c.error;
    EXPECT_EQ(c.returns[0].alias, OPC_ALIAS_OF(0));
    RawCall s(false);
    ASSERT_EQ(s.run(raw().kernel("aten::sin", OPC_KERNEL_CPU), {s.tensor(x)}, 1), OPC_OK) << s.error;
    EXPECT_EQ(s.returns[0].alias, 0u);
  }
  {  // fake: the same answer, and a view's offset as byte_offset
    RawCall c(true);
    const OpcValue self = c.meta({2, 3});
    ASSERT_EQ(c.run(raw().kernel("aten::select.int", OPC_KERNEL_FAKE), {self, c.integer(1), c.integer(2)}, 1), OPC_OK)
        << c.error;
    EXPECT_EQ(c.returns[0].alias, OPC_ALIAS_OF(0));
    EXPECT_EQ(RawCall::shape(c.returns[0]), (std::vector<int64_t>{2}));
    EXPECT_EQ(c.returns[0].u.tensor->dl_tensor.byte_offset, 2 * sizeof(double));
  }
  {  // an in-place op returns the argument itself, which is also named
    RawCall c(false);
    const Tensor y = from_vector<double>({1, 2}, {2});
    ASSERT_EQ(c.run(raw().kernel("aten::mul_.Tensor", OPC_KERNEL_CPU), {c.tensor(y), c.tensor(y)}, 1), OPC_OK) << c.error;
    EXPECT_EQ(c.returns[0].alias, OPC_ALIAS_OF(0));
  }
  {  // each item of a Tensor[] return
    RawCall c(true);
    ASSERT_EQ(c.run(raw().kernel("aten::split_with_sizes", OPC_KERNEL_FAKE), {c.meta({4}), c.ints({1, 3}), c.integer(0)}, 1),
              OPC_OK) << c.error;
    ASSERT_EQ(c.returns[0].tag, OPC_TAG_LIST);
    ASSERT_EQ(c.returns[0].u.list.size, 2);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(c.returns[0].u.list.items[i].alias, OPC_ALIAS_OF(0));
  }
}

TEST(AtenAdapterAbi, SymbolicSizesArePinnedWithGuards) {
  RawCall c(true);
  const int64_t s0 = OPC_SYM_HANDLE_BASE, s1 = OPC_SYM_HANDLE_BASE + OPC_SYM_HANDLE_STEP;
  c.hints = {{s0, 4}, {s1, 2}};
  ASSERT_EQ(c.run(raw().kernel("aten::select.int", OPC_KERNEL_FAKE), {c.meta({s0, 3}), c.integer(0), c.integer(s1)}, 1),
            OPC_OK) << c.error;
  EXPECT_EQ(RawCall::shape(c.returns[0]), (std::vector<int64_t>{3}));
  EXPECT_EQ(c.returns[0].u.tensor->dl_tensor.byte_offset, 2 * 3 * sizeof(double));  // index s1 = 2, stride 3
  EXPECT_EQ(c.guarded, (std::vector<int64_t>{s0, s1}));
  // A handle the host does not know is the host's refusal, passed on.
  RawCall bad(true);
  EXPECT_EQ(bad.run(raw().kernel("aten::sin", OPC_KERNEL_FAKE), {bad.meta({s0})}, 1), OPC_INVALID_ARGUMENT);
  EXPECT_NE(bad.error.find("sym_guard_int"), std::string::npos) << bad.error;
}

TEST(AtenAdapterAbi, UndefinedTensorsAreNone) {
  RawCall c(false);
  const Tensor grad = from_vector<double>(std::vector<double>(4, 1.0), {1, 1, 2, 2});
  const Tensor input = from_vector<double>(std::vector<double>(9, 1.0), {1, 1, 3, 3});
  const Tensor weight = from_vector<double>(std::vector<double>(4, 1.0), {1, 1, 2, 2});
  OpcValue none{}, no{}, yes{};
  no.tag = yes.tag = OPC_TAG_BOOL;
  yes.u.b = 1;
  ASSERT_EQ(c.run(raw().kernel("aten::convolution_backward", OPC_KERNEL_CPU),
                  {c.tensor(grad), c.tensor(input), c.tensor(weight), none, c.ints({1, 1}), c.ints({0, 0}),
                   c.ints({1, 1}), no, c.ints({0, 0}), c.integer(1), c.list({no, yes, no})},
                  3),
            OPC_OK) << c.error;
  EXPECT_EQ(c.returns[0].tag, OPC_TAG_NONE);
  EXPECT_EQ(c.returns[1].tag, OPC_TAG_TENSOR);
  EXPECT_EQ(c.returns[2].tag, OPC_TAG_NONE);
}

std::vector<float> raw_rand(uint64_t seed, uint64_t offset) {
  RawCall c(false, seed, offset);
  OpcValue none{};
  EXPECT_EQ(c.run(raw().kernel("aten::rand", OPC_KERNEL_CPU), {c.ints({32}), none, none, none, none}, 1), OPC_OK)
      << c.error;
  return c.take(c.returns[0]).to_vector<float>();
}

TEST(AtenAdapterAbi, TheCallsSeedGivesTheValues) {
  EXPECT_EQ(raw_rand(7, 0), raw_rand(7, 0));
  EXPECT_NE(raw_rand(7, 0), raw_rand(8, 0));
  EXPECT_NE(raw_rand(7, 0), raw_rand(7, 4));
}

TEST(AtenAdapterAbi, DropoutsBackwardReplaysItsForwardsDraw) {
  const Tensor x = from_vector<double>(std::vector<double>(64, 1.5), {64});
  RawCall f(false, 11, 0);
  OpcValue p{}, train{};
  p.tag = OPC_TAG_DOUBLE;
  p.u.d = 0.5;
  train.tag = OPC_TAG_BOOL;
  train.u.b = 1;
  const OpcValue xv = f.tensor(x);
  ASSERT_EQ(f.run(raw().kernel("aten::native_dropout", OPC_KERNEL_CPU), {xv, p, train}, 2), OPC_OK) << f.error;
  // The backward op gets the forward's returns as they were handed out (the host's tensors over them).
  RawCall b(false);
  const Tensor g = from_vector<double>(std::vector<double>(64, 1.0), {64});
  OpcValue none{};
  ASSERT_EQ(b.run(raw().kernel("aten_backward::native_dropout", OPC_KERNEL_CPU),
                  {b.tensor(x), p, train, f.returns[0], f.returns[1], b.tensor(g), none}, 3),
            OPC_OK) << b.error;
  const Tensor mask = f.take(f.returns[1]);
  const std::vector<bool> kept = mask.to_vector<bool>();
  const std::vector<double> gx = b.take(b.returns[0]).to_vector<double>();
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(gx[i], kept[i] ? 2.0 : 0.0) << i;
  EXPECT_EQ(b.returns[1].tag, OPC_TAG_NONE);  // p and train have no gradient
}

TEST(AtenAdapterAbi, BackwardOperatorsOfSin) {
  const std::vector<double> xs = {0.5, 1.0, 2.0}, gs = {1, 2, 3}, ggs = {1, 10, 100};
  const Tensor x = from_vector<double>(xs, {3});
  const Tensor y = aten_call("aten::sin", {x});
  const Tensor g = from_vector<double>(gs, {3});
  RawCall b(false);  // aten_backward::sin(self, result0, grad0) -> (Tensor?)
  ASSERT_EQ(b.run(raw().kernel("aten_backward::sin", OPC_KERNEL_CPU), {b.tensor(x), b.tensor(y), b.tensor(g)}, 1),
            OPC_OK) << b.error;
  const Tensor gx = b.take(b.returns[0]);
  std::vector<double> first, second, by_grad;
  for (size_t i = 0; i < xs.size(); ++i) {
    first.push_back(std::cos(xs[i]) * gs[i]);
    second.push_back(-std::sin(xs[i]) * gs[i] * ggs[i]);
    by_grad.push_back(std::cos(xs[i]) * ggs[i]);
  }
  expect_near(gx, first);
  // aten_backward2::sin(self, result0, grad0, <its result0>, <its grad0>) -> (self, result0, grad0)
  RawCall b2(false);
  ASSERT_EQ(b2.run(raw().kernel("aten_backward2::sin", OPC_KERNEL_CPU),
                   {b2.tensor(x), b2.tensor(y), b2.tensor(g), b2.tensor(gx), b2.tensor(from_vector<double>(ggs, {3}))}, 3),
            OPC_OK) << b2.error;
  expect_near(b2.take(b2.returns[0]), second);
  EXPECT_EQ(b2.returns[1].tag, OPC_TAG_NONE);  // the result is recomputed from self
  expect_near(b2.take(b2.returns[2]), by_grad);
  // The fake kernel: ATen's autograd on meta tensors.
  RawCall fake(true);
  ASSERT_EQ(fake.run(raw().kernel("aten_backward::sin", OPC_KERNEL_FAKE), {fake.meta({2, 3}), fake.meta({2, 3}),
                                                                          fake.meta({2, 3})}, 1),
            OPC_OK) << fake.error;
  EXPECT_EQ(fake.returns[0].u.tensor->dl_tensor.data, nullptr);
  EXPECT_EQ(RawCall::shape(fake.returns[0]), (std::vector<int64_t>{2, 3}));
}

// abs's second derivative with respect to self is ATen's efficient zero tensor, which has no
// memory: it crosses as real zeros.
TEST(AtenAdapterAbi, ZeroTensorsCrossAsZeros) {
  const Tensor x = from_vector<double>({-2, 3}, {2}), g = from_vector<double>({1, 1}, {2});
  const Tensor gg = from_vector<double>({5, 7}, {2});
  RawCall c(false);
  ASSERT_EQ(c.run(raw().kernel("aten_backward2::abs", OPC_KERNEL_CPU),
                  {c.tensor(x), c.tensor(aten_call("aten::abs", {x})), c.tensor(g),
                   c.tensor(from_vector<double>({-1, 1}, {2})), c.tensor(gg)},
                  3),
            OPC_OK) << c.error;
  ASSERT_EQ(c.returns[0].tag, OPC_TAG_TENSOR);
  EXPECT_EQ(c.take(c.returns[0]).to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(c.take(c.returns[2]).to_vector<double>(), (std::vector<double>{-5, 7}));
}

// Tensor[] both ways: split_with_sizes' gradients arrive as one list, cat's gradient is a list.
TEST(AtenAdapterAbi, ListGradients) {
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {4});
  const Tensor g0 = from_vector<double>({10}, {1}), g1 = from_vector<double>({20, 30, 40}, {3});
  RawCall split(false);
  ASSERT_EQ(split.run(raw().kernel("aten::split_with_sizes", OPC_KERNEL_CPU), {split.tensor(x), split.ints({1, 3}),
                                                                              split.integer(0)}, 1),
            OPC_OK) << split.error;
  RawCall b(false);
  ASSERT_EQ(b.run(raw().kernel("aten_backward::split_with_sizes", OPC_KERNEL_CPU),
                  {b.tensor(x), b.ints({1, 3}), b.integer(0), split.returns[0], b.list({b.tensor(g0), b.tensor(g1)})}, 3),
            OPC_OK) << b.error;
  expect_near(b.take(b.returns[0]), {10, 20, 30, 40});
  RawCall c(false);
  const Tensor g = from_vector<double>({1, 2, 3, 4}, {4});
  const Tensor y = aten_call("aten::cat", {IValue(std::vector<Tensor>{g0, g1})});
  ASSERT_EQ(c.run(raw().kernel("aten_backward::cat", OPC_KERNEL_CPU),
                  {c.list({c.tensor(g0), c.tensor(g1)}), c.integer(0), c.tensor(y), c.tensor(g)}, 2),
            OPC_OK) << c.error;
  ASSERT_EQ(c.returns[0].tag, OPC_TAG_LIST);
  ASSERT_EQ(c.returns[0].u.list.size, 2);
  expect_near(c.take(c.returns[0].u.list.items[0]), {1});
  expect_near(c.take(c.returns[0].u.list.items[1]), {2, 3, 4});
  EXPECT_EQ(c.returns[1].tag, OPC_TAG_NONE);
}

// Gradients that are left out (all zeros) are freed during the call: a result allocated where one
// of them was must not pass for that argument (the bridge holds every imported tensor).
TEST(AtenAdapterAbi, LeftOutGradientsAreNotMistakenForResults) {
  const std::vector<int64_t> sizes = {0, 0, 0, 1, 0, 3};
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {4});
  x.set_requires_grad(true);
  const auto pieces = call(aten().registry, "aten::split_with_sizes", {x, IValue(sizes)}).at(0).to_tensor_list();
  const std::vector<Tensor> g = autograd::grad({pieces[3]}, {x}, {from_vector<double>({1}, {1})});
  EXPECT_EQ(g.at(0).to_vector<double>(), (std::vector<double>{1, 0, 0, 0}));
  for (int round = 0; round < 8; ++round) {  // through the ABI alone: zeros for the pieces not used
    RawCall split(false), b(false);
    ASSERT_EQ(split.run(raw().kernel("aten::split_with_sizes", OPC_KERNEL_CPU),
                        {split.tensor(x), split.ints(sizes), split.integer(0)}, 1),
              OPC_OK) << split.error;
    std::vector<OpcValue> grads;
    for (int64_t k = 0; k < 6; ++k)
      grads.push_back(b.tensor(from_vector<double>(std::vector<double>(sizes[k], k == 3 ? 1.0 : 0.0), {sizes[k]})));
    ASSERT_EQ(b.run(raw().kernel("aten_backward::split_with_sizes", OPC_KERNEL_CPU),
                    {b.tensor(x), b.ints(sizes), b.integer(0), split.returns[0], b.list(grads)}, 3),
              OPC_OK) << b.error;
    EXPECT_EQ(b.take(b.returns[0]).to_vector<double>(), (std::vector<double>{1, 0, 0, 0}));
  }
}

// add's gradient of self is its incoming gradient: returned as a copy, never as the argument or
// a view of it (a backward op's schema declares no aliasing).
TEST(AtenAdapterAbi, GradientsNeverAliasArguments) {
  const Tensor a = from_vector<double>({1, 2}, {2}), b = from_vector<double>({3, 4}, {2});
  const Tensor g = from_vector<double>({5, 6}, {2});
  RawCall c(false);
  OpcValue alpha = RawCall::integer(1);
  ASSERT_EQ(c.run(raw().kernel("aten_backward::add.Tensor", OPC_KERNEL_CPU),
                  {c.tensor(a), c.tensor(b), alpha, c.tensor(aten_call("aten::add.Tensor", {a, b})), c.tensor(g)}, 3),
            OPC_OK) << c.error;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c.returns[i].alias, 0u);
    const Tensor gi = c.take(c.returns[i]);
    ASSERT_TRUE(gi.defined());
    EXPECT_NE(gi.const_data_ptr(), g.const_data_ptr());
    EXPECT_EQ(gi.to_vector<double>(), (std::vector<double>{5, 6}));
  }
  EXPECT_EQ(c.returns[2].tag, OPC_TAG_NONE);
}

}  // namespace
}  // namespace opconform::adapters
