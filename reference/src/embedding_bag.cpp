// Embedding bags: aten::_embedding_bag reduces the rows of a 2-d `weight` named by each bag of a
// 1-d `indices` (bag b: indices[offsets[b] .. offsets[b + 1]), the last bag running to the end)
// by sum (mode 0, each row times its per_sample_weights entry when given), mean (1) or max (2,
// per column). Entries equal to padding_idx are skipped and not counted. With
// include_last_offset, offsets has one entry more than there are bags. The op also returns the
// three auxiliary tensors of PyTorch's CPU kernel, which its backward reads: Note [Embedding bag
// outputs].
//
// The kernel reads weight (and per_sample_weights) in float64, sums in float64 and rounds once.
// The formulas are written with registry ops: each index's bag comes from offsets by a
// comparison with arange, the weight gradient of sum and mean is embedding_dense_backward of the
// scaled gradient rows (which divides by the row's frequency with scale_grad_by_freq), that of
// max a scatter_add to the rows max_indices names, and per_sample_weights' gradient is the dot
// product of each index's gradient row and weight row; so they run on fake tensors and double
// backward works.
//
// Note [Embedding bag outputs]: (output, offset2bag, bag_size, max_indices), the last three in
// the index dtype (int64 when indices or offsets is int64, else int32), all contiguous:
//   - output [B, D]: each bag's reduction; an empty bag (or one of padding only) gives zeros.
//   - offset2bag [n]: each index's bag (-1 when there is no bag: PyTorch's cumsum of the bag
//     starts, minus 1).
//   - bag_size [B]: the bag's entries but padding_idx ones (mean, max); zeros for sum.
//   - max_indices: for max [B, D], the weight row each maximum came from (0 for an empty bag);
//     otherwise [B], a copy of bag_size.
// With include_last_offset, indices past offsets[B] join the last bag.
// These are PyTorch 2.11's CPU results on its general path, the one it takes for float64. For
// sum or mean over a float32/float16/bfloat16 weight without padding_idx and with unit strides,
// PyTorch takes a fast path whose results depend on the dtype and the layout: offset2bag is
// empty ([0]) for sum, and with include_last_offset the indices past offsets[B] are not read
// (nor range-checked) although bag_size counts them. The reference gives the general path's
// results for every dtype and layout (its checks hold them to that: dtype_consistency compares
// with the float64 run, stride_invariance with the contiguous one).
// Where the reference also departs from PyTorch: offsets that decrease or leave [0, n] are
// refused (PyTorch's fast path refuses decreasing ones, its general path computes garbage or
// fails to index); 2-d indices are refused (torch.nn.functional.embedding_bag flattens them
// before the call); a mode other than 0, 1, 2 is refused (PyTorch crashes); with no bag (B = 0),
// no index is read (PyTorch's general path writes out of bounds or crashes). sparse is accepted
// and the gradient is dense. With scale_grad_by_freq, the weight gradient divides by each row's
// frequency (PyTorch 2.11's CPU kernel divides some rows by another row's frequency).
#include <algorithm>
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
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;
using MaybeTensor = std::optional<Tensor>;
using Outputs = std::tuple<Tensor, Tensor, Tensor, Tensor>;

constexpr const char* kOp = "aten::_embedding_bag";
constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

// What the arguments' metadata decides (the fake kernel knows no more).
struct BagPlan {
  int64_t rows = 0, width = 0, count = 0, bags = 0;  // weight [rows, width], indices [count], B bags
  int64_t mode = kSum, padding_idx = -1;
  DType index_dtype = DType::Int64;

  Ints max_indices_sizes() const { return mode == kMax ? Ints{bags, width} : Ints{bags}; }
};

