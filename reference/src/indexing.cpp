// Indexing operators: gather / scatter along a dim, index_select, advanced indexing
// (index.Tensor, index_put), select_scatter / slice_scatter, masked_scatter and embedding.
//
// Kernels read every tensor as its row-major elements in the wide type (Note [Reference
// arithmetic] in detail/elementwise.h), compute, and round once into the result's dtype and
// layout. Index values are range-checked with an Error naming the op, the argument and the value.
// Where PyTorch leaves the result of duplicate indices unspecified (scatter, index_put without
// accumulate), the reference defines it: the write that comes last in row-major order of the
// index wins, and the formulas give the gradient of exactly that result.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using autograd::AutogradContext;
using opconform::detail::concat;
using Grads = std::vector<Tensor>;
using IndexList = std::vector<std::optional<Tensor>>;
using Sizes = std::vector<int64_t>;

const std::string kFamily = "indexing";
constexpr const char* kGather = "aten::gather";
constexpr const char* kScatterSrc = "aten::scatter.src";
constexpr const char* kScatterValue = "aten::scatter.value";
constexpr const char* kScatterAdd = "aten::scatter_add";
constexpr const char* kScatterReduce = "aten::scatter_reduce.two";
constexpr const char* kIndexSelect = "aten::index_select";
constexpr const char* kIndex = "aten::index.Tensor";
constexpr const char* kIndexPut = "aten::index_put";
constexpr const char* kSelectScatter = "aten::select_scatter";
constexpr const char* kSliceScatter = "aten::slice_scatter";
constexpr const char* kMaskedScatter = "aten::masked_scatter";
constexpr const char* kEmbedding = "aten::embedding";
constexpr const char* kEmbeddingBackward = "aten::embedding_dense_backward";

// ================================================================================================
// Shapes, positions and elements
// ================================================================================================

Sizes to_sizes(IntArrayRef s) { return {s.begin(), s.end()}; }

int64_t numel_of(const Sizes& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

// PyTorch's ensure_nonempty rule (gather, scatter, index_select): a 0-d tensor takes part as a
// 1-d tensor of one element.
Sizes nonempty(Sizes s) {
  if (s.empty()) s.push_back(1);
  return s;
}
int64_t nonempty_rank(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }
int64_t nonempty_size(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }
Tensor as_nonempty(const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; }

// A fake tensor with symbolic sizes (a dynamic capture): fake kernels then compute sizes from
// sym_sizes(), so the captured graph replays at other sizes.
bool is_symbolic(const Tensor& t) { return t.defined() && t.is_fake() && t.has_symbolic_sizes(); }
bool any_symbolic_tensor(std::initializer_list<const Tensor*> ts) {
  return std::any_of(ts.begin(), ts.end(), [](const Tensor* t) { return t && is_symbolic(*t); });
}
// A contiguous fake of symbolic sizes.
Tensor sym_empty(std::vector<SymInt> sizes, const Tensor& like) {
  return make_fake_tensor(std::move(sizes), like.dtype(), like.device());
}
SymInt sym_numel_of(const Tensor& t) {
  SymInt n(1);
  for (const SymInt& s : t.sym_sizes()) n = n * s;
  return n;
}

// The strides clone() gives (PyTorch's preserve_format): self's when dense, else row-major.
Sizes clone_strides(const Tensor& t) {
  return t.is_non_overlapping_and_dense() ? to_sizes(t.strides()) : contiguous_strides(t.sizes());
}

int64_t offset_of(const Sizes& at, const Sizes& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < at.size(); ++d) off += at[d] * strides[d];
  return off;
}

// A tensor's elements in row-major order, in the wide type W; a kernel reads and writes them by
// multi-index, then rounds them once into the result (any dtype, any strides).
template <typename W>
struct Elements {
  Sizes sizes, strides;
  std::vector<W> values;

  explicit Elements(const Tensor& t)
      : sizes(to_sizes(t.sizes())), strides(contiguous_strides(sizes)), values(t.to_vector<W>()) {}
  Elements(Sizes s, W fill) : sizes(std::move(s)), strides(contiguous_strides(sizes)), values(numel_of(sizes), fill) {}

  W& at(const Sizes& position) { return values[offset_of(position, strides)]; }
  const W& at(const Sizes& position) const { return values[offset_of(position, strides)]; }

  // The values as a tensor of `out_sizes` (the same elements; e.g. 0-d for a nonempty [1]).
  Tensor to_tensor(IntArrayRef out_sizes, IntArrayRef out_strides, const TensorOptions& options) const {
    Tensor out = empty_strided(out_sizes, out_strides, options);
    out.copy_(from_vector<W>(values, sizes).view(out_sizes));
    return out;
  }
};

// The position an index value selects in a dimension of `size`. Negative values count from the
// end where the op allows it (`wrap`: advanced indexing); others are out of range.
int64_t checked_index(std::string_view op, std::string_view arg, int64_t value, int64_t size, int64_t dim, bool wrap) {
  const bool ok = wrap ? (value >= -size && value < size) : (value >= 0 && value < size);
  OPCONFORM_CHECK(ok, ErrorCode::kInvalidArgument, op, ": index ", value, " in '", arg,
                  "' is out of bounds for dimension ", dim, " with size ", size);
  return value < 0 ? value + size : value;
}

void check_int_index(std::string_view op, const Tensor& index, std::string_view arg) {
  OPCONFORM_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, ErrorCode::kInvalidArgument, op,
                  ": expected dtype int64 or int32 for '", arg, "', got ", name(index.dtype()));
}
void check_same_rank(std::string_view op, const Tensor& a, std::string_view a_name, const Tensor& b,
                     std::string_view b_name) {
  OPCONFORM_CHECK(nonempty_rank(a) == nonempty_rank(b), ErrorCode::kInvalidArgument, op, ": '", a_name,
                  "' must have as many dimensions as '", b_name, "' (", a.dim(), " vs ", b.dim(), ")");
}

// ================================================================================================
// gather and the scatter family
// ================================================================================================

// gather's checks (PyTorch's gather meta function); returns dim wrapped. An empty index is
// accepted whatever its dtype and shape.
int64_t check_gather(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, self.dim(), kGather);
  if (index.numel() == 0) return dim;
  check_int_index(kGather, index, "index");  // int32 too, as PyTorch 2.x (scatter_gather_dtype_check)
  check_same_rank(kGather, index, "index", self, "self");
  for (int64_t d = 0; d < nonempty_rank(self); ++d) {
    OPCONFORM_CHECK(d == dim || nonempty_size(index, d) <= nonempty_size(self, d), ErrorCode::kInvalidArgument,
                    kGather, ": 'index' ", shape_string(index.sizes()), " must be no larger than 'self' ",
                    shape_string(self.sizes()), " in every dimension but ", dim, " (dimension ", d, ")");
  }
  return dim;
}

Tensor gather_cpu(const Tensor& self, int64_t dim, const Tensor& index, bool /*sparse_grad*/) {
  dim = check_gather(self, dim, index);
  if (index.numel() == 0) return empty(index.sizes(), self.options());
  const Tensor src = as_nonempty(self);
  const auto positions = index.to_vector<int64_t>();
  return visit_wide<Domain::All>(kGather, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Elements<W> in(src);
    Elements<W> out(nonempty(to_sizes(index.sizes())), W(0));
    int64_t p = 0;
    for_each_index(out.sizes, [&](const Sizes& at) {
      Sizes from = at;
      from[dim] = checked_index(kGather, "index", positions[p++], src.size(dim), dim, false);
      out.at(at) = in.at(from);
    });
    return out.to_tensor(index.sizes(), contiguous_strides(index.sizes()), self.options());
  });
}

Tensor gather_fake(const Tensor& self, int64_t dim, const Tensor& index, bool) {
  check_gather(self, dim, index);
  if (any_symbolic_tensor({&self, &index})) return sym_empty(index.sym_sizes(), self);
  return empty(index.sizes(), self.options());
}

enum class Reduce { assign, sum, prod, mean, amax, amin };

Reduce parse_reduce(const std::string& reduce) {
  if (reduce == "sum") return Reduce::sum;
  if (reduce == "prod") return Reduce::prod;
  if (reduce == "mean") return Reduce::mean;
  if (reduce == "amax") return Reduce::amax;
  if (reduce == "amin") return Reduce::amin;
  throw Error(ErrorCode::kInvalidArgument, concat(kScatterReduce, ": 'reduce' must be sum, prod, mean, amax or amin, got '",
                                                  reduce, "'"));
}

// The dtypes PyTorch's CPU kernels take per reduction: mean has no bool, amax/amin no complex.
void check_reduce_dtype(Reduce r, const std::string& reduce, DType d) {
  const bool ok = r == Reduce::mean ? d != DType::Bool : (r == Reduce::amax || r == Reduce::amin) ? !is_complex(d) : true;
  OPCONFORM_CHECK_BECAUSE(ok, ErrorCode::kNotImplemented, ErrorReason::kDtypeNotImplemented, kScatterReduce,
                          ": reduce='", reduce, "' does not support dtype ", name(d));
}

// The scatter ops' checks (PyTorch's scatter_gather_dtype_check and scatter_shape_check); returns
// dim wrapped. src is null for scatter.value.
int64_t check_scatter(std::string_view op, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src) {
  dim = wrap_dim(dim, self.dim(), op);
  if (index.numel() != 0) check_int_index(op, index, "index");
  if (src) {
    OPCONFORM_CHECK(src->dtype() == self.dtype(), ErrorCode::kInvalidArgument, op,
                    ": expected 'src' to have the dtype of 'self' (", name(self.dtype()), "), got ", name(src->dtype()));
  }
  if (index.numel() == 0) return dim;
  check_same_rank(op, index, "index", self, "self");
  if (src) check_same_rank(op, index, "index", *src, "src");
  for (int64_t d = 0; d < nonempty_rank(self); ++d) {
    OPCONFORM_CHECK(d == dim || nonempty_size(index, d) <= nonempty_size(self, d), ErrorCode::kInvalidArgument, op,
                    ": 'index' ", shape_string(index.sizes()), " must be no larger than 'self' ",
                    shape_string(self.sizes()), " in every dimension but ", dim, " (dimension ", d, ")");
    OPCONFORM_CHECK(!src || nonempty_size(index, d) <= nonempty_size(*src, d), ErrorCode::kInvalidArgument, op,
                    ": 'index' ", shape_string(index.sizes()), " must be no larger than 'src' ",
                    shape_string(src->sizes()), " (dimension ", d, ")");
  }
  return dim;
}

// The value a reduction starts from where include_self=False drops self's value.
template <typename W>
W reduce_identity(Reduce r) {
  if constexpr (!is_complex_v<W>) {
    if (r == Reduce::amax) return std::is_same_v<W, double> ? -std::numeric_limits<W>::infinity() : std::numeric_limits<W>::lowest();
    if (r == Reduce::amin) return std::is_same_v<W, double> ? std::numeric_limits<W>::infinity() : std::numeric_limits<W>::max();
  }
  return W(r == Reduce::prod ? 1 : 0);
}

// acc <- acc (reduce) v; amax/amin propagate NaN as PyTorch does.
template <typename W>
void combine(W& acc, W v, Reduce r) {
  switch (r) {
    case Reduce::assign: acc = v; return;
    case Reduce::sum:
    case Reduce::mean: acc = plus(acc, v); return;
    case Reduce::prod: acc = times(acc, v); return;
    case Reduce::amax:
    case Reduce::amin:
      if constexpr (!is_complex_v<W>) {
        if (is_nan(v)) acc = v;
        else acc = r == Reduce::amax ? std::max(acc, v) : std::min(acc, v);
      }
      return;
  }
}

