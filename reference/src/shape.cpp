// Shape operators: views that share their input's storage (view, expand, permute, slice, ...)
// and the ops that move elements into a new tensor (cat, flip, repeat, constant_pad_nd, copies).
//
// Views are metadata only: one kernel for every backend (CompositeExplicitAutograd), and the same
// function as the fake kernel, so that a fake output is a view of the fake input exactly as the
// real output is a view of the real one (test_faketensor compares the aliasing). Their backward
// formulas put the gradient back where the view took it from, with registry ops (calls.h).
// New-tensor ops choose their output layout as PyTorch does (memory formats below), because
// fake and real kernels must agree on strides.
#include <algorithm>
#include <cstring>
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
using Ints = std::vector<int64_t>;

Ints vec(IntArrayRef a) { return Ints(a.begin(), a.end()); }
int64_t product(const Ints& v) { return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>()); }

// ---- symbolic sizes of fake outputs (test_aot_dispatch_dynamic) ----
//
// A fake input with symbolic sizes (s0, s1, ...) gives outputs whose sym_sizes() are expressions
// of those symbols, so a captured graph replays at other sizes. New tensors (cat, flip, repeat,
// constant_pad_nd, clone, _to_copy) are made from one shape plan over SymInt for the CPU and the
// fake kernel (Note [Shape plans over SymInt] in op_support.h). Views are metadata of their input:
// the kernel computes the concrete view (sizes at the hints, the aliasing, the offset), and the
// helpers below attach the view's symbolic sizes and strides, which follow from the input's.
using SymInts = std::vector<SymInt>;

SymInt sym_min(const SymInt& a, const SymInt& b) { return a <= b ? a : b; }
SymInt sym_max(const SymInt& a, const SymInt& b) { return a >= b ? a : b; }

// PyTorch's computeStride on symbolic sizes (comparisons record guards): the strides of a view
// of (sizes, strides) as new_sizes, or nullopt.
std::optional<SymInts> sym_view_strides(const SymInts& oldshape, const SymInts& oldstride, const SymInts& newshape) {
  SymInts newstride(newshape.size(), SymInt(0));
  if (oldshape.empty()) return contiguous_strides(newshape);
  SymInt numel = 1;
  for (const auto& s : oldshape) numel = numel * s;
  if (numel == SymInt(0)) {
    bool equal = oldshape.size() == newshape.size();
    for (size_t i = 0; equal && i < oldshape.size(); ++i) equal = oldshape[i] == newshape[i];
    if (equal) return oldstride;
    return contiguous_strides(newshape);
  }
  int64_t view_d = static_cast<int64_t>(newshape.size()) - 1;
  SymInt chunk_base_stride = oldstride.back();
  SymInt tensor_numel = 1;
  SymInt view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; tensor_d--) {
    const auto td = static_cast<size_t>(tensor_d);
    tensor_numel = tensor_numel * oldshape[td];
    if (tensor_d == 0 ||
        (oldshape[td - 1] != SymInt(1) && oldstride[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || newshape[static_cast<size_t>(view_d)] == SymInt(1))) {
        newstride[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel = view_numel * newshape[static_cast<size_t>(view_d)];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return newstride;
}

// view / reshape-as-view of a symbolic fake: one -1 inferred from the symbolic element count.
Tensor sym_view(const Tensor& self, const Tensor& out, const Ints& requested) {
  const SymInts sizes = self.sym_sizes();
  SymInt numel = 1;
  for (const auto& s : sizes) numel = numel * s;
  SymInts shape;
  SymInt known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < requested.size(); ++i) {
    if (requested[i] == -1) {
      infer = i;
      shape.push_back(SymInt(0));
    } else {
      shape.push_back(SymInt(requested[i]));
      known = known * SymInt(requested[i]);
    }
  }
  if (infer) {
    shape[*infer] = known == SymInt(0) ? SymInt(0) : floordiv(numel, known);
  } else {
    (void)(numel == known);  // the guard that the element count is the requested one
  }
  auto strides = sym_view_strides(sizes, self.sym_strides(), shape);
  if (!strides) return out;  // (unreachable: the concrete view succeeded at the hints)
  return with_sym_shape(out, std::move(shape), std::move(*strides));
}



// ---- registry calls formulas and rules share ----

Tensor pad(const Ops& ops, const Tensor& t, Ints pads) {
  return ops.tensor("aten::constant_pad_nd", {t, IValue(std::move(pads)), IValue(int64_t{0})});
}

Ints saved_ints(const autograd::AutogradContext& ctx, const std::string& key) { return ctx.get(key).to<Ints>(); }

// setup_context saving the first argument's sizes (as "sizes").
void save_self_sizes(autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
  ctx.set("sizes", IValue(vec(inputs[0].to_tensor().sizes())));
}

// ---- vmap ----

// The vmap rule of an op on one tensor (argument 0) whose other arguments refer to the logical
// (per-sample) tensor: the batch goes to dim 0, `shift` rewrites the arguments for the physical
// tensor (it gets the logical rank), the op runs once, every output carries the batch at dim 0.
using ShiftArgs = std::function<Stack(const Ops& ops, Stack args, int64_t logical_rank)>;
VmapRule batch_first_rule(Registry& registry, std::string op, ShiftArgs shift) {
  return [ops = Ops(registry), op, shift](const VmapInfo& info, const Stack& inputs,
                                          const std::vector<std::optional<int64_t>>& in_dims) {
    Stack args = inputs;
    Tensor physical = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
    args[0] = IValue(physical);
    Stack outputs = ops.call(op, shift(ops, std::move(args), physical.dim() - 1));
    std::vector<std::optional<int64_t>> out_dims(outputs.size(), int64_t{0});
    return std::make_pair(std::move(outputs), std::move(out_dims));
  };
}

// Shifts the int argument at `index` (a dim of a tensor of rank `rank + extra`) past the batch dim.
Stack shift_dim_arg(Stack args, size_t index, int64_t rank, std::string_view op, int64_t extra = 0) {
  args[index] = IValue(wrap_dim(args[index].to_int(), rank + extra, op) + 1);
  return args;
}
// A dim list shifted likewise; on a 0-d logical tensor its dims (0 or -1) name the tensor itself
// and are dropped (flip and squeeze of a 0-d tensor change nothing).
Stack shift_dim_list(Stack args, size_t index, int64_t rank, std::string_view op) {
  Ints dims;
  for (int64_t d : args[index].to<Ints>()) {
    const int64_t w = wrap_dim(d, rank, op);
    if (rank > 0) dims.push_back(w + 1);
  }
  args[index] = IValue(std::move(dims));
  return args;
}

// The vmap rule of a copy (clone, _to_copy) whose memory_format is argument `format_index`:
// preserve and contiguous apply to the physical tensor as it is (the batch stays where it was);
// channels-last applies per sample: the channel dim moved innermost (the batch outermost), a
// contiguous copy, moved back.
VmapRule copy_vmap_rule(Registry& registry, std::string op, size_t format_index) {
  return [ops = Ops(registry), op, format_index](const VmapInfo& info, const Stack& inputs,
                                                 const std::vector<std::optional<int64_t>>& in_dims) {
    const IValue& f = inputs[format_index];
    const MemoryFormat format = f.is_none() ? MemoryFormat::Preserve : f.to<MemoryFormat>();
    if (format == MemoryFormat::Preserve || format == MemoryFormat::Contiguous) {
      return std::make_pair(ops.call(op, inputs), std::vector<std::optional<int64_t>>{in_dims[0]});
    }
    Tensor physical = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
    const int64_t rank = physical.dim() - 1;
    OPCONFORM_CHECK(rank == (format == MemoryFormat::ChannelsLast ? 4 : 5), ErrorCode::kInvalidArgument, op,
                    ": memory_format ", to_string(format), " does not fit a tensor of rank ", rank);
    Ints to_inner{0, 1}, back{0, 1, rank};
    for (int64_t d = 3; d <= rank; ++d) to_inner.push_back(d);
    to_inner.push_back(2);
    for (int64_t d = 2; d < rank; ++d) back.push_back(d);
    Stack args = inputs;
    args[0] = IValue(ops.permute(physical, to_inner));
    args[format_index] = IValue(MemoryFormat::Contiguous);
    Tensor copy = ops.tensor(op, std::move(args));
    return std::make_pair(Stack{IValue(ops.permute(copy, back))}, std::vector<std::optional<int64_t>>{int64_t{0}});
  };
}

// ---- sample building ----
//
// Note [Samples the checks can take]: a few samples that are valid for the op are left out
// because a check would misjudge them (each is covered by shape_test instead):
//   [view samples] view fails, as PyTorch's does, when the input's strides cannot express the
//     new sizes (dims of a transposed, sliced or broadcast input merged). stride_invariance runs
//     every sample on such layouts and expects the contiguous copy's answer, so generated
//     targets only split dims and insert or drop size-1 dims, which every layout can view.
//   [_to_copy samples] gradcheck differentiates float64 inputs by finite differences; a cast to
//     float16/bfloat16/float32 rounds the differences away, so generated targets keep full
//     precision (float64, complex128) or are not differentiable (integers, bool).
//   [copy samples] edge_shapes broadcasts the edge-case tensors of a sample together and fails
//     when they do not broadcast (a src of lower rank than self does not once both get a
//     zero-size first dim), so src keeps self's rank (size-1 dims still broadcast).

Tensor draw_tensor(SampleDraw& draw, const Ints& sizes) { return draw.tensor(sizes, draw.dtype()); }
// A permutation of 0..n-1 (Fisher-Yates on draws), some entries negative.
Ints draw_permutation(SampleDraw& draw, int64_t n) {
  Ints p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[draw.integer(0, i)]);
  for (auto& d : p)
    if (draw.coin(25)) d -= n;
  return p;
}

// ---- the priority views: view, expand, unsqueeze, permute; and _to_copy ----

void register_view(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", fam,
              "the same elements with new sizes (one may be -1), sharing storage; strides must allow it");
  auto kernel = [](const Tensor& self, Ints size) { return self.view(size); };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, Ints size) {
        Tensor out = self.view(size);
        return symbolic_fake(self) ? sym_view(self, out, size) : out;
      })
      .dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {ops.reshape(g[0], saved_ints(ctx, "sizes")), Tensor()};
      },
      save_self_sizes);
  b.vmap(batch_first_rule(r, "aten::view", [](const Ops&, Stack args, int64_t) {
    Ints sizes = args[1].to<Ints>();
    sizes.insert(sizes.begin(), args[0].to_tensor().size(0));
    args[1] = IValue(std::move(sizes));
    return args;
  }));
  // New sizes every layout can view (Note [Samples the checks can take]): each dim split into
  // factors, size-1 dims inserted or dropped, sometimes one size given as -1.
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 4);
    Tensor self = draw_tensor(draw, shape);
    Ints target;
    for (int64_t s : shape) {
      if (draw.coin(20)) target.push_back(1);  // a size-1 dim inserted
      if (s == 1 && draw.coin(30)) continue;   // a size-1 dim dropped
      int64_t factor = 1;                      // s split as [factor, s / factor]
      for (int64_t k = 2; k < s && factor == 1; ++k) {
        if (s % k == 0 && draw.coin(40)) factor = k;
      }
      if (factor != 1) target.push_back(factor);
      target.push_back(s / factor);
    }
    if (draw.coin(20)) target.push_back(1);
    if (!target.empty() && draw.coin(30)) {
      const size_t i = static_cast<size_t>(draw.integer(0, static_cast<int64_t>(target.size()) - 1));
      Ints others = target;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
      if (product(others) != 0) target[i] = -1;
    }
    return Stack{IValue(self), IValue(target)};
  });
}

