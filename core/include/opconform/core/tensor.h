// Tensor: a strided view of a Storage, with a dtype, a device and a dispatch key set.
//
// A Tensor is a cheap shared handle (copying it shares the same tensor, as in PyTorch).
// Views (view, reshape when possible, as_strided, narrow/slice, select, transpose, permute,
// expand, squeeze/unsqueeze, diagonal) share the storage of their base. Writes through this API
// (copy_, fill_, set, mutable_data_ptr) check the storage is writable and bump its version.
//
// Note [Version counter]: the counter lives in the Storage, so a write through any view is seen
// by every other view. test_schema reads it (with the bytes) to detect undeclared mutation.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/core/scalar.h"
#include "opconform/core/storage.h"
#include "opconform/core/strides.h"  // contiguous_strides and the rest of the stride rule
#include "opconform/core/detail/biased_count.h"
#include "opconform/core/symint.h"

namespace opconform {

using IntArrayRef = std::span<const int64_t>;

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();

  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}
  TensorOptions(Device dev) : device(dev) {}
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};

namespace autograd {
struct AutogradMeta;  // autograd.h: requires_grad, grad, grad_fn of one tensor
}
struct SymShape;      // fake_tensor.h: symbolic sizes and strides of a fake tensor
struct BatchedInfo;   // vmap.h: the physical tensor, batch dimension and level behind a vmap view
struct SubclassInfo;  // dispatch_mode.h: the inner tensor and handler of a tensor-subclass-like wrapper

namespace detail {

// The shared state behind Tensor handles. Reference counted in place (one allocation, one
// pointer per handle): handles are copied on every boxed call, so this is on the hot path
// (Note [Biased reference counts], detail/biased_count.h).
struct TensorImpl : BiasedCount {
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
  DType dtype = DType::Float32;
  Device device;
  DispatchKeySet key_set;  // backend + autograd key of the device, plus e.g. Fake
  // Extensions, null when unused. They belong to this tensor object, not to its storage: a view
  // made from it starts without them (its own autograd history, its own shape).
  std::shared_ptr<autograd::AutogradMeta> autograd_meta;
  std::shared_ptr<const SymShape> sym_shape;
  std::shared_ptr<BatchedInfo> batched;
  std::shared_ptr<const SubclassInfo> subclass;

  TensorImpl() : BiasedCount(&dispose) {}
  // A copy of the metadata (a new view); the copy starts with its own count of one.
  TensorImpl(const TensorImpl& o)
      : BiasedCount(&dispose), storage(o.storage), sizes(o.sizes), strides(o.strides), storage_offset(o.storage_offset),
        dtype(o.dtype), device(o.device), key_set(o.key_set) {}
  TensorImpl& operator=(const TensorImpl&) = delete;

  // Out of line: the count's slow path only.
  static void dispose(BiasedCount* count);
};
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;  // undefined
  // Takes ownership of a new TensorImpl (its count of one becomes this handle's).
  static Tensor adopt(std::unique_ptr<detail::TensorImpl> impl) { return Tensor(impl.release()); }

