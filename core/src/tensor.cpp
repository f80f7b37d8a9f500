#include "opconform/core/tensor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

#include "opconform/core/detail/cuda_fill.h"
#include "opconform/core/detail/strided_loop.h"
#include "opconform/core/fake_tensor.h"  // the fake factory hook and the fake data-access error

namespace opconform {
namespace {

// Wraps a possibly negative dimension into [0, ndim); 0-d tensors accept -1 and 0.
int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  OPCONFORM_CHECK(d >= -n && d < n, ErrorCode::kInvalidArgument, op, ": dimension ", d,
                  " out of range (expected to be in range of [", -n, ", ", n - 1, "])");
  return d < 0 ? d + n : d;
}

int64_t product(IntArrayRef s) {
  int64_t p = 1;
  for (int64_t v : s) p *= v;
  return p;
}

DispatchKeySet keys_for(Device device, DispatchKeySet extra) {
  return DispatchKeySet({backend_key(device.type), autograd_key(device.type)}) | extra;
}

// Offset (in elements) of the last element relative to the first; strides are non-negative.
int64_t span_elements(IntArrayRef sizes, IntArrayRef strides) {
  int64_t span = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return -1;
    span += (sizes[i] - 1) * strides[i];
  }
  return span;
}

// The bytes a new storage needs for sizes and (non-negative) strides, 0 without elements. Sizes
// and strides can ask for more than int64 holds (a plugin's new_tensor asks for anything): the
// element count and the byte count are checked, where the products wrapped silently before
// (found by fuzz/plugin_value).
size_t checked_storage_bytes(IntArrayRef sizes, IntArrayRef strides, DType dtype) {
  int64_t count = 1, span = 0;  // count: the element count with empty dimensions read as 1
  bool overflow = false, empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    empty = empty || sizes[i] == 0;
    int64_t reach = 0;
    overflow = overflow || __builtin_mul_overflow(count, sizes[i] == 0 ? 1 : sizes[i], &count) ||
               (sizes[i] > 0 && (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) ||
                                 __builtin_add_overflow(span, reach, &span)));
  }
  int64_t nbytes = 0;
  overflow = overflow || span == std::numeric_limits<int64_t>::max() ||
             __builtin_mul_overflow(span + 1, static_cast<int64_t>(itemsize(dtype)), &nbytes);
  OPCONFORM_CHECK(!overflow, ErrorCode::kInvalidArgument, "empty_strided: size ", shape_string(sizes), " with strides ",
                  shape_string(strides), " holds more elements or bytes than fit in int64");
  return empty ? 0 : static_cast<size_t>(nbytes);
}

// PyTorch's computeStride: strides that let `newshape` view memory laid out as (oldshape,
// oldstride), or nullopt when no such strides exist.
std::optional<std::vector<int64_t>> compute_view_strides(IntArrayRef oldshape, IntArrayRef oldstride,
                                                         IntArrayRef newshape) {
  std::vector<int64_t> newstride(newshape.size(), 0);
  if (oldshape.empty()) return contiguous_strides(newshape);
  int64_t numel = product(oldshape);
  if (numel == 0) {
    if (std::equal(oldshape.begin(), oldshape.end(), newshape.begin(), newshape.end()))
      return std::vector<int64_t>(oldstride.begin(), oldstride.end());
    return contiguous_strides(newshape);
  }
  int64_t view_d = static_cast<int64_t>(newshape.size()) - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= oldshape[tensor_d];
    if (tensor_d == 0 ||
        (oldshape[tensor_d - 1] != 1 && oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        newstride[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return newstride;
}

// Resolves one -1 in a requested shape.
std::vector<int64_t> infer_size(IntArrayRef shape, int64_t numel, const char* op) {
  std::vector<int64_t> out(shape.begin(), shape.end());
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      OPCONFORM_CHECK(!infer, ErrorCode::kInvalidArgument, op, ": only one dimension can be inferred in ",
                      shape_string(shape));
      infer = i;
    } else {
      OPCONFORM_CHECK(out[i] >= 0, ErrorCode::kInvalidArgument, op, ": invalid shape dimension ", out[i],
                      " in ", shape_string(shape));
      known *= out[i];
    }
  }
  if (infer) {
    OPCONFORM_CHECK(known != 0 && numel % known == 0, ErrorCode::kInvalidArgument, op, ": shape ",
                    shape_string(shape), " is invalid for input of size ", numel);
    out[*infer] = numel / known;
  } else {
    OPCONFORM_CHECK(known == numel, ErrorCode::kInvalidArgument, op, ": shape ", shape_string(shape),
                    " is invalid for input of size ", numel);
  }
  return out;
}

// Writes `value` into every element of a CPU tensor view with data.
void cpu_fill(const Tensor& t, const Scalar& value) {
  char* base = static_cast<char*>(const_cast<void*>(t.const_data_ptr()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = value.to<T>();
    T* p = reinterpret_cast<T*>(base);
    detail::strided_loop<1>(t.sizes(), {t.strides()}, [&](const std::array<int64_t, 1>& o) { p[o[0]] = v; });
  });
}

// Copies src into dst element by element; both CPU, same shape, no overlap.
void cpu_copy(const Tensor& dst, const Tensor& src) {
  char* dbase = static_cast<char*>(const_cast<void*>(dst.const_data_ptr()));
  const char* sbase = static_cast<const char*>(src.const_data_ptr());
  // The same dtype and the same dense layout (a clone): the elements are one block of memory.
  // The checks clone every sample several times, so this is most copies.
  if (dst.dtype() == src.dtype() && std::ranges::equal(dst.strides(), src.strides()) &&
      src.is_non_overlapping_and_dense()) {
    if (src.numel() > 0) std::memmove(dbase, sbase, static_cast<size_t>(src.numel()) * src.itemsize());
    return;
  }
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      D* d = reinterpret_cast<D*>(dbase);
      const S* s = reinterpret_cast<const S*>(sbase);
      detail::strided_loop<2>(dst.sizes(), {dst.strides(), src.strides()},
                              [&](const std::array<int64_t, 2>& o) { d[o[0]] = convert_scalar<D>(s[o[1]]); });
    });
  });
}

