#include "opconform/core/input_constraints.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "opconform/core/error.h"

namespace opconform {
namespace {

// `T?` counts as T for constraints: a None satisfies everything.
const Type& strip_optional(const Type& t) { return t.is_optional() ? t.elem() : t; }

bool is_tensor(const Type& t) { return strip_optional(t).kind() == TypeKind::kTensor; }
bool is_tensor_list(const Type& t) {
  const Type& s = strip_optional(t);
  return s.is_list() && s.base_kind() == TypeKind::kTensor;
}
bool is_int(const Type& t) {
  auto k = strip_optional(t).kind();
  return k == TypeKind::kInt || k == TypeKind::kSymInt;
}
bool is_int_list(const Type& t) {
  const Type& s = strip_optional(t);
  return s.is_list() && (s.elem().kind() == TypeKind::kInt || s.elem().kind() == TypeKind::kSymInt);
}

// The integers of an int or int[] value (empty for None and other kinds).
std::vector<int64_t> ints_of(const IValue& v) {
  if (v.is_int()) return {v.to_int()};
  if (const auto* l = v.get_if<std::vector<int64_t>>()) return *l;
  if (const auto* g = v.get_if<GenericList>()) {
    std::vector<int64_t> out;
    for (const auto& e : *g->elements)
      if (e.is_int()) out.push_back(e.to_int());
    return out;
  }
  return {};
}

std::string value_string(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}


}  // namespace

bool ValueConstraint::admits(double v) const {
  if (std::isnan(v)) return allow_nan;
  if (std::isinf(v) && !allow_inf) return false;
  if (min && v < *min) return false;
  if (max && v > *max) return false;
  if (positive && !(v > 0)) return false;
  return true;
}

std::string_view to_string(RelationKind kind) {
  switch (kind) {
    case RelationKind::same_shape: return "same_shape";
    case RelationKind::broadcastable: return "broadcastable";
    case RelationKind::same_dtype: return "same_dtype";
    case RelationKind::dim_in_range: return "dim_in_range";
    case RelationKind::size_positive: return "size_positive";
    case RelationKind::list_length_equals_rank: return "list_length_equals_rank";
    case RelationKind::elements_same_shape: return "elements_same_shape";
  }
  return "?";
}

const ArgConstraint& InputConstraints::for_arg(std::string_view name) const {
  static const ArgConstraint none;
  auto it = args.find(name);
  return it == args.end() ? none : it->second;
}

std::vector<Relation> InputConstraints::relations_of(std::string_view name) const {
  std::vector<Relation> out;
  for (const auto& r : relations)
    if (r.a == name || r.b == name) out.push_back(r);
  return out;
}

bool InputConstraints::has(RelationKind kind, std::string_view a) const {
  return std::any_of(relations.begin(), relations.end(), [&](const Relation& r) { return r.kind == kind && r.a == a; });
}

void validate_constraints(const FunctionSchema& schema, const InputConstraints& constraints) {
  auto type_of = [&](const std::string& name, const char* what) -> const Type& {
    auto i = schema.argument_index(name);
    if (!i) {
      throw Error(ErrorCode::kInvalidArgument,
                  opconform::detail::concat("constraints of ", schema.full_name(), ": ", what, " names '", name,
                                 "', which is not an argument of ", schema.to_string()));
    }
    return schema.arguments[*i].type;
  };
  auto require = [&](bool ok, const Relation& r, const char* expected) {
    if (!ok) {
      throw Error(ErrorCode::kInvalidArgument,
                  opconform::detail::concat("constraints of ", schema.full_name(), ": ", to_string(r.kind), "(", r.a,
                                 r.b.empty() ? "" : ", ", r.b, ") needs ", expected));
    }
  };
  for (const auto& [name, c] : constraints.args) {
    const Type& t = type_of(name, "a constraint");
    if (c.max_rank && *c.max_rank < c.min_rank) {
      throw Error(ErrorCode::kInvalidArgument, opconform::detail::concat("constraints of ", schema.full_name(), ": argument '",
                                                              name, "' has max_rank < min_rank"));
    }
    (void)t;
  }
  for (const auto& r : constraints.relations) {
    const Type& a = type_of(r.a, "a relation");
    switch (r.kind) {
      case RelationKind::same_shape:
      case RelationKind::broadcastable:
      case RelationKind::same_dtype:
        require(is_tensor(a) && is_tensor(type_of(r.b, "a relation")), r, "two Tensor arguments");
        break;
      case RelationKind::dim_in_range:
        require((is_int(a) || is_int_list(a)) && is_tensor(type_of(r.b, "a relation")), r,
                "an int or int[] argument and a Tensor argument");
        break;
      case RelationKind::size_positive:
        require(is_tensor(a) || is_tensor_list(a) || is_int(a) || is_int_list(a), r, "a Tensor, Tensor[], int or int[] argument");
        break;
      case RelationKind::list_length_equals_rank:
        require(is_int_list(a) && is_tensor(type_of(r.b, "a relation")), r, "an int[] argument and a Tensor argument");
        break;
      case RelationKind::elements_same_shape:
        require(is_tensor_list(a), r, "a Tensor[] argument");
        break;
    }
  }
}

std::vector<std::string> constraint_violations(const FunctionSchema& schema, const InputConstraints& constraints,
                                               const Stack& args) {
  std::vector<std::string> out;
  auto arg = [&](const std::string& name) -> const IValue* {
    auto i = schema.argument_index(name);
    return i && *i < args.size() ? &args[*i] : nullptr;
  };
  auto tensor = [&](const std::string& name) -> const Tensor* {
    const IValue* v = arg(name);
    return v && v->is_tensor() ? &v->to_tensor() : nullptr;
  };

  // Per argument: dtype, rank and values.
  auto check_tensor = [&](const std::string& name, const ArgConstraint& c, const Tensor& t) {
    if (!t.defined()) return;
    if (!c.dtypes.empty() && std::find(c.dtypes.begin(), c.dtypes.end(), t.dtype()) == c.dtypes.end()) {
      out.push_back(opconform::detail::concat(name, ": dtype ", opconform::name(t.dtype()), " is not accepted"));
    }
    if (t.dim() < c.min_rank || (c.max_rank && t.dim() > *c.max_rank)) {
      out.push_back(opconform::detail::concat(name, ": rank ", t.dim(), " is outside [", c.min_rank, ", ",
                                   c.max_rank ? std::to_string(*c.max_rank) : "any", "]"));
    }
    if (t.is_meta_data()) return;  // fake and meta tensors have no values to check
    for (double v : t.to_vector<double>()) {
      if (!c.values.admits(v)) {
        out.push_back(opconform::detail::concat(name, ": value ", value_string(v), " is outside the accepted values"));
        break;
      }
    }
  };
  for (const auto& [name, c] : constraints.args) {
    const IValue* v = arg(name);
    if (!v || v->is_none()) continue;
    if (v->is_tensor()) {
      check_tensor(name, c, v->to_tensor());
    } else if (v->is_tensor_list()) {
      for (const auto& t : v->to_tensor_list()) check_tensor(name, c, t);
    } else if (v->is_int() || v->is_double() || v->is_bool()) {
      double d = v->to_scalar().to_double();
      if (!c.values.admits(d)) out.push_back(opconform::detail::concat(name, ": value ", value_string(d), " is outside the accepted values"));
    } else if (auto ints = ints_of(*v); !ints.empty()) {
      for (int64_t i : ints)
        if (!c.values.admits(static_cast<double>(i))) {
          out.push_back(opconform::detail::concat(name, ": element ", i, " is outside the accepted values"));
          break;
        }
    } else if (const auto* ds = v->get_if<std::vector<double>>()) {
      for (double d : *ds)
        if (!c.values.admits(d)) {
          out.push_back(opconform::detail::concat(name, ": element ", value_string(d), " is outside the accepted values"));
          break;
        }
    }
  }

  for (const auto& r : constraints.relations) {
    const IValue* va = arg(r.a);
    if (!va || va->is_none()) continue;
    const Tensor* tb = r.b.empty() ? nullptr : tensor(r.b);
    switch (r.kind) {
      case RelationKind::same_shape: {
        const Tensor* ta = tensor(r.a);
        if (ta && tb && !std::ranges::equal(ta->sizes(), tb->sizes())) {
          out.push_back(opconform::detail::concat(r.a, " ", shape_string(ta->sizes()), " and ", r.b, " ", shape_string(tb->sizes()),
                                       " must have the same shape"));
        }
        break;
      }
      case RelationKind::broadcastable: {
        const Tensor* ta = tensor(r.a);
        if (!ta || !tb) break;
        auto sa = ta->sizes(), sb = tb->sizes();
        for (size_t i = 1; i <= std::min(sa.size(), sb.size()); ++i) {
          int64_t x = sa[sa.size() - i], y = sb[sb.size() - i];
          if (x != y && x != 1 && y != 1) {
            out.push_back(opconform::detail::concat(r.a, " ", shape_string(sa), " and ", r.b, " ", shape_string(sb),
                                         " must broadcast together"));
            break;
          }
        }
        break;
      }
      case RelationKind::same_dtype: {
        const Tensor* ta = tensor(r.a);
        if (ta && tb && ta->dtype() != tb->dtype()) {
          out.push_back(opconform::detail::concat(r.a, " (", opconform::name(ta->dtype()), ") and ", r.b, " (",
                                       opconform::name(tb->dtype()), ") must have the same dtype"));
        }
        break;
      }
      case RelationKind::dim_in_range: {
        if (!tb) break;
        int64_t rank = tb->dim(), hi = std::max<int64_t>(rank, 1);
        for (int64_t d : ints_of(*va)) {
          if (d < -hi || d >= hi) {
            out.push_back(opconform::detail::concat(r.a, " = ", d, " is not a dimension of ", r.b, " (rank ", rank, ")"));
            break;
          }
        }
        break;
      }
      case RelationKind::size_positive: {
        bool bad = false;
        if (va->is_tensor()) {
          const auto s = va->to_tensor().sizes();
          bad = std::find(s.begin(), s.end(), 0) != s.end();
        } else if (va->is_tensor_list()) {
          for (const auto& t : va->to_tensor_list()) bad = bad || t.numel() == 0;
        } else {
          for (int64_t i : ints_of(*va)) bad = bad || i <= 0;
        }
        if (bad) out.push_back(opconform::detail::concat(r.a, " must have positive sizes"));
        break;
      }
      case RelationKind::list_length_equals_rank: {
        if (tb && static_cast<int64_t>(ints_of(*va).size()) != tb->dim()) {
          out.push_back(opconform::detail::concat(r.a, " must have ", tb->dim(), " elements (the rank of ", r.b, ")"));
        }
        break;
      }
      case RelationKind::elements_same_shape: {
        if (!va->is_tensor_list()) break;
        const auto& ts = va->to_tensor_list();
        for (const auto& t : ts) {
          if (!std::ranges::equal(t.sizes(), ts.front().sizes())) {
            out.push_back(opconform::detail::concat("the tensors of ", r.a, " must have one shape"));
            break;
          }
        }
        break;
      }
    }
  }
  return out;
}

}  // namespace opconform
