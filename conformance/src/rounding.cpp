#include "opconform/conformance/rounding.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "opconform/core/error.h"
#include "opconform/core/half.h"

namespace opconform::conformance {
namespace {

using opconform::detail::concat;

// The 16-bit formats by their bits: nearest-even rounding from double (half.h rounds exactly,
// Note [Round to odd]), the value of a bit pattern, and an integer key that orders patterns as
// their values (so a distance in keys is a distance in ULPs; +0 and -0 share key 0).
uint16_t rounded(DType d, double v) { return d == DType::Float16 ? Half(v).bits : BFloat16(v).bits; }
double value_of(DType d, uint16_t b) {
  return d == DType::Float16 ? opconform::detail::half_bits_to_float(b) : opconform::detail::bfloat16_bits_to_float(b);
}
int32_t key(uint16_t b) { return (b & 0x8000u) != 0 ? -static_cast<int32_t>(b & 0x7fffu) : static_cast<int32_t>(b); }
uint16_t from_key(int32_t k) { return k < 0 ? static_cast<uint16_t>(0x8000u | static_cast<uint32_t>(-k)) : static_cast<uint16_t>(k); }

std::string number(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// What one element is: within the contract or not, at an exact midpoint, and the neighbour of
// the rounded value on the exact value's side (for the ULP size and the near-midpoint rule).
struct Element {
  bool ok = true;
  bool tie = false;
  int32_t distance = 0;  // from the rounded float64 result, in ULPs
  uint16_t rounded = 0;
  double ulp = 0;        // 0: none (exact, non-finite)
};

Element judge(DType d, uint16_t got, double exact, const RoundingContract& c) {
  Element el;
  el.rounded = rounded(d, exact);
  const double g = value_of(d, got), r = value_of(d, el.rounded);
  if (std::isnan(exact)) {
    el.ok = std::isnan(g);
    return el;
  }
  if (std::isnan(g)) {
    el.ok = false;
    return el;
  }
  el.distance = std::abs(key(got) - key(el.rounded));
  el.ok = el.distance <= c.ulps;
  if (!std::isfinite(r) || r == exact) return el;
  const uint16_t toward = from_key(key(el.rounded) + (exact > r ? 1 : -1));
  const double t = value_of(d, toward);
  if (!std::isfinite(t)) return el;
  el.ulp = std::fabs(t - r);
  const double mid = 0.5 * (r + t);
  el.tie = exact == mid;
  if (!el.ok && !el.tie && std::fabs(exact - mid) <= c.working_error * std::fabs(exact)) {
    el.ok = std::abs(key(got) - key(toward)) <= c.ulps;  // float32's own error may cross this midpoint
  }
  return el;
}

}  // namespace

RoundingVerdict check_rounding(const Tensor& low, const Tensor& exact, const RoundingContract& contract) {
  RoundingVerdict v;
  const DType d = low.dtype();
  if ((d != DType::Float16 && d != DType::BFloat16) || low.numel() != exact.numel() || low.numel() == 0) return v;
  const Tensor bits = low.detach().to(d, Device::cpu()).contiguous();
  const Tensor wide = exact.detach().to(DType::Float64, Device::cpu()).contiguous();
  const auto* pl = static_cast<const uint16_t*>(bits.const_data_ptr());
  const double* pe = wide.const_data_ptr<double>();

  size_t wrong = 0, ties_wrong = 0;
  std::string first;
  std::set<double> seen;  // distinct exact values: a tensor of one repeated value is one sample of the bias
  double bias = 0;
  for (int64_t i = 0; i < low.numel(); ++i) {
    const double e = pe[i], g = value_of(d, pl[i]);
    const Element el = judge(d, pl[i], e, contract);
    ++v.compared;
    if (!el.ok) {
      ++wrong;
      ties_wrong += el.tie ? 1 : 0;
      if (first.empty()) {
        first = concat("element ", i, " is ", number(g, 6), " where the float64 result ", number(e, 17), " rounds to ",
                       number(value_of(d, el.rounded), 6), " (", el.distance, " ULP away",
                       el.tie ? ", at an exact midpoint, where ties go to even" : "", ")");
      }
    } else if (el.ulp > 0 && e != 0 && seen.insert(e).second) {
      // Measured from the correctly rounded value, not from the exact one: structured samples
      // (one factor for every element) make correct rounding itself lean one way.
      bias += static_cast<double>(key(pl[i]) - key(el.rounded)) * (e > 0 ? 1 : -1);
    }
  }
  if (wrong > 0) {
    v.ok = false;
    v.what = concat(first, "; ", wrong, " of ", v.compared, " elements out of the contract (", contract.ulps, " ULP",
                    ties_wrong ? concat(", ", ties_wrong, " of them exact midpoints not rounded to even") : "", ")");
  } else if (seen.size() >= kMinBiasElements && std::fabs(bias / static_cast<double>(seen.size())) > kMaxMeanBias) {
    const double mean = bias / static_cast<double>(seen.size());
    v.ok = false;
    v.what = concat("the results lean ", mean < 0 ? "toward zero" : "away from zero", ": over ", seen.size(),
                    " distinct inexact values the results are on average ", number(mean, 3),
                    " ULP from the correctly rounded ones (positive: away from zero)");
  }
  return v;
}

}  // namespace opconform::conformance
