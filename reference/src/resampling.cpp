// Resampling: ops whose every output element is a copy of one input element, chosen per spatial
// dim (Note [Separable index maps]):
//   - reflection_pad1d/2d/3d and replication_pad2d/3d: the last N dims of a (C, *spatial) or
//     (N, C, *spatial) input grow by `padding` (before/after pairs from the last dim backwards, as
//     constant_pad_nd's): reflection mirrors the input without repeating its edge ([a b c] padded
//     by 2 on the left: [c b a b c]), replication repeats the edge ([a a a b c]); negative pads crop;
//   - upsample_nearest2d.vec: each output position takes the input position floor(o * scale);
//   - upsample_bilinear2d.vec: each output interpolates the two nearest inputs per dim;
//   - _adaptive_avg_pool2d/3d (area resampling) and _adaptive_avg_pool2d_backward: each output is
//     the mean of a window per dim.
// The last two are separable linear maps rather than copies: their backward multiplies the
// gradient by each dim's [out, in] weights (linear_adjoint).
//
// Note [Separable index maps]: such an op is, per spatial dim k, a map from output index to input
// index (SpatialMap::sources). The CPU kernel copies through the maps; the backward adds each
// output's gradient back to its source, one dim at a time, by scatter_add with the map computed
// by registry ops from arange (so it runs on fake tensors and is differentiable again:
// scatter_add's gradient is a gather).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;
using SymInts = std::vector<SymInt>;

enum class PadMode { reflect, replicate };

// The input position output position `o` of one spatial dim reads (size: the input's).
int64_t pad_source(PadMode mode, int64_t o, int64_t before, int64_t size) {
  int64_t x = o - before;
  if (mode == PadMode::replicate) return std::clamp<int64_t>(x, 0, size - 1);
  if (x < 0) x = -x;
  if (x >= size) x = 2 * (size - 1) - x;
  return x;
}

// The output shape of a separable map (Note [Shape plans over SymInt]): the whole output's sizes
// and, per spatial dim in order, the input and output sizes.
struct SpatialShape {
  int64_t first_spatial = 0;  // the dim of the first spatial size
  SymInts in_sizes, out_sizes;
  SymInts sizes;  // the whole output's
};

// The same at concrete sizes, with the input index each output index reads: what the CPU kernels
// and the backward formulas loop over.
struct SpatialMap {
  int64_t first_spatial = 0;
  Ints in_sizes, out_sizes;
  std::vector<Ints> sources;  // sources[k][o]; index maps only
  Ints sizes;
  Ints before;  // padding only: the pad before, per spatial dim
};

// A shape's concrete sizes (an error on symbolic ones: a CPU kernel or a recorded backward).
SpatialMap at_concrete_sizes(const SpatialShape& shape) {
  return {shape.first_spatial, expect_ints(shape.in_sizes), expect_ints(shape.out_sizes), {}, expect_ints(shape.sizes), {}};
}

// Fills map.sources with source(k, o, in, out) for every output index o of spatial dim k.
template <typename Source>
void add_sources(SpatialMap& map, Source source) {
  for (size_t k = 0; k < map.in_sizes.size(); ++k) {
    Ints sources(static_cast<size_t>(map.out_sizes[k]));
    for (int64_t o = 0; o < map.out_sizes[k]; ++o) sources[static_cast<size_t>(o)] = source(k, o, map.in_sizes[k], map.out_sizes[k]);
    map.sources.push_back(std::move(sources));
  }
}

// A padding op's output shape and, per spatial dim, the pad before.
struct PadPlan {
  SpatialShape shape;
  Ints before;
};

PadPlan plan_padding(std::string_view op, PadMode mode, int64_t spatial, const SymInts& self, const Ints& padding) {
  OPCONFORM_CHECK(static_cast<int64_t>(padding.size()) == 2 * spatial, ErrorCode::kInvalidArgument, op,
                  ": padding size is expected to be ", 2 * spatial, ", got ", padding.size());
  const auto rank = static_cast<int64_t>(self.size());
  bool nonempty = rank == spatial + 1 || rank == spatial + 2;
  for (int64_t d = rank == spatial + 2 ? 1 : 0; nonempty && d < rank; ++d) nonempty = self[d] != 0;
  OPCONFORM_CHECK(nonempty, ErrorCode::kInvalidArgument, op, ": expected ", spatial + 1, "D or ", spatial + 2,
                  "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
                  sym_shape_string(self));
  PadPlan plan;
  SpatialShape& shape = plan.shape;
  shape.first_spatial = rank - spatial;
  shape.sizes = self;
  for (int64_t k = 0; k < spatial; ++k) {
    const int64_t d = shape.first_spatial + k;
    const SymInt& size = self[d];
    const int64_t before = padding[static_cast<size_t>(2 * (spatial - 1 - k))];
    const int64_t after = padding[static_cast<size_t>(2 * (spatial - 1 - k) + 1)];
    if (mode == PadMode::reflect) {
      OPCONFORM_CHECK(size > before && size > after, ErrorCode::kInvalidArgument, op,
                      ": padding size should be less than the corresponding input dimension, but got: padding (",
                      before, ", ", after, ") at dimension ", d, " of input ", sym_shape_string(self));
    }
    const SymInt out = size + before + after;
    OPCONFORM_CHECK(out >= 1, ErrorCode::kInvalidArgument, op, ": input (size ", size, " at dimension ", d,
                    ") is too small; calculated output size: ", out);
    plan.before.push_back(before), shape.in_sizes.push_back(size), shape.out_sizes.push_back(out);
    shape.sizes[static_cast<size_t>(d)] = out;
  }
  return plan;
}

