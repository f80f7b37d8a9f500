// Matrix products: mm, bmm, addmm.
//
// One kernel, batched_product, multiplies [B, n, k] by [B, k, m] with strided index loops,
// accumulating each dot product in the wide type (double, complex128, or int64 wrapping as
// two's complement, as PyTorch's integer kernels) and rounding once. Outputs are contiguous, as
// PyTorch's CPU kernels allocate them. Operands must share one dtype (PyTorch does not promote
// here); every dtype but bool is accepted, integers included.
#include <algorithm>
#include <type_traits>

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

// ---- checks ----

void check_rank(std::string_view op, const Tensor& t, std::string_view arg, int64_t rank) {
  OPCONFORM_CHECK(t.dim() == rank, ErrorCode::kInvalidArgument, op, ": argument '", arg, "' must be a ", rank,
                  "-D tensor, got ", t.dim(), "-D with shape ", shape_string(t.sizes()));
}

void check_same_dtype(std::string_view op, const Tensor& a, std::string_view a_name, const Tensor& b,
                      std::string_view b_name) {
  OPCONFORM_CHECK(a.dtype() == b.dtype(), ErrorCode::kInvalidArgument, op, ": expected arguments '", a_name, "' and '",
                  b_name, "' to have the same dtype, but got ", name(a.dtype()), " and ", name(b.dtype()));
}

void check_product_dtype(std::string_view op, DType d) {
  if (d == DType::Bool) unsupported_dtype(op, d);
}

// a [.., n, k] times b [.., k, m]: the inner sizes must agree.
void check_inner(std::string_view op, const Tensor& a, std::string_view a_name, const Tensor& b, std::string_view b_name) {
  OPCONFORM_CHECK(a.size(-1) == b.size(-2), ErrorCode::kInvalidArgument, op, ": arguments '", a_name, "' and '", b_name,
                  "' cannot be multiplied (shapes ", shape_string(a.sizes()), " and ", shape_string(b.sizes()), ")");
}

// mm (rank 2) and bmm (rank 3): self [.., n, k] times mat2 [.., k, m], one dtype, one batch size.
void check_matmul(std::string_view op, const Tensor& self, const Tensor& mat2, int64_t rank) {
  check_rank(op, self, "self", rank);
  check_rank(op, mat2, "mat2", rank);
  check_same_dtype(op, self, "self", mat2, "mat2");
  check_product_dtype(op, self.dtype());
  OPCONFORM_CHECK(rank == 2 || self.size(0) == mat2.size(0), ErrorCode::kInvalidArgument, op,
                  ": arguments 'self' and 'mat2' must have the same batch size, got ", shape_string(self.sizes()),
                  " and ", shape_string(mat2.sizes()));
  check_inner(op, self, "self", mat2, "mat2");
}

// addmm: mat1 @ mat2 is [n, m]; self broadcasts to it; one dtype; integer products take
// integral beta and alpha (PyTorch refuses floating ones).
std::vector<int64_t> check_addmm(std::string_view op, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                                 const Scalar& beta, const Scalar& alpha) {
  check_rank(op, mat1, "mat1", 2);
  check_rank(op, mat2, "mat2", 2);
  check_same_dtype(op, mat1, "mat1", mat2, "mat2");
  check_same_dtype(op, self, "self", mat1, "mat1");
  check_product_dtype(op, mat1.dtype());
  check_inner(op, mat1, "mat1", mat2, "mat2");
  const std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  bool broadcasts = self.dim() <= 2;
  for (int64_t d = 1; broadcasts && d <= self.dim(); ++d) {
    broadcasts = self.size(-d) == 1 || self.size(-d) == shape[2 - d];
  }
  OPCONFORM_CHECK(broadcasts, ErrorCode::kInvalidArgument, op, ": argument 'self' of shape ", shape_string(self.sizes()),
                  " does not broadcast to the product's shape ", shape_string(shape));
  if (is_integral(mat1.dtype())) {
    OPCONFORM_CHECK(!beta.is_floating() && !beta.is_complex(), ErrorCode::kInvalidArgument, op,
                    ": for integral input tensors, argument 'beta' must not be a floating point number");
    OPCONFORM_CHECK(!alpha.is_floating() && !alpha.is_complex(), ErrorCode::kInvalidArgument, op,
                    ": for integral input tensors, argument 'alpha' must not be a floating point number");
  }
  return shape;
}

// ---- the kernel ----

// [B, n, k] @ [B, k, m] -> a contiguous [B, n, m] in the wide type W.
template <typename W>
Tensor batched_product(const Tensor& a, const Tensor& b) {
  const Tensor wa = a.to(dtype_of_v<W>), wb = b.to(dtype_of_v<W>);
  const int64_t batch = a.size(0), n = a.size(1), inner = a.size(2), m = b.size(2);
  Tensor out = empty({batch, n, m}, TensorOptions(dtype_of_v<W>));
  if (out.numel() == 0) return out;
  W* o = out.template mutable_data_ptr<W>();
  const W* pa = inner > 0 ? wa.template const_data_ptr<W>() : nullptr;
  const W* pb = inner > 0 ? wb.template const_data_ptr<W>() : nullptr;
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        W acc{};
        for (int64_t k = 0; k < inner; ++k) {
          acc = plus(acc, times(pa[s * wa.stride(0) + i * wa.stride(1) + k * wa.stride(2)],
                                pb[s * wb.stride(0) + k * wb.stride(1) + j * wb.stride(2)]));
        }
        *o++ = acc;
      }
    }
  }
  return out;
}