void register_expand(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", fam,
              "size-1 dims repeated (stride 0) and new leading dims, sharing storage; -1 keeps a size");
  auto kernel = [](const Tensor& self, Ints size, bool) { return self.expand(size); };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, Ints size, bool) {
        Tensor out = self.expand(size);
        if (!symbolic_fake(self)) return out;
        const SymInts in_sizes = self.sym_sizes(), in_strides = self.sym_strides();
        const int64_t n = static_cast<int64_t>(size.size()), lead = n - self.dim();
        SymInts sizes, strides;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t want = size[static_cast<size_t>(i)];
          if (i < lead) {
            sizes.push_back(SymInt(want));
            strides.push_back(SymInt(0));
            continue;
          }
          const auto j = static_cast<size_t>(i - lead);
          if (want == -1 || (in_sizes[j] == SymInt(want))) {  // (records the guard where want is given)
            sizes.push_back(in_sizes[j]);
            strides.push_back(in_strides[j]);
          } else {
            sizes.push_back(SymInt(want));
            strides.push_back(SymInt(0));
          }
        }
        return with_sym_shape(out, std::move(sizes), std::move(strides));
      })
      .dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {ops.sum_to(g[0], saved_ints(ctx, "sizes")), Tensor(), Tensor()};
      },
      save_self_sizes);
  b.vmap(batch_first_rule(r, "aten::expand", [](const Ops& ops, Stack args, int64_t rank) {
    Tensor physical = args[0].to_tensor();
    Ints sizes = args[1].to<Ints>();
    // New leading logical dims go after the batch dim.
    for (int64_t k = rank; k < static_cast<int64_t>(sizes.size()); ++k) physical = ops.unsqueeze(physical, 1);
    sizes.insert(sizes.begin(), physical.size(0));
    args[0] = IValue(physical);
    args[1] = IValue(std::move(sizes));
    return args;
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 3);
    Tensor self = draw_tensor(draw, shape);
    Ints target;
    const int64_t lead = draw.integer(0, 2);
    for (int64_t k = 0; k < lead; ++k) target.push_back(draw.integer(0, 3));
    for (int64_t s : shape) {
      if (s == 1 && draw.coin(60))
        target.push_back(draw.integer(0, 4));
      else
        target.push_back(draw.coin(25) ? -1 : s);
    }
    return Stack{IValue(self), IValue(target), IValue(draw.coin())};
  });
}

void register_unsqueeze(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", fam,
              "a size-1 dim inserted at dim (in [-rank-1, rank]), sharing storage");
  auto kernel = [](const Tensor& self, int64_t dim) { return self.unsqueeze(dim); };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, int64_t dim) {
        Tensor out = self.unsqueeze(dim);
        if (!symbolic_fake(self)) return out;
        const int64_t d = wrap_dim(dim, self.dim() + 1, "aten::unsqueeze");
        SymInts sizes = self.sym_sizes(), strides = self.sym_strides();
        const auto k = static_cast<size_t>(d);
        SymInt stride = d >= self.dim() ? SymInt(1) : sizes[k] * strides[k];
        sizes.insert(sizes.begin() + d, SymInt(1));
        strides.insert(strides.begin() + d, stride);
        return with_sym_shape(out, std::move(sizes), std::move(strides));
      })
      .dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {ops.tensor("aten::squeeze.dim", {g[0], ctx.get("dim")}), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        ctx.set("dim", IValue(wrap_dim(inputs[1].to_int(), inputs[0].to_tensor().dim() + 1, "aten::unsqueeze")));
      });
  b.vmap(batch_first_rule(r, "aten::unsqueeze", [](const Ops&, Stack args, int64_t rank) {
    return shift_dim_arg(std::move(args), 1, rank, "aten::unsqueeze", 1);
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 4);
    Tensor self = draw_tensor(draw, shape);
    const int64_t rank = static_cast<int64_t>(shape.size());
    return Stack{IValue(self), IValue(draw.integer(-rank - 1, rank))};
  });
}

void register_permute(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)", fam,
              "dims reordered (output dim i is input dim dims[i]), sharing storage");
  auto kernel = [](const Tensor& self, Ints dims) { return self.permute(dims); };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, Ints dims) {
        Tensor out = self.permute(dims);
        if (!symbolic_fake(self)) return out;
        const SymInts in_sizes = self.sym_sizes(), in_strides = self.sym_strides();
        SymInts sizes, strides;
        for (int64_t d : dims) {
          const auto k = static_cast<size_t>(wrap_dim(d, self.dim(), "aten::permute"));
          sizes.push_back(in_sizes[k]);
          strides.push_back(in_strides[k]);
        }
        return with_sym_shape(out, std::move(sizes), std::move(strides));
      })
      .dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints dims = saved_ints(ctx, "dims");
        Ints inverse(dims.size());
        for (size_t i = 0; i < dims.size(); ++i) inverse[static_cast<size_t>(dims[i])] = static_cast<int64_t>(i);
        return {ops.permute(g[0], inverse), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        Ints dims = inputs[1].to<Ints>();
        for (auto& d : dims) d = wrap_dim(d, inputs[0].to_tensor().dim(), "aten::permute", "dims");
        ctx.set("dims", IValue(std::move(dims)));
      });
  b.vmap(batch_first_rule(r, "aten::permute", [](const Ops&, Stack args, int64_t rank) {
    OPCONFORM_CHECK(static_cast<int64_t>(args[1].to<Ints>().size()) == rank, ErrorCode::kInvalidArgument,
                    "aten::permute: argument 'dims' has ", args[1].to<Ints>().size(), " entries for a tensor of rank ",
                    rank);
    Stack shifted = shift_dim_list(std::move(args), 1, rank, "aten::permute");
    Ints dims = shifted[1].to<Ints>();
    dims.insert(dims.begin(), 0);
    shifted[1] = IValue(std::move(dims));
    return shifted;
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 4);
    Tensor self = draw_tensor(draw, shape);
    return Stack{IValue(self), IValue(draw_permutation(draw, static_cast<int64_t>(shape.size())))};
  });
}

