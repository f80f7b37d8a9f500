// Fake tensors, FakeTensorMode, fake kernels, the fake fallback and get_ctx (fake_tensor.h).
#include "opconform/core/fake_tensor.h"

#include <algorithm>

namespace opconform {
namespace {

// The fake kernel running on this thread (innermost), for get_ctx() and data-access errors.
thread_local FakeKernelContext* tls_fake_kernel_context = nullptr;

class FakeKernelContextGuard {
 public:
  explicit FakeKernelContextGuard(FakeKernelContext* ctx) : previous_(tls_fake_kernel_context) {
    tls_fake_kernel_context = ctx;
  }
  ~FakeKernelContextGuard() { tls_fake_kernel_context = previous_; }

 private:
  FakeKernelContext* previous_;
};

// Turns fake mode off for a scope: no Fake key in dispatch (not even from tensors), real
// factories, no fake-kernel context. The Meta fallback runs Meta kernels like this.
class SuspendFakeTensorMode {
 public:
  SuspendFakeTensorMode()
      : mode_(detail::tls_fake_tensor_mode), ctx_(tls_fake_kernel_context), exclude_(DispatchKey::Fake) {
    detail::tls_fake_tensor_mode = nullptr;
    tls_fake_kernel_context = nullptr;
  }
  ~SuspendFakeTensorMode() {
    detail::tls_fake_tensor_mode = mode_;
    tls_fake_kernel_context = ctx_;
  }

