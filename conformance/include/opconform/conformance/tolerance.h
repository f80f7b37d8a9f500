// The tolerance model of CHECKS.md: |actual - expected| <= atol + rtol * |expected| per element,
// with per-dtype defaults (those of torch.testing.assert_close), NaN equal to NaN, infinities
// equal in sign, an optional ULP bound, per-op overrides with a reason, and "mistrusted" when a
// comparison proves nothing (every compared value zero or NaN). A tolerance of 0 means 0.
// See Note [Tolerance model] in tolerance.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/dtype.h"
#include "opconform/core/op_data.h"
#include "opconform/core/tensor.h"

namespace opconform::conformance {

// torch.testing.assert_close's defaults (exact for integers and bool).
Tolerance default_tolerance(DType dtype);

// The tolerances a run uses: explicit atol/rtol (from opcheck's options) override the dtype
// defaults; the op's own overrides (OpData::tolerances, with a reason) override both.
struct ToleranceSpec {
  std::optional<double> atol;
  std::optional<double> rtol;
  Tolerance for_dtype(DType dtype, const OpData* op = nullptr) const;
};

// Declares a looser (or ULP) tolerance for one op and dtype, with the reason shown in reports.

struct Comparison {
  bool equal = true;       // within tolerance everywhere (and same shape, dtype)
  bool mistrusted = false; // nothing meaningful was compared
  std::string mismatch;    // the first mismatch: index, values, difference, allowed; or shape/dtype
};

// Compares actual with expected (same dtype and shape required; any strides and devices).
Comparison compare(const Tensor& actual, const Tensor& expected, const Tolerance& tolerance);
// Bytes of the elements (row-major), for "was this input written" and bitwise determinism.
bool bitwise_equal(const Tensor& a, const Tensor& b);
// Those bytes: each element's bytes, in row-major order (strides and offset followed; any
// device, read through the host). test_schema keeps them to see which inputs a call wrote.
std::vector<unsigned char> element_bytes(const Tensor& t);

}  // namespace opconform::conformance
