#include "opconform/conformance/case_spec.h"

namespace opconform::conformance {

GenerateSpec case_spec(const std::string& op, DType dtype, int samples) {
  GenerateSpec spec;
  spec.count = samples;
  spec.dtypes = {dtype};
  // FNV-1a of "op/dtype": the same seed with every standard library (std::hash is not).
  uint64_t h = 14695981039346656037ull;
  for (char c : op + "/" + std::string(name(dtype))) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  spec.seed = h | 1;
  spec.requires_grad = true;
  // The large tier, sparsely: the main job checks 1,624 cases with clarity-first kernels, and a
  // large sample costs as much as hundreds of small ones (measured in bench/README.md).
  spec.large_percent = kCaseLargePercent;
  spec.large_max_numel = kCaseLargeMaxNumel;
  return spec;
}

}  // namespace opconform::conformance
