// The check kit (detail/check_kit.h): calling, observing, comparing, and making results.
#include "opconform/conformance/detail/check_kit.h"

#include <algorithm>

#include "opconform/core/autograd.h"

namespace opconform::conformance::detail {

using autograd::NoGradGuard;
using opconform::detail::concat;

// ---- calling the op

Stack call(const OperatorHandle& op, const Stack& args) {
  NoGradGuard no_grad;
  Stack stack = args;
  run_boxed(op, stack);
  return stack;
}

std::vector<std::string> arg_names(const OperatorHandle& op) {
  std::vector<std::string> names;
  if (op.has_schema()) {
    for (const auto& a : op.schema().arguments) names.push_back(a.name);
  }
  return names;
}

std::string arg_name(const OperatorHandle& op, size_t i) {
  if (op.has_schema() && i < op.schema().arguments.size()) return op.schema().arguments[i].name;
  return "arg" + std::to_string(i);
}

bool is_written(const OperatorHandle& op, size_t i) {
  return op.has_schema() && i < op.schema().arguments.size() && op.schema().is_mutable(i);
}

// ---- observing

namespace {
// An undefined Tensor is observed as None, as Python sees it: a kernel returns an undefined
// Tensor where a captured graph returns None (a backward op's output_mask false), one value.
IValue observed(const IValue& v) {
  const Tensor* t = v.get_if<Tensor>();
  return t != nullptr && !t->defined() ? IValue() : v;
}
}  // namespace

Observables observables(const OperatorHandle& op, const Stack& args, const Stack& returns) {
  Observables out;
  for (size_t j = 0; j < returns.size(); ++j) {
    std::string name = "output " + std::to_string(j);
    if (returns[j].is_tensor_list()) {
      const auto& list = returns[j].to_tensor_list();
      for (size_t e = 0; e < list.size(); ++e) {
        out.emplace_back(name + "[" + std::to_string(e) + "]", observed(IValue(list[e])));
      }
    } else {
      out.emplace_back(name, observed(returns[j]));
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_written(op, i)) out.emplace_back("argument '" + arg_name(op, i) + "' after the call", args[i]);
  }
  return out;
}

std::string observable_subject(std::string_view label) {
  if (label.starts_with("argument '")) {
    const size_t end = label.find('\'', 10);
    return std::string(label.substr(10, end == std::string_view::npos ? std::string_view::npos : end - 10));
  }
  // "output 1[2] ('values')" -> "output 1"
  const size_t cut = label.find_first_of("[ (", label.starts_with("output ") ? 7 : 0);
  return std::string(label.substr(0, cut));
}

Run run_op(const OperatorHandle& op, const Stack& args) {
  Run r;
  try {
    Stack returns = call(op, args);
    r.seen = observables(op, args, returns);
  } catch (const Error& e) {
    r.error = e;
  }
  return r;
}

// ---- comparing

FindingKind kind_of(Field field) {
  switch (field) {
    case Field::none: return FindingKind::other;
    case Field::count: case Field::kind: return FindingKind::return_mismatch;
    case Field::shape: return FindingKind::shape_mismatch;
    case Field::strides: return FindingKind::stride_mismatch;
    case Field::dtype: return FindingKind::dtype_mismatch;
    case Field::storage_offset: return FindingKind::storage_offset_mismatch;
    case Field::device: return FindingKind::device_mismatch;
    case Field::values: return FindingKind::value_mismatch;
    case Field::aliasing: return FindingKind::aliasing_mismatch;
  }
  return FindingKind::other;
}

std::string_view to_string(Field field) {
  switch (field) {
    case Field::none: return "nothing";
    case Field::count: return "the number of results";
    case Field::kind: return "the kind";
    case Field::shape: return "the shape";
    case Field::strides: return "the strides";
    case Field::dtype: return "the dtype";
    case Field::storage_offset: return "the storage offset";
    case Field::device: return "the device";
    case Field::values: return "the values";
    case Field::aliasing: return "the aliasing";
  }
  return "nothing";
}

Verdict compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tolerance) {
  Comparison c = compare(actual, expected, tolerance);
  Verdict v{c.equal, c.mistrusted, c.mismatch, Field::none, ""};
  if (c.equal) return v;
  // compare() checks definedness, then the shape, then the dtype, then the elements.
  if (actual.defined() != expected.defined()) v.field = Field::kind;
  else if (!std::equal(actual.sizes().begin(), actual.sizes().end(), expected.sizes().begin(), expected.sizes().end()))
    v.field = Field::shape;
  else if (actual.dtype() != expected.dtype()) v.field = Field::dtype;
  else v.field = Field::values;
  return v;
}

