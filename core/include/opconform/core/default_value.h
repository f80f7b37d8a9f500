// The value of a schema argument's default as an IValue ("Scalar alpha=1" -> 1, "int[] dim=[]"
// -> [], "ScalarType? dtype=None" -> None), for callers that fill in omitted arguments.
#pragma once

#include <optional>

#include "opconform/core/ivalue.h"
#include "opconform/core/schema.h"

namespace opconform {

// A ScalarType given by PyTorch's enum number ("ScalarType? dtype=4") is that DType (4: int64).
// nullopt when the argument has no default, or one that has no IValue form here (a Layout by
// number, a ScalarType number with no DType, such as 8 ComplexHalf).
std::optional<IValue> default_ivalue(const Argument& argument);

// PyTorch's ScalarType numbers (c10/core/ScalarType.h): the DType of one (nullopt for numbers
// with no DType here, such as 8 ComplexHalf), and the number of a DType.
std::optional<DType> dtype_of_scalar_type_number(int64_t number);
int64_t scalar_type_number(DType dtype);

}  // namespace opconform
