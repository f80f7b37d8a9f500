#include "opconform/reference/op_info.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "opconform/core/error.h"
#include "opconform/reference/detail/op_builder.h"

namespace opconform::reference {
namespace {

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string out;
  for (DType d : dtypes) out += (out.empty() ? "" : ",") + std::string(name(d));
  return out.empty() ? "-" : out;
}

std::optional<OpInfo> info_of(const OperatorHandle& op) {
  if (!op.has_schema()) return std::nullopt;
  auto data = op.data();
  if (data->family.empty()) return std::nullopt;  // not defined by a register_<family> call
  OpInfo info;
  info.name = op.name();
  info.schema = op.schema().to_string();
  info.family = data->family;
  info.doc = data->doc;
  info.dtypes = data->constraints.dtypes;
  info.cpu = op.has_kernel_at(DispatchKey::CPU) || op.has_kernel_at(DispatchKey::CompositeExplicitAutograd);
  info.cuda = op.has_kernel_at(DispatchKey::CUDA);
  info.fake = op.has_kernel_at(DispatchKey::Fake);
  info.autograd = op.has_kernel_at(DispatchKey::Autograd) && !op.has_tag(Tag::out);
  info.vmap = op.has_kernel_at(DispatchKey::Batched);
  info.double_backward = data->double_backward;
  info.nondeterministic = op.has_tag(Tag::nondeterministic_seeded);
  info.data = std::move(data);
  return info;
}

}  // namespace

std::vector<OpInfo> reference_op_infos(const Registry& registry) {
  std::vector<OpInfo> out;
  for (const auto& op : registry.operators())
    if (auto info = info_of(op)) out.push_back(std::move(*info));
  std::sort(out.begin(), out.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
  return out;
}

std::optional<OpInfo> reference_op_info(const Registry& registry, std::string_view name) {
  auto op = registry.find(name);
  return op ? info_of(*op) : std::nullopt;
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

}  // namespace opconform::reference
