// The padding family: reflection_pad1d/2d/3d and replication_pad2d/3d. The last N dims of a
// (C, *spatial) or (N, C, *spatial) input grow by `padding` (before/after pairs from the last dim
// backwards, as constant_pad_nd's): reflection mirrors the input without repeating its edge
// ([a b c] padded by 2 on the left: [c b a b c]), replication repeats the edge ([a a a b c]).
// Negative pads crop. Each output position reads one input position, chosen per spatial dim
// (pad_source), which the CPU kernel copies and the backward adds back (scatter_add per dim).
#include <algorithm>
#include <cstring>

#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using conformance::SampleDraw;
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;

enum class PadMode { reflect, replicate };

// The input position output position `o` of one spatial dim reads (size: the input's).
int64_t pad_source(PadMode mode, int64_t o, int64_t before, int64_t size) {
  int64_t x = o - before;
  if (mode == PadMode::replicate) return std::clamp<int64_t>(x, 0, size - 1);
  if (x < 0) x = -x;
  if (x >= size) x = 2 * (size - 1) - x;
  return x;
}

// An op's checks (PyTorch's meta functions) and the geometry they give: per spatial dim in
// order, the pad before and the input and output sizes.
struct PadPlan {
  int64_t first_spatial = 0;  // the dim of the first spatial size
  Ints before, in_sizes, out_sizes;
  Ints sizes;                 // the whole output's
};

PadPlan plan_padding(std::string_view op, PadMode mode, int64_t spatial, IntArrayRef self, const Ints& padding) {
  OPCONFORM_CHECK(static_cast<int64_t>(padding.size()) == 2 * spatial, ErrorCode::kInvalidArgument, op,
                  ": padding size is expected to be ", 2 * spatial, ", got ", padding.size());
  const auto rank = static_cast<int64_t>(self.size());
  bool nonempty = rank == spatial + 1 || rank == spatial + 2;
  for (int64_t d = rank == spatial + 2 ? 1 : 0; nonempty && d < rank; ++d) nonempty = self[d] != 0;
  OPCONFORM_CHECK(nonempty, ErrorCode::kInvalidArgument, op, ": expected ", spatial + 1, "D or ", spatial + 2,
                  "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
                  shape_string(self));
  PadPlan plan;
  plan.first_spatial = rank - spatial;
  plan.sizes.assign(self.begin(), self.end());
  for (int64_t k = 0; k < spatial; ++k) {
    const int64_t d = plan.first_spatial + k, size = self[d];
    const int64_t before = padding[static_cast<size_t>(2 * (spatial - 1 - k))];
    const int64_t after = padding[static_cast<size_t>(2 * (spatial - 1 - k) + 1)];
    if (mode == PadMode::reflect) {
      OPCONFORM_CHECK(before < size && after < size, ErrorCode::kInvalidArgument, op,
                      ": padding size should be less than the corresponding input dimension, but got: padding (",
                      before, ", ", after, ") at dimension ", d, " of input ", shape_string(self));
    }
    const int64_t out = size + before + after;
    OPCONFORM_CHECK(out >= 1, ErrorCode::kInvalidArgument, op, ": input (size ", size, " at dimension ", d,
                    ") is too small; calculated output size: ", out);
    plan.before.push_back(before), plan.in_sizes.push_back(size), plan.out_sizes.push_back(out);
    plan.sizes[static_cast<size_t>(d)] = out;
  }
  return plan;
}

// The output's strides: channels-last when a 4-d or 5-d input is (PyTorch's padding kernels keep
// the suggested memory format), else row-major.
Ints padded_strides(const Tensor& self, const Ints& sizes) {
  const bool channels_last = (self.dim() == 4 || self.dim() == 5) && strides_like_channels_last(self.sizes(), self.strides());
  return channels_last ? channels_last_strides(sizes) : contiguous_strides(sizes);
}

