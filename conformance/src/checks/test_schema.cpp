// test_schema: the schema tells the truth about mutation and aliasing (CHECKS.md).
//
// One run of the operator, boxed through the dispatcher, on clones of the sample; before it,
// the element bytes and version counter of every tensor argument are kept. After it:
//   - mutation: an argument whose bytes or version moved was written. Written but not declared
//     (no `!`): fail. Declared but not written on this sample: fail (PyTorch accepts it).
//   - aliasing: an output overlapping an input's memory needs an alias annotation that allows
//     it; two outputs overlapping each other need annotations that share a set; an output that
//     is an input *object* needs that input to be mutable.
//   - Tag::inplace: the first tensor argument is the only one written, and is what is returned.
//   - Tag::out: out arguments are keyword-only, returned in order, and never read: two more runs
//     with the out buffers pre-filled with different patterns must give identical bytes.
//   - arity and types: the returns on the stack match the schema's.
// The run is in no-grad mode: the claims are about the kernel, and the autograd layer would
// otherwise change what is observed (it refuses writes to leaves that require grad and
// re-wraps an output that is an input object), hiding or inventing findings.
#include <limits>
#include <optional>
#include <variant>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/autograd.h"
#include "opconform/core/error.h"
#include "opconform/core/tag.h"

namespace opconform::conformance::detail {
namespace {

using ::opconform::detail::concat;

constexpr std::string_view kName = "test_schema";

// What an argument's tensor looked like before the call.
struct Snapshot {
  size_t arg;
  Tensor tensor;
  std::vector<unsigned char> bytes;  // empty for tensors without data (meta)
  uint64_t version;
};

// One tensor of the outputs: return `ret`, element `elem` of it (0 for a plain Tensor).
struct Output {
  size_t ret;
  size_t elem;
  Tensor tensor;
};

std::string output_label(const FunctionSchema& schema, const Output& o, bool list) {
  std::string label = concat("output ", o.ret);
  if (list) label += concat("[", o.elem, "]");
  if (o.ret < schema.returns.size() && !schema.returns[o.ret].name.empty()) {
    label += concat(" ('", schema.returns[o.ret].name, "')");
  }
  return label;
}

// Whether two returns may share memory: both annotated, with a common alias set (or `*`).
bool returns_may_alias(const FunctionSchema& schema, size_t a, size_t b) {
  if (a >= schema.returns.size() || b >= schema.returns.size()) return false;
  const auto& ia = schema.returns[a].alias_info;
  const auto& ib = schema.returns[b].alias_info;
  if (!ia || !ib) return false;
  auto sa = ia->all_sets(), sb = ib->all_sets();
  for (const auto& s : sa) {
    if (s == "*") return true;
    for (const auto& t : sb) {
      if (t == "*" || t == s) return true;
    }
  }
  return false;
}

// Whether a returned value has the IValue kind the schema type says.
bool matches_type(const IValue& v, const Type& type) {
  switch (type.kind()) {
    case TypeKind::kTensor: return v.is_tensor();
    case TypeKind::kInt: return v.is_int();
    case TypeKind::kSymInt: return v.is_int() || v.tag() == IValue::Tag::SymInt;
    case TypeKind::kFloat: return v.is_double();
    case TypeKind::kBool: return v.is_bool();
    case TypeKind::kStr: return v.is_string();
    case TypeKind::kScalar: return v.is_scalar();
    case TypeKind::kComplex: return v.tag() == IValue::Tag::Complex;
    case TypeKind::kScalarType: return v.tag() == IValue::Tag::DType;
    case TypeKind::kDevice: return v.tag() == IValue::Tag::Device;
    case TypeKind::kLayout: return v.tag() == IValue::Tag::Layout;
    case TypeKind::kMemoryFormat: return v.tag() == IValue::Tag::MemoryFormat;
    case TypeKind::kOptional: return v.is_none() || matches_type(v, type.elem());
    case TypeKind::kList: {
      const Type& e = type.elem();
      if (v.tag() == IValue::Tag::GenericList) {
        for (const IValue& x : v.to_generic_list()) {
          if (!matches_type(x, e)) return false;
        }
        return true;
      }
      switch (e.kind()) {
        case TypeKind::kTensor: return v.is_tensor_list();
        case TypeKind::kInt: case TypeKind::kSymInt: return v.tag() == IValue::Tag::IntList;
        case TypeKind::kFloat: return v.tag() == IValue::Tag::DoubleList;
        case TypeKind::kBool: return v.tag() == IValue::Tag::BoolList;
        case TypeKind::kOptional:
          return e.elem().kind() == TypeKind::kTensor && v.tag() == IValue::Tag::OptionalTensorList;
        default: return false;
      }
    }
    default: return true;  // Any, Generator, Storage, ...: not checked
  }
}

// Fills every out buffer with one of two patterns that a correct out= kernel overwrites.
void fill_pattern(const Tensor& t, int pattern) {
  const DType d = t.dtype();
  if (is_floating(d) || is_complex(d)) {
    t.fill_(pattern == 0 ? Scalar(std::numeric_limits<double>::quiet_NaN()) : Scalar(1e30));
  } else if (d == DType::Bool) {
    t.fill_(Scalar(pattern == 0));
  } else if (d == DType::UInt8) {
    t.fill_(Scalar(int64_t(pattern == 0 ? 0xA5 : 0x5A)));
  } else {
    t.fill_(Scalar(int64_t(pattern == 0 ? 123 : -77)));
  }
}

// What the one run showed: the arguments it got, what they were before, what it returned, and
// which arguments it wrote.
struct Observed {
  const FunctionSchema& schema;
  Stack args;
  std::vector<Snapshot> before;
  Stack stack;  // the returns
  std::vector<bool> written;

