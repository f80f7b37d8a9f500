// OpData: what an operator's definer says about it beyond its schema and tags — a one-line doc,
// its family, the input constraints (with the dtypes it accepts), a sample builder where the
// constraints cannot say enough, tolerance overrides with their reasons, and a low-precision
// rounding contract. It is stored with the definition in the Registry (Registry::set_op_data,
// OperatorHandle::data) and undone with it.
//
// Note [Per-op data belongs to the registry]: this data used to live in process-global tables
// keyed by op name, so two registries could not hold different data for one name, the reference
// had to be registered before anything was planned, and tests had to undeclare what they
// declared. Now whoever defines an op sets its data (the reference's op builder, the plugin
// loader from a plugin's declarations, a test), and the checks read it from the op they are
// given. A plugin op defined from the reference's schema takes the reference's data with it (the
// loader copies it from the registry the schema came from: adapters/loader.h). The types are plain
// data with no RapidCheck in them, so the reference needs only core to declare them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "opconform/core/dtype.h"
#include "opconform/core/input_constraints.h"
#include "opconform/core/sample_draw.h"
#include "opconform/core/schema.h"

namespace opconform {

// Allowed difference of a result: |actual - expected| <= atol + rtol * |expected| per element
// (conformance/tolerance.h has the model and the per-dtype defaults).
struct Tolerance {
  double rtol = 0;
  double atol = 0;
  std::optional<int64_t> max_ulp;  // when set, a value within this many ULPs also passes
};

// An op's own tolerance for one dtype, replacing the defaults and any run-wide atol/rtol.
struct ToleranceOverride {
  DType dtype;
  Tolerance tolerance;
  std::string reason;  // why the math needs it (shown in reports); required
};

// The low-precision rounding an op promises (Note [Low-precision rounding] in
// conformance/rounding.h): float16/bfloat16 results equal the float64 result rounded to
// nearest-even, up to `ulps`.
struct RoundingContract {
  int ulps = 0;                    // allowed distance from the rounded float64 result
  double working_error = 0x1p-20;  // near a midpoint (|exact - midpoint| <= this * |exact|), either neighbour
};

struct OpData {
  std::string family;  // "elementwise_unary", "reduction", ... (the reference's grouping; free text)
  std::string doc;     // one line
  // The arguments' constraints; constraints.dtypes are the dtypes the op accepts (samples cover
  // each of them; empty: float32 and float64).
  InputConstraints constraints;
  SampleBuilder sample_builder;  // empty: samples from the schema and constraints
  std::vector<ToleranceOverride> tolerances;
  std::optional<RoundingContract> rounding;
  // The op's autograd formula is itself differentiable (gradgradcheck expects a second derivative).
  bool double_backward = false;
  // Note [Layout queries]: the result is the input's layout itself (sym_stride.int,
  // sym_storage_offset), so it rightly changes with the input's strides and offset: the checks
  // that hold results invariant under a change of layout (stride_invariance, and the graph
  // replay of test_aot_dispatch_dynamic on inputs of other strides) do not apply to it.
  bool layout_query = false;
  // Note [Ops that address storage]: the op reads its input's storage through sizes and strides
  // of its own (as_strided, as_strided_scatter), so another layout of the same values is another
  // input to it and stride_invariance does not apply. Said by the op's data, never guessed from
  // an argument's name: convolution and pooling take a `stride` too and must be checked.
  bool addresses_storage = false;

  // The override for `dtype`, or null.
  const ToleranceOverride* tolerance_for(DType dtype) const;
  // True when nothing was set.
  bool empty() const;
};

// Throws Error(kInvalidArgument) naming the op when the data does not fit its schema: constraints
// naming unknown arguments (validate_constraints), a tolerance override without a reason or with a
// negative bound, a rounding contract out of range.
void validate_op_data(const FunctionSchema& schema, const OpData& data);

}  // namespace opconform
