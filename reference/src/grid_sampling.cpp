// Grid sampling: aten::grid_sampler_2d, the kernel of torch.nn.functional.grid_sample on 4-d inputs.
// Each output position (n, h, w) reads input[n] at the point grid[n, h, w] = (x, y), given in
// [-1, 1] over the input's width and height (PyTorch's GridSampler.h / GridSamplerKernel.cpp):
//   - unnormalize: x -> ((x + 1) / 2) * (W - 1) with align_corners (-1 and 1 are the centres of
//     the corner pixels), else ((x + 1) * W - 1) / 2 (-1 and 1 are the corners' outer edges);
//   - padding (bilinear and nearest: on the point; bicubic: on each of its 16 taps): zeros leaves it
//     (positions outside the input read 0), border clips it into [0, W - 1], reflection mirrors it
//     at the edges ([0, W - 1] with align_corners, else [-0.5, W - 0.5]) and then clips;
//   - interpolation: bilinear weights the 4 pixels around the point, nearest reads the pixel at
//     nearbyint (ties to even), bicubic weights the 4x4 pixels around it by the cubic convolution
//     kernel with A = -0.75.
// The output is [N, C, H_out, W_out], contiguous, in the input's dtype (the grid's too).
//
// The CPU kernel computes every point's taps (Tap: a pixel and its weight) in float64 and sums
// them per channel. The formula (Note [Backward ops as composites] in op_support.h) is the same
// sampling written with registry ops — floor, round, clamp, gather of the taps with masks for the
// ones outside the input, weighted sums — and differentiated, so double backward works. Nearest
// sampling and empty outputs do not reach the grid (or the input): those gradients are zeros, as
// PyTorch's grid_sampler_2d_backward gives.
#include <algorithm>
#include <array>
#include <cmath>

#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;

enum class Interpolation : int64_t { bilinear = 0, nearest = 1, bicubic = 2 };
enum class Padding : int64_t { zeros = 0, border = 1, reflection = 2 };

constexpr double kCubicA = -0.75;  // PyTorch's (UpSampleBicubic2d's too)

struct GridPlan {
  int64_t n, c, in_h, in_w, out_h, out_w;
  Interpolation interpolation;
  Padding padding;
  bool align_corners;
  Ints out_sizes() const { return {n, c, out_h, out_w}; }
};

// PyTorch's check_grid_sampler_common / check_grid_sampler_2d, the dtypes of the CPU kernel (input
// and grid alike), and the modes (which PyTorch's CPU kernel does not check: an unknown one leaves
// the output unwritten).
GridPlan plan_grid_sampler(std::string_view op, const Tensor& input, const Tensor& grid, int64_t interpolation_mode,
                           int64_t padding_mode, bool align_corners) {
  OPCONFORM_CHECK(input.device() == grid.device(), ErrorCode::kInvalidArgument, op,
                  ": expected 'input' and 'grid' to be on the same device, but input is on ", input.device().to_string(),
                  " and grid is on ", grid.device().to_string());
  OPCONFORM_CHECK(input.dim() == 4 && grid.dim() == 4, ErrorCode::kInvalidArgument, op,
                  ": expected 4D 'input' and 'grid' with the same number of dimensions, but got input with sizes ",
                  shape_string(input.sizes()), " and grid with sizes ", shape_string(grid.sizes()));
  OPCONFORM_CHECK(input.size(0) == grid.size(0), ErrorCode::kInvalidArgument, op,
                  ": expected 'grid' and 'input' to have the same batch size, but got input with sizes ",
                  shape_string(input.sizes()), " and grid with sizes ", shape_string(grid.sizes()));
  OPCONFORM_CHECK(grid.size(3) == 2, ErrorCode::kInvalidArgument, op,
                  ": expected 'grid' to have size 2 in its last dimension, but got grid with sizes ",
                  shape_string(grid.sizes()));
  OPCONFORM_CHECK(input.size(2) > 0 && input.size(3) > 0, ErrorCode::kInvalidArgument, op,
                  ": expected 'input' to have non-empty spatial dimensions, but input has sizes ",
                  shape_string(input.sizes()));
  require_dtype(op, input, kFloating, "input");
  OPCONFORM_CHECK(grid.dtype() == input.dtype(), ErrorCode::kInvalidArgument, op,
                  ": expected 'grid' to have the dtype of 'input' (", name(input.dtype()), "), but got ",
                  name(grid.dtype()));
  OPCONFORM_CHECK(interpolation_mode >= 0 && interpolation_mode <= 2, ErrorCode::kInvalidArgument, op,
                  ": argument 'interpolation_mode' must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got ",
                  interpolation_mode);
  OPCONFORM_CHECK(padding_mode >= 0 && padding_mode <= 2, ErrorCode::kInvalidArgument, op,
                  ": argument 'padding_mode' must be 0 (zeros), 1 (border) or 2 (reflection), got ", padding_mode);
  return {input.size(0),
          input.size(1),
          input.size(2),
          input.size(3),
          grid.size(1),
          grid.size(2),
          static_cast<Interpolation>(interpolation_mode),
          static_cast<Padding>(padding_mode),
          align_corners};
}