  Tensor(const Tensor& o) noexcept : impl_(o.impl_) {
    if (impl_) impl_->retain();
  }
  Tensor(Tensor&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
  Tensor& operator=(const Tensor& o) noexcept {
    Tensor copy(o);
    std::swap(impl_, copy.impl_);
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    std::swap(impl_, o.impl_);
    return *this;
  }
  ~Tensor() {
    if (impl_) impl_->release();
  }

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  IntArrayRef sizes() const { return impl().sizes; }
  IntArrayRef strides() const { return impl().strides; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  int64_t storage_offset() const { return impl().storage_offset; }
  DType dtype() const { return impl().dtype; }
  size_t itemsize() const { return opconform::itemsize(impl().dtype); }
  Device device() const { return impl().device; }
  DispatchKeySet key_set() const { return impl().key_set; }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  TensorOptions options() const { return {dtype(), device()}; }
  // Contiguous in row-major order (sizes of 1 and empty tensors ignore strides, as PyTorch).
  bool is_contiguous() const;
  // Every element has its own memory and together they fill one block (any dimension order).
  bool is_non_overlapping_and_dense() const;
  // True for tensors whose storage holds no memory (meta and fake tensors).
  bool is_meta_data() const { return !impl().storage->has_data(); }
  bool is_fake() const { return impl().key_set.has(DispatchKey::Fake); }

  // ---- autograd (defined in autograd.cpp) ----
  bool requires_grad() const;
  // Marks a leaf tensor as needing gradients (an error on non-leaves and non-floating dtypes).
  const Tensor& set_requires_grad(bool requires_grad) const;
  // The accumulated gradient of a leaf (undefined when none).
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  // True for tensors not produced by a recorded operation.
  bool is_leaf() const;
  // The same data without autograd history.
  Tensor detach() const;
  // Runs backward from this tensor; `gradient` defaults to ones for a one-element tensor.
  void backward(const Tensor& gradient, bool retain_graph = false, bool create_graph = false) const;
  void backward() const;

  // ---- symbolic sizes (defined in fake_tensor.cpp) ----
  // Sizes as SymInts: concrete unless this is a fake tensor with symbolic sizes.
  std::vector<SymInt> sym_sizes() const;
  std::vector<SymInt> sym_strides() const;
  bool has_symbolic_sizes() const { return impl().sym_shape != nullptr; }

  // The shared state behind the handle, for the subsystems that own one of its extension
  // fields (autograd_meta, sym_shape, batched); null for an undefined tensor.
  detail::TensorImpl* unsafe_impl() const { return impl_; }

  // ---- identity ----
  // Same TensorImpl (the "is the same tensor object" test of the alias checks).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // Same storage (a view of the same base).
  bool is_alias_of(const Tensor& other) const;
  uint64_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- data ----
  // Pointer to the first element (storage data + offset). Throws for tensors without data.
  const void* const_data_ptr() const;
  // Checks the storage is writable, bumps the version, and returns the first element's address.
  void* mutable_data_ptr() const;
  template <typename T> const T* const_data_ptr() const;
  template <typename T> T* mutable_data_ptr() const;

  // Element access (CPU or any device through a host copy; meant for tests and printing).
  Scalar get(IntArrayRef index) const;
  Scalar get(std::initializer_list<int64_t> index) const { return get(IntArrayRef(index.begin(), index.size())); }
  void set(IntArrayRef index, const Scalar& value) const;
  void set(std::initializer_list<int64_t> index, const Scalar& value) const {
    set(IntArrayRef(index.begin(), index.size()), value);
  }
  // The value of a one-element tensor.
  Scalar item() const;
  // All elements in row-major order, converted to T.
  template <typename T> std::vector<T> to_vector() const;

  // ---- views (share storage) ----
  Tensor view(IntArrayRef sizes) const;  // one size may be -1
  Tensor view(std::initializer_list<int64_t> s) const { return view(IntArrayRef(s.begin(), s.size())); }
  Tensor reshape(IntArrayRef sizes) const;  // a view when possible, else a copy
  Tensor reshape(std::initializer_list<int64_t> s) const { return reshape(IntArrayRef(s.begin(), s.size())); }
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides, std::optional<int64_t> storage_offset = {}) const;
  // The same with symbolic sizes and strides (a fake tensor's view whose sizes a plugin's fake kernel
  // computed): they stay symbolic when this tensor's are (Note [Views of symbolic fakes]).
  Tensor as_strided(const std::vector<SymInt>& sizes, const std::vector<SymInt>& strides, int64_t storage_offset) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = {}, std::optional<int64_t> end = {},
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor permute(std::initializer_list<int64_t> d) const { return permute(IntArrayRef(d.begin(), d.size())); }
  Tensor expand(IntArrayRef sizes) const;  // -1 keeps a size
  Tensor expand(std::initializer_list<int64_t> s) const { return expand(IntArrayRef(s.begin(), s.size())); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;

  // ---- copies and writes ----
  Tensor contiguous() const;  // self when already contiguous
  // A copy with the same strides when self is non-overlapping and dense, else contiguous
  // (PyTorch's preserve_format).
  Tensor clone() const;
  // Copies src into self: src broadcasts to self's shape, dtypes convert, devices may differ.
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(const Scalar& value) const;
  Tensor to(DType dtype) const;    // self when the dtype already matches
  Tensor to(Device device) const;  // self when the device already matches
  Tensor to(DType dtype, Device device) const;

  std::string to_string() const;  // tensor([[1., 2.], [3., 4.]], dtype=float64)

 private:
  // Inline: every accessor (key_set, dtype, sizes...) goes through it, the dispatcher's key
  // computation on every call among them; the error path stays out of line.
  const detail::TensorImpl& impl() const {
    if (impl_ == nullptr) [[unlikely]] throw_undefined();
    return *impl_;
  }
  [[noreturn, gnu::cold]] static void throw_undefined();
  // A view of this tensor's storage. Note [Views of symbolic fakes] (tensor.cpp) says when it keeps
  // symbolic sizes: `sym_sizes`/`sym_strides` are the view's own, computed by the caller.
  Tensor make_view(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset,
                   std::optional<std::vector<SymInt>> sym_sizes = {},
                   std::optional<std::vector<SymInt>> sym_strides = {}) const;
  explicit Tensor(detail::TensorImpl* impl) : impl_(impl) {}
  detail::TensorImpl* impl_ = nullptr;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

inline void Tensor::backward() const { backward(Tensor()); }

// ---- factories ----
Tensor empty(IntArrayRef sizes, TensorOptions options = {});
inline Tensor empty(std::initializer_list<int64_t> s, TensorOptions o = {}) {
  return empty(IntArrayRef(s.begin(), s.size()), o);
}
Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
// Factories for fake kernels, which must keep sizes symbolic: reading x.sizes() of a fake with
// symbolic sizes gives the example's values (Note [Concrete sizes of symbolic fakes] in
// fake_tensor.h), which a captured graph would then bake in. With a symbolic size among `sizes`
// (from x.sym_sizes()) the result is a fake tensor with those symbolic sizes; all-concrete sizes
// behave as empty(IntArrayRef).
Tensor empty(const std::vector<SymInt>& sizes, TensorOptions options = {});
// The same with strides (e.g. from strides.h over the same sizes): one call makes a kernel's
// output for real and fake inputs alike. All-concrete sizes and strides behave as
// empty_strided(IntArrayRef, IntArrayRef); a symbolic one makes a fake tensor with those sizes and
// strides, which needs an active FakeTensorMode (fake kernels run under one): outside it the call
// is an error, as a real tensor cannot have symbolic sizes.
Tensor empty_strided(const std::vector<SymInt>& sizes, const std::vector<SymInt>& strides, TensorOptions options = {});
// A new contiguous tensor of x's sizes (symbolic when x's are), with x's dtype and device unless
// `options` are given (PyTorch's empty_like with memory_format=torch.contiguous_format).
Tensor empty_like(const Tensor& x);
Tensor empty_like(const Tensor& x, TensorOptions options);
Tensor zeros(IntArrayRef sizes, TensorOptions options = {});
inline Tensor zeros(std::initializer_list<int64_t> s, TensorOptions o = {}) {
  return zeros(IntArrayRef(s.begin(), s.size()), o);
}
Tensor ones(IntArrayRef sizes, TensorOptions options = {});
inline Tensor ones(std::initializer_list<int64_t> s, TensorOptions o = {}) {
  return ones(IntArrayRef(s.begin(), s.size()), o);
}
Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options = {});
inline Tensor full(std::initializer_list<int64_t> s, const Scalar& value, TensorOptions o = {}) {
  return full(IntArrayRef(s.begin(), s.size()), value, o);
}
// 0, 1, ..., n-1 (int64 by default, as PyTorch's arange of an integer)
Tensor arange(int64_t n, TensorOptions options = TensorOptions(DType::Int64));
// A 0-d tensor holding value (dtype defaults to the scalar's PyTorch default).
Tensor scalar_tensor(const Scalar& value, std::optional<TensorOptions> options = {});
// A CPU tensor of dtype_of<T> from values in row-major order.
template <typename T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef sizes);
template <typename T>
Tensor from_vector(const std::vector<T>& values, std::initializer_list<int64_t> s) {
  return from_vector(values, IntArrayRef(s.begin(), s.size()));
}
// A tensor with metadata and no memory: sizes, strides, dtype and device as given, with the
// extra dispatch keys (Fake for fake tensors). Touching its data is an error.
Tensor make_metadata_tensor(IntArrayRef sizes, IntArrayRef strides, DType dtype, Device device,
                            DispatchKeySet extra_keys = {}, int64_t storage_offset = 0);
// A tensor over an existing storage (used by DLPack import).
Tensor make_tensor(std::shared_ptr<Storage> storage, IntArrayRef sizes, IntArrayRef strides,
                   int64_t storage_offset, DType dtype);

// "[2, 3]": sizes, strides or an index as PyTorch prints them (for messages).
std::string shape_string(IntArrayRef values);

// The shape two shapes broadcast to; throws naming both shapes when they do not.
std::vector<int64_t> broadcast_shapes(IntArrayRef a, IntArrayRef b);

// True when some byte of a's elements is also a byte of b's elements (exact, not just ranges).
bool memory_overlaps(const Tensor& a, const Tensor& b);

// Same dtype, sizes and element values (NaN equal to NaN, -0 equal to 0); strides may differ.
bool equal(const Tensor& a, const Tensor& b);

// ---- template definitions ----
template <typename T>
const T* Tensor::const_data_ptr() const {
  OPCONFORM_CHECK(dtype() == dtype_of_v<T>, ErrorCode::kInvalidArgument, "const_data_ptr<",
                  name(dtype_of_v<T>), ">() called on a tensor of dtype ", name(dtype()));
  return static_cast<const T*>(const_data_ptr());
}

template <typename T>
T* Tensor::mutable_data_ptr() const {
  OPCONFORM_CHECK(dtype() == dtype_of_v<T>, ErrorCode::kInvalidArgument, "mutable_data_ptr<",
                  name(dtype_of_v<T>), ">() called on a tensor of dtype ", name(dtype()));
  return static_cast<T*>(mutable_data_ptr());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(dtype_of_v<T>, Device::cpu()).contiguous();
  const T* p = c.const_data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef sizes) {
  Tensor t = empty(sizes, TensorOptions(dtype_of_v<T>));
  OPCONFORM_CHECK(static_cast<int64_t>(values.size()) == t.numel(), ErrorCode::kInvalidArgument,
                  "from_vector: ", values.size(), " values for a tensor of ", t.numel(), " elements");
  T* p = t.mutable_data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

}  // namespace opconform
