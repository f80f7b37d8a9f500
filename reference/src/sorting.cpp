// Sorting and selection: sort, topk, nonzero.
//
// sort and topk order each lane along a dim with a stable sort in the wide type, NaN counting as
// larger than every number (PyTorch's rule). The reference always sorts stably, so equal values
// keep their input order: ascending and descending alike list the lower index first, and topk
// (which always returns its values sorted, whatever `sorted` says) prefers the lower index among
// ties. PyTorch promises neither for stable=False / sorted=False; the conformance checks compare
// the reference only with itself. Formulas send each value's gradient back to the index it came
// from through a one-hot mask built with registry ops (differentiable again).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "opconform/core/detail/strided_loop.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;

using Grads = std::vector<Tensor>;

// Strict order with NaN above every number (and NaNs equal among themselves).
template <typename W>
bool before(W a, W b, bool descending) {
  if (descending) return (is_nan(a) && !is_nan(b)) || (!is_nan(a) && !is_nan(b) && a > b);
  return (!is_nan(a) && is_nan(b)) || (!is_nan(a) && !is_nan(b) && a < b);
}

// The positions of the first `count` elements of a lane in sorted order (stable).
template <typename W>
std::vector<int64_t> sorted_positions(const std::vector<W>& lane, bool descending, int64_t count) {
  std::vector<int64_t> order(lane.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return before(lane[a], lane[b], descending); });
  order.resize(static_cast<size_t>(count));
  return order;
}

// For each lane of `self` along dim d (a 0-d tensor is one lane of one element), writes the
// lane's elements at the positions `pick(lane)` returns, and those positions, into the lanes
// of `values` and `indices` (same rank as self, any strides; dim d may be shorter).
template <typename W, typename Pick>
void select_along(const Tensor& self, int64_t d, const Tensor& values, const Tensor& indices, Pick pick) {
  auto as_lanes = [](const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; };
  const Tensor in = as_lanes(self.to(dtype_of_v<W>));
  const Tensor out_values = as_lanes(values), out_indices = as_lanes(indices);
  if (in.numel() == 0 || out_values.numel() == 0) return;
  std::vector<int64_t> lanes(in.sizes().begin(), in.sizes().end());
  const int64_t n = lanes[d];
  lanes[d] = 1;
  const W* src = in.template const_data_ptr<W>();
  W* dst = out_values.template mutable_data_ptr<W>();
  int64_t* positions = out_indices.template mutable_data_ptr<int64_t>();
  std::vector<W> lane(static_cast<size_t>(n));
  opconform::detail::strided_loop<3>(lanes, {in.strides(), out_values.strides(), out_indices.strides()},
                                     [&](const std::array<int64_t, 3>& at) {
                                       for (int64_t k = 0; k < n; ++k) lane[k] = src[at[0] + k * in.stride(d)];
                                       const std::vector<int64_t> picked = pick(lane);
                                       for (size_t k = 0; k < picked.size(); ++k) {
                                         dst[at[1] + k * out_values.stride(d)] = lane[picked[k]];
                                         positions[at[2] + k * out_indices.stride(d)] = picked[k];
                                       }
                                     });
}

// sort's outputs take the input's (symbolic) strides when it is dense, else dense strides in its
// memory order (PyTorch's sort.stable meta function: infer_dense_strides), over its sizes.
std::vector<SymInt> sort_strides(const Tensor& self) {
  if (self.is_non_overlapping_and_dense()) return self.sym_strides();
  const std::vector<int64_t> memory_order = elementwise_strides(self.sizes(), {self});
  return dense_strides<SymInt>(self.sym_sizes(), layout_order(self.sizes(), memory_order));
}

// The size of the lane along d (1 for a 0-d tensor).
int64_t lane_size(const Tensor& self, int64_t d) { return self.dim() == 0 ? 1 : self.size(d); }

void check_sortable(std::string_view op, DType d) {
  if (is_complex(d)) unsupported_dtype(op, d);
}

