// Outcome names and combining results over samples (outcome.h).
#include "opconform/conformance/outcome.h"

#include "opconform/core/error.h"

namespace opconform::conformance {

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::passed: return "passed";
    case Outcome::failed: return "failed";
    case Outcome::skipped: return "skipped";
    case Outcome::unsupported: return "unsupported";
    case Outcome::crashed: return "crashed";
    case Outcome::timed_out: return "timed_out";
    case Outcome::mistrusted: return "mistrusted";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, Outcome o) { return out << to_string(o); }

int severity(Outcome o) {
  switch (o) {
    case Outcome::skipped: return 0;
    case Outcome::passed: return 1;
    case Outcome::unsupported: return 2;
    case Outcome::mistrusted: return 3;
    case Outcome::timed_out: return 4;
    case Outcome::crashed: return 5;
    case Outcome::failed: return 6;
  }
  return 6;
}

bool is_missing_backward(const Cause& cause) {
  return cause.kind == FindingKind::not_implemented && cause.subject == kNoBackwardSubject;
}

std::optional<Cause> cause_for_outcome(Outcome outcome, std::string_view check) {
  const std::string c(check);
  switch (outcome) {
    case Outcome::passed: return std::nullopt;
    case Outcome::failed: return Cause{FindingKind::other, "", c + " failed"};
    case Outcome::crashed: return Cause{FindingKind::crash, "", "the kernel crashed in " + c};
    case Outcome::timed_out: return Cause{FindingKind::hang, "", "the kernel hung in " + c};
    case Outcome::unsupported: return Cause{FindingKind::not_implemented, "", "not implemented (" + c + ")"};
    case Outcome::skipped: return Cause{FindingKind::not_applicable, "", c + " does not apply"};
    case Outcome::mistrusted: return Cause{FindingKind::inconclusive, "", c + " proved nothing"};
  }
  return std::nullopt;
}

CheckResult combine(const CheckResult& a, const CheckResult& b) {
  // Ties keep the first: the earliest sample that showed the problem is the one reported.
  CheckResult result = severity(b.outcome) > severity(a.outcome) ? b : a;
  if (result.check.empty()) result.check = a.check.empty() ? b.check : a.check;
  return result;
}

CheckResult operator_threw(std::string check, std::string_view op_name, const std::exception& error,
                           std::string_view sample, std::string_view phase) {
  CheckResult r;
  r.check = std::move(check);
  const auto* e = dynamic_cast<const Error*>(&error);
  // kNotImplemented is the dispatcher's "no kernel for these arguments" (or a kernel saying the
  // same for a dtype): the library lacks it, which is not a wrong answer.
  if (e != nullptr && e->code() == ErrorCode::kNotImplemented) {
    r.outcome = Outcome::unsupported;
    // The subject is the reason: a library without fake kernels lacks them for every op.
    const bool capability = e->reason() == ErrorReason::kNoFakeKernel || e->reason() == ErrorReason::kNoKernel;
    r.cause = Cause{FindingKind::not_implemented, std::string(to_string(e->reason())),
                    ::opconform::detail::concat("not implemented: ", describe(e->reason())), capability};
    r.message = ::opconform::detail::concat("'", op_name, "' is not implemented for this sample (", sample, "): ", error.what());
    return r;
  }
  r.outcome = Outcome::failed;
  r.cause = Cause{FindingKind::threw, std::string(phase),
                  ::opconform::detail::concat("threw in ", phase, " on a valid sample: ",
                                              describe(e != nullptr ? e->reason() : ErrorReason::kUnspecified))};
  r.message = ::opconform::detail::concat("'", op_name, "' threw in ", phase, " on a valid sample (", sample,
                             "): the operator is broken on this input. Error: ", error.what());
  r.repro = ::opconform::detail::concat("opcheck(\"", op_name, "\", test_utils={\"", r.check, "\"}) on sample: ", sample);
  return r;
}

}  // namespace opconform::conformance