BagPlan plan_bags(const Tensor& weight, const Tensor& indices, const Tensor& offsets, int64_t mode,
                  const MaybeTensor& psw, bool include_last_offset, int64_t padding_idx) {
  OPCONFORM_CHECK(weight.dim() == 2, ErrorCode::kInvalidArgument, kOp,
                  ": argument 'weight' must be 2-D (num_embeddings, embedding_dim), got ", weight.dim(), " dimensions");
  OPCONFORM_CHECK(indices.dim() == 1, ErrorCode::kInvalidArgument, kOp,
                  ": argument 'indices' must be 1-D (bags given by offsets), got ", indices.dim(), " dimensions");
  OPCONFORM_CHECK(offsets.dim() == 1, ErrorCode::kInvalidArgument, kOp, ": argument 'offsets' must be 1-D, got ",
                  offsets.dim(), " dimensions");
  // PyTorch promotes indices and offsets to their common dtype first (int16 indices with int64
  // offsets pass), then asks for int32 or int64.
  const DType index_dtype = result_type({indices, offsets});
  OPCONFORM_CHECK(index_dtype == DType::Int64 || index_dtype == DType::Int32, ErrorCode::kInvalidArgument, kOp,
                  ": arguments 'indices' and 'offsets' must be int64 or int32, got ", name(indices.dtype()), " and ",
                  name(offsets.dtype()));
  require_dtype(kOp, weight, kFloating, "weight");
  OPCONFORM_CHECK(mode == kSum || mode == kMean || mode == kMax, ErrorCode::kInvalidArgument, kOp,
                  ": argument 'mode' must be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  if (psw) {
    OPCONFORM_CHECK(mode == kSum, ErrorCode::kInvalidArgument, kOp,
                    ": argument 'per_sample_weights' is only supported with mode=0 (sum), got mode=", mode);
    OPCONFORM_CHECK(psw->dtype() == weight.dtype(), ErrorCode::kInvalidArgument, kOp,
                    ": argument 'per_sample_weights' must have weight's dtype ", name(weight.dtype()), ", got ",
                    name(psw->dtype()));
    OPCONFORM_CHECK(psw->dim() == 1 && psw->numel() == indices.numel(), ErrorCode::kInvalidArgument, kOp,
                    ": argument 'per_sample_weights' must be 1-D with one weight per index (", indices.numel(),
                    "), got shape ", shape_string(psw->sizes()));
  }
  OPCONFORM_CHECK(!include_last_offset || offsets.size(0) >= 1, ErrorCode::kInvalidArgument, kOp,
                  ": argument 'offsets' must have at least one entry with include_last_offset");
  BagPlan p;
  p.rows = weight.size(0), p.width = weight.size(1), p.count = indices.size(0);
  p.bags = offsets.size(0) - (include_last_offset ? 1 : 0);
  p.mode = mode, p.padding_idx = padding_idx;
  p.index_dtype = index_dtype;
  return p;
}

// Where each index goes, from the values of offsets and indices (the CPU kernel's half).
struct BagMembers {
  Ints offsets, rows;  // offsets and indices as int64
  Ints bag;            // per index: its bag (offset2bag), -1 before any bag starts
  Ints bag_size;       // per bag: its entries (the last one's to the end of indices) but padding ones
  std::vector<bool> read;  // per index: it takes part (in a bag, not padding)
};

BagMembers place_indices(const BagPlan& p, const Tensor& indices, const Tensor& offsets) {
  BagMembers m;
  m.offsets = offsets.to_vector<int64_t>();
  m.rows = indices.to_vector<int64_t>();
  const int64_t n = p.count;
  if (!m.offsets.empty()) {
    OPCONFORM_CHECK(m.offsets[0] == 0, ErrorCode::kInvalidArgument, kOp,
                    ": argument 'offsets' must start at 0 (the first bag starts at the first index), got offsets[0] = ",
                    m.offsets[0]);
    OPCONFORM_CHECK(m.offsets.back() <= n, ErrorCode::kInvalidArgument, kOp, ": argument 'offsets' must not exceed ",
                    "the number of indices ", n, ", got offsets[-1] = ", m.offsets.back());
    for (size_t b = 1; b < m.offsets.size(); ++b)
      OPCONFORM_CHECK(m.offsets[b] >= m.offsets[b - 1] && m.offsets[b] <= n, ErrorCode::kInvalidArgument, kOp,
                      ": argument 'offsets' must be non-decreasing within [0, ", n, "], got ", shape_string(m.offsets));
  }
  // offset2bag[i] = (the bags starting at or before i) - 1: PyTorch's cumsum of the starts.
  m.bag.assign(static_cast<size_t>(n), -1);
  for (int64_t b = 0; b < p.bags; ++b)
    for (int64_t i = m.offsets[static_cast<size_t>(b)]; i < n; ++i) ++m.bag[static_cast<size_t>(i)];
  m.bag_size.assign(static_cast<size_t>(p.bags), 0);
  for (int64_t b = 0; b < p.bags; ++b) {
    const int64_t next = b + 1 < p.bags ? m.offsets[static_cast<size_t>(b + 1)] : n;
    m.bag_size[static_cast<size_t>(b)] = next - m.offsets[static_cast<size_t>(b)];
  }
  m.read.assign(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (m.bag[k] < 0) continue;
    OPCONFORM_CHECK(m.rows[k] >= 0 && m.rows[k] < p.rows, ErrorCode::kInvalidArgument, kOp, ": argument 'indices' has ",
                    m.rows[k], " at position ", i, ", out of range for a weight of ", p.rows, " rows");
    if (m.rows[k] == p.padding_idx) --m.bag_size[static_cast<size_t>(m.bag[k])];
    else m.read[k] = true;
  }
  return m;
}

