// The shared machinery of elementwise reference kernels (Note [Reference arithmetic]):
//
//   - result_type: PyTorch's type promotion over tensors and Python-like scalars (dimensioned
//     tensors outrank 0-d tensors, which outrank scalars, unless a lower rank brings a higher
//     category: bool < integer < floating < complex).
//   - elementwise_strides: the strides PyTorch's TensorIterator gives an elementwise output
//     (the inputs' memory order, broadcast dims ignored), so fake and real kernels agree with
//     ATen's layouts, not only with each other.
//   - map_elements<Domain>(inputs, compute_dtype, out_dtype, f): broadcasts the inputs, reads
//     every element in the *wide* type of compute_dtype — double for floating types, complex128
//     for complex, int64 for integers and bool — calls f, and stores the result in out_dtype.
//     Computing in the wide type and rounding once is what makes a reference kernel a reference:
//     float16 and float32 results are the correctly rounded wide results.
//   - plus / minus / times / is_nan: the arithmetic kernels share in the wide types (int64 wraps);
//     max_finite / integer_range: what a dtype holds.
//
// Note [Reference arithmetic]: per-dtype arithmetic lives in the wide types only; an op body is
// one small generic lambda over them. `Domain` says which wide types an op supports; a dtype
// outside it is refused with an error naming the op and dtype.
#pragma once

#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "opconform/core/detail/strided_loop.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/core/scalar.h"
#include "opconform/core/tensor.h"

