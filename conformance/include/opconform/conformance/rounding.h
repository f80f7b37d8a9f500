// Low-precision rounding: float16 and bfloat16 results checked element by element against the
// op's float64 result rounded to nearest, ties to even (dtype_consistency runs it for the ops
// whose data has a RoundingContract, OpData::rounding; the reference's elementwise families set one).
//
// Note [Low-precision rounding]: assert_close's float16/bfloat16 tolerances (rtol 1e-3 and
// 1.6e-2) span one or two ULPs, so a kernel that rounds every result the wrong way (toward zero,
// half away from zero at ties, one ULP off in a tenth of the elements) passes them. PyTorch
// computes these dtypes' elementwise ops in float32 and rounds once, so each result is the exact
// one rounded to nearest-even, except where the exact value lies so close to a rounding midpoint
// that float32's own error could cross it. The contract says how close that is
// (`working_error`, relative); there either neighbour is right, but at an *exact* midpoint
// (float32 computes those exactly: sums and products of halves) only the even one is. Beyond
// the element rule (which a contract of N > 0 ULPs relaxes), results must not lean one way:
// over at least kMinBiasElements distinct inexact values, the mean signed distance from the
// correctly rounded value (in ULPs, positive away from zero) must stay within kMaxMeanBias;
// truncation within 1 ULP averages about -0.5. It is measured from the rounded value, not the
// exact one: on structured samples (one factor for all elements) correct rounding itself leans.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "opconform/core/op_data.h"
#include "opconform/core/tensor.h"

namespace opconform::conformance {


inline constexpr size_t kMinBiasElements = 64;
inline constexpr double kMaxMeanBias = 0.25;


struct RoundingVerdict {
  bool ok = true;
  size_t compared = 0;  // elements checked
  std::string what;     // the first element out of contract and the counts, or the bias
};

// `low` (float16 or bfloat16) against `exact` (float64, same shape). Other dtypes: ok, nothing compared.
RoundingVerdict check_rounding(const Tensor& low, const Tensor& exact, const RoundingContract& contract);

}  // namespace opconform::conformance