// The map pad_source gives each output index.
SpatialMap pad_map(PadMode mode, const PadPlan& plan) {
  SpatialMap map = at_concrete_sizes(plan.shape);
  map.before = plan.before;
  add_sources(map, [&](size_t k, int64_t o, int64_t in, int64_t) { return pad_source(mode, o, plan.before[k], in); });
  return map;
}

// A new output of these sizes in self's suggested memory format (PyTorch's padding, upsampling
// and adaptive pooling kernels keep it): the CPU and fake kernels' output alike.
Tensor empty_resampled(const Tensor& self, const SymInts& sizes) {
  return empty_strided(sizes, format_strides(sizes, suggest_memory_format(self)), self.options());
}

// Copies each output element of `out` (a new tensor of plan.sizes) from its source: a data
// movement, the same for every dtype.
Tensor gather_spatial(const Tensor& self, const SpatialMap& plan, Tensor out) {
  const Tensor in = self.contiguous();
  Tensor dense = empty(plan.sizes, self.options());
  const int64_t spatial = static_cast<int64_t>(plan.in_sizes.size());
  int64_t in_inner = 1, out_inner = 1;
  for (int64_t k = 0; k < spatial; ++k) in_inner *= plan.in_sizes[k], out_inner *= plan.out_sizes[k];
  // The flat input position of each flat output position of the spatial block.
  std::vector<int64_t> source(static_cast<size_t>(out_inner));
  size_t o = 0;
  for_each_index(plan.out_sizes, [&](const Ints& at) {
    int64_t flat = 0;
    for (int64_t k = 0; k < spatial; ++k) flat = flat * plan.in_sizes[k] + plan.sources[k][static_cast<size_t>(at[k])];
    source[o++] = flat;
  });
  const size_t item = self.itemsize();
  const auto* from = static_cast<const char*>(in.const_data_ptr());
  auto* to = static_cast<char*>(dense.mutable_data_ptr());
  const int64_t leading = in_inner == 0 ? 0 : in.numel() / in_inner;
  for (int64_t l = 0; l < leading; ++l)
    for (int64_t i = 0; i < out_inner; ++i)
      std::memcpy(to + static_cast<size_t>(l * out_inner + i) * item,
                  from + static_cast<size_t>(l * in_inner + source[static_cast<size_t>(i)]) * item, item);
  out.copy_(dense);
  return out;
}

// The map of spatial dim k as an int64 tensor made by registry ops (Note [Separable index maps]).
using SourceIndex = std::function<Tensor(const Ops& ops, size_t k, Device device)>;

// The backward: each output position's gradient added to the input position it read, one spatial
// dim at a time (scatter_add along the dim).
Tensor scatter_back(const Ops& ops, const Tensor& grad, const SpatialMap& plan, const SourceIndex& source) {
  Tensor g = grad;
  for (size_t k = 0; k < plan.in_sizes.size(); ++k) {
    const int64_t d = plan.first_spatial + static_cast<int64_t>(k), size = plan.in_sizes[k];
    const Tensor x = source(ops, k, g.device());
    Ints shape(g.dim(), 1);
    shape[static_cast<size_t>(d)] = plan.out_sizes[k];
    const Ints sizes(g.sizes().begin(), g.sizes().end());
    const Tensor index = ops.expand(ops.view(x, shape), sizes);
    Ints into = sizes;
    into[static_cast<size_t>(d)] = size;
    g = ops.tensor("aten::scatter_add", {ops.full(into, Scalar(0.0), g), IValue(d), index, g});
  }
  return g;
}

// pad_source over arange, by registry ops.
SourceIndex pad_source_index(PadMode mode, const SpatialMap& plan) {
  return [mode, plan](const Ops& ops, size_t k, Device device) {
    const int64_t size = plan.in_sizes[k];
    Tensor x = ops.add(ops.arange(plan.out_sizes[k], device), Scalar(-plan.before[k]));
    if (mode == PadMode::replicate) return ops.tensor("aten::clamp", {x, IValue(Scalar(int64_t{0})), IValue(Scalar(size - 1))});
    x = ops.tensor("aten::abs", {x});
    const Tensor beyond = ops.tensor("aten::ge.Scalar", {x, Scalar(size)});
    return ops.where(beyond, ops.add(ops.neg(x), Scalar(2 * (size - 1))), x);
  };
}