void register_to_copy(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
              "bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
              fam, "a copy converted to dtype / device, laid out per memory_format (preserve by default)");
  auto kernel = [name = b.name()](const Tensor& self, std::optional<DType> dtype, std::optional<Layout> layout,
                                  std::optional<Device> device, std::optional<bool> pin_memory, bool,
                                  std::optional<MemoryFormat> format) {
    check_strided(name, layout, pin_memory);
    Tensor out = new_like(self, format.value_or(MemoryFormat::Preserve),
                          TensorOptions(dtype.value_or(self.dtype()), device.value_or(self.device())), name);
    out.copy_(self);  // converts the dtype (a no-op on fake tensors)
    return out;
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        Tensor back = ops.tensor("aten::_to_copy", {g[0], ctx.get("dtype"), IValue(), ctx.get("device")});
        return {back, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor& self = inputs[0].to_tensor();
        ctx.set("dtype", IValue(self.dtype()));
        ctx.set("device", IValue(self.device()));
      });
  b.vmap(copy_vmap_rule(r, "aten::_to_copy", 6));
  b.samples([](SampleDraw& draw) {
    Tensor self = draw_tensor(draw, draw.shape(0, 4));
    // Targets: integers, bool, float64, complex128 (Note [Samples the checks can take]).
    static const std::vector<DType> targets = concat_dtypes(kIntegralAndBool, {DType::Float64, DType::Complex128});
    IValue dtype = draw.coin(70) ? IValue(targets[static_cast<size_t>(draw.integer(0, 7))]) : IValue();
    IValue format = draw.coin(30) ? IValue(draw.coin() ? MemoryFormat::Contiguous : MemoryFormat::Preserve) : IValue();
    return Stack{IValue(self), dtype, IValue(), IValue(), IValue(), IValue(false), format};
  });
}

// ---- the other views ----

// Pads dim `dim` of t (rank `rank`) with `left` zeros before and `right` after (negative: crops).
Tensor pad_dim(const Ops& ops, const Tensor& t, int64_t dim, int64_t left, int64_t right) {
  Ints pads(static_cast<size_t>(2 * (t.dim() - dim)), 0);
  pads[pads.size() - 2] = left;
  pads[pads.size() - 1] = right;
  return pad(ops, t, std::move(pads));
}

// The gradient of a view that takes the elements at `positions` (an int64 tensor of grad's shape)
// of a flat buffer of `length` elements: zeros with grad added at those positions (a position
// taken twice gets both). Recorded through aten::scatter_add, so it is differentiable again.
Tensor scatter_into_zeros(const Ops& ops, const Tensor& grad, const Tensor& positions, int64_t length) {
  return ops.tensor("aten::scatter_add", {ops.full({length}, int64_t{0}, grad), IValue(int64_t{0}),
                                          ops.reshape(positions, {-1}), ops.reshape(grad, {-1})});
}

void register_slice(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> "
              "Tensor(a)",
              fam,
              "elements start, start+step, ... before end along dim (start/end clamped into range), sharing storage");
  auto kernel = [](const Tensor& self, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                   int64_t step) { return self.slice(dim, start, end, step); };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, int64_t dim, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt,
               int64_t step) {
        Tensor out = self.slice(dim, start_opt, end_opt, step);
        if (!symbolic_fake(self)) return out;
        const auto d = static_cast<size_t>(wrap_dim(dim, self.dim(), "aten::slice"));
        SymInts sizes = self.sym_sizes(), strides = self.sym_strides();
        const SymInt n = sizes[d];
        SymInt start = start_opt.value_or(0);
        SymInt end = end_opt ? SymInt(*end_opt) : n;
        if (start_opt.value_or(0) < 0) start = start + n;
        if (end_opt && *end_opt < 0) end = end + n;
        start = sym_min(sym_max(start, SymInt(0)), n);
        end = sym_min(sym_max(end, start), n);
        sizes[d] = floordiv(end - start + SymInt(step - 1), SymInt(step));
        strides[d] = strides[d] * SymInt(step);
        return with_sym_shape(out, std::move(sizes), std::move(strides));
      })
      .dtypes(kAll);
  // Backward: the gradient spread to every step-th place (a size-1 dim padded to step, merged),
  // then padded with zeros before `start` and up to the input's size (cropped where it overshoots).
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const int64_t dim = ctx.get("dim").to_int(), start = ctx.get("start").to_int();
        const int64_t step = ctx.get("step").to_int(), n = ctx.get("n").to_int();
        Tensor spread = g[0];
        if (step > 1) {
          Ints merged = vec(g[0].sizes());
          merged[static_cast<size_t>(dim)] *= step;
          spread = ops.reshape(pad_dim(ops, ops.unsqueeze(g[0], dim + 1), dim + 1, 0, step - 1), merged);
        }
        return {pad_dim(ops, spread, dim, start, n - start - spread.size(dim)), Tensor(), Tensor(), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor& self = inputs[0].to_tensor();
        const int64_t dim = wrap_dim(inputs[1].to_int(), self.dim(), "aten::slice.Tensor");
        const int64_t n = self.size(dim);
        int64_t start = inputs[2].is_none() ? 0 : inputs[2].to_int();
        if (start < 0) start += n;
        ctx.set("dim", IValue(dim));
        ctx.set("start", IValue(std::clamp<int64_t>(start, 0, n)));
        ctx.set("step", inputs[4]);
        ctx.set("n", IValue(n));
      });
  b.vmap(batch_first_rule(r, b.name(), [](const Ops&, Stack args, int64_t rank) {
    return shift_dim_arg(std::move(args), 1, rank, "aten::slice.Tensor");
  }));
  // start/end in [-2n, 2n]: negative ones count from the end, out-of-range ones clamp.
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(1, 4);
    Tensor self = draw_tensor(draw, shape);
    const int64_t dim = draw_dim(draw, static_cast<int64_t>(shape.size()));
    const int64_t n = shape[static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(shape.size()) : dim)];
    auto bound = [&]() { return draw.coin(25) ? IValue() : IValue(draw.integer(-2 * n - 1, 2 * n + 1)); };
    IValue start = bound(), end = bound();
    return Stack{IValue(self), IValue(dim), start, end, IValue(draw.integer(1, 3))};
  });
}

void register_select(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", fam,
              "the slice at index (negative counts from the end) along dim, that dim removed, sharing storage");
  auto kernel = [](const Tensor& self, int64_t dim, int64_t index) { return self.select(dim, index); };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, int64_t dim, int64_t index) {
        Tensor out = self.select(dim, index);
        if (!symbolic_fake(self)) return out;
        const int64_t d = wrap_dim(dim, self.dim(), "aten::select");
        SymInts sizes = self.sym_sizes(), strides = self.sym_strides();
        sizes.erase(sizes.begin() + d);
        strides.erase(strides.begin() + d);
        return with_sym_shape(out, std::move(sizes), std::move(strides));
      })
      .dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const int64_t dim = ctx.get("dim").to_int(), index = ctx.get("index").to_int(), n = ctx.get("n").to_int();
        return {pad_dim(ops, ops.unsqueeze(g[0], dim), dim, index, n - index - 1), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor& self = inputs[0].to_tensor();
        const int64_t dim = wrap_dim(inputs[1].to_int(), self.dim(), "aten::select.int");
        const int64_t n = self.size(dim);
        const int64_t index = inputs[2].to_int();
        ctx.set("dim", IValue(dim));
        ctx.set("index", IValue(index < 0 ? index + n : index));
        ctx.set("n", IValue(n));
      });
  b.vmap(batch_first_rule(r, b.name(), [](const Ops&, Stack args, int64_t rank) {
    return shift_dim_arg(std::move(args), 1, rank, "aten::select.int");
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(1, 4, 1, /*allow_empty=*/false);
    const int64_t dim = draw_dim(draw, static_cast<int64_t>(shape.size()));
    const int64_t n = shape[static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(shape.size()) : dim)];
    Tensor self = draw_tensor(draw, shape);
    return Stack{IValue(self), IValue(dim), IValue(draw.integer(-n, n - 1))};
  });
}

// squeeze.dim and squeeze.dims: size-1 dims among `dims` removed (others kept), sharing storage.
Tensor squeeze_dims(const Tensor& self, const Ints& dims, std::string_view op) {
  const std::vector<bool> chosen = dim_mask(dims, self.dim(), op);
  Ints sizes, strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (chosen[static_cast<size_t>(d)] && self.size(d) == 1) continue;
    sizes.push_back(self.size(d));
    strides.push_back(self.stride(d));
  }
  Tensor out = self.as_strided(sizes, strides, self.storage_offset());
  if (!symbolic_fake(self)) return out;
  const SymInts in_sizes = self.sym_sizes(), in_strides = self.sym_strides();
  SymInts sym_sizes, sym_strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (chosen[static_cast<size_t>(d)] && self.size(d) == 1) continue;
    sym_sizes.push_back(in_sizes[static_cast<size_t>(d)]);
    sym_strides.push_back(in_strides[static_cast<size_t>(d)]);
  }
  return with_sym_shape(out, std::move(sym_sizes), std::move(sym_strides));
}