namespace opconform::reference::detail {

// ---- promotion ----

// Category of a dtype: 0 bool, 1 integer, 2 floating, 3 complex.
int dtype_category(DType d);
// The dtype PyTorch gives a Python scalar of this kind (bool, int64, default float32, complex64).
DType scalar_dtype(const Scalar& s);
// torch.result_type over these tensors (undefined ones ignored) and scalars.
DType result_type(const std::vector<Tensor>& tensors, const std::vector<Scalar>& scalars = {});
// The dtype a floating-only op computes in: integers and bool go to float32 (PyTorch's default).
DType to_floating(DType d);

// ---- dtype limits ----

// The largest finite value of a floating dtype (of the real part, for complex).
double max_finite(DType d);
// The values of an integral dtype (bool: [0, 1]).
std::pair<int64_t, int64_t> integer_range(DType d);

// ---- layouts ----

// Broadcast shape of several tensors (error naming `op` when they do not broadcast).
std::vector<int64_t> broadcast_all(std::string_view op, const std::vector<Tensor>& inputs);
// TensorIterator's output strides for an elementwise op of these inputs over `shape`.
std::vector<int64_t> elementwise_strides(IntArrayRef shape, const std::vector<Tensor>& inputs);
// An uninitialised output with those strides (works on fake tensors: metadata only).
Tensor empty_elementwise(const std::vector<Tensor>& inputs, DType dtype, std::string_view op);

// ---- the wide types ----

enum class Domain : uint8_t {
  All,       // int64, double, complex128
  Real,      // int64, double (no complex)
  Floating,  // double, complex128 (integer inputs were promoted to float before)
  FloatReal, // double only
  Integral,  // int64 only (bool included)
};

template <typename T> inline constexpr bool is_complex_v = false;
template <typename T> inline constexpr bool is_complex_v<std::complex<T>> = true;

// The dtype the kernel computes in for compute dtype d.
constexpr DType wide_dtype(DType d) {
  return is_complex(d) ? DType::Complex128 : is_floating(d) ? DType::Float64 : DType::Int64;
}

// Throws the "does not support dtype" error of an op.
[[noreturn]] void unsupported_dtype(std::string_view op, DType d);

// Arithmetic in a wide type W. int64 wraps (two's complement), as the integer kernels of PyTorch
// do, instead of overflowing, which C++ leaves undefined; a result cast to a narrower integer
// dtype keeps the low bits, so it is that dtype's wrapped result too.
template <typename W>
W plus(W a, W b) {
  if constexpr (std::is_same_v<W, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <typename W>
W minus(W a, W b) {
  if constexpr (std::is_same_v<W, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else return a - b;
}
template <typename W>
W times(W a, W b) {
  if constexpr (std::is_same_v<W, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}
// NaN in a wide type (never for int64; either part for complex).
template <typename W>
bool is_nan(W v) {
  if constexpr (is_complex_v<W>) return std::isnan(v.real()) || std::isnan(v.imag());
  else if constexpr (std::is_same_v<W, double>) return std::isnan(v);
  else return false;
}

template <Domain D, typename F>
decltype(auto) visit_wide(std::string_view op, DType compute, F&& f) {
  const DType w = wide_dtype(compute);
  if constexpr (D == Domain::All || D == Domain::Real || D == Domain::Integral) {
    if (w == DType::Int64) return f(type_tag<int64_t>{});
  }
  if constexpr (D == Domain::All || D == Domain::Real || D == Domain::Floating || D == Domain::FloatReal) {
    if (w == DType::Float64) return f(type_tag<double>{});
  }
  if constexpr (D == Domain::All || D == Domain::Floating) {
    if (w == DType::Complex128) return f(type_tag<complex128>{});
  }
  unsupported_dtype(op, compute);
}

// Applies f elementwise: out[i] = f(in_0[i], ..., in_{N-1}[i]) over the broadcast shape, reading
// each input in the wide type W of `compute`; the result (W, bool or another wide type) is
// converted to out_dtype. The output has elementwise_strides. f receives W values.
template <Domain D, size_t N, typename F>
Tensor map_elements(std::string_view op, const std::array<Tensor, N>& inputs, DType compute, DType out_dtype, F&& f) {
  std::vector<Tensor> list(inputs.begin(), inputs.end());
  Tensor out = empty_elementwise(list, out_dtype, op);
  if (out.numel() == 0) return out;
  visit_wide<D>(op, compute, [&](auto tag) {
    using W = typename decltype(tag)::type;
    std::array<Tensor, N> wide;
    for (size_t k = 0; k < N; ++k) wide[k] = inputs[k].to(dtype_of_v<W>).expand(out.sizes());
    using R = std::decay_t<decltype(std::apply(f, std::array<W, N>{}))>;
    // The result in its own wide dtype, laid out like `out`, then converted once.
    Tensor result = out.dtype() == dtype_of_v<R> ? out : empty_strided(out.sizes(), out.strides(), dtype_of_v<R>);
    R* r = result.template mutable_data_ptr<R>();
    std::array<const W*, N> ptr;
    std::array<std::span<const int64_t>, N + 1> strides;
    strides[0] = result.strides();
    for (size_t k = 0; k < N; ++k) {
      ptr[k] = wide[k].template const_data_ptr<W>();
      strides[k + 1] = wide[k].strides();
    }
    opconform::detail::strided_loop<N + 1>(out.sizes(), strides, [&](const std::array<int64_t, N + 1>& offs) {
      [&]<size_t... I>(std::index_sequence<I...>) { r[offs[0]] = f(ptr[I][offs[I + 1]]...); }
      (std::make_index_sequence<N>{});
    });
    if (!result.is_same(out)) out.copy_(result);
  });
  return out;
}

template <Domain D, typename F>
Tensor map_unary(std::string_view op, const Tensor& x, DType compute, DType out_dtype, F&& f) {
  return map_elements<D, 1>(op, {x}, compute, out_dtype, std::forward<F>(f));
}
template <Domain D, typename F>
Tensor map_binary(std::string_view op, const Tensor& a, const Tensor& b, DType compute, DType out_dtype, F&& f) {
  return map_elements<D, 2>(op, {a, b}, compute, out_dtype, std::forward<F>(f));
}

// A 0-d tensor holding a scalar, typed for promotion as PyTorch's wrapped numbers are.
Tensor wrapped_scalar(const Scalar& s, DType dtype);

// Reads a Scalar in the wide type W.
template <typename W>
W scalar_as(const Scalar& s) {
  if constexpr (is_complex_v<W>) return s.to<complex128>();
  else if constexpr (std::is_same_v<W, double>) return s.to_double();
  else return s.to_int();
}

}  // namespace opconform::reference::detail