// A mean's sum as PyTorch holds it: integers sum in the tensor's own dtype, wrapping (int8: 64 +
// 64 is -128), so the int64 sum keeps that dtype's low bits before the division; floating and
// complex sums stay wide (one rounding at the end).
template <typename W>
W sum_in_dtype(DType d, W sum) {
  if constexpr (std::is_same_v<W, int64_t>) {
    switch (d) {
      case DType::UInt8: return static_cast<uint8_t>(sum);
      case DType::Int8: return static_cast<int8_t>(sum);
      case DType::Int16: return static_cast<int16_t>(sum);
      case DType::Int32: return static_cast<int32_t>(sum);
      default: return sum;
    }
  } else {
    return sum;
  }
}

template <typename W>
W divide_by_count(W sum, int64_t count) {
  if constexpr (std::is_same_v<W, int64_t>) {  // integers: floor division, as PyTorch's div(..., "floor")
    int64_t q = sum / count;
    if (sum % count != 0 && (sum < 0) != (count < 0)) --q;
    return q;
  } else {
    return sum / static_cast<double>(count);
  }
}

// A copy of self (contiguous, as PyTorch's scatter outputs) with source(position in index) written
// or reduced at the positions `index` names along `dim`. Duplicate targets: assign keeps the
// last write in row-major order of the index; the reductions combine all of them.
template <typename W, typename Source>
Tensor scatter_into(std::string_view op, const Tensor& self, int64_t dim, const Tensor& index, Source source,
                    Reduce reduce, bool include_self) {
  Elements<W> out(as_nonempty(self));
  if (index.numel() != 0) {
    const auto positions = index.to_vector<int64_t>();
    std::vector<int64_t> targets;  // for each position of index (row-major): the element of out it reaches
    std::vector<Sizes> from;       // and its multi-index (that of src too)
    for_each_index(nonempty(to_sizes(index.sizes())), [&](const Sizes& at) {
      Sizes to = at;
      to[dim] = checked_index(op, "index", positions[targets.size()], out.sizes[dim], dim, false);
      targets.push_back(offset_of(to, out.strides));
      from.push_back(at);
    });
    std::vector<int64_t> count(reduce == Reduce::mean ? out.values.size() : 0, include_self ? 1 : 0);
    if (!include_self) {
      for (int64_t t : targets) out.values[t] = reduce_identity<W>(reduce);
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      combine(out.values[targets[k]], source(from[k]), reduce);
      if (reduce == Reduce::mean) ++count[targets[k]];
    }
    for (size_t e = 0; e < count.size(); ++e) {
      out.values[e] = divide_by_count(sum_in_dtype(self.dtype(), out.values[e]), std::max<int64_t>(count[e], 1));
    }
  }
  return out.to_tensor(self.sizes(), contiguous_strides(self.sizes()), self.options());
}

// scatter.src, scatter_add and scatter_reduce.two: src values at the index positions.
Tensor scatter_src_into(std::string_view op, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        Reduce reduce, bool include_self) {
  return visit_wide<Domain::All>(op, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Elements<W> values(as_nonempty(src));
    return scatter_into<W>(op, self, dim, index, [&](const Sizes& at) { return values.at(at); }, reduce, include_self);
  });
}

Tensor scatter_src_cpu(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_scatter(kScatterSrc, self, dim, index, &src);
  return scatter_src_into(kScatterSrc, self, dim, index, src, Reduce::assign, true);
}

Tensor scatter_add_cpu(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_scatter(kScatterAdd, self, dim, index, &src);
  return scatter_src_into(kScatterAdd, self, dim, index, src, Reduce::sum, true);
}

Tensor scatter_reduce_cpu(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          const std::string& reduce, bool include_self) {
  const Reduce r = parse_reduce(reduce);
  check_reduce_dtype(r, reduce, self.dtype());
  dim = check_scatter(kScatterReduce, self, dim, index, &src);
  return scatter_src_into(kScatterReduce, self, dim, index, src, r, include_self);
}

void check_scatter_value(const Tensor& self, const Scalar& value) {
  OPCONFORM_CHECK(is_complex(self.dtype()) || !value.is_complex(), ErrorCode::kInvalidArgument, kScatterValue,
                  ": a complex 'value' cannot be written into 'self' of dtype ", name(self.dtype()));
}

Tensor scatter_value_cpu(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  dim = check_scatter(kScatterValue, self, dim, index, nullptr);
  check_scatter_value(self, value);
  return visit_wide<Domain::All>(kScatterValue, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    // The value in self's dtype first (PyTorch's value.to<scalar_t>()), then wide.
    const W v = scalar_tensor(value, TensorOptions(self.dtype())).to_vector<W>()[0];
    return scatter_into<W>(kScatterValue, self, dim, index, [v](const Sizes&) { return v; }, Reduce::assign, true);
  });
}

// ================================================================================================
// index_select
// ================================================================================================

int64_t check_index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, self.dim(), kIndexSelect);
  OPCONFORM_CHECK(index.dim() <= 1, ErrorCode::kInvalidArgument, kIndexSelect,
                  ": 'index' must be a vector or a scalar, got ", index.dim(), " dimensions");
  check_int_index(kIndexSelect, index, "index");
  OPCONFORM_CHECK(self.dim() > 0 || index.numel() == 1, ErrorCode::kInvalidArgument, kIndexSelect,
                  ": selecting from a 0-d 'self' takes exactly one index, got ", index.numel());
  return dim;
}

Sizes index_select_sizes(const Tensor& self, int64_t dim, const Tensor& index) {
  Sizes s = to_sizes(self.sizes());
  if (!s.empty()) s[dim] = index.numel();
  return s;
}

Tensor index_select_cpu(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = check_index_select(self, dim, index);
  const Sizes sizes = index_select_sizes(self, dim, index);
  const Tensor src = as_nonempty(self);
  std::vector<int64_t> rows = index.to_vector<int64_t>();
  for (int64_t& r : rows) r = checked_index(kIndexSelect, "index", r, src.size(dim), dim, false);
  return visit_wide<Domain::All>(kIndexSelect, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Elements<W> in(src);
    Elements<W> out(nonempty(sizes), W(0));
    for_each_index(out.sizes, [&](const Sizes& at) {
      Sizes from = at;
      from[dim] = rows[at[dim]];
      out.at(at) = in.at(from);
    });
    return out.to_tensor(sizes, contiguous_strides(sizes), self.options());
  });
}

Tensor index_select_fake(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = check_index_select(self, dim, index);
  if (any_symbolic_tensor({&self, &index})) {
    std::vector<SymInt> sizes = self.sym_sizes();
    if (!sizes.empty()) sizes[dim] = sym_numel_of(index);
    return sym_empty(std::move(sizes), self);
  }
  return empty(index_select_sizes(self, dim, index), self.options());
}

// ================================================================================================
// Advanced indexing: index.Tensor and index_put
// ================================================================================================

// One index tensor of advanced indexing, as int64 positions: its sizes (symbolic where they count
// the true elements of a mask in a fake run), its strides, and in a real run its values.
struct IndexOperand {
  std::vector<SymInt> sizes;
  Sizes strides;
  Tensor values;            // real runs: int64 or int32, with these sizes and strides
  bool from_int32 = false;  // PyTorch converts int32 indices to int64 after broadcasting them
};

std::vector<SymInt> sym_sizes_of(IntArrayRef s) { return {s.begin(), s.end()}; }
// The concrete sizes metadata uses for symbolic ones (Note [Concrete sizes of symbolic fakes]).
Sizes stand_in(const std::vector<SymInt>& s) {
  Sizes out;
  for (const auto& v : s) out.push_back(concrete_stand_in(v));
  return out;
}
bool any_symbolic(const std::vector<SymInt>& s) {
  return std::any_of(s.begin(), s.end(), [](const SymInt& v) { return v.is_symbolic(); });
}
std::string sym_string(const std::vector<SymInt>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].to_string();
  return out + "]";
}

// What advanced indexing resolves a list of optional index tensors to (PyTorch's make_info).
struct IndexPlan {
  Sizes perm;                        // the self dim behind each dim of the indexed view
  Sizes sizes, strides;              // self permuted by perm
  std::vector<SymInt> sym_sizes;     // sizes, symbolic in a fake run of symbolic self
  std::vector<IndexOperand> index;   // one per indexed dim, broadcast to index_shape, int64
  int64_t before = 0;                // dims of the view before the indexed ones
  std::vector<SymInt> index_shape;   // the broadcast shape of the index tensors
  std::vector<SymInt> result;        // sizes of self[indices]: before dims, index_shape, after dims
  int64_t indexed() const { return static_cast<int64_t>(index.size()); }
};

// A bool (or uint8) mask indexes as many dims as it has, by the positions of its true elements
// (PyTorch's nonzero): in a real run counted from the data, in a fake run a data-dependent size.
void append_mask_positions(std::string_view op, const Tensor& self, const Tensor& mask, bool fake,
                           std::vector<std::optional<IndexOperand>>& per_dim) {
  const int64_t k = mask.dim();
  for (int64_t j = 0; j < k; ++j) {
    const int64_t d = static_cast<int64_t>(per_dim.size()) + j;
    OPCONFORM_CHECK(d < self.dim(), ErrorCode::kInvalidArgument, op, ": too many indices for tensor of dimension ",
                    self.dim(), " (a mask of 'indices' reaches dimension ", d, ")");
    OPCONFORM_CHECK(mask.size(j) == self.size(d), ErrorCode::kInvalidArgument, op, ": the shape of the mask ",
                    shape_string(mask.sizes()), " in 'indices' at index ", j,
                    " does not match the shape of the indexed tensor ", shape_string(self.sizes()), " at index ", d);
  }
  if (fake) {
    const SymInt count = mask.numel() == 0 ? SymInt(0)
                         : is_symbolic(mask) ? get_ctx().new_dynamic_size()
                                             : get_ctx().new_dynamic_size(0, mask.numel());
    for (int64_t j = 0; j < k; ++j) per_dim.push_back(IndexOperand{{count}, {k}, Tensor(), false});
    return;
  }
  // nonzero: an [n, k] int64 tensor of the true elements' multi-indices; column j indexes dim j.
  const auto flags = mask.to_vector<int64_t>();
  std::vector<int64_t> rows;
  int64_t p = 0;
  for_each_index(to_sizes(mask.sizes()), [&](const Sizes& at) {
    if (flags[p++] != 0) rows.insert(rows.end(), at.begin(), at.end());
  });
  const int64_t n = k == 0 ? 0 : static_cast<int64_t>(rows.size()) / k;
  const Tensor nonzero = from_vector<int64_t>(rows, {n, k});
  for (int64_t j = 0; j < k; ++j) per_dim.push_back(IndexOperand{{SymInt(n)}, {k}, nonzero.select(1, j), false});
}

// One dimension of torch.broadcast_shapes on possibly symbolic sizes: a data-dependent size
// broadcasts with a concrete one to the concrete one (the real run checks they agree).
std::optional<SymInt> broadcast_dim(const SymInt& a, const SymInt& b) {
  auto ca = a.maybe_as_int(), cb = b.maybe_as_int();
  if (ca && *ca == 1) return b;
  if (cb && *cb == 1) return a;
  if (ca && cb) return *ca == *cb ? std::optional<SymInt>(a) : std::nullopt;
  if (cb) return b;
  if (ca) return a;
  if (a.node() == b.node()) return a;
  if (a.hint() && b.hint()) return a == b ? std::optional<SymInt>(a) : std::nullopt;  // guards a == b
  return get_ctx().new_dynamic_size();
}