// A sample: a (C, *spatial) or (N, C, *spatial) input of small sizes and pads that keep every
// output size >= 1 (and, reflecting, every pad below its input size).
Stack pad_sample(SampleDraw& draw, PadMode mode, int64_t spatial) {
  Ints shape;
  if (draw.coin()) shape.push_back(draw.coin(10) ? 0 : draw.integer(1, 3));  // the batch, possibly empty
  shape.push_back(draw.integer(1, 3));
  for (int64_t k = 0; k < spatial; ++k) shape.push_back(draw.integer(1, 5));
  Ints padding(static_cast<size_t>(2 * spatial));
  for (int64_t k = 0; k < spatial; ++k) {
    const int64_t size = shape[shape.size() - 1 - static_cast<size_t>(k)];
    const int64_t most = mode == PadMode::reflect ? size - 1 : 3;
    const int64_t before = draw.integer(-(size - 1), most);
    const int64_t after = draw.integer(std::max(-(size - 1), 1 - size - before), most);
    padding[static_cast<size_t>(2 * k)] = before, padding[static_cast<size_t>(2 * k + 1)] = after;
  }
  return Stack{IValue(draw.tensor(shape, draw.dtype())), IValue(padding)};
}

void register_pad(Library& lib, const std::string& fam, PadMode mode, int64_t spatial) {
  Registry& r = lib.registry();
  const std::string base = std::string(mode == PadMode::reflect ? "reflection_pad" : "replication_pad") +
                           std::to_string(spatial) + "d";
  const std::string schema = "aten::" + base + "(Tensor self, SymInt[" + std::to_string(2 * spatial) +
                             "] padding) -> Tensor";
  OpBuilder b(lib, schema, fam,
              std::string(mode == PadMode::reflect ? "the last " + std::to_string(spatial) +
                                                         " dims padded by their reflection (the edge not repeated)"
                                                   : "the last " + std::to_string(spatial) +
                                                         " dims padded by repeating the edge") +
                  "; negative pads crop");
  const std::string name = b.name();
  b.cpu([name, mode, spatial](const Tensor& self, Ints padding) {
     const PadPlan plan = plan_padding(name, mode, spatial, self.sym_sizes(), padding);
     return gather_spatial(self, pad_map(mode, plan), empty_resampled(self, plan.shape.sizes));
   })
      .fake([name, mode, spatial](const Tensor& self, Ints padding) {
        return empty_resampled(self, plan_padding(name, mode, spatial, self.sym_sizes(), padding).shape.sizes);
      })
      .dtypes(concat_dtypes(kReal, {DType::Complex64, DType::Complex128}));
  b.autograd(
      [name, mode, spatial, ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints sizes = ctx.get("sizes").to<Ints>(), padding = ctx.get("padding").to<Ints>();
        const SpatialMap map = pad_map(mode, plan_padding(name, mode, spatial, SymInts(sizes.begin(), sizes.end()), padding));
        return {scatter_back(ops, g[0], map, pad_source_index(mode, map)), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor self = inputs[0].to_tensor();
        ctx.set("sizes", IValue(Ints(self.sizes().begin(), self.sizes().end())));
        ctx.set("padding", inputs[1]);
      },
      /*double_backward=*/true);
  b.samples([mode, spatial](SampleDraw& draw) { return pad_sample(draw, mode, spatial); });
}

// ---- nearest upsampling ----

// PyTorch's compute_scales_value: the input step per output step, 1 / scale_factor when one was
// given, else in / out; nearest computes it in float (nearest_scale), bilinear in double.
float nearest_scale(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? static_cast<float>(1.0 / *scale) : static_cast<float>(in) / static_cast<float>(out);
}
double linear_ratio(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out);
}

// PyTorch's nearest_idx: the input index output index o reads, with the scale in float;
// out == in and out == 2 * in are exact.
int64_t nearest_source(int64_t o, int64_t in, int64_t out, std::optional<double> scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float s = nearest_scale(scale, in, out);
  return std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
}

struct NearestPlan {
  SpatialShape shape;
  std::vector<std::optional<double>> scales;  // per spatial dim: the scale_factor, if given
};

// The output size of `in` scaled by `factor` (PyTorch's compute_output_size: floor(in * factor)).
// A symbolic size keeps its symbol for an integral factor; another factor gives the size at the
// hint, which a captured graph bakes in (the samples draw integral factors only).
SymInt scaled_size(const SymInt& in, double factor) {
  if (in.is_symbolic() && factor == std::floor(factor)) return in * static_cast<int64_t>(factor);
  return static_cast<int64_t>(std::floor(static_cast<double>(concrete_stand_in(in)) * factor));
}