void register_squeeze(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  // Backward of both: the gradient with the removed size-1 dims back.
  auto backward = [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
    return {ops.reshape(g[0], saved_ints(ctx, "sizes")), Tensor()};
  };
  {
    OpBuilder b(lib, "aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", fam,
                "dim removed when its size is 1 (else the same sizes), sharing storage");
    auto kernel = [name = b.name()](const Tensor& self, int64_t dim) { return squeeze_dims(self, {dim}, name); };
    b.composite_explicit(kernel).fake(kernel).dtypes(kAll).autograd(backward, save_self_sizes);
    b.vmap(batch_first_rule(r, b.name(), [](const Ops& ops, Stack args, int64_t rank) {
      if (rank == 0) {  // squeezing a 0-d tensor changes nothing: [B] -> [B, 1] -> [B]
        wrap_dim(args[1].to_int(), 0, "aten::squeeze.dim");
        args[0] = IValue(ops.unsqueeze(args[0].to_tensor(), 1));
        args[1] = IValue(int64_t{1});
        return args;
      }
      return shift_dim_arg(std::move(args), 1, rank, "aten::squeeze.dim");
    }));
    b.samples([](SampleDraw& draw) {
      Ints shape = draw.shape(0, 4, 1);
      for (auto& s : shape)
        if (draw.coin(40)) s = 1;
      Tensor self = draw_tensor(draw, shape);
      return Stack{IValue(self), IValue(draw_dim(draw, static_cast<int64_t>(shape.size())))};
    });
  }
  {
    OpBuilder b(lib, "aten::squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", fam,
                "the size-1 dims among dim removed (a dim may not repeat), sharing storage");
    auto kernel = [name = b.name()](const Tensor& self, Ints dims) { return squeeze_dims(self, dims, name); };
    b.composite_explicit(kernel).fake(kernel).dtypes(kAll).autograd(backward, save_self_sizes);
    b.vmap(batch_first_rule(r, b.name(), [](const Ops&, Stack args, int64_t rank) {
      return shift_dim_list(std::move(args), 1, rank, "aten::squeeze.dims");
    }));
    b.samples([](SampleDraw& draw) {
      Ints shape = draw.shape(0, 4, 1);
      for (auto& s : shape)
        if (draw.coin(40)) s = 1;
      Tensor self = draw_tensor(draw, shape);
      const int64_t rank = static_cast<int64_t>(shape.size());
      Ints dims;
      for (int64_t d = 0; d < std::max<int64_t>(rank, 1); ++d)
        if (draw.coin()) dims.push_back(draw.coin(25) ? d - std::max<int64_t>(rank, 1) : d);
      return Stack{IValue(self), IValue(dims)};
    });
  }
}

void register_diagonal(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", fam,
              "the diagonal of dims dim1, dim2 (offset > 0: above) as a last dim, sharing storage");
  auto kernel = [](const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
    return self.diagonal(offset, dim1, dim2);
  };
  b.composite_explicit(kernel)
      .fake([](const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
        Tensor out = self.diagonal(offset, dim1, dim2);
        if (!symbolic_fake(self)) return out;
        const auto d1 = static_cast<size_t>(wrap_dim(dim1, self.dim(), "aten::diagonal"));
        const auto d2 = static_cast<size_t>(wrap_dim(dim2, self.dim(), "aten::diagonal"));
        const SymInts in_sizes = self.sym_sizes(), in_strides = self.sym_strides();
        const SymInt off(offset);
        const SymInt diag = offset >= 0 ? sym_max(sym_min(in_sizes[d1], in_sizes[d2] - off), SymInt(0))
                                        : sym_max(sym_min(in_sizes[d1] + off, in_sizes[d2]), SymInt(0));
        SymInts sizes, strides;
        for (size_t d = 0; d < in_sizes.size(); ++d) {
          if (d == d1 || d == d2) continue;
          sizes.push_back(in_sizes[d]);
          strides.push_back(in_strides[d]);
        }
        sizes.push_back(diag);
        strides.push_back(in_strides[d1] + in_strides[d2]);
        return with_sym_shape(out, std::move(sizes), std::move(strides));
      })
      .dtypes(kAll);
  // Backward: the gradient added at the diagonal's element positions in a flat zero buffer
  // (positions: the same diagonal taken from the element indices 0..numel-1).
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints sizes = saved_ints(ctx, "sizes");
        const int64_t numel = product(sizes);
        Tensor positions = ops.tensor("aten::diagonal", {ops.view(ops.arange(numel, g[0].device()), sizes),
                                                         ctx.get("offset"), ctx.get("dim1"), ctx.get("dim2")});
        return {ops.view(scatter_into_zeros(ops, g[0], positions, numel), sizes), Tensor(), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        save_self_sizes(ctx, inputs, {});
        ctx.set("offset", inputs[1]);
        ctx.set("dim1", inputs[2]);
        ctx.set("dim2", inputs[3]);
      });
  b.vmap(batch_first_rule(r, b.name(), [](const Ops&, Stack args, int64_t rank) {
    return shift_dim_arg(shift_dim_arg(std::move(args), 2, rank, "aten::diagonal"), 3, rank, "aten::diagonal");
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(2, 4);
    Tensor self = draw_tensor(draw, shape);
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t dim1 = draw_dim(draw, rank);
    int64_t dim2 = draw_dim(draw, rank);
    if ((dim2 - dim1) % rank == 0) dim2 = (dim1 + 1) % rank;
    return Stack{IValue(self), IValue(draw.integer(-4, 4)), IValue(dim1), IValue(dim2)};
  });
}

// Element offsets (from 0) a strided geometry spans: offset + sum (size_i - 1) * stride_i + 1.
int64_t geometry_end(IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  int64_t end = offset + 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return offset;
    end += (sizes[i] - 1) * strides[i];
  }
  return end;
}

void register_as_strided(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> "
              "Tensor(a)",
              fam, "a view of self's storage with the given sizes, strides and offset (default: self's offset)");
  auto kernel = [](const Tensor& self, Ints size, Ints stride, std::optional<int64_t> offset) {
    return self.as_strided(size, stride, offset);
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll).addresses_storage();
  // Backward over the storage: the gradient added at the output's storage positions, then read
  // back through self's geometry; where self's elements share memory each gets its share.
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints sizes = saved_ints(ctx, "sizes"), strides = saved_ints(ctx, "strides");
        const int64_t offset = ctx.get("offset").to_int();
        const Ints out_sizes = saved_ints(ctx, "out_sizes"), out_strides = saved_ints(ctx, "out_strides");
        const int64_t out_offset = ctx.get("out_offset").to_int();
        const int64_t length =
            std::max(geometry_end(sizes, strides, offset), geometry_end(out_sizes, out_strides, out_offset));
        auto view_of = [&](const Tensor& flat, const Ints& sz, const Ints& st, int64_t off) {
          return ops.tensor("aten::as_strided", {flat, IValue(sz), IValue(st), IValue(off)});
        };
        const Tensor storage = ops.arange(length, g[0].device());
        Tensor grad =
            view_of(scatter_into_zeros(ops, g[0], view_of(storage, out_sizes, out_strides, out_offset), length), sizes,
                    strides, offset);
        if (ctx.get("self_overlaps").to_bool()) {
          Tensor ones = ops.full(sizes, int64_t{1}, g[0]);
          Tensor positions = view_of(storage, sizes, strides, offset);
          grad = ops.div(grad, view_of(scatter_into_zeros(ops, ones, positions, length), sizes, strides, offset));
        }
        return {grad, Tensor(), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
        const Tensor& self = inputs[0].to_tensor();
        const Tensor& out = outputs[0].to_tensor();
        ctx.set("sizes", IValue(vec(self.sizes())));
        ctx.set("strides", IValue(vec(self.strides())));
        ctx.set("offset", IValue(self.storage_offset()));
        ctx.set("out_sizes", IValue(vec(out.sizes())));
        ctx.set("out_strides", IValue(vec(out.strides())));
        ctx.set("out_offset", IValue(out.storage_offset()));
        ctx.set("self_overlaps", IValue(!self.is_non_overlapping_and_dense()));
      });
  // functorch's semantics: sample i is a view of the physical storage with the given sizes and
  // strides at offset `storage_offset` + i * (the batch dim's stride), as if every sample's
  // storage began at the physical tensor's offset.
  b.vmap([ops = Ops(r)](const VmapInfo& info, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    Tensor physical = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
    Ints size = inputs[1].to<Ints>(), stride = inputs[2].to<Ints>();
    size.insert(size.begin(), info.batch_size);
    stride.insert(stride.begin(), physical.stride(0));
    const int64_t offset = inputs[3].is_none() ? physical.storage_offset() : inputs[3].to_int();
    Stack outputs = ops.call("aten::as_strided", {IValue(physical), IValue(size), IValue(stride), IValue(offset)});
    return std::make_pair(std::move(outputs), std::vector<std::optional<int64_t>>{int64_t{0}});
  });
  // Note [as_strided samples]: sizes, strides and offset inside self's storage, strides sometimes
  // 0 (overlapping outputs). self is contiguous at offset 0, the one layout whose storage holds
  // exactly its elements in order: as_strided reads the storage, so on other layouts the checks
  // that compare an input with a copy of it (dtype_consistency, vmap_consistency) would compare
  // different storages.
  b.samples([](SampleDraw& draw) {
    Tensor self = draw_tensor(draw, draw.shape(0, 3)).contiguous().clone();  // offset 0
    const int64_t storage = static_cast<int64_t>(self.storage()->nbytes() / self.itemsize());
    const int64_t rank = draw.integer(storage == 0 ? 1 : 0, 3);
    Ints size(static_cast<size_t>(rank)), stride(static_cast<size_t>(rank));
    int64_t span = 0;
    for (int64_t i = 0; i < rank; ++i) {
      size[static_cast<size_t>(i)] = draw.integer(0, 3);
      stride[static_cast<size_t>(i)] = draw.integer(0, 3);
      span += std::max<int64_t>(size[static_cast<size_t>(i)] - 1, 0) * stride[static_cast<size_t>(i)];
    }
    if (storage == 0 || span >= storage) std::fill(size.begin(), size.end(), storage == 0 ? 0 : 1);
    const int64_t used = geometry_end(size, stride, 0);
    IValue offset = draw.coin(30) && self.storage_offset() + used <= storage
                        ? IValue()
                        : IValue(draw.integer(0, std::max<int64_t>(storage - used, 0)));
    return Stack{IValue(self), IValue(size), IValue(stride), offset};
  });
}