  std::string arg_name(size_t i) const {
    return i < schema.arguments.size() ? schema.arguments[i].name : concat("#", i);
  }
  bool arg_mutable(size_t i) const { return i < schema.arguments.size() && schema.is_mutable(i); }
  // An argument sharing memory with a written mutable one may have been written through it: that
  // is not its own mutation (the counter lives in the storage; see Note [Version counter]).
  bool shares_memory_with_written_mutable(size_t i) const {
    for (const Snapshot& s : before) {
      if (s.arg != i) continue;
      for (const Snapshot& m : before) {
        if (m.arg != i && arg_mutable(m.arg) && written[m.arg] && s.tensor.is_alias_of(m.tensor)) return true;
      }
    }
    return false;
  }
};

// One thing the schema gets wrong: its cause, and the sentence the message gives it.
struct Finding {
  Cause cause;
  std::string text;
};
using Findings = std::vector<Finding>;

void add(Findings& findings, FindingKind kind, std::string subject, std::string title, std::string text) {
  findings.push_back({Cause{kind, std::move(subject), std::move(title)}, std::move(text)});
}

// ---- arity and types of the returns
void check_returns(const Observed& o, Findings& findings) {
  const FunctionSchema& schema = o.schema;
  if (schema.is_varret) return;
  if (o.stack.size() != schema.returns.size()) {
    add(findings, FindingKind::schema_violation, "returns", "the kernel returns another number of values than the schema",
        concat("the implementation returned ", o.stack.size(), " value(s) but the schema declares ", schema.returns.size(),
               " (", schema.to_string(), "). Make the kernel return exactly what the schema says."));
    return;
  }
  for (size_t j = 0; j < o.stack.size(); ++j) {
    if (!matches_type(o.stack[j], schema.returns[j].type)) {
      add(findings, FindingKind::schema_violation, concat("output ", j),
          concat("output ", j, " has another type than the schema declares"),
          concat("output ", j, " is a ", o.stack[j].type_name(), " but the schema declares ",
                 schema.returns[j].type.to_string(), ". Fix the kernel's return type or the schema."));
    }
  }
}

// ---- mutation: bytes or version counter moved
void check_mutation(const Observed& o, Findings& findings) {
  for (size_t i = 0; i < o.args.size(); ++i) {
    const std::string name = o.arg_name(i);
    if (o.written[i] && !o.arg_mutable(i) && !o.shares_memory_with_written_mutable(i)) {
      add(findings, FindingKind::undeclared_mutation, name, concat("'", name, "' is written but not declared mutable"),
          concat("argument '", name,
                 "' was mutated (its bytes or its version counter changed) but the schema does not "
                 "declare it mutable. Declare it: Tensor(a!) ",
                 name, " (mutates_args={\"", name, "\"} for a custom_op), or write to a clone instead."));
    }
    bool has_elements = false;
    for (const Tensor& t : tensors_in(o.args[i])) has_elements = has_elements || t.numel() > 0;
    // A write to no element at all cannot be seen: such arguments prove nothing either way.
    if (o.arg_mutable(i) && !o.written[i] && has_elements) {
      add(findings, FindingKind::schema_violation, name, concat("'", name, "' is declared mutable but not written"),
          concat("argument '", name, "' is declared mutable (", o.schema.arguments[i].to_string(),
                 ") but was never written on this sample; a mutable argument must be written on "
                 "every valid input (opcheck fails if any sample tried leaves it unwritten). "
                 "Remove the '!' (and it from mutates_args) if the operator does not write it."));
    }
  }
}

// ---- aliasing
void check_aliasing(const Observed& o, Findings& findings) {
  const FunctionSchema& schema = o.schema;
  std::vector<Output> outputs;
  std::vector<bool> list_return(o.stack.size(), false);
  for (size_t j = 0; j < o.stack.size(); ++j) {
    list_return[j] = !o.stack[j].is_tensor();
    auto ts = tensors_in(o.stack[j]);
    for (size_t k = 0; k < ts.size(); ++k) outputs.push_back({j, k, ts[k]});
  }
  for (const Output& out : outputs) {
    const std::string label = output_label(schema, out, list_return[out.ret]);
    const std::string subject = concat("output ", out.ret);
    for (const Snapshot& s : o.before) {
      const size_t i = s.arg;
      const std::string name = o.arg_name(i);
      const bool allowed = out.ret < schema.returns.size() && i < schema.arguments.size() && schema.may_alias(out.ret, i);
      if (out.tensor.is_same(s.tensor) && !o.arg_mutable(i)) {
        add(findings, FindingKind::schema_violation, subject, concat(subject, " is an argument that is not mutable"),
            concat(label, " is argument '", name, "' itself, but '", name, "' is not mutable. Return a clone (", name,
                   ".clone()) or a new view, not the input object."));
      } else if (!allowed && memory_overlaps(out.tensor, s.tensor)) {
        add(findings, FindingKind::schema_violation, subject, concat(subject, " aliases an argument without an alias annotation"),
            concat(label, " overlaps the memory of argument '", name, "' but the schema does not let it alias '", name,
                   "'. Return a clone (", name, ".clone()), or declare the alias: Tensor(a) ", name, " -> Tensor(a)."));
      }
    }
  }
  for (size_t a = 0; a < outputs.size(); ++a) {
    for (size_t b = a + 1; b < outputs.size(); ++b) {
      const bool same_list = outputs[a].ret == outputs[b].ret;
      const bool allowed = same_list ? (outputs[a].ret < schema.returns.size() &&
                                        schema.returns[outputs[a].ret].alias_info.has_value())
                                     : returns_may_alias(schema, outputs[a].ret, outputs[b].ret);
      if (!allowed && memory_overlaps(outputs[a].tensor, outputs[b].tensor)) {
        const std::string subject = concat("output ", outputs[a].ret);
        add(findings, FindingKind::schema_violation, subject, concat(subject, " shares memory with another output without annotations"),
            concat(output_label(schema, outputs[a], list_return[outputs[a].ret]), " and ",
                   output_label(schema, outputs[b], list_return[outputs[b].ret]),
                   " share memory but the schema does not annotate them as aliases. Return separate "
                   "tensors (clone one of them)."));
      }
    }
  }
}

// ---- Tag::inplace: only the first tensor argument is written, and it is what is returned
void check_inplace(const Observed& o, Findings& findings) {
  std::optional<size_t> self;
  for (size_t i = 0; i < o.schema.arguments.size() && !self; ++i) {
    if (o.schema.arguments[i].type.is_tensor_like()) self = i;
  }
  for (size_t i = 0; i < o.args.size(); ++i) {
    if (o.written[i] && self && i != *self && !o.shares_memory_with_written_mutable(i)) {
      add(findings, FindingKind::schema_violation, o.arg_name(i),
          concat("an in-place operator writes '", o.arg_name(i), "', not only its first argument"),
          concat("Tag::inplace: argument '", o.arg_name(i), "' was written, but an in-place operator "
                 "writes only its first tensor argument '", o.arg_name(*self), "'."));
    }
  }
  if (self && !o.stack.empty() && o.stack[0].is_tensor() && o.args[*self].is_tensor() &&
      !o.stack[0].to_tensor().is_same(o.args[*self].to_tensor())) {
    add(findings, FindingKind::schema_violation, "output 0", "an in-place operator returns a new tensor",
        concat("Tag::inplace: output 0 is a new tensor, but an in-place operator returns its first "
               "argument itself. Return ", o.arg_name(*self), " (the object passed in), not a new tensor."));
  }
}

// The element bytes of the out arguments and the returns of a run with the out buffers pre-filled
// with `pattern`; the result of the run that threw instead.
std::variant<std::vector<std::vector<unsigned char>>, CheckResult> run_with_pattern(const OpcheckTestRun& k, int pattern) {
  const std::vector<size_t> outs = k.schema.mutable_arguments();
  Stack a = k.clone();
  for (size_t i : outs) {
    if (i < a.size()) {
      for (const Tensor& t : tensors_in(a[i])) fill_pattern(t, pattern);
    }
  }
  Stack s = a;
  try {
    run_boxed(k.op(), s);
  } catch (const std::exception& e) {
    return k.threw(e, "a run with pre-filled out buffers");
  }
  std::vector<std::vector<unsigned char>> bytes;
  for (size_t i : outs) {
    if (i < a.size()) {
      for (const Tensor& t : tensors_in(a[i])) bytes.push_back(element_bytes(t));
    }
  }
  for (const IValue& v : s) {
    for (const Tensor& t : tensors_in(v)) bytes.push_back(t.storage()->has_data() ? element_bytes(t) : std::vector<unsigned char>{});
  }
  return bytes;
}

// ---- Tag::out: keyword-only, returned in order, never read. The result of an extra run that
// threw, if one did.
std::optional<CheckResult> check_out(const OpcheckTestRun& k, const Observed& o, Findings& findings) {
  const FunctionSchema& schema = o.schema;
  const std::vector<size_t> outs = schema.mutable_arguments();
  std::vector<Tensor> out_tensors;
  for (size_t i : outs) {
    if (!schema.arguments[i].kwarg_only) {
      add(findings, FindingKind::schema_violation, schema.arguments[i].name, "an out argument is not keyword-only",
          concat("Tag::out: out argument '", schema.arguments[i].name, "' must be keyword-only (declare it after '*': (..., *, ",
                 schema.arguments[i].to_string(), "))."));
    }
    if (i < o.args.size()) {
      for (const Tensor& t : tensors_in(o.args[i])) out_tensors.push_back(t);
    }
  }
  // Returned in declaration order (an out op may also return nothing).
  std::vector<Tensor> returned;
  for (const IValue& v : o.stack) {
    for (const Tensor& t : tensors_in(v)) returned.push_back(t);
  }
  if (!returned.empty()) {
    bool in_order = returned.size() == out_tensors.size();
    for (size_t j = 0; in_order && j < returned.size(); ++j) in_order = returned[j].is_same(out_tensors[j]);
    if (!in_order) {
      add(findings, FindingKind::schema_violation, "returns", "an out= operator does not return its out arguments in order",
          "Tag::out: the outputs must be the out arguments themselves, in declaration order. Return "
          "the out tensors passed in (in the order the schema lists them).");
    }
  }
  // Never read: the results may not depend on what the out buffers held.
  auto first = run_with_pattern(k, 0);
  if (auto* r = std::get_if<CheckResult>(&first)) return *r;
  auto second = run_with_pattern(k, 1);
  if (auto* r = std::get_if<CheckResult>(&second)) return *r;
  if (std::get<0>(first) != std::get<0>(second)) {
    std::string names;
    for (size_t i : outs) names += (names.empty() ? "'" : ", '") + schema.arguments[i].name + "'";
    add(findings, FindingKind::schema_violation, outs.empty() ? "out" : schema.arguments[outs[0]].name,
        "an out= kernel reads its out arguments or leaves part of them unwritten",
        concat("Tag::out: the results differ when the out buffer(s) ", names,
               " are pre-filled with NaN vs 1e30 (or two integers): the kernel reads its out "
               "arguments or leaves part of them unwritten. An out= kernel must only write out, "
               "and all of it."));
  }
  return std::nullopt;
}

class TestSchema final : public Check {
 public:
  std::string_view name() const override { return kName; }