std::tuple<Tensor, Tensor> sort_kernel(std::string_view op, const Tensor& self, int64_t dim, bool descending) {
  const int64_t d = wrap_dim(dim, self.dim(), op);
  check_sortable(op, self.dtype());
  const std::vector<SymInt> sizes = self.sym_sizes(), strides = sort_strides(self);
  return visit_wide<Domain::Real>(op, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    Tensor values = empty_strided(sizes, strides, TensorOptions(dtype_of_v<W>));
    Tensor indices = empty_strided(sizes, strides, TensorOptions(DType::Int64));
    select_along<W>(self, d, values, indices, [&](const std::vector<W>& lane) {
      return sorted_positions(lane, descending, static_cast<int64_t>(lane.size()));
    });
    return std::make_tuple(values.to(self.dtype(), self.device()), indices.to(self.device()));
  });
}

// topk's outputs are contiguous, dim d of size k (a guard that k fits a symbolic lane).
std::vector<SymInt> topk_shape(std::string_view op, const Tensor& self, int64_t k, int64_t d) {
  std::vector<SymInt> shape = self.sym_sizes();
  const SymInt lane = shape.empty() ? SymInt(1) : shape[static_cast<size_t>(d)];
  OPCONFORM_CHECK(k >= 0 && lane >= k, ErrorCode::kInvalidArgument, op, ": argument 'k' (", k,
                  ") is out of range for dimension ", d, " of size ", lane);
  if (!shape.empty()) shape[static_cast<size_t>(d)] = k;
  return shape;
}

std::tuple<Tensor, Tensor> topk_kernel(std::string_view op, const Tensor& self, int64_t k, int64_t dim, bool largest) {
  const int64_t d = wrap_dim(dim, self.dim(), op);
  check_sortable(op, self.dtype());
  const auto shape = topk_shape(op, self, k, d);
  return visit_wide<Domain::Real>(op, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    Tensor values = empty(shape, TensorOptions(dtype_of_v<W>));
    Tensor indices = empty(shape, TensorOptions(DType::Int64));
    // A 0-d input gives itself whatever k (0 or 1), as PyTorch's kernel.
    const int64_t count = self.dim() == 0 ? 1 : k;
    select_along<W>(self, d, values, indices, [&](const std::vector<W>& lane) { return sorted_positions(lane, largest, count); });
    return std::make_tuple(values.to(self.dtype(), self.device()), indices.to(self.device()));
  });
}

// [N, rank] int64, one row per non-zero element (NaN counts as non-zero), in row-major order.
Tensor nonzero_kernel(std::string_view op, const Tensor& self) {
  return visit_wide<Domain::All>(op, self.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const Tensor wide = self.to(dtype_of_v<W>);
    std::vector<int64_t> rows;
    int64_t count = 0;
    if (wide.numel() > 0) {
      const W* data = wide.template const_data_ptr<W>();
      std::vector<int64_t> index(static_cast<size_t>(self.dim()), 0);
      opconform::detail::strided_loop<1>(wide.sizes(), {wide.strides()}, [&](const std::array<int64_t, 1>& at) {
        if (data[at[0]] != W(0)) {
          rows.insert(rows.end(), index.begin(), index.end());
          ++count;
        }
        // The next row-major index.
        for (int64_t d = self.dim() - 1; d >= 0; --d) {
          if (++index[d] < self.size(d)) break;
          index[d] = 0;
        }
      });
    }
    return from_vector<int64_t>(rows, {count, self.dim()}).to(self.device());
  });
}

// ---- formulas ----

// The gradient of values picked along dim d of an input of `sizes` (index[.., k, ..] is where
// value k came from): mask[.., k, j, ..] = (index[.., k, ..] == j) selects g[.., k, ..] for input
// position j; summing over k gives the input's gradient (zero where nothing was picked).
Tensor scatter_back(const Ops& ops, const Tensor& g, const Tensor& index, int64_t d, const std::vector<int64_t>& sizes) {
  if (sizes.empty()) return g;  // 0-d: the one value is the input
  // The positions 0..n-1 come from aten::arange (a registry op), so a captured backward makes them.
  const Tensor lifted = ops.unsqueeze(index, d + 1);
  std::vector<int64_t> positions_shape(static_cast<size_t>(lifted.dim()), 1);
  positions_shape[static_cast<size_t>(d + 1)] = sizes[static_cast<size_t>(d)];
  const Tensor positions = ops.view(ops.arange(sizes[static_cast<size_t>(d)], index.device()), positions_shape);
  const Tensor mask = ops.tensor("aten::eq.Tensor", {positions, lifted});
  Tensor picked = ops.where(mask, ops.unsqueeze(g, d + 1), ops.scalar_like(0, g));
  return ops.sum_dims(picked, {d}, /*keepdim=*/false);
}