// The product of two same-dtype operands (3-D), rounded once to their dtype.
Tensor product(std::string_view op, const Tensor& a, const Tensor& b) {
  return visit_wide<Domain::All>(op, a.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    return batched_product<W>(a, b).to(a.dtype(), a.device());
  });
}

// beta * self + alpha * (mat1 @ mat2), in the wide type; beta == 0 ignores self and alpha == 0
// the product (NaN included), as PyTorch's gemm does.
Tensor addmm_kernel(std::string_view op, const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                    const Scalar& alpha) {
  const std::vector<int64_t> shape = check_addmm(op, self, mat1, mat2, beta, alpha);
  return visit_wide<Domain::All>(op, mat1.dtype(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const W b = scalar_as<W>(beta), a = scalar_as<W>(alpha);
    Tensor result = batched_product<W>(mat1.unsqueeze(0), mat2.unsqueeze(0)).view(shape);
    if (result.numel() == 0) return result.to(mat1.dtype(), mat1.device());
    const Tensor addend = self.to(dtype_of_v<W>).expand(shape);  // stride 0 where self broadcasts
    const W* s = addend.template const_data_ptr<W>();
    W* r = result.template mutable_data_ptr<W>();
    for (int64_t i = 0; i < shape[0]; ++i) {
      for (int64_t j = 0; j < shape[1]; ++j) {
        W& out = r[i * shape[1] + j];
        // alpha == 0 ignores the product (inf and NaN in it included), as PyTorch's gemm does.
        out = a == W(0) ? W(0) : times(a, out);
        if (b != W(0)) out = plus(out, times(b, s[i * addend.stride(0) + j * addend.stride(1)]));
      }
    }
    return result.to(mat1.dtype(), mat1.device());
  });
}

// ---- formulas ----

Tensor transposed(const Ops& ops, const Tensor& t) {
  std::vector<int64_t> dims(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) dims[d] = d;
  std::swap(dims[t.dim() - 1], dims[t.dim() - 2]);
  return ops.permute(t, std::move(dims));
}

// d(a @ b): grad_a = g @ b^T, grad_b = a^T @ g, with `matmul` mm or bmm.
// (Complex inputs would need conj(b)^T and conj(a)^T; Core ATen has no conj op, see the report.)
Grads product_grads(const Ops& ops, const std::string& matmul, autograd::AutogradContext& ctx, const Tensor& g,
                    size_t a_arg, size_t b_arg) {
  auto saved = ctx.saved_tensors();
  const Tensor& a = saved[saved.size() - 2];
  const Tensor& b = saved[saved.size() - 1];
  Tensor ga, gb;
  if (ctx.needs_input_grad(a_arg)) ga = ops.tensor(matmul, {g, transposed(ops, b)});
  if (ctx.needs_input_grad(b_arg)) gb = ops.tensor(matmul, {transposed(ops, a), g});
  return {ga, gb};
}

// ---- samples ----

// A matrix dimension: 1..max_dim_size, sometimes 0 (when the spec allows empty tensors).
int64_t draw_size(SampleDraw& draw) { return draw.size(); }

// A beta / alpha: integers for integer dtypes (PyTorch refuses floating ones there), else
// integers or reals, 0 and 1 included.
IValue draw_coefficient(SampleDraw& draw, DType dtype) {
  if (is_integral(dtype) || draw.coin()) return IValue(draw.integer(-2, 2));
  return IValue(draw.real(-2, 2));
}

// The fake kernels' contiguous output of sizes taken from the operands: (operand, dim) pairs.
// With a fake operand of symbolic sizes, each size is that operand's symbolic size.
Tensor empty_product(std::initializer_list<std::pair<const Tensor*, int64_t>> dims, const TensorOptions& options) {
  bool symbolic = false;
  for (const auto& [t, d] : dims) symbolic = symbolic || (t->is_fake() && t->has_symbolic_sizes());
  if (symbolic) {
    std::vector<SymInt> sizes;
    for (const auto& [t, d] : dims) sizes.push_back(t->sym_sizes()[static_cast<size_t>(d)]);
    return make_fake_tensor(std::move(sizes), options.dtype, options.device);
  }
  std::vector<int64_t> sizes;
  for (const auto& [t, d] : dims) sizes.push_back(t->size(d));
  return empty(sizes, options);
}

}  // namespace