// A host (CPU) tensor with t's sizes and strides holding a copy of the memory t spans.
// Non-negative strides are assumed (every view here has them).
Tensor host_copy_of_span(const Tensor& t) {
  int64_t span = span_elements(t.sizes(), t.strides());
  size_t nbytes = span < 0 ? 0 : static_cast<size_t>(span + 1) * t.itemsize();
  auto storage = Storage::allocate(nbytes, Device::cpu());
  if (nbytes > 0) {
    allocator_for(t.device().type).copy_to_host(storage->data(), t.const_data_ptr(), nbytes, t.device());
  }
  return make_tensor(storage, t.sizes(), t.strides(), 0, t.dtype());
}

// Writes a host tensor made by host_copy_of_span back to the device memory of t.
void write_span_back(const Tensor& t, const Tensor& host) {
  size_t nbytes = host.storage()->nbytes();
  if (nbytes == 0) return;
  allocator_for(t.device().type)
      .copy_from_host(const_cast<void*>(t.const_data_ptr()), host.storage()->data(), nbytes, t.device());
}

// A copy between two tensors of one non-CPU device with one dtype and one dense layout is one copy
// of their bytes on the device (a CUDA clone: one device-to-device copy instead of a round trip
// through the host). Non-negative strides, as everywhere here: the bytes start at the data pointer.
bool copies_bytes_on_device(const Tensor& dst, const Tensor& src) {
  return !dst.device().is_cpu() && dst.device() == src.device() && dst.dtype() == src.dtype() &&
         std::equal(dst.strides().begin(), dst.strides().end(), src.strides().begin(), src.strides().end()) &&
         std::equal(dst.sizes().begin(), dst.sizes().end(), src.sizes().begin(), src.sizes().end()) &&
         dst.is_non_overlapping_and_dense() && !memory_overlaps(dst, src);
}

// Fills contiguous CUDA memory with a device kernel; false when the build has none.
bool fill_on_cuda(const Tensor& t, const Scalar& value) {
  alignas(16) unsigned char pattern[16];
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = value.to<T>();
    std::memcpy(pattern, &v, sizeof(T));
  });
  return detail::cuda_fill(const_cast<void*>(t.const_data_ptr()), pattern, t.itemsize(), t.numel(), t.device().index);
}

// Whether two elements of t may share memory (a write through t would be ambiguous).
bool has_internal_overlap(const Tensor& t) {
  if (t.numel() == 0) return false;  // no elements, nothing shared (e.g. [1, 0] expanded to [2, 0])
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) == 0) return true;
  }
  return false;
}

void check_writable(const Tensor& t, const char* op) {
  OPCONFORM_CHECK(!t.storage()->read_only(), ErrorCode::kReadOnly, op,
                  ": the tensor is read-only (imported from a read-only DLPack tensor)");
  OPCONFORM_CHECK(!has_internal_overlap(t), ErrorCode::kInvalidArgument, op,
                  ": more than one element of the written-to tensor refers to a single memory location "
                  "(an expanded tensor); clone it first");
}

std::string format_scalar(const Scalar& s, DType dtype) {
  std::ostringstream out;
  if (dtype == DType::Bool) return s.to<bool>() ? "True" : "False";
  if (is_integral(dtype)) return std::to_string(s.to_int());
  auto fmt = [&](double v) {
    if (std::isnan(v)) return std::string("nan");
    if (std::isinf(v)) return std::string(v > 0 ? "inf" : "-inf");
    std::ostringstream o;
    o.precision(6);
    o << v;
    std::string r = o.str();
    if (r.find_first_of(".e") == std::string::npos) r += ".";
    return r;
  };
  if (is_complex(dtype)) {
    auto c = s.to<complex128>();
    return fmt(c.real()) + (c.imag() < 0 ? "-" : "+") + fmt(std::fabs(c.imag())) + "j";
  }
  return fmt(s.to_double());
}

// A new tensor with t's sizes and the given strides and options; metadata-only when t is
// (fake and meta tensors stay without memory and keep their extra keys).
Tensor new_empty_like(const Tensor& t, IntArrayRef strides, TensorOptions o) {
  const bool metadata_only = t.is_meta_data() || t.key_set().has(DispatchKey::Fake);
  if (metadata_only && (o.device == t.device() || o.device.is_meta())) {
    return make_metadata_tensor(t.sizes(), strides, o.dtype, o.device,
                                t.key_set() & DispatchKeySet(DispatchKey::Fake));
  }
  return empty_strided(t.sizes(), strides, o);
}

}  // namespace

void detail::TensorImpl::dispose(BiasedCount* count) { delete static_cast<TensorImpl*>(count); }

// ---------------------------------------------------------------- metadata

void Tensor::throw_undefined() {
  throw Error(ErrorCode::kInvalidArgument, "use of an undefined tensor");
}

