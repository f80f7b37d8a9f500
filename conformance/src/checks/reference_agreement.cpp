// reference_agreement (docs/checks.md): the library's op and the reference's op of the same name
// on the same sample give the same outputs (values within tolerance, dtype and shape) and the
// same tensor arguments after the call (so a write the reference does not make is a difference
// too). Strides are not compared: a layout is the library's choice (stride_invariance and
// test_faketensor look at strides).
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/device_semantics.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

// The first tensor of the sample that is not on the CPU: its device's semantics apply.
std::optional<Device> non_cpu_device(const Stack& args) {
  std::optional<Device> device;
  for (const IValue& v : args) {
    map_tensors(v, [&](const Tensor& t) {
      if (t.defined() && !device && !t.device().is_cpu()) device = t.device();
      return t;
    });
  }
  return device;
}

// The op's observables plus every tensor argument it does not write, after the call. The
// reference runs on the CPU: a library's CUDA (or vendor device) results are compared with the
// reference's on CPU copies of the same inputs, following the sample device's semantics (Note
// [Device-dependent semantics] in core/device_semantics.h).
Run seen_with_arguments(const OperatorHandle& op, const Stack& args, bool on_cpu, std::optional<Device> sample_device) {
  Run r;
  // Note [A copy on another device keeps the layout] (sample.h)
  Stack inputs = on_cpu ? clone_args(args, Device::cpu()) : clone_args(args);
  std::optional<SemanticDeviceGuard> semantics;
  if (on_cpu && sample_device) semantics.emplace(*sample_device);
  try {
    Stack returns = call(op, inputs);
    r.seen = observables(op, inputs, returns);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].is_tensor() && inputs[i].to_tensor().defined() && !is_written(op, i))
        r.seen.emplace_back("argument '" + arg_name(op, i) + "' after the call (not written by the schema)", inputs[i]);
    }
  } catch (const Error& e) {
    r.error = e;
  }
  return r;
}

class ReferenceAgreement final : public Check {
 public:
  std::string_view name() const override { return "reference_agreement"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    if (ctx.reference == nullptr) return k.skipped("no reference to compare with", "reference", "no reference to compare with");
    auto expected_op = ctx.reference->find(ctx.op.name());
    if (!expected_op || !expected_op->has_schema()) {
      return k.skipped(concat("the reference has no operator '", ctx.op.name(), "'"), "reference",
                       "the reference has no such operator");
    }
    const auto& args = ctx.sample.args;
    const std::optional<Device> device = non_cpu_device(args);
    Run expected = seen_with_arguments(*expected_op, args, true, device);
    Run actual = seen_with_arguments(ctx.op, args, false, device);
    if (actual.error && actual.error->code() == ErrorCode::kNotImplemented && !expected.error) {
      return k.unsupported(concat("'", ctx.op.name(), "' is not implemented for this sample: ", actual.error->what()),
                           not_implemented_cause(*actual.error));
    }
    if (expected.error && actual.error) return k.passed();  // both reject it
    if (actual.error) {
      return k.failed(Cause{FindingKind::threw, reason_subject(*actual.error), "the library throws where the reference returns"},
                      concat("reference_agreement of '", ctx.op.name(), "': ",
                             concat("the library threw where the reference returned: ", actual.error->what()),
                             " Sample: ", k.sample(), "."));
    }
    if (expected.error) {
      return k.failed(Cause{FindingKind::accepted_invalid, reason_subject(*expected.error),
                            "the library returns where the reference throws"},
                      concat("reference_agreement of '", ctx.op.name(), "': ",
                             concat("the library returned where the reference threw: ", expected.error->what()),
                             " Sample: ", k.sample(), "."));
    }
    // A random op draws from its library's generator, not the reference's: the same seed gives other
    // numbers, so only what does not depend on them (definedness, shapes, dtypes) can agree.
    const bool random = ctx.op.has_tag(Tag::nondeterministic_seeded);
    Verdict v = compare_observables(ctx.op, actual.seen, expected.seen, ctx.tolerance,
                                    random ? Exactness::metadata : Exactness::tolerance);
    if (!v.equal) {
      return k.failed(mismatch_cause(v, "the library and the reference differ"),
                      concat("reference_agreement of '", ctx.op.name(), "': the library and the reference differ: ",
                             v.what, ". Sample: ", k.sample(), "."));
    }
    if (random) {
      return k.passed(concat("'", ctx.op.name(), "' draws random numbers: shapes, dtypes and which outputs are defined "
                             "agree; values were not compared (another library's random stream is not the reference's)"));
    }
    if (v.mistrusted) {
      return k.mistrusted(concat("every compared value is zero or NaN on this sample, so agreement proves nothing. Sample: ",
                                 k.sample(), "."));
    }
    return k.passed();
  }
};

}  // namespace

std::unique_ptr<Check> make_reference_agreement() { return std::make_unique<ReferenceAgreement>(); }

}  // namespace opconform::conformance::detail
