#include "opconform/core/dtype.h"

#include <array>

namespace opconform {

std::string_view name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s.starts_with("torch.")) s.remove_prefix(6);
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name(static_cast<DType>(i)) == s) return static_cast<DType>(i);
  }
  struct Alias { std::string_view alias; DType dtype; };
  static constexpr Alias aliases[] = {
      {"float", DType::Float32},   {"double", DType::Float64},   {"half", DType::Float16},
      {"long", DType::Int64},      {"int", DType::Int32},        {"short", DType::Int16},
      {"byte", DType::UInt8},      {"char", DType::Int8},        {"cfloat", DType::Complex64},
      {"cdouble", DType::Complex128}, {"f16", DType::Float16},   {"bf16", DType::BFloat16},
      {"f32", DType::Float32},     {"f64", DType::Float64},      {"i64", DType::Int64},
      {"i32", DType::Int32},       {"u8", DType::UInt8},
  };
  for (const auto& a : aliases) {
    if (a.alias == s) return a.dtype;
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& out, DType t) { return out << name(t); }

DType to_real(DType t) {
  if (t == DType::Complex64) return DType::Float32;
  if (t == DType::Complex128) return DType::Float64;
  return t;
}

DType to_complex(DType t) {
  if (t == DType::Float64 || t == DType::Complex128) return DType::Complex128;
  return DType::Complex64;
}

// PyTorch's promotion table (c10/core/ScalarType.cpp, _promoteTypesLookup) for these 12 types.
DType promote_types(DType a, DType b) {
  using D = DType;
  constexpr D b1 = D::Bool, u1 = D::UInt8, i1 = D::Int8, i2 = D::Int16, i4 = D::Int32,
              i8 = D::Int64, f2 = D::Float16, bf = D::BFloat16, f4 = D::Float32, f8 = D::Float64,
              c4 = D::Complex64, c8 = D::Complex128;
  static constexpr std::array<std::array<D, kNumDTypes>, kNumDTypes> table = {{
      /*        b1  u1  i1  i2  i4  i8  f2  bf  f4  f8  c4  c8 */
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8, c4, c8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8, c4, c8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8, c4, c8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8, c4, c8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, c8, c8},
      /* c4 */ {c4, c4, c4, c4, c4, c4, c4, c4, c4, c8, c4, c8},
      /* c8 */ {c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8},
  }};
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

}  // namespace opconform