// upsample_nearest2d.vec's checks (PyTorch's upsample_2d_common_check and compute_output_size).
NearestPlan plan_nearest(std::string_view op, const SymInts& self, const std::optional<Ints>& output_size,
                         const std::optional<std::vector<double>>& scale_factors) {
  OPCONFORM_CHECK(output_size.has_value() != scale_factors.has_value(), ErrorCode::kInvalidArgument, op,
                  ": must specify exactly one of output_size and scale_factors");
  OPCONFORM_CHECK(!output_size || output_size->size() == 2, ErrorCode::kInvalidArgument, op,
                  ": argument 'output_size' must have 2 elements, got ", output_size ? output_size->size() : 0);
  OPCONFORM_CHECK(!scale_factors || scale_factors->size() == 2, ErrorCode::kInvalidArgument, op,
                  ": argument 'scale_factors' must have 2 elements, got ", scale_factors ? scale_factors->size() : 0);
  OPCONFORM_CHECK(self.size() == 4 && self[1] > 0 && self[2] > 0 && self[3] > 0, ErrorCode::kInvalidArgument, op,
                  ": non-empty 4D data tensor expected but got a tensor with sizes ", sym_shape_string(self));
  NearestPlan p;
  p.shape.first_spatial = 2;
  p.shape.sizes = self;
  for (size_t k = 0; k < 2; ++k) {
    const SymInt& in = self[2 + k];
    const SymInt out = output_size ? SymInt((*output_size)[k]) : scaled_size(in, (*scale_factors)[k]);
    OPCONFORM_CHECK(out > 0, ErrorCode::kInvalidArgument, op,
                    ": input and output sizes should be greater than 0, but got input (H: ", self[2], ", W: ", self[3],
                    ") and output size ", out, " in spatial dim ", k);
    p.scales.push_back(scale_factors ? std::optional<double>((*scale_factors)[k]) : std::nullopt);
    p.shape.in_sizes.push_back(in), p.shape.out_sizes.push_back(out);
    p.shape.sizes[2 + k] = out;
  }
  return p;
}

// The map nearest_source gives each output index.
SpatialMap nearest_map(const NearestPlan& p) {
  SpatialMap map = at_concrete_sizes(p.shape);
  add_sources(map, [&](size_t k, int64_t o, int64_t in, int64_t out) { return nearest_source(o, in, out, p.scales[k]); });
  return map;
}

// nearest_source over arange, by registry ops: o, o // 2, or floor(float(o) * scale) clamped.
SourceIndex nearest_source_index(const SpatialMap& map, const std::vector<std::optional<double>>& scales) {
  return [map, scales](const Ops& ops, size_t k, Device device) {
    const int64_t in = map.in_sizes[k], out = map.out_sizes[k];
    const Tensor o = ops.arange(out, device);
    if (out == in) return o;
    if (out == 2 * in) return ops.tensor("aten::div.Scalar_mode", {o, Scalar(int64_t{2}), IValue(std::string("floor"))});
    const float s = nearest_scale(scales[k], in, out);
    const Tensor scaled = ops.tensor("aten::floor", {ops.mul(ops.to(o, DType::Float32), Scalar(static_cast<double>(s)))});
    return ops.tensor("aten::clamp", {ops.to(scaled, DType::Int64), IValue(), IValue(Scalar(in - 1))});
  };
}

Stack nearest_sample(SampleDraw& draw) {
  Ints shape{draw.coin(10) ? 0 : draw.integer(1, 2), draw.integer(1, 3), draw.integer(1, 4), draw.integer(1, 4)};
  Tensor input = draw.tensor(shape, draw.dtype());
  if (draw.coin()) {
    return Stack{IValue(input), IValue(Ints{draw.integer(1, 7), draw.integer(1, 7)}), IValue()};
  }
  // Integral factors only: other factors give sizes a symbolic fake cannot follow (scaled_size).
  const std::vector<double> factors{static_cast<double>(draw.integer(1, 3)), static_cast<double>(draw.integer(1, 3))};
  return Stack{IValue(input), IValue(), IValue(factors)};
}

void register_upsample_nearest2d(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
              "upsampling", "the last 2 dims resized by repeating the nearest input element (floor(o * in / out))");
  const std::string name = b.name();
  using Sizes = std::optional<Ints>;
  using Factors = std::optional<std::vector<double>>;
  b.cpu([name](const Tensor& input, Sizes output_size, Factors scale_factors) {
     const NearestPlan p = plan_nearest(name, input.sym_sizes(), output_size, scale_factors);
     return gather_spatial(input, nearest_map(p), empty_resampled(input, p.shape.sizes));
   })
      .fake([name](const Tensor& input, Sizes output_size, Factors scale_factors) {
        return empty_resampled(input, plan_nearest(name, input.sym_sizes(), output_size, scale_factors).shape.sizes);
      })
      .dtypes({DType::UInt8, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64});
  b.autograd(
      [name, ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const IValue sizes = ctx.get("output_size"), factors = ctx.get("scale_factors");
        const Ints input_sizes = ctx.get("sizes").to<Ints>();
        const NearestPlan p = plan_nearest(name, SymInts(input_sizes.begin(), input_sizes.end()),
                                           sizes.is_none() ? Sizes() : Sizes(sizes.to<Ints>()),
                                           factors.is_none() ? Factors() : Factors(factors.to<std::vector<double>>()));
        const SpatialMap map = nearest_map(p);
        return {scatter_back(ops, g[0], map, nearest_source_index(map, p.scales)), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor input = inputs[0].to_tensor();
        ctx.set("sizes", IValue(Ints(input.sizes().begin(), input.sizes().end())));
        ctx.set("output_size", inputs[1]);
        ctx.set("scale_factors", inputs[2]);
      },
      /*double_backward=*/true);
  b.samples(nearest_sample);
}

// ---- area resampling: adaptive average pooling ----

// Output o of a spatial dim averages the inputs [floor(o * in / out), ceil((o + 1) * in / out)).
int64_t area_start(int64_t o, int64_t in, int64_t out) { return o * in / out; }
int64_t area_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