 private:
  FakeTensorMode* mode_;
  FakeKernelContext* ctx_;
  ExcludeDispatchKeyGuard exclude_;
};

// A fake TensorImpl over `storage` (a new data-less one when null).
Tensor build_fake(std::shared_ptr<Storage> storage, IntArrayRef sizes, IntArrayRef strides, int64_t offset,
                  DType dtype, Device device, std::shared_ptr<const SymShape> sym_shape) {
  OPCONFORM_CHECK(sizes.size() == strides.size(), ErrorCode::kInvalidArgument, "fake tensor: ", sizes.size(),
                  " sizes but ", strides.size(), " strides");
  for (int64_t size : sizes) {
    OPCONFORM_CHECK(size >= 0, ErrorCode::kInvalidArgument, "fake tensor: negative size ", size, " in ",
                    shape_string(sizes));
  }
  // A new data-less storage (make_metadata_tensor), or a view of a fake storage that aliasing
  // shares (make_tensor), then the fake parts.
  Tensor t = storage ? make_tensor(std::move(storage), sizes, strides, offset, dtype)
                     : make_metadata_tensor(sizes, strides, dtype, device, {}, offset);
  detail::TensorImpl* impl = t.unsafe_impl();
  impl->device = device;
  impl->key_set = DispatchKeySet({backend_key(device.type), autograd_key(device.type), DispatchKey::Fake});
  impl->sym_shape = std::move(sym_shape);
  return t;
}

// Runs fn with the active mode, or with a temporary one when none is active (a fake tensor
// reached the Fake key outside any mode, or a kernel was called at the key explicitly).
template <typename F>
void with_fake_mode(F&& fn) {
  if (FakeTensorMode* mode = FakeTensorMode::current()) return fn(*mode);
  FakeTensorMode temporary;
  FakeTensorModeGuard guard(temporary);
  fn(temporary);
}

// The fallback at DispatchKey::Fake (install_fake_fallback).
void fake_fallback(const OperatorHandle& op, DispatchKeySet, Stack& stack) {
  OPCONFORM_CHECK_BECAUSE(op.has_kernel_at(DispatchKey::Meta), ErrorCode::kNotImplemented, ErrorReason::kNoFakeKernel, "operator '", op.name(),
                  "' has no fake kernel; register one with register_fake");
  with_fake_mode([&](FakeTensorMode& mode) {
    const size_t n = std::min(op.entry().num_arguments, stack.size());
    const size_t base = stack.size() - n;
    struct Input {
      Tensor meta, fake;
    };
    std::vector<Input> inputs;
    std::optional<Device> device;
    auto to_meta = [&](const Tensor& t) -> Tensor {
      if (!t.defined()) return t;
      Tensor fake = t.is_fake() ? t : mode.from_tensor(t);
      if (!device) device = fake.device();
      Tensor meta = make_metadata_tensor(fake.sizes(), fake.strides(), fake.dtype(), Device::meta(), {},
                                         fake.storage_offset());
      inputs.push_back({meta, fake});
      return meta;
    };
    for (size_t i = base; i < stack.size(); ++i) {
      stack[i] = map_tensors(stack[i], to_meta);
      if (!device) {
        if (const Device* d = stack[i].get_if<Device>()) device = *d;
      }
    }
    {
      SuspendFakeTensorMode suspend;
      op.redispatch_boxed(DispatchKeySet(DispatchKey::Meta), stack);
    }
    // Outputs: an input returned as is (in-place ops) maps back to that input; a view of an
    // input shares its fake storage; anything else is a new fake on the inputs' device.
    auto to_fake = [&](const Tensor& t) -> Tensor {
      if (!t.defined() || t.is_fake()) return t;
      for (const Input& in : inputs) {
        if (t.is_same(in.meta)) return in.fake;
      }
      for (const Input& in : inputs) {
        if (t.is_alias_of(in.meta)) {
          return build_fake(in.fake.storage(), t.sizes(), t.strides(), t.storage_offset(), t.dtype(),
                            in.fake.device(), nullptr);
        }
      }
      return build_fake(nullptr, t.sizes(), t.strides(), t.storage_offset(), t.dtype(),
                        device.value_or(Device::cpu()), nullptr);
    };
    for (size_t i = base; i < stack.size(); ++i) stack[i] = map_tensors(stack[i], to_fake);
  });
}

}  // namespace

// ---------------------------------------------------------------- symbolic metadata

std::vector<SymInt> Tensor::sym_sizes() const {
  if (const auto& s = impl().sym_shape) return s->sizes;
  return std::vector<SymInt>(impl().sizes.begin(), impl().sizes.end());
}

std::vector<SymInt> Tensor::sym_strides() const {
  if (const auto& s = impl().sym_shape) return s->strides;
  return std::vector<SymInt>(impl().strides.begin(), impl().strides.end());
}

int64_t concrete_stand_in(const SymInt& s) {
  if (auto c = s.maybe_as_int()) return *c;
  return s.node()->evaluate([](const SymNode& sym) {
    const auto& info = sym.symbol();
    return info.hint ? *info.hint : std::clamp<int64_t>(2, info.min, info.max);
  });
}

Tensor make_fake_tensor(std::vector<SymInt> sizes, DType dtype, Device device, std::optional<std::vector<SymInt>> strides) {
  std::vector<SymInt> st = strides ? std::move(*strides) : contiguous_strides(sizes);
  OPCONFORM_CHECK(st.size() == sizes.size(), ErrorCode::kInvalidArgument, "make_fake_tensor: ", sizes.size(),
                  " sizes but ", st.size(), " strides");
  std::vector<int64_t> concrete_sizes, concrete_strides;
  bool symbolic = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    concrete_sizes.push_back(concrete_stand_in(sizes[i]));
    concrete_strides.push_back(concrete_stand_in(st[i]));
    symbolic = symbolic || sizes[i].is_symbolic() || st[i].is_symbolic();
  }
  std::shared_ptr<const SymShape> shape;
  if (symbolic) shape = std::make_shared<const SymShape>(SymShape{std::move(sizes), std::move(st)});
  return build_fake(nullptr, concrete_sizes, concrete_strides, 0, dtype, device, std::move(shape));
}

Tensor empty(const std::vector<SymInt>& sizes, TensorOptions options) {
  return empty_strided(sizes, contiguous_strides(sizes), options);
}