Tensor index_tensor(const Ints& values, const Ints& sizes, DType dtype) {
  return from_vector<int64_t>(values, sizes).to(dtype);
}

Outputs embedding_bag_cpu(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool, int64_t mode, bool,
                          const MaybeTensor& psw, bool include_last_offset, int64_t padding_idx) {
  const BagPlan p = plan_bags(weight, indices, offsets, mode, psw, include_last_offset, padding_idx);
  const BagMembers m = place_indices(p, indices, offsets);
  const std::vector<double> w = weight.to_vector<double>();
  const std::vector<double> scale = psw ? psw->to_vector<double>() : std::vector<double>();
  const int64_t width = p.width;
  std::vector<double> out(static_cast<size_t>(p.bags * width), 0.0);
  Ints argmax(mode == kMax ? out.size() : 0, 0);
  std::vector<bool> started(static_cast<size_t>(p.bags), false);
  for (int64_t i = 0; i < p.count; ++i) {
    const auto k = static_cast<size_t>(i);
    if (!m.read[k]) continue;
    const int64_t b = m.bag[k], row = m.rows[k];
    for (int64_t d = 0; d < width; ++d) {
      const auto at = static_cast<size_t>(b * width + d);
      const double v = w[static_cast<size_t>(row * width + d)];
      if (mode != kMax) {
        out[at] += psw ? v * scale[k] : v;
      } else if (!started[static_cast<size_t>(b)] || v > out[at]) {  // NaN: kept when first, never taken after
        out[at] = v;
        argmax[at] = row;
      }
    }
    started[static_cast<size_t>(b)] = true;
  }
  if (mode == kMean) {
    for (int64_t b = 0; b < p.bags; ++b)
      for (int64_t d = 0; d < width; ++d)
        out[static_cast<size_t>(b * width + d)] /= static_cast<double>(std::max<int64_t>(m.bag_size[static_cast<size_t>(b)], 1));
  }
  const Ints bag_size = mode == kSum ? Ints(m.bag_size.size(), 0) : m.bag_size;
  return {from_vector<double>(out, {p.bags, width}).to(weight.dtype()),
          index_tensor(m.bag, {p.count}, p.index_dtype),
          index_tensor(bag_size, {p.bags}, p.index_dtype),
          index_tensor(mode == kMax ? argmax : bag_size, p.max_indices_sizes(), p.index_dtype)};
}

Outputs embedding_bag_fake(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool, int64_t mode, bool,
                           const MaybeTensor& psw, bool include_last_offset, int64_t padding_idx) {
  const BagPlan p = plan_bags(weight, indices, offsets, mode, psw, include_last_offset, padding_idx);
  const TensorOptions index_options(p.index_dtype, weight.device());
  if (!symbolic_fake(weight) && !symbolic_fake(indices) && !symbolic_fake(offsets)) {
    return {empty({p.bags, p.width}, weight.options()), empty({p.count}, index_options),
            empty({p.bags}, index_options), empty(p.max_indices_sizes(), index_options)};
  }
  const SymInt bags = offsets.sym_sizes()[0] - SymInt(include_last_offset ? 1 : 0), width = weight.sym_sizes()[1];
  const SymInt count = indices.sym_sizes()[0];
  auto make = [&](std::vector<SymInt> sizes, DType dtype) { return make_fake_tensor(std::move(sizes), dtype, weight.device()); };
  return {make({bags, width}, weight.dtype()), make({count}, p.index_dtype), make({bags}, p.index_dtype),
          make(mode == kMax ? std::vector<SymInt>{bags, width} : std::vector<SymInt>{bags}, p.index_dtype)};
}

// ---- the formula ----

