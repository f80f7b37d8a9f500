#include "opconform/core/op_data.h"

#include <cmath>

#include "opconform/core/error.h"

namespace opconform {
namespace {

void check_bound(const FunctionSchema& schema, DType dtype, double v, const char* what) {
  OPCONFORM_CHECK(std::isfinite(v) && v >= 0, ErrorCode::kInvalidArgument, "the ", name(dtype), " tolerance of '",
                  schema.full_name(), "': ", what, " must be a finite value >= 0 (got ", v, ")");
}

}  // namespace

const ToleranceOverride* OpData::tolerance_for(DType dtype) const {
  for (const auto& t : tolerances)
    if (t.dtype == dtype) return &t;
  return nullptr;
}

bool OpData::empty() const {
  return family.empty() && doc.empty() && constraints.args.empty() && constraints.relations.empty() &&
         constraints.dtypes.empty() && !sample_builder && tolerances.empty() && !rounding && !double_backward && !layout_query &&
         !addresses_storage;
}

void validate_op_data(const FunctionSchema& schema, const OpData& data) {
  validate_constraints(schema, data.constraints);
  for (const auto& t : data.tolerances) {
    OPCONFORM_CHECK(!t.reason.empty(), ErrorCode::kInvalidArgument, "the ", name(t.dtype), " tolerance of '",
                    schema.full_name(), "' has no reason; give one: it is shown in every report that uses it");
    check_bound(schema, t.dtype, t.tolerance.atol, "atol");
    check_bound(schema, t.dtype, t.tolerance.rtol, "rtol");
    OPCONFORM_CHECK(!t.tolerance.max_ulp || *t.tolerance.max_ulp >= 0, ErrorCode::kInvalidArgument, "the ",
                    name(t.dtype), " tolerance of '", schema.full_name(), "': max_ulp must be >= 0 (got ",
                    t.tolerance.max_ulp.value_or(0), ")");
  }
  if (data.rounding) {
    OPCONFORM_CHECK(data.rounding->ulps >= 0 && data.rounding->working_error >= 0 &&
                        data.rounding->working_error < 0x1p-8,
                    ErrorCode::kInvalidArgument, "the rounding contract of '", schema.full_name(),
                    "': ulps must be >= 0 and working_error in [0, 2^-8)");
  }
}

}  // namespace opconform