// The index tensors broadcast together; each operand's sizes and strides become those of its
// expanded view (stride 0 where it broadcasts).
std::vector<SymInt> broadcast_operands(std::string_view op, std::vector<IndexOperand*>& operands) {
  std::vector<SymInt> shape;
  bool first = true;
  for (IndexOperand* o : operands) {
    if (first) {
      shape = o->sizes;
      first = false;
      continue;
    }
    const size_t n = std::max(shape.size(), o->sizes.size());
    std::vector<SymInt> out(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t ia = static_cast<int64_t>(i) - static_cast<int64_t>(n - shape.size());
      const int64_t ib = static_cast<int64_t>(i) - static_cast<int64_t>(n - o->sizes.size());
      auto d = broadcast_dim(ia >= 0 ? shape[ia] : SymInt(1), ib >= 0 ? o->sizes[ib] : SymInt(1));
      if (!d) {
        std::string shapes;
        for (IndexOperand* x : operands) shapes += (shapes.empty() ? "" : ", ") + sym_string(x->sizes);
        throw Error(ErrorCode::kInvalidArgument,
                    concat(op, ": shape mismatch: the tensors of 'indices' could not be broadcast together with shapes ",
                           shapes));
      }
      out[i] = *d;
    }
    shape = std::move(out);
  }
  const Sizes concrete = stand_in(shape);
  for (IndexOperand* o : operands) {
    const int64_t lead = static_cast<int64_t>(shape.size() - o->sizes.size());
    Sizes strides(shape.size(), 0);
    for (int64_t i = lead; i < static_cast<int64_t>(shape.size()); ++i) {
      auto have = o->sizes[i - lead].maybe_as_int();
      const bool broadcast = have && *have == 1 && concrete[i] != 1;
      strides[i] = broadcast ? 0 : o->strides[i - lead];
    }
    if (o->values.defined()) o->values = o->values.expand(concrete);
    o->sizes = shape;
    o->strides = std::move(strides);
    if (o->from_int32) {  // .to(int64): dense strides kept, anything else becomes row-major
      Tensor meta = make_metadata_tensor(concrete, o->strides, DType::Int64, Device::meta());
      if (!meta.is_non_overlapping_and_dense()) o->strides = contiguous_strides(concrete);
      if (o->values.defined()) o->values = o->values.to(DType::Int64);
    }
  }
  return shape;
}

// PyTorch's make_info: masks become the positions of their true elements, the index tensors
// broadcast together, and when the indexed dims are not adjacent they move to the front (in
// order), the other dims after them.
IndexPlan plan_indexing(std::string_view op, const Tensor& self, const IndexList& indices, bool fake) {
  OPCONFORM_CHECK(static_cast<int64_t>(indices.size()) <= self.dim(), ErrorCode::kInvalidArgument, op,
                  ": too many indices for tensor of dimension ", self.dim(), " (got ", indices.size(), ")");
  std::vector<std::optional<IndexOperand>> per_dim;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i] || !indices[i]->defined()) {
      per_dim.emplace_back();
      continue;
    }
    const Tensor& t = *indices[i];
    const DType d = t.dtype();
    if (d == DType::Bool || d == DType::UInt8) {
      append_mask_positions(op, self, t, fake, per_dim);
      continue;
    }
    OPCONFORM_CHECK(d == DType::Int64 || d == DType::Int32, ErrorCode::kInvalidArgument, op,
                    ": tensors used as indices must be long, int, byte or bool tensors, got ", name(d),
                    " at position ", i, " of 'indices'");
    per_dim.push_back(IndexOperand{fake && is_symbolic(t) ? t.sym_sizes() : sym_sizes_of(t.sizes()), to_sizes(t.strides()),
                                   fake ? Tensor() : t, d == DType::Int32});
  }
  std::vector<IndexOperand*> defined;
  for (auto& o : per_dim) {
    if (o) defined.push_back(&*o);
  }
  IndexPlan plan;
  plan.index_shape = broadcast_operands(op, defined);
  while (static_cast<int64_t>(per_dim.size()) < self.dim()) per_dim.emplace_back();

  // Adjacent indexed dims stay in place; otherwise they go first.
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (per_dim[d]) {
      if (first < 0) first = d;
      last = d;
    }
  }
  bool adjacent = true;
  for (int64_t d = first; first >= 0 && d <= last; ++d) adjacent = adjacent && per_dim[d].has_value();
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (adjacent || per_dim[d]) plan.perm.push_back(d);
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!adjacent && !per_dim[d]) plan.perm.push_back(d);
  }
  const std::vector<SymInt> self_sym = fake && is_symbolic(self) ? self.sym_sizes() : sym_sizes_of(self.sizes());
  for (int64_t d : plan.perm) {
    plan.sym_sizes.push_back(self_sym[d]);
    plan.sizes.push_back(self.size(d));
    plan.strides.push_back(self.stride(d));
    if (per_dim[d]) plan.index.push_back(*per_dim[d]);
  }
  plan.before = adjacent ? std::max<int64_t>(first, 0) : 0;
  if (first < 0) plan.before = self.dim();  // nothing indexed

  // An index into an empty dim must be empty (no position is valid).
  const Sizes concrete = stand_in(plan.index_shape);
  bool may_be_empty = any_symbolic(plan.index_shape) ||
                      std::find(concrete.begin(), concrete.end(), 0) != concrete.end();
  for (int64_t k = 0; k < plan.indexed(); ++k) {
    OPCONFORM_CHECK(plan.sizes[plan.before + k] != 0 || may_be_empty, ErrorCode::kInvalidArgument, op,
                    ": index is out of bounds for dimension ", plan.perm[plan.before + k], " with size 0");
  }
  for (int64_t d = 0; d < plan.before; ++d) plan.result.emplace_back(plan.sym_sizes[d]);
  plan.result.insert(plan.result.end(), plan.index_shape.begin(), plan.index_shape.end());
  for (int64_t d = plan.before + plan.indexed(); d < static_cast<int64_t>(plan.sizes.size()); ++d) {
    plan.result.emplace_back(plan.sym_sizes[d]);
  }
  return plan;
}

// Strides for symbolic sizes laid out in the order that concrete strides (computed with stand-in
// sizes) give (core/strides.h: layout_order, dense_strides).
std::vector<SymInt> symbolic_strides(const std::vector<SymInt>& sizes, const Sizes& strides) {
  if (!any_symbolic(sizes)) return sym_sizes_of(strides);
  return dense_strides<SymInt>(sizes, layout_order(stand_in(sizes), strides));
}

// The strides of self[indices] (index.Tensor's output): TensorIterator's layout for the inputs
// PyTorch iterates: self with the indexed dims replaced by the index shape at stride 0, and the
// index tensors with size-1 dims before and after.
std::vector<SymInt> index_result_strides(const IndexPlan& plan) {
  const Sizes result = stand_in(plan.result);
  const int64_t ni = static_cast<int64_t>(plan.index_shape.size());
  Sizes src_strides(plan.strides.begin(), plan.strides.begin() + plan.before);
  src_strides.insert(src_strides.end(), ni, 0);
  src_strides.insert(src_strides.end(), plan.strides.begin() + plan.before + plan.indexed(), plan.strides.end());
  std::vector<Tensor> inputs{make_metadata_tensor(result, src_strides, DType::Int64, Device::meta())};
  Sizes reshaped(plan.before, 1);
  const Sizes index_shape = stand_in(plan.index_shape);
  reshaped.insert(reshaped.end(), index_shape.begin(), index_shape.end());
  reshaped.insert(reshaped.end(), result.size() - reshaped.size(), 1);
  for (const IndexOperand& o : plan.index) {
    inputs.push_back(make_metadata_tensor(index_shape, o.strides, DType::Int64, Device::meta()).view(reshaped));
  }
  return symbolic_strides(plan.result, elementwise_strides(result, inputs));
}

// Calls f(result position, position in the permuted self) for every element of self[indices],
// in row-major order of the result; index values are wrapped and range-checked on the way.
template <typename F>
void for_each_indexed(std::string_view op, const IndexPlan& plan, F&& f) {
  const Sizes result = expect_ints(plan.result);
  const Sizes index_strides = contiguous_strides(expect_ints(plan.index_shape));
  const int64_t ni = static_cast<int64_t>(index_strides.size());
  std::vector<std::vector<int64_t>> values;
  for (const IndexOperand& o : plan.index) values.push_back(o.values.to_vector<int64_t>());
  for_each_index(result, [&](const Sizes& r) {
    int64_t p = 0;
    for (int64_t i = 0; i < ni; ++i) p += r[plan.before + i] * index_strides[i];
    Sizes s(r.begin(), r.begin() + plan.before);
    for (int64_t k = 0; k < plan.indexed(); ++k) {
      const int64_t d = plan.before + k;
      s.push_back(checked_index(op, "indices", values[k][p], plan.sizes[d], plan.perm[d], true));
    }
    s.insert(s.end(), r.begin() + plan.before + ni, r.end());
    f(r, s);
  });
}

Tensor index_cpu(const Tensor& self, const IndexList& indices) {
  const IndexPlan plan = plan_indexing(kIndex, self, indices, false);
  const Sizes result = expect_ints(plan.result);
  const Sizes strides = expect_ints(index_result_strides(plan));
  return visit_wide<Domain::All>(kIndex, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Elements<W> in(self.permute(plan.perm));
    Elements<W> out(result, W(0));
    for_each_indexed(kIndex, plan, [&](const Sizes& r, const Sizes& s) { out.at(r) = in.at(s); });
    return out.to_tensor(result, strides, self.options());
  });
}

Tensor index_fake(const Tensor& self, const IndexList& indices) {
  const IndexPlan plan = plan_indexing(kIndex, self, indices, true);
  const std::vector<SymInt> strides = index_result_strides(plan);
  if (!any_symbolic(plan.result)) return empty_strided(expect_ints(plan.result), expect_ints(strides), self.options());
  return make_fake_tensor(plan.result, self.dtype(), self.device(), strides);
}

// index_put's checks on values: self's dtype, and a shape that broadcasts to self[indices].
void check_index_put_values(const IndexPlan& plan, const Tensor& self, const Tensor& values) {
  OPCONFORM_CHECK(values.dtype() == self.dtype(), ErrorCode::kInvalidArgument, kIndexPut,
                  ": expected 'values' to have the dtype of 'self' (", name(self.dtype()), "), got ", name(values.dtype()));
  bool fits = values.dim() <= static_cast<int64_t>(plan.result.size());
  for (int64_t i = 0; fits && i < values.dim(); ++i) {
    const SymInt& want = plan.result[plan.result.size() - values.dim() + i];
    auto c = want.maybe_as_int();
    fits = values.size(i) == 1 || !c || *c == values.size(i);
  }
  OPCONFORM_CHECK(fits, ErrorCode::kInvalidArgument, kIndexPut, ": shape mismatch: 'values' of shape ",
                  shape_string(values.sizes()), " cannot be broadcast to the indexing result of shape ",
                  sym_string(plan.result));
}

Tensor index_put_cpu(const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate) {
  const IndexPlan plan = plan_indexing(kIndexPut, self, indices, false);
  check_index_put_values(plan, self, values);
  return visit_wide<Domain::All>(kIndexPut, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    Elements<W> out(self);
    const Elements<W> v(values.expand(expect_ints(plan.result)));
    for_each_indexed(kIndexPut, plan, [&](const Sizes& r, const Sizes& s) {
      Sizes target(s.size());
      for (size_t i = 0; i < s.size(); ++i) target[plan.perm[i]] = s[i];
      W& element = out.at(target);
      element = accumulate ? plus(element, v.at(r)) : v.at(r);
    });
    return out.to_tensor(self.sizes(), clone_strides(self), self.options());
  });
}