int64_t Tensor::size(int64_t d) const {
  OPCONFORM_CHECK(dim() > 0, ErrorCode::kInvalidArgument, "size: dimension ", d,
                  " specified, but the tensor has no dimensions");
  return impl().sizes[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  OPCONFORM_CHECK(dim() > 0, ErrorCode::kInvalidArgument, "stride: dimension ", d,
                  " specified, but the tensor has no dimensions");
  return impl().strides[wrap_dim(d, dim(), "stride")];
}
int64_t Tensor::numel() const { return product(impl().sizes); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (impl().sizes[d] == 1) continue;
    if (impl().strides[d] != expected) return false;
    expected *= impl().sizes[d];
  }
  return true;
}

bool Tensor::is_non_overlapping_and_dense() const {
  if (numel() == 0) return true;  // as is_contiguous (PyTorch)
  const auto& sz = impl().sizes;
  const auto& st = impl().strides;
  // Dimensions of size >= 2 ordered by stride (insertion sort: ranks are small, no allocation);
  // each stride must be the product of the sizes before it.
  constexpr size_t kInline = 16;
  std::array<int64_t, kInline> inline_dims;
  std::vector<int64_t> heap_dims;
  int64_t* dims = inline_dims.data();
  if (sz.size() > kInline) {
    heap_dims.resize(sz.size());
    dims = heap_dims.data();
  }
  size_t n = 0;
  for (size_t d = 0; d < sz.size(); ++d) {
    if (sz[d] < 2) continue;
    size_t i = n++;
    while (i > 0 && st[dims[i - 1]] > st[d]) {
      dims[i] = dims[i - 1];
      --i;
    }
    dims[i] = static_cast<int64_t>(d);
  }
  int64_t required = 1;
  for (size_t i = 0; i < n; ++i) {
    if (st[dims[i]] != required) return false;
    required *= sz[dims[i]];
  }
  return true;
}

bool Tensor::is_alias_of(const Tensor& other) const { return storage() == other.storage(); }

const void* Tensor::const_data_ptr() const {
  // Fake tensors: fake_tensor.cpp words the error (inside a fake kernel it names the operator
  // and points to get_ctx().new_dynamic_size()).
  if (key_set().has(DispatchKey::Fake)) [[unlikely]] detail::throw_fake_data_access(*this);
  const auto& s = *impl().storage;
  OPCONFORM_CHECK(s.has_data() && !key_set().has(DispatchKey::Fake), ErrorCode::kInvalidArgument,
                  "cannot access the data of a tensor on ", device().to_string(),
                  key_set().has(DispatchKey::Fake) ? " (a fake tensor: it has metadata only)" : " (no memory)");
  if (s.data() == nullptr) return nullptr;
  return static_cast<const char*>(s.data()) + storage_offset() * static_cast<int64_t>(itemsize());
}

void* Tensor::mutable_data_ptr() const {
  check_writable(*this, "mutable_data_ptr");
  const void* p = const_data_ptr();
  bump_version();
  return const_cast<void*>(p);
}

// ---------------------------------------------------------------- element access

namespace {
int64_t element_offset(const Tensor& t, IntArrayRef index) {
  OPCONFORM_CHECK(static_cast<int64_t>(index.size()) == t.dim(), ErrorCode::kInvalidArgument, "index ",
                  shape_string(index), " has ", index.size(), " entries for a tensor of ", t.dim(), " dimensions");
  int64_t offset = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t i = index[d] < 0 ? index[d] + t.size(d) : index[d];
    OPCONFORM_CHECK(i >= 0 && i < t.size(d), ErrorCode::kInvalidArgument, "index ", index[d],
                    " is out of bounds for dimension ", d, " with size ", t.size(d));
    offset += i * t.stride(d);
  }
  return offset;
}
}  // namespace

Scalar Tensor::get(IntArrayRef index) const {
  int64_t offset = element_offset(*this, index);
  alignas(16) unsigned char buffer[16];
  const char* src = static_cast<const char*>(const_data_ptr()) + offset * static_cast<int64_t>(itemsize());
  if (device().is_cpu()) {
    std::memcpy(buffer, src, itemsize());
  } else {
    allocator_for(device().type).copy_to_host(buffer, src, itemsize(), device());
  }
  return visit_dtype(dtype(), [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, buffer, sizeof(T));
    return Scalar(v);
  });
}

void Tensor::set(IntArrayRef index, const Scalar& value) const {
  int64_t offset = element_offset(*this, index);
  check_writable(*this, "set");
  char* dst = static_cast<char*>(const_cast<void*>(const_data_ptr())) + offset * static_cast<int64_t>(itemsize());
  alignas(16) unsigned char buffer[16];
  visit_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = value.to<T>();
    std::memcpy(buffer, &v, sizeof(T));
  });
  if (device().is_cpu()) {
    std::memcpy(dst, buffer, itemsize());
  } else {
    allocator_for(device().type).copy_from_host(dst, buffer, itemsize(), device());
  }
  bump_version();
}

Scalar Tensor::item() const {
  OPCONFORM_CHECK(numel() == 1, ErrorCode::kInvalidArgument, "item(): a tensor with ", numel(),
                  " elements cannot be converted to a scalar");
  std::vector<int64_t> zero(dim(), 0);
  return get(zero);
}

// ---------------------------------------------------------------- views