Tensor empty_strided(const std::vector<SymInt>& sizes, const std::vector<SymInt>& strides, TensorOptions options) {
  auto is_symbolic = [](const SymInt& s) { return s.is_symbolic(); };
  auto symbolic_size = std::find_if(sizes.begin(), sizes.end(), is_symbolic);
  auto symbolic_stride = std::find_if(strides.begin(), strides.end(), is_symbolic);
  if (symbolic_size == sizes.end() && symbolic_stride == strides.end()) {
    std::vector<int64_t> concrete_sizes, concrete_strides;
    for (const auto& s : sizes) concrete_sizes.push_back(*s.maybe_as_int());
    for (const auto& s : strides) concrete_strides.push_back(*s.maybe_as_int());
    return empty_strided(IntArrayRef(concrete_sizes), IntArrayRef(concrete_strides), options);
  }
  OPCONFORM_CHECK(FakeTensorMode::current() != nullptr, ErrorCode::kInvalidArgument, "empty_strided: symbolic ",
                  symbolic_size != sizes.end() ? "size " : "stride ",
                  symbolic_size != sizes.end() ? *symbolic_size : *symbolic_stride,
                  " outside a FakeTensorMode: only a fake tensor can have symbolic sizes (fake kernels run under a "
                  "mode; a real kernel reads concrete sizes)");
  for (const auto& s : sizes) {
    if (auto v = s.maybe_as_int())
      OPCONFORM_CHECK(*v >= 0, ErrorCode::kInvalidArgument, "empty: negative dimension ", *v);
  }
  Device device = options.device;
  if (device.is_cuda() && device.index < 0) device.index = 0;
  return make_fake_tensor(sizes, options.dtype, device, strides);
}

Tensor empty_like(const Tensor& x) { return empty_like(x, x.options()); }

Tensor empty_like(const Tensor& x, TensorOptions options) {
  OPCONFORM_CHECK(x.defined(), ErrorCode::kInvalidArgument, "empty_like: the tensor is undefined");
  return empty(x.sym_sizes(), options);
}

// ---------------------------------------------------------------- FakeTensorMode

struct FakeTensorMode::Memo {
  struct Entry {
    Tensor real;  // kept alive, so its storage address is not reused while memoised
    bool dynamic;
    Tensor fake;
  };
  std::map<const Storage*, std::vector<Entry>> tensors;
  // The fake storage standing for each real storage, with the real one kept alive.
  std::map<const Storage*, std::pair<std::shared_ptr<Storage>, std::shared_ptr<Storage>>> storages;
  int64_t next_name = 0;
};

FakeTensorMode::FakeTensorMode(std::shared_ptr<ShapeEnv> shape_env)
    : shape_env_(shape_env ? std::move(shape_env) : std::make_shared<ShapeEnv>()), memo_(std::make_unique<Memo>()) {}

FakeTensorMode::~FakeTensorMode() = default;

FakeTensorMode* FakeTensorMode::current() { return detail::tls_fake_tensor_mode; }

Tensor FakeTensorMode::from_tensor(const Tensor& real, bool dynamic, std::string name) {
  OPCONFORM_CHECK(real.defined(), ErrorCode::kInvalidArgument, "from_tensor: the tensor is undefined");
  if (real.is_fake()) return real;
  std::lock_guard<std::mutex> lock(mutex_);
  const Storage* key = real.storage().get();
  for (const auto& e : memo_->tensors[key]) {
    if (e.real.is_same(real) && e.dynamic == dynamic) return e.fake;
  }
  auto& storage = memo_->storages[key];
  if (!storage.second) {
    storage = {real.storage(), Storage::wrap(nullptr, real.storage()->nbytes(), real.device(), nullptr)};
  }

  std::shared_ptr<const SymShape> shape;
  if (dynamic) {
    if (name.empty()) name = "t" + std::to_string(memo_->next_name++);
    const int64_t n = real.dim();
    std::vector<SymInt> sizes, strides;
    for (int64_t d = 0; d < n; ++d) {
      sizes.push_back(shape_env_->create_symbol(real.size(d), name + ".size(" + std::to_string(d) + ")"));
    }
    // A stride is symbolic when it is the product of the sizes of the dimensions with smaller
    // strides (a dense layout, in any dimension order); otherwise it stays concrete.
    for (int64_t d = 0; d < n; ++d) {
      SymInt candidate = 1;
      for (int64_t e = 0; e < n; ++e) {
        if (e != d && real.size(e) >= 2 && real.stride(e) < real.stride(d)) candidate = candidate * sizes[e];
      }
      strides.push_back(candidate.hint() == real.stride(d) ? candidate : SymInt(real.stride(d)));
    }
    bool symbolic = std::any_of(sizes.begin(), sizes.end(), [](const SymInt& s) { return s.is_symbolic(); });
    if (symbolic) shape = std::make_shared<const SymShape>(SymShape{std::move(sizes), std::move(strides)});
  }
  Tensor fake = build_fake(storage.second, real.sizes(), real.strides(), real.storage_offset(), real.dtype(),
                           real.device(), std::move(shape));
  memo_->tensors[key].push_back({real, dynamic, fake});
  return fake;
}