Tensor index_put_fake(const Tensor& self, const IndexList& indices, const Tensor& values, bool) {
  const IndexPlan plan = plan_indexing(kIndexPut, self, indices, true);
  check_index_put_values(plan, self, values);
  if (is_symbolic(self)) {
    if (self.is_non_overlapping_and_dense())
      return make_fake_tensor(self.sym_sizes(), self.dtype(), self.device(), self.sym_strides());
    return sym_empty(self.sym_sizes(), self);
  }
  return empty_strided(self.sizes(), clone_strides(self), self.options());
}

// ================================================================================================
// select_scatter, slice_scatter, masked_scatter
// ================================================================================================

// PyTorch's clone_preserve_strides (what the *_scatter ops return): the whole storage copied and
// viewed as self is, so strides and storage offset are self's. A self whose elements overlap
// (stride 0) is cloned densely instead. Metadata-only on fake tensors.
Tensor clone_preserve_strides(const Tensor& self) {
  bool overlapping = false;
  for (int64_t d = 0; d < self.dim(); ++d) overlapping = overlapping || (self.size(d) > 1 && self.stride(d) == 0);
  if (overlapping && !self.is_non_overlapping_and_dense()) return self.clone();
  const int64_t storage_elements = static_cast<int64_t>(self.storage()->nbytes() / self.itemsize());
  Tensor whole = self.as_strided(Sizes{storage_elements}, Sizes{1}, 0).clone();
  return whole.as_strided(self.sizes(), self.strides(), self.storage_offset());
}

// clone_preserve_strides's metadata for a fake self with symbolic sizes.
Tensor sym_clone_preserve_strides(const Tensor& self) {
  bool overlapping = false;
  for (int64_t d = 0; d < self.dim(); ++d) overlapping = overlapping || (self.size(d) > 1 && self.stride(d) == 0);
  if (overlapping && !self.is_non_overlapping_and_dense()) return sym_empty(self.sym_sizes(), self);
  return make_fake_tensor(self.sym_sizes(), self.dtype(), self.device(), self.sym_strides());
}

void check_scatter_src_sizes(std::string_view op, const Tensor& slice, const Tensor& src) {
  OPCONFORM_CHECK(std::ranges::equal(slice.sizes(), src.sizes()), ErrorCode::kInvalidArgument, op,
                  ": expected 'src' to have the size of the slice of 'self' (", shape_string(slice.sizes()), "), got ",
                  shape_string(src.sizes()));
}

// One kernel for real and fake tensors: the copy is metadata-only on fakes.
Tensor select_scatter_impl(const Tensor& self, const Tensor& src, int64_t dim, const SymInt& index) {
  OPCONFORM_CHECK(self.dim() > 0, ErrorCode::kInvalidArgument, kSelectScatter, ": cannot select from a 0-d 'self'");
  dim = wrap_dim(dim, self.dim(), kSelectScatter);
  const int64_t i = checked_index(kSelectScatter, "index", index.expect_int(), self.size(dim), dim, true);
  check_scatter_src_sizes(kSelectScatter, self.select(dim, i), src);
  if (any_symbolic_tensor({&self, &src})) return sym_clone_preserve_strides(self);
  Tensor out = clone_preserve_strides(self);
  out.select(dim, i).copy_(src);
  return out;
}

std::optional<int64_t> concrete_opt(const std::optional<SymInt>& v) {
  return v ? std::optional<int64_t>(v->expect_int()) : std::nullopt;
}

Tensor slice_scatter_impl(const Tensor& self, const Tensor& src, int64_t dim, std::optional<SymInt> start,
                          std::optional<SymInt> end, const SymInt& step) {
  OPCONFORM_CHECK(self.dim() > 0, ErrorCode::kInvalidArgument, kSliceScatter, ": cannot slice a 0-d 'self'");
  dim = wrap_dim(dim, self.dim(), kSliceScatter);
  if ((start && start->is_symbolic()) || (end && end->is_symbolic()) || step.is_symbolic()) {
    // Symbolic bounds (a formula's slice of a data-dependent length): only a fake run gets here.
    OPCONFORM_CHECK(self.is_fake(), ErrorCode::kInvalidArgument, kSliceScatter, ": symbolic bounds on a real tensor");
    return is_symbolic(self) ? sym_clone_preserve_strides(self)
                             : make_fake_tensor(self.sym_sizes(), self.dtype(), self.device(), self.sym_strides());
  }
  const int64_t s = step.expect_int();
  OPCONFORM_CHECK(s > 0, ErrorCode::kInvalidArgument, kSliceScatter, ": 'step' must be positive, got ", s);
  check_scatter_src_sizes(kSliceScatter, self.slice(dim, concrete_opt(start), concrete_opt(end), s), src);
  if (any_symbolic_tensor({&self, &src})) return sym_clone_preserve_strides(self);
  Tensor out = clone_preserve_strides(self);
  out.slice(dim, concrete_opt(start), concrete_opt(end), s).copy_(src);
  return out;
}

Sizes check_masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  OPCONFORM_CHECK(mask.dtype() == DType::Bool, ErrorCode::kInvalidArgument, kMaskedScatter,
                  ": 'mask' must be a bool tensor, got ", name(mask.dtype()));
  OPCONFORM_CHECK(source.dtype() == self.dtype(), ErrorCode::kInvalidArgument, kMaskedScatter,
                  ": expected 'source' to have the dtype of 'self' (", name(self.dtype()), "), got ", name(source.dtype()));
  return broadcast_all(kMaskedScatter, {self, mask});
}

Tensor masked_scatter_cpu(const Tensor& self, const Tensor& mask, const Tensor& source) {
  const Sizes shape = check_masked_scatter(self, mask, source);
  const auto flags = mask.expand(shape).to_vector<int64_t>();
  const int64_t count = std::count_if(flags.begin(), flags.end(), [](int64_t f) { return f != 0; });
  OPCONFORM_CHECK(source.numel() >= count, ErrorCode::kInvalidArgument, kMaskedScatter, ": 'source' has ", source.numel(),
                  " elements but 'mask' has ", count, " true elements");
  return visit_wide<Domain::All>(kMaskedScatter, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    Elements<W> out(self.expand(shape));
    const Elements<W> in(source);
    int64_t next = 0;
    for (size_t e = 0; e < flags.size(); ++e) {
      if (flags[e] != 0) out.values[e] = in.values[next++];
    }
    return out.to_tensor(shape, contiguous_strides(shape), self.options());
  });
}

// The broadcast shape of a and b with each dim's size taken symbolically from an input that is
// not broadcast there.
std::vector<SymInt> sym_broadcast(const Sizes& shape, std::initializer_list<const Tensor*> inputs) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<SymInt> sizes(shape.begin(), shape.end());
  for (int64_t d = 0; d < ndim; ++d) {
    for (const Tensor* t : inputs) {
      const int64_t lead = ndim - t->dim();
      if (d < lead || t->size(d - lead) != shape[d]) continue;
      sizes[d] = t->sym_sizes()[d - lead];
      if (sizes[d].is_symbolic()) break;
    }
  }
  return sizes;
}

Tensor masked_scatter_fake(const Tensor& self, const Tensor& mask, const Tensor& source) {
  const Sizes shape = check_masked_scatter(self, mask, source);
  if (any_symbolic_tensor({&self, &mask, &source})) return sym_empty(sym_broadcast(shape, {&self, &mask}), self);
  return empty(shape, self.options());
}

// ================================================================================================
// embedding and embedding_dense_backward
// ================================================================================================

Sizes check_embedding(const Tensor& weight, const Tensor& indices) {
  OPCONFORM_CHECK(weight.dim() == 2, ErrorCode::kInvalidArgument, kEmbedding, ": 'weight' must be 2-D, got ",
                  weight.dim(), " dimensions");
  check_int_index(kEmbedding, indices, "indices");
  Sizes sizes = to_sizes(indices.sizes());
  sizes.push_back(weight.size(1));
  return sizes;
}

Tensor embedding_cpu(const Tensor& weight, const Tensor& indices, const SymInt&, bool, bool) {
  const Sizes sizes = check_embedding(weight, indices);
  const auto rows = indices.to_vector<int64_t>();
  const int64_t width = weight.size(1);
  return visit_wide<Domain::All>(kEmbedding, weight.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Elements<W> table(weight);
    Elements<W> out({static_cast<int64_t>(rows.size()), width}, W(0));
    for (int64_t i = 0; i < static_cast<int64_t>(rows.size()); ++i) {
      const int64_t row = checked_index(kEmbedding, "indices", rows[i], weight.size(0), 0, false);
      for (int64_t j = 0; j < width; ++j) out.at({i, j}) = table.at({row, j});
    }
    return out.to_tensor(sizes, contiguous_strides(sizes), weight.options());
  });
}

Tensor embedding_fake(const Tensor& weight, const Tensor& indices, const SymInt&, bool, bool) {
  const Sizes sizes = check_embedding(weight, indices);
  if (any_symbolic_tensor({&weight, &indices})) {
    std::vector<SymInt> out = indices.sym_sizes();
    out.push_back(weight.sym_sizes()[1]);
    return sym_empty(std::move(out), weight);
  }
  return empty(sizes, weight.options());
}

// The checks of embedding_dense_backward; returns the result's sizes [num_weights, width].
Sizes check_embedding_backward(const Tensor& grad, const Tensor& indices, const SymInt& num_weights) {
  check_int_index(kEmbeddingBackward, indices, "indices");
  OPCONFORM_CHECK(grad.dim() >= 1, ErrorCode::kInvalidArgument, kEmbeddingBackward,
                  ": 'grad_output' must have at least one dimension");
  const int64_t width = grad.size(-1), rows = num_weights.expect_int();
  OPCONFORM_CHECK(grad.numel() == indices.numel() * width, ErrorCode::kInvalidArgument, kEmbeddingBackward,
                  ": 'grad_output' of shape ", shape_string(grad.sizes()), " does not hold one row of ", width,
                  " per element of 'indices' (shape ", shape_string(indices.sizes()), ")");
  OPCONFORM_CHECK(rows >= 0, ErrorCode::kInvalidArgument, kEmbeddingBackward, ": 'num_weights' must be >= 0, got ", rows);
  return {rows, width};
}

Tensor embedding_backward_cpu(const Tensor& grad, const Tensor& indices, const SymInt& num_weights,
                              const SymInt& padding_idx, bool scale_grad_by_freq) {
  const Sizes sizes = check_embedding_backward(grad, indices, num_weights);
  const int64_t n = indices.numel(), width = sizes[1], padding = padding_idx.expect_int();
  const auto rows = indices.to_vector<int64_t>();
  std::vector<int64_t> uses(sizes[0], 0);  // how often each row is used (scale_grad_by_freq)
  for (int64_t r : rows) {
    if (r != padding) ++uses[checked_index(kEmbeddingBackward, "indices", r, sizes[0], 0, false)];
  }
  return visit_wide<Domain::Floating>(kEmbeddingBackward, grad.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Elements<W> g(grad.reshape({n, width}));
    Elements<W> out(sizes, W(0));
    for (int64_t i = 0; i < n; ++i) {
      if (rows[i] == padding) continue;
      const double scale = scale_grad_by_freq ? 1.0 / static_cast<double>(uses[rows[i]]) : 1.0;
      for (int64_t j = 0; j < width; ++j) out.at({rows[i], j}) += g.at({i, j}) * scale;
    }
    return out.to_tensor(sizes, contiguous_strides(sizes), grad.options());
  });
}