// ---- the sampling, in float64 (the CPU kernel) ----

// PyTorch's grid_sampler_unnormalize: a grid coordinate in [-1, 1] to a pixel coordinate.
double unnormalize(double coord, int64_t size, bool align_corners) {
  return align_corners ? (coord + 1) / 2 * static_cast<double>(size - 1)
                       : ((coord + 1) * static_cast<double>(size) - 1) / 2;
}

// The edges a reflection mirrors at, and half the period: [0, size - 1] with align_corners,
// else [-0.5, size - 0.5].
struct Reflection {
  double low, span;
};
Reflection reflection_of(int64_t size, bool align_corners) {
  return align_corners ? Reflection{0.0, static_cast<double>(size - 1)} : Reflection{-0.5, static_cast<double>(size)};
}

// PyTorch's compute_coordinates: a pixel coordinate after padding. Clipping sends NaN to 0, as the
// vectorized CPU kernel's clamp does.
double pad_coordinate(double x, int64_t size, Padding padding, bool align_corners) {
  if (padding == Padding::zeros) return x;
  if (padding == Padding::reflection) {
    const Reflection r = reflection_of(size, align_corners);
    if (r.span <= 0) return 0;  // one pixel with align_corners: every point is on it
    // |x - low| less whole periods, as the vectorized CPU kernel computes it (not fmod: at 1e30 the
    // rounded product leaves no remainder there).
    const double d = std::fabs(x - r.low), period = 2 * r.span;
    const double extra = d - std::trunc(d / period) * period;
    x = std::min(extra, period - extra) + r.low;
  }
  return std::isnan(x) ? 0.0 : std::clamp(x, 0.0, static_cast<double>(size - 1));
}

// An integer-valued coordinate as an index; a non-finite or far one lies outside every input
// (PyTorch's safe_downgrade_to_int_range).
int64_t to_index(double x) { return std::isfinite(x) && std::fabs(x) < 1e9 ? static_cast<int64_t>(x) : -100; }

