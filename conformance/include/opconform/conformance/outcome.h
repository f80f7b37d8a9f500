// Outcome and CheckResult: what a check says about one operator (ARCHITECTURE.md: outcomes are a
// closed set). A check never throws for a finding; it returns one of these.
#pragma once

#include <exception>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "opconform/conformance/cause.h"

namespace opconform::conformance {

enum class Outcome {
  passed,
  failed,       // a finding: message says what, repro how to replay it
  skipped,      // not applicable here; message says why
  unsupported,  // the library does not implement it (no kernel for this device, ...)
  crashed,      // the kernel died (signal) — only in isolated workers
  timed_out,    // the kernel hung — only in isolated workers
  mistrusted,   // the comparison proved nothing (every value zero or NaN, ...)
};

std::string_view to_string(Outcome o);
// How bad an outcome is (higher is worse): failed > crashed > timed_out > mistrusted >
// unsupported > passed > skipped — combine() and the reports' worst-of use it.
int severity(Outcome o);
std::ostream& operator<<(std::ostream& out, Outcome o);

struct CheckResult {
  std::string check;     // "test_schema", "gradcheck", "stride_invariance", ...
  Outcome outcome = Outcome::passed;
  std::string message;   // one paragraph: operator, argument, sample, what to do
  std::string repro;     // one line that replays a failure (set on failed)
  std::optional<std::string> minimal_input;  // the shrunk input of a generated failure
  // Why it is not a pass (Note [One finding per cause] in cause.h); opcheck gives every result
  // that is not a pass one (cause_for_outcome where its check set none).
  std::optional<Cause> cause;

  bool ok() const { return outcome == Outcome::passed || outcome == Outcome::skipped; }
};

// The subject of the cause of a gradient check on an op that the reference can differentiate but
// the library under test registers no backward for (kind not_implemented): the console counts
// these as "inference only" (Note [Inference-only libraries]).
inline constexpr std::string_view kNoBackwardSubject = "backward";
bool is_missing_backward(const Cause& cause);

// The cause an outcome has by itself (crashed: crash, timed_out: hang, unsupported:
// not_implemented, skipped: not_applicable, mistrusted: inconclusive, failed: other), for a result
// whose check set none; nullopt for passed.
std::optional<Cause> cause_for_outcome(Outcome outcome, std::string_view check);

// Combines results of one check over several samples: the first failure-like outcome wins
// (failed > crashed > timed_out > mistrusted > unsupported > passed > skipped), with its message.
CheckResult combine(const CheckResult& a, const CheckResult& b);

// What a check reports when the operator itself threw on a sample it should accept (the op is
// broken there): unsupported for an opconform::Error kNotImplemented (no kernel for this device
// or dtype: the library does not implement it), failed otherwise, with the error's message.
// `phase` says which run threw ("the real run"); it is the cause's subject, so it must not hold
// sample values.
CheckResult operator_threw(std::string check, std::string_view op_name, const std::exception& error,
                           std::string_view sample, std::string_view phase);

}  // namespace opconform::conformance