// _adaptive_avg_pool{2,3}d's checks (PyTorch's adaptive_avg_pool{2,3}d_out_cpu_template) and
// output shape; at_concrete_sizes gives the windows' geometry.
SpatialShape plan_area(std::string_view op, int64_t spatial, const SymInts& self, const SymInts& output_size) {
  OPCONFORM_CHECK(static_cast<int64_t>(output_size.size()) == spatial, ErrorCode::kInvalidArgument, op,
                  ": output_size must be ", spatial, " ints, got ", output_size.size());
  const auto rank = static_cast<int64_t>(self.size());
  OPCONFORM_CHECK(rank == spatial + 1 || rank == spatial + 2, ErrorCode::kInvalidArgument, op, ": expected ",
                  spatial + 1, "D or ", spatial + 2, "D tensor, but got ", sym_shape_string(self));
  for (int64_t d = rank - spatial - 1; d < rank; ++d)
    OPCONFORM_CHECK(self[d] > 0, ErrorCode::kInvalidArgument, op,
                    ": expected input to have non-zero size for non-batch dimensions, but input has sizes ",
                    sym_shape_string(self), " with dimension ", d, " being empty");
  SpatialShape p;
  p.first_spatial = rank - spatial;
  p.sizes = self;
  for (int64_t k = 0; k < spatial; ++k) {
    OPCONFORM_CHECK(output_size[k] >= 0, ErrorCode::kInvalidArgument, op,
                    ": elements of output_size must be greater than or equal to 0, got ", sym_shape_string(output_size));
    p.in_sizes.push_back(self[p.first_spatial + k]), p.out_sizes.push_back(output_size[k]);
    p.sizes[static_cast<size_t>(p.first_spatial + k)] = output_size[k];
  }
  return p;
}

// Calls f(flat input position, window size) for each input position in output `at`'s window.
template <typename F>
void for_each_in_window(const SpatialMap& p, const Ints& at, F&& f) {
  Ints start, extent;
  int64_t cells = 1;
  for (size_t k = 0; k < at.size(); ++k) {
    start.push_back(area_start(at[k], p.in_sizes[k], p.out_sizes[k]));
    extent.push_back(area_end(at[k], p.in_sizes[k], p.out_sizes[k]) - start.back());
    cells *= extent.back();
  }
  for_each_index(extent, [&](const Ints& offset) {
    int64_t flat = 0;
    for (size_t k = 0; k < at.size(); ++k) flat = flat * p.in_sizes[k] + start[k] + offset[k];
    f(flat, cells);
  });
}