Tensor embedding_backward_fake(const Tensor& grad, const Tensor& indices, const SymInt& num_weights, const SymInt&, bool) {
  if (any_symbolic_tensor({&grad, &indices}) || num_weights.is_symbolic()) {
    check_int_index(kEmbeddingBackward, indices, "indices");
    OPCONFORM_CHECK(grad.dim() >= 1, ErrorCode::kInvalidArgument, kEmbeddingBackward,
                    ": 'grad_output' must have at least one dimension");
    return sym_empty({num_weights, grad.sym_sizes().back()}, grad);
  }
  return empty(check_embedding_backward(grad, indices, num_weights), grad.options());
}

// ================================================================================================
// Autograd formulas (registry ops only, so they are differentiable again)
// ================================================================================================

Tensor eq_scalar(const Ops& ops, const Tensor& t, const Scalar& v) { return ops.tensor("aten::eq.Scalar", {t, IValue(v)}); }
Tensor gather_op(const Ops& ops, const Tensor& t, int64_t dim, const Tensor& index) {
  return ops.tensor("aten::gather", {t, IValue(dim), index});
}
Tensor scatter_add_op(const Ops& ops, const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  return ops.tensor("aten::scatter_add", {t, IValue(dim), index, src});
}
// t with zeros at the positions index names along dim.
Tensor clear_scattered(const Ops& ops, const Tensor& t, int64_t dim, const Tensor& index) {
  return ops.tensor("aten::scatter.value", {t, IValue(dim), index, IValue(int64_t{0})});
}
Tensor index_op(const Ops& ops, const Tensor& t, const IValue& indices) {
  return ops.tensor("aten::index.Tensor", {t, indices});
}
Tensor index_put_op(const Ops& ops, const Tensor& t, const IValue& indices, const Tensor& values, bool accumulate) {
  return ops.tensor("aten::index_put", {t, indices, values, IValue(accumulate)});
}

// An index-shaped gradient as the gradient of a src that may be larger than index (the
// positions index does not cover got no gradient), through constant_pad_nd.
Tensor pad_to(const Ops& ops, Tensor t, const Sizes& target) {
  if (std::ranges::equal(t.sizes(), target)) return t;
  const Sizes want = nonempty(target);
  if (t.dim() == 0) t = ops.view(t, {1});
  std::vector<int64_t> pad;
  for (int64_t d = static_cast<int64_t>(want.size()) - 1; d >= 0; --d) {
    pad.push_back(0);
    pad.push_back(want[d] - t.size(d));
  }
  t = ops.tensor("aten::constant_pad_nd", {t, IValue(pad), IValue(int64_t{0})});
  return std::ranges::equal(t.sizes(), target) ? t : ops.view(t, target);
}

// The leading index-shaped block of a src that may be larger (what scatter reads), through slice.
Tensor crop_to(const Ops& ops, Tensor t, const Sizes& target) {
  if (std::ranges::equal(t.sizes(), target)) return t;
  const Sizes want = nonempty(target);
  if (t.dim() == 0) t = ops.view(t, {1});
  for (int64_t d = 0; d < static_cast<int64_t>(want.size()); ++d) {
    if (t.size(d) != want[d]) {
      t = ops.tensor("aten::slice.Tensor", {t, IValue(d), IValue(int64_t{0}), IValue(want[d]), IValue(int64_t{1})});
    }
  }
  return std::ranges::equal(t.sizes(), target) ? t : ops.view(t, target);
}

// Which positions of index write the element they reach last (the reference's rule for
// duplicates, row-major order of index): scatter their ids, read back, compare. Bool, index-shaped.
Tensor last_scatter_writes(const Ops& ops, const Sizes& target, int64_t dim, const Tensor& index) {
  const Tensor ids = ops.view(ops.arange(index.numel(), index.device()), to_sizes(index.sizes()));
  const Tensor owner = ops.tensor("aten::scatter.src",
                                  {ops.full(target, int64_t{-1}, DType::Int64, index.device()), IValue(dim), index, ids});
  return ops.tensor("aten::eq.Tensor", {gather_op(ops, owner, dim, index), ids});
}

// The same for index_put: which elements of self[indices] (shape `result`) write last.
Tensor last_index_put_writes(const Ops& ops, const Sizes& self_sizes, const IValue& indices, const Sizes& result,
                             Device device) {
  const Tensor ids = ops.view(ops.arange(numel_of(result), device), result);
  const Tensor owner = index_put_op(ops, ops.full(self_sizes, int64_t{-1}, DType::Int64, device), indices, ids, false);
  return ops.tensor("aten::eq.Tensor", {index_op(ops, owner, indices), ids});
}

Sizes saved_sizes(const AutogradContext& ctx, const std::string& key) { return ctx.get(key).to<Sizes>(); }

// setup_context of the dim-based ops (gather, scatter*): dim (wrapped) and the tensors self,
// index, src (when a tensor) and the result.
autograd::SetupContextFn save_dim_op(const char* op) {
  return [op](AutogradContext& ctx, const Stack& in, const Stack& out) {
    ctx.set("dim", IValue(wrap_dim(in[1].to_int(), in[0].to_tensor().dim(), op)));
    std::vector<Tensor> saved{in[0].to_tensor(), in[2].to_tensor()};
    if (in[3].is_tensor()) saved.push_back(in[3].to_tensor());
    saved.push_back(out[0].to_tensor());
    ctx.save_for_backward(std::move(saved));
  };
}

Grads gather_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // self, index, result
  const int64_t dim = ctx.get("dim").to_int();
  return {scatter_add_op(ops, ops.full(to_sizes(saved[0].sizes()), int64_t{0}, g[0]), dim, saved[1], g[0]), {}, {}, {}};
}

Grads scatter_src_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // self, index, src, result
  const int64_t dim = ctx.get("dim").to_int();
  Grads out(4);
  if (ctx.needs_input_grad(0)) out[0] = clear_scattered(ops, g[0], dim, saved[1]);
  if (ctx.needs_input_grad(3)) {
    const Tensor kept = last_scatter_writes(ops, to_sizes(saved[0].sizes()), dim, saved[1]);
    const Tensor read = ops.where(kept, gather_op(ops, g[0], dim, saved[1]), ops.scalar_like(0, g[0]));
    out[3] = pad_to(ops, read, to_sizes(saved[2].sizes()));
  }
  return out;
}

Grads scatter_value_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // self, index, result
  return {clear_scattered(ops, g[0], ctx.get("dim").to_int(), saved[1]), {}, {}, {}};
}

Grads scatter_add_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // self, index, src, result
  const int64_t dim = ctx.get("dim").to_int();
  Grads out(4);
  out[0] = g[0];
  if (ctx.needs_input_grad(3)) out[3] = pad_to(ops, gather_op(ops, g[0], dim, saved[1]), to_sizes(saved[2].sizes()));
  return out;
}

// For each src element, the product of the other src members of its group (the elements that
// reach the same position of self), without division, so exact where members are zero or tiny:
// src is extended with a trailing dim t in which the element at position t along dim counts as 1,
// scatter_reduce multiplies the groups for every t, and each element reads its own t. Written
// with registry ops, so its derivative is the same construction again. All tensors nonempty.
Tensor products_of_others(const Ops& ops, const Sizes& self_sizes, int64_t dim, const Tensor& index,
                          const Tensor& src) {
  const Sizes sizes = to_sizes(index.sizes());
  const int64_t rank = static_cast<int64_t>(sizes.size()), m = sizes[dim];
  Sizes extended = sizes, at_dim(rank + 1, 1), base = self_sizes;
  extended.push_back(m);
  base.push_back(m);
  at_dim[dim] = m;
  const Tensor positions = ops.arange(m, index.device());
  Sizes diagonal_shape = at_dim;
  diagonal_shape[rank] = m;
  const Tensor diagonal =
      ops.view(ops.tensor("aten::eq.Tensor", {ops.view(positions, {m, 1}), ops.view(positions, {1, m})}), diagonal_shape);
  const Tensor src_ext = ops.where(diagonal, ops.scalar_like(1, src), ops.expand(ops.unsqueeze(src, rank), extended));
  const Tensor index_ext = ops.expand(ops.unsqueeze(index, rank), extended);
  const Tensor products = ops.tensor(kScatterReduce, {ops.full(base, 1, src.dtype(), src.device()), IValue(dim),
                                                      index_ext, src_ext, IValue("prod"), IValue(true)});
  Sizes own_shape = sizes;
  own_shape.push_back(1);
  const Tensor own = ops.expand(ops.view(positions, at_dim), own_shape);  // each element's position along dim
  return ops.view(gather_op(ops, gather_op(ops, products, dim, index_ext), rank, own), sizes);
}

// scatter_reduce.two's gradients (PyTorch's scatter_reduce_backward, with prod exact where members
// are zero and amax/amin not counting self where include_self=False drops it). Returns {self, src}
// gradients, src index-shaped. With include_self=False self only passes through where nothing was
// scattered. All tensors nonempty, index not empty.
std::pair<Tensor, Tensor> scatter_reduce_grads(const Ops& ops, const Tensor& g, const Tensor& self, int64_t dim,
                                               const Tensor& index, const Tensor& src_block, Reduce r,
                                               bool include_self, const Tensor& result) {
  const Sizes self_sizes = to_sizes(self.sizes()), index_sizes = to_sizes(index.sizes());
  Tensor gs, gsrc;  // gs: self's gradient where self takes part (include_self)
  switch (r) {
    case Reduce::sum:
      gs = g;
      gsrc = gather_op(ops, g, dim, index);
      break;
    case Reduce::mean: {
      const Tensor base = ops.full(self_sizes, include_self ? 1 : 0, g.dtype(), g.device());
      Tensor n = scatter_add_op(ops, base, dim, index, ops.full(index_sizes, 1, g.dtype(), g.device()));
      n = ops.where(eq_scalar(ops, n, 0), ops.scalar_like(1, n), n);
      gs = ops.div(g, n);
      gsrc = gather_op(ops, gs, dim, index);
      break;
    }
    case Reduce::amax:
    case Reduce::amin: {
      // The gradient goes evenly to every member equal to the result.
      const Tensor value = gather_op(ops, result, dim, index);
      Tensor self_is = ops.to(ops.tensor("aten::eq.Tensor", {self, result}), g.dtype());
      if (!include_self) self_is = clear_scattered(ops, self_is, dim, index);
      const Tensor src_is = ops.to(ops.tensor("aten::eq.Tensor", {src_block, value}), g.dtype());
      const Tensor share = ops.div(g, scatter_add_op(ops, self_is, dim, index, src_is));
      gs = ops.mul(self_is, share);
      gsrc = ops.mul(src_is, gather_op(ops, share, dim, index));
      break;
    }
    case Reduce::prod: {
      // d/dx of a product is the product of the other members; self is a member with include_self.
      const Tensor others = products_of_others(ops, self_sizes, dim, index, src_block);
      gsrc = ops.mul(gather_op(ops, g, dim, index),
                     include_self ? ops.mul(others, gather_op(ops, self, dim, index)) : others);
      if (include_self) {
        gs = ops.mul(g, ops.tensor(kScatterReduce, {ops.full(self_sizes, 1, g.dtype(), g.device()), IValue(dim),
                                                    index, src_block, IValue("prod"), IValue(true)}));
      }
      break;
    }
    case Reduce::assign: break;
  }
  return {include_self ? gs : clear_scattered(ops, g, dim, index), gsrc};
}