// Note [Views of symbolic fakes]: a view of a fake tensor with symbolic sizes keeps them where the
// view op can say how its sizes follow from the base's: transpose, permute, select, squeeze,
// unsqueeze, slice (the sliced dimension stays symbolic when it runs to the end with step 1), and
// view/reshape of a contiguous base (the -1 dimension is the symbolic element count over the
// other sizes) pass their symbolic sizes and strides. Sizes given as integers (view's other
// dimensions, expand, as_strided, narrow) are the caller's literal values, and other views
// (diagonal) have the concrete stand-ins too, which a captured graph bakes in
// (test_aot_dispatch_dynamic then says so at other sizes). Fake kernels that need such views
// symbolically build their outputs from sym_sizes() (empty(std::vector<SymInt>{...})).
Tensor Tensor::make_view(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset,
                         std::optional<std::vector<SymInt>> sym_sizes,
                         std::optional<std::vector<SymInt>> sym_strides) const {
  auto v = std::make_unique<detail::TensorImpl>(impl());
  std::shared_ptr<const SymShape> shape;
  if (impl().sym_shape) {
    if (sym_sizes && sym_strides) {
      auto symbolic = [](const std::vector<SymInt>& s) {
        return std::any_of(s.begin(), s.end(), [](const SymInt& i) { return i.is_symbolic(); });
      };
      if (symbolic(*sym_sizes) || symbolic(*sym_strides))
        shape = std::make_shared<const SymShape>(SymShape{std::move(*sym_sizes), std::move(*sym_strides)});
    }
  }
  v->sym_shape = std::move(shape);
  v->sizes = std::move(sizes);
  v->strides = std::move(strides);
  v->storage_offset = offset;
  return Tensor::adopt(std::move(v));
}

Tensor Tensor::view(IntArrayRef requested) const {
  auto shape = infer_size(requested, numel(), "view");
  auto strides = compute_view_strides(sizes(), this->strides(), shape);
  OPCONFORM_CHECK(strides.has_value(), ErrorCode::kInvalidArgument, "view: size ", shape_string(shape),
                  " is not compatible with the input's size ", shape_string(sizes()), " and stride ",
                  shape_string(this->strides()),
                  " (at least one dimension spans across two contiguous subspaces); use reshape instead");
  if (has_symbolic_sizes() && is_contiguous()) {
    // The -1 dimension, if any, is the symbolic element count divided by the other sizes.
    SymInt numel_sym(1), others(1);
    for (const SymInt& s : sym_sizes()) numel_sym = numel_sym * s;
    for (int64_t r : requested) others = r == -1 ? others : others * SymInt(r);
    std::vector<SymInt> ssz;
    for (size_t i = 0; i < requested.size(); ++i)
      ssz.push_back(requested[i] == -1 ? floordiv(numel_sym, others) : SymInt(shape[i]));
    auto sst = contiguous_strides(ssz);
    return make_view(std::move(shape), std::move(*strides), storage_offset(), std::move(ssz), std::move(sst));
  }
  return make_view(std::move(shape), std::move(*strides), storage_offset());
}

Tensor Tensor::reshape(IntArrayRef requested) const {
  auto shape = infer_size(requested, numel(), "reshape");
  if (compute_view_strides(sizes(), this->strides(), shape)) return view(requested);
  return contiguous().view(requested);
}

Tensor Tensor::as_strided(IntArrayRef new_sizes, IntArrayRef new_strides, std::optional<int64_t> offset) const {
  OPCONFORM_CHECK(new_sizes.size() == new_strides.size(), ErrorCode::kInvalidArgument, "as_strided: ",
                  new_sizes.size(), " sizes but ", new_strides.size(), " strides");
  int64_t off = offset.value_or(storage_offset());
  OPCONFORM_CHECK(off >= 0, ErrorCode::kInvalidArgument, "as_strided: negative storage offset ", off);
  for (size_t i = 0; i < new_sizes.size(); ++i) {
    OPCONFORM_CHECK(new_sizes[i] >= 0, ErrorCode::kInvalidArgument, "as_strided: negative size ", new_sizes[i],
                    " at dimension ", i);
    OPCONFORM_CHECK(new_strides[i] >= 0, ErrorCode::kInvalidArgument,
                    "as_strided: negative strides are not supported, got ", new_strides[i], " at dimension ", i);
  }
  int64_t span = span_elements(new_sizes, new_strides);
  if (span >= 0 && storage()->has_data()) {  // an empty storage (no memory) bounds too
    uint64_t end_bytes = static_cast<uint64_t>(off + span + 1) * itemsize();
    OPCONFORM_CHECK(end_bytes <= storage()->nbytes(), ErrorCode::kInvalidArgument, "as_strided: size ",
                    shape_string(new_sizes), ", stride ", shape_string(new_strides), " and offset ", off,
                    " reach byte ", end_bytes, " of a storage of ", storage()->nbytes(), " bytes");
  }
  return make_view({new_sizes.begin(), new_sizes.end()}, {new_strides.begin(), new_strides.end()}, off);
}