int64_t product_of(const Ints& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

// The mean of each window, in double, rounded once, into `out` (forward), or each gradient spread
// over its window (backward: `grad` has the output's sizes, `out` the input's).
Tensor area_cpu(const Tensor& self, const SpatialMap& p, Tensor out) {
  const std::vector<double> x = self.contiguous().to_vector<double>();
  const int64_t in_inner = product_of(p.in_sizes), out_inner = product_of(p.out_sizes);
  const int64_t leading = self.numel() / in_inner;
  std::vector<double> y(static_cast<size_t>(leading * out_inner), 0.0);
  for (int64_t l = 0; l < leading; ++l) {
    size_t o = static_cast<size_t>(l * out_inner);
    for_each_index(p.out_sizes, [&](const Ints& at) {
      double sum = 0;
      int64_t cells = 1;
      for_each_in_window(p, at, [&](int64_t i, int64_t n) { sum += x[static_cast<size_t>(l * in_inner + i)], cells = n; });
      y[o++] = sum / static_cast<double>(cells);
    });
  }
  out.copy_(from_vector<double>(y, p.sizes).to(self.dtype()));
  return out;
}

Tensor area_backward_cpu(const Tensor& grad, const Tensor& self, const SpatialMap& p, Tensor out) {
  const std::vector<double> g = grad.contiguous().to_vector<double>();
  const int64_t in_inner = product_of(p.in_sizes), out_inner = product_of(p.out_sizes);
  const int64_t leading = self.numel() / in_inner;
  std::vector<double> x(static_cast<size_t>(self.numel()), 0.0);
  for (int64_t l = 0; l < leading; ++l) {
    size_t o = static_cast<size_t>(l * out_inner);
    for_each_index(p.out_sizes, [&](const Ints& at) {
      const double v = g[o++];
      for_each_in_window(p, at, [&](int64_t i, int64_t cells) {
        x[static_cast<size_t>(l * in_inner + i)] += v / static_cast<double>(cells);
      });
    });
  }
  out.copy_(from_vector<double>(x, Ints(self.sizes().begin(), self.sizes().end())).to(self.dtype()));
  return out;
}

// The [out, in] weights of spatial dim k of a separable linear map, made by registry ops.
using WeightMatrix = std::function<Tensor(const Ops& ops, size_t k, DType dtype, Device device)>;

// The adjoint of a separable linear map by registry ops: per spatial dim, the gradient times the
// dim's [out, in] weights (so it runs on fake tensors and is differentiable again).
Tensor linear_adjoint(const Ops& ops, const Tensor& grad, int64_t first_spatial, const Ints& in_sizes,
                      const Ints& out_sizes, const WeightMatrix& weights) {
  Tensor g = grad;
  const int64_t rank = g.dim();
  for (size_t k = 0; k < in_sizes.size(); ++k) {
    const int64_t d = first_spatial + static_cast<int64_t>(k), in = in_sizes[k], out = out_sizes[k];
    const Tensor w = weights(ops, k, g.dtype(), g.device());  // [out, in]
    // Dim d last, then [rest, out] @ [out, in], then back.
    Ints order;
    for (int64_t a = 0; a < rank; ++a)
      if (a != d) order.push_back(a);
    order.push_back(d);
    Ints inverse(static_cast<size_t>(rank));
    for (int64_t a = 0; a < rank; ++a) inverse[static_cast<size_t>(order[static_cast<size_t>(a)])] = a;
    Tensor moved = ops.permute(g, order);
    Ints moved_sizes(moved.sizes().begin(), moved.sizes().end());
    const Tensor flat = ops.reshape(moved, {product_of(Ints(moved_sizes.begin(), moved_sizes.end() - 1)), out});
    moved_sizes.back() = in;
    g = ops.permute(ops.reshape(ops.tensor("aten::mm", {flat, w}), moved_sizes), inverse);
  }
  return g;
}

// Area resampling's weights: 1 / window size inside output o's window, else 0.
WeightMatrix area_weights(const SpatialMap& p) {
  return [p](const Ops& ops, size_t k, DType dtype, Device device) {
    const int64_t in = p.in_sizes[k], out = p.out_sizes[k];
    const Tensor o = ops.view(ops.arange(out, device), {out, 1}), i = ops.view(ops.arange(in, device), {1, in});
    const Tensor start = ops.tensor("aten::div.Scalar_mode", {ops.mul(o, Scalar(in)), Scalar(out), IValue(std::string("floor"))});
    const Tensor end = ops.tensor("aten::div.Scalar_mode",
                                  {ops.add(ops.mul(o, Scalar(in)), Scalar(in + out - 1)), Scalar(out), IValue(std::string("floor"))});
    const Tensor inside = ops.mul(ops.to(ops.tensor("aten::ge.Tensor", {i, start}), dtype),
                                  ops.to(ops.tensor("aten::lt.Tensor", {i, end}), dtype));
    return ops.div(inside, ops.to(ops.sub(end, start), dtype));
  };
}

Stack area_sample(SampleDraw& draw, int64_t spatial) {
  Ints shape;
  if (draw.coin()) shape.push_back(draw.coin(10) ? 0 : draw.integer(1, 2));
  shape.push_back(draw.integer(1, 3));
  for (int64_t k = 0; k < spatial; ++k) shape.push_back(draw.integer(1, 6));
  Ints output_size;
  for (int64_t k = 0; k < spatial; ++k) output_size.push_back(draw.coin(5) ? 0 : draw.integer(1, 5));
  return Stack{IValue(draw.tensor(shape, draw.dtype())), IValue(output_size)};
}

void register_adaptive_avg_pool(Library& lib, int64_t spatial) {
  Registry& r = lib.registry();
  const std::string n = std::to_string(spatial);
  OpBuilder b(lib, "aten::_adaptive_avg_pool" + n + "d(Tensor self, SymInt[" + n + "] output_size) -> Tensor",
              "convolution_pooling",
              "the mean over each of output_size windows of the last " + n +
                  " dims ([floor(o * in / out), ceil((o + 1) * in / out)) per dim)");
  const std::string name = b.name();
  b.cpu([name, spatial](const Tensor& self, Ints output_size) {
     const SpatialShape p = plan_area(name, spatial, self.sym_sizes(), SymInts(output_size.begin(), output_size.end()));
     return area_cpu(self, at_concrete_sizes(p), empty_resampled(self, p.sizes));
   })
      .fake([name, spatial](const Tensor& self, Ints output_size) {
        return empty_resampled(self, plan_area(name, spatial, self.sym_sizes(), SymInts(output_size.begin(), output_size.end())).sizes);
      })
      .dtypes(kFloating);
  b.autograd(
      [name, spatial, ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints sizes = ctx.get("sizes").to<Ints>(), output_size = ctx.get("output_size").to<Ints>();
        const SpatialMap p = at_concrete_sizes(
            plan_area(name, spatial, SymInts(sizes.begin(), sizes.end()), SymInts(output_size.begin(), output_size.end())));
        return {linear_adjoint(ops, g[0], p.first_spatial, p.in_sizes, p.out_sizes, area_weights(p)), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor self = inputs[0].to_tensor();
        ctx.set("sizes", IValue(Ints(self.sizes().begin(), self.sizes().end())));
        ctx.set("output_size", inputs[1]);
      },
      /*double_backward=*/true);
  b.samples([spatial](SampleDraw& draw) { return area_sample(draw, spatial); });
}

// _adaptive_avg_pool2d_backward(grad_output, self): each gradient spread evenly over its window.
// Its own gradient by grad_output is _adaptive_avg_pool2d of the incoming one (the adjoint's
// adjoint, as PyTorch's derivatives.yaml); self only gives the shape.
void register_adaptive_avg_pool2d_backward(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor", "convolution_pooling",
              "the gradient of _adaptive_avg_pool2d: each grad_output element spread evenly over its window of self");
  const std::string name = b.name();
  auto plan = [name](const Tensor& grad, const Tensor& self) {
    OPCONFORM_CHECK(grad.dim() == self.dim() && grad.dim() >= 3 && grad.dtype() == self.dtype(),
                    ErrorCode::kInvalidArgument, name, ": expected a 3D or 4D 'grad_output' of self's rank and dtype, got ", shape_string(grad.sizes()), " ",
                    opconform::name(grad.dtype()), " for self ", shape_string(self.sizes()), " ",
                    opconform::name(self.dtype()));
    const SymInts grad_sizes = grad.sym_sizes();
    const SpatialShape p = plan_area(name, 2, self.sym_sizes(), SymInts(grad_sizes.end() - 2, grad_sizes.end()));
    bool same = true;  // grad_output's sizes are the forward's output sizes (guards where symbolic)
    for (size_t d = 0; same && d < grad_sizes.size(); ++d) same = grad_sizes[d] == p.sizes[d];
    OPCONFORM_CHECK(same, ErrorCode::kInvalidArgument, name, ": 'grad_output' ", shape_string(grad.sizes()),
                    " must have self's leading sizes ", shape_string(self.sizes()));
    return p;
  };
  // The output: self's shape (the input of the forward) in self's suggested memory format.
  b.cpu([plan](const Tensor& grad, const Tensor& self) {
     return area_backward_cpu(grad, self, at_concrete_sizes(plan(grad, self)), empty_resampled(self, self.sym_sizes()));
   })
      .fake([plan](const Tensor& grad, const Tensor& self) {
        plan(grad, self);
        return empty_resampled(self, self.sym_sizes());
      })
      .dtypes(kFloating);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {ops.tensor("aten::_adaptive_avg_pool2d", {g[0], ctx.get("output_size")}), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor grad = inputs[0].to_tensor();
        ctx.set("output_size", IValue(Ints(grad.sizes().end() - 2, grad.sizes().end())));
      },
      /*double_backward=*/true);
  b.samples([](SampleDraw& draw) {
    Stack forward = area_sample(draw, 2);
    const Tensor self = forward[0].to_tensor();
    Ints sizes(self.sizes().begin(), self.sizes().end());
    const Ints output_size = forward[1].to<Ints>();
    sizes[sizes.size() - 2] = output_size[0], sizes.back() = output_size[1];
    return Stack{IValue(draw.tensor(sizes, self.dtype())), IValue(self)};
  });
}