Grads scatter_reduce_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // self, index, src, result
  const int64_t dim = ctx.get("dim").to_int();
  const bool include_self = ctx.get("include_self").to_bool();
  const Tensor& index = saved[1];
  const Sizes self_sizes = to_sizes(saved[0].sizes()), index_sizes = to_sizes(index.sizes());
  auto nonempty_view = [&](const Tensor& t) { return t.dim() == 0 ? ops.view(t, {1}) : t; };
  Tensor gs, gsrc;
  if (index.numel() == 0) {
    gs = g[0];
    gsrc = ops.full(index_sizes, int64_t{0}, g[0]);
  } else {
    std::tie(gs, gsrc) = scatter_reduce_grads(ops, nonempty_view(g[0]), nonempty_view(saved[0]), dim,
                                              nonempty_view(index), nonempty_view(crop_to(ops, saved[2], index_sizes)),
                                              parse_reduce(ctx.get("reduce").to_string_ref()), include_self,
                                              nonempty_view(saved[3]));
    if (self_sizes.empty()) gs = ops.view(gs, self_sizes);
    if (index_sizes.empty()) gsrc = ops.view(gsrc, index_sizes);
  }
  return {ctx.needs_input_grad(0) ? gs : Tensor(), {}, {},
          ctx.needs_input_grad(3) ? pad_to(ops, gsrc, to_sizes(saved[2].sizes())) : Tensor(), {}, {}};
}

Grads index_select_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // index
  const Sizes self_sizes = saved_sizes(ctx, "self_sizes");
  if (self_sizes.empty()) return {g[0], {}, {}};  // a 0-d self: its one element is the result
  const int64_t dim = ctx.get("dim").to_int();
  const Tensor index = saved[0].dim() == 0 ? ops.view(saved[0], {1}) : saved[0];
  IndexList list(dim);
  list.emplace_back(index);
  return {index_put_op(ops, ops.full(self_sizes, int64_t{0}, g[0]), IValue(list), g[0], true), {}, {}};
}

Grads index_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  return {index_put_op(ops, ops.full(saved_sizes(ctx, "self_sizes"), int64_t{0}, g[0]), ctx.get("indices"), g[0], true), {}};
}

// Under capture, self[indices] with a mask has a data-dependent (unbacked) size whose stand-in is
// not its value. Where the index tensors are all of one element, a mask's positions make every
// element of self[indices] a distinct position of self: nothing is written twice, so the
// last-write mask (whose ids would need that size) is not needed.
bool distinct_positions(const Tensor& read, const IValue& indices) {
  if (!is_symbolic(read)) return false;
  bool unbacked = false;
  for (const SymInt& s : read.sym_sizes()) unbacked = unbacked || (s.is_symbolic() && !s.hint());
  if (!unbacked) return false;
  bool has_mask = false;
  for (const auto& t : indices.to<IndexList>()) {
    if (!t || !t->defined()) continue;
    if (t->dtype() == DType::Bool || t->dtype() == DType::UInt8) has_mask = true;
    else if (t->numel() > 1) return false;
  }
  return has_mask;
}

// ops.sum_to for a gradient whose sizes may be symbolic: a dim that is not known to be 1 is summed
// where values has size 1 (so a data-dependent size broadcast to 1 is summed, whatever it is).
Tensor sum_to_values(const Ops& ops, const Tensor& read, const Sizes& values_sizes) {
  if (!is_symbolic(read)) return ops.sum_to(read, values_sizes);
  // No view at the end: a dim of values other than 1 is the (possibly data-dependent) size of read.
  const int64_t lead = read.dim() - static_cast<int64_t>(values_sizes.size());
  std::vector<int64_t> leading;
  for (int64_t d = 0; d < lead; ++d) leading.push_back(d);
  const Tensor t = leading.empty() ? read : ops.sum_dims(read, leading, /*keepdim=*/false);
  const std::vector<SymInt> sizes = t.sym_sizes();
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d) {
    auto c = sizes[d].maybe_as_int();
    if (values_sizes[d] == 1 && !(c && *c == 1)) dims.push_back(d);
  }
  return dims.empty() ? t : ops.sum_dims(t, dims, /*keepdim=*/true);
}

Grads index_put_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const IValue& indices = ctx.get("indices");
  const bool accumulate = ctx.get("accumulate").to_bool();
  const Sizes values_sizes = saved_sizes(ctx, "values_sizes");
  Grads out(4);
  if (ctx.needs_input_grad(0)) {
    out[0] = accumulate ? g[0] : index_put_op(ops, g[0], indices, ops.full(values_sizes, int64_t{0}, g[0]), false);
  }
  if (ctx.needs_input_grad(2) && numel_of(values_sizes) == 0) {
    // Nothing to read (and under capture, a mask's data-dependent count need not be known to be 0).
    out[2] = ops.full(values_sizes, int64_t{0}, g[0]);
  } else if (ctx.needs_input_grad(2)) {
    Tensor read = index_op(ops, g[0], indices);
    if (!accumulate && !distinct_positions(read, indices)) {
      const Tensor kept = last_index_put_writes(ops, saved_sizes(ctx, "self_sizes"), indices, to_sizes(read.sizes()),
                                                g[0].device());
      read = ops.where(kept, read, ops.scalar_like(0, read));
    }
    out[2] = sum_to_values(ops, read, values_sizes);
  }
  return out;
}

Grads select_scatter_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const IValue dim = ctx.get("dim"), index = ctx.get("index");
  Grads out(4);
  if (ctx.needs_input_grad(0)) {
    out[0] = ops.tensor("aten::select_scatter", {g[0], ops.full(saved_sizes(ctx, "src_sizes"), int64_t{0}, g[0]), dim, index});
  }
  if (ctx.needs_input_grad(1)) out[1] = ops.tensor("aten::select.int", {g[0], dim, index});
  return out;
}

Grads slice_scatter_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const IValue dim = ctx.get("dim"), start = ctx.get("start"), end = ctx.get("end"), step = ctx.get("step");
  Grads out(6);
  if (ctx.needs_input_grad(0)) {
    out[0] = ops.tensor("aten::slice_scatter",
                        {g[0], ops.full(saved_sizes(ctx, "src_sizes"), int64_t{0}, g[0]), dim, start, end, step});
  }
  if (ctx.needs_input_grad(1)) out[1] = ops.tensor("aten::slice.Tensor", {g[0], dim, start, end, step});
  return out;
}

Grads masked_scatter_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // mask
  const Sizes shape = to_sizes(g[0].sizes());
  const Tensor mask = std::ranges::equal(saved[0].sizes(), shape) ? saved[0] : ops.expand(saved[0], shape);
  auto as_1d = [&](const Tensor& t) { return shape.empty() ? ops.view(t, {1}) : t; };  // a 0-d mask indexes no dim
  Grads out(3);
  if (ctx.needs_input_grad(0)) {
    out[0] = ops.sum_to(ops.where(mask, ops.scalar_like(0, g[0]), g[0]), saved_sizes(ctx, "self_sizes"));
  }
  if (ctx.needs_input_grad(2)) {
    // The masked elements of grad, in order, at the start of a flat source; the rest got none.
    const Sizes source_sizes = saved_sizes(ctx, "source_sizes");
    const Tensor taken = index_op(ops, as_1d(g[0]), IValue(IndexList{as_1d(mask)}));
    const Tensor flat = ops.tensor("aten::slice_scatter", {ops.full({numel_of(source_sizes)}, int64_t{0}, g[0]), taken,
                                                            IValue(int64_t{0}), IValue(int64_t{0}),
                                                            IValue(taken.sym_sizes()[0]), IValue(int64_t{1})});
    out[2] = ops.view(flat, source_sizes);
  }
  return out;
}

Grads embedding_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // indices
  return {ops.tensor(kEmbeddingBackward, {g[0], saved[0], ctx.get("num_weights"), ctx.get("padding_idx"),
                                          ctx.get("scale_grad_by_freq")}),
          {}, {}, {}, {}};
}

// embedding_dense_backward is linear in grad_output: its transpose reads row indices[i] of the
// incoming gradient for element i, scaled as the forward scaled it (1 / uses of the row with
// scale_grad_by_freq, 0 for padding_idx).
Grads embedding_dense_backward_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // indices
  const Sizes grad_sizes = saved_sizes(ctx, "grad_sizes");
  const int64_t num_weights = ctx.get("num_weights").to<SymInt>().expect_int();
  const int64_t padding = ctx.get("padding_idx").to<SymInt>().expect_int();
  const bool scale = ctx.get("scale_grad_by_freq").to_bool();
  const int64_t n = saved[0].numel();
  const Tensor rows = ops.to(ops.reshape(saved[0], {n}), DType::Int64);
  Tensor read = ops.tensor("aten::index_select", {g[0], IValue(int64_t{0}), rows});
  const bool pads = padding >= 0 && padding < num_weights;
  if (scale || pads) {
    Tensor factor = ops.full({num_weights}, 1, g[0].dtype(), g[0].device());
    if (scale) {
      const Tensor uses = scatter_add_op(ops, ops.full({num_weights}, int64_t{0}, g[0]), 0, rows,
                                         ops.full({n}, 1, g[0].dtype(), g[0].device()));
      factor = ops.tensor("aten::reciprocal", {uses});  // rows never used get inf, and are never read
    }
    if (pads) factor = ops.tensor("aten::select_scatter", {factor, ops.scalar_like(0, factor), IValue(int64_t{0}), IValue(padding)});
    read = ops.mul(read, ops.view(ops.tensor("aten::index_select", {factor, IValue(int64_t{0}), rows}), {n, 1}));
  }
  return {ops.view(read, grad_sizes), {}, {}, {}, {}};
}

// ================================================================================================
// vmap rules (the batch at dim 0 of every tensor argument, the op run once on the whole batch).
// index.Tensor / index_put (batched index lists), masked_scatter (a source consumed per sample),
// embedding and embedding_dense_backward (a batched table) are left to the per-sample fallback.
// ================================================================================================

using InDims = std::vector<std::optional<int64_t>>;
using VmapResult = std::pair<Stack, std::vector<std::optional<int64_t>>>;

// gather and the scatter ops: the tensor arguments (at `tensors`) batched at dim 0, unbatched ones
// expanded, logical 0-d ones as [1] (the ops treat them so), dim past the batch. The result has
// the logical shape of the argument at `result_like` (index for gather, self for scatter).
VmapRule dim_op_vmap_rule(Registry& registry, std::string op, std::vector<size_t> tensors, size_t result_like) {
  return [ops = Ops(registry), op, tensors, result_like](const VmapInfo& info, const Stack& inputs,
                                                         const InDims& in_dims) -> VmapResult {
    Stack args = inputs;
    Sizes result_shape;
    for (size_t p : tensors) {
      Tensor t = move_batch_dim(inputs[p].to_tensor(), in_dims[p], 0, info.batch_size);
      if (p == result_like) result_shape = to_sizes(t.sizes());
      args[p] = IValue(t.dim() == 1 ? ops.unsqueeze(t, 1) : t);
    }
    const int64_t self_rank = inputs[0].to_tensor().dim() - (in_dims[0] ? 1 : 0);
    args[1] = IValue(wrap_dim(inputs[1].to_int(), self_rank, op) + 1);
    Tensor out = ops.call(op, std::move(args)).at(0).to_tensor();
    if (out.dim() != static_cast<int64_t>(result_shape.size())) out = ops.view(out, result_shape);
    return {Stack{out}, {int64_t{0}}};
  };
}