Tensor Tensor::as_strided(const std::vector<SymInt>& sizes, const std::vector<SymInt>& strides,
                          int64_t storage_offset) const {
  std::vector<int64_t> concrete_sizes, concrete_strides;
  for (const SymInt& s : sizes) concrete_sizes.push_back(concrete_stand_in(s));
  for (const SymInt& s : strides) concrete_strides.push_back(concrete_stand_in(s));
  static_cast<void>(as_strided(concrete_sizes, concrete_strides, storage_offset));  // checks the stand-ins
  return make_view(std::move(concrete_sizes), std::move(concrete_strides), storage_offset, sizes, strides);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  OPCONFORM_CHECK(dim() > 0, ErrorCode::kInvalidArgument, "narrow() cannot be applied to a 0-dim tensor");
  int64_t n = size(d);
  if (start < 0) start += n;
  OPCONFORM_CHECK(start >= 0 && start <= n, ErrorCode::kInvalidArgument, "narrow: start ", start,
                  " out of range for dimension ", d, " of size ", n);
  OPCONFORM_CHECK(length >= 0 && start + length <= n, ErrorCode::kInvalidArgument, "narrow: start (", start,
                  ") + length (", length, ") exceeds dimension size (", n, ")");
  return slice(d, start, start + length);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt,
                     int64_t step) const {
  OPCONFORM_CHECK(dim() > 0, ErrorCode::kInvalidArgument, "slice() cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "slice");
  OPCONFORM_CHECK(step > 0, ErrorCode::kInvalidArgument, "slice: step must be positive, got ", step);
  int64_t n = size(d);
  int64_t start = start_opt.value_or(0);
  int64_t end = end_opt.value_or(n);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  auto sz = std::vector<int64_t>(sizes().begin(), sizes().end());
  auto st = std::vector<int64_t>(strides().begin(), strides().end());
  int64_t offset = storage_offset() + start * st[d];
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  if (has_symbolic_sizes()) {
    auto ssz = sym_sizes(), sst = sym_strides();
    // To the end with step 1 from a start within the size stays symbolic (guarded: size >= start);
    // a negative or clamped start depends on the size in a way this form does not say: baked.
    const int64_t raw_start = start_opt.value_or(0);
    const bool symbolic_end = step == 1 && !end_opt && raw_start >= 0 && raw_start <= n;
    if (symbolic_end && ssz[d].is_symbolic()) {
      const bool fits = ssz[d] >= SymInt(raw_start);  // decided from the hint: records the guard
      (void)fits;
    }
    ssz[d] = symbolic_end ? ssz[d] - raw_start : SymInt(sz[d]);
    sst[d] = sst[d] * step;
    return make_view(std::move(sz), std::move(st), offset, std::move(ssz), std::move(sst));
  }
  return make_view(std::move(sz), std::move(st), offset);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  OPCONFORM_CHECK(dim() > 0, ErrorCode::kInvalidArgument, "select() cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t n = size(d);
  OPCONFORM_CHECK(index >= -n && index < n, ErrorCode::kInvalidArgument, "select: index ", index,
                  " out of range for tensor of size ", shape_string(sizes()), " at dimension ", d);
  if (index < 0) index += n;
  auto sz = std::vector<int64_t>(sizes().begin(), sizes().end());
  auto st = std::vector<int64_t>(strides().begin(), strides().end());
  int64_t offset = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  if (has_symbolic_sizes()) {
    auto ssz = sym_sizes(), sst = sym_strides();
    ssz.erase(ssz.begin() + d);
    sst.erase(sst.begin() + d);
    return make_view(std::move(sz), std::move(st), offset, std::move(ssz), std::move(sst));
  }
  return make_view(std::move(sz), std::move(st), offset);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) {
    wrap_dim(d0, 0, "transpose");
    wrap_dim(d1, 0, "transpose");
    return make_view({}, {}, storage_offset());
  }
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  auto sz = std::vector<int64_t>(sizes().begin(), sizes().end());
  auto st = std::vector<int64_t>(strides().begin(), strides().end());
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  if (has_symbolic_sizes()) {
    auto ssz = sym_sizes(), sst = sym_strides();
    std::swap(ssz[d0], ssz[d1]);
    std::swap(sst[d0], sst[d1]);
    return make_view(std::move(sz), std::move(st), storage_offset(), std::move(ssz), std::move(sst));
  }
  return make_view(std::move(sz), std::move(st), storage_offset());
}

Tensor Tensor::permute(IntArrayRef dims) const {
  OPCONFORM_CHECK(static_cast<int64_t>(dims.size()) == dim(), ErrorCode::kInvalidArgument, "permute: ",
                  shape_string(dims), " has ", dims.size(), " entries for a tensor of ", dim(), " dimensions");
  std::vector<int64_t> sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    OPCONFORM_CHECK(!seen[d], ErrorCode::kInvalidArgument, "permute: dimension ", dims[i], " repeats in ",
                    shape_string(dims));
    seen[d] = true;
    sz[i] = size(d);
    st[i] = stride(d);
  }
  if (has_symbolic_sizes()) {
    const auto base_sizes = sym_sizes(), base_strides = sym_strides();
    std::vector<SymInt> ssz, sst;
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t d = wrap_dim(dims[i], dim(), "permute");
      ssz.push_back(base_sizes[d]);
      sst.push_back(base_strides[d]);
    }
    return make_view(std::move(sz), std::move(st), storage_offset(), std::move(ssz), std::move(sst));
  }
  return make_view(std::move(sz), std::move(st), storage_offset());
}