Tensor slice0(const Ops& ops, const Tensor& t, int64_t start, int64_t end) {
  return ops.tensor("aten::slice.Tensor", {t, IValue(int64_t{0}), IValue(start), IValue(end), IValue(int64_t{1})});
}

// Per index, by registry ops: its bag (int64 [n], the number of bag starts at or before it - 1)
// and whether it takes part (bool [n]: not padding_idx), as place_indices decides.
std::pair<Tensor, Tensor> members(const Ops& ops, const Tensor& indices, const Tensor& offsets, int64_t bags,
                                  int64_t padding_idx) {
  const int64_t n = indices.size(0);
  const Tensor rows = ops.to(indices, DType::Int64), starts = ops.to(offsets, DType::Int64);
  const Tensor position = ops.arange(n, indices.device());
  const Tensor started = ops.tensor("aten::le.Tensor", {ops.view(slice0(ops, starts, 0, bags), {1, bags}),
                                                        ops.view(position, {n, 1})});
  const Tensor bag = ops.add(ops.sum_dims(ops.to(started, DType::Int64), {1}, false), Scalar(int64_t{-1}));
  return {bag, ops.tensor("aten::ne.Scalar", {rows, Scalar(padding_idx)})};
}

Grads embedding_bag_backward(const Ops& ops, AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // weight, indices, offsets, bag_size, max_indices[, per_sample_weights]
  const Tensor &weight = saved[0], &indices = saved[1], &offsets = saved[2], &bag_size = saved[3];
  const Tensor psw = saved.size() > 5 ? saved[5] : Tensor();
  const int64_t mode = ctx.get("mode").to_int(), padding_idx = ctx.get("padding_idx").to_int();
  const Tensor& grad = g[0];
  const int64_t bags = grad.size(0), n = indices.size(0), rows = weight.size(0), width = weight.size(1);
  Grads out(9);
  if (bags == 0 || n == 0 || rows == 0) {  // no index was read
    if (ctx.needs_input_grad(0)) out[0] = ops.full({rows, width}, Scalar(0.0), weight);
    if (psw.defined() && ctx.needs_input_grad(6)) out[6] = ops.full({n}, Scalar(0.0), psw);
    return out;
  }
  if (mode == kMax) {  // each maximum's gradient to the row it came from; empty bags give none
    const Tensor nonempty = ops.to(ops.tensor("aten::gt.Scalar", {bag_size, Scalar(int64_t{0})}), grad.dtype());
    const Tensor src = ops.mul(grad, ops.view(nonempty, {bags, 1}));
    out[0] = ops.tensor("aten::scatter_add", {ops.full({rows, width}, Scalar(0.0), grad), IValue(int64_t{0}),
                                              ops.to(saved[4], DType::Int64), src});
    return out;
  }
  const auto [bag, read] = members(ops, indices, offsets, bags, padding_idx);
  const Tensor taken = ops.to(read, grad.dtype());
  const Tensor grad_rows = ops.tensor("aten::index_select", {grad, IValue(int64_t{0}), bag});  // [n, width]
  const Tensor rows64 = ops.to(indices, DType::Int64);
  if (ctx.needs_input_grad(0)) {
    Tensor scale = psw.defined() ? ops.mul(taken, psw) : taken;
    if (mode == kMean) {
      const Tensor size = ops.tensor("aten::clamp", {ops.to(bag_size, grad.dtype()), IValue(Scalar(1.0)), IValue()});
      scale = ops.mul(scale, ops.tensor("aten::index_select", {ops.tensor("aten::reciprocal", {size}), IValue(int64_t{0}), bag}));
    }
    // Padding entries go to an extra row, the padding row of embedding_dense_backward,
    // so they count in no row's frequency; it is cut off after.
    const Tensor target = ops.where(read, rows64, ops.scalar_like(Scalar(rows), rows64));
    const Tensor summed = ops.tensor("aten::embedding_dense_backward",
                                     {ops.mul(grad_rows, ops.view(scale, {n, 1})), target, IValue(SymInt(rows + 1)),
                                      IValue(SymInt(rows)), ctx.get("scale_grad_by_freq")});
    out[0] = slice0(ops, summed, 0, rows);
  }
  if (psw.defined() && ctx.needs_input_grad(6)) {
    const Tensor safe = ops.where(read, rows64, ops.scalar_like(Scalar(int64_t{0}), rows64));
    const Tensor weight_rows = ops.tensor("aten::index_select", {weight, IValue(int64_t{0}), safe});
    out[6] = ops.mul(ops.sum_dims(ops.mul(grad_rows, weight_rows), {1}, false), taken);
  }
  return out;
}