// PyTorch's get_cubic_upsample_coefficients: the weights of the taps at -1, 0, 1, 2 from a point t
// in [0, 1) past the tap at 0.
std::array<double, 4> cubic_weights(double t) {
  auto near = [](double x) { return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1; };              // |x| <= 1
  auto far = [](double x) { return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA; };  // 1 < |x| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// One pixel an output reads (its row-major position in the H x W plane; -1 outside the input,
// where it reads 0) and its weight.
struct Tap {
  int64_t at;
  double weight;
};

std::vector<Tap> sample_taps(const GridPlan& p, double gx, double gy) {
  auto at = [&](int64_t ix, int64_t iy) {
    return ix >= 0 && ix < p.in_w && iy >= 0 && iy < p.in_h ? iy * p.in_w + ix : int64_t{-1};
  };
  std::vector<Tap> taps;
  if (p.interpolation == Interpolation::bicubic) {
    // The point itself is not padded: each tap is (PyTorch's get_value_bounded).
    const double x = unnormalize(gx, p.in_w, p.align_corners), y = unnormalize(gy, p.in_h, p.align_corners);
    const double x0 = std::floor(x), y0 = std::floor(y);
    const std::array<double, 4> wx = cubic_weights(x - x0), wy = cubic_weights(y - y0);
    for (int64_t j = 0; j < 4; ++j) {
      const int64_t iy = to_index(pad_coordinate(y0 - 1 + static_cast<double>(j), p.in_h, p.padding, p.align_corners));
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t ix = to_index(pad_coordinate(x0 - 1 + static_cast<double>(i), p.in_w, p.padding, p.align_corners));
        taps.push_back({at(ix, iy), wx[static_cast<size_t>(i)] * wy[static_cast<size_t>(j)]});
      }
    }
    return taps;
  }
  const double x = pad_coordinate(unnormalize(gx, p.in_w, p.align_corners), p.in_w, p.padding, p.align_corners);
  const double y = pad_coordinate(unnormalize(gy, p.in_h, p.align_corners), p.in_h, p.padding, p.align_corners);
  if (p.interpolation == Interpolation::nearest) return {{at(to_index(std::nearbyint(x)), to_index(std::nearbyint(y))), 1.0}};
  const double x0 = std::floor(x), y0 = std::floor(y), fx = x - x0, fy = y - y0;
  const int64_t ix = to_index(x0), iy = to_index(y0);
  // A tap outside the input still multiplies its weight (0 * NaN is NaN), as the CPU kernel's
  // masked gather does.
  return {{at(ix, iy), (1 - fx) * (1 - fy)}, {at(ix + 1, iy), fx * (1 - fy)}, {at(ix, iy + 1), (1 - fx) * fy},
          {at(ix + 1, iy + 1), fx * fy}};
}

Tensor grid_sampler_cpu(const GridPlan& p, const Tensor& input, const Tensor& grid) {
  const std::vector<double> x = input.to_vector<double>(), g = grid.to_vector<double>();  // row-major
  const int64_t plane = p.in_h * p.in_w, points = p.out_h * p.out_w;
  std::vector<double> y(static_cast<size_t>(p.n * p.c * points));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t o = 0; o < points; ++o) {
      const size_t xy = static_cast<size_t>(2 * (n * points + o));
      const std::vector<Tap> taps = sample_taps(p, g[xy], g[xy + 1]);
      for (int64_t c = 0; c < p.c; ++c) {
        const double* in = x.data() + (n * p.c + c) * plane;
        double sum = 0;
        for (const Tap& t : taps) sum += (t.at < 0 ? 0.0 : in[t.at]) * t.weight;
        y[static_cast<size_t>((n * p.c + c) * points + o)] = sum;
      }
    }
  }
  return from_vector<double>(y, p.out_sizes()).to(input.dtype());
}

Tensor grid_sampler_fake(const GridPlan& p, const Tensor& input, const Tensor& grid) {
  if (!symbolic_fake(input) && !symbolic_fake(grid)) return empty(p.out_sizes(), input.options());
  const std::vector<SymInt> in = input.sym_sizes(), g = grid.sym_sizes();
  return make_fake_tensor({in[0], in[1], g[1], g[2]}, input.dtype(), input.device());
}

// ---- the sampling as registry ops (what the formula differentiates) ----
// The same taps, built for all points and all taps of a spatial dim at once: positions and
// weights [N, T, P] (T taps per dim, P = H_out * W_out points), then one gather over the T_y x T_x
// tap pairs.

// unnormalize above, on a float64 tensor.
Tensor unnormalize_op(const Ops& ops, const Tensor& coord, int64_t size, bool align_corners) {
  const Tensor shifted = ops.add(coord, Scalar(1.0));
  if (align_corners) return ops.mul(ops.mul(shifted, Scalar(0.5)), Scalar(static_cast<double>(size - 1)));
  return ops.mul(ops.add(ops.mul(shifted, Scalar(static_cast<double>(size))), Scalar(-1.0)), Scalar(0.5));
}