// ---- bilinear upsampling ----

// Output o of a spatial dim reads input i0 with weight 1 - lambda and i1 with lambda (PyTorch's
// compute_source_index_and_lambda, in double).
struct BilinearTap {
  int64_t i0, i1;
  double lambda;
};
BilinearTap bilinear_tap(int64_t o, int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (out == in) return {o, o, 0};
  double source;
  if (align_corners) {
    source = (out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0) * static_cast<double>(o);
  } else {
    source = std::max(0.0, linear_ratio(scale, in, out) * (static_cast<double>(o) + 0.5) - 0.5);
  }
  const int64_t i0 = std::min(static_cast<int64_t>(std::floor(source)), in - 1);
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), std::clamp(source - static_cast<double>(i0), 0.0, 1.0)};
}

// The taps of bilinear upsampling, at the concrete sizes of nearest's plan (the same checks and
// output shape).
struct BilinearTaps {
  SpatialMap map;
  std::vector<std::optional<double>> scales;
  bool align_corners = false;
  std::vector<std::vector<BilinearTap>> taps;  // per spatial dim, per output index
};

BilinearTaps bilinear_taps(const NearestPlan& plan, bool align_corners) {
  BilinearTaps p{at_concrete_sizes(plan.shape), plan.scales, align_corners, {}};
  const SpatialMap& m = p.map;
  for (size_t k = 0; k < 2; ++k) {
    std::vector<BilinearTap> taps;
    for (int64_t o = 0; o < m.out_sizes[k]; ++o)
      taps.push_back(bilinear_tap(o, m.in_sizes[k], m.out_sizes[k], align_corners, p.scales[k]));
    p.taps.push_back(std::move(taps));
  }
  return p;
}

Tensor bilinear_cpu(const Tensor& self, const BilinearTaps& p, Tensor out) {
  const SpatialMap& m = p.map;
  const std::vector<double> x = self.contiguous().to_vector<double>();
  const int64_t h = m.in_sizes[0], w = m.in_sizes[1], oh = m.out_sizes[0], ow = m.out_sizes[1];
  const int64_t planes = self.numel() / (h * w);
  std::vector<double> y(static_cast<size_t>(planes * oh * ow));
  for (int64_t c = 0; c < planes; ++c) {
    const double* in = x.data() + c * h * w;
    for (int64_t r = 0; r < oh; ++r) {
      const BilinearTap& tr = p.taps[0][static_cast<size_t>(r)];
      for (int64_t q = 0; q < ow; ++q) {
        const BilinearTap& tq = p.taps[1][static_cast<size_t>(q)];
        const double top = (1 - tq.lambda) * in[tr.i0 * w + tq.i0] + tq.lambda * in[tr.i0 * w + tq.i1];
        const double bottom = (1 - tq.lambda) * in[tr.i1 * w + tq.i0] + tq.lambda * in[tr.i1 * w + tq.i1];
        y[static_cast<size_t>((c * oh + r) * ow + q)] = (1 - tr.lambda) * top + tr.lambda * bottom;
      }
    }
  }
  out.copy_(from_vector<double>(y, m.sizes).to(self.dtype()));
  return out;
}

