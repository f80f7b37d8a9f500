// aten::mm, aten::bmm and aten::addmm through cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx),
// as PyTorch's CUDA BLAS wrappers call them: float16 and bfloat16 with float32 accumulation, float32
// in IEEE float32 (TF32 tensor ops in the _tf32 variant), float64 in float64.
//
// Note [Row-major products in cuBLAS]: cuBLAS is column-major. A row-major C [n, m] is, read
// column-major, C^T [m, n], and C = A B is C^T = B^T A^T: so the kernel asks cuBLAS for
// op(B') op(A') with B's matrix first. A row-major operand X [r, c] (row stride ld, unit column
// stride) read column-major is X^T with leading dimension ld: CUBLAS_OP_N. A transposed view
// (unit row stride, column stride ld) read column-major is X itself: CUBLAS_OP_T. Any other
// layout (both strides > 1, a stride-0 expansion, overlapping rows) becomes a contiguous copy
// (Note [Dense copies]).
#include <algorithm>

#include "cuda_libs.h"

namespace opc_cudalibs {
namespace {

// One operand as cuBLAS reads it in the swapped product (Note [Row-major products in cuBLAS]).
struct Operand {
  const void* data;
  cublasOperation_t op;
  int64_t ld;
  int64_t batch_stride;
};

// Matrix dims r, c at dims d0, d0 + 1 of t; batch (if any) at d0 - 1.
Operand operand(Call& call, Tensor t, int d0) {
  const int64_t r = t.size(d0), c = t.size(d0 + 1);
  const bool batched = d0 > 0;
  const int64_t b = batched ? t.size(0) : 1;
  auto classify = [&](const Tensor& x, Operand& out) {
    const int64_t s0 = x.stride(d0), s1 = x.stride(d0 + 1);
    // A batch stride of 0 (an expanded batch) is not given to cuBLAS: it is copied.
    const int64_t sb = !batched || b == 1 ? r * c : x.stride(0);
    if (sb <= 0) return false;
    if ((s1 == 1 || c == 1) && (r == 1 || s0 >= std::max<int64_t>(1, c))) {
      out = {x.data, CUBLAS_OP_N, r == 1 ? std::max<int64_t>(1, c) : s0, sb};
      return true;
    }
    if ((s0 == 1 || r == 1) && (c == 1 || s1 >= std::max<int64_t>(1, r))) {
      out = {x.data, CUBLAS_OP_T, c == 1 ? std::max<int64_t>(1, r) : s1, sb};
      return true;
    }
    return false;
  };
  Operand out{};
  if (classify(t, out)) return out;
  t = contiguous(call, t);
  if (!classify(t, out)) throw KernelError(OPC_ERROR, "a contiguous copy is no cuBLAS operand");
  return out;
}

struct Gemm {
  DType dtype;
  int64_t batch, n, k, m;  // C [batch, n, m] = A [batch, n, k] B [batch, k, m]
  Operand a, b;
  void* c;
  double alpha, beta;
};

cublasComputeType_t compute_of(DType t) {
  if (t == DType::f64) return CUBLAS_COMPUTE_64F;
  // TF32 for float32 only: float16/bfloat16 already compute in float32 with float32 accumulation.
  if (t == DType::f32 && tf32_enabled()) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

void run_gemm(const Gemm& g) {
  CublasLease handle;
  const Blend alpha(g.alpha), beta(g.beta);
  const cudaDataType_t t = cuda_type(g.dtype);
  const cublasComputeType_t compute = compute_of(g.dtype);
  // Swapped (Note [Row-major products in cuBLAS]): cuBLAS's A is our B, its B our A.
  if (g.batch == 1) {
    check_cublas(cublasGemmEx_64(handle.get(), g.b.op, g.a.op, g.m, g.n, g.k, alpha.for_type(g.dtype), g.b.data, t, g.b.ld,
                                 g.a.data, t, g.a.ld, beta.for_type(g.dtype), g.c, t, g.m, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  } else {
    check_cublas(cublasGemmStridedBatchedEx_64(handle.get(), g.b.op, g.a.op, g.m, g.n, g.k, alpha.for_type(g.dtype), g.b.data,
                                               t, g.b.ld, g.b.batch_stride, g.a.data, t, g.a.ld, g.a.batch_stride,
                                               beta.for_type(g.dtype), g.c, t, g.m, g.n * g.m, g.batch, compute,
                                               CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  }
  synchronize("the GEMM");
}

void check_float(const Tensor& t, const char* name) {
  if (!is_float(t.dtype)) not_implemented(std::string("argument '") + name + "' has dtype " + dtype_name(t.dtype) +
                                          "; cuBLAS GEMMs here take float32, float16, bfloat16, float64");
}

void check_same_dtype(const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  if (a.dtype != b.dtype)
    invalid_argument(std::string("argument '") + bn + "' has dtype " + dtype_name(b.dtype) + " but '" + an + "' has " +
                     dtype_name(a.dtype));
}

// The product of a [.., n, k] and b [.., k, m] into out, with out's prior values scaled by beta
// (0: not read). k == 0 or alpha == 0 leaves the product out (PyTorch's gemm ignores NaN and inf
// in it then), so cuBLAS is not called.
void product(Call& call, const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta) {
  const bool batched = a.ndim() == 3;
  const int d0 = batched ? 1 : 0;
  Gemm g{};
  g.dtype = a.dtype;
  g.batch = batched ? a.size(0) : 1;
  g.n = a.size(d0);
  g.k = a.size(d0 + 1);
  g.m = b.size(d0 + 1);
  if (out.numel() == 0) return;
  if (g.k == 0 || alpha == 0) {
    if (beta == 0) fill(out, 0);
    else if (beta != 1) copy_scaled(out, out, beta);
    synchronize("the empty product");
    return;
  }
  g.a = operand(call, a, d0);
  g.b = operand(call, b, d0);
  g.c = out.data;
  g.alpha = alpha;
  g.beta = beta;
  run_gemm(g);
}

void mm(Call& call) {
  const Tensor a = call.tensor(0, "self"), b = call.tensor(1, "mat2");
  check_float(a, "self");
  check_same_dtype(a, "self", b, "mat2");
  if (a.ndim() != 2 || b.ndim() != 2) invalid_argument("arguments 'self' and 'mat2' must be 2-d, got " +
                                                       shape_string(a.shape) + " and " + shape_string(b.shape));
  if (a.size(1) != b.size(0)) invalid_argument("'self' " + shape_string(a.shape) + " and 'mat2' " + shape_string(b.shape) +
                                               " cannot be multiplied");
  product(call, a, b, call.output(0, a.dtype, {a.size(0), b.size(1)}), 1, 0);
}

void bmm(Call& call) {
  const Tensor a = call.tensor(0, "self"), b = call.tensor(1, "mat2");
  check_float(a, "self");
  check_same_dtype(a, "self", b, "mat2");
  if (a.ndim() != 3 || b.ndim() != 3) invalid_argument("arguments 'self' and 'mat2' must be 3-d, got " +
                                                       shape_string(a.shape) + " and " + shape_string(b.shape));
  if (a.size(0) != b.size(0) || a.size(2) != b.size(1))
    invalid_argument("'self' " + shape_string(a.shape) + " and 'mat2' " + shape_string(b.shape) + " cannot be multiplied");
  product(call, a, b, call.output(0, a.dtype, {a.size(0), a.size(1), b.size(2)}), 1, 0);
}

// beta * self + alpha * (mat1 @ mat2): self (broadcast) is copied into the output, which cuBLAS
// then scales by beta, as PyTorch's addmm does. beta == 0 never reads self (NaN there is ignored).
void addmm(Call& call) {
  const Tensor self = call.tensor(0, "self"), a = call.tensor(1, "mat1"), b = call.tensor(2, "mat2");
  const double beta = call.scalar(3, "beta"), alpha = call.scalar(4, "alpha");
  check_float(a, "mat1");
  check_same_dtype(a, "mat1", b, "mat2");
  check_same_dtype(a, "mat1", self, "self");
  if (a.ndim() != 2 || b.ndim() != 2) invalid_argument("arguments 'mat1' and 'mat2' must be 2-d, got " +
                                                       shape_string(a.shape) + " and " + shape_string(b.shape));
  if (a.size(1) != b.size(0)) invalid_argument("'mat1' " + shape_string(a.shape) + " and 'mat2' " + shape_string(b.shape) +
                                               " cannot be multiplied");
  const Dims shape{a.size(0), b.size(1)};
  const Tensor addend = self.expanded(shape, "self");
  const Tensor out = call.output(0, a.dtype, shape);
  if (beta != 0) copy_scaled(addend, out);
  product(call, a, b, out, alpha, beta);
}

}  // namespace

std::vector<OpDef> blas_ops() {
  return {
      {"aten::mm", mm, nullptr},
      {"aten::bmm", bmm, nullptr},
      {"aten::addmm", addmm, nullptr},
  };
}

}  // namespace opc_cudalibs
