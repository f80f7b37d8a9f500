// The check kit: what every check does around its own logic (README.md, "The check kit"). A check
// file (src/checks/<name>.cpp) starts its run() with a CheckRun, which holds the context, the
// sample's description (made only when a message needs it) and the one way of making a result:
//
//   CheckRun k(name(), ctx);
//   Run first = k.run(), second = k.run();              // the op on fresh clones of the sample
//   Verdict v = compare_observables(ctx.op, second.seen, first.seen, ctx.tolerance, Exactness::bitwise);
//   if (!v.equal) return k.failed(mismatch_cause(v, "two runs differ", FindingKind::nondeterminism), message);
//   return k.passed();
//
// Every result that is not a pass carries a Cause (cause.h; Note [One finding per cause]): the
// comparison says which field of which observable differs (Verdict::field, Verdict::subject), and
// the result helpers take the cause with the message, so that no failure site can forget it.
#pragma once

#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/conformance/cause.h"
#include "opconform/conformance/check.h"
#include "opconform/conformance/outcome.h"
#include "opconform/conformance/sample.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/error.h"
#include "opconform/core/generator.h"
#include "opconform/core/registry.h"
#include "opconform/core/tag.h"

namespace opconform::conformance::detail {

// ---- calling the op ------------------------------------------------------------------------------

// Runs fn from the generator state every seeded call starts from (the fork_rng + manual_seed
// idiom; the caller's state is restored after). One such run at a time, so another thread's draws
// cannot interleave with it. A replay of a random op (a captured graph) run this way draws what
// run_boxed's call drew.
template <typename F>
decltype(auto) from_fixed_generator_state(F&& fn) {
  static std::recursive_mutex one_seeded_call_at_a_time;
  std::lock_guard lock(one_seeded_call_at_a_time);
  GeneratorStateGuard keep_callers_state;
  manual_seed(0x0bc0f0);
  return fn();
}

// How every check calls the operator: a random op (Tag::nondeterministic_seeded) from the fixed
// generator state, so runs a check compares draw the same numbers.
inline void run_boxed(const OperatorHandle& op, Stack& stack) {
  if (!op.has_tag(Tag::nondeterministic_seeded)) return op.call_boxed(stack);
  from_fixed_generator_state([&] { op.call_boxed(stack); });
}

// Runs the op under NoGradGuard on `args` (which it may write) and returns its returns.
Stack call(const OperatorHandle& op, const Stack& args);

std::vector<std::string> arg_names(const OperatorHandle& op);
std::string arg_name(const OperatorHandle& op, size_t i);
// The schema marks argument i written.
bool is_written(const OperatorHandle& op, size_t i);

// ---- observing -------------------------------------------------------------------------------------

// What a check compares between two runs of an op: each returned value (Tensor[] flattened) and
// each argument the schema writes: "output 0", "output 1[2]", "argument 'self' after the call".
using Observables = std::vector<std::pair<std::string, IValue>>;
Observables observables(const OperatorHandle& op, const Stack& args, const Stack& returns);

// The part of an observable's label a cause may name: "output 1[2]" -> "output 1" (the element of
// a list depends on the sample), "argument 'self' after the call" -> "self".
std::string observable_subject(std::string_view label);

// The op's observables, or the Error it threw (anything else propagates to the caller).
struct Run {
  std::optional<Error> error;
  Observables seen;
};
Run run_op(const OperatorHandle& op, const Stack& args);

// ---- comparing -------------------------------------------------------------------------------------

// metadata: definedness, shape and dtype only (a random op against another library's draws).
enum class Exactness { tolerance, bitwise, metadata };

// Which property of an observable differs; its FindingKind is kind_of(field).
enum class Field { none, count, kind, shape, strides, dtype, storage_offset, device, values, aliasing };
FindingKind kind_of(Field field);
std::string_view to_string(Field field);  // "values", "shape", ... (for titles)

struct Verdict {
  bool equal = true;
  bool mistrusted = false;  // every tensor comparison proved nothing
  std::string what;         // "output 0: <mismatch>" (sample values: for messages only)
  Field field = Field::none;
  std::string subject;      // observable_subject of the observable that differs ("output 0"); "" for count
};

// compare() (tolerance.h) of two tensors, saying which field differs (subject left empty).
Verdict compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tolerance);
// Compares two runs' observables: tensors with compare() (dtype tolerance) or bitwise, other
// values by their printed form.
Verdict compare_observables(const OperatorHandle& op, const Observables& actual, const Observables& expected,
                            const ToleranceSpec& spec, Exactness exactness);

