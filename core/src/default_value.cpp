#include "opconform/core/default_value.h"

#include <string>
#include <vector>

#include "opconform/core/error.h"

namespace opconform {
std::optional<DType> dtype_of_scalar_type_number(int64_t n) {
  switch (n) {
    case 0: return DType::UInt8;
    case 1: return DType::Int8;
    case 2: return DType::Int16;
    case 3: return DType::Int32;
    case 4: return DType::Int64;
    case 5: return DType::Float16;
    case 6: return DType::Float32;
    case 7: return DType::Float64;
    case 9: return DType::Complex64;
    case 10: return DType::Complex128;
    case 11: return DType::Bool;
    case 15: return DType::BFloat16;
    default: return std::nullopt;
  }
}


int64_t scalar_type_number(DType dtype) {
  for (int64_t n = 0; n <= 15; ++n)
    if (dtype_of_scalar_type_number(n) == dtype) return n;
  throw Error(ErrorCode::kInternal, "no PyTorch ScalarType number for " + std::string(name(dtype)));
}

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
      if (base == TypeKind::kScalarType) {  // "ScalarType? dtype=4": PyTorch's enum number
        if (auto dtype = dtype_of_scalar_type_number(std::get<int64_t>(d.value))) return IValue(*dtype);
      }
      return std::nullopt;  // a Layout by number, or a ScalarType with no DType here
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