void register_alias_and_split(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::alias(Tensor(a) self) -> Tensor(a)", fam, "a new tensor object over self's memory");
    auto kernel = [](const Tensor& self) {
      return self.as_strided(self.sizes(), self.strides(), self.storage_offset());
    };
    b.composite_explicit(kernel)
        .fake([](const Tensor& self) {
          Tensor out = self.as_strided(self.sizes(), self.strides(), self.storage_offset());
          return symbolic_fake(self) ? with_sym_shape(out, self.sym_sizes(), self.sym_strides()) : out;
        })
        .dtypes(kAll);
    b.autograd([](autograd::AutogradContext&, const Grads& g) -> Grads { return {g[0]}; });
    b.vmap([ops = Ops(r)](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
      return std::make_pair(ops.call("aten::alias", inputs), std::vector<std::optional<int64_t>>{in_dims[0]});
    });
  }
  OpBuilder b(lib, "aten::split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]", fam,
              "consecutive pieces of the given sizes along dim (they must sum to its size), sharing storage");
  auto kernel = [name = b.name()](const Tensor& self, Ints sizes, int64_t dim) {
    OPCONFORM_CHECK(self.dim() > 0, ErrorCode::kInvalidArgument, name,
                    ": split expects at least a 1-dimensional tensor (argument 'self')");
    dim = wrap_dim(dim, self.dim(), name);
    int64_t total = 0;
    for (int64_t s : sizes) {
      OPCONFORM_CHECK(s >= 0, ErrorCode::kInvalidArgument, name, ": argument 'split_sizes' ", shape_string(sizes),
                      " has a negative entry");
      total += s;
    }
    OPCONFORM_CHECK(total == self.size(dim), ErrorCode::kInvalidArgument, name,
                    ": argument 'split_sizes' must sum exactly to ", self.size(dim), " (the input's size at dimension ",
                    dim, "), but got split_sizes=", shape_string(sizes));
    std::vector<Tensor> pieces;
    int64_t start = 0;
    const bool symbolic = symbolic_fake(self);
    if (symbolic) (void)(self.sym_sizes()[static_cast<size_t>(dim)] == SymInt(total));  // the guard
    for (int64_t s : sizes) {
      pieces.push_back(self.narrow(dim, start, s));
      start += s;
      if (symbolic) {
        SymInts piece_sizes = self.sym_sizes();
        piece_sizes[static_cast<size_t>(dim)] = SymInt(s);
        pieces.back() = with_sym_shape(pieces.back(), std::move(piece_sizes), self.sym_strides());
      }
    }
    return pieces;
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {ops.tensor("aten::cat", {IValue(g), ctx.get("dim")}), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        ctx.set("dim", IValue(wrap_dim(inputs[2].to_int(), inputs[0].to_tensor().dim(), "aten::split_with_sizes")));
      });
  b.vmap(batch_first_rule(r, b.name(), [](const Ops&, Stack args, int64_t rank) {
    return shift_dim_arg(std::move(args), 2, rank, "aten::split_with_sizes");
  }));
  // Split sizes summing to the dim's size, zeros included.
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(1, 4);
    Tensor self = draw_tensor(draw, shape);
    const int64_t dim = draw_dim(draw, static_cast<int64_t>(shape.size()));
    int64_t left = shape[static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(shape.size()) : dim)];
    Ints sizes;
    while (left > 0 || sizes.empty() || draw.coin(10)) {
      const int64_t s = draw.integer(0, left);
      sizes.push_back(s);
      left -= s;
      if (sizes.size() > 5) break;
    }
    sizes.back() += left;
    return Stack{IValue(self), IValue(sizes), IValue(dim)};
  });
}

// ---- new tensors: cat, flip, repeat, constant_pad_nd, clone, copy ----

// cat's output: PyTorch's checks and layout. Legacy rule: 1-d empty tensors are skipped (any
// sizes go), though they count for the dtype and the memory format.
struct CatPlan {
  std::vector<Tensor> kept;
  int64_t dim = 0;
  SymInts sizes, strides;  // Note [Shape plans over SymInt]
  DType dtype;
};

CatPlan plan_cat(const std::vector<Tensor>& tensors, int64_t dim, std::string_view op) {
  OPCONFORM_CHECK(!tensors.empty(), ErrorCode::kInvalidArgument, op,
                  ": expected a non-empty list of Tensors (argument 'tensors')");
  CatPlan plan;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    OPCONFORM_CHECK(t.dim() > 0, ErrorCode::kInvalidArgument, op, ": zero-dimensional tensor (at position ", i,
                    " of argument 'tensors') cannot be concatenated");
    OPCONFORM_CHECK(t.device() == tensors[0].device(), ErrorCode::kInvalidArgument, op,
                    ": expected all tensors to be on the same device, but tensor ", i, " is on ",
                    t.device().to_string(), " and tensor 0 on ", tensors[0].device().to_string());
    if (!(t.dim() == 1 && t.size(0) == 0)) plan.kept.push_back(t);
  }
  plan.dtype = result_type(tensors);
  plan.sizes = {0};
  if (!plan.kept.empty()) {
    const Tensor& first = plan.kept.front();
    const SymInts first_sizes = first.sym_sizes();
    plan.dim = wrap_dim(dim, first.dim(), op);
    plan.sizes = first_sizes;
    plan.sizes[static_cast<size_t>(plan.dim)] = 0;
    for (size_t i = 0; i < plan.kept.size(); ++i) {
      const Tensor& t = plan.kept[i];
      OPCONFORM_CHECK(t.dim() == first.dim(), ErrorCode::kInvalidArgument, op,
                      ": tensors must have the same number of dimensions: got ", first.dim(), " and ", t.dim());
      const SymInts sizes = t.sym_sizes();
      for (size_t d = 0; d < sizes.size(); ++d) {  // equal sizes: guards where symbolic
        OPCONFORM_CHECK(d == static_cast<size_t>(plan.dim) || sizes[d] == first_sizes[d], ErrorCode::kInvalidArgument, op,
                        ": sizes of tensors must match except in dimension ", plan.dim, ". Expected size ",
                        first_sizes[d], " but got size ", sizes[d], " for tensor number ", i, " in the list");
      }
      plan.sizes[static_cast<size_t>(plan.dim)] += sizes[static_cast<size_t>(plan.dim)];
    }
  }
  // Channels-last when every input suggests it (so every one is 4-d, or every one 5-d), else
  // contiguous.
  bool channels_last = true;
  for (const Tensor& t : tensors) channels_last = channels_last && strides_like_channels_last(t.sizes(), t.strides());
  plan.strides = format_strides(plan.sizes, channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
  return plan;
}

