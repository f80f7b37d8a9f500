// What a check compares between two runs of an op: each returned value (Tensor[] flattened) and
// each argument the schema writes, and the comparison of two such lists (properties.cpp; used by
// the property checks and test_aot_dispatch_dynamic).
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/conformance/outcome.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/registry.h"

namespace opconform::conformance::detail {

using Observables = std::vector<std::pair<std::string, IValue>>;

// "output 0", "output 1[2]", "argument 'self' after the call", with the values.
Observables observables(const OperatorHandle& op, const Stack& args, const Stack& returns);

enum class Exactness { tolerance, bitwise };

struct Verdict {
  bool equal = true;
  bool mistrusted = false;  // every tensor comparison proved nothing
  std::string what;         // "output 0: <mismatch>"
};

// Compares two runs' observables: tensors with compare() (dtype tolerance) or bitwise, other
// values by their printed form.
Verdict compare_observables(const OperatorHandle& op, const Observables& actual, const Observables& expected,
                            const ToleranceSpec& spec, Exactness exactness);

// ---- what every check that runs the op shares (defined in properties.cpp) ----

// A result of `check`; a failed one gets a repro line naming the op and the sample.
CheckResult make_result(std::string_view check, Outcome outcome, std::string message, const std::string& op = "",
                        const std::string& sample = "");
std::vector<std::string> arg_names(const OperatorHandle& op);
std::string arg_name(const OperatorHandle& op, size_t i);

// Note [A sample is described when a message needs it]: the description of a check's sample
// ("self: float32[2, 3] ..., dim: 1") goes only into failure messages, and a check passes on
// almost every sample; describing it up front (13 checks x 50 samples a case) was ~3% of a
// library's whole check. A SampleText describes `args` at its first use, so the stack must not
// change before then: checks run the op on clones, never on the sample itself.
class SampleText {
 public:
  SampleText(const Stack& args, const OperatorHandle& op) : args_(&args), op_(&op) {}
  const std::string& str() const;
  operator const std::string&() const { return str(); }
  operator std::string_view() const { return str(); }

 private:
  const Stack* args_;
  const OperatorHandle* op_;
  mutable std::optional<std::string> text_;
};
std::ostream& operator<<(std::ostream& os, const SampleText& s);
// The schema marks argument i written.
bool is_written(const OperatorHandle& op, size_t i);
// Runs the op under NoGradGuard on `args` (which it may write) and returns its returns.
Stack call(const OperatorHandle& op, const Stack& args);

// The op's observables, or the Error it threw (anything else propagates to the caller).
struct Run {
  std::optional<Error> error;
  Observables seen;
};
Run run_op(const OperatorHandle& op, const Stack& args);

}  // namespace opconform::conformance::detail
