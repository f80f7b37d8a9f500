// Cause: why a result is not a pass, as a value — the check's finding kind, the argument or output
// it concerns and a short title. Results with one cause key are one finding (reports/findings.h).
//
// Note [One finding per cause]: a vendor acts on causes, not on results. One wrong size check
// shows up in every dtype and every sample of each check that meets it; the report groups the
// results whose cause key is equal into one finding, one per check that catches the bug. So the
// key is made of what does not change with the sample: the op (unless the cause is library-wide),
// the check, the kind and the subject — never sample values, sizes or message text. A check sets the cause where it knows the fact (the
// comparison that failed knows the field and the output; an opconform::Error carries its
// ErrorReason, core/error.h); where a check sets none, opcheck gives the outcome's own kind
// (crash, hang, not_implemented, ...), so that no result that is not a pass goes without one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opconform::conformance {

// A closed set (docs/checks.md, "Finding kinds").
enum class FindingKind {
  other,                    // a failure its check could not classify further (rare; says why in the title)
  // Two runs, or the op and the reference, disagree on a value or on metadata.
  value_mismatch,           // elements differ beyond the tolerance (or bitwise, where the check is exact)
  shape_mismatch,
  stride_mismatch,
  dtype_mismatch,
  storage_offset_mismatch,
  aliasing_mismatch,        // an output aliases an argument in one run and not in the other
  device_mismatch,
  return_mismatch,          // the number or kind of returned values differs (a list for a tensor, None, ...)
  // The runs disagree on whether to throw.
  threw,                    // the op threw where the reference (or the other run) returned
  accepted_invalid,         // the op returned where it must refuse (an error input; the reference threw)
  // Effects a comparison of results does not show.
  undeclared_mutation,      // an argument the schema does not mark written was written (or metadata changed)
  wrong_gradient,           // a backward disagrees with finite differences (or its own double backward)
  out_of_bounds,            // a read or write outside the tensor's memory
  race,                     // concurrent calls disagree with a lone call
  rounding_bias,            // a low-precision result further from float64 than its dtype allows
  nondeterminism,           // two identical calls disagree
  // Registrations and declarations.
  schema_violation,         // the schema and the kernel disagree (alias annotations, mutability, return types)
  missing_registration,     // a registration the operator needs is missing (fake kernel, autograd, vmap rule)
  // The process.
  crash,                    // the worker died by a signal, or a CUDA fault
  hang,                     // the worker went silent past the time-out
  load,                     // the library or the op could not be loaded
  // Not failures: why a result did not test.
  not_implemented,          // unsupported: the library does not implement this (dtype, device, kernel)
  not_applicable,           // skipped: the check does not apply to this op or sample
  inconclusive,             // mistrusted: the comparison proved nothing
};

std::string_view to_string(FindingKind kind);
// Parses to_string's names; nullopt for an unknown one.
std::optional<FindingKind> parse_finding_kind(std::string_view name);
// Every kind, in declaration order (tests, the schema, --help).
std::vector<FindingKind> all_finding_kinds();

struct Cause {
  FindingKind kind = FindingKind::other;
  // What the cause concerns: an argument ("self"), an output ("output 0"), a registration ("fake
  // kernel"), ""; never a sample value.
  std::string subject;
  // A short title without sample values ("the fake kernel gives a wrong shape for output 0").
  std::string title;
  // The cause belongs to the library, not to one op (no fake kernels at all, a missing
  // capability): its key leaves the op out, so every op it affects is one finding.
  bool library_wide = false;

  bool operator==(const Cause&) const = default;
};

// The stable key of a cause: "op/check/kind/subject" ("*" for the op of a library-wide cause), the
// subject's spaces and quotes made '_' ("aten::add.Tensor/reference_agreement/value_mismatch/output_0").
std::string cause_key(std::string_view op, std::string_view check, const Cause& cause);

}  // namespace opconform::conformance