Verdict compare_observables(const OperatorHandle& op, const Observables& actual, const Observables& expected,
                            const ToleranceSpec& spec, Exactness exactness) {
  Verdict v;
  if (actual.size() != expected.size()) {
    return {false, false, concat(actual.size(), " values instead of ", expected.size()), Field::count, ""};
  }
  size_t tensors = 0, mistrusted = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const IValue& a = actual[i].second;
    const IValue& e = expected[i].second;
    const std::string subject = observable_subject(actual[i].first);
    if (a.is_tensor() && e.is_tensor() && a.to_tensor().defined() && e.to_tensor().defined()) {
      const Tensor& at = a.to_tensor();
      const Tensor& et = e.to_tensor();
      if (exactness == Exactness::metadata) {
        if (at.dtype() != et.dtype() || !std::equal(at.sizes().begin(), at.sizes().end(), et.sizes().begin(), et.sizes().end())) {
          const Field field = at.dtype() != et.dtype() ? Field::dtype : Field::shape;
          return {false, false, concat(actual[i].first, ": ", at.dtype() != et.dtype() ? "dtype" : "shape", " differs (",
                                       shape_string(at.sizes()), " ", name(at.dtype()), " vs ", shape_string(et.sizes()),
                                       " ", name(et.dtype()), ")"),
                  field, subject};
        }
        continue;
      }
      if (exactness == Exactness::bitwise) {
        const bool same_shape = std::equal(at.sizes().begin(), at.sizes().end(), et.sizes().begin(), et.sizes().end());
        if (at.dtype() != et.dtype() || !same_shape || !bitwise_equal(at, et)) {
          const Field field = at.dtype() != et.dtype() ? Field::dtype : !same_shape ? Field::shape : Field::values;
          return {false, false, concat(actual[i].first, ": not bitwise equal (", at.to_string(), " vs ", et.to_string(), ")"),
                  field, subject};
        }
        continue;
      }
      Verdict c = compare_tensors(at, et, spec.for_dtype(et.dtype(), op.data().get()));
      if (!c.equal) return {false, false, concat(actual[i].first, ": ", c.what), c.field, subject};
      ++tensors;
      mistrusted += c.mistrusted ? 1 : 0;
    } else if (a.repr() != e.repr()) {
      // A tensor against None or another kind of value is a different kind; two scalars, values.
      const Field field = a.tag() != e.tag() || a.is_tensor() || e.is_tensor() ? Field::kind : Field::values;
      return {false, false, concat(actual[i].first, ": ", a.repr(), " vs ", e.repr()), field, subject};
    }
  }
  v.mistrusted = tensors > 0 && mistrusted == tensors;
  return v;
}

Cause mismatch_cause(const Verdict& v, std::string_view what, std::optional<FindingKind> kind,
                     std::optional<std::string> subject) {
  Cause c;
  c.kind = kind.value_or(kind_of(v.field));
  c.subject = subject.value_or(v.subject);
  c.title = concat(what, ": ", to_string(v.field), v.subject.empty() ? "" : concat(" of ", v.subject), " differ");
  return c;
}

Cause not_implemented_cause(const Error& error) {
  // operator_threw knows how a missing kernel is told (outcome.h): its cause, not its message.
  CheckResult r = operator_threw("", "", error, "", "");
  return r.cause.value_or(Cause{FindingKind::not_implemented, reason_subject(error), "not implemented"});
}

std::string reason_subject(const Error& error) { return std::string(to_string(error.reason())); }

// ---- results

const std::string& SampleText::str() const {
  if (!text_) {
    text_ = description_ != nullptr && !description_->empty() ? *description_ : describe(*args_, arg_names(*op_));
  }
  return *text_;
}

std::ostream& operator<<(std::ostream& os, const SampleText& s) { return os << s.str(); }

std::string repro_line(std::string_view check, std::string_view op, std::string_view sample) {
  return concat("opcheck(\"", op, "\", test_utils={\"", check, "\"}) on sample: ", sample);
}

CheckRun::CheckRun(std::string_view check, const CheckContext& ctx)
    : check_(check), ctx_(ctx), sample_(ctx.sample.args, ctx.op) {}

CheckRun::CheckRun(std::string_view check, const CheckContext& ctx, const Sample& described)
    : check_(check), ctx_(ctx), sample_(described, ctx.op) {}

namespace {
CheckResult result_of(std::string_view check, Outcome outcome, std::string message, std::optional<Cause> cause) {
  CheckResult r;
  r.check = std::string(check);
  r.outcome = outcome;
  r.message = std::move(message);
  r.cause = std::move(cause);
  return r;
}
}  // namespace

CheckResult CheckRun::passed(std::string note) const { return result_of(check_, Outcome::passed, std::move(note), {}); }

CheckResult CheckRun::skipped(std::string message, std::string subject, std::string title) const {
  return result_of(check_, Outcome::skipped, std::move(message),
                   Cause{FindingKind::not_applicable, std::move(subject), std::move(title)});
}

CheckResult CheckRun::unsupported(std::string message, Cause cause) const {
  return result_of(check_, Outcome::unsupported, std::move(message), std::move(cause));
}

CheckResult CheckRun::mistrusted(std::string message, std::string title) const {
  return result_of(check_, Outcome::mistrusted, std::move(message), Cause{FindingKind::inconclusive, "", std::move(title)});
}

CheckResult CheckRun::failed(Cause cause, std::string message) const {
  CheckResult r = result_of(check_, Outcome::failed, std::move(message), std::move(cause));
  r.repro = repro_line(check_, op_name(), sample_);
  return r;
}

CheckResult CheckRun::threw(const std::exception& error, std::string_view phase) const {
  return operator_threw(std::string(check_), op_name(), error, sample_, phase);
}

CheckResult OpcheckTestRun::failed_on_sample(Cause cause, std::string_view what) const {
  return failed(std::move(cause), concat("'", op_name(), "' on sample (", sample(), "): ", what));
}

}  // namespace opconform::conformance::detail