Tensor Tensor::expand(IntArrayRef requested) const {
  int64_t n = static_cast<int64_t>(requested.size());
  OPCONFORM_CHECK(n >= dim(), ErrorCode::kInvalidArgument, "expand: the number of sizes provided (", n,
                  ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  std::vector<int64_t> sz(n), st(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t src = i - (n - dim());
    int64_t want = requested[i];
    if (src < 0) {
      OPCONFORM_CHECK(want >= 0, ErrorCode::kInvalidArgument, "expand: -1 is not allowed in a leading, "
                      "non-existing dimension (", i, ")");
      sz[i] = want;
      st[i] = 0;
      continue;
    }
    int64_t have = size(src);
    if (want == -1) want = have;
    OPCONFORM_CHECK(want >= 0, ErrorCode::kInvalidArgument, "expand: invalid size ", want);
    if (have == want) {
      sz[i] = have;
      st[i] = stride(src);
    } else {
      OPCONFORM_CHECK(have == 1, ErrorCode::kInvalidArgument, "expand: the expanded size of the tensor (",
                      want, ") must match the existing size (", have, ") at non-singleton dimension ", i,
                      ". Target sizes: ", shape_string(requested), ". Tensor sizes: ", shape_string(sizes()));
      sz[i] = want;
      st[i] = 0;
    }
  }
  return make_view(std::move(sz), std::move(st), storage_offset());
}

// squeeze and unsqueeze edit the symbolic sizes and strides alongside the concrete ones, and only
// for a tensor that has them (real tensors are the common case: no SymInt vectors made).
Tensor Tensor::squeeze() const {
  const bool symbolic = has_symbolic_sizes();
  std::vector<int64_t> sz, st;
  std::vector<SymInt> ssz, sst;
  const auto base_sizes = symbolic ? sym_sizes() : std::vector<SymInt>{};
  const auto base_strides = symbolic ? sym_strides() : std::vector<SymInt>{};
  for (int64_t d = 0; d < dim(); ++d) {
    if (size(d) == 1 && !(symbolic && base_sizes[d].is_symbolic())) continue;  // unbacked may stand in as 1
    sz.push_back(size(d));
    st.push_back(stride(d));
    if (symbolic) {
      ssz.push_back(base_sizes[d]);
      sst.push_back(base_strides[d]);
    }
  }
  if (!symbolic) return make_view(std::move(sz), std::move(st), storage_offset());
  return make_view(std::move(sz), std::move(st), storage_offset(), std::move(ssz), std::move(sst));
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  auto sz = std::vector<int64_t>(sizes().begin(), sizes().end());
  auto st = std::vector<int64_t>(strides().begin(), strides().end());
  if (!has_symbolic_sizes()) {
    if (dim() > 0 && sz[d] == 1) {
      sz.erase(sz.begin() + d);
      st.erase(st.begin() + d);
    }
    return make_view(std::move(sz), std::move(st), storage_offset());
  }
  auto ssz = sym_sizes(), sst = sym_strides();
  if (dim() > 0 && sz[d] == 1 && !ssz[d].is_symbolic()) {  // unbacked may stand in as 1
    sz.erase(sz.begin() + d);
    st.erase(st.begin() + d);
    ssz.erase(ssz.begin() + d);
    sst.erase(sst.begin() + d);
  }
  return make_view(std::move(sz), std::move(st), storage_offset(), std::move(ssz), std::move(sst));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  auto sz = std::vector<int64_t>(sizes().begin(), sizes().end());
  auto st = std::vector<int64_t>(strides().begin(), strides().end());
  int64_t new_stride = d >= dim() ? 1 : sz[d] * st[d];
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  if (!has_symbolic_sizes()) return make_view(std::move(sz), std::move(st), storage_offset());
  auto ssz = sym_sizes(), sst = sym_strides();
  SymInt new_sym_stride = d >= dim() ? SymInt(1) : ssz[d] * sst[d];
  ssz.insert(ssz.begin() + d, SymInt(1));
  sst.insert(sst.begin() + d, new_sym_stride);
  return make_view(std::move(sz), std::move(st), storage_offset(), std::move(ssz), std::move(sst));
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  OPCONFORM_CHECK(dim() >= 2, ErrorCode::kInvalidArgument, "diagonal: needs at least 2 dimensions, got ", dim());
  dim1 = wrap_dim(dim1, dim(), "diagonal");
  dim2 = wrap_dim(dim2, dim(), "diagonal");
  OPCONFORM_CHECK(dim1 != dim2, ErrorCode::kInvalidArgument, "diagonal: dimensions cannot be identical ", dim1,
                  ", ", dim2);
  int64_t diag_size;
  int64_t off = storage_offset();
  if (offset >= 0) {
    diag_size = std::max<int64_t>(std::min(size(dim1), size(dim2) - offset), 0);
  } else {
    diag_size = std::max<int64_t>(std::min(size(dim1) + offset, size(dim2)), 0);
  }
  if (diag_size > 0) {
    off += offset >= 0 ? offset * stride(dim2) : -offset * stride(dim1);
  }
  std::vector<int64_t> sz, st;
  for (int64_t d = 0; d < dim(); ++d) {
    if (d == dim1 || d == dim2) continue;
    sz.push_back(size(d));
    st.push_back(stride(d));
  }
  sz.push_back(diag_size);
  st.push_back(stride(dim1) + stride(dim2));
  return make_view(std::move(sz), std::move(st), off);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor c = new_empty_like(*this, contiguous_strides(sizes()), options());
  c.copy_(*this);
  return c;
}

Tensor Tensor::clone() const {
  std::vector<int64_t> st = is_non_overlapping_and_dense() ? std::vector<int64_t>(strides().begin(), strides().end())
                                                           : contiguous_strides(sizes());
  Tensor c = new_empty_like(*this, st, options());
  c.copy_(*this);
  return c;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  OPCONFORM_CHECK(src.defined(), ErrorCode::kInvalidArgument, "copy_: the source tensor is undefined");
  // Broadcast src to self's shape (a view; throws when it does not broadcast).
  const bool same_shape = std::equal(src.sizes().begin(), src.sizes().end(), sizes().begin(), sizes().end());
  Tensor s = same_shape ? src : src.expand(sizes());
  if (is_meta_data()) {  // meta and fake tensors: metadata only, nothing to copy
    bump_version();
    return *this;
  }
  check_writable(*this, "copy_");
  // Nothing to write, nothing to read: a source without data (fake, meta) is fine here, and so is
  // a fake destination whose zero-byte storage counts as holding data.
  if (numel() == 0) {
    bump_version();  // an in-place call all the same, as PyTorch counts it
    return *this;
  }
  OPCONFORM_CHECK(!src.is_meta_data(), ErrorCode::kInvalidArgument, "copy_: cannot copy from a tensor on ",
                  src.device().to_string(), " into one on ", device().to_string(), ": the source has no data");
  if (s.device().is_cpu() && memory_overlaps(*this, s)) {
    s = s.clone();  // read everything before writing anything
  }
  if (copies_bytes_on_device(*this, s)) {
    allocator_for(device().type)
        .copy_on_device(const_cast<void*>(const_data_ptr()), s.const_data_ptr(), static_cast<size_t>(numel()) * itemsize(),
                        device());
    bump_version();
    return *this;
  }
  Tensor host_src = s.device().is_cpu() ? s : host_copy_of_span(s);
  if (device().is_cpu()) {
    cpu_copy(*this, host_src);
  } else {
    Tensor host_dst = host_copy_of_span(*this);
    cpu_copy(host_dst, host_src);
    write_span_back(*this, host_dst);
  }
  bump_version();
  return *this;
}

const Tensor& Tensor::fill_(const Scalar& value) const {
  if (is_meta_data()) {
    bump_version();
    return *this;
  }
  check_writable(*this, "fill_");
  if (numel() == 0) return *this;
  if (device().is_cpu()) {
    cpu_fill(*this, value);
  } else if (device().is_cuda() && is_contiguous() && fill_on_cuda(*this, value)) {
    // filled by a device kernel
  } else {
    Tensor host = host_copy_of_span(*this);
    cpu_fill(host, value);
    write_span_back(*this, host);
  }
  bump_version();
  return *this;
}

Tensor Tensor::to(DType d) const { return to(d, device()); }
Tensor Tensor::to(Device dev) const { return to(dtype(), dev); }

Tensor Tensor::to(DType d, Device dev) const {
  if (d == dtype() && dev == device()) return *this;
  std::vector<int64_t> st = is_non_overlapping_and_dense() ? std::vector<int64_t>(strides().begin(), strides().end())
                                                           : contiguous_strides(sizes());
  Tensor c = new_empty_like(*this, st, TensorOptions(d, dev));
  c.copy_(*this);
  return c;
}

// ---------------------------------------------------------------- printing

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream out;
  out << "tensor(";
  if (is_meta_data()) {
    out << "..., size=" << shape_string(sizes());
  } else {
    Tensor h = to(Device::cpu());
    std::vector<int64_t> index(dim(), 0);
    // Recursive printer over dimensions; long dimensions are summarised as PyTorch does.
    auto print = [&](auto&& self, int64_t d) -> void {
      if (d == dim()) {
        out << format_scalar(h.get(index), dtype());
        return;
      }
      out << "[";
      int64_t n = size(d);
      for (int64_t i = 0; i < n; ++i) {
        if (n > 12 && i == 3) {
          out << "..., ";
          i = n - 3;
        }
        index[d] = i;
        self(self, d + 1);
        if (i + 1 < n) out << ", ";
      }
      out << "]";
    };
    print(print, 0);
    if (numel() == 0 && dim() != 1) out << ", size=" << shape_string(sizes());
  }
  // PyTorch leaves out the default dtypes: float32, its complex counterpart, int64 and bool.
  if (dtype() != DType::Float32 && dtype() != DType::Complex64 && dtype() != DType::Int64 &&
      dtype() != DType::Bool) {
    out << ", dtype=" << dtype();
  }
  if (!device().is_cpu()) out << ", device='" << device() << "'";
  if (key_set().has(DispatchKey::Fake)) out << ", fake";
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.to_string(); }

