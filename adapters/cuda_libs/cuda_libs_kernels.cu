// The adapter's own CUDA kernels: what neither cuBLAS nor cuDNN does for a framework integration
// (strided copies with a dtype conversion and a scale, fills, max pooling's indices, batch norm's
// inverse standard deviation). All run on the default stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda_libs.h"

namespace opc_cudalibs {
namespace {

constexpr int kMaxDims = 16;
constexpr int kThreads = 256;

struct Layout {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t src[kMaxDims];  // strides in elements
  int64_t dst[kMaxDims];
};

template <class C, class T>
__device__ C load(const T* p) {
  return static_cast<C>(*p);
}
template <>
__device__ float load<float, __half>(const __half* p) {
  return __half2float(*p);
}
template <>
__device__ double load<double, __half>(const __half* p) {
  return __half2float(*p);
}
template <>
__device__ float load<float, __nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
template <>
__device__ double load<double, __nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}

template <class T, class C>
__device__ void store(T* p, C v) {
  *p = static_cast<T>(v);
}
// One rounding to the narrow type, from whichever compute type.
template <>
__device__ void store<__half, float>(__half* p, float v) {
  *p = __float2half_rn(v);
}
template <>
__device__ void store<__half, double>(__half* p, double v) {
  *p = __double2half(v);
}
template <>
__device__ void store<__nv_bfloat16, float>(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}
template <>
__device__ void store<__nv_bfloat16, double>(__nv_bfloat16* p, double v) {
  *p = __double2bfloat16(v);
}

template <class S, class D, class C>
__global__ void copy_kernel(const S* src, D* dst, Layout l, int64_t n, C scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, so = 0, dof = 0;
    for (int d = l.ndim - 1; d >= 0; --d) {
      const int64_t at = rest % l.shape[d];
      rest /= l.shape[d];
      so += at * l.src[d];
      dof += at * l.dst[d];
    }
    store<D, C>(dst + dof, load<C, S>(src + so) * scale);
  }
}

template <class T, class C>
__global__ void fill_kernel(T* dst, Layout l, int64_t n, C value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, dof = 0;
    for (int d = l.ndim - 1; d >= 0; --d) {
      dof += (rest % l.shape[d]) * l.dst[d];
      rest /= l.shape[d];
    }
    store<T, C>(dst + dof, value);
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 20)); }

Layout layout_of(const Tensor& src, const Tensor& dst) {
  if (dst.ndim() > kMaxDims) not_implemented("more than 16 dims");
  Layout l{};
  l.ndim = dst.ndim();
  for (int d = 0; d < dst.ndim(); ++d) {
    l.shape[d] = dst.size(d);
    l.src[d] = src.ndim() == dst.ndim() ? src.stride(d) : 0;
    l.dst[d] = dst.stride(d);
  }
  return l;
}

// Calls f(T*) with the element type of t.
template <class F>
void visit(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(static_cast<float*>(nullptr)); return;
    case DType::f16: f(static_cast<__half*>(nullptr)); return;
    case DType::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case DType::f64: f(static_cast<double*>(nullptr)); return;
    case DType::i64: f(static_cast<int64_t*>(nullptr)); return;
    default: not_implemented(std::string("no copy kernel for ") + dtype_name(t));
  }
}

template <class T>
constexpr bool is_wide = std::is_same_v<T, double> || std::is_same_v<T, int64_t>;

}  // namespace

void copy_scaled(const Tensor& src, const Tensor& dst, double scale) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src.shape != dst.shape) throw KernelError(OPC_ERROR, "copy: shapes " + shape_string(src.shape) + " and " + shape_string(dst.shape));
  const Layout l = layout_of(src, dst);
  visit(src.dtype, [&](auto* s) {
    using S = std::remove_pointer_t<decltype(s)>;
    visit(dst.dtype, [&](auto* d) {
      using D = std::remove_pointer_t<decltype(d)>;
      using C = std::conditional_t<is_wide<S> || is_wide<D>, double, float>;
      copy_kernel<S, D, C><<<blocks_for(n), kThreads>>>(static_cast<const S*>(src.data), static_cast<D*>(dst.data), l, n,
                                                        static_cast<C>(scale));
    });
  });
  check_cuda(cudaGetLastError(), "launching the strided copy");
}