// index_select: a batched index becomes gather's index (each sample's positions along dim,
// expanded over the other dims of self).
VmapResult index_select_vmap(const Ops& ops, const VmapInfo& info, const Stack& inputs, const InDims& in_dims) {
  Tensor self = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
  const bool scalar = self.dim() == 1;  // a 0-d self selects from its one element
  if (scalar) self = ops.unsqueeze(self, 1);
  const int64_t dim = wrap_dim(inputs[1].to_int(), scalar ? 0 : self.dim() - 1, kIndexSelect) + 1;
  Tensor out;
  if (!in_dims[2]) {
    out = ops.tensor(kIndexSelect, {self, IValue(dim), inputs[2]});
  } else {
    Tensor index = move_batch_dim(inputs[2].to_tensor(), in_dims[2], 0, info.batch_size);
    if (index.dim() == 1) index = ops.unsqueeze(index, 1);  // [B, k]
    Sizes along(self.dim(), 1), sizes = to_sizes(self.sizes());
    along[0] = info.batch_size;
    along[dim] = sizes[dim] = index.size(1);
    const Tensor positions = ops.expand(ops.view(ops.to(index, DType::Int64), along), sizes);
    out = ops.tensor(kGather, {self, IValue(dim), positions});
  }
  if (scalar) out = ops.view(out, {info.batch_size});
  return {Stack{out}, {int64_t{0}}};
}

// select_scatter / slice_scatter: self and src batched at dim 0, dim past the batch.
VmapRule scatter_slice_vmap_rule(Registry& registry, std::string op) {
  return [ops = Ops(registry), op](const VmapInfo& info, const Stack& inputs, const InDims& in_dims) -> VmapResult {
    Stack args = inputs;
    for (size_t p : {0, 1}) args[p] = IValue(move_batch_dim(inputs[p].to_tensor(), in_dims[p], 0, info.batch_size));
    args[2] = IValue(wrap_dim(inputs[2].to_int(), inputs[0].to_tensor().dim() - (in_dims[0] ? 1 : 0), op) + 1);
    return {Stack{ops.call(op, std::move(args)).at(0)}, {int64_t{0}}};
  };
}

// ================================================================================================
// Sample builders (the run makes floating tensors require grad: GenerateSpec::requires_grad)
// ================================================================================================

int64_t wrapped(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

// self, dim and the shapes of index (and src) that gather / scatter accept: index no larger than
// self in every dim but `dim`, src no smaller than index. An empty dim of self forces an empty
// index (no position is valid); sometimes the index is empty anyway.
struct DimSample {
  Sizes self, index, src;
  int64_t dim = 0;
  int64_t dim_size() const { return nonempty(self)[wrapped(dim, nonempty(self).size())]; }
};

DimSample draw_dim_sample(SampleDraw& draw, bool with_src) {
  DimSample s;
  s.self = draw.shape(0, 3);
  const Sizes self_n = nonempty(s.self);
  const int64_t rank = static_cast<int64_t>(self_n.size());
  s.dim = draw_dim(draw, rank);
  const int64_t d0 = wrapped(s.dim, rank);
  Sizes index_n(rank);
  for (int64_t d = 0; d < rank; ++d) {
    index_n[d] = d == d0 ? draw.integer(1, 4) : draw.integer(std::min<int64_t>(1, self_n[d]), self_n[d]);
  }
  if (self_n[d0] == 0 || draw.coin(8)) index_n[d0] = 0;
  s.index = rank == 1 && index_n[0] == 1 && draw.coin(25) ? Sizes{} : index_n;
  if (with_src) {
    Sizes src_n = index_n;
    for (auto& n : src_n) n += draw.coin(25) ? draw.integer(1, 2) : 0;
    s.src = rank == 1 && src_n[0] == 1 && draw.coin(25) ? Sizes{} : src_n;
  }
  return s;
}

Tensor draw_index(SampleDraw& draw, const DimSample& s) { return draw.index_tensor(s.index, 0, s.dim_size() - 1); }

Stack gather_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const DimSample s = draw_dim_sample(draw, false);
  Tensor self = draw.tensor(s.self, dtype);
  return {self, IValue(s.dim), draw_index(draw, s), IValue(false)};
}

Stack scatter_src_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const DimSample s = draw_dim_sample(draw, true);
  Tensor self = draw.tensor(s.self, dtype);
  Tensor index = draw_index(draw, s);
  return {self, IValue(s.dim), index, draw.tensor(s.src, dtype)};
}

Scalar draw_scalar(SampleDraw& draw, DType dtype) {
  if (dtype == DType::Bool) return Scalar(draw.coin(50));
  if (is_integral(dtype)) return Scalar(draw.integer(dtype == DType::UInt8 ? 0 : -10, 10));
  return Scalar(draw.real(-10, 10));
}

Stack scatter_value_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const DimSample s = draw_dim_sample(draw, false);
  Tensor self = draw.tensor(s.self, dtype);
  Tensor index = draw_index(draw, s);
  return {self, IValue(s.dim), index, IValue(draw_scalar(draw, dtype))};
}

Stack scatter_reduce_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  std::vector<std::string> reductions = {"sum", "prod"};
  if (dtype != DType::Bool) reductions.push_back("mean");
  if (!is_complex(dtype)) reductions.insert(reductions.end(), {"amax", "amin"});
  const std::string reduce = reductions[draw.integer(0, static_cast<int64_t>(reductions.size()) - 1)];
  const DimSample s = draw_dim_sample(draw, true);
  Tensor self = draw.tensor(s.self, dtype);
  Tensor index = draw_index(draw, s);
  return {self, IValue(s.dim), index, draw.tensor(s.src, dtype), IValue(reduce), IValue(draw.coin(50))};
}

Stack index_select_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const Sizes shape = draw.shape(0, 3);
  const Sizes self_n = nonempty(shape);
  const int64_t rank = static_cast<int64_t>(self_n.size());
  const int64_t dim = draw_dim(draw, rank);
  const int64_t size = self_n[wrapped(dim, rank)];
  int64_t length = shape.empty() ? 1 : draw.coin(8) || size == 0 ? 0 : draw.integer(1, 5);
  Tensor index = draw.index_tensor(length == 1 && draw.coin(25) ? Sizes{} : Sizes{length}, 0, size - 1);
  if (draw.coin(25)) index = index.to(DType::Int32);
  return {draw.tensor(shape, dtype), IValue(dim), index};
}

// self and a list of indices: None, int64/int32 index tensors of one broadcastable shape with
// negative values too, and at most one bool mask (with it, the index tensors are 0-d or [1]: a
// mask's count is data-dependent). Indexed dims need not be adjacent.
std::pair<Tensor, IndexList> draw_index_sample(SampleDraw& draw, DType dtype) {
  const Sizes shape = draw.shape(1, 4);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t entries = draw.integer(1, rank);
  const int64_t mask_at = draw.coin(30) ? draw.integer(0, entries - 1) : -1;
  const Sizes base = mask_at >= 0 ? (draw.coin(50) ? Sizes{} : Sizes{1}) : draw.shape(0, 2, 1);
  IndexList list;
  int64_t d = 0;
  for (int64_t e = 0; e < entries; ++e) {
    if (e == mask_at) {
      const int64_t k = draw.integer(1, std::min<int64_t>(2, rank - d - (entries - e - 1)));
      list.emplace_back(draw.tensor(Sizes(shape.begin() + d, shape.begin() + d + k), DType::Bool));
      d += k;
      continue;
    }
    if (shape[d] == 0 || draw.coin(30)) {  // None (an empty dim has no position to index)
      list.emplace_back();
      ++d;
      continue;
    }
    Sizes sizes = base;
    for (auto& s : sizes) s = draw.coin(25) ? 1 : s;
    if (!sizes.empty() && draw.coin(20)) sizes.erase(sizes.begin());
    Tensor index = draw.index_tensor(sizes, -shape[d], shape[d] - 1);
    if (draw.coin(20)) index = index.to(DType::Int32);
    list.emplace_back(index);
    ++d;
  }
  if (std::none_of(list.begin(), list.end(), [](const auto& i) { return i.has_value(); })) {
    list[0] = shape[0] == 0 ? draw.tensor({0}, DType::Bool) : draw.index_tensor({}, -shape[0], shape[0] - 1);
  }
  return {draw.tensor(shape, dtype), list};
}

Stack index_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  auto [self, indices] = draw_index_sample(draw, dtype);
  return {self, IValue(indices)};
}

Stack index_put_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  auto [self, indices] = draw_index_sample(draw, dtype);
  // values broadcast to self[indices]: leading dims dropped, some dims of size 1.
  Sizes sizes = expect_ints(plan_indexing(kIndexPut, self, indices, false).result);
  while (!sizes.empty() && draw.coin(25)) sizes.erase(sizes.begin());
  for (auto& s : sizes) s = draw.coin(20) ? 1 : s;
  return {self, IValue(indices), draw.tensor(sizes, dtype), IValue(draw.coin(50))};
}

Stack select_scatter_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  Sizes shape = draw.shape(1, 4);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t dim = draw_dim(draw, rank), d0 = wrapped(dim, rank);
  shape[d0] = std::max<int64_t>(shape[d0], 1);  // a position to select
  const int64_t index = draw.integer(-shape[d0], shape[d0] - 1);
  Sizes src = shape;
  src.erase(src.begin() + d0);
  Tensor self = draw.tensor(shape, dtype);
  return {self, draw.tensor(src, dtype), IValue(dim), IValue(index)};
}

Stack slice_scatter_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const Sizes shape = draw.shape(1, 4);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t dim = draw_dim(draw, rank), n = shape[wrapped(dim, rank)];
  // Bounds past either end and negative ones too: slice clamps them.
  auto bound = [&]() { return draw.coin(30) ? std::optional<int64_t>() : std::optional<int64_t>(draw.integer(-n - 2, n + 2)); };
  const std::optional<int64_t> start = bound(), end = bound();
  const int64_t step = draw.integer(1, 3);
  Tensor self = draw.tensor(shape, dtype);
  const Sizes src = to_sizes(self.slice(dim, start, end, step).sizes());
  return {self, draw.tensor(src, dtype), IValue(dim), IValue(start), IValue(end), IValue(step)};
}

Stack masked_scatter_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const Sizes full = draw.shape(0, 3);
  // One of self and mask has the broadcast shape, the other drops leading dims or has size-1 dims.
  Sizes part = full;
  while (!part.empty() && draw.coin(25)) part.erase(part.begin());
  for (auto& s : part) s = draw.coin(25) ? 1 : s;
  const bool mask_is_part = draw.coin(50);
  Tensor mask = draw.tensor(mask_is_part ? part : full, DType::Bool);
  const auto flags = mask.expand(full).to_vector<int64_t>();
  const int64_t count = std::count_if(flags.begin(), flags.end(), [](int64_t f) { return f != 0; });
  const int64_t length = count + draw.integer(0, 3);
  Tensor self = draw.tensor(mask_is_part ? full : part, dtype);
  Tensor source = draw.tensor(length == 1 && draw.coin(25) ? Sizes{} : Sizes{length}, dtype);
  return {self, mask, source};
}

Tensor draw_rows(SampleDraw& draw, const Sizes& sizes, int64_t rows) {
  Tensor indices = draw.index_tensor(sizes, 0, rows - 1);
  return draw.coin(25) ? indices.to(DType::Int32) : indices;
}

