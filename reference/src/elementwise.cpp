#include "opconform/reference/detail/elementwise.h"

#include "opconform/core/fake_tensor.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace opconform::reference::detail {

int dtype_category(DType d) {
  if (d == DType::Bool) return 0;
  if (is_integral(d)) return 1;
  if (is_floating(d)) return 2;
  return 3;
}

DType scalar_dtype(const Scalar& s) {
  if (s.is_bool()) return DType::Bool;
  if (s.is_integral()) return DType::Int64;
  if (s.is_floating()) return DType::Float32;
  return DType::Complex64;
}

namespace {

using Maybe = std::optional<DType>;

Maybe promote(Maybe a, DType b) { return a ? promote_types(*a, b) : b; }

// c10's combine_categories: a lower-priority group only matters when it brings a higher category.
Maybe combine(Maybe higher, Maybe lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_complex(*higher)) return higher;
  if (is_complex(*lower)) return is_floating(*higher) ? to_complex(*higher) : *lower;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(const std::vector<Tensor>& tensors, const std::vector<Scalar>& scalars) {
  Maybe dimensioned, zero_dim, wrapped;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    if (t.dim() > 0) dimensioned = promote(dimensioned, t.dtype());
    else zero_dim = promote(zero_dim, t.dtype());
  }
  for (const auto& s : scalars) wrapped = promote(wrapped, scalar_dtype(s));
  return combine(dimensioned, combine(zero_dim, wrapped)).value_or(DType::Float32);
}

DType to_floating(DType d) { return is_integral(d, /*include_bool=*/true) ? DType::Float32 : d; }

double max_finite(DType d) {
  switch (d) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 0x1.fep127;
    case DType::Float32:
    case DType::Complex64: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

std::pair<int64_t, int64_t> integer_range(DType d) {
  switch (d) {
    case DType::Bool: return {0, 1};
    case DType::UInt8: return {0, 255};
    case DType::Int8: return {-128, 127};
    case DType::Int16: return {-32768, 32767};
    case DType::Int32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

std::vector<int64_t> broadcast_all(std::string_view op, const std::vector<Tensor>& inputs) {
  std::vector<int64_t> shape;
  bool first = true;
  for (const auto& t : inputs) {
    if (!t.defined()) continue;
    if (first) {
      shape.assign(t.sizes().begin(), t.sizes().end());
      first = false;
      continue;
    }
    try {
      shape = broadcast_shapes(shape, t.sizes());
    } catch (const Error&) {
      throw Error(ErrorCode::kInvalidArgument,
                  opconform::detail::concat(op, ": the shapes ", shape_string(shape), " and ", shape_string(t.sizes()),
                                            " do not broadcast"));
    }
  }
  return shape;
}

namespace {

// The order of the output's dimensions, fastest-moving first: TensorIterator's, from the inputs'
// strides over the broadcast shape.
std::vector<int64_t> elementwise_perm(IntArrayRef shape, const std::vector<Tensor>& inputs) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  // Each input's strides over the broadcast shape (0 where it is broadcast), as TensorIterator.
  std::vector<std::vector<int64_t>> strides;
  for (const auto& t : inputs) {
    if (!t.defined()) continue;
    std::vector<int64_t> s(ndim, 0);
    const int64_t lead = ndim - t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) {
      const bool broadcast = t.size(d) == 1 && shape[lead + d] != 1;
      s[lead + d] = broadcast ? 0 : t.stride(d);
    }
    strides.push_back(std::move(s));
  }
  // perm[0] is the fastest-moving dim; start from row-major and sort by the inputs' strides.
  std::vector<int64_t> perm(ndim);
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (const auto& s : strides) {
      const int64_t s0 = s[d0], s1 = s[d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  for (int64_t i = 1; i < ndim; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

}  // namespace

std::vector<int64_t> elementwise_strides(IntArrayRef shape, const std::vector<Tensor>& inputs) {
  return dense_strides<int64_t>(shape, elementwise_perm(shape, inputs));
}

namespace {

// The output of fake inputs with symbolic sizes: each dimension takes the symbolic size of an
// input that is not broadcast there (a concrete 1 is), and the strides are dense in the same
// dimension order as the concrete rule picks, as expressions of those sizes. So a captured graph
// replays at other sizes (compile/).
Tensor symbolic_elementwise(const std::vector<int64_t>& shape, const std::vector<Tensor>& inputs, DType dtype,
                            Device device) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<SymInt> sizes(shape.begin(), shape.end());
  for (int64_t d = 0; d < ndim; ++d) {
    for (const auto& t : inputs) {
      if (!t.defined()) continue;
      const int64_t lead = ndim - t.dim();
      if (d < lead || t.size(d - lead) != shape[d]) continue;
      sizes[d] = t.sym_sizes()[d - lead];
      if (sizes[d].is_symbolic()) break;
    }
  }
  std::vector<SymInt> strides = dense_strides<SymInt>(sizes, elementwise_perm(shape, inputs));
  return make_fake_tensor(sizes, dtype, device, std::move(strides));
}

}  // namespace

Tensor empty_elementwise(const std::vector<Tensor>& inputs, DType dtype, std::string_view op) {
  std::vector<int64_t> shape = broadcast_all(op, inputs);
  Device device = Device::cpu();
  for (const auto& t : inputs) {
    if (t.defined() && t.dim() > 0) {
      device = t.device();
      break;
    }
    if (t.defined()) device = t.device();
  }
  for (const auto& t : inputs) {
    if (t.defined() && t.is_fake() && t.has_symbolic_sizes()) return symbolic_elementwise(shape, inputs, dtype, device);
  }
  return empty_strided(shape, elementwise_strides(shape, inputs), TensorOptions(dtype, device));
}

void unsupported_dtype(std::string_view op, DType d) {
  throw Error(ErrorCode::kNotImplemented, opconform::detail::concat(op, ": dtype ", name(d), " is not supported"));
}

Tensor wrapped_scalar(const Scalar& s, DType dtype) { return scalar_tensor(s, TensorOptions(dtype)); }

}  // namespace opconform::reference::detail