void register_linear_algebra(Library& lib) {
  Registry& reg = lib.registry();
  const Ops ops(reg);
  const std::string fam = "linear_algebra";
  const auto dtypes = concat_dtypes(kReal, {DType::Complex64, DType::Complex128});

  {
    OpBuilder b(lib, "aten::mm(Tensor self, Tensor mat2) -> Tensor", fam, "matrix product [n, k] @ [k, m]");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Tensor& mat2) {
       check_matmul(name, self, mat2, 2);
       return product(name, self.unsqueeze(0), mat2.unsqueeze(0)).squeeze(0);
     })
        .fake([name](const Tensor& self, const Tensor& mat2) {
          check_matmul(name, self, mat2, 2);
          return empty_product({{&self, 0}, {&mat2, 1}}, self.options());
        })
        .autograd([ops](autograd::AutogradContext& ctx, const Grads& g) { return product_grads(ops, "aten::mm", ctx, g[0], 0, 1); },
                  save_tensor_inputs)
        // Batched operands become one bmm (an unbatched one is expanded along the batch).
        .vmap([ops, name](const VmapInfo& info, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
          Tensor a = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
          Tensor m = move_batch_dim(inputs[1].to_tensor(), in_dims[1], 0, info.batch_size);
          OPCONFORM_CHECK(a.dim() == 3 && m.dim() == 3, ErrorCode::kInvalidArgument, name,
                          ": arguments 'self' and 'mat2' must be 2-D tensors");
          return std::make_pair(ops.call("aten::bmm", {a, m}), std::vector<std::optional<int64_t>>{int64_t{0}});
        })
        .dtypes(dtypes)
        .samples([](SampleDraw& draw) {
          const DType dtype = draw.dtype();
          const int64_t n = draw_size(draw), k = draw_size(draw), m = draw_size(draw);
          return Stack{IValue(draw.tensor({n, k}, dtype)), IValue(draw.tensor({k, m}, dtype))};
        });
  }
  {
    OpBuilder b(lib, "aten::bmm(Tensor self, Tensor mat2) -> Tensor", fam, "batched matrix product [b, n, k] @ [b, k, m]");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Tensor& mat2) {
       check_matmul(name, self, mat2, 3);
       return product(name, self, mat2);
     })
        .fake([name](const Tensor& self, const Tensor& mat2) {
          check_matmul(name, self, mat2, 3);
          return empty_product({{&self, 0}, {&self, 1}, {&mat2, 2}}, self.options());
        })
        .autograd([ops](autograd::AutogradContext& ctx, const Grads& g) { return product_grads(ops, "aten::bmm", ctx, g[0], 0, 1); },
                  save_tensor_inputs)
        .dtypes(dtypes)
        .samples([](SampleDraw& draw) {
          const DType dtype = draw.dtype();
          const int64_t batch = draw_size(draw), n = draw_size(draw), k = draw_size(draw), m = draw_size(draw);
          return Stack{IValue(draw.tensor({batch, n, k}, dtype)), IValue(draw.tensor({batch, k, m}, dtype))};
        });
  }
  {
    OpBuilder b(lib, "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", fam,
                "beta * self + alpha * (mat1 @ mat2), self broadcast; beta = 0 ignores self (NaN included)");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
       return addmm_kernel(name, self, mat1, mat2, beta, alpha);
     })
        .fake([name](const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
          check_addmm(name, self, mat1, mat2, beta, alpha);
          return empty_product({{&mat1, 0}, {&mat2, 1}}, mat1.options());
        })
        .autograd(
            [ops](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              const Scalar beta = ctx.get("beta").to_scalar(), alpha = ctx.get("alpha").to_scalar();
              Grads product = product_grads(ops, "aten::mm", ctx, g[0], 1, 2);
              Tensor g_self;
              if (ctx.needs_input_grad(0)) {
                const Tensor self = ctx.saved_tensors()[0];
                g_self = ops.sum_to(ops.mul(g[0], beta), self.sizes());
              }
              for (Tensor& t : product)
                if (t.defined()) t = ops.mul(t, alpha);
              return {g_self, product[0], product[1], Tensor(), Tensor()};
            },
            [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
              save_tensor_inputs(ctx, inputs, outputs);
              ctx.set("beta", inputs[3]);
              ctx.set("alpha", inputs[4]);
            })
        .dtypes(dtypes)
        .samples([](SampleDraw& draw) {
          const DType dtype = draw.dtype();
          const int64_t n = draw_size(draw), k = draw_size(draw), m = draw_size(draw);
          // self: the full [n, m] or one that broadcasts to it.
          const std::vector<std::vector<int64_t>> self_shapes{{n, m}, {m}, {1, m}, {n, 1}, {}, {1}, {1, 1}};
          const auto& self_shape = self_shapes[static_cast<size_t>(draw.integer(0, 6))];
          Tensor self = draw.tensor(self_shape, dtype), mat1 = draw.tensor({n, k}, dtype), mat2 = draw.tensor({k, m}, dtype);
          return Stack{IValue(self), IValue(mat1), IValue(mat2), draw_coefficient(draw, dtype), draw_coefficient(draw, dtype)};
        });
  }
}

}  // namespace opconform::reference
