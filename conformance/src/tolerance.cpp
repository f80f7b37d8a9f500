// The tolerance model (tolerance.h).
//
// Note [Tolerance model]
// ----------------------
// An element `a` of the actual tensor matches the element `e` of the expected one when
//   - both are NaN (for complex: a value is NaN when either part is), or
//   - either is infinite (for complex: either part) and they are exactly equal, part by part —
//     so +inf matches only +inf, never -inf or a large finite value, or
//   - |a - e| <= atol + rtol * |e| (torch.testing.assert_close's rule; for complex |.| is the
//     modulus), or
//   - a ULP bound is set and a and e are at most max_ulp representable values apart in the
//     dtype being compared (for complex: the larger of the two parts' distances).
// Integers and bool compare exactly by default (atol = rtol = 0); explicit tolerances apply to
// them too, computed on the exact int64 difference. Values are read on the CPU, row-major, as
// float64 / complex128 / int64, so strides and devices of the two tensors may differ. A
// tolerance of 0 is 0: nothing is substituted for it (PyTorch ignores rtol=0 in some paths).
//
// Which tolerance applies (ToleranceSpec::for_dtype): the op's own for the dtype (its data's
// ToleranceOverride, with a reason) wins; else explicit atol / rtol (opcheck's options), each
// on its own, replace the dtype default; else the dtype default (the table of docs/checks.md).
//
// Mistrusted. A comparison that proves nothing is reported as such rather than passed: when
// the tensors have at least one element, every element matched, and every pair was (zero,
// zero) — ±0 alike — or (NaN, NaN). Then any kernel that returns zeros or NaNs would have
// passed. Empty tensors are not mistrusted: the comparison checked their shape and dtype, which
// is all there is. A comparison with a mismatch is never mistrusted: the mismatch is a finding.
#include "opconform/conformance/tolerance.h"

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "opconform/core/error.h"

namespace opconform::conformance {
namespace {

// ---------------------------------------------------------------- declared tolerances

void check_tolerance_value(double v, const char* what) {
  OPCONFORM_CHECK(std::isfinite(v) && v >= 0, ErrorCode::kInvalidArgument, "tolerance: ", what,
                  " must be a finite value >= 0 (got ", v, ")");
}

// ---------------------------------------------------------------- ULP distance

struct FloatFormat {
  int mantissa_bits;  // explicit mantissa bits
  int min_exponent;   // exponent of the smallest normal value
};

FloatFormat format_of(DType dtype) {
  switch (dtype) {
    case DType::Float16: return {10, -14};
    case DType::BFloat16: return {7, -126};
    case DType::Float32: case DType::Complex64: return {23, -126};
    default: return {52, -1022};
  }
}

// The position of a finite value in the ordered sequence of the format's values (0 for ±0,
// negative for negative values): the distance of two positions counts the representable values
// between them, across binades and subnormals alike.
__int128 ulp_index(double x, FloatFormat f) {
  const double m = std::fabs(x);
  __int128 index;
  if (m < std::ldexp(1.0, f.min_exponent)) {
    index = static_cast<__int128>(std::llround(std::ldexp(m, f.mantissa_bits - f.min_exponent)));
  } else {
    int k = 0;
    const double frac = std::frexp(m, &k);  // m = frac * 2^k, frac in [0.5, 1)
    const int exponent = k - 1;
    const auto mantissa = static_cast<__int128>(std::llround(std::ldexp(2 * frac - 1, f.mantissa_bits)));
    index = (static_cast<__int128>(exponent - f.min_exponent + 1) << f.mantissa_bits) + mantissa;
  }
  return x < 0 ? -index : index;
}

double ulp_distance(double a, double e, FloatFormat f) {
  __int128 d = ulp_index(a, f) - ulp_index(e, f);
  return static_cast<double>(d < 0 ? -d : d);
}

// ---------------------------------------------------------------- element comparison

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string num(complex128 v) { return "(" + num(v.real()) + (v.imag() < 0 ? "" : "+") + num(v.imag()) + "j)"; }

std::string index_str(const std::vector<int64_t>& sizes, int64_t flat) {
  std::vector<int64_t> idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] > 0) {
      idx[d] = flat % sizes[d];
      flat /= sizes[d];
    }
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) out += (d ? ", " : "") + std::to_string(idx[d]);
  return out + "]";
}