// ---------------------------------------------------------------- factories

std::string shape_string(IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::vector<int64_t> broadcast_shapes(IntArrayRef a, IntArrayRef b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    OPCONFORM_CHECK(da == db || da == 1 || db == 1, ErrorCode::kInvalidArgument, "shapes ", shape_string(a),
                    " and ", shape_string(b), " do not broadcast (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor make_tensor(std::shared_ptr<Storage> storage, IntArrayRef sizes, IntArrayRef strides,
                   int64_t storage_offset, DType dtype) {
  auto impl = std::make_unique<detail::TensorImpl>();
  impl->device = storage->device();
  impl->storage = std::move(storage);
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->storage_offset = storage_offset;
  impl->dtype = dtype;
  impl->key_set = keys_for(impl->device, {});
  return Tensor::adopt(std::move(impl));
}

Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  OPCONFORM_CHECK(sizes.size() == strides.size(), ErrorCode::kInvalidArgument, "empty_strided: ", sizes.size(),
                  " sizes but ", strides.size(), " strides");
  for (size_t i = 0; i < sizes.size(); ++i) {
    OPCONFORM_CHECK(sizes[i] >= 0, ErrorCode::kInvalidArgument, "empty: negative dimension ", sizes[i],
                    " in size ", shape_string(sizes));
    OPCONFORM_CHECK(strides[i] >= 0, ErrorCode::kInvalidArgument, "empty_strided: negative stride ", strides[i]);
  }
  const size_t nbytes = checked_storage_bytes(sizes, strides, options.dtype);
  Device device = options.device;
  if (device.is_cuda() && device.index < 0) device.index = 0;
  // Under an active FakeTensorMode, factories make fake tensors instead of allocating.
  if (auto fake = detail::fake_factory_hook(sizes, strides, TensorOptions(options.dtype, device))) return *fake;
  return make_tensor(Storage::allocate(nbytes, device), sizes, strides, 0, options.dtype);
}

Tensor empty(IntArrayRef sizes, TensorOptions options) {
  return empty_strided(sizes, contiguous_strides(sizes), options);
}

Tensor zeros(IntArrayRef sizes, TensorOptions options) {
  Tensor t = empty(sizes, options);
  t.fill_(0);
  return t;
}

Tensor ones(IntArrayRef sizes, TensorOptions options) {
  Tensor t = empty(sizes, options);
  t.fill_(1);
  return t;
}

Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options) {
  Tensor t = empty(sizes, options);
  t.fill_(value);
  return t;
}

