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

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/autograd.h"
#include "opconform/core/error.h"
#include "opconform/core/tag.h"

namespace opconform::conformance {
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

class TestSchema final : public Check {
 public:
  std::string_view name() const override { return kName; }

  CheckResult run(const CheckContext& ctx) const override {
    CheckResult result;
    result.check = std::string(kName);
    const OperatorHandle& op = ctx.op;
    const FunctionSchema& schema = op.schema();
    const std::string sample = description_of(ctx.sample, schema);
    autograd::NoGradGuard no_grad;

    Stack args = clone_args(ctx.sample.args);
    std::vector<Snapshot> before;
    for (size_t i = 0; i < args.size(); ++i) {
      for (const Tensor& t : tensors_in(args[i])) {
        before.push_back({i, t, t.storage()->has_data() ? element_bytes(t) : std::vector<unsigned char>{}, t.version()});
      }
    }
    Stack stack = args;
    try {
      ::opconform::conformance::detail::run_boxed(op, stack);
    } catch (const std::exception& e) {
      return operator_threw(result.check, op.name(), e, sample, "the real run");
    }

    std::vector<std::string> findings;
    auto arg_name = [&](size_t i) {
      return i < schema.arguments.size() ? schema.arguments[i].name : concat("#", i);
    };
    auto arg_mutable = [&](size_t i) { return i < schema.arguments.size() && schema.is_mutable(i); };

    // ---- arity and types of the returns
    if (!schema.is_varret) {
      if (stack.size() != schema.returns.size()) {
        findings.push_back(concat("the implementation returned ", stack.size(), " value(s) but the schema declares ",
                                  schema.returns.size(), " (", schema.to_string(),
                                  "). Make the kernel return exactly what the schema says."));
      } else {
        for (size_t j = 0; j < stack.size(); ++j) {
          if (!matches_type(stack[j], schema.returns[j].type)) {
            findings.push_back(concat("output ", j, " is a ", stack[j].type_name(), " but the schema declares ",
                                      schema.returns[j].type.to_string(),
                                      ". Fix the kernel's return type or the schema."));
          }
        }
      }
    }

    // ---- mutation: bytes or version counter moved
    std::vector<bool> written(args.size(), false);
    for (const Snapshot& s : before) {
      const bool bytes_changed = !s.bytes.empty() && element_bytes(s.tensor) != s.bytes;
      if (bytes_changed || s.tensor.version() != s.version) written[s.arg] = true;
    }
    // An argument sharing memory with a written mutable one may have been written through it:
    // that is not its own mutation (the counter lives in the storage; see Note [Version counter]).
    auto shares_memory_with_written_mutable = [&](size_t i) {
      for (const Snapshot& s : before) {
        if (s.arg != i) continue;
        for (const Snapshot& m : before) {
          if (m.arg != i && arg_mutable(m.arg) && written[m.arg] && s.tensor.is_alias_of(m.tensor)) return true;
        }
      }
      return false;
    };
    for (size_t i = 0; i < args.size(); ++i) {
      if (written[i] && !arg_mutable(i) && !shares_memory_with_written_mutable(i)) {
        findings.push_back(concat("argument '", arg_name(i),
                                  "' was mutated (its bytes or its version counter changed) but the schema does not "
                                  "declare it mutable. Declare it: Tensor(a!) ",
                                  arg_name(i), " (mutates_args={\"", arg_name(i),
                                  "\"} for a custom_op), or write to a clone instead."));
      }
      bool has_elements = false;
      for (const Tensor& t : tensors_in(args[i])) has_elements = has_elements || t.numel() > 0;
      // A write to no element at all cannot be seen: such arguments prove nothing either way.
      if (arg_mutable(i) && !written[i] && has_elements) {
        findings.push_back(concat("argument '", arg_name(i), "' is declared mutable (",
                                  schema.arguments[i].to_string(),
                                  ") but was never written on this sample; a mutable argument must be written on "
                                  "every valid input (opcheck fails if any sample tried leaves it unwritten). "
                                  "Remove the '!' (and it from mutates_args) if the operator does not write it."));
      }
    }

    // ---- aliasing
    std::vector<Output> outputs;
    std::vector<bool> list_return(stack.size(), false);
    for (size_t j = 0; j < stack.size(); ++j) {
      list_return[j] = !stack[j].is_tensor();
      auto ts = tensors_in(stack[j]);
      for (size_t k = 0; k < ts.size(); ++k) outputs.push_back({j, k, ts[k]});
    }
    for (const Output& o : outputs) {
      const std::string label = output_label(schema, o, list_return[o.ret]);
      for (const Snapshot& s : before) {
        const size_t i = s.arg;
        const bool allowed = o.ret < schema.returns.size() && i < schema.arguments.size() && schema.may_alias(o.ret, i);
        if (o.tensor.is_same(s.tensor) && !arg_mutable(i)) {
          findings.push_back(concat(label, " is argument '", arg_name(i), "' itself, but '", arg_name(i),
                                    "' is not mutable. Return a clone (", arg_name(i),
                                    ".clone()) or a new view, not the input object."));
        } else if (!allowed && memory_overlaps(o.tensor, s.tensor)) {
          findings.push_back(concat(label, " overlaps the memory of argument '", arg_name(i),
                                    "' but the schema does not let it alias '", arg_name(i), "'. Return a clone (",
                                    arg_name(i), ".clone()), or declare the alias: Tensor(a) ", arg_name(i),
                                    " -> Tensor(a)."));
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
          findings.push_back(concat(output_label(schema, outputs[a], list_return[outputs[a].ret]), " and ",
                                    output_label(schema, outputs[b], list_return[outputs[b].ret]),
                                    " share memory but the schema does not annotate them as aliases. Return separate "
                                    "tensors (clone one of them)."));
        }
      }
    }

    // ---- Tag::inplace: only the first tensor argument is written, and it is what is returned
    if (op.has_tag(Tag::inplace)) {
      std::optional<size_t> self;
      for (size_t i = 0; i < schema.arguments.size() && !self; ++i) {
        if (schema.arguments[i].type.is_tensor_like()) self = i;
      }
      for (size_t i = 0; i < args.size(); ++i) {
        if (written[i] && self && i != *self && !shares_memory_with_written_mutable(i)) {
          findings.push_back(concat("Tag::inplace: argument '", arg_name(i), "' was written, but an in-place operator "
                                    "writes only its first tensor argument '", arg_name(*self), "'."));
        }
      }
      if (self && !stack.empty() && stack[0].is_tensor() && args[*self].is_tensor() &&
          !stack[0].to_tensor().is_same(args[*self].to_tensor())) {
        findings.push_back(concat("Tag::inplace: output 0 is a new tensor, but an in-place operator returns its first "
                                  "argument itself. Return ", arg_name(*self), " (the object passed in), not a new tensor."));
      }
    }

    // ---- Tag::out: keyword-only, returned in order, never read
    if (op.has_tag(Tag::out)) check_out(ctx, schema, sample, args, stack, findings, result);
    if (result.outcome != Outcome::passed) return result;  // the extra runs threw

    if (findings.empty()) return result;
    result.outcome = Outcome::failed;
    std::string message = concat("'", op.name(), "' on sample (", sample, "): ");
    for (size_t f = 0; f < findings.size(); ++f) message += (f ? " Also: " : "") + findings[f];
    result.message = std::move(message);
    result.repro = concat("opcheck(\"", op.name(), "\", test_utils={\"test_schema\"}) on sample: ", sample);
    return result;
  }

