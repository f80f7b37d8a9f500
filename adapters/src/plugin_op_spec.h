// A plugin's declare_op (OpcOpSpec, ABI 1.1) as the op's OpData: the C structs read within their
// declared sizes and counts, converted, and validated against the op's schema. Private to adapters/.
#pragma once
#include <string>

#include "opconform/core/op_data.h"
#include "opconform/core/schema.h"
#include "opconform/plugin.h"

namespace opconform::adapters::detail {

// The fields of an OpcOpSpec the host read (a spec from an older minor has fewer).
struct OpSpecFields {
  std::string op;
  bool has_dtypes = false, has_data = false;  // dtypes given; constraints, tolerances or a builder given
  bool has_builder = false, has_constraints = false;  // a sample builder; argument constraints or relations
  uint64_t flags = 0;
};

// The op name and which parts `spec` gives. Throws Error(kRegistration) for a spec whose version,
// size, name or counts are not readable.
OpSpecFields read_op_spec(const OpcOpSpec* spec);

// `base` (the op's data so far) with what `spec` declares: dtypes, argument constraints,
// relations, tolerance overrides, flags, family/doc, and the sample builder (a bridge to the C
// function: plugin_samples.h). Throws Error(kInvalidArgument) naming the op when it does not fit
// the schema (validate_op_data), Error(kRegistration) for unreadable fields.
OpData op_data_from_spec(const OpcOpSpec& spec, const FunctionSchema& schema, OpData base, const std::string& library);

}  // namespace opconform::adapters::detail