// Copies each output element from its source: a data movement, the same for every dtype.
Tensor pad_cpu(const Tensor& self, PadMode mode, const PadPlan& plan) {
  const Tensor in = self.contiguous();
  Tensor dense = empty(plan.sizes, self.options());
  const int64_t spatial = static_cast<int64_t>(plan.before.size());
  int64_t in_inner = 1, out_inner = 1;
  for (int64_t k = 0; k < spatial; ++k) in_inner *= plan.in_sizes[k], out_inner *= plan.out_sizes[k];
  // The flat input position of each flat output position of the spatial block.
  std::vector<int64_t> source(static_cast<size_t>(out_inner));
  size_t o = 0;
  for_each_index(plan.out_sizes, [&](const Ints& at) {
    int64_t flat = 0;
    for (int64_t k = 0; k < spatial; ++k) flat = flat * plan.in_sizes[k] + pad_source(mode, at[k], plan.before[k], plan.in_sizes[k]);
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
  Tensor out = empty_strided(plan.sizes, padded_strides(self, plan.sizes), self.options());
  out.copy_(dense);
  return out;
}

Tensor pad_fake(const Tensor& self, const PadPlan& plan, const Ints& padding) {
  Tensor out = empty_strided(plan.sizes, padded_strides(self, plan.sizes), self.options());
  if (!symbolic_fake(self)) return out;
  std::vector<SymInt> sizes = self.sym_sizes();
  for (size_t k = 0; k < plan.before.size(); ++k) {
    const size_t d = static_cast<size_t>(plan.first_spatial) + k;
    const size_t pair = 2 * (plan.before.size() - 1 - k);
    sizes[d] = sizes[d] + SymInt(padding[pair] + padding[pair + 1]);
  }
  return with_dense_sym_shape(out, std::move(sizes));
}

// The backward: each output position's gradient is added to the input position it read, one
// spatial dim at a time (the source is chosen per dim): scatter_add along the dim, with the
// sources computed by registry ops from arange, so the formula runs on fake tensors and is
// differentiable again (scatter_add's gradient is a gather).
Tensor pad_backward(const Ops& ops, PadMode mode, const Tensor& grad, const PadPlan& plan) {
  Tensor g = grad;
  for (size_t k = 0; k < plan.before.size(); ++k) {
    const int64_t d = plan.first_spatial + static_cast<int64_t>(k), size = plan.in_sizes[k];
    Tensor x = ops.add(ops.arange(plan.out_sizes[k], g.device()), Scalar(-plan.before[k]));
    if (mode == PadMode::replicate) {
      x = ops.tensor("aten::clamp", {x, IValue(Scalar(int64_t{0})), IValue(Scalar(size - 1))});
    } else {
      x = ops.tensor("aten::abs", {x});
      const Tensor beyond = ops.tensor("aten::ge.Scalar", {x, Scalar(size)});
      x = ops.where(beyond, ops.add(ops.neg(x), Scalar(2 * (size - 1))), x);
    }
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
     return pad_cpu(self, mode, plan_padding(name, mode, spatial, self.sizes(), padding));
   })
      .fake([name, mode, spatial](const Tensor& self, Ints padding) {
        return pad_fake(self, plan_padding(name, mode, spatial, self.sizes(), padding), padding);
      })
      .dtypes(concat_dtypes(kReal, {DType::Complex64, DType::Complex128}));
  b.autograd(
      [name, mode, spatial, ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints sizes = ctx.get("sizes").to<Ints>(), padding = ctx.get("padding").to<Ints>();
        return {pad_backward(ops, mode, g[0], plan_padding(name, mode, spatial, sizes, padding)), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor self = inputs[0].to_tensor();
        ctx.set("sizes", IValue(Ints(self.sizes().begin(), self.sizes().end())));
        ctx.set("padding", inputs[1]);
      },
      /*double_backward=*/true);
  b.samples([mode, spatial](SampleDraw& draw) { return pad_sample(draw, mode, spatial); });
}

}  // namespace

void register_padding(Library& lib) {
  const std::string fam = "padding";
  for (int64_t spatial : {1, 2, 3}) register_pad(lib, fam, PadMode::reflect, spatial);
  for (int64_t spatial : {2, 3}) register_pad(lib, fam, PadMode::replicate, spatial);
}

}  // namespace opconform::reference