 private:
  static void check_out(const CheckContext& ctx, const FunctionSchema& schema, const std::string& sample,
                        const Stack& args, const Stack& returns, std::vector<std::string>& findings,
                        CheckResult& result) {
    const std::vector<size_t> outs = schema.mutable_arguments();
    std::vector<Tensor> out_tensors;
    for (size_t i : outs) {
      if (!schema.arguments[i].kwarg_only) {
        findings.push_back(concat("Tag::out: out argument '", schema.arguments[i].name,
                                  "' must be keyword-only (declare it after '*': (..., *, ",
                                  schema.arguments[i].to_string(), "))."));
      }
      if (i < args.size()) {
        for (const Tensor& t : tensors_in(args[i])) out_tensors.push_back(t);
      }
    }
    // Returned in declaration order (an out op may also return nothing).
    std::vector<Tensor> returned;
    for (const IValue& v : returns) {
      for (const Tensor& t : tensors_in(v)) returned.push_back(t);
    }
    if (!returned.empty()) {
      bool in_order = returned.size() == out_tensors.size();
      for (size_t k = 0; in_order && k < returned.size(); ++k) in_order = returned[k].is_same(out_tensors[k]);
      if (!in_order) {
        findings.push_back("Tag::out: the outputs must be the out arguments themselves, in declaration order. Return "
                           "the out tensors passed in (in the order the schema lists them).");
      }
    }
    // Never read: the results may not depend on what the out buffers held.
    auto run_with = [&](int pattern) -> std::optional<std::vector<std::vector<unsigned char>>> {
      Stack a = clone_args(ctx.sample.args);
      for (size_t i : outs) {
        if (i < a.size()) {
          for (const Tensor& t : tensors_in(a[i])) fill_pattern(t, pattern);
        }
      }
      Stack s = a;
      try {
        ::opconform::conformance::detail::run_boxed(ctx.op, s);
      } catch (const std::exception& e) {
        result = operator_threw(result.check, ctx.op.name(), e, sample, "a run with pre-filled out buffers");
        return std::nullopt;
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
    };
    auto first = run_with(0);
    if (!first) return;
    auto second = run_with(1);
    if (!second) return;
    if (*first != *second) {
      std::string names;
      for (size_t i : outs) names += (names.empty() ? "'" : ", '") + schema.arguments[i].name + "'";
      findings.push_back(concat("Tag::out: the results differ when the out buffer(s) ", names,
                                " are pre-filled with NaN vs 1e30 (or two integers): the kernel reads its out "
                                "arguments or leaves part of them unwritten. An out= kernel must only write out, "
                                "and all of it."));
    }
  }
};

}  // namespace

std::unique_ptr<Check> detail::make_test_schema() { return std::make_unique<TestSchema>(); }

}  // namespace opconform::conformance