// A padding_idx of none (-1), or one of the rows.
int64_t draw_padding(SampleDraw& draw, int64_t rows) { return draw.coin(50) ? -1 : draw.integer(0, rows - 1); }

// embedding's gradient is by definition not its derivative where padding_idx or
// scale_grad_by_freq act (no gradient for the padding row; a row's gradient divided by its uses),
// which gradcheck rightly flags; so its samples take a padding row no index uses, and
// scale_grad_by_freq only when no row is used twice. (embedding_dense_backward takes any.)
Stack embedding_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const int64_t rows = draw.integer(1, 5), width = draw.coin(8) ? 0 : draw.integer(1, 4);
  Tensor indices = draw_rows(draw, draw.shape(0, 3), rows);
  const auto used = indices.to_vector<int64_t>();
  std::vector<int64_t> unused{-1};
  for (int64_t r = 0; r < rows; ++r) {
    if (std::find(used.begin(), used.end(), r) == used.end()) unused.push_back(r);
  }
  const int64_t padding = unused[draw.integer(0, static_cast<int64_t>(unused.size()) - 1)];
  const bool repeats = static_cast<int64_t>(used.size()) > rows - static_cast<int64_t>(unused.size()) + 1;
  const bool scale = !repeats && draw.coin(50);
  return {draw.tensor({rows, width}, dtype), indices, IValue(padding), IValue(scale), IValue(false)};
}

Stack embedding_backward_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const int64_t rows = draw.integer(1, 5), width = draw.coin(8) ? 0 : draw.integer(1, 4);
  Sizes sizes = draw.shape(0, 3);
  Tensor indices = draw_rows(draw, sizes, rows);
  sizes.push_back(width);
  Tensor grad_output = draw.tensor(sizes, dtype);
  return {grad_output, indices, IValue(rows), IValue(draw_padding(draw, rows)), IValue(draw.coin(50))};
}


// gather / scatter along a dim.
void register_gather_scatter(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder(lib, "aten::gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", kFamily,
            "out[i][j] = self[index[i][j]][j] for dim 0 (index int64, no negative values; sparse_grad ignored: the "
            "gradient is dense)")
      .cpu(gather_cpu)
      .fake(gather_fake)
      .autograd(with_ops(r, gather_backward), save_dim_op(kGather))
      .vmap(dim_op_vmap_rule(r, kGather, {0, 2}, 2))
      .dtypes(kAll)
      .samples(gather_sample);
  OpBuilder(lib, "aten::scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", kFamily,
            "a copy of self with out[index[i][j]][j] = src[i][j] for dim 0; of duplicate positions the last one in "
            "row-major order of index wins (PyTorch leaves it unspecified)")
      .cpu(scatter_src_cpu)
      .fake([](const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
        check_scatter(kScatterSrc, self, dim, index, &src);
        if (any_symbolic_tensor({&self, &index, &src})) return sym_empty(self.sym_sizes(), self);
        return empty_like(self);
      })
      .autograd(with_ops(r, scatter_src_backward), save_dim_op(kScatterSrc))
      .vmap(dim_op_vmap_rule(r, kScatterSrc, {0, 2, 3}, 0))
      .dtypes(kAll)
      .samples(scatter_src_sample);
  OpBuilder(lib, "aten::scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", kFamily,
            "a copy of self with value written at the positions index names along dim")
      .cpu(scatter_value_cpu)
      .fake([](const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
        check_scatter(kScatterValue, self, dim, index, nullptr);
        check_scatter_value(self, value);
        if (any_symbolic_tensor({&self, &index})) return sym_empty(self.sym_sizes(), self);
        return empty_like(self);
      })
      .autograd(with_ops(r, scatter_value_backward), save_dim_op(kScatterValue))
      .vmap(dim_op_vmap_rule(r, kScatterValue, {0, 2}, 0))
      .dtypes(kAll)
      .samples(scatter_value_sample);
  OpBuilder(lib, "aten::scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", kFamily,
            "a copy of self with src added at the positions index names along dim (summed in the wide type)")
      .cpu(scatter_add_cpu)
      .fake([](const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
        check_scatter(kScatterAdd, self, dim, index, &src);
        if (any_symbolic_tensor({&self, &index, &src})) return sym_empty(self.sym_sizes(), self);
        return empty_like(self);
      })
      .autograd(with_ops(r, scatter_add_backward), save_dim_op(kScatterAdd))
      .vmap(dim_op_vmap_rule(r, kScatterAdd, {0, 2, 3}, 0))
      .dtypes(kAll)
      .samples(scatter_src_sample);
  OpBuilder(lib,
            "aten::scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool "
            "include_self=True) -> Tensor",
            kFamily,
            "src reduced (sum, prod, mean, amax, amin) into a copy of self along dim, in the wide type; mean of "
            "integers sums in self's dtype (wrapping, as PyTorch) and divides with floor")
      .cpu(scatter_reduce_cpu)
      .fake([](const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
               bool) {
        check_reduce_dtype(parse_reduce(reduce), reduce, self.dtype());
        check_scatter(kScatterReduce, self, dim, index, &src);
        if (any_symbolic_tensor({&self, &index, &src})) return sym_empty(self.sym_sizes(), self);
        return empty_like(self);
      })
      .autograd(with_ops(r, scatter_reduce_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack& out) {
                  save_dim_op(kScatterReduce)(ctx, in, out);
                  ctx.set("reduce", in[4]);
                  ctx.set("include_self", in[5]);
                })
      .vmap(dim_op_vmap_rule(r, kScatterReduce, {0, 2, 3}, 0))
      .dtypes(kAll)
      .samples(scatter_reduce_sample);
}

// index_select and advanced indexing.
void register_index_select(Library& lib) {
  Registry& r = lib.registry();
  const Ops ops(r);
  OpBuilder(lib, "aten::index_select(Tensor self, int dim, Tensor index) -> Tensor", kFamily,
            "the slices of self along dim at the positions of a 1-d (or 0-d) int64/int32 index, no negative values")
      .cpu(index_select_cpu)
      .fake(index_select_fake)
      .autograd(with_ops(r, index_select_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  const Tensor& self = in[0].to_tensor();
                  ctx.set("self_sizes", IValue(to_sizes(self.sizes())));
                  ctx.set("dim", IValue(wrap_dim(in[1].to_int(), self.dim(), kIndexSelect)));
                  ctx.save_for_backward({in[2].to_tensor()});
                })
      .vmap([ops](const VmapInfo& info, const Stack& inputs, const InDims& in_dims) {
        return index_select_vmap(ops, info, inputs, in_dims);
      })
      .dtypes(kAll)
      .samples(index_select_sample);
  OpBuilder(lib, "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", kFamily,
            "advanced indexing self[indices]: int64/int32 index tensors (negative values count from the end) and "
            "bool masks, broadcast together; non-adjacent indexed dims go first in the result")
      .cpu(index_cpu)
      .fake(index_fake)
      .autograd(with_ops(r, index_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("self_sizes", IValue(to_sizes(in[0].to_tensor().sizes())));
                  ctx.set("indices", in[1]);
                })
      .dtypes(kAll)
      .samples(index_sample);
  OpBuilder(lib, "aten::index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
            kFamily,
            "a copy of self (self's strides when dense) with values written (or added, accumulate) at self[indices]; "
            "without accumulate the last duplicate in row-major order wins (PyTorch leaves it unspecified)")
      .cpu(index_put_cpu)
      .fake(index_put_fake)
      .autograd(with_ops(r, index_put_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("self_sizes", IValue(to_sizes(in[0].to_tensor().sizes())));
                  ctx.set("indices", in[1]);
                  ctx.set("values_sizes", IValue(to_sizes(in[2].to_tensor().sizes())));
                  ctx.set("accumulate", in[3]);
                })
      .dtypes(kAll)
      .samples(index_put_sample);
}

// select_scatter / slice_scatter / masked_scatter.
void register_scatters(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder(lib, "aten::select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor", kFamily,
            "a copy of self (same strides and storage offset) with self.select(dim, index) replaced by src")
      .cpu(select_scatter_impl)
      .fake(select_scatter_impl)
      .autograd(with_ops(r, select_scatter_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("src_sizes", IValue(to_sizes(in[1].to_tensor().sizes())));
                  ctx.set("dim", in[2]);
                  ctx.set("index", in[3]);
                })
      .vmap(scatter_slice_vmap_rule(r, kSelectScatter))
      .dtypes(kAll)
      .samples(select_scatter_sample);
  OpBuilder(lib,
            "aten::slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt "
            "step=1) -> Tensor",
            kFamily, "a copy of self (same strides and storage offset) with self.slice(dim, start, end, step) replaced by src")
      .cpu(slice_scatter_impl)
      .fake(slice_scatter_impl)
      .autograd(with_ops(r, slice_scatter_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("src_sizes", IValue(to_sizes(in[1].to_tensor().sizes())));
                  ctx.set("dim", in[2]);
                  ctx.set("start", in[3]);
                  ctx.set("end", in[4]);
                  ctx.set("step", in[5]);
                })
      .vmap(scatter_slice_vmap_rule(r, kSliceScatter))
      .dtypes(kAll)
      .samples(slice_scatter_sample);
  OpBuilder(lib, "aten::masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", kFamily,
            "self broadcast with mask, its masked elements replaced by source's first elements in row-major order")
      .cpu(masked_scatter_cpu)
      .fake(masked_scatter_fake)
      .autograd(with_ops(r, masked_scatter_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("self_sizes", IValue(to_sizes(in[0].to_tensor().sizes())));
                  ctx.set("source_sizes", IValue(to_sizes(in[2].to_tensor().sizes())));
                  ctx.save_for_backward({in[1].to_tensor()});
                })
      .dtypes(kAll)
      .samples(masked_scatter_sample);
}

// embedding.
void register_embedding(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder(lib,
            "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
            "bool sparse=False) -> Tensor",
            kFamily,
            "rows of a 2-d weight at int64/int32 indices (result indices.shape + [width]); padding_idx and "
            "scale_grad_by_freq act on the gradient; sparse ignored (the gradient is dense)")
      .cpu(embedding_cpu)
      .fake(embedding_fake)
      .autograd(with_ops(r, embedding_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("num_weights", IValue(in[0].to_tensor().size(0)));
                  ctx.set("padding_idx", in[2]);
                  ctx.set("scale_grad_by_freq", in[3]);
                  ctx.save_for_backward({in[1].to_tensor()});
                })
      .dtypes(kAll)
      .samples(embedding_sample);
  OpBuilder(lib,
            "aten::embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt "
            "padding_idx, bool scale_grad_by_freq) -> Tensor",
            kFamily,
            "embedding's weight gradient: grad rows summed per index (not at padding_idx; divided by the row's uses "
            "with scale_grad_by_freq), in the wide type")
      .cpu(embedding_backward_cpu)
      .fake(embedding_backward_fake)
      .autograd(with_ops(r, embedding_dense_backward_backward),
                [](AutogradContext& ctx, const Stack& in, const Stack&) {
                  ctx.set("grad_sizes", IValue(to_sizes(in[0].to_tensor().sizes())));
                  ctx.set("num_weights", in[2]);
                  ctx.set("padding_idx", in[3]);
                  ctx.set("scale_grad_by_freq", in[4]);
                  ctx.save_for_backward({in[1].to_tensor()});
                })
      .dtypes(kFloatingAndComplex)
      .samples(embedding_backward_sample);
}

}  // namespace

void register_indexing(Library& lib) {
  register_gather_scatter(lib);
  register_index_select(lib);
  register_scatters(lib);
  register_embedding(lib);
}

}  // namespace opconform::reference