  CheckResult run(const CheckContext& ctx) const override {
    const OpcheckTestRun k(kName, ctx);
    autograd::NoGradGuard no_grad;
    Observed o{k.schema, k.clone()};
    for (size_t i = 0; i < o.args.size(); ++i) {
      for (const Tensor& t : tensors_in(o.args[i])) {
        o.before.push_back({i, t, t.storage()->has_data() ? element_bytes(t) : std::vector<unsigned char>{}, t.version()});
      }
    }
    o.stack = o.args;
    try {
      run_boxed(ctx.op, o.stack);
    } catch (const std::exception& e) {
      return k.threw(e, "the real run");
    }
    o.written.assign(o.args.size(), false);
    for (const Snapshot& s : o.before) {
      const bool bytes_changed = !s.bytes.empty() && element_bytes(s.tensor) != s.bytes;
      if (bytes_changed || s.tensor.version() != s.version) o.written[s.arg] = true;
    }

    Findings findings;
    check_returns(o, findings);
    check_mutation(o, findings);
    check_aliasing(o, findings);
    if (ctx.op.has_tag(Tag::inplace)) check_inplace(o, findings);
    if (ctx.op.has_tag(Tag::out)) {
      if (auto threw = check_out(k, o, findings)) return *threw;  // the extra runs threw
    }
    if (findings.empty()) return k.passed();
    std::string message;
    for (size_t f = 0; f < findings.size(); ++f) message += (f ? " Also: " : "") + findings[f].text;
    return k.failed_on_sample(findings.front().cause, message);
  }
};

}  // namespace

std::unique_ptr<Check> make_test_schema() { return std::make_unique<TestSchema>(); }

}  // namespace opconform::conformance::detail
