#include "opconform/core/default_value.h"

#include <string>
#include <vector>

namespace opconform {

std::optional<IValue> default_ivalue(const Argument& a) {
  if (!a.default_value) return std::nullopt;
  const DefaultValue& d = *a.default_value;
  const TypeKind base = a.type.is_optional() ? a.type.elem().kind() : a.type.kind();
  switch (d.kind) {
    case DefaultKind::kNone: return IValue();
    case DefaultKind::kBool: return IValue(std::get<bool>(d.value));
    case DefaultKind::kInt:
      if (base == TypeKind::kFloat) return IValue(static_cast<double>(std::get<int64_t>(d.value)));
      if (base == TypeKind::kInt || base == TypeKind::kSymInt || base == TypeKind::kScalar)
        return IValue(std::get<int64_t>(d.value));
      return std::nullopt;  // ScalarType/Layout by number: PyTorch's numbering, not ours
    case DefaultKind::kFloat: return IValue(std::get<double>(d.value));
    case DefaultKind::kIntList: return IValue(std::get<std::vector<int64_t>>(d.value));
    case DefaultKind::kFloatList: return IValue(std::get<std::vector<double>>(d.value));
    case DefaultKind::kBoolList: return IValue(std::get<std::vector<bool>>(d.value));
    case DefaultKind::kString: return IValue(std::get<std::string>(d.value));
    case DefaultKind::kEnumIdentifier: {
      const auto& id = std::get<std::string>(d.value);
      if (auto l = parse_layout(id)) return IValue(*l);
      if (auto m = parse_memory_format(id)) return IValue(*m);
      if (auto t = parse_dtype(id)) return IValue(*t);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace opconform