// pad_coordinate above, on a float64 tensor.
Tensor pad_coordinate_op(const Ops& ops, Tensor x, int64_t size, Padding padding, bool align_corners) {
  if (padding == Padding::zeros) return x;
  if (padding == Padding::reflection) {
    const Reflection r = reflection_of(size, align_corners);
    if (r.span <= 0) return ops.zeros_like(x);
    // extra = |x - low| less whole periods (floor keeps the gradient 1), mirrored past span.
    const Tensor d = ops.tensor("aten::abs", {ops.add(x, Scalar(-r.low))});
    const Tensor periods = ops.tensor("aten::floor", {ops.mul(d, Scalar(1 / (2 * r.span)))});
    const Tensor extra = ops.sub(d, ops.mul(periods, Scalar(2 * r.span)));
    const Tensor beyond = ops.tensor("aten::gt.Scalar", {extra, Scalar(r.span)});
    x = ops.add(ops.where(beyond, ops.add(ops.neg(extra), Scalar(2 * r.span)), extra), Scalar(r.low));
  }
  return ops.tensor("aten::clamp", {x, IValue(Scalar(0.0)), IValue(Scalar(static_cast<double>(size - 1)))});
}

// first, first + 1, ..., first + count - 1 as a float64 [1, count, 1] (tap offsets).
Tensor tap_offsets(const Ops& ops, int64_t first, int64_t count, Device device) {
  const Tensor k = ops.add(ops.to(ops.arange(count, device), DType::Float64), Scalar(static_cast<double>(first)));
  return ops.view(k, {1, count, 1});
}

// The taps of one spatial dim: integer-valued pixel positions (padded) and weights, [N, T, P];
// nearest has one tap of weight 1 (weight undefined).
struct AxisTaps {
  Tensor at, weight;
};

AxisTaps axis_taps(const Ops& ops, const GridPlan& p, const Tensor& coord, int64_t size) {
  const Tensor c = unnormalize_op(ops, coord, size, p.align_corners);
  if (p.interpolation == Interpolation::bicubic) {
    const Tensor c0 = ops.tensor("aten::floor", {c}), t = ops.unsqueeze(ops.sub(c, c0), 1);
    const Tensor k = tap_offsets(ops, -1, 4, c.device());
    // The distance of tap k from the point t in [0, 1): t - k up to tap 0, k - t after; taps 0
    // and 1 lie within 1 of it (cubic_weights' near), taps -1 and 2 beyond (far).
    const Tensor after = ops.to(ops.tensor("aten::gt.Scalar", {k, Scalar(0.0)}), DType::Float64);
    const Tensor d = ops.mul(ops.sub(t, k), ops.add(ops.mul(after, Scalar(-2.0)), Scalar(1.0)));
    const Tensor inner = ops.tensor("aten::lt.Scalar", {ops.tensor("aten::abs", {ops.add(k, Scalar(-0.5))}), Scalar(1.0)});
    const Tensor d2 = ops.mul(d, d);
    // near: ((A + 2) d - (A + 3)) d^2 + 1; far: ((A d - 5 A) d + 8 A) d - 4 A.
    const Tensor near = ops.add(ops.mul(ops.add(ops.mul(d, Scalar(kCubicA + 2)), Scalar(-(kCubicA + 3))), d2), Scalar(1.0));
    const Tensor far = ops.add(
        ops.mul(ops.add(ops.mul(ops.add(ops.mul(d, Scalar(kCubicA)), Scalar(-5 * kCubicA)), d), Scalar(8 * kCubicA)), d),
        Scalar(-4 * kCubicA));
    return {pad_coordinate_op(ops, ops.add(ops.unsqueeze(c0, 1), k), size, p.padding, p.align_corners),
            ops.where(inner, near, far)};
  }
  const Tensor x = pad_coordinate_op(ops, c, size, p.padding, p.align_corners);
  if (p.interpolation == Interpolation::nearest) return {ops.unsqueeze(ops.tensor("aten::round", {x}), 1), Tensor()};
  // Bilinear: 1 - f at x0, f at x0 + 1 (f = x - x0): weight (1 - o) + (2 o - 1) f at offset o.
  const Tensor x0 = ops.tensor("aten::floor", {x}), f = ops.unsqueeze(ops.sub(x, x0), 1);
  const Tensor o = tap_offsets(ops, 0, 2, x.device());
  const Tensor weight = ops.add(ops.mul(f, ops.add(ops.mul(o, Scalar(2.0)), Scalar(-1.0))), ops.add(ops.neg(o), Scalar(1.0)));
  return {ops.add(ops.unsqueeze(x0, 1), o), weight};
}