// sort / topk: (values, indices) outputs; the gradient of values goes back through indices.
autograd::BackwardFn picked_values_backward(const Ops& ops) {
  return [ops](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
    auto saved = ctx.saved_tensors();  // [self, values, indices]
    const Tensor& self = saved[0];
    const int64_t d = wrap_dim(ctx.get("dim").to_int(), self.dim(), "backward");
    std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
    return self_gradient(ctx, scatter_back(ops, g[0], saved[2], d, sizes));
  };
}

autograd::SetupContextFn remember_dim(size_t dim_arg) {
  return [dim_arg](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
    ctx.set("dim", inputs[dim_arg]);
    save_argument_count(ctx, inputs);
    save_inputs_and_outputs(ctx, inputs, outputs);
    ctx.mark_non_differentiable({outputs[1].to_tensor()});
  };
}

// ---- samples ----

}  // namespace

void register_sorting(Library& lib) {
  Registry& reg = lib.registry();
  const Ops ops(reg);
  const std::string fam = "sorting";
  const auto sortable = concat_dtypes(kReal, {DType::Bool});

  {
    OpBuilder b(lib, "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)", fam,
                "sorts along a dim (always stable; NaN largest); values and their int64 input indices");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, int64_t dim, bool descending) { return sort_kernel(name, self, dim, descending); })
        .fake([name](const Tensor& self, int64_t dim, bool) {
          wrap_dim(dim, self.dim(), name);
          check_sortable(name, self.dtype());
          const std::vector<SymInt> sizes = self.sym_sizes(), strides = sort_strides(self);
          return std::make_tuple(empty_strided(sizes, strides, self.options()),
                                 empty_strided(sizes, strides, TensorOptions(DType::Int64, self.device())));
        })
        .autograd(picked_values_backward(ops), remember_dim(1))
        .dtypes(sortable)
        .samples([](SampleDraw& draw) {
          Tensor self = draw_tie_free(draw, draw.shape(0, 4), draw.dtype());
          return Stack{IValue(self), IValue(draw_dim(draw, self.dim())), IValue(draw.coin())};
        });
  }
  {
    OpBuilder b(lib,
                "aten::topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
                fam, "the k largest (or smallest) values along a dim, always sorted, lower index first among ties");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, int64_t k, int64_t dim, bool largest, bool) {
       return topk_kernel(name, self, k, dim, largest);
     })
        .fake([name](const Tensor& self, int64_t k, int64_t dim, bool, bool) {
          const int64_t d = wrap_dim(dim, self.dim(), name);
          check_sortable(name, self.dtype());
          const auto shape = topk_shape(name, self, k, d);
          return std::make_tuple(empty(shape, self.options()), empty(shape, TensorOptions(DType::Int64, self.device())));
        })
        .autograd(picked_values_backward(ops), remember_dim(2))
        .dtypes(kReal)
        .samples([](SampleDraw& draw) {
          Tensor self = draw_tie_free(draw, draw.shape(0, 4), draw.dtype());
          const int64_t dim = draw_dim(draw, self.dim());
          const int64_t k = draw.integer(0, lane_size(self, wrap_dim(dim, self.dim(), "aten::topk")));
          return Stack{IValue(self), IValue(k), IValue(dim), IValue(!draw.coin(30)), IValue(!draw.coin(30))};
        });
  }
  {
    OpBuilder b(lib, "aten::nonzero(Tensor self) -> Tensor", fam,
                "indices of the non-zero elements, [N, rank] int64 in row-major order (N depends on the data)");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self) { return nonzero_kernel(name, self); })
        .fake([name](const Tensor& self) {
          visit_wide<Domain::All>(name, self.dtype(), [](auto) {});
          const SymInt rows = get_ctx().new_dynamic_size(0, std::max<int64_t>(self.numel(), 0));
          return make_fake_tensor({rows, SymInt(self.dim())}, DType::Int64, self.device());
        })
        .dtypes(kAll);
  }
}

}  // namespace opconform::reference
