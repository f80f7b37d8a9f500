// mm, bmm and addmm on oneDNN's matmul primitive. The operands are described with their own
// strides (a transposed mat2 is a descriptor, not a copy); the result is row-major, as PyTorch's.
// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * (mat1 @ mat2): alpha is the output
// scale and beta a sum post-op over a destination pre-filled with self broadcast to [M, N]; with
// beta = 0, self is not read at all (PyTorch ignores NaN and inf in self then; a sum post-op of
// scale 0 would give 0 * NaN = NaN).
#include "onednn_memory.h"

namespace opc_onednn {
namespace {

void check_rank(const Tensor& t, int rank, const char* name) {
  if (t.ndim() != rank) {
    invalid_argument(std::string("argument '") + name + "' must be a " + std::to_string(rank) + "-D tensor, got shape " +
                     shape_string(t.shape));
  }
}

void check_inner(const Tensor& a, const Tensor& b) {
  const int n = a.ndim();
  if (a.size(n - 1) != b.size(n - 2) || (n == 3 && a.size(0) != b.size(0))) {
    invalid_argument("the shapes " + shape_string(a.shape) + " and " + shape_string(b.shape) + " cannot be multiplied");
  }
  if (a.type != b.type) {
    invalid_argument(std::string("expected both operands to have the same dtype, got ") + dtype_name(a.type) + " and " +
                     dtype_name(b.type));
  }
}

// dst = scale * (a @ b) (+ beta * dst when `sum` is set), dst row-major and already allocated.
void matmul_into(Call& call, Tensor a, Tensor b, const Tensor& dst, float scale, std::optional<float> sum) {
  if (dst.numel() == 0) return;
  // oneDNN 2.6's matmul divides by zero for K = 0 (the worker dies of SIGFPE): refused instead.
  if (a.size(a.ndim() - 1) == 0) not_implemented("an inner dimension K = 0 crashes oneDNN 2.6's matmul (SIGFPE)");
  dnnl::primitive_attr attr;
  if (scale != 1.f) attr.set_output_scales(0, {scale});
  if (sum) {
    dnnl::post_ops ops;
    ops.append_sum(*sum);
    attr.set_post_ops(ops);
  }
  const dnnl::memory::desc dst_md = md_of(dst);
  const auto pd = with_dense_fallback(call, {&a, &b}, [&] {
    return dnnl::matmul::primitive_desc({md_of(a), md_of(b), dst_md}, attr, engine());
  });
  run(dnnl::matmul(pd), {{DNNL_ARG_SRC, memory_of(md_of(a), a)},
                         {DNNL_ARG_WEIGHTS, memory_of(md_of(b), b)},
                         {DNNL_ARG_DST, memory_of(dst_md, dst)}});
}

void mm(Call& call) {
  const Tensor a = call.tensor(0, "self"), b = call.tensor(1, "mat2");
  check_rank(a, 2, "self");
  check_rank(b, 2, "mat2");
  check_inner(a, b);
  const Tensor out = call.output(0, a.type, {a.size(0), b.size(1)});
  matmul_into(call, a, b, out, 1.f, std::nullopt);
}

void bmm(Call& call) {
  const Tensor a = call.tensor(0, "self"), b = call.tensor(1, "mat2");
  check_rank(a, 3, "self");
  check_rank(b, 3, "mat2");
  check_inner(a, b);
  const Tensor out = call.output(0, a.type, {a.size(0), a.size(1), b.size(2)});
  matmul_into(call, a, b, out, 1.f, std::nullopt);
}

void addmm(Call& call) {
  Tensor self = call.tensor(0, "self");
  const Tensor a = call.tensor(1, "mat1"), b = call.tensor(2, "mat2");
  const double beta = call.scalar(3, "beta"), alpha = call.scalar(4, "alpha");
  check_rank(a, 2, "mat1");
  check_rank(b, 2, "mat2");
  check_inner(a, b);
  if (self.type != a.type) invalid_argument("argument 'self' must have the dtype of 'mat1'");
  const Dims shape{a.size(0), b.size(1)};
  const Dims broadcast = broadcast_shape(self, "self", Tensor{a.type, shape, contiguous_strides(shape)}, "mat1 @ mat2");
  if (broadcast != shape) invalid_argument("argument 'self' of shape " + shape_string(self.shape) + " does not broadcast to " + shape_string(shape));
  const Tensor out = call.output(0, a.type, shape);
  if (out.numel() == 0) return;
  if (beta == 0) {
    matmul_into(call, a, b, out, static_cast<float>(alpha), std::nullopt);
    return;
  }
  Tensor wide = expanded(self, shape);
  reorder_into(input_md(call, wide, "self"), wide, md_of(out), out);
  matmul_into(call, a, b, out, static_cast<float>(alpha), static_cast<float>(beta));
}

bool probe(dt t) {
  const dnnl::memory::desc a({2, 3}, t, dnnl::memory::format_tag::ab), b({3, 2}, t, dnnl::memory::format_tag::ba),
      c({2, 2}, t, dnnl::memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd({a, b, c}, engine());
  return true;
}

}  // namespace

std::vector<OpDef> matmul_ops() {
  return {
      {"aten::mm", mm, nullptr, probe},
      {"aten::bmm", bmm, nullptr, probe},
      {"aten::addmm", addmm, nullptr, probe},
  };
}

}  // namespace opc_onednn