// The sum over the tap pairs (y, x) of weight_y * weight_x * input[n, c, y, x] (input [N, C, H * W],
// float64; 0 outside the input): [N, C, P]. A tap outside still multiplies its weight, as in the
// CPU kernel.
Tensor sum_taps(const Ops& ops, const GridPlan& p, const Tensor& input, const AxisTaps& x, const AxisTaps& y) {
  auto index_of = [&](const Tensor& v) {  // to_index above
    const Tensor finite = ops.tensor("aten::lt.Scalar", {ops.tensor("aten::abs", {v}), Scalar(1e9)});
    return ops.to(ops.where(finite, v, ops.scalar_like(Scalar(-100.0), v)), DType::Int64);
  };
  auto inside = [&](const Tensor& i, int64_t size) {
    return ops.tensor("aten::logical_and",
                      {ops.tensor("aten::ge.Scalar", {i, Scalar(int64_t{0})}), ops.tensor("aten::lt.Scalar", {i, Scalar(size)})});
  };
  auto clamped = [&](const Tensor& i, int64_t size) {
    return ops.tensor("aten::clamp", {i, IValue(Scalar(int64_t{0})), IValue(Scalar(size - 1))});
  };
  const Tensor ix = index_of(x.at), iy = index_of(y.at);
  const int64_t points = p.out_h * p.out_w, taps = x.at.size(1) * y.at.size(1), spread = taps * points;
  // [N, T_y, T_x, P], flattened to [N, T_y * T_x * P].
  const Tensor mask = ops.tensor("aten::logical_and", {ops.unsqueeze(inside(iy, p.in_h), 2), ops.unsqueeze(inside(ix, p.in_w), 1)});
  const Tensor flat = ops.add(ops.unsqueeze(ops.mul(clamped(iy, p.in_h), Scalar(p.in_w)), 2), ops.unsqueeze(clamped(ix, p.in_w), 1));
  const Tensor index = ops.expand(ops.unsqueeze(ops.reshape(flat, {p.n, spread}), 1), {p.n, p.c, spread});
  Tensor values = ops.tensor("aten::gather", {input, IValue(int64_t{2}), index});
  values = ops.where(ops.reshape(mask, {p.n, 1, spread}), values, ops.scalar_like(Scalar(0.0), values));
  if (x.weight.defined()) {
    const Tensor weight = ops.mul(ops.unsqueeze(y.weight, 2), ops.unsqueeze(x.weight, 1));
    values = ops.mul(values, ops.reshape(weight, {p.n, 1, spread}));
  }
  return ops.sum_dims(ops.reshape(values, {p.n, p.c, taps, points}), {2}, false);
}

// grid_sampler_2d's output by registry ops, in input's dtype; an empty output is a constant.
Tensor grid_sampler_op(const Ops& ops, const GridPlan& p, const Tensor& input, const Tensor& grid) {
  const int64_t points = p.out_h * p.out_w;
  if (p.n * p.c * points == 0) return ops.full(p.out_sizes(), Scalar(0.0), input);
  const Tensor in = ops.reshape(ops.to(input, DType::Float64), {p.n, p.c, p.in_h * p.in_w});
  const Tensor g = ops.reshape(ops.to(grid, DType::Float64), {p.n, points, 2});
  const Tensor gx = ops.tensor("aten::select.int", {g, IValue(int64_t{2}), IValue(int64_t{0})});
  const Tensor gy = ops.tensor("aten::select.int", {g, IValue(int64_t{2}), IValue(int64_t{1})});
  const Tensor out = sum_taps(ops, p, in, axis_taps(ops, p, gx, p.in_w), axis_taps(ops, p, gy, p.in_h));
  return ops.to(ops.reshape(out, p.out_sizes()), input.dtype());
}