void fill(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Layout l = layout_of(dst, dst);
  visit(dst.dtype, [&](auto* d) {
    using D = std::remove_pointer_t<decltype(d)>;
    using C = std::conditional_t<is_wide<D>, double, float>;
    fill_kernel<D, C><<<blocks_for(n), kThreads>>>(static_cast<D*>(dst.data), l, n, static_cast<C>(value));
  });
  check_cuda(cudaGetLastError(), "launching the fill");
}

namespace {

// PyTorch's scan (max_pool2d_with_indices_out_cuda_frame): the start of the clipped window, then
// every position with a larger value or a NaN replaces it.
template <class T>
__global__ void max_index_kernel(const T* x, int64_t* indices, int64_t planes, int h, int w, int oh, int ow, int kh, int kw,
                                 int sh, int sw, int ph, int pw) {
  const int64_t n = planes * oh * ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int ox = static_cast<int>(i % ow), oy = static_cast<int>(i / ow % oh);
    const int64_t plane = i / (static_cast<int64_t>(oh) * ow);
    int y0 = oy * sh - ph, x0 = ox * sw - pw;
    const int y1 = min(y0 + kh, h), x1 = min(x0 + kw, w);
    y0 = max(y0, 0);
    x0 = max(x0, 0);
    const T* p = x + plane * h * w;
    int64_t best = static_cast<int64_t>(y0) * w + x0;
    double best_value = -INFINITY;
    for (int y = y0; y < y1; ++y) {
      for (int xx = x0; xx < x1; ++xx) {
        const double v = load<double, T>(p + static_cast<int64_t>(y) * w + xx);
        if (v > best_value || isnan(v)) {
          best_value = v;
          best = static_cast<int64_t>(y) * w + xx;
        }
      }
    }
    indices[i] = best;
  }
}

template <class T>
__global__ void inverse_std_kernel(const T* var, T* invstd, int64_t n, double eps) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    invstd[i] = static_cast<T>(1.0 / sqrt(static_cast<double>(var[i]) + eps));  // in double, rounded once
}

}  // namespace

void max_pool_indices(const Tensor& x, const Tensor& indices, int kh, int kw, int sh, int sw, int ph, int pw) {
  const int64_t n = indices.numel();
  if (n == 0) return;
  const int64_t planes = x.size(0);
  const int h = to_int(x.size(1), "height"), w = to_int(x.size(2), "width");
  const int oh = to_int(indices.size(1), "output height"), ow = to_int(indices.size(2), "output width");
  visit(x.dtype, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    if constexpr (std::is_same_v<T, int64_t>) {
      not_implemented("max pooling of int64");
    } else {
      max_index_kernel<T><<<blocks_for(n), kThreads>>>(static_cast<const T*>(x.data), static_cast<int64_t*>(indices.data),
                                                      planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw);
    }
  });
  check_cuda(cudaGetLastError(), "launching the max pooling index kernel");
}

void inverse_std(const Tensor& var, const Tensor& invstd, double eps) {
  const int64_t n = var.numel();
  if (n == 0) return;
  if (var.dtype == DType::f64) {
    inverse_std_kernel<double><<<blocks_for(n), kThreads>>>(static_cast<const double*>(var.data),
                                                           static_cast<double*>(invstd.data), n, eps);
  } else if (var.dtype == DType::f32) {
    inverse_std_kernel<float><<<blocks_for(n), kThreads>>>(static_cast<const float*>(var.data),
                                                          static_cast<float*>(invstd.data), n, eps);
  } else {
    throw KernelError(OPC_ERROR, "inverse_std: statistics must be float32 or float64");
  }
  check_cuda(cudaGetLastError(), "launching the inverse standard deviation kernel");
}

void synchronize(const std::string& what) {
  check_cuda(cudaStreamSynchronize(nullptr), what);
  check_cuda(cudaGetLastError(), what);
}

}  // namespace opc_cudalibs