// Note [cat's gradient]: core's autograd gives no gradients to Tensor[] arguments, so cat's
// kernel at the Autograd key, when some input requires grad, builds the result from
// differentiable registry ops: each kept input (in the result dtype) padded with zeros to its
// place along dim, the pieces added. The values are cat's (x + 0 == x; only a zero's sign may
// change); each input's gradient is its slice of the output's (constant_pad_nd's backward crops).
// Without grad it dispatches on to the kernels below autograd.
KernelFunction cat_autograd_kernel(Registry& registry, const std::string& name) {
  return KernelFunction::from_boxed(
      [name, ops = Ops(registry)](const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
        const size_t base = stack.size() - 2;
        const std::vector<Tensor> tensors = stack[base].to_tensor_list();
        const bool needs_grad = call_records(op, stack);
        const CatPlan plan = needs_grad ? plan_cat(tensors, stack[base + 1].to_int(), name) : CatPlan{};
        if (!needs_grad || plan.kept.empty()) {
          op.redispatch_boxed(keys.after(DispatchKey::AutogradOther), stack);
          return;
        }
        // The pads are integers: at the hints for symbolic fakes (the recorded graph's constants).
        const int64_t total = concrete_stand_in(plan.sizes[static_cast<size_t>(plan.dim)]);
        Tensor out;
        int64_t start = 0;
        for (const Tensor& t : plan.kept) {
          const int64_t size = t.size(plan.dim);
          Tensor piece = pad_dim(ops, ops.to(t, plan.dtype), plan.dim, start, total - start - size);
          out = out.defined() ? ops.add(out, piece) : piece;
          start += size;
        }
        stack.resize(base);
        stack.emplace_back(out);
      });
}

void register_cat(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::cat(Tensor[] tensors, int dim=0) -> Tensor", fam,
              "the tensors joined along dim (dtypes promoted; 1-d empty tensors skipped, as PyTorch's legacy rule)");
  const std::string name = b.name();
  b.cpu([name](const std::vector<Tensor>& tensors, int64_t dim) {
    CatPlan plan = plan_cat(tensors, dim, name);
    Tensor out = empty_strided(plan.sizes, plan.strides, TensorOptions(plan.dtype, tensors[0].device()));
    int64_t start = 0;
    for (const Tensor& t : plan.kept) {
      out.narrow(plan.dim, start, t.size(plan.dim)).copy_(t);
      start += t.size(plan.dim);
    }
    return out;
  });
  b.fake([name](const std::vector<Tensor>& tensors, int64_t dim) {
    CatPlan plan = plan_cat(tensors, dim, name);
    return empty_strided(plan.sizes, plan.strides, TensorOptions(plan.dtype, tensors[0].device()));
  });
  b.dtypes(kAll);
  b.autograd_kernel(cat_autograd_kernel(r, name));
  // The rule receives every tensor batched at 0; a logical 1-d empty tensor is dropped, as the
  // op would skip it (its dtype still counts: the others are converted first).
  b.vmap([ops = Ops(r)](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>&) {
    const std::vector<Tensor> all = inputs[0].to_tensor_list();
    std::vector<Tensor> logical;
    for (const Tensor& t : all) logical.push_back(t.select(0, 0));
    const DType dtype = result_type(logical);
    std::vector<Tensor> kept;
    int64_t rank = 0;
    for (const Tensor& t : all) {
      if (t.dim() == 2 && t.size(1) == 0) continue;
      kept.push_back(ops.to(t, dtype));
      rank = t.dim() - 1;
    }
    if (kept.empty()) kept.push_back(ops.to(all.front(), dtype));
    Stack args{IValue(kept), IValue(wrap_dim(inputs[1].to_int(), std::max<int64_t>(rank, 1), "aten::cat") + 1)};
    return std::make_pair(ops.call("aten::cat", std::move(args)), std::vector<std::optional<int64_t>>{int64_t{0}});
  });
  // 1 to 3 tensors of one dtype whose sizes agree except along dim; sometimes a 1-d empty one.
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(1, 4);
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t dim = draw_dim(draw, rank);
    const DType dtype = draw.dtype();
    std::vector<Tensor> tensors;
    const int64_t count = draw.integer(1, 3);
    for (int64_t i = 0; i < count; ++i) {
      if (draw.coin(10)) {
        tensors.push_back(draw.tensor({0}, dtype));
        continue;
      }
      Ints sizes = shape;
      sizes[static_cast<size_t>(dim < 0 ? dim + rank : dim)] = draw.integer(0, 3);
      tensors.push_back(draw.tensor(sizes, dtype));
    }
    return Stack{IValue(tensors), IValue(dim)};
  });
}

void register_flip(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::flip(Tensor self, int[] dims) -> Tensor", fam,
              "a copy with the order of elements reversed along each of dims");
  const std::string name = b.name();
  b.cpu([name](const Tensor& self, Ints dims) {
    const std::vector<bool> flipped = dim_mask(dims, self.dim(), name, "dims");
    Tensor out = new_like(self, MemoryFormat::Preserve, self.options(), name);
    if (out.numel() == 0) return out;
    // Read self backwards along flipped dims: start at their last element, negated strides.
    Ints in_strides = vec(self.strides());
    const size_t itemsize = self.itemsize();
    const char* in = static_cast<const char*>(self.const_data_ptr());
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (!flipped[static_cast<size_t>(d)]) continue;
      in += (self.size(d) - 1) * self.stride(d) * static_cast<int64_t>(itemsize);
      in_strides[static_cast<size_t>(d)] = -self.stride(d);
    }
    char* o = static_cast<char*>(out.mutable_data_ptr());
    opconform::detail::strided_loop<2>(out.sizes(), {out.strides(), IntArrayRef(in_strides)}, [&](const auto& offs) {
      std::memcpy(o + offs[0] * static_cast<int64_t>(itemsize), in + offs[1] * static_cast<int64_t>(itemsize),
                  itemsize);
    });
    return out;
  });
  b.fake([name](const Tensor& self, Ints dims) {
    dim_mask(dims, self.dim(), name, "dims");
    return new_like(self, MemoryFormat::Preserve, self.options(), name);
  });
  b.dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {ops.tensor("aten::flip", {g[0], ctx.get("dims")}), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.set("dims", inputs[1]); });
  b.vmap(batch_first_rule(r, name, [](const Ops&, Stack args, int64_t rank) {
    return shift_dim_list(std::move(args), 1, rank, "aten::flip");
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 4);
    Tensor self = draw_tensor(draw, shape);
    const int64_t rank = static_cast<int64_t>(shape.size());
    Ints dims;
    for (int64_t d = 0; d < std::max<int64_t>(rank, 1); ++d)
      if (draw.coin()) dims.push_back(draw.coin(25) ? d - std::max<int64_t>(rank, 1) : d);
    return Stack{IValue(self), IValue(dims)};
  });
}

// repeat: self (padded with leading size-1 dims to len(repeats)) tiled repeats[i] times along i.
struct RepeatPlan {
  SymInts padded, target;  // Note [Shape plans over SymInt]
};
RepeatPlan plan_repeat(const Tensor& self, const Ints& repeats, std::string_view op) {
  const int64_t n = static_cast<int64_t>(repeats.size());
  OPCONFORM_CHECK(n >= self.dim(), ErrorCode::kInvalidArgument, op, ": number of dimensions of argument 'repeats' (", n,
                  ") can not be smaller than the number of dimensions of the tensor (", self.dim(), ")");
  RepeatPlan plan;
  plan.padded.assign(static_cast<size_t>(n - self.dim()), SymInt(1));
  const SymInts sizes = self.sym_sizes();
  plan.padded.insert(plan.padded.end(), sizes.begin(), sizes.end());
  for (int64_t i = 0; i < n; ++i) {
    OPCONFORM_CHECK(repeats[static_cast<size_t>(i)] >= 0, ErrorCode::kInvalidArgument, op,
                    ": argument 'repeats' has a negative entry ", repeats[static_cast<size_t>(i)]);
    plan.target.push_back(plan.padded[static_cast<size_t>(i)] * repeats[static_cast<size_t>(i)]);
  }
  return plan;
}