// The cause of a failed comparison: kind_of(v.field) (or `kind`, when the check's finding has a
// kind of its own: nondeterminism, race), subject v.subject (or `subject`), title
// "<what>: <field> of <subject> differ".
Cause mismatch_cause(const Verdict& v, std::string_view what, std::optional<FindingKind> kind = std::nullopt,
                     std::optional<std::string> subject = std::nullopt);
// The not_implemented cause of an Error kNotImplemented, as operator_threw gives it (subject:
// the reason's name; library-wide for a missing capability).
Cause not_implemented_cause(const Error& error);
// The reason's name, for subjects ("invalid_argument", "unspecified").
std::string reason_subject(const Error& error);

// ---- results -------------------------------------------------------------------------------------

// Note [A sample is described when a message needs it]: the description of a check's sample
// ("self: float32[2, 3] ..., dim: 1") goes only into failure messages, and a check passes on
// almost every sample; describing it up front (13 checks x 50 samples a case) was ~3% of a
// library's whole check. A SampleText describes `args` at its first use, so the stack must not
// change before then: checks run the op on clones, never on the sample itself. Given a Sample, it
// says what description_of() says (its own description when it has one).
class SampleText {
 public:
  SampleText(const Stack& args, const OperatorHandle& op) : args_(&args), op_(&op) {}
  SampleText(const Sample& sample, const OperatorHandle& op)
      : args_(&sample.args), op_(&op), description_(&sample.description) {}
  const std::string& str() const;
  operator const std::string&() const { return str(); }
  operator std::string_view() const { return str(); }

 private:
  const Stack* args_;
  const OperatorHandle* op_;
  const std::string* description_ = nullptr;
  mutable std::optional<std::string> text_;
};
std::ostream& operator<<(std::ostream& os, const SampleText& s);

// The one repro line of a check's failure: opcheck("<op>", test_utils={"<check>"}) on sample: ...
std::string repro_line(std::string_view check, std::string_view op, std::string_view sample);

// The skeleton of one check's run on one sample: the context, the sample's text, fresh clones
// and calls of the op, and the results, each with its cause.
class CheckRun {
 public:
  CheckRun(std::string_view check, const CheckContext& ctx);
  // For the three opcheck tests: the sample as description_of() calls it.
  CheckRun(std::string_view check, const CheckContext& ctx, const Sample& described);

  std::string_view check() const { return check_; }
  const OperatorHandle& op() const { return ctx_.op; }
  const std::string& op_name() const { return ctx_.op.name(); }
  const CheckContext& ctx() const { return ctx_; }
  const SampleText& sample() const { return sample_; }

  // Fresh clones of the sample's arguments, and the op run on them.
  Stack clone() const { return clone_args(ctx_.sample.args); }
  Run run() const { return run_op(ctx_.op, clone()); }

  CheckResult passed(std::string note = "") const;
  // not_applicable: `subject` names why in a word or two ("nondeterministic_seeded"), never a value.
  CheckResult skipped(std::string message, std::string subject, std::string title) const;
  CheckResult unsupported(std::string message, Cause cause) const;
  CheckResult mistrusted(std::string message, std::string title = "every compared value was zero or NaN") const;
  // failed, with the repro line.
  CheckResult failed(Cause cause, std::string message) const;
  // operator_threw (outcome.h): unsupported for kNotImplemented, failed (threw) otherwise.
  CheckResult threw(const std::exception& error, std::string_view phase) const;

 private:
  std::string_view check_;
  const CheckContext& ctx_;
  SampleText sample_;
};

// The preamble of the three opcheck tests (test_schema, test_autograd_registration,
// test_faketensor): their messages read "'<op>' on sample (<sample>): <what>", and they run with
// the schema at hand.
class OpcheckTestRun : public CheckRun {
 public:
  OpcheckTestRun(std::string_view check, const CheckContext& ctx)
      : CheckRun(check, ctx, ctx.sample), schema(ctx.op.schema()) {}
  // failed: "'<op>' on sample (<sample>): <what>".
  CheckResult failed_on_sample(Cause cause, std::string_view what) const;

  const FunctionSchema& schema;
};

}  // namespace opconform::conformance::detail