// bilinear_tap over arange by registry ops, as [out, in] weights: 1 - lambda at i0, lambda at i1.
WeightMatrix bilinear_weights(const BilinearTaps& p) {
  return [p](const Ops& ops, size_t k, DType dtype, Device device) {
    const SpatialMap& m = p.map;
    const int64_t in = m.in_sizes[k], out = m.out_sizes[k];
    const Tensor i = ops.view(ops.arange(in, device), {1, in});
    const Tensor o = ops.view(ops.arange(out, device), {out, 1});
    if (out == in) return ops.to(ops.tensor("aten::eq.Tensor", {i, o}), dtype);
    const Tensor of = ops.to(o, DType::Float64);
    Tensor source;
    if (p.align_corners) {
      source = ops.mul(of, Scalar(out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0));
    } else {
      const double ratio = linear_ratio(p.scales[k], in, out);
      source = ops.tensor("aten::clamp",
                          {ops.add(ops.mul(ops.add(of, Scalar(0.5)), Scalar(ratio)), Scalar(-0.5)), IValue(Scalar(0.0)), IValue()});
    }
    const Tensor i0 = ops.tensor("aten::clamp", {ops.to(ops.tensor("aten::floor", {source}), DType::Int64), IValue(),
                                                 IValue(Scalar(in - 1))});
    const Tensor lambda = ops.tensor("aten::clamp", {ops.sub(source, ops.to(i0, DType::Float64)), IValue(Scalar(0.0)),
                                                     IValue(Scalar(1.0))});
    const Tensor i1 = ops.add(i0, ops.to(ops.tensor("aten::lt.Scalar", {i0, Scalar(in - 1)}), DType::Int64));
    const Tensor at0 = ops.to(ops.tensor("aten::eq.Tensor", {i, i0}), DType::Float64);
    const Tensor at1 = ops.to(ops.tensor("aten::eq.Tensor", {i, i1}), DType::Float64);
    return ops.to(ops.add(ops.mul(at0, ops.add(ops.neg(lambda), Scalar(1.0))), ops.mul(at1, lambda)), dtype);
  };
}

void register_upsample_bilinear2d(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
              "scale_factors) -> Tensor",
              "upsampling", "the last 2 dims resized by linear interpolation between the two nearest inputs per dim");
  const std::string name = b.name();
  using Sizes = std::optional<Ints>;
  using Factors = std::optional<std::vector<double>>;
  b.cpu([name](const Tensor& input, Sizes output_size, bool align_corners, Factors scale_factors) {
     const NearestPlan p = plan_nearest(name, input.sym_sizes(), output_size, scale_factors);
     return bilinear_cpu(input, bilinear_taps(p, align_corners), empty_resampled(input, p.shape.sizes));
   })
      .fake([name](const Tensor& input, Sizes output_size, bool, Factors scale_factors) {
        return empty_resampled(input, plan_nearest(name, input.sym_sizes(), output_size, scale_factors).shape.sizes);
      })
      .dtypes(kFloating);
  b.autograd(
      [name, ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const IValue sizes = ctx.get("output_size"), factors = ctx.get("scale_factors");
        const Ints input_sizes = ctx.get("sizes").to<Ints>();
        const BilinearTaps p = bilinear_taps(plan_nearest(name, SymInts(input_sizes.begin(), input_sizes.end()),
                                                          sizes.is_none() ? Sizes() : Sizes(sizes.to<Ints>()),
                                                          factors.is_none() ? Factors() : Factors(factors.to<std::vector<double>>())),
                                             ctx.get("align_corners").to<bool>());
        const SpatialMap& m = p.map;
        return {linear_adjoint(ops, g[0], m.first_spatial, m.in_sizes, m.out_sizes, bilinear_weights(p)), Tensor(),
                Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor input = inputs[0].to_tensor();
        ctx.set("sizes", IValue(Ints(input.sizes().begin(), input.sizes().end())));
        ctx.set("output_size", inputs[1]);
        ctx.set("align_corners", inputs[2]);
        ctx.set("scale_factors", inputs[3]);
      },
      /*double_backward=*/true);
  b.samples([](SampleDraw& draw) {
    Stack args = nearest_sample(draw);
    args.insert(args.begin() + 2, IValue(draw.coin()));
    return args;
  });
}

}  // namespace

void register_resampling(Library& lib) {
  for (int64_t spatial : {1, 2, 3}) register_pad(lib, "padding", PadMode::reflect, spatial);
  for (int64_t spatial : {2, 3}) register_pad(lib, "padding", PadMode::replicate, spatial);
  register_upsample_nearest2d(lib);
  register_upsample_bilinear2d(lib);
  register_adaptive_avg_pool(lib, 2);
  register_adaptive_avg_pool(lib, 3);
  register_adaptive_avg_pool2d_backward(lib);
}

}  // namespace opconform::reference