void register_repeat(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::repeat(Tensor self, SymInt[] repeats) -> Tensor", fam,
              "self tiled repeats[i] times along dim i (leading dims added when repeats is longer)");
  const std::string name = b.name();
  b.cpu([name](const Tensor& self, Ints repeats) {
    const RepeatPlan plan = plan_repeat(self, repeats, name);
    Tensor out = empty(plan.target, self.options());
    if (out.numel() == 0) return out;
    // out seen as [r0, p0, r1, p1, ...] receives self seen as [1, p0, 1, p1, ...] expanded.
    const Ints padded = expect_ints(plan.padded);
    const Ints out_strides = vec(out.strides());
    const Ints self_strides = vec(self.view(padded).strides());
    Ints tiled_sizes, tiled_out, tiled_in;
    for (size_t i = 0; i < repeats.size(); ++i) {
      tiled_sizes.insert(tiled_sizes.end(), {repeats[i], padded[i]});
      tiled_out.insert(tiled_out.end(), {padded[i] * out_strides[i], out_strides[i]});
      tiled_in.insert(tiled_in.end(), {0, self_strides[i]});
    }
    out.as_strided(tiled_sizes, tiled_out, 0).copy_(self.as_strided(tiled_sizes, tiled_in, self.storage_offset()));
    return out;
  });
  b.fake([name](const Tensor& self, Ints repeats) { return empty(plan_repeat(self, repeats, name).target, self.options()); });
  b.dtypes(kAll);
  // Backward: the gradient seen as [r0, p0, r1, p1, ...], summed over the repeat dims.
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        const Ints repeats = saved_ints(ctx, "repeats"), sizes = saved_ints(ctx, "sizes");
        if (repeats.empty()) return {g[0], Tensor()};
        Ints padded(repeats.size() - sizes.size(), 1);
        padded.insert(padded.end(), sizes.begin(), sizes.end());
        Ints tiled, repeat_dims;
        for (size_t i = 0; i < repeats.size(); ++i) {
          repeat_dims.push_back(static_cast<int64_t>(tiled.size()));
          tiled.insert(tiled.end(), {repeats[i], padded[i]});
        }
        Tensor summed = ops.sum_dims(ops.reshape(g[0], tiled), repeat_dims, /*keepdim=*/false);
        return {ops.reshape(summed, sizes), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        save_self_sizes(ctx, inputs, {});
        ctx.set("repeats", inputs[1]);
      });
  b.vmap(batch_first_rule(r, name, [](const Ops& ops, Stack args, int64_t rank) {
    Tensor physical = args[0].to_tensor();
    Ints repeats = args[1].to<Ints>();
    for (int64_t k = rank; k < static_cast<int64_t>(repeats.size()); ++k) physical = ops.unsqueeze(physical, 1);
    repeats.insert(repeats.begin(), 1);
    args[0] = IValue(physical);
    args[1] = IValue(std::move(repeats));
    return args;
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 3);
    Tensor self = draw_tensor(draw, shape);
    Ints repeats(shape.size() + static_cast<size_t>(draw.integer(0, 2)));
    for (auto& k : repeats) k = draw.integer(0, 3);
    return Stack{IValue(self), IValue(repeats)};
  });
}

// constant_pad_nd: pad = [left, right] pairs from the last dim backwards; negative entries crop.
struct PadPlan {
  Tensor cropped;         // self with the negative pads cut off (a view)
  bool crop_only = true;  // no positive pad: the result is a copy of `cropped`
  SymInts sizes;          // the output's sizes (Note [Shape plans over SymInt])
};
PadPlan plan_pad(const Tensor& self, const Ints& pad, std::string_view op) {
  OPCONFORM_CHECK(pad.size() % 2 == 0, ErrorCode::kInvalidArgument, op,
                  ": length of argument 'pad' must be even but instead it equals ", pad.size());
  const int64_t rank = self.dim(), pairs = static_cast<int64_t>(pad.size() / 2);
  OPCONFORM_CHECK(rank >= pairs, ErrorCode::kInvalidArgument, op,
                  ": length of argument 'pad' should be no more than twice the number of dimensions of the input. "
                  "Pad length is ",
                  pad.size(), " while the input has ", rank, " dimensions");
  PadPlan plan;
  plan.cropped = self;
  const SymInts in_sizes = self.sym_sizes();
  plan.sizes = in_sizes;
  SymInts cropped_sizes = in_sizes;
  for (int64_t d = rank - pairs; d < rank; ++d) {
    const int64_t before = pad[static_cast<size_t>(2 * (rank - d - 1))],
                  after = pad[static_cast<size_t>(2 * (rank - d - 1) + 1)];
    const auto du = static_cast<size_t>(d);
    const SymInt size = in_sizes[du] + before + after;
    OPCONFORM_CHECK(size >= 0, ErrorCode::kInvalidArgument, op, ": the input size ", in_sizes[du],
                    ", plus negative padding ", before, " and ", after,
                    " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input");
    plan.sizes[du] = size;
    cropped_sizes[du] += std::min<int64_t>(before, 0) + std::min<int64_t>(after, 0);
    if (before < 0) plan.cropped = plan.cropped.narrow(d, -before, plan.cropped.size(d) + before);
    if (after < 0) plan.cropped = plan.cropped.narrow(d, 0, plan.cropped.size(d) + after);
    plan.crop_only = plan.crop_only && before <= 0 && after <= 0;
  }
  // A view of self: its strides are self's, its sizes self's less the crops.
  if (symbolic_fake(self) && !plan.cropped.is_same(self))
    plan.cropped = with_sym_shape(plan.cropped, std::move(cropped_sizes), self.sym_strides());
  return plan;
}

// The region of `out` where the (cropped) input goes: positive pads cut off.
Tensor pad_interior(const Tensor& out, const Ints& pad) {
  Tensor interior = out;
  const int64_t rank = out.dim(), pairs = static_cast<int64_t>(pad.size() / 2);
  for (int64_t d = rank - pairs; d < rank; ++d) {
    const int64_t before = std::max<int64_t>(pad[static_cast<size_t>(2 * (rank - d - 1))], 0);
    const int64_t after = std::max<int64_t>(pad[static_cast<size_t>(2 * (rank - d - 1) + 1)], 0);
    interior = interior.narrow(d, before, interior.size(d) - before - after);
  }
  return interior;
}

void register_constant_pad_nd(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", fam,
              "self padded with `value` (pad: before/after pairs from the last dim backwards; negative crops)");
  const std::string name = b.name();
  // The output: a copy of the cropped input when nothing is added (clone's layout), else a new
  // tensor filled with value by aten::fill.Scalar (which checks that value fits the dtype, as
  // PyTorch's fill_), the input copied inside. fill.Scalar keeps the layout of the tensor it is
  // given: the output's sizes with the strides of self's suggested memory format (over self's
  // sizes), which fill.Scalar keeps where they are dense for the output and otherwise replaces by
  // the format they suggest. One kernel for CPU and fake tensors (copies are no-ops on fakes).
  auto kernel = [name, ops = Ops(r)](const Tensor& self, Ints pad, const Scalar& value) {
    const PadPlan plan = plan_pad(self, pad, name);
    if (plan.crop_only) return ops.tensor("aten::clone", {plan.cropped});
    const SymInts like_self = format_strides(self.sym_sizes(), suggest_memory_format(self));
    Tensor out = ops.tensor("aten::fill.Scalar", {empty_strided(plan.sizes, like_self, self.options()), value});
    pad_interior(out, pad).copy_(plan.cropped);  // a no-op on fake tensors
    return out;
  };
  b.cpu(kernel).fake(kernel).dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        Ints negated = saved_ints(ctx, "pad");
        for (auto& p : negated) p = -p;
        return {pad(ops, g[0], negated), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.set("pad", inputs[1]); });
  b.vmap(batch_first_rule(r, name, [](const Ops&, Stack args, int64_t rank) {
    const auto pairs = static_cast<int64_t>(args[1].to<Ints>().size() / 2);
    OPCONFORM_CHECK(pairs <= rank, ErrorCode::kInvalidArgument,
                    "aten::constant_pad_nd: length of argument 'pad' should be "
                    "no more than twice the number of dimensions of the input (",
                    rank, ")");
    return args;  // pads apply to the trailing (logical) dims
  }));
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 4);
    Tensor self = draw_tensor(draw, shape);
    const int64_t pairs = draw.integer(0, static_cast<int64_t>(shape.size()));
    Ints pad;
    for (int64_t i = 0; i < pairs; ++i) {
      const int64_t size = shape[shape.size() - 1 - static_cast<size_t>(i)];
      const int64_t before = draw.integer(-size, 3);
      pad.push_back(before);
      pad.push_back(draw.integer(-(size + std::min<int64_t>(before, 0)), 3));
    }
    return Stack{IValue(self), IValue(pad), draw.coin(30) ? IValue(int64_t{0}) : IValue(int64_t{draw.integer(0, 1)})};
  });
}