// The verdict on one pair of elements.
struct PairVerdict {
  bool match;
  bool trivial;     // (0, 0) or (NaN, NaN): matched, but proves nothing
  double diff;      // |a - e| where meaningful, else 0 or inf
  double allowed;   // atol + rtol * |e|
};

PairVerdict compare_real(double a, double e, const Tolerance& tol, FloatFormat format) {
  const bool a_nan = std::isnan(a), e_nan = std::isnan(e);
  if (a_nan || e_nan) return {a_nan && e_nan, a_nan && e_nan, a_nan && e_nan ? 0.0 : INFINITY, 0};
  if (std::isinf(a) || std::isinf(e)) return {a == e, false, a == e ? 0.0 : INFINITY, 0};
  const double diff = std::fabs(a - e);
  const double allowed = tol.atol + tol.rtol * std::fabs(e);
  bool match = diff <= allowed;
  if (!match && tol.max_ulp) match = ulp_distance(a, e, format) <= static_cast<double>(*tol.max_ulp);
  return {match, a == 0 && e == 0, diff, allowed};
}

PairVerdict compare_complex(complex128 a, complex128 e, const Tolerance& tol, FloatFormat format) {
  auto is_nan = [](complex128 v) { return std::isnan(v.real()) || std::isnan(v.imag()); };
  auto is_inf = [](complex128 v) { return std::isinf(v.real()) || std::isinf(v.imag()); };
  if (is_nan(a) || is_nan(e)) {
    const bool both = is_nan(a) && is_nan(e);
    return {both, both, both ? 0.0 : INFINITY, 0};
  }
  if (is_inf(a) || is_inf(e)) return {a == e, false, a == e ? 0.0 : INFINITY, 0};
  const double diff = std::abs(a - e);
  const double allowed = tol.atol + tol.rtol * std::abs(e);
  bool match = diff <= allowed;
  if (!match && tol.max_ulp) {
    const double d = std::max(ulp_distance(a.real(), e.real(), format), ulp_distance(a.imag(), e.imag(), format));
    match = d <= static_cast<double>(*tol.max_ulp);
  }
  return {match, a == complex128(0, 0) && e == complex128(0, 0), diff, allowed};
}

PairVerdict compare_integral(int64_t a, int64_t e, const Tolerance& tol) {
  // The exact difference (int64 values may be far beyond float64's exact range).
  const __int128 d = static_cast<__int128>(a) - static_cast<__int128>(e);
  const double diff = static_cast<double>(d < 0 ? -d : d);
  const double allowed = tol.atol + tol.rtol * std::fabs(static_cast<double>(e));
  return {d == 0 || diff <= allowed, a == 0 && e == 0, diff, allowed};
}

// Runs `verdict(i)` over all elements and builds the Comparison.
template <typename Verdict, typename Show>
Comparison summarize(const Tensor& expected, int64_t n, const Tolerance& tol, Verdict&& verdict, Show&& show) {
  Comparison c;
  const std::vector<int64_t> sizes(expected.sizes().begin(), expected.sizes().end());
  int64_t mismatches = 0, first = -1, worst = -1;
  double worst_diff = -1;
  bool all_trivial = true;
  for (int64_t i = 0; i < n; ++i) {
    const PairVerdict v = verdict(i);
    all_trivial = all_trivial && v.trivial;
    if (v.match) continue;
    ++mismatches;
    if (first < 0) first = i;
    if (v.diff > worst_diff) {
      worst_diff = v.diff;
      worst = i;
    }
  }
  if (mismatches == 0) {
    c.mistrusted = n > 0 && all_trivial;
    return c;
  }
  c.equal = false;
  const PairVerdict v = verdict(first);
  std::ostringstream m;
  m << "mismatch at index " << index_str(sizes, first) << ": actual " << show(first, true) << ", expected "
    << show(first, false);
  if (std::isinf(v.diff)) {
    m << " (NaN and infinity must match exactly)";
  } else {
    m << ", |difference| " << num(v.diff) << " > allowed " << num(v.allowed) << " (atol " << num(tol.atol)
      << " + rtol " << num(tol.rtol) << " * |expected|";
    if (tol.max_ulp) m << "; or within " << *tol.max_ulp << " ULP";
    m << ")";
  }
  m << "; " << mismatches << " of " << n << " elements differ";
  if (mismatches > 1 && worst >= 0 && !std::isinf(worst_diff)) {
    m << " (greatest |difference| " << num(worst_diff) << " at " << index_str(sizes, worst) << ")";
  }
  c.mismatch = m.str();
  return c;
}

