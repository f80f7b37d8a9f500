#include "opconform/reference/op_info.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "opconform/core/error.h"
#include "opconform/reference/detail/op_builder.h"

namespace opconform::reference {
namespace {

struct Table {
  std::mutex mutex;
  std::map<std::string, OpInfo, std::less<>> infos;
};
Table& table() {
  static Table* t = new Table();  // never destroyed: read until exit
  return *t;
}

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string out;
  for (DType d : dtypes) out += (out.empty() ? "" : ",") + std::string(name(d));
  return out.empty() ? "-" : out;
}

}  // namespace

std::vector<OpInfo> reference_op_infos() {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<OpInfo> out;
  for (const auto& [n, info] : t.infos) out.push_back(info);
  return out;
}

std::optional<OpInfo> reference_op_info(std::string_view name) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.infos.find(name);
  if (it == t.infos.end()) return std::nullopt;
  return it->second;
}

std::string_view schema_kind_name(const FunctionSchema& schema) {
  switch (schema.kind()) {
    case SchemaKind::kFunctional: return "functional";
    case SchemaKind::kInplace: return "inplace";
    case SchemaKind::kOut: return "out";
    case SchemaKind::kMutable: return "mutable";
    case SchemaKind::kView: return "view";
  }
  return "?";
}

std::string format_reference_table(const std::vector<OpInfo>& infos) {
  std::ostringstream out;
  out << "op\tkind\tfamily\tdtypes\tdevices\tfake\tautograd\tvmap\tschema\n";
  for (const auto& info : infos) {
    out << info.name << '\t' << schema_kind_name(parse_schema(info.schema)) << '\t' << info.family << '\t'
        << dtype_list(info.dtypes) << '\t' << (info.cuda ? "cpu,cuda" : "cpu") << '\t' << (info.fake ? "yes" : "no")
        << '\t' << (info.autograd ? (info.double_backward ? "yes (double backward)" : "yes") : "no") << '\t'
        << (info.vmap ? "rule" : "fallback") << '\t' << info.schema << '\n';
  }
  return out.str();
}

namespace detail {

void record_op_info(const OpInfo& info) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  t.infos[info.name] = info;
}

OpBuilder::OpBuilder(Library& lib, std::string_view schema, std::string family, std::string doc, std::vector<Tag> tags,
                     SourceLocation loc)
    : lib_(&lib), loc_(loc) {
  info_.nondeterministic = std::find(tags.begin(), tags.end(), Tag::nondeterministic_seeded) != tags.end();
  out_ = std::find(tags.begin(), tags.end(), Tag::out) != tags.end();
  info_.name = lib.define(schema, std::move(tags), "", loc);
  info_.schema = std::string(schema);
  info_.family = std::move(family);
  info_.doc = std::move(doc);
  if (out_) {
    lib_->impl(info_.name, autograd::refuse_autograd_kernel(std::string(autograd::kOutOperatorReason)),
               DispatchKey::Autograd, {}, loc_);
  }
  commit();
}

OpBuilder& OpBuilder::autograd(autograd::BackwardFn backward, autograd::SetupContextFn setup, bool double_backward) {
  return autograd_kernel(autograd::make_autograd_kernel(std::move(backward), std::move(setup)), double_backward);
}

OpBuilder& OpBuilder::autograd_kernel(KernelFunction kernel, bool double_backward) {
  OPCONFORM_CHECK(!out_, ErrorCode::kRegistration, info_.name, ": out= operators do not support autograd");
  lib_->impl(info_.name, std::move(kernel), DispatchKey::Autograd, {}, loc_);
  info_.autograd = true;
  info_.double_backward = double_backward;
  return commit();
}

OpBuilder& OpBuilder::vmap(VmapRule rule) {
  lib_->impl(info_.name, make_vmap_kernel(std::move(rule)), DispatchKey::Batched, {}, loc_);
  info_.vmap = true;
  return commit();
}

// The op's dtypes are part of its declared constraints, so that generated samples cover each of
// them (GenerateSpec::dtypes empty) and ScalarType arguments take them.
OpBuilder& OpBuilder::dtypes(std::vector<DType> dtypes) {
  info_.dtypes = std::move(dtypes);
  info_.constraints.dtypes = info_.dtypes;
  conformance::declare_constraints(info_.name, info_.constraints);
  return commit();
}

OpBuilder& OpBuilder::constraints(conformance::InputConstraints constraints) {
  conformance::validate_constraints(parse_schema(info_.schema), constraints);
  if (constraints.dtypes.empty()) constraints.dtypes = info_.dtypes;
  conformance::declare_constraints(info_.name, constraints);
  info_.constraints = std::move(constraints);
  return commit();
}

OpBuilder& OpBuilder::samples(conformance::SampleBuilder builder) {
  conformance::declare_sample_builder(info_.name, builder);
  info_.sample_builder = std::move(builder);
  return commit();
}

OpBuilder& OpBuilder::tolerance(DType dtype, conformance::Tolerance tolerance, std::string reason) {
  conformance::declare_tolerance(info_.name, dtype, tolerance, reason);
  info_.tolerances.push_back({dtype, tolerance, std::move(reason)});
  return commit();
}

OpBuilder& OpBuilder::rounding(conformance::RoundingContract contract) {
  conformance::declare_rounding(info_.name, contract);
  return *this;
}

OpBuilder& OpBuilder::commit() {
  record_op_info(info_);
  return *this;
}

}  // namespace detail
}  // namespace opconform::reference