FakeTensorModeGuard::FakeTensorModeGuard(FakeTensorMode& mode)
    : previous_(detail::tls_fake_tensor_mode), include_fake_(DispatchKey::Fake), shape_env_(&mode.shape_env()) {
  detail::tls_fake_tensor_mode = &mode;
}

FakeTensorModeGuard::~FakeTensorModeGuard() { detail::tls_fake_tensor_mode = previous_; }

// ---------------------------------------------------------------- fake kernels

SymInt FakeKernelContext::new_dynamic_size(int64_t min, int64_t max) {
  OPCONFORM_CHECK(min >= 0 && min <= max, ErrorCode::kInvalidArgument, "new_dynamic_size: invalid range [", min,
                  ", ", max, "] (sizes are >= 0 and min <= max)");
  return mode_->shape_env().create_unbacked(min, max, "get_ctx().new_dynamic_size() in the fake kernel of '" +
                                                          op_name_ + "'");
}

FakeKernelContext& get_ctx() {
  OPCONFORM_CHECK(tls_fake_kernel_context != nullptr, ErrorCode::kInvalidArgument,
                  "get_ctx() can only be called inside a fake kernel (one registered with register_fake)");
  return *tls_fake_kernel_context;
}

KernelFunction wrap_fake_kernel(KernelFunction user_fake_fn) {
  OPCONFORM_CHECK(user_fake_fn.valid() && !user_fake_fn.is_fallthrough(), ErrorCode::kRegistration,
                  "wrap_fake_kernel: the fake kernel is empty");
  return KernelFunction::from_boxed([user = std::move(user_fake_fn)](const OperatorHandle& op, DispatchKeySet keys,
                                                                     Stack& stack) {
    with_fake_mode([&](FakeTensorMode& mode) {
      auto to_fake = [&](const Tensor& t) { return t.defined() && !t.is_fake() ? mode.from_tensor(t) : t; };
      const size_t n = std::min(op.entry().num_arguments, stack.size());
      const size_t base = stack.size() - n;
      for (size_t i = base; i < stack.size(); ++i) stack[i] = map_tensors(stack[i], to_fake);
      FakeKernelContext ctx(op.name(), mode);
      {
        // Fake stays included: Note [Nested dispatch in fake kernels]. A data access inside
        // throws its own helpful error (detail::throw_fake_data_access reads this context).
        FakeKernelContextGuard guard(&ctx);
        user.call_boxed(op, keys, stack);
      }
      // A real tensor the kernel returns (one it captured) is made fake like the inputs.
      for (size_t i = base; i < stack.size(); ++i) stack[i] = map_tensors(stack[i], to_fake);
    });
  });
}

RegistrationHandle install_fake_fallback(Registry& registry) {
  return registry.fallback(DispatchKey::Fake, KernelFunction::from_boxed(fake_fallback),
                           RegistrationSource::named("install_fake_fallback (Meta kernel or error)"));
}

// ---------------------------------------------------------------- hooks called by tensor.cpp

std::optional<Tensor> detail::make_fake_for_factory(IntArrayRef sizes, IntArrayRef strides, const TensorOptions& options) {
  return build_fake(nullptr, sizes, strides, 0, options.dtype, options.device, nullptr);
}

void detail::throw_fake_data_access(const Tensor& t) {
  if (tls_fake_kernel_context != nullptr) {
    throw Error(ErrorCode::kInvalidArgument, ErrorReason::kFakeDataAccess,
                concat("fake kernel of '", tls_fake_kernel_context->op_name(),
                       "' accessed tensor data: fake tensors have no data; for outputs whose size depends on "
                       "data use get_ctx().new_dynamic_size()"));
  }
  throw Error(ErrorCode::kInvalidArgument, ErrorReason::kFakeDataAccess,
              concat("cannot access the data of a fake tensor (size ", shape_string(t.sizes()), ", ", name(t.dtype()),
                     ", on ", t.device().to_string(),
                     "): fake tensors have metadata only; use real tensors, outside FakeTensorMode, to read data"));
}

}  // namespace opconform
