// Input constraints: what inputs an operator accepts beyond its schema (CHECKS.md, "Samples";
// docs/checks.md). The schema says `Tensor self, int dim`; the constraints say "dim is a valid
// dimension of self", "other broadcasts with self", "values are positive". They are part of an
// operator's data (op_data.h), stored with its definition in the registry; sample generation
// (conformance/generate.h) reads them to build valid samples, and the error_inputs check uses the
// validator to know which inputs must be rejected.
//
//   ArgConstraint x;
//   x.values.positive = true;
//   OpData data;
//   data.constraints = InputConstraints()
//       .arg("x", x)
//       .relate(broadcastable("x", "y"))
//       .relate(dim_in_range("dim", "x"));
//   registry.set_op_data("mylib::my_log", std::move(data));
//
// Constraints are plain data (names refer to schema argument names) plus a validator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/dtype.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/schema.h"

namespace opconform {

// The values of a tensor's elements, or of an int/float/Scalar argument (every element of a list).
// NaN is governed by allow_nan alone (a range or `positive` does not exclude it), so that an op
// declared on positive inputs is still tried on NaN unless it says otherwise.
struct ValueConstraint {
  std::optional<double> min;  // inclusive
  std::optional<double> max;  // inclusive
  bool positive = false;      // > 0 (strict); with min, both apply
  bool allow_nan = true;      // NaN is generated (when special values are) and accepted
  bool allow_inf = true;      // ±inf likewise (only the ones inside [min, max])

  // Whether v satisfies the constraint.
  bool admits(double v) const;
};

// Constraints on one argument.
struct ArgConstraint {
  std::vector<DType> dtypes;      // tensors: the accepted dtypes; empty: any (the spec decides)
  ValueConstraint values;         // elements (tensors) or values (numbers, lists of numbers)
  int min_rank = 0;               // tensors: dimensions allowed
  std::optional<int> max_rank;    // nullopt: GenerateSpec::max_rank
  bool allow_none = true;         // optional arguments: None may be generated
};

enum class RelationKind {
  same_shape,                // tensors a and b have equal sizes
  broadcastable,             // tensors a and b broadcast together
  same_dtype,                // tensors a and b have one dtype
  dim_in_range,              // int (or each of int[]) a is a dimension of tensor b: -rank(b) <= a < max(rank(b), 1)
  size_positive,             // a has no zero: tensor sizes, int, or every int of int[] (b unused)
  list_length_equals_rank,   // int[] a has rank(b) elements
  elements_same_shape,       // every tensor of Tensor[] a has one shape (b unused)
};

std::string_view to_string(RelationKind kind);

struct Relation {
  RelationKind kind;
  std::string a;
  std::string b;  // empty for the one-argument relations
};

inline Relation same_shape(std::string a, std::string b) { return {RelationKind::same_shape, std::move(a), std::move(b)}; }
inline Relation broadcastable(std::string a, std::string b) {
  return {RelationKind::broadcastable, std::move(a), std::move(b)};
}
inline Relation same_dtype(std::string a, std::string b) { return {RelationKind::same_dtype, std::move(a), std::move(b)}; }
inline Relation dim_in_range(std::string dim_arg, std::string tensor_arg) {
  return {RelationKind::dim_in_range, std::move(dim_arg), std::move(tensor_arg)};
}
inline Relation size_positive(std::string arg) { return {RelationKind::size_positive, std::move(arg), {}}; }
inline Relation list_length_equals_rank(std::string list_arg, std::string tensor_arg) {
  return {RelationKind::list_length_equals_rank, std::move(list_arg), std::move(tensor_arg)};
}
inline Relation elements_same_shape(std::string list_arg) {
  return {RelationKind::elements_same_shape, std::move(list_arg), {}};
}

struct InputConstraints {
  std::map<std::string, ArgConstraint, std::less<>> args;  // by argument name
  std::vector<Relation> relations;
  // The dtypes the op accepts: generated samples cover each of them (GenerateSpec::dtypes, when
  // set, wins) and ScalarType arguments take them. Empty: float32 and float64.
  std::vector<DType> dtypes;

  InputConstraints& accept_dtypes(std::vector<DType> d) {
    dtypes = std::move(d);
    return *this;
  }
  InputConstraints& arg(std::string name, ArgConstraint c) {
    args[std::move(name)] = std::move(c);
    return *this;
  }
  InputConstraints& relate(Relation r) {
    relations.push_back(std::move(r));
    return *this;
  }

  // The constraint of one argument (a default one when none is declared).
  const ArgConstraint& for_arg(std::string_view name) const;
  // The relations naming `name` as a or b.
  std::vector<Relation> relations_of(std::string_view name) const;
  bool has(RelationKind kind, std::string_view a) const;
};

// Throws Error(kInvalidArgument) when the constraints do not fit the schema: an unknown argument
// name, or a relation on arguments of the wrong types (dim_in_range on a float, ...).
void validate_constraints(const FunctionSchema& schema, const InputConstraints& constraints);

// The constraints the arguments (schema order) violate, one sentence each; empty when valid.
// None values (optional arguments) satisfy every constraint.
std::vector<std::string> constraint_violations(const FunctionSchema& schema, const InputConstraints& constraints,
                                               const Stack& args);

}  // namespace opconform