// The composite formula, with zeros for the inputs the composite does not reach (the grid under
// nearest sampling, both for an empty output), as PyTorch's backward gives.
CompositeFormula grid_sampler_formula(Registry& r, const std::string& name) {
  CompositeFormula f = composite_formula(r, [name](const Ops& ops, const Stack& a) {
    const Tensor &input = a[0].to_tensor(), &grid = a[1].to_tensor();
    const GridPlan p = plan_grid_sampler(name, input, grid, a[2].to_int(), a[3].to_int(), a[4].to_bool());
    return Stack{IValue(grid_sampler_op(ops, p, input, grid))};
  });
  f.backward = [inner = std::move(f.backward), ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& grads) {
    Grads out = inner(ctx, grads);
    const std::vector<Tensor> saved = ctx.saved_tensors();  // input, grid
    for (size_t i = 0; i < 2; ++i)
      if (ctx.needs_input_grad(i) && !out[i].defined()) out[i] = ops.zeros_like(saved[i]);
    return out;
  };
  return f;
}

// ---- samples ----

// Moves each grid coordinate so that its pixel coordinate lies 0.1 or more away from every integer
// and half-integer: where floor and round jump, the clipping and reflection edges (integers and,
// without align_corners, half-integers), the kinks of bilinear weights. The fraction f of the pixel
// coordinate is mapped into [0.1, 0.4) or [0.6, 0.9) (reflection maps f to 1 - f, which stays
// there), so finite differences see a smooth function.
double off_the_kinks(double coord, int64_t size, bool align_corners) {
  if (align_corners && size == 1) return coord;  // the pixel coordinate is 0 for every coord
  const double u = unnormalize(coord, size, align_corners), k = std::floor(u), f = u - k;
  const double v = k + (f < 0.5 ? 0.1 + 0.6 * f : 0.6 + 0.6 * (f - 0.5));
  const double s = static_cast<double>(size);
  return align_corners ? 2 * v / (s - 1) - 1 : (2 * v + 1) / s - 1;
}

Stack grid_sampler_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const int64_t interpolation = draw.integer(0, 2), padding = draw.integer(0, 2);
  const bool align_corners = draw.coin();
  // Small: gradgradcheck differentiates the formula's composite once per element.
  const int64_t n = draw.coin(10) ? 0 : draw.integer(1, 2), c = draw.coin(10) ? 0 : draw.integer(1, 2);
  const int64_t h = draw.integer(1, 4), w = draw.integer(1, 4);
  const int64_t out_h = draw.coin(10) ? 0 : draw.integer(1, 2), out_w = draw.integer(1, 3);
  const Tensor input = draw.tensor({n, c, h, w}, dtype);
  // Points a little past [-1, 1] too (padding matters there), finite.
  ValueConstraint range;
  range.min = -1.25, range.max = 1.25, range.allow_nan = false, range.allow_inf = false;
  const Tensor grid = draw.tensor({n, out_h, out_w, 2}, dtype, range, /*mutable_input=*/true);
  std::vector<double> g = grid.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) g[i] = off_the_kinks(g[i], i % 2 == 0 ? w : h, align_corners);
  grid.copy_(from_vector<double>(g, grid.sizes()).to(dtype, grid.device()));
  return Stack{IValue(input), IValue(grid), IValue(interpolation), IValue(padding), IValue(align_corners)};
}

}  // namespace

void register_grid_sampling(Library& lib) {
  OpBuilder b(lib,
              "aten::grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool "
              "align_corners) -> Tensor",
              "grid_sampling",
              "input [N, C, H, W] sampled at the points grid [N, H_out, W_out, 2] ((x, y) in [-1, 1]): bilinear, "
              "nearest or bicubic interpolation; zeros, border or reflection padding");
  const std::string name = b.name();
  b.cpu([name](const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding, bool align_corners) {
     return grid_sampler_cpu(plan_grid_sampler(name, input, grid, interpolation, padding, align_corners), input, grid);
   })
      .fake([name](const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding, bool align_corners) {
        return grid_sampler_fake(plan_grid_sampler(name, input, grid, interpolation, padding, align_corners), input, grid);
      })
      .autograd(grid_sampler_formula(lib.registry(), name))
      .dtypes(kFloating)
      .samples(grid_sampler_sample);
}

}  // namespace opconform::reference