Tensor arange(int64_t n, TensorOptions options) {
  Tensor t = empty({n}, TensorOptions(options.dtype));
  for (int64_t i = 0; i < n; ++i) t.set({i}, Scalar(i));
  return t.to(options.device);
}

Tensor scalar_tensor(const Scalar& value, std::optional<TensorOptions> options) {
  TensorOptions o = options.value_or(TensorOptions(value.default_dtype()));
  return full({}, value, o);
}

Tensor make_metadata_tensor(IntArrayRef sizes, IntArrayRef strides, DType dtype, Device device,
                            DispatchKeySet extra_keys, int64_t storage_offset) {
  int64_t span = span_elements(sizes, strides);
  size_t nbytes = span < 0 ? 0 : static_cast<size_t>(span + 1 + storage_offset) * itemsize(dtype);
  // A storage without memory: nbytes records the size the real one would have.
  auto storage = Storage::wrap(nullptr, nbytes, device, nullptr);
  auto impl = std::make_unique<detail::TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->storage_offset = storage_offset;
  impl->dtype = dtype;
  impl->device = device;
  impl->key_set = keys_for(device, extra_keys);
  return Tensor::adopt(std::move(impl));
}

// ---------------------------------------------------------------- comparisons

bool memory_overlaps(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const bool same_storage = a.storage() == b.storage();
  const char* base_a = static_cast<const char*>(a.storage()->data());
  const char* base_b = static_cast<const char*>(b.storage()->data());
  if (!same_storage && (base_a == nullptr || base_b == nullptr)) return false;  // no memory to share
  // Byte addresses relative to a common origin: the storage start when shared, else absolute.
  auto origin = [&](const Tensor& t, const char* base) -> intptr_t {
    return same_storage ? 0 : reinterpret_cast<intptr_t>(base);
  };
  intptr_t start_a = origin(a, base_a) + a.storage_offset() * static_cast<intptr_t>(a.itemsize());
  intptr_t start_b = origin(b, base_b) + b.storage_offset() * static_cast<intptr_t>(b.itemsize());
  intptr_t end_a = start_a + (span_elements(a.sizes(), a.strides()) + 1) * static_cast<intptr_t>(a.itemsize());
  intptr_t end_b = start_b + (span_elements(b.sizes(), b.strides()) + 1) * static_cast<intptr_t>(b.itemsize());
  if (end_a <= start_b || end_b <= start_a) return false;
  if (a.is_non_overlapping_and_dense() && b.is_non_overlapping_and_dense()) return true;
  // Exact test: the element byte ranges of the smaller tensor, sorted, probed by the other's.
  const Tensor& small = a.numel() <= b.numel() ? a : b;
  const Tensor& large = a.numel() <= b.numel() ? b : a;
  intptr_t start_small = &small == &a ? start_a : start_b;
  intptr_t start_large = &small == &a ? start_b : start_a;
  if (small.numel() > (int64_t(1) << 24)) return true;  // too large to enumerate: be conservative
  std::vector<intptr_t> starts;
  starts.reserve(small.numel());
  const intptr_t isz_small = static_cast<intptr_t>(small.itemsize());
  const intptr_t isz_large = static_cast<intptr_t>(large.itemsize());
  detail::strided_loop<1>(small.sizes(), {small.strides()}, [&](const std::array<int64_t, 1>& o) {
    starts.push_back(start_small + o[0] * isz_small);
  });
  std::sort(starts.begin(), starts.end());
  bool hit = false;
  detail::strided_loop<1>(large.sizes(), {large.strides()}, [&](const std::array<int64_t, 1>& o) {
    if (hit) return;
    intptr_t s = start_large + o[0] * isz_large;
    // An element [x, x + isz_small) meets [s, s + isz_large) iff s - isz_small < x < s + isz_large.
    auto it = std::upper_bound(starts.begin(), starts.end(), s - isz_small);
    if (it != starts.end() && *it < s + isz_large) hit = true;
  });
  return hit;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) return false;
  if (!std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end())) return false;
  // Compared in their own dtype: a detour through complex128 would merge int64s beyond 2^53.
  Tensor ha = a.to(Device::cpu());
  Tensor hb = b.to(Device::cpu());
  return visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = static_cast<const T*>(ha.const_data_ptr());
    const T* pb = static_cast<const T*>(hb.const_data_ptr());
    auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
    bool result = true;
    detail::strided_loop<2>(ha.sizes(), {ha.strides(), hb.strides()}, [&](const std::array<int64_t, 2>& o) {
      const T& x = pa[o[0]];
      const T& y = pb[o[1]];
      if constexpr (detail::is_complex_t<T>::value) {
        if (!same(x.real(), y.real()) || !same(x.imag(), y.imag())) result = false;
      } else if constexpr (std::is_integral_v<T>) {
        if (x != y) result = false;
      } else {
        if (!same(static_cast<double>(x), static_cast<double>(y))) result = false;
      }
    });
    return result;
  });
}

}  // namespace opconform
