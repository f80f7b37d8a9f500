// error_inputs (docs/checks.md): invalid arguments give an opconform::Error that names them. The
// op is called without its last argument, with a value of the wrong kind for each argument, and
// with a meta tensor (no data) for each tensor argument.
//
// Note [What an error must name]: CHECKS.md asks for an opconform::Error that names the argument.
// Core's conversion errors ("expected a value of type Tensor but got str ('not a tensor')")
// name the offending value but neither the operator nor the argument; the check accepts an error
// that names the operator, an argument (quoted, 'x'), or quotes the offending value, so that it
// flags ops whose errors say nothing, not every op of the library.
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

// One invalid call.
struct Invalid {
  std::string what;      // for messages: "with a str for argument 'x'"
  std::string argument;  // the argument it is about (the cause's subject)
  std::string how;       // sample-free: "a value of the wrong type", for titles
  Stack args;
  std::string offending;  // the repr of the bad value, when there is one
  bool meta = false;      // a meta tensor: a meta result is a fine answer
};

std::vector<Invalid> invalid_calls(const CheckRun& k) {
  const OperatorHandle& op = k.op();
  const Stack& args = k.ctx().sample.args;
  std::vector<Invalid> cases;
  if (!args.empty()) {
    Stack missing = k.clone();
    missing.pop_back();
    const std::string last = arg_name(op, args.size() - 1);
    // The subject is "last argument", not its name: samples may pass fewer trailing arguments.
    cases.push_back({concat("without its last argument '", last, "'"), "last argument", "without it", missing, ""});
  }
  for (size_t i = 0; i < args.size(); ++i) {
    Stack wrong = k.clone();
    // A value of the wrong kind: a string where a tensor is accepted (Tensor, Tensor? even
    // when the sample holds None), else a tensor.
    const bool takes_tensor = args[i].is_tensor() || (op.has_schema() && i < op.schema().arguments.size() &&
                                                      op.schema().arguments[i].type.is_tensor_like());
    if (takes_tensor) wrong[i] = IValue("not a tensor");
    else wrong[i] = IValue(scalar_tensor(Scalar(1.5)));
    std::string offending = wrong[i].repr();
    cases.push_back({concat("with a ", wrong[i].type_name(), " for argument '", arg_name(op, i), "'"), arg_name(op, i),
                     "with a value of the wrong type", wrong, offending});
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_tensor() || !args[i].to_tensor().defined() || args[i].to_tensor().is_meta_data()) continue;
    Stack meta = k.clone();
    const Tensor& t = args[i].to_tensor();
    meta[i] = IValue(make_metadata_tensor(t.sizes(), t.strides(), t.dtype(), Device::meta()));
    cases.push_back({concat("with a meta tensor (no data) for argument '", arg_name(op, i), "'"), arg_name(op, i),
                     "with a meta tensor (no data)", meta, "", true});
  }
  return cases;
}

// Whether an error names the operator, an argument or the offending value.
bool names_enough(const OperatorHandle& op, const Invalid& c, const std::string& msg) {
  bool named = msg.find(op.name()) != std::string::npos ||
               (op.has_schema() && msg.find(op.schema().name) != std::string::npos) ||
               (!c.offending.empty() && msg.find(c.offending) != std::string::npos);
  for (const auto& n : arg_names(op)) named = named || msg.find("'" + n + "'") != std::string::npos;
  return named;
}

class ErrorInputs final : public Check {
 public:
  std::string_view name() const override { return "error_inputs"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    for (const Invalid& c : invalid_calls(k)) {
      if (auto failure = try_invalid(k, c)) return *failure;
    }
    return k.passed();
  }

 private:
  static std::optional<CheckResult> try_invalid(const CheckRun& k, const Invalid& c) {
    const std::string& op = k.op_name();
    try {
      Stack returns = call(k.op(), c.args);
      // A meta input may legitimately give meta outputs (a meta kernel); anything else is a
      // silent result for invalid input.
      bool only_meta = c.meta;
      for (const auto& v : returns) {
        // (an empty result on the meta device counts as meta too: it has no bytes either way)
        if (v.is_tensor() && v.to_tensor().defined() && !v.to_tensor().is_meta_data() &&
            !(v.to_tensor().device() == Device::meta()))
          only_meta = false;
      }
      if (only_meta) return std::nullopt;
      return k.failed(Cause{FindingKind::accepted_invalid, c.argument, concat("returns a result when called ", c.how, " for '", c.argument, "'")},
                      concat("error_inputs of '", op, "': called ", c.what,
                             ", the op returned a result instead of an opconform::Error. Validate the ",
                             "arguments (OPCONFORM_CHECK) and name the bad one. Sample: ", k.sample(), "."));
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (names_enough(k.op(), c, msg)) return std::nullopt;
      return k.failed(Cause{FindingKind::other, c.argument,
                            concat("the error for '", c.argument, "' ", c.how, " names neither the operator nor the argument")},
                      concat("error_inputs of '", op, "': called ", c.what, ", the op threw an ",
                             "opconform::Error that names neither the operator nor the argument: \"", msg,
                             "\". Sample: ", k.sample(), "."));
    } catch (const std::exception& e) {
      return k.failed(Cause{FindingKind::other, c.argument, "throws an exception that is not an opconform::Error"},
                      concat("error_inputs of '", op, "': called ", c.what, ", the op threw an exception ",
                             "that is not an opconform::Error: ", e.what(), ". Sample: ", k.sample(), "."));
    }
  }
};

}  // namespace

std::unique_ptr<Check> make_error_inputs() { return std::make_unique<ErrorInputs>(); }

}  // namespace opconform::conformance::detail