void save_embedding_bag(AutogradContext& ctx, const Stack& in, const Stack& out) {
  const Tensor weight = in[0].to_tensor(), indices = in[1].to_tensor(), offsets = in[2].to_tensor();
  const MaybeTensor psw = in[6].is_none() ? MaybeTensor() : MaybeTensor(in[6].to_tensor());
  const BagPlan p = plan_bags(weight, indices, offsets, in[4].to_int(), psw, in[7].to_bool(), in[8].to_int());
  std::vector<Tensor> saved{weight, indices, offsets, out[2].to_tensor(), out[3].to_tensor()};
  if (psw) saved.push_back(*psw);
  ctx.save_for_backward(std::move(saved));
  ctx.mark_non_differentiable({out[1].to_tensor(), out[2].to_tensor(), out[3].to_tensor()});
  ctx.set("scale_grad_by_freq", IValue(in[3].to_bool() && p.mode != kMax));  // max ignores it, as PyTorch
  ctx.set("mode", in[4]);
  ctx.set("padding_idx", in[8]);
}

// ---- samples ----

// Small bags over a few rows: offsets start at 0 and do not decrease; with include_last_offset
// the extra offset is mostly n (sometimes less: later indices then join the last bag).
// scale_grad_by_freq, which makes the gradient no derivative where a row
// repeats, only when none does (or with max, which ignores it); max draws tie-free weights.
Stack embedding_bag_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const int64_t rows = draw.integer(1, 5), width = draw.coin(10) ? 0 : draw.integer(1, 3);
  const int64_t n = draw.integer(0, 6), mode = draw.integer(0, 2);
  const bool include_last_offset = draw.coin(30);
  const int64_t bags = draw.coin(5) ? 0 : draw.integer(1, 3);
  Ints offsets{0};
  for (int64_t b = 1; b < bags; ++b) offsets.push_back(draw.integer(0, n));
  std::sort(offsets.begin(), offsets.end());
  if (include_last_offset && bags > 0) offsets.push_back(draw.coin(80) ? n : draw.integer(offsets.back(), n));
  if (bags == 0 && !include_last_offset) offsets.clear();
  const DType index_dtype = draw.coin(25) ? DType::Int32 : DType::Int64;
  const DType offsets_dtype = draw.coin(80) ? index_dtype : (index_dtype == DType::Int32 ? DType::Int64 : DType::Int32);
  Tensor indices = draw.index_tensor({n}, 0, rows - 1);
  if (index_dtype == DType::Int32) indices = indices.to(DType::Int32);
  Ints used = indices.to_vector<int64_t>();
  std::sort(used.begin(), used.end());
  const bool repeats = std::adjacent_find(used.begin(), used.end()) != used.end();
  const bool scale_grad_by_freq = (mode == kMax || !repeats) && draw.coin(30);
  const int64_t padding_idx = draw.coin(60) ? -1 : draw.integer(0, rows - 1);
  const IValue psw = mode == kSum && draw.coin(40) ? IValue(draw.tensor({n}, dtype)) : IValue();
  const Tensor weight = mode == kMax ? draw_tie_free(draw, {rows, width}, dtype) : draw.tensor({rows, width}, dtype);
  return {IValue(weight), IValue(indices), IValue(index_tensor(offsets, {static_cast<int64_t>(offsets.size())}, offsets_dtype)),
          IValue(scale_grad_by_freq), IValue(mode), IValue(draw.coin(10)), psw, IValue(include_last_offset),
          IValue(padding_idx)};
}

}  // namespace

void register_embedding_bag(Library& lib) {
  OpBuilder b(lib,
              "aten::_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int "
              "mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int "
              "padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)",
              "embedding_bag",
              "the sum (times per_sample_weights), mean or max of the weight rows of each bag of indices (bags start at "
              "offsets), padding_idx skipped; with offset2bag, bag_size and max_indices as PyTorch's CPU kernel gives "
              "them; sparse ignored (the gradient is dense)");
  b.cpu(embedding_bag_cpu)
      .fake(embedding_bag_fake)
      .autograd(with_ops(lib.registry(), embedding_bag_backward), save_embedding_bag)
      .dtypes(kFloating)
      .samples(embedding_bag_sample);
}

}  // namespace opconform::reference
