// OpInfo: what the reference registry knows about each of its operators beyond the kernels —
// the family, a one-line doc, the dtypes the kernels accept, which parts exist (fake kernel,
// autograd formula, vmap rule), and the sample spec the conformance run uses (input constraints,
// a sample builder where the constraints cannot say enough, tolerance overrides with a reason).
//
// The table is filled by the register_<family>(Library&) functions (reference.h) and is
// process-wide: registering the reference into a second registry records the same entries again.
// `opconform list --reference` and docs/reference.md are printed from it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/conformance/constraints.h"
#include "opconform/conformance/generate.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/dtype.h"
#include "opconform/core/schema.h"

namespace opconform::reference {

struct ToleranceOverride {
  DType dtype;
  conformance::Tolerance tolerance;
  std::string reason;  // why the math needs it (shown in reports)
};

struct OpInfo {
  std::string name;    // "aten::add.Tensor"
  std::string schema;  // as PyTorch prints it
  std::string family;  // "elementwise_unary", "reduction", ...
  std::string doc;     // one line
  std::vector<DType> dtypes;  // the dtypes the CPU kernel accepts; samples cover these
  bool cpu = false, fake = false, autograd = false, vmap = false, cuda = false;
  // A formula whose backward is itself differentiable (written with registry ops).
  bool double_backward = false;
  // Random ops (tagged nondeterministic_seeded): determinism is not expected of them.
  bool nondeterministic = false;
  conformance::InputConstraints constraints;
  conformance::SampleBuilder sample_builder;  // empty: samples from the schema and constraints
  std::vector<ToleranceOverride> tolerances;
};

// Every operator registered by a register_<family> call so far, sorted by name.
std::vector<OpInfo> reference_op_infos();
// One entry (nullopt when the reference has no such op).
std::optional<OpInfo> reference_op_info(std::string_view name);

// Kind of schema, as the list prints it: functional, inplace, out, mutable, view.
std::string_view schema_kind_name(const FunctionSchema& schema);

// The registry as text, one line per op: name, kind, dtypes, devices, autograd, vmap, schema.
std::string format_reference_table(const std::vector<OpInfo>& infos);

namespace detail {
// Adds or replaces an entry (the OpBuilder calls it as an op's parts are registered).
void record_op_info(const OpInfo& info);
}  // namespace detail

}  // namespace opconform::reference