void register_clone_and_copy(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", fam,
                "a copy; preserve format (default) keeps strides of non-overlapping dense inputs");
    auto kernel = [name = b.name()](const Tensor& self, std::optional<MemoryFormat> format) {
      Tensor out = new_like(self, format.value_or(MemoryFormat::Preserve), self.options(), name);
      out.copy_(self);  // a no-op on fake tensors
      return out;
    };
    b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
    b.autograd([](autograd::AutogradContext&, const Grads& g) -> Grads { return {g[0], Tensor()}; });
    b.vmap(copy_vmap_rule(r, "aten::clone", 1));
    b.samples([](SampleDraw& draw) {
      Tensor self = draw_tensor(draw, draw.shape(0, 5));
      IValue format;
      if (draw.coin(40)) {
        format = IValue(draw.coin() ? MemoryFormat::Contiguous : MemoryFormat::Preserve);
        if (self.dim() == 4 && draw.coin(30)) format = IValue(MemoryFormat::ChannelsLast);
        if (self.dim() == 5 && draw.coin(30)) format = IValue(MemoryFormat::ChannelsLast3d);
      }
      return Stack{IValue(self), format};
    });
  }
  OpBuilder b(lib, "aten::copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", fam,
              "a new tensor with self's sizes, strides, offset and dtype holding src's values (broadcast, converted)");
  // PyTorch's clone_preserve_strides: the new buffer spans self's geometry from storage element 0,
  // so strides and offset are self's; a self with internal overlap gets a clone's layout instead.
  auto kernel = [name = b.name()](const Tensor& self, const Tensor& src, bool) {
    const bool overlaps = !self.is_non_overlapping_and_dense() && [&] {
      for (int64_t d = 0; d < self.dim(); ++d)
        if (self.stride(d) == 0 && self.size(d) > 1) return true;
      return false;
    }();
    Tensor out;
    if (overlaps) {
      out = new_like(self, MemoryFormat::Preserve, self.options(), name);
    } else {
      out = empty_strided(Ints{geometry_end(self.sizes(), self.strides(), self.storage_offset())}, Ints{1}, self.options())
                .as_strided(self.sizes(), self.strides(), self.storage_offset());
      // A view of the new buffer in self's geometry: its symbolic sizes and strides are self's.
      if (symbolic_fake(self)) out = with_sym_shape(out, self.sym_sizes(), self.sym_strides());
    }
    OPCONFORM_CHECK(src.device() == self.device() || src.dim() == 0, ErrorCode::kInvalidArgument, name,
                    ": argument 'src' is on ", src.device().to_string(), " but 'self' is on ",
                    self.device().to_string());
    out.copy_(src);  // broadcasts and converts; a no-op on fake tensors
    return out;
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        // src's gradient in src's dtype, converted by an op (a captured backward records it).
        Tensor src_grad = ops.sum_to(g[0], saved_ints(ctx, "src_sizes"));
        const DType src_dtype = ctx.get("src_dtype").to<DType>();
        if (src_grad.dtype() != src_dtype && (is_floating(src_dtype) || is_complex(src_dtype)))
          src_grad = ops.to(src_grad, src_dtype);
        return {ops.zeros_like(g[0]), src_grad, Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        ctx.set("src_sizes", IValue(vec(inputs[1].to_tensor().sizes())));
        ctx.set("src_dtype", IValue(inputs[1].to_tensor().dtype()));
      });
  // Both batched at 0 (an unbatched one expanded), src lined up with self's trailing dims.
  b.vmap([ops = Ops(r)](const VmapInfo& info, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    Tensor self = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
    Tensor src = move_batch_dim(inputs[1].to_tensor(), in_dims[1], 0, info.batch_size);
    while (src.dim() < self.dim()) src = ops.unsqueeze(src, 1);
    Stack outputs = ops.call("aten::copy", {IValue(self), IValue(src), inputs[2]});
    return std::make_pair(std::move(outputs), std::vector<std::optional<int64_t>>{int64_t{0}});
  });
  // src broadcasts to self's shape (size-1 dims of the same rank: Note [Samples the checks can take]); its
  // dtype may differ.
  b.samples([](SampleDraw& draw) {
    Ints shape = draw.shape(0, 4);
    Tensor self = draw_tensor(draw, shape);
    Ints src_shape = shape;
    for (auto& s : src_shape)
      if (draw.coin(25)) s = 1;
    const DType src_dtype = draw.coin(70) ? self.dtype() : kAll[static_cast<size_t>(draw.integer(0, 11))];
    return Stack{IValue(self), IValue(draw.tensor(src_shape, src_dtype)), IValue(draw.coin())};
  });
}

}  // namespace

// sym_numel and sym_size.int: a tensor's sizes as SymInts (symbols of a symbolic fake; numbers
// otherwise). Samples are any tensor (and a dim in range). sym_stride.int and sym_storage_offset
// are not here yet: their results are the layout, which stride_invariance and
// test_aot_dispatch_dynamic rightly flag until the checks learn of layout queries.
void register_sym_queries(Library& lib, const std::string& fam) {
  auto any_tensor = [](SampleDraw& draw) { return Stack{IValue(draw.tensor(draw.shape(0, 4), draw.dtype()))}; };
  auto tensor_and_dim = [](SampleDraw& draw) {
    const Ints shape = draw.shape(1, 4);  // a 0-d tensor has no dim to ask about
    const auto rank = static_cast<int64_t>(shape.size());
    return Stack{IValue(draw.tensor(shape, draw.dtype())), IValue(draw.integer(-rank, rank - 1))};
  };
  // PyTorch's size(dim) / stride(dim): a 0-d tensor has none (no scalar wrapping).
  auto dim_of = [](std::string_view op, const Tensor& self, int64_t dim) {
    OPCONFORM_CHECK(self.dim() > 0, ErrorCode::kInvalidArgument, op, ": dimension specified as ", dim,
                    " but tensor has no dimensions");
    return static_cast<size_t>(wrap_dim(dim, self.dim(), op));
  };
  {
    OpBuilder b(lib, "aten::sym_numel(Tensor self) -> SymInt", fam, "the number of elements, as a SymInt");
    auto f = [](const Tensor& self) {
      SymInt n(int64_t{1});
      for (const SymInt& s : self.sym_sizes()) n = n * s;
      return n;
    };
    b.cpu(f).fake(f).dtypes(kAll).samples(any_tensor);
  }
  {
    OpBuilder b(lib, "aten::sym_size.int(Tensor self, int dim) -> SymInt", fam, "the size of dim `dim`, as a SymInt");
    auto f = [name = b.name(), dim_of](const Tensor& self, int64_t dim) { return self.sym_sizes()[dim_of(name, self, dim)]; };
    b.cpu(f).fake(f).dtypes(kAll).samples(tensor_and_dim);
  }
  // The layout queries: their result is the input's layout (Note [Layout queries] in op_data.h).
  {
    OpBuilder b(lib, "aten::sym_stride.int(Tensor self, int dim) -> SymInt", fam, "the stride of dim `dim`, as a SymInt");
    auto f = [name = b.name(), dim_of](const Tensor& self, int64_t dim) { return self.sym_strides()[dim_of(name, self, dim)]; };
    b.cpu(f).fake(f).dtypes(kAll).samples(tensor_and_dim).layout_query();
  }
  {
    OpBuilder b(lib, "aten::sym_storage_offset(Tensor self) -> SymInt", fam,
                "the storage offset (in elements), as a SymInt");
    auto f = [](const Tensor& self) { return SymInt(self.storage_offset()); };
    b.cpu(f).fake(f).dtypes(kAll).samples(any_tensor).layout_query();
  }
}

// _local_scalar_dense: the value of a one-element tensor (Tensor.item()), a Scalar of its kind
// (bool, int, float, complex). Its result is data, so its fake kernel reports a data-dependent
// output (ErrorCode::kDataDependentOutput, PyTorch's DataDependentOutputException) rather than
// invent a value that a captured graph would bake in.
void register_local_scalar_dense(Library& lib, const std::string& fam) {
  OpBuilder b(lib, "aten::_local_scalar_dense(Tensor self) -> Scalar", fam,
              "the value of a one-element tensor, as a Scalar (Tensor.item())", {Tag::data_dependent_output});
  const std::string name = b.name();
  b.cpu([name](const Tensor& self) {
     OPCONFORM_CHECK(self.numel() == 1, ErrorCode::kInvalidArgument, name, ": argument 'self' of shape ",
                     shape_string(self.sizes()), " has ", self.numel(), " elements; only a one-element tensor converts to a Scalar");
     return self.item();
   })
      .fake([name](const Tensor&) -> Scalar {
        throw Error(ErrorCode::kDataDependentOutput,
                    ::opconform::detail::concat(name, ": the result is the value of 'self', which a fake tensor does not have"));
      })
      .dtypes(kAll)
      .samples([](SampleDraw& draw) {  // one element, 0-d or with sizes of 1
        return Stack{IValue(draw.tensor(Ints(static_cast<size_t>(draw.integer(0, 2)), 1), draw.dtype()))};
      });
}

void register_shape(Library& lib) {
  const std::string fam = "shape";
  register_sym_queries(lib, fam);
  register_local_scalar_dense(lib, fam);
  register_view(lib, fam);
  register_expand(lib, fam);
  register_unsqueeze(lib, fam);
  register_permute(lib, fam);
  register_to_copy(lib, fam);
  register_slice(lib, fam);
  register_select(lib, fam);
  register_squeeze(lib, fam);
  register_diagonal(lib, fam);
  register_as_strided(lib, fam);
  register_alias_and_split(lib, fam);
  register_cat(lib, fam);
  register_flip(lib, fam);
  register_repeat(lib, fam);
  register_constant_pad_nd(lib, fam);
  register_clone_and_copy(lib, fam);
}

}  // namespace opconform::reference
