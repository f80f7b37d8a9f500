#include "plugin_op_spec.h"

#include <cstddef>

#include "opconform/core/dlpack.h"
#include "opconform/core/error.h"
#include "plugin_samples.h"

namespace opconform::adapters::detail {
namespace {

// No real op has more: a larger count is a corrupt spec, not a list to walk.
constexpr int64_t kMaxSpecItems = 4096;

template <typename T>
bool covers(const OpcOpSpec& spec, size_t offset) {
  return spec.size >= offset + sizeof(T);
}
#define OPC_SPEC_HAS(spec, field) covers<decltype(OpcOpSpec::field)>(spec, offsetof(OpcOpSpec, field))

std::string text(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

// A (pointer, count) pair the plugin filled: readable, or an error naming the field.
template <typename T>
void check_list(const std::string& op, const char* field, const T* items, int64_t count) {
  OPCONFORM_CHECK(count >= 0 && count <= kMaxSpecItems, ErrorCode::kRegistration, "declare_op '", op, "': ", field,
                  " count ", count, " is out of range [0, ", kMaxSpecItems, "]");
  OPCONFORM_CHECK(count == 0 || items != nullptr, ErrorCode::kRegistration, "declare_op '", op, "': ", field,
                  " is NULL with a count of ", count);
}

std::vector<DType> dtypes_of(const std::string& op, const char* field, const DLDataType* dtypes, int64_t count) {
  check_list(op, field, dtypes, count);
  std::vector<DType> out;
  for (int64_t i = 0; i < count; ++i) {
    try {
      out.push_back(from_dlpack_dtype(dtypes[i]));
    } catch (const Error& e) {
      throw Error(ErrorCode::kRegistration, "declare_op '" + op + "': " + field + "[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return out;
}

ValueConstraint values_of(const OpcValueConstraint& c) {
  ValueConstraint v;
  if (c.flags & OPC_VALUES_MIN) v.min = c.min;
  if (c.flags & OPC_VALUES_MAX) v.max = c.max;
  v.positive = (c.flags & OPC_VALUES_POSITIVE) != 0;
  v.allow_nan = (c.flags & OPC_VALUES_NO_NAN) == 0;
  v.allow_inf = (c.flags & OPC_VALUES_NO_INF) == 0;
  return v;
}

RelationKind relation_kind(const std::string& op, OpcRelationKind k) {
  switch (k) {
    case OPC_REL_SAME_SHAPE: return RelationKind::same_shape;
    case OPC_REL_BROADCASTABLE: return RelationKind::broadcastable;
    case OPC_REL_SAME_DTYPE: return RelationKind::same_dtype;
    case OPC_REL_DIM_IN_RANGE: return RelationKind::dim_in_range;
    case OPC_REL_SIZE_POSITIVE: return RelationKind::size_positive;
    case OPC_REL_LIST_LENGTH_EQUALS_RANK: return RelationKind::list_length_equals_rank;
    case OPC_REL_ELEMENTS_SAME_SHAPE: return RelationKind::elements_same_shape;
    default: throw Error(ErrorCode::kRegistration, "declare_op '" + op + "': unknown relation kind " + std::to_string(k));
  }
}

}  // namespace

OpSpecFields read_op_spec(const OpcOpSpec* spec) {
  OPCONFORM_CHECK(spec != nullptr, ErrorCode::kRegistration, "declare_op: the spec is NULL");
  OPCONFORM_CHECK(spec->version >= OPC_PLUGIN_ABI_VERSION_1 && spec->version <= OPC_PLUGIN_ABI_VERSION,
                  ErrorCode::kRegistration, "declare_op: OpcOpSpec.version is ", spec->version, ", expected ",
                  OPC_PLUGIN_ABI_VERSION_1, " to ", OPC_PLUGIN_ABI_VERSION);
  OPCONFORM_CHECK(OPC_SPEC_HAS(*spec, op_name) && spec->op_name != nullptr && spec->op_name[0] != '\0',
                  ErrorCode::kRegistration, "declare_op: OpcOpSpec.size ", spec->size, " holds no op_name, or it is empty");
  OpSpecFields f;
  f.op = spec->op_name;
  f.has_dtypes = OPC_SPEC_HAS(*spec, num_dtypes) && spec->num_dtypes != 0;
  f.flags = OPC_SPEC_HAS(*spec, flags) ? spec->flags : 0;
  f.has_builder = OPC_SPEC_HAS(*spec, sample_builder) && spec->sample_builder != nullptr;
  f.has_constraints = (OPC_SPEC_HAS(*spec, num_args) && spec->num_args != 0) ||
                      (OPC_SPEC_HAS(*spec, num_relations) && spec->num_relations != 0);
  f.has_data = f.has_builder || f.has_constraints ||
               (OPC_SPEC_HAS(*spec, num_tolerances) && spec->num_tolerances != 0) ||
               (f.flags & (OPC_OP_ADDRESSES_STORAGE | OPC_OP_LAYOUT_QUERY)) != 0;
  const uint64_t known = OPC_OP_ADDRESSES_STORAGE | OPC_OP_LAYOUT_QUERY | OPC_OP_REFERENCE_FAKE |
                         (spec->version >= 2 ? uint64_t{OPC_OP_RANDOM} : 0);  // OPC_OP_RANDOM: version 2
  OPCONFORM_CHECK((f.flags & ~known) == 0, ErrorCode::kRegistration, "declare_op '", f.op, "': unknown flags 0x",
                  std::hex, f.flags & ~known);
  return f;
}

OpData op_data_from_spec(const OpcOpSpec& spec, const FunctionSchema& schema, OpData data, const std::string& library) {
  const std::string op = read_op_spec(&spec).op;
  if (OPC_SPEC_HAS(spec, num_dtypes) && spec.num_dtypes != 0)
    data.constraints.dtypes = dtypes_of(op, "dtypes", spec.dtypes, spec.num_dtypes);
  if (OPC_SPEC_HAS(spec, num_args)) {
    check_list(op, "args", spec.args, spec.num_args);
    for (int64_t i = 0; i < spec.num_args; ++i) {
      const OpcArgConstraint& a = spec.args[i];
      OPCONFORM_CHECK(a.name != nullptr, ErrorCode::kRegistration, "declare_op '", op, "': args[", i, "] has no name");
      ArgConstraint c;
      c.dtypes = dtypes_of(op, "args[].dtypes", a.dtypes, a.num_dtypes);
      c.values = values_of(a.values);
      c.min_rank = a.min_rank;
      if (a.max_rank >= 0) c.max_rank = a.max_rank;
      c.allow_none = a.allow_none != 0;
      data.constraints.arg(a.name, std::move(c));
    }
  }
  if (OPC_SPEC_HAS(spec, num_relations)) {
    check_list(op, "relations", spec.relations, spec.num_relations);
    for (int64_t i = 0; i < spec.num_relations; ++i) {
      const OpcRelation& r = spec.relations[i];
      data.constraints.relate({relation_kind(op, r.kind), text(r.a), text(r.b)});
    }
  }
  if (OPC_SPEC_HAS(spec, num_tolerances)) {
    check_list(op, "tolerances", spec.tolerances, spec.num_tolerances);
    for (int64_t i = 0; i < spec.num_tolerances; ++i) {
      const OpcTolerance& t = spec.tolerances[i];
      ToleranceOverride o{dtypes_of(op, "tolerances[].dtype", &t.dtype, 1).at(0), {t.rtol, t.atol, std::nullopt},
                          text(t.reason)};
      if (t.max_ulp >= 0) o.tolerance.max_ulp = t.max_ulp;
      data.tolerances.push_back(std::move(o));
    }
  }
  if (OPC_SPEC_HAS(spec, flags)) {
    data.addresses_storage = data.addresses_storage || (spec.flags & OPC_OP_ADDRESSES_STORAGE) != 0;
    data.layout_query = data.layout_query || (spec.flags & OPC_OP_LAYOUT_QUERY) != 0;
  }
  if (OPC_SPEC_HAS(spec, sample_user_data) && spec.sample_builder != nullptr)
    data.sample_builder =
        make_plugin_sample_builder(spec.sample_builder, spec.sample_user_data, schema, library, spec.version);
  if (OPC_SPEC_HAS(spec, family) && spec.family != nullptr) data.family = spec.family;
  if (OPC_SPEC_HAS(spec, doc) && spec.doc != nullptr) data.doc = spec.doc;
  validate_op_data(schema, data);
  return data;
}

}  // namespace opconform::adapters::detail