// Element bytes of a CPU tensor in row-major order (strides and offset followed exactly). Runs
// per sample of most checks (test_schema's before/after snapshots, bitwise_equal): a contiguous
// tensor is one copy, and the walk reads sizes and strides once rather than per element.
void gather_bytes(const Tensor& t, std::vector<unsigned char>& out) {
  const int64_t n = t.numel();
  const size_t item = t.itemsize();
  out.resize(static_cast<size_t>(n) * item);
  if (n == 0) return;
  const auto* base = static_cast<const unsigned char*>(t.const_data_ptr());
  if (t.is_contiguous()) {
    std::memcpy(out.data(), base, out.size());
    return;
  }
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  const int64_t dims = t.dim();
  std::vector<int64_t> idx(static_cast<size_t>(dims), 0);
  int64_t offset = 0;  // in elements, from the first element
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + static_cast<size_t>(i) * item, base + offset * static_cast<int64_t>(item), item);
    // Advance the multi-index (last dimension fastest).
    for (int64_t d = dims - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (idx[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float16: return {1e-3, 1e-5, {}};
    case DType::BFloat16: return {1.6e-2, 1e-5, {}};
    case DType::Float32: return {1.3e-6, 1e-5, {}};
    case DType::Float64: return {1e-7, 1e-7, {}};
    case DType::Complex64: return {1.3e-6, 1e-5, {}};
    case DType::Complex128: return {1e-7, 1e-7, {}};
    default: return {0, 0, {}};  // integers and bool: exact
  }
}

Tolerance ToleranceSpec::for_dtype(DType dtype, const OpData* op) const {
  if (op != nullptr) {
    if (const ToleranceOverride* own = op->tolerance_for(dtype)) return own->tolerance;
  }
  Tolerance t = default_tolerance(dtype);
  if (atol) {
    check_tolerance_value(*atol, "atol");
    t.atol = *atol;
  }
  if (rtol) {
    check_tolerance_value(*rtol, "rtol");
    t.rtol = *rtol;
  }
  return t;
}

Comparison compare(const Tensor& actual, const Tensor& expected, const Tolerance& tolerance) {
  Comparison c;
  if (!actual.defined() || !expected.defined()) {
    c.equal = actual.defined() == expected.defined();
    if (!c.equal) c.mismatch = actual.defined() ? "expected an undefined tensor" : "actual tensor is undefined";
    return c;
  }
  if (!std::equal(actual.sizes().begin(), actual.sizes().end(), expected.sizes().begin(), expected.sizes().end())) {
    c.equal = false;
    c.mismatch = "shape mismatch: actual " + shape_string(actual.sizes()) + ", expected " + shape_string(expected.sizes());
    return c;
  }
  if (actual.dtype() != expected.dtype()) {
    c.equal = false;
    c.mismatch = "dtype mismatch: actual " + std::string(name(actual.dtype())) + ", expected " +
                 std::string(name(expected.dtype()));
    return c;
  }
  const DType dtype = expected.dtype();
  const int64_t n = expected.numel();
  const FloatFormat format = format_of(dtype);
  if (is_complex(dtype)) {
    const auto a = actual.to_vector<complex128>(), e = expected.to_vector<complex128>();
    return summarize(
        expected, n, tolerance, [&](int64_t i) { return compare_complex(a[i], e[i], tolerance, format); },
        [&](int64_t i, bool act) { return num(act ? a[i] : e[i]); });
  }
  if (is_floating(dtype)) {
    const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
    return summarize(
        expected, n, tolerance, [&](int64_t i) { return compare_real(a[i], e[i], tolerance, format); },
        [&](int64_t i, bool act) { return num(act ? a[i] : e[i]); });
  }
  const auto a = actual.to_vector<int64_t>(), e = expected.to_vector<int64_t>();
  return summarize(
      expected, n, tolerance, [&](int64_t i) { return compare_integral(a[i], e[i], tolerance); },
      [&](int64_t i, bool act) { return std::to_string(act ? a[i] : e[i]); });
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() ||
      !std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end())) {
    return false;
  }
  return element_bytes(a) == element_bytes(b);
}

std::vector<unsigned char> element_bytes(const Tensor& t) {
  std::vector<unsigned char> out;
  if (!t.defined()) return out;
  // Read on the CPU; a copy to the host keeps the bytes (same dtype, no conversion).
  gather_bytes(t.device().is_cpu() ? t : t.to(Device::cpu()), out);
  return out;
}

}  // namespace opconform::conformance
