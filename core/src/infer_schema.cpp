#include "opconform/core/infer_schema.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace opconform::detail {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool valid_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

[[noreturn]] void fail(const std::string& op, const std::string& message) {
  throw Error(ErrorCode::kSchemaMismatch, "infer_schema" + (op.empty() ? "" : " for '" + op + "'") + ": " + message);
}

AliasInfo write_alias(std::string set) { return AliasInfo{{std::move(set)}, {}, true}; }

bool is_plain_tensor(const Type& t) { return t.kind() == TypeKind::kTensor; }

constexpr const char* kSupported =
    "Tensor, int64_t, SymInt, double, bool, std::string, Scalar, DType, Device, Layout, MemoryFormat, "
    "std::vector<T>, std::optional<T>";

}  // namespace

std::string demangle(const char* mangled) {
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && readable ? readable : mangled;
  std::free(readable);
  // The long standard names say nothing more than the short ones.
  for (auto [from, to] : {std::pair<std::string, std::string>{"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string"},
                          {"opconform::", ""}}) {
    for (size_t pos; (pos = out.find(from)) != std::string::npos;) out.replace(pos, from.size(), to);
  }
  return out;
}

FunctionSchema build_inferred_schema(const InferredSignature& sig, const std::vector<std::string>& arg_names,
                                     const MutatesArgs& mutates_args, const std::string& op_name,
                                     const std::vector<Tag>& tags) {
  FunctionSchema schema;
  // Name: "", "name", "name.overload", "ns::name[.overload]".
  std::string rest = op_name;
  const bool has_ns = rest.find("::") != std::string::npos;
  if (has_ns) {
    const auto sep = rest.find("::");
    schema.ns = rest.substr(0, sep);
    rest = rest.substr(sep + 2);
  }
  const bool has_overload = rest.find('.') != std::string::npos;
  if (has_overload) {
    const auto dot = rest.find('.');
    schema.overload_name = rest.substr(dot + 1);
    rest = rest.substr(0, dot);
  }
  schema.name = rest;
  // Every part written must be an identifier, or the schema prints as text that does not parse
  // ("f.a b", found by fuzz/infer_schema; "::f" named no namespace).
  if (!op_name.empty() && (!valid_identifier(schema.name) || (has_ns && !valid_identifier(schema.ns)) ||
                           (has_overload && !valid_identifier(schema.overload_name))))
    fail(op_name, "invalid operator name '" + op_name + "'");

  // Names, with "*" starting the keyword-only arguments.
  std::vector<std::string> names;
  std::optional<size_t> first_kwarg_only;
  for (const auto& n : arg_names) {
    if (n == "*") {
      if (first_kwarg_only) fail(op_name, "'*' appears twice in the argument names");
      first_kwarg_only = names.size();
      continue;
    }
    if (!valid_identifier(n)) fail(op_name, "invalid argument name '" + n + "'");
    if (std::find(names.begin(), names.end(), n) != names.end()) fail(op_name, "argument name '" + n + "' repeats");
    names.push_back(n);
  }
  if (first_kwarg_only && *first_kwarg_only == names.size()) fail(op_name, "'*' must be followed by an argument name");
  if (names.size() != sig.params.size()) {
    fail(op_name, std::to_string(names.size()) + " argument names given (" + join(names) + ") for a function of " +
                      std::to_string(sig.params.size()) + " parameters (" + join(sig.param_cpp) + ")");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (!sig.params[i]) {
      fail(op_name, "parameter '" + names[i] + "' has unsupported type '" + sig.param_cpp[i] + "' (supported: " +
                        kSupported + ")");
    }
    Argument a;
    a.type = *sig.params[i];
    a.name = names[i];
    a.kwarg_only = first_kwarg_only && i >= *first_kwarg_only;
    schema.arguments.push_back(std::move(a));
  }
  for (const auto& r : sig.returns) {
    if (!r) fail(op_name, "unsupported return type '" + sig.return_cpp + "' (supported: " + kSupported + ", std::tuple, void)");
    Argument ret;
    ret.type = *r;
    schema.returns.push_back(std::move(ret));
  }

  // Which arguments are written.
  std::vector<size_t> mutated;
  if (mutates_args.unknown) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (schema.arguments[i].type.is_tensor_like()) mutated.push_back(i);
    }
  } else {
    std::set<std::string> seen;
    for (const auto& n : mutates_args.names) {
      if (!seen.insert(n).second) fail(op_name, "mutates_args names '" + n + "' twice");
      auto it = std::find(names.begin(), names.end(), n);
      if (it == names.end()) {
        fail(op_name, "mutates_args names '" + n + "', which is not an argument (arguments: " + join(names) + ")");
      }
      size_t i = static_cast<size_t>(it - names.begin());
      if (!schema.arguments[i].type.is_tensor_like()) {
        fail(op_name, "mutates_args names '" + n + "', which is a " + schema.arguments[i].type.to_string() +
                          ", not a Tensor; only tensors can be mutated");
      }
      mutated.push_back(i);
    }
    std::sort(mutated.begin(), mutated.end());
  }

  const bool inplace = std::find(tags.begin(), tags.end(), Tag::inplace) != tags.end();
  const bool out = std::find(tags.begin(), tags.end(), Tag::out) != tags.end();
  if (inplace && out) fail(op_name, "Tag::inplace and Tag::out cannot be combined");

  if (inplace) {
    if (schema.arguments.empty() || !is_plain_tensor(schema.arguments[0].type) || schema.arguments[0].kwarg_only)
      fail(op_name, "Tag::inplace needs a Tensor as the first positional argument");
    if (mutates_args.unknown || mutated != std::vector<size_t>{0})
      fail(op_name, "Tag::inplace needs mutates_args to name exactly the first argument ('" + names[0] + "')");
    if (schema.returns.size() != 1 || !is_plain_tensor(schema.returns[0].type))
      fail(op_name, "Tag::inplace needs the operator to return that same Tensor (return type Tensor, got " +
                        sig.return_cpp + ")");
    schema.arguments[0].alias_info = write_alias("a");
    schema.returns[0].alias_info = write_alias("a");
    return schema;
  }

  if (out) {
    if (mutated.empty()) fail(op_name, "Tag::out needs mutates_args to name the out tensors");
    for (size_t i : mutated) {
      if (!is_plain_tensor(schema.arguments[i].type))
        fail(op_name, "Tag::out: out argument '" + names[i] + "' must be a Tensor");
    }
    // Out tensors are keyword-only; trailing ones become so when no '*' was given.
    bool trailing = mutated.back() == names.size() - 1 && mutated.back() - mutated.front() + 1 == mutated.size();
    if (!first_kwarg_only && trailing) {
      for (size_t i : mutated) schema.arguments[i].kwarg_only = true;
    }
    for (size_t i : mutated) {
      if (!schema.arguments[i].kwarg_only)
        fail(op_name, "Tag::out: out argument '" + names[i] + "' must be keyword-only (put '*' before it)");
    }
    if (schema.returns.size() != mutated.size())
      fail(op_name, "Tag::out: the operator must return its " + std::to_string(mutated.size()) +
                        " out tensor(s) in declaration order, but returns " + std::to_string(schema.returns.size()) +
                        " value(s) (" + sig.return_cpp + ")");
    for (size_t k = 0; k < mutated.size(); ++k) {
      if (!is_plain_tensor(schema.returns[k].type))
        fail(op_name, "Tag::out: return " + std::to_string(k) + " must be a Tensor (the out tensor '" + names[mutated[k]] + "')");
      std::string set(1, static_cast<char>('a' + k % 26));
      if (k >= 26) set += std::to_string(k / 26);
      schema.arguments[mutated[k]].alias_info = write_alias(set);
      schema.returns[k].alias_info = write_alias(set);
    }
    return schema;
  }

  for (size_t i : mutated) schema.arguments[i].alias_info = write_alias("a" + std::to_string(i));
  return schema;
}

}  // namespace opconform::detail
