// The generation spec of one conformance case (op x dtype): what `opconform run` / `check` and
// the reference's own conformance test draw samples from.
//
// The seed of each (op, dtype) is fixed (FNV-1a of both), so runs repeat; OPCONFORM_SEED (or the
// CLI's --seed) picks another for every case.
#pragma once
#include <string>

#include "opconform/conformance/generate.h"
#include "opconform/core/dtype.h"

namespace opconform::conformance {

// The large tier of a case: a few of its samples (GenerateSpec's default is 12%, for opcheck's
// own runs), capped lower than GenerateSpec's 2^18 elements. `--large-percent` and
// `--large-max-numel` override both.
inline constexpr int kCaseLargePercent = 4;
inline constexpr int64_t kCaseLargeMaxNumel = int64_t{1} << 14;

// `samples` samples of `dtype` whose floating inputs require grad (so gradcheck runs), with the
// case's fixed seed and the sparse large tier above.
GenerateSpec case_spec(const std::string& op, DType dtype, int samples);

}  // namespace opconform::conformance
